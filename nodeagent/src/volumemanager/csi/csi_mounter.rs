//! Mirrors pkg/volume/csi/csi_mounter.go: SetUp (NodePublishVolume at the pod's volume
//! directory) and TearDown (NodeUnpublishVolume), with the `vol_data.json` that lets a teardown
//! find the driver and the volume again after the pod object is gone (or the agent restarted).
//!
//! ```text
//! <root>/pods/<uid>/volumes/kubernetes.io~csi/<pv>/mount           target_path: what the containers bind-mount
//! <root>/pods/<uid>/volumes/kubernetes.io~csi/<pv>/vol_data.json   {specVolID, volumeHandle, driverName, nodeName, attachmentID, volumeLifecycleMode}
//! ```

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use proto::csi::v1 as csi;

use super::csi_attacher::remove_if_exists;
use super::csi_client::{CsiClient, NodeCapabilities, VolumeArgs};
use super::{LOG_PREFIX, PLUGIN_DIR_NAME, VOL_DATA_FILE_NAME, VolData};
use crate::error::{Error, Result};
use crate::kubelet::getters;
use crate::volumemanager::mount;

/// `<root>/pods/<uid>/volumes/kubernetes.io~csi/<pv>/mount` (kubelet's GetPath).
pub(crate) fn target_path(root: &Path, pod_uid: &str, pv_name: &str) -> PathBuf {
    getters::pod_volume_dir(root, pod_uid, PLUGIN_DIR_NAME, pv_name).join("mount")
}

/// Whether the volume is mounted read-only: the pod's `persistentVolumeClaim.readOnly`, or a PV
/// that can only ever be read (`accessModes: [ReadOnlyMany]`).
pub(crate) fn read_only(claim_read_only: bool, pv_access_modes: &[String]) -> bool {
    claim_read_only || (!pv_access_modes.is_empty() && pv_access_modes.iter().all(|m| m == "ReadOnlyMany"))
}

/// The CSI access mode for a PV's first access mode (kubelet's asCSIAccessModeV1): with a driver
/// that has SINGLE_NODE_MULTI_WRITER, ReadWriteOnce and ReadWriteOncePod get the two precise
/// single-node modes; otherwise both are SINGLE_NODE_WRITER.
pub(crate) fn csi_access_mode(access_mode: &str, single_node_multi_writer: bool) -> csi::volume_capability::access_mode::Mode {
    use csi::volume_capability::access_mode::Mode;
    match (access_mode, single_node_multi_writer) {
        ("ReadWriteOnce", true) => Mode::SingleNodeMultiWriter,
        ("ReadWriteOncePod", true) => Mode::SingleNodeSingleWriter,
        ("ReadWriteOnce" | "ReadWriteOncePod", false) => Mode::SingleNodeWriter,
        ("ReadOnlyMany", _) => Mode::MultiNodeReaderOnly,
        ("ReadWriteMany", _) => Mode::MultiNodeMultiWriter,
        _ => Mode::Unknown,
    }
}

/// A filesystem volume capability: `fsType` and the PV's mount options, in `mode`.
pub(crate) fn mount_capability(fs_type: &str, mount_options: &[String], mode: csi::volume_capability::access_mode::Mode) -> csi::VolumeCapability {
    use csi::volume_capability::{AccessMode, AccessType, MountVolume};
    csi::VolumeCapability {
        access_mode: Some(AccessMode { mode: mode as i32 }),
        access_type: Some(AccessType::Mount(MountVolume {
            fs_type: fs_type.to_string(),
            mount_flags: mount_options.to_vec(),
            volume_mount_group: String::new(),
        })),
    }
}

/// SetUpAt: the parent directory and `vol_data.json`, then NodePublishVolume. The driver creates
/// and mounts `target` itself, as the CSI spec says.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn set_up_at(
    client: &CsiClient,
    _caps: NodeCapabilities,
    args: &VolumeArgs,
    staging: Option<&Path>,
    target: &Path,
    read_only: bool,
    data: VolData,
    secrets: HashMap<String, String>,
) -> Result<()> {
    let parent = target.parent().map(Path::to_path_buf).unwrap_or_default();
    let p = parent.clone();
    super::super::run_blocking(parent.clone(), move || {
        std::fs::DirBuilder::new()
            .recursive(true)
            .create(&p)
            .map_err(|e| Error::io(&p, e))?;
        data.save(&p)
    })
    .await?;
    client.node_publish_volume(args, staging, target, read_only, secrets).await
}

/// TearDownAt: NodeUnpublishVolume, then what the agent itself wrote (the target directory if the
/// driver left it, empty and unmounted; `vol_data.json`; the volume directory).
pub(crate) async fn tear_down_at(client: &CsiClient, volume_handle: &str, target: &Path) -> Result<()> {
    client.node_unpublish_volume(volume_handle, target).await?;
    let target = target.to_path_buf();
    let dir = target.parent().map(Path::to_path_buf).unwrap_or_default();
    super::super::run_blocking(dir.clone(), move || {
        if target.exists() && mount::is_mount_point(&target)? {
            return Err(Error::NotReady(format!(
                "{LOG_PREFIX}: Unmounter.TearDownAt failed: {} is still mounted after NodeUnpublishVolume",
                target.display()
            )));
        }
        remove_if_exists(&target, |p| std::fs::remove_dir(p))?;
        remove_if_exists(&dir.join(VOL_DATA_FILE_NAME), |p| std::fs::remove_file(p))?;
        remove_if_exists(&dir, |p| std::fs::remove_dir(p))
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn target_path_layout() {
        assert_eq!(
            target_path(Path::new("/var/lib/kubelab"), "uid-1", "pvc-123"),
            PathBuf::from("/var/lib/kubelab/pods/uid-1/volumes/kubernetes.io~csi/pvc-123/mount")
        );
    }

    #[test]
    fn read_only_table() {
        let modes = |m: &[&str]| m.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let cases: &[(bool, &[&str], bool)] = &[
            (false, &["ReadWriteOnce"], false),
            (true, &["ReadWriteOnce"], true),
            (false, &["ReadOnlyMany"], true),
            (false, &["ReadOnlyMany", "ReadWriteOnce"], false),
            (false, &["ReadWriteMany"], false),
            (false, &[], false),
            (true, &[], true),
        ];
        for (claim, pv, want) in cases {
            assert_eq!(read_only(*claim, &modes(pv)), *want, "claim {claim} pv {pv:?}");
        }
    }

    #[test]
    fn access_mode_table() {
        use csi::volume_capability::access_mode::Mode;
        let cases = [
            ("ReadWriteOnce", false, Mode::SingleNodeWriter),
            ("ReadWriteOnce", true, Mode::SingleNodeMultiWriter),
            ("ReadWriteOncePod", false, Mode::SingleNodeWriter),
            ("ReadWriteOncePod", true, Mode::SingleNodeSingleWriter),
            ("ReadOnlyMany", false, Mode::MultiNodeReaderOnly),
            ("ReadWriteMany", true, Mode::MultiNodeMultiWriter),
            ("Bogus", false, Mode::Unknown),
        ];
        for (mode, snmw, want) in cases {
            assert_eq!(csi_access_mode(mode, snmw), want, "{mode} {snmw}");
        }
        let cap = mount_capability("ext4", &["noatime".into()], Mode::SingleNodeWriter);
        assert_eq!(cap.access_mode.map(|m| m.mode), Some(1));
        match cap.access_type {
            Some(csi::volume_capability::AccessType::Mount(m)) => {
                assert_eq!((m.fs_type.as_str(), m.mount_flags), ("ext4", vec!["noatime".to_string()]));
            }
            other => panic!("{other:?}"),
        }
    }
}
