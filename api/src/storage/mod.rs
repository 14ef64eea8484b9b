//! Mirrors pkg/apis/storage: the storage.k8s.io/v1 kinds — StorageClass, CSIDriver, CSINode,
//! VolumeAttachment — their defaults ([`v1::defaults`]), their validation ([`validation`]) and
//! the default-class rule every component shares ([`util`]), and the names of a CSI volume the
//! attach-detach controller and the kubelet share ([`csi`]).

pub mod csi;
pub mod util;
pub mod v1;
pub mod validation;
