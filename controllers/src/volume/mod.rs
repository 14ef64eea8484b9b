//! Mirrors pkg/controller/volume: the controllers of persistent storage.
//!
//! - [`persistentvolume`]: the binder (`persistentvolume-binder`), which binds claims to volumes
//!   — a matching existing volume, or one an external provisioner makes for the claim's class —
//!   and releases and reclaims volumes whose claims are gone.
//! - [`attachdetach`]: attaches the CSI volumes of scheduled pods to their nodes (VolumeAttachments
//!   for the drivers' external attachers) and detaches them once the nodes have unmounted them.
//! - [`pvcprotection`] and [`pvprotection`]: hold a deleted claim while a pod uses it, and a
//!   deleted volume while it is bound, by their finalizers.
//!
//! How a dynamically provisioned volume comes to a pod, across the components:
//! 1. A claim is created (admission gives it the default class, and the protection finalizer).
//! 2. The binder finds no volume for it. With an Immediate class it asks the class's provisioner
//!    at once (`volume.kubernetes.io/storage-provisioner`); with WaitForFirstConsumer it waits
//!    until the scheduler, placing the claim's first pod, writes `volume.kubernetes.io/selected-node`.
//! 3. The external provisioner (the `csi` crate) makes the volume and a PersistentVolume pre-bound
//!    to the claim; the binder completes the binding on both sides.
//! 4. The scheduler binds the pod; the attach-detach controller creates the VolumeAttachment; the
//!    external attacher attaches it; the controller reports it in the node's `volumesAttached`;
//!    the node agent stages and publishes it for the pod.
//! 5. When the pod goes, the node agent unmounts it and drops it from `volumesInUse`; the
//!    attach-detach controller deletes the VolumeAttachment. When the claim goes (once no pod
//!    uses it), the binder releases the volume and, with reclaim policy Delete, the provisioner
//!    deletes it.

pub mod attachdetach;
pub mod persistentvolume;
pub mod pvcprotection;
pub mod pvprotection;
