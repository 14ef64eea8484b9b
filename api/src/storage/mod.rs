//! Mirrors pkg/apis/storage: the storage.k8s.io/v1 kinds — StorageClass, CSIDriver, CSINode,
//! VolumeAttachment — their defaults ([`v1::defaults`]), their validation ([`validation`]) and
//! the default-class rule every component shares ([`util`]).

pub mod util;
pub mod v1;
pub mod validation;
