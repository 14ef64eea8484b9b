//! Mirrors pkg/registry/storage: the resources of `storage.k8s.io/v1` — StorageClasses (how
//! volumes are made), CSIDrivers (what a driver needs), CSINodes (which drivers each node has)
//! and VolumeAttachments (a volume attached to a node), one folder each. All are cluster-scoped.

pub mod csidriver;
pub mod csinode;
pub mod storageclass;
pub mod volumeattachment;
