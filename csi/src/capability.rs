//! Mirrors how both sidecars turn Kubernetes access modes into CSI volume capabilities
//! (external-provisioner's getVolumeCapabilities in pkg/controller/controller.go, and
//! external-attacher's GetVolumeCapabilities in pkg/controller/util.go).

use proto::csi::v1 as csi;
use proto::csi::v1::volume_capability::{AccessMode, AccessType, BlockVolume, MountVolume, access_mode::Mode};

/// The CSI access mode of one Kubernetes access mode. `ReadWriteOncePod` is `SINGLE_NODE_WRITER`:
/// the driver does not offer SINGLE_NODE_MULTI_WRITER, and Kubernetes itself keeps the pod single.
pub fn csi_access_mode(mode: &str) -> Option<Mode> {
    match mode {
        "ReadWriteOnce" | "ReadWriteOncePod" => Some(Mode::SingleNodeWriter),
        "ReadOnlyMany" => Some(Mode::MultiNodeReaderOnly),
        "ReadWriteMany" => Some(Mode::MultiNodeMultiWriter),
        _ => None,
    }
}

/// The one access mode a PV's set of modes is published with (ControllerPublishVolume and
/// NodeStage/Publish take a single capability): the most permissive one, as the attacher picks it.
pub fn single_access_mode(modes: &[String]) -> Option<Mode> {
    let has = |m: &str| modes.iter().any(|x| x == m);
    if has("ReadWriteMany") {
        Some(Mode::MultiNodeMultiWriter)
    } else if has("ReadOnlyMany") && !has("ReadWriteOnce") && !has("ReadWriteOncePod") {
        Some(Mode::MultiNodeReaderOnly)
    } else if has("ReadWriteOnce") || has("ReadWriteOncePod") {
        Some(Mode::SingleNodeWriter)
    } else if has("ReadOnlyMany") {
        Some(Mode::MultiNodeReaderOnly)
    } else {
        None
    }
}

/// A capability of `mode`: raw block for `volumeMode: Block`, else a filesystem of `fs_type`
/// mounted with `mount_flags`.
pub fn capability(mode: Mode, block: bool, fs_type: &str, mount_flags: &[String]) -> csi::VolumeCapability {
    let access_type = if block {
        AccessType::Block(BlockVolume {})
    } else {
        AccessType::Mount(MountVolume { fs_type: fs_type.to_string(), mount_flags: mount_flags.to_vec(), volume_mount_group: String::new() })
    };
    csi::VolumeCapability { access_type: Some(access_type), access_mode: Some(AccessMode { mode: mode as i32 }) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_mode_table() {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let cases = [
            (s(&["ReadWriteOnce"]), Some(Mode::SingleNodeWriter)),
            (s(&["ReadWriteOncePod"]), Some(Mode::SingleNodeWriter)),
            (s(&["ReadOnlyMany"]), Some(Mode::MultiNodeReaderOnly)),
            (s(&["ReadWriteOnce", "ReadOnlyMany"]), Some(Mode::SingleNodeWriter)),
            (s(&["ReadWriteMany", "ReadWriteOnce"]), Some(Mode::MultiNodeMultiWriter)),
            (s(&[]), None),
            (s(&["Bogus"]), None),
        ];
        for (modes, want) in cases {
            assert_eq!(single_access_mode(&modes), want, "{modes:?}");
        }
        assert_eq!(csi_access_mode("ReadWriteMany"), Some(Mode::MultiNodeMultiWriter));
        assert_eq!(csi_access_mode("Bogus"), None);
    }

    #[test]
    fn block_or_mount() {
        let c = capability(Mode::SingleNodeWriter, false, "ext4", &["noatime".to_string()]);
        assert!(matches!(c.access_type, Some(AccessType::Mount(ref m)) if m.fs_type == "ext4" && m.mount_flags == ["noatime"]));
        let c = capability(Mode::SingleNodeWriter, true, "ext4", &[]);
        assert!(matches!(c.access_type, Some(AccessType::Block(_))));
    }
}
