//! Mirrors pkg/volume/csi/csi_plugin.go: the CSI volume plugin, which mounts a pod's
//! `persistentVolumeClaim` volume whose PersistentVolume is a CSI one, through the driver
//! registered on this node ([`csi_drivers_store`], filled by [`crate::pluginmanager`]).
//!
//! [`CsiPlugin::set_up`], for one volume of one pod, on every sync of the pod:
//! 1. **The volume spec** (kubelet's desired-state-of-world populator): the claim, which must be
//!    Bound, and its PersistentVolume, which must have `spec.csi`. From then on the volume is
//!    "in use" on the node (`status.volumesInUse`, [`CsiPlugin::volumes_in_use`]) under its unique
//!    name `kubernetes.io/csi/<driver>^<volumeHandle>`.
//! 2. Already published for this pod (its target is a mount point)? Done: kubelet's actual state
//!    of the world is, here, the mount table.
//! 3. **WaitForAttach** ([`csi_attacher`]): unless the driver's CSIDriver says
//!    `attachRequired: false`, the VolumeAttachment `csi-<sha256>` must be attached; its
//!    attachment metadata is the publish context.
//! 4. **MountDevice** ([`csi_attacher`]): NodeStageVolume at the volume's global staging
//!    directory, for a driver with STAGE_UNSTAGE_VOLUME.
//! 5. **SetUp** ([`csi_mounter`]): NodePublishVolume at the pod's
//!    `volumes/kubernetes.io~csi/<pv>/mount`, which the containers then bind-mount.
//!
//! [`CsiPlugin::tear_down_pod`] undoes it from what is on disk (`vol_data.json`): NodeUnpublish
//! for each of the pod's CSI volumes, and NodeUnstage for a volume no other pod of the node uses.
//!
//! Operations on one volume are serialized (kubelet's nestedpendingoperations), so that one pod's
//! unstage never races another pod's publish of the same volume. Each failure is kubelet's event
//! text: `MountVolume.WaitForAttach failed for volume "pvc-…" : timed out waiting for
//! external-attacher of hostpath.csi.kubelab.io CSI driver to attach volume …`.
//!
//! ## Implementation caveats
//! - WaitForAttach waits [`Options::wait_for_attach_timeout`] (15 s) inside one sync of the pod,
//!   polling the VolumeAttachment (a node may only GET it), then fails with kubelet's timeout
//!   message; the next sync waits again. Kubelet waits up to 10 minutes, in its reconciler.
//!   The agent does not wait for the volume to be listed in `node.status.volumesAttached`
//!   (kubelet's VerifyControllerAttachedVolume), only for the VolumeAttachment.
//! - Filesystem volumes only (no `volumeMode: Block`), no inline `csi` (ephemeral) volumes, no
//!   fsGroup ownership change, no SELinux mount context, no `podInfoOnMount` attributes, no
//!   CSIDriver `tokenRequests`, no NodeGetVolumeStats (volume metrics), no NodeExpandVolume.
//! - A driver not registered yet fails the set-up (retried on the next sync), as in kubelet; a
//!   driver gone for good leaves its volumes' pods' directories in place (housekeeping retries
//!   the teardown every 2 s), as kubelet leaves them.
//! - The access mode sent is the PV's first one, as kubelet sends; SINGLE_NODE_MULTI_WRITER
//!   drivers get the precise single-node modes.
//! - `volumesInUse` is what pods want (since their set-up read the PV) plus what the pods'
//!   directories hold on disk; kubelet also waits for the volume to be reported in use before
//!   mounting it, which this agent does not.

pub(crate) mod csi_attacher;
pub(crate) mod csi_client;
pub(crate) mod csi_drivers_store;
pub(crate) mod csi_mounter;
pub(crate) mod nodeinfomanager;
pub(crate) mod registration_handler;

#[cfg(test)]
pub(crate) mod fake;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, PersistentVolumeClaimVolumeSource, Pod, Secret, SecretReference};
use k8s_openapi::api::storage::v1::{CSIDriver, VolumeAttachment};
use kube::Api;
use serde::{Deserialize, Serialize};

use self::csi_client::{CsiClient, VolumeArgs};
use self::csi_drivers_store::Drivers;
use super::{MountedVolume, SET_UP, run_blocking};
use crate::error::{Error, Result};
use crate::kubelet::getters;
use crate::volumemanager::mount;

pub(crate) use api::storage::csi::{CSI_PLUGIN_NAME, sha256_hex, unique_volume_name};
/// The plugin's directory under `pods/<uid>/volumes` (its name, escaped).
pub(crate) const PLUGIN_DIR_NAME: &str = "kubernetes.io~csi";
/// Where kubelet keeps what a teardown needs to know about a volume.
pub(crate) const VOL_DATA_FILE_NAME: &str = "vol_data.json";
/// How kubelet's CSI plugin prefixes its messages.
pub(crate) const LOG_PREFIX: &str = "kubernetes.io/csi";

/// The operations a CSI volume's set-up goes through, as kubelet's events name them.
pub(crate) const WAIT_FOR_ATTACH: &str = "MountVolume.WaitForAttach";
pub(crate) const MOUNT_DEVICE: &str = "MountVolume.MountDevice";

/// Timings, shrunk by the tests.
#[derive(Clone, Debug)]
pub(crate) struct Options {
    /// How long one sync of a pod waits for a VolumeAttachment to be attached. Kubelet's
    /// reconciler waits up to 10 minutes in the background; here the pod worker waits, so the
    /// wait is short and the next sync (2 s later) waits again.
    pub(crate) wait_for_attach_timeout: Duration,
}

impl Default for Options {
    fn default() -> Options {
        Options { wait_for_attach_timeout: Duration::from_secs(15) }
    }
}


/// `vol_data.json`: the volume's identity, kept on disk beside its mount.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct VolData {
    #[serde(rename = "specVolID", default, skip_serializing_if = "String::is_empty")]
    pub(crate) spec_vol_id: String,
    #[serde(rename = "volumeHandle")]
    pub(crate) volume_handle: String,
    #[serde(rename = "driverName")]
    pub(crate) driver_name: String,
    #[serde(rename = "nodeName", default, skip_serializing_if = "String::is_empty")]
    pub(crate) node_name: String,
    #[serde(rename = "attachmentID", default, skip_serializing_if = "String::is_empty")]
    pub(crate) attachment_id: String,
    #[serde(rename = "volumeLifecycleMode", default, skip_serializing_if = "String::is_empty")]
    pub(crate) volume_lifecycle_mode: String,
}

impl VolData {
    /// What MountDevice keeps beside the staging directory.
    pub(crate) fn device(driver: &str, volume_handle: &str) -> VolData {
        VolData { volume_handle: volume_handle.into(), driver_name: driver.into(), ..Default::default() }
    }

    /// Writes `<dir>/vol_data.json`. Blocking.
    pub(crate) fn save(&self, dir: &Path) -> Result<()> {
        let path = dir.join(VOL_DATA_FILE_NAME);
        let bytes = serde_json::to_vec(self).map_err(|e| Error::Invalid(format!("vol_data.json: {e}")))?;
        std::fs::write(&path, bytes).map_err(|e| Error::io(&path, e))
    }

    /// Reads `<dir>/vol_data.json`; `Ok(None)` when there is none. Blocking.
    pub(crate) fn load(dir: &Path) -> Result<Option<VolData>> {
        let path = dir.join(VOL_DATA_FILE_NAME);
        match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map(Some)
                .map_err(|e| Error::Invalid(format!("{}: {e}", path.display()))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::io(&path, e)),
        }
    }
}

/// A claim's CSI PersistentVolume, as SetUp needs it (kubelet's volume.Spec for a PV).
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct CsiVolume {
    pub(crate) pv_name: String,
    pub(crate) driver: String,
    pub(crate) volume_handle: String,
    pub(crate) fs_type: String,
    pub(crate) mount_options: Vec<String>,
    pub(crate) volume_attributes: HashMap<String, String>,
    /// The PV's first access mode (kubelet's choice), ReadWriteOnce if it has none.
    pub(crate) access_mode: String,
    pub(crate) read_only: bool,
    pub(crate) node_stage_secret: Option<SecretReference>,
    pub(crate) node_publish_secret: Option<SecretReference>,
}

impl CsiVolume {
    pub(crate) fn unique_name(&self) -> String {
        unique_volume_name(&self.driver, &self.volume_handle)
    }
}

/// Step 1, the pure part: the claim (named `claim_name` by the pod) must be Bound, to `pv`, and
/// `pv` must be a filesystem CSI volume.
pub(crate) fn csi_volume(source: &PersistentVolumeClaimVolumeSource, claim: &PersistentVolumeClaim, pv: &PersistentVolume) -> Result<CsiVolume> {
    let pv_name = pv.metadata.name.clone().unwrap_or_default();
    let claim_uid = claim.metadata.uid.as_deref();
    if let Some(claim_ref) = pv.spec.as_ref().and_then(|s| s.claim_ref.as_ref())
        && claim_ref.uid.is_some()
        && claim_ref.uid.as_deref() != claim_uid
    {
        return Err(Error::NotReady(format!(
            "persistentvolume {pv_name:?} is bound to another claim than persistentvolumeclaim {:?}",
            source.claim_name
        )));
    }
    let spec = pv.spec.clone().unwrap_or_default();
    if spec.volume_mode.as_deref() == Some("Block") {
        return Err(Error::VolumeSpec(format!("persistentvolume {pv_name:?} has volumeMode Block, which kubelab does not support")));
    }
    let Some(source_csi) = spec.csi else {
        return Err(Error::VolumeSpec(format!(
            "persistentvolume {pv_name:?} is not a CSI volume: kubelab mounts only CSI persistent volumes"
        )));
    };
    let access_modes = spec.access_modes.unwrap_or_default();
    Ok(CsiVolume {
        read_only: csi_mounter::read_only(source.read_only.unwrap_or(false), &access_modes),
        access_mode: access_modes.first().cloned().unwrap_or_else(|| "ReadWriteOnce".into()),
        pv_name,
        driver: source_csi.driver,
        volume_handle: source_csi.volume_handle,
        fs_type: source_csi.fs_type.unwrap_or_default(),
        mount_options: spec.mount_options.unwrap_or_default(),
        volume_attributes: source_csi.volume_attributes.unwrap_or_default().into_iter().collect(),
        node_stage_secret: source_csi.node_stage_secret_ref,
        node_publish_secret: source_csi.node_publish_secret_ref,
    })
}

/// Whether the claim is bound (phase Bound and a volume name): its PV's name if so.
pub(crate) fn bound_volume_name(claim: &PersistentVolumeClaim) -> Option<&str> {
    let phase = claim.status.as_ref().and_then(|s| s.phase.as_deref());
    let name = claim.spec.as_ref().and_then(|s| s.volume_name.as_deref()).filter(|n| !n.is_empty());
    if phase == Some("Bound") { name } else { None }
}

/// An error of `operation` on the PersistentVolume `pv`, in kubelet's event text.
fn op_error(operation: &'static str, pv: &str) -> impl FnOnce(Error) -> Error + use<> {
    let pv = pv.to_string();
    move |source| Error::Volume { operation, volume: pv, source: Box::new(source) }
}

/// The CSI volume plugin of this node. Cheap to clone.
#[derive(Clone)]
pub(crate) struct CsiPlugin {
    root_dir: PathBuf,
    node_name: String,
    client: kube::Client,
    drivers: Drivers,
    options: Options,
    /// One lock per unique volume name: operations on a volume run one at a time.
    locks: Arc<Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>>,
    /// Pod UID → the unique names of the CSI volumes it wants (set at step 1 of a set-up, cleared
    /// by its teardown): what `volumesInUse` reports besides what is mounted on disk.
    in_use: Arc<Mutex<BTreeMap<String, BTreeSet<String>>>>,
}

impl CsiPlugin {
    pub(crate) fn new(root_dir: PathBuf, node_name: String, client: kube::Client, drivers: Drivers, options: Options) -> CsiPlugin {
        CsiPlugin { root_dir, node_name, client, drivers, options, locks: Default::default(), in_use: Default::default() }
    }

    /// The driver's client, or kubelet's error for a driver not registered (yet) on this node.
    fn csi_client(&self, driver: &str, what: &str) -> Result<CsiClient> {
        match self.drivers.get(driver) {
            Some(d) => Ok(CsiClient::new(driver, d.endpoint)),
            None => Err(Error::NotReady(format!(
                "{LOG_PREFIX}: {what}: driver name {driver} not found in the list of registered CSI drivers"
            ))),
        }
    }

    async fn lock(&self, unique: &str) -> tokio::sync::OwnedMutexGuard<()> {
        let lock = self.locks.lock().unwrap_or_else(|e| e.into_inner()).entry(unique.to_string()).or_default().clone();
        lock.lock_owned().await
    }

    /// Step 1: claim → PV → the CSI volume.
    async fn volume_spec(&self, namespace: &str, source: &PersistentVolumeClaimVolumeSource) -> Result<CsiVolume> {
        let claims: Api<PersistentVolumeClaim> = Api::namespaced(self.client.clone(), namespace);
        let Some(claim) = claims.get_opt(&source.claim_name).await? else {
            return Err(Error::NotReady(format!("persistentvolumeclaim {:?} not found", source.claim_name)));
        };
        let Some(pv_name) = bound_volume_name(&claim) else {
            return Err(Error::NotReady(format!("persistentvolumeclaim {:?} is not bound", source.claim_name)));
        };
        let pvs: Api<PersistentVolume> = Api::all(self.client.clone());
        let Some(pv) = pvs.get_opt(pv_name).await? else {
            return Err(Error::NotReady(format!("persistentvolume {pv_name:?} not found")));
        };
        csi_volume(source, &claim, &pv)
    }

    /// A secret's data as the strings CSI wants (kubelet's getCredentialsFromSecret).
    async fn secrets(&self, reference: Option<&SecretReference>, default_namespace: &str) -> Result<HashMap<String, String>> {
        let Some(r) = reference else { return Ok(HashMap::new()) };
        let name = r.name.clone().unwrap_or_default();
        let namespace = r.namespace.clone().unwrap_or_else(|| default_namespace.to_string());
        let api: Api<Secret> = Api::namespaced(self.client.clone(), &namespace);
        let Some(secret) = api.get_opt(&name).await? else {
            return Err(Error::NotReady(format!("failed to find the secret {name} in the namespace {namespace}")));
        };
        Ok(secret
            .data
            .unwrap_or_default()
            .into_iter()
            .map(|(k, v)| (k, String::from_utf8_lossy(&v.0).into_owned()))
            .collect())
    }

    /// The pod's `persistentVolumeClaim` volume set up (see the module's steps). Errors before the
    /// PV is known are the caller's to name (`MountVolume.SetUp failed for volume "<pod volume>"`);
    /// the later ones are [`Error::Volume`]s naming the operation and the PV.
    pub(crate) async fn set_up(&self, pod: &Pod, uid: &str, source: &PersistentVolumeClaimVolumeSource) -> Result<MountedVolume> {
        let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
        // Step 1: the volume spec; the volume is in use from now on.
        let volume = self.volume_spec(namespace, source).await?;
        let unique = volume.unique_name();
        self.in_use.lock().unwrap_or_else(|e| e.into_inner()).entry(uid.to_string()).or_default().insert(unique.clone());
        let _guard = self.lock(&unique).await;
        let target = csi_mounter::target_path(&self.root_dir, uid, &volume.pv_name);
        let mounted = MountedVolume { host_path: target.clone(), read_only: volume.read_only };

        // Step 2: already published for this pod.
        let t = target.clone();
        if run_blocking(target.clone(), move || Ok(t.exists() && mount::is_mount_point(&t)?)).await? {
            return Ok(mounted);
        }

        // Step 3: WaitForAttach.
        let pv = volume.pv_name.as_str();
        let attachment = csi_attacher::attachment_name(&volume.volume_handle, &volume.driver, &self.node_name);
        let publish_context = async {
            let driver = Api::<CSIDriver>::all(self.client.clone()).get_opt(&volume.driver).await?;
            if !csi_attacher::attach_required(driver.as_ref()) {
                return Ok(HashMap::new());
            }
            let api: Api<VolumeAttachment> = Api::all(self.client.clone());
            csi_attacher::wait_for_attach(api, &attachment, &volume.driver, &volume.volume_handle, self.options.wait_for_attach_timeout).await
        }
        .await
        .map_err(op_error(WAIT_FOR_ATTACH, pv))?;

        // Step 4: MountDevice.
        let stage_secrets = self.secrets(volume.node_stage_secret.as_ref(), namespace).await.map_err(op_error(MOUNT_DEVICE, pv))?;
        let publish_secrets = self.secrets(volume.node_publish_secret.as_ref(), namespace).await.map_err(op_error(SET_UP, pv))?;
        let data = VolData {
            spec_vol_id: volume.pv_name.clone(),
            volume_handle: volume.volume_handle.clone(),
            driver_name: volume.driver.clone(),
            node_name: self.node_name.clone(),
            attachment_id: attachment.clone(),
            volume_lifecycle_mode: "Persistent".into(),
        };
        self.mount(&volume, publish_context, &target, data, stage_secrets, publish_secrets).await?;
        Ok(mounted)
    }

    /// Steps 4 and 5, once the volume is attached: stage (if the driver stages), then publish at
    /// `target`.
    pub(crate) async fn mount(
        &self,
        volume: &CsiVolume,
        publish_context: HashMap<String, String>,
        target: &Path,
        data: VolData,
        stage_secrets: HashMap<String, String>,
        publish_secrets: HashMap<String, String>,
    ) -> Result<()> {
        let pv = volume.pv_name.as_str();
        let client = self.csi_client(&volume.driver, "attacher.MountDevice failed to create newCsiDriverClient").map_err(op_error(MOUNT_DEVICE, pv))?;
        let caps = client.node_get_capabilities().await.map_err(op_error(MOUNT_DEVICE, pv))?;
        let mode = csi_mounter::csi_access_mode(&volume.access_mode, caps.single_node_multi_writer);
        let args = VolumeArgs {
            volume_handle: volume.volume_handle.clone(),
            capability: csi_mounter::mount_capability(&volume.fs_type, &volume.mount_options, mode),
            publish_context,
            volume_context: volume.volume_attributes.clone(),
        };
        let staging = csi_attacher::mount_device(&client, caps, &self.root_dir, &volume.driver, &args, stage_secrets)
            .await
            .map_err(op_error(MOUNT_DEVICE, pv))?;

        // Step 5: SetUp.
        csi_mounter::set_up_at(&client, caps, &args, staging.as_deref(), target, volume.read_only, data, publish_secrets)
            .await
            .map_err(op_error(SET_UP, pv))?;
        tracing::info!(target: "kubelet::volumes", volume = pv, driver = %volume.driver, target = %target.display(), "MountVolume.SetUp succeeded");
        Ok(())
    }

    /// The pod's CSI volumes torn down, from their `vol_data.json`: NodeUnpublishVolume each, and
    /// NodeUnstageVolume for those no other pod on the node uses. Every volume is attempted; the
    /// first error is returned (the caller retries: housekeeping keeps the pod's directory).
    pub(crate) async fn tear_down_pod(&self, uid: &str) -> Result<()> {
        let dir = getters::pod_volumes_dir(&self.root_dir, uid).join(PLUGIN_DIR_NAME);
        let d = dir.clone();
        let volumes = run_blocking(dir.clone(), move || list_volumes(&d)).await?;
        let mut first_error = None;
        for (vol_dir, data) in volumes {
            if let Err(e) = self.tear_down_volume(uid, &vol_dir, data).await {
                tracing::warn!(target: "kubelet::volumes", pod = %uid, dir = %vol_dir.display(), error = %e, "UnmountVolume.TearDown failed");
                first_error.get_or_insert(e);
            }
        }
        match first_error {
            Some(e) => Err(e),
            None => {
                self.in_use.lock().unwrap_or_else(|e| e.into_inner()).remove(uid);
                Ok(())
            }
        }
    }

    async fn tear_down_volume(&self, uid: &str, vol_dir: &Path, data: Option<VolData>) -> Result<()> {
        let target = vol_dir.join("mount");
        let Some(data) = data else {
            // Nothing was published (the set-up failed before writing vol_data.json): only an
            // unmounted, empty directory to remove.
            let (t, d) = (target.clone(), vol_dir.to_path_buf());
            return run_blocking(d.clone(), move || {
                if t.exists() && mount::is_mount_point(&t)? {
                    return Err(Error::NotReady(format!("{} is mounted but has no {VOL_DATA_FILE_NAME}", t.display())));
                }
                csi_attacher::remove_if_exists(&t, |p| std::fs::remove_dir(p))?;
                csi_attacher::remove_if_exists(&d, |p| std::fs::remove_dir(p))
            })
            .await;
        };
        let unique = unique_volume_name(&data.driver_name, &data.volume_handle);
        let _guard = self.lock(&unique).await;
        let client = self.csi_client(&data.driver_name, "Unmounter.TearDownAt failed to get CSI client")?;
        csi_mounter::tear_down_at(&client, &data.volume_handle, &target).await?;
        tracing::info!(target: "kubelet::volumes", pod = %uid, volume = %data.spec_vol_id, "UnmountVolume.TearDown succeeded");

        // UnmountDevice, when this pod was the last on the node to use the volume.
        let others_want = self
            .in_use
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .any(|(pod, names)| pod != uid && names.contains(&unique));
        let (root, u, un) = (self.root_dir.clone(), uid.to_string(), unique.clone());
        let others_mounted = run_blocking(self.root_dir.clone(), move || Ok(mounted_volumes(&root)?.into_iter().any(|(pod, name)| pod != u && name == un))).await?;
        if others_want || others_mounted {
            return Ok(());
        }
        let caps = client.node_get_capabilities().await?;
        csi_attacher::unmount_device(&client, caps, &self.root_dir, &data.driver_name, &data.volume_handle).await?;
        tracing::info!(target: "kubelet::volumes", volume = %data.spec_vol_id, driver = %data.driver_name, "UnmountDevice succeeded");
        Ok(())
    }

    /// `status.volumesInUse`: the volumes pods on this node want or have mounted, sorted.
    /// Blocking (reads the pods' `vol_data.json`).
    pub(crate) fn volumes_in_use(&self) -> Vec<String> {
        let mut names: BTreeSet<String> =
            self.in_use.lock().unwrap_or_else(|e| e.into_inner()).values().flatten().cloned().collect();
        match mounted_volumes(&self.root_dir) {
            Ok(on_disk) => names.extend(on_disk.into_iter().map(|(_, name)| name)),
            Err(e) => tracing::warn!(target: "kubelet::volumes", error = %e, "reading the pods' CSI volumes"),
        }
        names.into_iter().collect()
    }
}

/// The CSI volume directories of one pod (`…/volumes/kubernetes.io~csi/<pv>`) with their
/// `vol_data.json`, sorted. Blocking.
fn list_volumes(dir: &Path) -> Result<Vec<(PathBuf, Option<VolData>)>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io(dir, e)),
    };
    let mut out = Vec::new();
    for entry in entries {
        let path = entry.map_err(|e| Error::io(dir, e))?.path();
        if path.is_dir() {
            let data = VolData::load(&path)?;
            out.push((path, data));
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// (pod UID, unique volume name) of every CSI volume set up on the node, from the pods'
/// `vol_data.json`. Blocking.
fn mounted_volumes(root: &Path) -> Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    for uid in getters::pod_uids_on_disk(root)? {
        let dir = getters::pod_volumes_dir(root, &uid).join(PLUGIN_DIR_NAME);
        for (_, data) in list_volumes(&dir)? {
            if let Some(d) = data {
                out.push((uid.clone(), unique_volume_name(&d.driver_name, &d.volume_handle)));
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{CSIPersistentVolumeSource, ObjectReference, PersistentVolumeClaimSpec, PersistentVolumeClaimStatus, PersistentVolumeSpec};
    use std::time::Duration;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    #[test]
    fn unique_names() {
        assert_eq!(unique_volume_name("hostpath.csi.kubelab.io", "vol-1"), "kubernetes.io/csi/hostpath.csi.kubelab.io^vol-1");
    }

    #[test]
    fn vol_data_round_trip_uses_kubelet_keys() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        assert_eq!(VolData::load(dir.path())?, None);
        let data = VolData {
            spec_vol_id: "pvc-1".into(),
            volume_handle: "h".into(),
            driver_name: "d".into(),
            node_name: "n".into(),
            attachment_id: "csi-x".into(),
            volume_lifecycle_mode: "Persistent".into(),
        };
        data.save(dir.path())?;
        let text = std::fs::read_to_string(dir.path().join(VOL_DATA_FILE_NAME)).map_err(|e| Error::io("vol_data", e))?;
        let json: serde_json::Value = serde_json::from_str(&text).map_err(|e| Error::Invalid(e.to_string()))?;
        assert_eq!(json["specVolID"], "pvc-1");
        assert_eq!(json["volumeHandle"], "h");
        assert_eq!(json["driverName"], "d");
        assert_eq!(json["attachmentID"], "csi-x");
        assert_eq!(json["volumeLifecycleMode"], "Persistent");
        assert_eq!(VolData::load(dir.path())?, Some(data));
        Ok(())
    }

    fn claim(phase: Option<&str>, volume_name: Option<&str>) -> PersistentVolumeClaim {
        PersistentVolumeClaim {
            metadata: ObjectMeta { name: Some("data".into()), uid: Some("claim-uid".into()), ..Default::default() },
            spec: Some(PersistentVolumeClaimSpec { volume_name: volume_name.map(Into::into), ..Default::default() }),
            status: Some(PersistentVolumeClaimStatus { phase: phase.map(Into::into), ..Default::default() }),
        }
    }

    fn pv(csi: Option<CSIPersistentVolumeSource>, modes: &[&str], claim_uid: &str) -> PersistentVolume {
        PersistentVolume {
            metadata: ObjectMeta { name: Some("pvc-1".into()), ..Default::default() },
            spec: Some(PersistentVolumeSpec {
                csi,
                access_modes: Some(modes.iter().map(|m| m.to_string()).collect()),
                mount_options: Some(vec!["noatime".into()]),
                claim_ref: Some(ObjectReference { uid: Some(claim_uid.into()), ..Default::default() }),
                ..Default::default()
            }),
            status: None,
        }
    }

    #[test]
    fn bound_claims_only() {
        assert_eq!(bound_volume_name(&claim(Some("Bound"), Some("pvc-1"))), Some("pvc-1"));
        assert_eq!(bound_volume_name(&claim(Some("Pending"), None)), None);
        assert_eq!(bound_volume_name(&claim(Some("Pending"), Some("pvc-1"))), None);
        assert_eq!(bound_volume_name(&claim(Some("Bound"), Some(""))), None);
    }

    #[test]
    fn csi_volume_from_claim_and_pv() -> Result<()> {
        let source = |ro: Option<bool>| PersistentVolumeClaimVolumeSource { claim_name: "data".into(), read_only: ro };
        let csi = CSIPersistentVolumeSource {
            driver: "hostpath.csi.kubelab.io".into(),
            volume_handle: "vol-1".into(),
            fs_type: Some("ext4".into()),
            volume_attributes: Some([("k".to_string(), "v".to_string())].into()),
            ..Default::default()
        };
        let c = claim(Some("Bound"), Some("pvc-1"));
        let v = csi_volume(&source(None), &c, &pv(Some(csi.clone()), &["ReadWriteOnce"], "claim-uid"))?;
        assert_eq!(v.unique_name(), "kubernetes.io/csi/hostpath.csi.kubelab.io^vol-1");
        assert_eq!((v.pv_name.as_str(), v.fs_type.as_str(), v.access_mode.as_str(), v.read_only), ("pvc-1", "ext4", "ReadWriteOnce", false));
        assert_eq!(v.mount_options, vec!["noatime".to_string()]);
        assert_eq!(v.volume_attributes.get("k").map(String::as_str), Some("v"));
        assert!(csi_volume(&source(Some(true)), &c, &pv(Some(csi.clone()), &["ReadWriteOnce"], "claim-uid"))?.read_only);
        assert!(csi_volume(&source(None), &c, &pv(Some(csi.clone()), &["ReadOnlyMany"], "claim-uid"))?.read_only);

        let err = csi_volume(&source(None), &c, &pv(None, &["ReadWriteOnce"], "claim-uid")).expect_err("not CSI");
        assert!(err.to_string().contains("is not a CSI volume"), "{err}");
        let err = csi_volume(&source(None), &c, &pv(Some(csi), &["ReadWriteOnce"], "other-uid")).expect_err("someone else's");
        assert!(err.to_string().contains("bound to another claim"), "{err}");
        Ok(())
    }

    /// A client that is never called: the set-up's CSI half needs no API server.
    fn unused_client() -> kube::Client {
        let config = kube::Config::new("http://127.0.0.1:9".parse().expect("uri"));
        kube::Client::try_from(config).expect("client")
    }

    fn fake_volume() -> CsiVolume {
        CsiVolume {
            pv_name: "pvc-1".into(),
            driver: "fake.csi.kubelab.io".into(),
            volume_handle: "vol-1".into(),
            fs_type: "ext4".into(),
            mount_options: vec!["noatime".into()],
            access_mode: "ReadWriteOnce".into(),
            read_only: true,
            ..Default::default()
        }
    }

    fn vol_data(v: &CsiVolume) -> VolData {
        VolData {
            spec_vol_id: v.pv_name.clone(),
            volume_handle: v.volume_handle.clone(),
            driver_name: v.driver.clone(),
            node_name: "node-a".into(),
            attachment_id: csi_attacher::attachment_name(&v.volume_handle, &v.driver, "node-a"),
            volume_lifecycle_mode: "Persistent".into(),
        }
    }

    /// Unmounts what a failed test left mounted below a temporary directory.
    struct UnmountOnDrop(PathBuf);

    impl Drop for UnmountOnDrop {
        fn drop(&mut self) {
            for m in mount::mounts_under(&self.0).unwrap_or_default() {
                let _ = mount::unmount(&m);
            }
        }
    }

    /// Stage once, publish for two pods, unpublish each, unstage after the last: against the fake
    /// driver, whose stage and publish are real tmpfs mounts (we are root on the test machines).
    #[tokio::test]
    async fn stage_publish_unpublish_unstage_through_a_fake_driver() -> Result<()> {
        let root_tmp = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        let root = root_tmp.path().to_path_buf();
        let _unmount = UnmountOnDrop(root.clone());
        let socket_dir = root.join("plugins/fake.csi.kubelab.io");
        std::fs::create_dir_all(&socket_dir).map_err(|e| Error::io(&socket_dir, e))?;
        let socket = socket_dir.join("csi.sock");
        let node = fake::FakeNode { stage_unstage: true, ..Default::default() };
        fake::serve_node(&socket, node.clone()).map_err(|e| Error::io(&socket, e))?;
        let drivers = Drivers::default();
        let plugin = CsiPlugin::new(root.clone(), "node-a".into(), unused_client(), drivers.clone(), Options::default());
        let volume = fake_volume();

        // Not registered yet: kubelet's error, naming the operation and the PV.
        let t1 = csi_mounter::target_path(&root, "uid-1", "pvc-1");
        let err = plugin.mount(&volume, HashMap::new(), &t1, vol_data(&volume), HashMap::new(), HashMap::new()).await.expect_err("no driver");
        assert_eq!(
            err.to_string(),
            "MountVolume.MountDevice failed for volume \"pvc-1\" : kubernetes.io/csi: attacher.MountDevice failed to create newCsiDriverClient: driver name fake.csi.kubelab.io not found in the list of registered CSI drivers"
        );

        drivers.set("fake.csi.kubelab.io", csi_drivers_store::Driver { endpoint: socket.clone(), highest_supported_version: "1.0.0".into() });
        let context = HashMap::from([("device".to_string(), "/dev/fake".to_string())]);
        plugin.mount(&volume, context.clone(), &t1, vol_data(&volume), HashMap::new(), HashMap::new()).await?;
        let staging = csi_attacher::staging_path(&root, "fake.csi.kubelab.io", "vol-1");
        assert!(mount::is_mount_point(&t1)?, "published");
        assert!(mount::is_mount_point(&staging)?, "staged");
        assert_eq!(VolData::load(t1.parent().expect("parent"))?, Some(vol_data(&volume)));
        assert_eq!(VolData::load(staging.parent().expect("parent"))?.map(|d| d.volume_handle), Some("vol-1".into()));
        let publish = node.last_publish.lock().unwrap_or_else(|e| e.into_inner()).clone().expect("publish request");
        assert_eq!(publish.staging_target_path, staging.display().to_string());
        assert!(publish.readonly);
        assert_eq!(publish.publish_context, context);
        match publish.volume_capability.and_then(|c| c.access_type) {
            Some(proto::csi::v1::volume_capability::AccessType::Mount(m)) => {
                assert_eq!((m.fs_type.as_str(), m.mount_flags), ("ext4", vec!["noatime".to_string()]));
            }
            other => panic!("{other:?}"),
        }

        // A second pod: the volume is staged already, so only a publish.
        let t2 = csi_mounter::target_path(&root, "uid-2", "pvc-1");
        plugin.mount(&volume, context, &t2, vol_data(&volume), HashMap::new(), HashMap::new()).await?;
        assert_eq!(plugin.volumes_in_use(), vec!["kubernetes.io/csi/fake.csi.kubelab.io^vol-1".to_string()]);

        // The first pod goes: unpublish only, the other pod still uses the volume.
        plugin.tear_down_pod("uid-1").await?;
        assert!(!t1.parent().expect("parent").exists(), "the pod's volume directory is removed");
        assert!(mount::is_mount_point(&staging)?, "still staged");
        // The last pod goes: unpublish, then unstage.
        plugin.tear_down_pod("uid-2").await?;
        assert!(!staging.parent().expect("parent").exists(), "the staging directory is removed");
        assert!(plugin.volumes_in_use().is_empty());
        plugin.tear_down_pod("uid-2").await?; // idempotent

        let publish_call = |uid: &str| format!("NodePublishVolume vol-1 {} ro=true", csi_mounter::target_path(&root, uid, "pvc-1").display());
        let unpublish_call = |uid: &str| format!("NodeUnpublishVolume vol-1 {}", csi_mounter::target_path(&root, uid, "pvc-1").display());
        assert_eq!(
            node.calls(),
            vec![
                format!("NodeStageVolume vol-1 {}", staging.display()),
                publish_call("uid-1"),
                publish_call("uid-2"),
                unpublish_call("uid-1"),
                unpublish_call("uid-2"),
                format!("NodeUnstageVolume vol-1 {}", staging.display()),
            ]
        );
        assert!(mount::mounts_under(&root)?.is_empty());
        Ok(())
    }

    /// A driver without STAGE_UNSTAGE_VOLUME is published straight away, without a staging path.
    #[tokio::test]
    async fn driver_without_staging() -> Result<()> {
        let root_tmp = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        let root = root_tmp.path().to_path_buf();
        let _unmount = UnmountOnDrop(root.clone());
        let socket = root.join("csi.sock");
        let node = fake::FakeNode::default();
        fake::serve_node(&socket, node.clone()).map_err(|e| Error::io(&socket, e))?;
        let drivers = Drivers::default();
        drivers.set("fake.csi.kubelab.io", csi_drivers_store::Driver { endpoint: socket, highest_supported_version: "1.0.0".into() });
        let plugin = CsiPlugin::new(root.clone(), "node-a".into(), unused_client(), drivers, Options::default());
        let volume = CsiVolume { read_only: false, ..fake_volume() };
        let target = csi_mounter::target_path(&root, "uid-1", "pvc-1");
        plugin.mount(&volume, HashMap::new(), &target, vol_data(&volume), HashMap::new(), HashMap::new()).await?;
        let publish = node.last_publish.lock().unwrap_or_else(|e| e.into_inner()).clone().expect("publish request");
        assert_eq!(publish.staging_target_path, "");
        assert!(!publish.readonly);
        plugin.tear_down_pod("uid-1").await?;
        let calls = node.calls();
        assert_eq!(calls.len(), 2, "{calls:?}");
        assert!(calls[0].starts_with("NodePublishVolume") && calls[1].starts_with("NodeUnpublishVolume"), "{calls:?}");
        Ok(())
    }

    /// The whole set-up from the pod's claim, against a fake API server and the fake driver: the
    /// claim must be bound; the VolumeAttachment is waited for (kubelet's timeout message), then
    /// the volume is staged and published once; the volume manager names the pod's volume in
    /// errors that come before the PV is known.
    #[tokio::test]
    async fn set_up_from_claim_waits_for_attach() -> Result<()> {
        use k8s_openapi::api::core::v1::{PersistentVolumeClaimVolumeSource, PodSpec, Volume};
        use k8s_openapi::api::storage::v1::{VolumeAttachmentSpec, VolumeAttachmentStatus};

        let root_tmp = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        let root = root_tmp.path().to_path_buf();
        let _unmount = UnmountOnDrop(root.clone());
        let socket = root.join("csi.sock");
        let node = fake::FakeNode { stage_unstage: true, ..Default::default() };
        fake::serve_node(&socket, node.clone()).map_err(|e| Error::io(&socket, e))?;
        let drivers = Drivers::default();
        drivers.set("fake.csi.kubelab.io", csi_drivers_store::Driver { endpoint: socket, highest_supported_version: "1.0.0".into() });

        let api = fake::FakeApiServer::default();
        let mut bound = claim(Some("Bound"), Some("pvc-1"));
        bound.metadata.namespace = Some("ns".into());
        api.set("/api/v1/namespaces/ns/persistentvolumeclaims/data", &bound);
        let mut pending = claim(Some("Pending"), None);
        pending.metadata.name = Some("pending".into());
        api.set("/api/v1/namespaces/ns/persistentvolumeclaims/pending", &pending);
        let csi = CSIPersistentVolumeSource { driver: "fake.csi.kubelab.io".into(), volume_handle: "vol-1".into(), ..Default::default() };
        api.set("/api/v1/persistentvolumes/pvc-1", &pv(Some(csi), &["ReadWriteOnce"], "claim-uid"));
        let client = api.start().await.map_err(|e| Error::io("fake API server", e))?;

        let options = Options { wait_for_attach_timeout: Duration::from_millis(600) };
        let plugin = CsiPlugin::new(root.clone(), "node-a".into(), client.clone(), drivers, options);
        let vm = crate::volumemanager::VolumeManager::new(root.clone(), Some(client)).with_csi(plugin.clone());
        let pod = |claim: &str| Pod {
            metadata: ObjectMeta { name: Some("p".into()), namespace: Some("ns".into()), uid: Some("uid-1".into()), ..Default::default() },
            spec: Some(PodSpec {
                volumes: Some(vec![Volume {
                    name: "data".into(),
                    persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource { claim_name: claim.into(), read_only: None }),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        };

        let err = vm.mount_volumes(&pod("pending")).await.expect_err("not bound");
        assert_eq!(err.to_string(), "MountVolume.SetUp failed for volume \"data\" : persistentvolumeclaim \"pending\" is not bound");

        // No CSIDriver: attach is required, and nothing attaches it.
        let err = vm.mount_volumes(&pod("data")).await.expect_err("not attached");
        assert_eq!(
            err.to_string(),
            "MountVolume.WaitForAttach failed for volume \"pvc-1\" : timed out waiting for external-attacher of fake.csi.kubelab.io CSI driver to attach volume vol-1"
        );
        assert_eq!(plugin.volumes_in_use(), vec!["kubernetes.io/csi/fake.csi.kubelab.io^vol-1".to_string()], "in use while it waits");
        assert!(node.calls().is_empty());

        // The attacher reports an error: its message.
        let name = csi_attacher::attachment_name("vol-1", "fake.csi.kubelab.io", "node-a");
        let va_path = format!("/apis/storage.k8s.io/v1/volumeattachments/{name}");
        let mut va = VolumeAttachment {
            metadata: ObjectMeta { name: Some(name.clone()), ..Default::default() },
            spec: VolumeAttachmentSpec { attacher: "fake.csi.kubelab.io".into(), node_name: "node-a".into(), ..Default::default() },
            status: Some(VolumeAttachmentStatus {
                attach_error: Some(k8s_openapi::api::storage::v1::VolumeError { message: Some("rpc error: code = Internal desc = disk on fire".into()), ..Default::default() }),
                ..Default::default()
            }),
        };
        api.set(&va_path, &va);
        let err = vm.mount_volumes(&pod("data")).await.expect_err("attach error");
        assert_eq!(err.to_string(), "MountVolume.WaitForAttach failed for volume \"pvc-1\" : rpc error: code = Internal desc = disk on fire");

        // Attached: staged and published, its publish context handed on.
        va.status = Some(VolumeAttachmentStatus { attached: true, attachment_metadata: Some([("k".to_string(), "v".to_string())].into()), ..Default::default() });
        api.set(&va_path, &va);
        let mounted = vm.mount_volumes(&pod("data")).await?;
        let target = csi_mounter::target_path(&root, "uid-1", "pvc-1");
        assert_eq!(mounted.get("data").map(|m| (&m.host_path, m.read_only)), Some((&target, false)));
        assert!(mount::is_mount_point(&target)?);
        let publish = node.last_publish.lock().unwrap_or_else(|e| e.into_inner()).clone().expect("publish");
        assert_eq!(publish.publish_context.get("k").map(String::as_str), Some("v"));
        assert_eq!(VolData::load(target.parent().expect("parent"))?.map(|d| d.attachment_id), Some(name));

        // Another sync: already published, no CSI call.
        let calls = node.calls().len();
        vm.mount_volumes(&pod("data")).await?;
        assert_eq!(node.calls().len(), calls);

        vm.unmount_volumes("uid-1").await?;
        assert!(plugin.volumes_in_use().is_empty());
        assert!(mount::mounts_under(&root)?.is_empty());
        let calls = node.calls();
        assert!(calls.iter().any(|c| c.starts_with("NodeUnstageVolume")), "{calls:?}");
        Ok(())
    }

    #[test]
    fn errors_name_operation_and_pv() {
        let e = op_error(WAIT_FOR_ATTACH, "pvc-1")(Error::NotReady(
            "timed out waiting for external-attacher of hostpath.csi.kubelab.io CSI driver to attach volume vol-1".into(),
        ));
        assert_eq!(
            e.to_string(),
            "MountVolume.WaitForAttach failed for volume \"pvc-1\" : timed out waiting for external-attacher of hostpath.csi.kubelab.io CSI driver to attach volume vol-1"
        );
        let e = op_error(SET_UP, "pvc-1")(Error::Csi { op: "NodePublishVolume", source: tonic::Status::internal("boom") });
        assert_eq!(e.to_string(), "MountVolume.SetUp failed for volume \"pvc-1\" : rpc error: code = Internal desc = boom");
    }
}
