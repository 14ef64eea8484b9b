//! Mirrors k8s.io/api/core/v1's well_known_labels.go, well_known_taints.go,
//! annotation_key_constants.go and the named defaults of types.go: the names every component
//! must spell the same way.

// types.go: values defaulting fills in.

/// `v1.DefaultTerminationGracePeriodSeconds`.
pub const DEFAULT_TERMINATION_GRACE_PERIOD_SECONDS: i64 = 30;
/// `v1.DefaultSchedulerName`: the scheduler that picks up pods naming no other.
pub const DEFAULT_SCHEDULER_NAME: &str = "default-scheduler";
/// `v1.TerminationMessagePathDefault`.
pub const TERMINATION_MESSAGE_PATH_DEFAULT: &str = "/dev/termination-log";
/// 0644: the mode of files projected from ConfigMaps, Secrets, the downward API and projections
/// (`v1.ConfigMapVolumeSourceDefaultMode` and its three siblings, all the same).
pub const DEFAULT_VOLUME_MODE: i32 = 0o644;
/// `v1.FinalizerKubernetes`: the finalizer the namespace controller removes once a namespace is
/// empty.
pub const FINALIZER_KUBERNETES: &str = "kubernetes";

// well_known_labels.go.

/// `v1.LabelMetadataName`: the namespace label the API server keeps equal to the name, so that a
/// namespace selector can pick namespaces by name.
pub const LABEL_METADATA_NAME: &str = "kubernetes.io/metadata.name";

// well_known_taints.go: the taints the node lifecycle controller puts on a node from its
// conditions (and on `spec.unschedulable`).

/// The node's Ready condition is False.
pub const TAINT_NODE_NOT_READY: &str = "node.kubernetes.io/not-ready";
/// The node's Ready condition is Unknown: the controller has not heard from it.
pub const TAINT_NODE_UNREACHABLE: &str = "node.kubernetes.io/unreachable";
/// The node is cordoned (`spec.unschedulable`).
pub const TAINT_NODE_UNSCHEDULABLE: &str = "node.kubernetes.io/unschedulable";
pub const TAINT_NODE_MEMORY_PRESSURE: &str = "node.kubernetes.io/memory-pressure";
pub const TAINT_NODE_DISK_PRESSURE: &str = "node.kubernetes.io/disk-pressure";
pub const TAINT_NODE_PID_PRESSURE: &str = "node.kubernetes.io/pid-pressure";
pub const TAINT_NODE_NETWORK_UNAVAILABLE: &str = "node.kubernetes.io/network-unavailable";

// annotation_key_constants.go.

/// `v1.MirrorPodAnnotationKey`: a pod carrying it is the API server's copy of a node's static
/// pod, and its value is the static pod's config hash.
pub const MIRROR_POD_ANNOTATION_KEY: &str = "kubernetes.io/config.mirror";
