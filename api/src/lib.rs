//! Mirrors Kubernetes' pkg/apis/{core,apps,batch,policy,rbac,coordination,discovery,certificates,storage} (defaulting, validation),
//! pkg/api/v1/pod and pkg/kubelet/types (pod helpers): what the API types mean, shared by every
//! component.
//!
//! # Tour
//!
//! The types themselves are k8s-openapi's; this crate is what Kubernetes attaches to them: what
//! an unset field means, what makes an object valid, and the small questions every component
//! asks of a pod. It does no I/O and knows no server: plain functions over objects, usable from
//! the API server, the node agent, the scheduler and the controllers alike.
//!
//! ## The flow
//!
//! An object is first defaulted, then validated:
//! 1. **Defaulting** ([`core::v1::defaults`]): `set_defaults_pod`, `set_defaults_namespace`,
//!    `set_defaults_node`, `set_defaults_secret`, `set_defaults_service`, `set_defaults_endpoints`
//!    fill in what the client left out. The API server
//!    runs them on every write before anything else; the node agent runs `set_defaults_pod` on
//!    every static pod it reads from a manifest (kubelet's config/common.go does the same).
//!    The workloads' ([`apps::v1::defaults`], [`batch::v1::defaults`]) fill in their own fields
//!    (replicas, strategies, history limits, backoff) and default their pod template's spec
//!    with `set_defaults_pod_template_spec`; the RBAC bindings ([`rbac::v1::defaults`]) the API
//!    groups their writer left out.
//! 2. **Validation** ([`core::validation`], [`apps::validation`], [`batch::validation`],
//!    [`policy::validation`], [`rbac::validation`], [`coordination::validation`],
//!    [`discovery::validation`], [`certificates::validation`] — a CertificateSigningRequest's
//!    request parsed and its signature checked: [`certificates::helpers::parse_csr`]): each kind's
//!    `validate_*` returns every problem as a [`apimachinery::validation::FieldError`]
//!    (Kubernetes' `field.ErrorList`), empty when the object is valid. The API server turns the
//!    list into a 422 `Status` at its edge; the node agent refuses a static pod manifest with it
//!    (`validate_pod_create`, as kubelet does).
//!
//! What the API server adds on create beyond defaulting — mutating admission (a service account,
//! a priority, the 300-second tolerations) and the strategy's `PrepareForCreate` (a Pending
//! status with its QoS class) — is the API server's own, not this crate's: a static pod gets none
//! of it on its node, and its mirror pod gets it from the API server.
//!
//! Beside the flow, for every component:
//! - [`core::v1::helper::qos`]: `compute_pod_qos`, the pod's QoS class — written into
//!   `status.qosClass` by the API server, and deciding the pod's cgroup and eviction order on
//!   the node.
//! - [`core::v1::helper::node_affinity`]: `match_required_node_affinity`, whether a node
//!   satisfies a pod's nodeSelector and required node affinity — the scheduler's NodeAffinity
//!   filter and the DaemonSet controller's choice of nodes.
//! - [`pod::util`]: a pod's UID, full name, restart policy, init and app containers, whether it
//!   is terminal, its priority — used by the scheduler, the controllers and the node agent.
//! - [`pod::kubelet_types`]: where a pod came from (config source, hash and mirror annotations),
//!   whether it is static, a mirror, or critical.
//! - [`resource`]: requests (defaulted from limits) and limits as numbers.
//! - [`batch::cron`]: the CronJob schedule syntax, parsed once and asked for its next
//!   activation: CronJob validation parses it here; a CronJob controller schedules by it.
//! - [`core::v1::well_known`] and [`scheduling`]: the names every component must spell alike
//!   (taints, labels, annotations, defaults, system priority classes).
//!
//! ## Public surface
//!
//! - `core::v1::defaults`: `set_defaults_pod`, `set_defaults_pod_spec`,
//!   `set_defaults_pod_template_spec`, `set_defaults_namespace`,
//!   `set_defaults_node`, `set_defaults_secret`, `default_image_pull_policy`.
//! - `core::v1::helper::qos`: `PodQOSClass` (with `as_str`), `compute_pod_qos`;
//!   `core::v1::helper::node_affinity`: `match_required_node_affinity`,
//!   `node_selector_term_matches`, `validate_node_selector_term`.
//! - `core::v1::well_known`: the core/v1 constants; `scheduling`: `SYSTEM_CRITICAL_PRIORITY`,
//!   `SYSTEM_CLUSTER_CRITICAL`, `SYSTEM_NODE_CRITICAL`.
//! - `core::validation`: `validate_object_meta`, `validate_pod_create`, `validate_pod_update`,
//!   `POD_UPDATE_FORBIDDEN`, `validate_node`, `validate_node_update`, `validate_namespace`,
//!   `validate_config_map`, `validate_secret`, `validate_secret_update`,
//!   `validate_service_account`, `validate_event_create`, and the checks the workload kinds
//!   share: `validate_nonnegative_field`, `validate_immutable_field`, `validate_label_selector`;
//!   `coordination::validation`: `validate_lease`.
//! - `apps::v1::defaults`: `set_defaults_deployment`, `set_defaults_replica_set`,
//!   `set_defaults_daemon_set`, `set_defaults_stateful_set`, `DEFAULT_REVISION_HISTORY_LIMIT`,
//!   `DEFAULT_PROGRESS_DEADLINE_SECONDS`.
//! - `apps::validation`: `validate_deployment`, `validate_replica_set`, `validate_daemon_set`,
//!   `validate_stateful_set`, `validate_controller_revision` and each one's `*_update`,
//!   `STATEFUL_SET_UPDATE_FORBIDDEN`, `validate_positive_int_or_percent`,
//!   `is_not_more_than_100_percent`, `validate_pod_template_labels_match`.
//! - `batch::v1::defaults`: `set_defaults_job`, `set_defaults_cron_job`, `DEFAULT_BACKOFF_LIMIT`;
//!   `batch::validation`: `validate_job`, `validate_job_update`, `validate_cron_job`,
//!   `validate_cron_job_update`; `batch::cron`: `Schedule` (`parse`, `next_after`,
//!   `next_after_in`).
//! - `policy::validation`: `validate_pod_disruption_budget`,
//!   `validate_pod_disruption_budget_update`.
//! - `rbac`: `GROUP_NAME` and the subject kinds; `rbac::v1::defaults`:
//!   `set_defaults_role_binding`, `set_defaults_cluster_role_binding`, `set_defaults_subject`;
//!   `rbac::validation`: `validate_role`, `validate_cluster_role`, `validate_role_binding`,
//!   `validate_cluster_role_binding` and each one's `*_update`, `validate_policy_rule`,
//!   `validate_role_binding_subject`, `validate_rbac_name`; `rbac::helpers`: `subjects_strings`.
//! - `pod` (re-exporting `pod::util` and `pod::kubelet_types`): `uid`, `full_name`,
//!   `restart_policy`, `init_containers`, `app_containers`, `is_restartable_init_container`,
//!   `is_pod_phase_terminal`, `is_pod_terminal`, `pod_priority`, `is_static_pod`, `is_mirror_pod`, `is_critical_pod`,
//!   `is_critical_pod_based_on_priority`, and the `CONFIG_*_ANNOTATION_KEY` and `*_SOURCE`
//!   constants.
//! - `resource`: `effective_requests`, `limits`, `parsed`.
//! - Storage: `core::v1::persistentvolume_defaults`: `set_defaults_persistent_volume` (Retain,
//!   Filesystem), `set_defaults_persistent_volume_claim` (Filesystem);
//!   `core::validation::persistentvolume`: `validate_persistent_volume`,
//!   `validate_persistent_volume_claim` and their `*_update` and `*_status_update`,
//!   `PVC_SPEC_IMMUTABLE`, `validate_csi_driver_name`; `core::v1::helper::persistentvolume`:
//!   `get_access_modes_as_string`, `get_persistent_volume_class`,
//!   `get_persistent_volume_claim_class`, `persistent_volume_claim_has_class`;
//!   `storage::v1::defaults`: `set_defaults_storage_class` (Delete, Immediate),
//!   `set_defaults_csi_driver`; `storage::validation`: `validate_storage_class`,
//!   `validate_csi_driver`, `validate_csi_node`, `validate_volume_attachment` and each one's
//!   `*_update`; `storage::util`: `is_default_annotation`, `get_default_class` (the newest of
//!   several defaults), `IS_DEFAULT_STORAGE_CLASS_ANNOTATION`; `storage::csi`: a CSI volume's
//!   `unique_volume_name` and its VolumeAttachment's `attachment_name` (the attach-detach
//!   controller and the node agent must agree on both), `sha256_hex`.
//!
//! ## Implementation caveats
//!
//! - Quantities are not canonicalized (`SetDefaults_ResourceList` rounds to milli-units and the
//!   serializer rewrites `1000m` as `1`); they are kept as written.
//! - Pod-level resources are not defaulted from the containers' (`defaultPodRequests`,
//!   `defaultPodLimits`, `defaultHugePagePodLimits`), though `compute_pod_qos` honours them (taking
//!   a missing pod-level request from the pod-level limit).
//! - Ephemeral containers are not defaulted: they arrive only through the `ephemeralcontainers`
//!   subresource, never on create.
//! - Legacy in-tree volume defaults (iSCSI, RBD, AzureDisk, ScaleIO…) are not applied.
//! - A Job's generated selector is not checked against its UID (ValidateGeneratedSelector): the
//!   API server generates it; Kubernetes re-checks it. Pod failure policies, success policies and
//!   `maxFailedIndexes` are not validated.
//! - A CronJob's `timeZone` is checked against `/usr/share/zoneinfo` (the one file-system read
//!   here) and `Schedule` computes activations in UTC or a fixed offset only: named zones and
//!   their daylight-saving changes need the tz database, which this crate does not parse.
//! - A StatefulSet's `volumeClaimTemplates` and `serviceName` are not validated; the
//!   StatefulSet `maxUnavailable` (alpha) is not defaulted.
//! - A ClusterRole's aggregation selectors are validated by conversion alone (one error per
//!   selector; see [`rbac::validation`]).
//! - Updates check the spec rules listed under each `*_update`; metadata updates (immutable
//!   name, namespace, UID) are checked by the API server, as for the core kinds.
//! - Validation checks the parts of each kind that kubelab enforces (each `validate_*` says
//!   which), on the object as JSON; Kubernetes checks every field of the typed object.
//! - Volumes: a PersistentVolume's sources other than `csi`, `hostPath`, `nfs` and `local` are
//!   checked for being the only source, not field by field; node affinity terms are checked for
//!   being present, not parsed; a claim's `dataSource`/`dataSourceRef` and
//!   `volumeAttributesClassName` are not validated; a bound claim may not shrink below its
//!   previous request (RecoverFromExpansionFailure's lower bound of `status.capacity` is not
//!   modelled). A CSINode driver's allocatable count may change.

pub mod apps;
pub mod authorization;
pub mod batch;
pub mod certificates;
pub mod coordination;
pub mod core;
pub mod discovery;
pub mod pod;
pub mod policy;
pub mod rbac;
pub mod resource;
pub mod scheduling;
pub mod storage;
