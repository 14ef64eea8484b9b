//! # csi — kubelab's CSI driver (hostpath) and its sidecars
//!
//! Persistent volumes in Kubernetes are made by storage drivers outside the cluster's core,
//! speaking the Container Storage Interface (gRPC on a unix socket, [`proto::csi::v1`]), with
//! small "sidecar" programs that turn API objects into CSI calls. This crate is one such driver,
//! `hostpath.csi.kubelab.io` (kubernetes-csi/csi-driver-host-path: a volume is a directory on the
//! node's disk), with the three sidecars it is deployed with, all in one process
//! (`kubelab csi-hostpath`, [`run()`]) per node. It is a client of the API server like the node
//! agent, and links none of the other components.
//!
//! The flow of one claim, from the driver's side:
//! 1. **Registration** ([`registrar`], node-driver-registrar): the registrar serves the kubelet's
//!    plugin registration API on `<kubelet root>/plugins_registry/<driver>-reg.sock`; the node
//!    agent finds it, calls GetInfo and the driver's NodeGetInfo, and writes CSINode and the
//!    node's topology label `topology.hostpath.csi.kubelab.io/node`.
//! 2. **Provisioning** ([`provisioner`], external-provisioner in node-deployment mode): a claim
//!    the PV binder handed to this driver and the scheduler placed on this node (annotation
//!    `volume.kubernetes.io/selected-node`) becomes a CSI CreateVolume and a PV `pvc-<claim uid>`
//!    pinned to the node; the PV binder binds the two. A final refusal of the driver hands a
//!    WaitForFirstConsumer claim back to the scheduler (the annotation removed).
//! 3. **Creating** ([`hostpath::controller`]): CreateVolume makes `<state dir>/volumes/<id>`,
//!    idempotently by name, and records it in the state file ([`hostpath::state`]).
//! 4. **Attaching** ([`attacher`], external-attacher): the attach-detach controller's
//!    VolumeAttachment for this node becomes ControllerPublishVolume (which records the node) and
//!    `status.attached: true`.
//! 5. **Mounting** ([`hostpath::node`]): the node agent calls NodeStageVolume (bind-mount of the
//!    directory on the node-wide staging path) and NodePublishVolume (bind-mount of the staging
//!    path on the pod's volume directory, read-only by a remount when asked) — [`mount`].
//! 6. **Tearing down** in reverse: NodeUnpublish/NodeUnstage (unmount), the VolumeAttachment's
//!    deletion → ControllerUnpublishVolume, the claim's deletion → the PV released → DeleteVolume
//!    (refused while the volume is still attached, staged or published) and the PV deleted.
//!
//! [`connection`] holds the socket plumbing (a `unix://` endpoint, a server's listener, a
//! sidecar's channel, and [`connection::call`], which makes each sidecar's CSI call a span on
//! target `csi_sidecar` — not the node agent's `csi`, whose calls are steps of pods); [`capability`] the access-mode mapping both sidecars share.
//!
//! ## Implementation caveats
//! - Capacity is bookkeeping only: a volume is a plain directory, nothing stops it from growing
//!   past its size (no loop-mounted filesystem, no quota); CreateVolume only refuses a size
//!   larger than the whole filesystem. NodeGetVolumeStats and GetCapacity report the filesystem
//!   that holds the volumes, not the volume.
//! - Filesystem volumes only: no raw block volumes, snapshots, clones, expansion, ListVolumes or
//!   ephemeral inline volumes. `mount_flags` and `fsType` are accepted and ignored (a bind mount
//!   has no filesystem of its own).
//! - ControllerPublishVolume records the node and returns an empty publish context; a volume
//!   can only be attached to the node whose disk holds it.
//! - DeleteVolume refuses a volume the state file still shows attached, staged or published: a
//!   teardown the node agent never finished (its crash with the pod gone) keeps the volume until
//!   the paths are unpublished/unstaged by hand (or the state file is edited).
//! - The sidecars are kube-runtime controllers with a fixed retry delay ([`provisioner::RETRY`]),
//!   not client-go work queues with exponential backoff; StorageClasses and PVs are read from the
//!   API server when needed rather than from informer caches.
//! - The attacher passes its own node id to ControllerPublishVolume instead of reading the
//!   node's id from CSINode (one attacher per node, beside its driver, makes them the same); it
//!   puts no finalizer on the PV, and detaches without calling the driver when the PV is gone.
//! - An Immediate claim is taken for a node by a patch that carries the claim's resourceVersion;
//!   external-provisioner's random delay before competing for it is left out.
//! - No leader election, metrics, or secrets (`csi.storage.k8s.io/*-secret-*` parameters are
//!   dropped); the registrar only logs a failed registration instead of exiting.

pub mod attacher;
pub mod capability;
pub mod connection;
mod error;
pub mod hostpath;
pub mod mount;
pub mod provisioner;
pub mod registrar;
mod run;

pub use error::{Error, Result};
pub use run::{DEFAULT_KUBELET_ROOT_DIR, DEFAULT_STATE_DIR, Options, run};

/// The driver's name, as every part of kubelab knows it.
pub const DRIVER_NAME: &str = "hostpath.csi.kubelab.io";
/// The topology key of the node a volume lives on.
pub const TOPOLOGY_KEY: &str = "topology.hostpath.csi.kubelab.io/node";
/// GetPluginInfo's vendor version.
pub const VENDOR_VERSION: &str = env!("CARGO_PKG_VERSION");
