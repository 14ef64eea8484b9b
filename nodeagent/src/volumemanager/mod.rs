//! Mirrors kubelet's pkg/kubelet/volumemanager, with the in-tree plugins it drives
//! (pkg/volume/{emptydir,configmap,secret,hostpath,downwardapi,projected}) and the CSI plugin
//! (pkg/volume/csi, [`csi`]).
//!
//! Step 3 of SyncPod: before any container is created, every volume of the pod must exist on the
//! host, so that the runtime can bind-mount it into the containers. [`VolumeManager::mount_volumes`]
//! does that for one pod, and is called on *every* sync: it is idempotent, and it is also how a
//! changed configMap, secret or label reaches the files of a running pod (the
//! [`atomic_writer`] rewrites them only when they changed).
//!
//! | volume | on the host | read-only |
//! | --- | --- | --- |
//! | emptyDir | `pods/<uid>/volumes/kubernetes.io~empty-dir/<name>`; tmpfs if `medium: Memory` | no |
//! | configMap | `…/kubernetes.io~configmap/<name>`, a disk directory of atomic-writer files | yes |
//! | secret | `…/kubernetes.io~secret/<name>`, on tmpfs | yes |
//! | downwardAPI | `…/kubernetes.io~downward-api/<name>`, on tmpfs | yes |
//! | projected | `…/kubernetes.io~projected/<name>`, on tmpfs (with service account tokens from [`crate::token`]) | yes |
//! | hostPath | the path itself, after its `type` check | no |
//! | persistentVolumeClaim (a CSI PV) | `…/kubernetes.io~csi/<pv>/mount`, published there by the PV's CSI driver | if the claim source says so, or the PV is ReadOnlyMany |
//!
//! Kubelet runs a desired-state-of-world / actual-state-of-world reconciler in its own goroutine,
//! and SyncPod waits for it. Here the pod worker does the set-up itself, synchronously, and the
//! "actual state" is the disk and the mount table. A CSI volume ([`csi`]) waits in the sync for
//! its VolumeAttachment (for a short while: the next sync waits again), then is staged and
//! published through the driver the plugin manager ([`crate::pluginmanager`]) registered; its
//! teardown comes first in [`VolumeManager::unmount_volumes`], through the driver, before the
//! pod's volume directory is unmounted and removed.
//!
//! ## Implementation caveats
//! - configMaps and secrets are fetched with one GET each per sync (kubelet's default "Watch"
//!   change-detection strategy keeps a watch-backed cache instead).
//! - A static pod (no API server, `client: None`) cannot use configMap, secret or projected
//!   configMap/secret sources: the set-up fails saying so. No static pod can have a service
//!   account token (a token is bound to a pod object, and a static pod's mirror is not it), as in
//!   Kubernetes.
//! - No `fsGroup` ownership changes, no `defaultUser`/`user`, no SELinux relabelling, no
//!   `subPath` (that is the runtime side's job, at container creation).
//! - Projected `clusterTrustBundle`/`podCertificate` are not implemented (see [`projected`]).
//! - A refreshed service account token reaches the pod's file on the next sync of the pod (within
//!   the resync period), not from a reconciler loop of its own.
//! - A memory-backed emptyDir without `sizeLimit` (and every secret, downwardAPI and projected
//!   tmpfs) gets the kernel's default tmpfs size (half the RAM), not kubelet's pod-memory-limit
//!   sizing; tmpfs usage is not counted against the pod's memory limit by any eviction logic here.
//! - Only these seven volume types, and persistentVolumeClaims only of CSI PersistentVolumes in
//!   Filesystem mode; any other type (nfs, iscsi, an inline `csi` ephemeral volume, …) fails with
//!   an error naming the type. The CSI plugin has its own caveats ([`csi`]).

pub(crate) mod atomic_writer;
pub(crate) mod configmap;
pub(crate) mod csi;
pub(crate) mod downwardapi;
pub(crate) mod emptydir;
pub(crate) mod hostpath;
pub(crate) mod mount;
pub(crate) mod projected;
pub(crate) mod secret;

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::path::{Path, PathBuf};

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::authentication::v1::{BoundObjectReference, TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, ServiceAccountTokenProjection, Volume};
use kube::Api;
use serde::de::DeserializeOwned;
use tracing::{debug, info, warn};

use self::atomic_writer::{AtomicWriter, DEFAULT_MODE, Payload, file_mode};
use self::emptydir::Medium;
use self::projected::ProjectedObjects;
use crate::error::{Error, Result};
use crate::kubelet::getters;
use crate::token;

/// The operation that sets a volume up for a pod, as kubelet's events name it.
pub(crate) const SET_UP: &str = "MountVolume.SetUp";

/// Sets up and tears down the volumes of the pods on this node.
#[derive(Clone)]
pub(crate) struct VolumeManager {
    root_dir: PathBuf,
    /// `None` when the agent runs without an API server (static pods only).
    client: Option<kube::Client>,
    /// The service account tokens of projected volumes; `None` without an API server.
    tokens: Option<token::Manager>,
    /// This node's object, for its allocatable (downwardAPI `resourceFieldRef` of unset limits).
    node: Option<tokio::sync::watch::Receiver<Option<k8s_openapi::api::core::v1::Node>>>,
    /// The CSI volume plugin (`persistentVolumeClaim` volumes); `None` without an API server.
    csi: Option<csi::CsiPlugin>,
}

/// The volumes of one pod, ready on the host, by volume name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct MountedVolumes {
    volumes: BTreeMap<String, MountedVolume>,
}

impl MountedVolumes {
    pub(crate) fn get(&self, name: &str) -> Option<&MountedVolume> {
        self.volumes.get(name)
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.volumes.len()
    }
}

/// What the runtime bind-mounts into a container for a `volumeMount` of this volume.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct MountedVolume {
    pub(crate) host_path: PathBuf,
    /// configMap, secret, downwardAPI and projected volumes are read-only whatever the
    /// `volumeMount` says: the files belong to the atomic writer.
    pub(crate) read_only: bool,
}

/// What to do on the host for one volume, decided (and any API objects fetched) before the
/// blocking work starts.
enum Plan {
    EmptyDir {
        dir: PathBuf,
        medium: Medium,
        mode: u32,
    },
    HostPath {
        path: PathBuf,
        path_type: String,
    },
    /// A wrapped emptyDir filled by the atomic writer (configMap, secret, downwardAPI, projected).
    Files {
        dir: PathBuf,
        medium: Medium,
        payload: Payload,
    },
}

impl VolumeManager {
    pub(crate) fn new(root_dir: PathBuf, client: Option<kube::Client>) -> Self {
        let tokens = client.clone().map(token::Manager::new);
        VolumeManager { root_dir, client, tokens, node: None, csi: None }
    }

    /// Mount `persistentVolumeClaim` volumes through `plugin`.
    pub(crate) fn with_csi(mut self, plugin: csi::CsiPlugin) -> Self {
        self.csi = Some(plugin);
        self
    }

    /// Read the node's allocatable from `node` (for downwardAPI resource fields).
    pub(crate) fn with_node(mut self, node: tokio::sync::watch::Receiver<Option<k8s_openapi::api::core::v1::Node>>) -> Self {
        self.node = Some(node);
        self
    }

    fn node_allocatable(&self) -> downwardapi::Allocatable {
        self.node
            .as_ref()
            .and_then(|n| n.borrow().as_ref().and_then(|n| n.status.as_ref()).and_then(|s| s.allocatable.clone()))
            .unwrap_or_default()
    }

    /// Step 3 of SyncPod: every volume of the pod ready on the host; idempotent, so it is called
    /// on every sync — configMap/secret/downwardAPI content that changed is rewritten atomically.
    ///
    /// Every volume is attempted even when one fails (so the others are ready when the missing
    /// configMap appears); the first failure is returned as [`Error::Volume`], whose message is
    /// kubelet's FailedMount event text:
    /// `MountVolume.SetUp failed for volume "config" : configmap "app-config" not found`.
    pub(crate) async fn mount_volumes(&self, pod: &Pod) -> Result<MountedVolumes> {
        let uid = pod_uid(pod)?;
        let mut mounted = MountedVolumes::default();
        let mut first_error = None;
        for volume in pod.spec.iter().flat_map(|s| s.volumes.iter().flatten()) {
            match self.set_up(pod, uid, volume).await {
                Ok(m) => {
                    mounted.volumes.insert(volume.name.clone(), m);
                }
                Err(source) => {
                    warn!(target: "kubelet::volumes", pod = %uid, volume = %volume.name, error = %source, "MountVolume.SetUp failed");
                    // A CSI volume's error already names its operation and its PersistentVolume.
                    let error = match source {
                        e @ Error::Volume { .. } => e,
                        source => Error::Volume { operation: SET_UP, volume: volume.name.clone(), source: Box::new(source) },
                    };
                    first_error.get_or_insert(error);
                }
            }
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(mounted),
        }
    }

    /// After the pod's containers are gone: unmount tmpfs volumes, remove the volumes dir, forget
    /// the pod's service account tokens. hostPath volumes are the node's own paths and are left
    /// alone. Idempotent.
    pub(crate) async fn unmount_volumes(&self, pod_uid: &str) -> Result<()> {
        if let Some(tokens) = &self.tokens {
            tokens.delete_service_account_token(pod_uid);
        }
        // CSI volumes first, through their driver (NodeUnpublish, NodeUnstage): unmounting them
        // behind the driver's back would leave it believing they are in use.
        if let Some(csi) = &self.csi {
            csi.tear_down_pod(pod_uid).await?;
        }
        let dir = getters::pod_volumes_dir(&self.root_dir, pod_uid);
        let uid = pod_uid.to_string();
        run_blocking(dir.clone(), move || {
            tear_down_dir(&dir)?;
            info!(target: "kubelet::volumes", pod = %uid, "UnmountVolume.TearDown succeeded");
            Ok(())
        })
        .await
    }

    async fn set_up(&self, pod: &Pod, uid: &str, volume: &Volume) -> Result<MountedVolume> {
        if let Some(claim) = &volume.persistent_volume_claim {
            let Some(csi) = &self.csi else {
                return Err(Error::VolumeSpec(format!(
                    "persistentvolumeclaim {:?}: the node agent runs without an API server, so static pods cannot use persistent volumes",
                    claim.claim_name
                )));
            };
            return csi.set_up(pod, uid, claim).await;
        }
        let plan = self.plan(pod, uid, volume).await?;
        let name = volume.name.clone();
        let uid = uid.to_string();
        let key = match &plan {
            Plan::EmptyDir { dir, .. } | Plan::Files { dir, .. } => dir.clone(),
            Plan::HostPath { path, .. } => path.clone(),
        };
        run_blocking(key, move || {
            let mounted = execute(plan)?;
            debug!(target: "kubelet::volumes", pod = %uid, volume = %name, path = %mounted.host_path.display(), "volume ready");
            Ok(mounted)
        })
        .await
    }

    /// Decides what one volume needs, fetching the configMaps and secrets it names.
    async fn plan(&self, pod: &Pod, uid: &str, volume: &Volume) -> Result<Plan> {
        let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
        let dir = |plugin: &str| getters::pod_volume_dir(&self.root_dir, uid, plugin, &volume.name);
        if let Some(empty_dir) = &volume.empty_dir {
            let size_limit = match &empty_dir.size_limit {
                Some(q) => Some(
                    apimachinery::resource::parse_quantity_units(&q.0)
                        .ok_or_else(|| Error::VolumeSpec(format!("emptyDir sizeLimit {:?} is not a quantity", q.0)))?,
                ),
                None => None,
            };
            let medium = Medium::parse(empty_dir.medium.as_deref(), size_limit)?;
            let mode = file_mode(empty_dir.mode, emptydir::DEFAULT_MODE)?;
            return Ok(Plan::EmptyDir { dir: dir(emptydir::PLUGIN_NAME), medium, mode });
        }
        if let Some(host_path) = &volume.host_path {
            return Ok(Plan::HostPath {
                path: PathBuf::from(&host_path.path),
                path_type: host_path.type_.clone().unwrap_or_default(),
            });
        }
        if let Some(source) = &volume.config_map {
            let optional = source.optional.unwrap_or(false);
            let default_mode = file_mode(source.default_mode, DEFAULT_MODE)?;
            let payload = match self.get::<ConfigMap>(namespace, &source.name, "configmap").await? {
                Some(cm) => configmap::make_payload(source.items.as_deref(), &cm, default_mode, optional)?,
                None if optional => Payload::new(),
                None => return Err(configmap::not_found(&source.name)),
            };
            return Ok(Plan::Files { dir: dir(configmap::PLUGIN_NAME), medium: Medium::Disk, payload });
        }
        if let Some(source) = &volume.secret {
            let name = source
                .secret_name
                .as_deref()
                .ok_or_else(|| Error::VolumeSpec("secret volume without secretName".into()))?;
            let optional = source.optional.unwrap_or(false);
            let default_mode = file_mode(source.default_mode, DEFAULT_MODE)?;
            let payload = match self.get::<Secret>(namespace, name, "secret").await? {
                Some(s) => secret::make_payload(source.items.as_deref(), &s, default_mode, optional)?,
                None if optional => Payload::new(),
                None => return Err(secret::not_found(name)),
            };
            return Ok(Plan::Files {
                dir: dir(secret::PLUGIN_NAME),
                medium: Medium::Memory { size_limit: None },
                payload,
            });
        }
        if let Some(source) = &volume.downward_api {
            let default_mode = file_mode(source.default_mode, DEFAULT_MODE)?;
            let items = source.items.as_deref().unwrap_or_default();
            let payload = downwardapi::collect_data(items, pod, &self.node_allocatable(), default_mode)?;
            return Ok(Plan::Files {
                dir: dir(downwardapi::PLUGIN_NAME),
                medium: Medium::Memory { size_limit: None },
                payload,
            });
        }
        if let Some(source) = &volume.projected {
            let default_mode = file_mode(source.default_mode, DEFAULT_MODE)?;
            let sources = source.sources.as_deref().unwrap_or_default();
            let mut objects = ProjectedObjects { node_allocatable: self.node_allocatable(), ..Default::default() };
            for s in sources {
                if let Some(cm) = &s.config_map
                    && let Some(object) = self.get::<ConfigMap>(namespace, &cm.name, "configmap").await?
                {
                    objects.config_maps.insert(cm.name.clone(), object);
                }
                if let Some(sec) = &s.secret
                    && let Some(object) = self.get::<Secret>(namespace, &sec.name, "secret").await?
                {
                    objects.secrets.insert(sec.name.clone(), object);
                }
                if let Some(projection) = &s.service_account_token {
                    let token = self.service_account_token(pod, projection).await?;
                    objects.tokens.insert(projection.path.clone(), token);
                }
            }
            let payload = projected::collect_data(&volume.name, sources, pod, default_mode, &objects)?;
            return Ok(Plan::Files {
                dir: dir(projected::PLUGIN_NAME),
                medium: Medium::Memory { size_limit: None },
                payload,
            });
        }
        if volume.csi.is_some() {
            return Err(Error::VolumeSpec(
                "volume type csi (an inline CSI ephemeral volume) is not supported by kubelab: use a persistentVolumeClaim".into(),
            ));
        }
        Err(Error::VolumeSpec(format!("volume type {} is not supported by kubelab", volume_type(volume))))
    }

    /// A token of the pod's service account, bound to the pod, as `projection` asks (kubelet's
    /// projected volume mounter): one audience or the API server's, the projection's lifetime.
    async fn service_account_token(&self, pod: &Pod, projection: &ServiceAccountTokenProjection) -> Result<String> {
        let Some(tokens) = &self.tokens else {
            return Err(Error::VolumeSpec(
                "serviceAccountToken: the node agent runs without an API server, so static pods cannot have service account tokens".into(),
            ));
        };
        if api::pod::is_static_pod(pod) {
            return Err(Error::VolumeSpec("serviceAccountToken: static pods cannot have service account tokens".into()));
        }
        let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
        let account = pod.spec.as_ref().and_then(|s| s.service_account_name.as_deref()).filter(|n| !n.is_empty()).unwrap_or("default");
        let request = TokenRequest {
            spec: Some(TokenRequestSpec {
                audiences: Some(projection.audience.iter().filter(|a| !a.is_empty()).cloned().collect()),
                expiration_seconds: projection.expiration_seconds,
                bound_object_ref: Some(BoundObjectReference {
                    api_version: Some("v1".into()),
                    kind: Some("Pod".into()),
                    name: pod.metadata.name.clone(),
                    uid: pod.metadata.uid.clone(),
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        let answer = tokens.get_service_account_token(namespace, account, &request).await?;
        answer.status.and_then(|s| s.token).ok_or_else(|| {
            Error::Invalid(format!("the token request for service account {namespace}/{account} was answered without a token"))
        })
    }

    /// One GET; `Ok(None)` when the object does not exist.
    async fn get<K>(&self, namespace: &str, name: &str, kind: &str) -> Result<Option<K>>
    where
        K: kube::Resource<Scope = NamespaceResourceScope> + Clone + Debug + DeserializeOwned,
        <K as kube::Resource>::DynamicType: Default,
    {
        let Some(client) = &self.client else {
            return Err(Error::VolumeSpec(format!(
                "{kind} {name:?}: the node agent runs without an API server, so static pods cannot use {kind}s"
            )));
        };
        Ok(Api::<K>::namespaced(client.clone(), namespace).get_opt(name).await?)
    }
}

/// The blocking half of a set-up.
fn execute(plan: Plan) -> Result<MountedVolume> {
    match plan {
        Plan::EmptyDir { dir, medium, mode } => {
            emptydir::set_up(&dir, medium, mode)?;
            Ok(MountedVolume { host_path: dir, read_only: false })
        }
        Plan::HostPath { path, path_type } => {
            hostpath::check_type(&path, &path_type)?;
            Ok(MountedVolume { host_path: path, read_only: false })
        }
        Plan::Files { dir, medium, payload } => {
            write_files(&dir, medium, &payload)?;
            Ok(MountedVolume { host_path: dir, read_only: true })
        }
    }
}

/// A wrapped emptyDir on `medium`, holding exactly `payload` (through the atomic writer). Returns
/// whether new content was written. Blocking; this is the part of the configMap, secret,
/// downwardAPI and projected plugins that needs no API server.
pub(crate) fn write_files(dir: &Path, medium: Medium, payload: &Payload) -> Result<bool> {
    emptydir::set_up(dir, medium, emptydir::DEFAULT_MODE)?;
    let written = AtomicWriter::new(dir).write(payload)?;
    if written {
        info!(target: "kubelet::volumes", dir = %dir.display(), files = payload.len(), "wrote volume content");
    }
    Ok(written)
}

/// Unmounts everything below `dir` (deepest first), then removes it; refuses to remove through a
/// mount that would not go away. Blocking.
fn tear_down_dir(dir: &Path) -> Result<()> {
    if !dir.exists() {
        return Ok(());
    }
    for mount_point in mount::mounts_under(dir)? {
        mount::unmount(&mount_point)?;
    }
    let left = mount::mounts_under(dir)?;
    if !left.is_empty() {
        return Err(Error::NotReady(format!("{} still has mounts after unmounting: {left:?}", dir.display())));
    }
    match std::fs::remove_dir_all(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::io(dir, e)),
    }
}

/// Runs blocking file and mount work off the async executor.
async fn run_blocking<T: Send + 'static>(path: PathBuf, f: impl FnOnce() -> Result<T> + Send + 'static) -> Result<T> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| Error::io(path, std::io::Error::other(format!("volume task failed: {e}"))))?
}

/// The pod's UID, refused if it could not name the pod's directory.
fn pod_uid(pod: &Pod) -> Result<&str> {
    match api::pod::uid(pod) {
        uid if !uid.is_empty() && !uid.contains('/') && uid != "." && uid != ".." => Ok(uid),
        _ => Err(Error::UnusableUid(format!("pod has no usable UID: {:?}", pod.metadata.uid))),
    }
}

/// The volume's type as the API spells it (`persistentVolumeClaim`, `nfs`, …): the one field
/// besides `name` that is set.
fn volume_type(volume: &Volume) -> String {
    match serde_json::to_value(volume) {
        Ok(serde_json::Value::Object(fields)) => {
            fields.keys().find(|k| *k != "name").cloned().unwrap_or_else(|| "<none>".into())
        }
        _ => "<unknown>".into(),
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{
        ConfigMapVolumeSource, DownwardAPIVolumeFile, DownwardAPIVolumeSource, EmptyDirVolumeSource,
        HostPathVolumeSource, NFSVolumeSource, ObjectFieldSelector, PodSpec,
    };
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    fn pod(uid: &str, volumes: Vec<Volume>) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some("p".into()),
                namespace: Some("ns".into()),
                uid: Some(uid.into()),
                labels: Some(BTreeMap::from([("app".into(), "web".into())])),
                ..Default::default()
            },
            spec: Some(PodSpec { volumes: Some(volumes), ..Default::default() }),
            ..Default::default()
        }
    }

    fn empty_dir(name: &str, medium: Option<&str>, size: Option<&str>) -> Volume {
        Volume {
            name: name.into(),
            empty_dir: Some(EmptyDirVolumeSource {
                medium: medium.map(Into::into),
                size_limit: size.map(|s| Quantity(s.into())),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn tmpfs_options(path: &Path) -> Result<Option<String>> {
        let path = std::fs::canonicalize(path).map_err(|e| Error::io(path, e))?;
        Ok(mount::mounts()?
            .into_iter()
            .find(|m| m.mount_point == path && m.fs_type == "tmpfs")
            .map(|m| m.super_options))
    }

    /// Unmounts what a failed test left mounted below a temporary directory.
    struct TearDownOnDrop(PathBuf);

    impl Drop for TearDownOnDrop {
        fn drop(&mut self) {
            let _ = tear_down_dir(&self.0);
        }
    }

    /// We are root on the test machines: the Memory emptyDir and the downward API volume are real
    /// tmpfs mounts, set up once however often the pod syncs, and gone after the tear-down.
    #[tokio::test]
    async fn mounts_and_unmounts_real_volumes() -> Result<()> {
        let root = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        let host = root.path().join("host/data");
        let vm = VolumeManager::new(root.path().join("agent"), None);
        let _unmount = TearDownOnDrop(root.path().join("agent"));
        let p = pod(
            "uid-1",
            vec![
                empty_dir("scratch", None, None),
                empty_dir("shm", Some("Memory"), Some("1Mi")),
                Volume {
                    name: "data".into(),
                    host_path: Some(HostPathVolumeSource {
                        path: host.display().to_string(),
                        type_: Some("DirectoryOrCreate".into()),
                    }),
                    ..Default::default()
                },
                Volume {
                    name: "podinfo".into(),
                    downward_api: Some(DownwardAPIVolumeSource {
                        items: Some(vec![DownwardAPIVolumeFile {
                            path: "labels".into(),
                            field_ref: Some(ObjectFieldSelector {
                                field_path: "metadata.labels".into(),
                                api_version: None,
                            }),
                            ..Default::default()
                        }]),
                        ..Default::default()
                    }),
                    ..Default::default()
                },
            ],
        );
        let first = vm.mount_volumes(&p).await?;
        let second = vm.mount_volumes(&p).await?;
        assert_eq!(first, second);
        assert_eq!(first.len(), 4);

        let volumes_dir = getters::pod_volumes_dir(&root.path().join("agent"), "uid-1");
        let scratch = first.get("scratch").expect("scratch");
        assert_eq!(scratch.host_path, volumes_dir.join("kubernetes.io~empty-dir/scratch"));
        assert!(!scratch.read_only);
        let shm = first.get("shm").expect("shm");
        let options = tmpfs_options(&shm.host_path)?.expect("shm is a tmpfs");
        assert!(options.contains("size=1024k"), "{options}");
        assert_eq!(first.get("data").map(|v| v.host_path.clone()), Some(host.clone()));
        assert!(host.is_dir());
        let podinfo = first.get("podinfo").expect("podinfo");
        assert!(podinfo.read_only);
        assert!(tmpfs_options(&podinfo.host_path)?.is_some(), "downward API volumes are memory-backed");
        let labels = std::fs::read_to_string(podinfo.host_path.join("labels")).map_err(|e| Error::io("labels", e))?;
        assert_eq!(labels, "app=\"web\"");
        // Two syncs, still one mount each.
        assert_eq!(mount::mounts_under(&volumes_dir)?.len(), 2);

        vm.unmount_volumes("uid-1").await?;
        assert!(mount::mounts_under(&root.path().join("agent"))?.is_empty());
        assert!(!volumes_dir.exists());
        assert!(host.is_dir(), "hostPath content is the node's, never removed");
        vm.unmount_volumes("uid-1").await?; // idempotent
        Ok(())
    }

    #[tokio::test]
    async fn errors_name_the_volume() -> Result<()> {
        let root = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        let vm = VolumeManager::new(root.path().to_path_buf(), None);
        let file = root.path().join("a-file");
        std::fs::write(&file, "x").map_err(|e| Error::io(&file, e))?;
        let p = pod(
            "uid-2",
            vec![
                Volume {
                    name: "logs".into(),
                    host_path: Some(HostPathVolumeSource {
                        path: file.display().to_string(),
                        type_: Some("Directory".into()),
                    }),
                    ..Default::default()
                },
                empty_dir("ok", None, None),
                Volume { name: "share".into(), nfs: Some(NFSVolumeSource::default()), ..Default::default() },
            ],
        );
        let err = vm.mount_volumes(&p).await.expect_err("hostPath is a file");
        assert_eq!(
            err.to_string(),
            format!(
                "MountVolume.SetUp failed for volume \"logs\" : hostPath type check failed: {} is not a directory",
                file.display()
            )
        );
        assert!(matches!(&err, Error::Volume { source, .. } if matches!(**source, Error::NotReady(_))));
        // The volumes after the failing one were still set up.
        assert!(getters::pod_volume_dir(root.path(), "uid-2", emptydir::PLUGIN_NAME, "ok").is_dir());

        let p = pod(
            "uid-2",
            vec![Volume { name: "share".into(), nfs: Some(NFSVolumeSource::default()), ..Default::default() }],
        );
        let err = vm.mount_volumes(&p).await.expect_err("nfs");
        assert_eq!(
            err.to_string(),
            "MountVolume.SetUp failed for volume \"share\" : volume type nfs is not supported by kubelab"
        );

        let p = pod(
            "uid-2",
            vec![Volume {
                name: "cfg".into(),
                config_map: Some(ConfigMapVolumeSource { name: "app-config".into(), ..Default::default() }),
                ..Default::default()
            }],
        );
        let err = vm.mount_volumes(&p).await.expect_err("no API server");
        assert!(
            err.to_string().starts_with("MountVolume.SetUp failed for volume \"cfg\" : configmap \"app-config\""),
            "{err}"
        );
        Ok(())
    }

    /// The configMap/secret writing path without an API server: a secret's payload lands on a
    /// tmpfs, an update rewrites it, an unchanged one does not.
    #[test]
    fn secret_files_on_tmpfs() -> Result<()> {
        use std::os::unix::fs::PermissionsExt;

        use k8s_openapi::ByteString;
        let root = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        let dir = root.path().join("kubernetes.io~secret/creds");
        let mut object = Secret {
            data: Some(BTreeMap::from([("password".to_string(), ByteString(b"hunter2".to_vec()))])),
            ..Default::default()
        };
        let payload = secret::make_payload(None, &object, 0o400, false)?;
        let _unmount = TearDownOnDrop(root.path().to_path_buf());
        let memory = Medium::Memory { size_limit: None };
        assert!(write_files(&dir, memory, &payload)?);
        assert!(tmpfs_options(&dir)?.is_some());
        assert!(!write_files(&dir, memory, &payload)?, "unchanged");
        object.data = Some(BTreeMap::from([("password".to_string(), ByteString(b"correct horse".to_vec()))]));
        let updated = secret::make_payload(None, &object, 0o400, false)?;
        assert!(write_files(&dir, memory, &updated)?);
        let text = std::fs::read_to_string(dir.join("password")).map_err(|e| Error::io("password", e))?;
        assert_eq!(text, "correct horse");
        let mode = std::fs::metadata(dir.join("password")).map_err(|e| Error::io("password", e))?.permissions().mode();
        assert_eq!(mode & 0o777, 0o400);
        Ok(())
    }

    #[test]
    fn volume_type_names() {
        let v = Volume { name: "x".into(), nfs: Some(NFSVolumeSource::default()), ..Default::default() };
        assert_eq!(volume_type(&v), "nfs");
        assert_eq!(volume_type(&Volume { name: "x".into(), ..Default::default() }), "<none>");
    }
}
