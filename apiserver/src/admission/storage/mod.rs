//! Mirrors plugin/pkg/admission/storage: the admission plugins of volumes and claims, one file
//! each — [`setdefault`] (DefaultStorageClass: a new claim that names no class gets the default
//! one) and [`storageobjectinuseprotection`] (StorageObjectInUseProtection: every new claim and
//! volume carries its protection finalizer, so it outlives the pods and claims that use it).

pub mod setdefault;
pub mod storageobjectinuseprotection;
