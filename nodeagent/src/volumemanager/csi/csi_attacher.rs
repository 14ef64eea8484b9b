//! Mirrors pkg/volume/csi/csi_attacher.go, its node half: WaitForAttach (the VolumeAttachment the
//! attach-detach controller created and the external attacher marked attached), MountDevice
//! (NodeStageVolume at the volume's global staging directory) and UnmountDevice
//! (NodeUnstageVolume, once no pod on the node uses the volume).
//!
//! ```text
//! <root>/plugins/kubernetes.io/csi/<driver>/<hex sha256(volumeHandle)>/globalmount   staging_target_path
//! <root>/plugins/kubernetes.io/csi/<driver>/<hex sha256(volumeHandle)>/vol_data.json {volumeHandle, driverName}
//! ```

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::storage::v1::{CSIDriver, VolumeAttachment};
use kube::Api;

use super::csi_client::{CsiClient, NodeCapabilities, VolumeArgs};
use super::{CSI_PLUGIN_NAME, VOL_DATA_FILE_NAME, VolData, sha256_hex};
use crate::error::{Error, Result};
use crate::volumemanager::mount;

/// The staging directory's last component (kubelet's globalMountInGlobalPath).
pub(crate) const GLOBAL_MOUNT: &str = "globalmount";

/// The VolumeAttachment of a volume on a node, named as the attach-detach controller names it.
pub(crate) use api::storage::csi::attachment_name;

/// `<root>/plugins/kubernetes.io/csi/<driver>/<hex sha256(volumeHandle)>/globalmount`: where a
/// staged volume is mounted once for every pod of the node (kubelet's makeDeviceMountPath).
pub(crate) fn staging_path(root: &Path, driver: &str, volume_handle: &str) -> PathBuf {
    root.join("plugins").join(CSI_PLUGIN_NAME).join(driver).join(sha256_hex(volume_handle)).join(GLOBAL_MOUNT)
}

/// Whether a driver's volumes need a VolumeAttachment (kubelet's skipAttach, inverted): a
/// CSIDriver with `attachRequired: false` says no; no CSIDriver, or the field unset, means yes.
pub(crate) fn attach_required(driver: Option<&CSIDriver>) -> bool {
    driver.and_then(|d| d.spec.attach_required).unwrap_or(true)
}

/// Where a VolumeAttachment stands (kubelet's verifyAttachmentStatus).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum AttachState {
    /// Attached: the external attacher's publish context (ControllerPublishVolume's answer).
    Attached(HashMap<String, String>),
    /// Not yet (or not created yet).
    Pending,
    /// The attacher reports an error: its message.
    Failed(String),
    /// Being deleted: waiting for it makes no sense.
    Deleting,
}

pub(crate) fn attach_state(attachment: Option<&VolumeAttachment>) -> AttachState {
    let Some(va) = attachment else { return AttachState::Pending };
    if va.metadata.deletion_timestamp.is_some() {
        return AttachState::Deleting;
    }
    let Some(status) = &va.status else { return AttachState::Pending };
    if status.attached {
        return AttachState::Attached(status.attachment_metadata.clone().unwrap_or_default().into_iter().collect());
    }
    match status.attach_error.as_ref().and_then(|e| e.message.clone()) {
        Some(message) => AttachState::Failed(message),
        None => AttachState::Pending,
    }
}

/// How often WaitForAttach reads the VolumeAttachment: first after [`ATTACH_POLL_INITIAL`], each
/// wait then twice the last, up to [`ATTACH_POLL_MAX`]. A node may only GET VolumeAttachments
/// (the node authorizer allows no list or watch of them), so the agent polls, as kubelet does
/// with its exponential backoff. The attach-detach controller and the attacher usually finish
/// within tens of milliseconds of the pod's binding: a fixed half second would add most of one
/// to every such pod's start (csi-bench measured +0.5 s).
pub(crate) const ATTACH_POLL_INITIAL: Duration = Duration::from_millis(10);
pub(crate) const ATTACH_POLL_MAX: Duration = Duration::from_millis(500);

/// WaitForAttach: `Ok(publish context)` once the VolumeAttachment `name` is attached, reading it
/// for at most `timeout`. Kubelet's messages: the attacher's own error, or
/// `timed out waiting for external-attacher of <driver> CSI driver to attach volume <handle>`.
pub(crate) async fn wait_for_attach(
    api: Api<VolumeAttachment>,
    name: &str,
    driver: &str,
    volume_handle: &str,
    timeout: Duration,
) -> Result<HashMap<String, String>> {
    let deadline = tokio::time::Instant::now() + timeout;
    let mut wait = ATTACH_POLL_INITIAL;
    loop {
        let attachment = api.get_opt(name).await.map_err(|e| {
            Error::NotReady(format!("volume {volume_handle} has GET error for volume attachment {name}: {e}"))
        })?;
        match attach_state(attachment.as_ref()) {
            AttachState::Attached(context) => return Ok(context),
            AttachState::Failed(message) => return Err(Error::NotReady(message)),
            AttachState::Deleting => return Err(Error::NotReady("volume attachment is being deleted".into())),
            AttachState::Pending => {}
        }
        if tokio::time::Instant::now() + wait > deadline {
            return Err(Error::NotReady(format!(
                "timed out waiting for external-attacher of {driver} CSI driver to attach volume {volume_handle}"
            )));
        }
        tokio::time::sleep(wait).await;
        wait = (wait * 2).min(ATTACH_POLL_MAX);
    }
}

/// MountDevice: `vol_data.json` beside the staging directory (kept even for drivers that do not
/// stage: UnmountDevice reads it), then NodeStageVolume unless the directory is already a mount or
/// the driver does not stage. Returns the staging path to give NodePublishVolume, `None` for a
/// driver without STAGE_UNSTAGE_VOLUME.
pub(crate) async fn mount_device(
    client: &CsiClient,
    caps: NodeCapabilities,
    root: &Path,
    driver: &str,
    args: &VolumeArgs,
    secrets: HashMap<String, String>,
) -> Result<Option<PathBuf>> {
    let staging = staging_path(root, driver, &args.volume_handle);
    let data = VolData::device(driver, &args.volume_handle);
    let dir = staging.clone();
    let already_staged = super::super::run_blocking(staging.clone(), move || {
        std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
        if let Some(parent) = dir.parent() {
            data.save(parent)?;
        }
        mount::is_mount_point(&dir)
    })
    .await?;
    if !caps.stage_unstage {
        return Ok(None);
    }
    if !already_staged {
        client.node_stage_volume(args, &staging, secrets).await?;
    }
    Ok(Some(staging))
}

/// UnmountDevice: NodeUnstageVolume (for a staging driver), then the staging directory and its
/// `vol_data.json` removed. Nothing to do when the volume was never staged here.
pub(crate) async fn unmount_device(client: &CsiClient, caps: NodeCapabilities, root: &Path, driver: &str, volume_handle: &str) -> Result<()> {
    let staging = staging_path(root, driver, volume_handle);
    let Some(data_dir) = staging.parent().map(Path::to_path_buf) else { return Ok(()) };
    if !tokio::fs::try_exists(&data_dir).await.unwrap_or(false) {
        return Ok(());
    }
    if caps.stage_unstage {
        client.node_unstage_volume(volume_handle, &staging).await?;
    }
    super::super::run_blocking(data_dir.clone(), move || {
        if staging.exists() && mount::is_mount_point(&staging)? {
            return Err(Error::NotReady(format!(
                "{}: attacher.UnmountDevice failed: {} is still mounted after NodeUnstageVolume",
                super::LOG_PREFIX,
                staging.display()
            )));
        }
        remove_if_exists(&staging, |p| std::fs::remove_dir(p))?;
        remove_if_exists(&data_dir.join(VOL_DATA_FILE_NAME), |p| std::fs::remove_file(p))?;
        remove_if_exists(&data_dir, |p| std::fs::remove_dir(p))
    })
    .await
}

/// Removes `path` with `remove`; already gone is fine.
pub(crate) fn remove_if_exists(path: &Path, remove: impl Fn(&Path) -> std::io::Result<()>) -> Result<()> {
    match remove(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::io(path, e)),
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::storage::v1::{CSIDriverSpec, VolumeAttachmentSpec, VolumeAttachmentStatus, VolumeError};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

    use super::*;

    #[test]
    fn attachment_names_are_kubernetes_ones() {
        // sha256("vol-1" + "hostpath.csi.kubelab.io" + "node-a"), as the controller computes it.
        let name = attachment_name("vol-1", "hostpath.csi.kubelab.io", "node-a");
        assert_eq!(name, format!("csi-{}", sha256_hex("vol-1hostpath.csi.kubelab.ionode-a")));
        assert_eq!(name.len(), 4 + 64);
        // A known vector: sha256("abc").
        assert_eq!(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    }

    #[test]
    fn staging_path_layout() {
        let p = staging_path(Path::new("/var/lib/kubelab"), "hostpath.csi.kubelab.io", "abc");
        assert_eq!(
            p,
            PathBuf::from(
                "/var/lib/kubelab/plugins/kubernetes.io/csi/hostpath.csi.kubelab.io/ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad/globalmount"
            )
        );
    }

    #[test]
    fn attach_required_table() {
        let driver = |v: Option<bool>| CSIDriver { spec: CSIDriverSpec { attach_required: v, ..Default::default() }, ..Default::default() };
        let cases = [(None, true), (Some(driver(None)), true), (Some(driver(Some(true))), true), (Some(driver(Some(false))), false)];
        for (d, want) in cases {
            assert_eq!(attach_required(d.as_ref()), want, "{d:?}");
        }
    }

    #[test]
    fn attach_state_table() {
        let va = |status: Option<VolumeAttachmentStatus>, deleting: bool| VolumeAttachment {
            metadata: ObjectMeta {
                deletion_timestamp: deleting.then_some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH)),
                ..Default::default()
            },
            spec: VolumeAttachmentSpec::default(),
            status,
        };
        let attached = VolumeAttachmentStatus {
            attached: true,
            attachment_metadata: Some([("device".to_string(), "/dev/x".to_string())].into()),
            ..Default::default()
        };
        let failed = VolumeAttachmentStatus {
            attach_error: Some(VolumeError { message: Some("rpc error: code = NotFound desc = no volume".into()), ..Default::default() }),
            ..Default::default()
        };
        let cases = [
            (None, AttachState::Pending),
            (Some(va(None, false)), AttachState::Pending),
            (Some(va(Some(VolumeAttachmentStatus::default()), false)), AttachState::Pending),
            (Some(va(Some(attached.clone()), false)), AttachState::Attached([("device".to_string(), "/dev/x".to_string())].into())),
            (Some(va(Some(failed), false)), AttachState::Failed("rpc error: code = NotFound desc = no volume".into())),
            (Some(va(Some(attached), true)), AttachState::Deleting),
        ];
        for (attachment, want) in cases {
            assert_eq!(attach_state(attachment.as_ref()), want, "{attachment:?}");
        }
    }
}
