//! Mirrors pkg/controller/volume/persistentvolume/pv_controller_base.go: the PersistentVolume
//! binder's watches, queues and workers, and the writes that carry out [`super::pv_controller`]'s
//! decisions.
//!
//! 1. Watch PersistentVolumes, PersistentVolumeClaims, StorageClasses and pods into caches.
//! 2. A volume added or changed queues itself on the volume queue; a volume deleted queues its
//!    claim (which becomes Lost at once rather than at the next resync). A claim added or
//!    changed queues itself on the claim queue; a claim deleted queues its volume (which is
//!    Released).
//! 3. Every [`SYNC_PERIOD`] (`--pvclaimbinder-sync-period`) every volume and claim is queued
//!    again: a claim waiting for a volume finds one that appeared, and the events of a waiting
//!    claim repeat, as in Kubernetes.
//! 4. One worker syncs volumes, one syncs claims (as Kubernetes' `volumeWorker` and
//!    `claimWorker`). Every write is an update with the resourceVersion read, so a decision taken
//!    on a stale cache fails with a conflict and is retried with backoff.

use std::sync::Arc;
use std::time::Duration;

use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::{ObjectReference, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};

use super::pv_controller::{
    ClaimAction, Reclaim, VolumeAction, bind_claim_to_volume, bind_volume_to_claim, claim_status, claim_with_provisioner, external_provisioning_message, reclaim, sync_claim,
    sync_volume, unbind_volume, volume_with_phase,
};
use super::util::*;
use crate::error::{Error, Result};
use crate::workqueue::WorkQueue;

const TARGET: &str = "controllers::persistentvolume";
/// `--pvclaimbinder-sync-period`: how often every volume and claim is synced again.
pub const SYNC_PERIOD: Duration = Duration::from_secs(15);
/// The component its events name (Kubernetes' `persistentvolume-controller`).
pub const COMPONENT: &str = "persistentvolume-controller";

pub struct PersistentVolumeController {
    /// Lists and watches for the caches: the controller manager's own client (see
    /// [`crate::controller_context`]).
    informers: kube::Client,
    /// Everything else: the controller's own client (`persistent-volume-binder`).
    client: kube::Client,
    recorder: client::record::EventRecorder,
}

struct Caches {
    volumes: Store<PersistentVolume>,
    claims: Store<PersistentVolumeClaim>,
    classes: Store<StorageClass>,
    pods: Store<Pod>,
}

fn claim_reference(claim: &PersistentVolumeClaim) -> ObjectReference {
    client::record::object_reference("v1", "PersistentVolumeClaim", &claim.metadata)
}

fn volume_reference(volume: &PersistentVolume) -> ObjectReference {
    client::record::object_reference("v1", "PersistentVolume", &volume.metadata)
}

impl PersistentVolumeController {
    pub fn new(informers: kube::Client, client: kube::Client) -> Self {
        let recorder = client::record::EventRecorder::new(client.clone(), COMPONENT, None);
        Self { informers, client, recorder }
    }

    /// Steps 1–4.
    pub async fn run(self) -> Result<()> {
        // Step 1.
        let (volumes, volumes_w) = reflector::store::<PersistentVolume>();
        let (claims, claims_w) = reflector::store::<PersistentVolumeClaim>();
        let (classes, classes_w) = reflector::store::<StorageClass>();
        let (pods, pods_w) = reflector::store::<Pod>();
        let volume_queue: WorkQueue<String> = WorkQueue::new();
        let claim_queue: WorkQueue<String> = WorkQueue::new();
        let c = self.informers.clone();
        let informers = async {
            // Step 2.
            let on_volume = |v: &PersistentVolume, deleted: bool| match (deleted, claim_ref(v)) {
                (false, _) => volume_queue.add(v.metadata.name.clone().unwrap_or_default()),
                (true, Some(r)) => claim_queue.add(claim_ref_key(r)),
                (true, None) => {}
            };
            let on_claim = |pvc: &PersistentVolumeClaim, deleted: bool| {
                if !deleted {
                    claim_queue.add(claim_key(pvc));
                } else if !claim_volume_name(pvc).is_empty() {
                    volume_queue.add(claim_volume_name(pvc).to_string());
                }
            };
            tokio::join!(
                drive("persistentvolumes", reflector::reflector(volumes_w, watcher(Api::<PersistentVolume>::all(c.clone()), watcher::Config::default())), on_volume),
                drive("persistentvolumeclaims", reflector::reflector(claims_w, watcher(Api::<PersistentVolumeClaim>::all(c.clone()), watcher::Config::default())), on_claim),
                drive("storageclasses", reflector::reflector(classes_w, watcher(Api::<StorageClass>::all(c.clone()), watcher::Config::default())), |_: &StorageClass, _| {}),
                drive("pods", reflector::reflector(pods_w, watcher(Api::<Pod>::all(c.clone()), watcher::Config::default())), |_: &Pod, _| {}),
            );
        };
        let caches = Caches { volumes, claims, classes, pods };
        let work = async {
            for ready in [caches.volumes.wait_until_ready().await, caches.claims.wait_until_ready().await, caches.classes.wait_until_ready().await, caches.pods.wait_until_ready().await] {
                if ready.is_err() {
                    return;
                }
            }
            tracing::info!(target: TARGET, "caches synced; binding PersistentVolumes and claims");
            // Step 3.
            let resync = async {
                loop {
                    for v in caches.volumes.state() {
                        volume_queue.add(v.metadata.name.clone().unwrap_or_default());
                    }
                    for pvc in caches.claims.state() {
                        claim_queue.add(claim_key(&pvc));
                    }
                    tokio::time::sleep(SYNC_PERIOD).await;
                }
            };
            // Step 4.
            let volume_worker = async {
                while let Some(name) = volume_queue.get().await {
                    match self.sync_volume(&caches, &name, &claim_queue).await {
                        Ok(()) => volume_queue.forget(&name),
                        Err(e) => {
                            tracing::warn!(target: TARGET, volume = %name, error = %e, "volume sync failed; will retry");
                            volume_queue.add_rate_limited(name.clone());
                        }
                    }
                    volume_queue.done(&name);
                }
            };
            let claim_worker = async {
                while let Some(key) = claim_queue.get().await {
                    match self.sync_claim(&caches, &key).await {
                        Ok(()) => claim_queue.forget(&key),
                        Err(e) => {
                            tracing::warn!(target: TARGET, claim = %key, error = %e, "claim sync failed; will retry");
                            claim_queue.add_rate_limited(key.clone());
                        }
                    }
                    claim_queue.done(&key);
                }
            };
            tokio::join!(resync, volume_worker, claim_worker);
        };
        tokio::select! {
            () = informers => {}
            () = work => {}
        }
        Ok(())
    }

    /// syncClaim for the claim `<namespace>/<name>`, carried out.
    async fn sync_claim(&self, caches: &Caches, key: &str) -> Result<()> {
        let (ns, name) = key.split_once('/').unwrap_or(("", key));
        let Some(claim) = caches.claims.get(&ObjectRef::new(name).within(ns)) else { return Ok(()) };
        let volumes: Vec<Arc<PersistentVolume>> = caches.volumes.state();
        let volume_refs: Vec<&PersistentVolume> = volumes.iter().map(Arc::as_ref).collect();
        let classes: Vec<Arc<StorageClass>> = caches.classes.state();
        let class_refs: Vec<&StorageClass> = classes.iter().map(Arc::as_ref).collect();
        let pods: Vec<Arc<Pod>> = caches.pods.state().into_iter().filter(|p| p.metadata.namespace.as_deref() == Some(ns)).collect();
        let pod_refs: Vec<&Pod> = pods.iter().map(Arc::as_ref).collect();
        let action = sync_claim(&claim, &volume_refs, &class_refs, &pod_refs);
        tracing::debug!(target: TARGET, claim = %key, ?action, "syncClaim");
        match action {
            ClaimAction::Bind { volume } => {
                let Some(v) = volumes.iter().find(|v| v.metadata.name.as_deref() == Some(volume.as_str())) else { return Ok(()) };
                self.bind(v, &claim).await
            }
            ClaimAction::AssignDefaultClass { class } => {
                tracing::info!(target: TARGET, claim = %key, class = %class, "assigning the default StorageClass");
                let mut updated = (*claim).clone();
                updated.spec.get_or_insert_with(Default::default).storage_class_name = Some(class);
                self.claims(ns).replace(name, &PostParams::default(), &updated).await.map_err(|e| Error::Message(format!("can't update PersistentVolumeClaim[{key:?}]: {e}")))?;
                Ok(())
            }
            ClaimAction::ProvisionExternal { provisioner } => {
                let claim = match claim_with_provisioner(&claim, &provisioner) {
                    Some(updated) => match self.claims(ns).replace(name, &PostParams::default(), &updated).await {
                        Ok(c) => c,
                        Err(e) => {
                            self.recorder.event(claim_reference(&claim), client::record::WARNING, "ProvisioningFailed", format!("Error saving claim: {e}"));
                            return Err(Error::Kube(e));
                        }
                    },
                    None => (*claim).clone(),
                };
                self.recorder.event(claim_reference(&claim), client::record::NORMAL, "ExternalProvisioning", external_provisioning_message(&provisioner));
                Ok(())
            }
            ClaimAction::Pending { event } => {
                if let Some(ev) = event {
                    self.recorder.event(claim_reference(&claim), ev.type_, ev.reason, ev.message);
                }
                self.write_claim_status(&claim, CLAIM_PENDING, None).await.map(|_| ())
            }
            ClaimAction::Lost { reason, message } => {
                if claim_phase(&claim) == CLAIM_LOST {
                    return Ok(());
                }
                let updated = self.write_claim_status(&claim, CLAIM_LOST, None).await?;
                self.recorder.event(claim_reference(&updated), client::record::WARNING, reason, message);
                Ok(())
            }
            ClaimAction::Fail { event, error } => {
                if let Some(ev) = event {
                    self.recorder.event(claim_reference(&claim), ev.type_, ev.reason, ev.message);
                }
                Err(Error::Message(error))
            }
        }
    }

    /// bind: the volume's claimRef, its phase Bound, the claim's volumeName and annotations, its
    /// status Bound — each written only when it is not so already, each on the object the
    /// previous write returned.
    async fn bind(&self, volume: &PersistentVolume, claim: &PersistentVolumeClaim) -> Result<()> {
        let (ns, claim_name) = (claim.metadata.namespace.clone().unwrap_or_default(), claim.metadata.name.clone().unwrap_or_default());
        let volume_name = volume.metadata.name.clone().unwrap_or_default();
        let mut volume = volume.clone();
        if let Some(updated) = bind_volume_to_claim(&volume, claim) {
            volume = self.volumes().replace(&volume_name, &PostParams::default(), &updated).await.map_err(Error::Kube)?;
        }
        if let Some(updated) = volume_with_phase(&volume, VOLUME_BOUND, None, Timestamp::now()) {
            volume = self.volumes().replace_status(&volume_name, &PostParams::default(), &updated).await.map_err(Error::Kube)?;
        }
        let mut claim = claim.clone();
        if let Some(updated) = bind_claim_to_volume(&claim, &volume) {
            claim = self.claims(&ns).replace(&claim_name, &PostParams::default(), &updated).await.map_err(Error::Kube)?;
        }
        self.write_claim_status(&claim, CLAIM_BOUND, Some(&volume)).await?;
        tracing::info!(target: TARGET, claim = %format!("{ns}/{claim_name}"), volume = %volume_name, "bound");
        Ok(())
    }

    /// updateClaimStatus: written only when it changes; the claim as it is after.
    async fn write_claim_status(&self, claim: &PersistentVolumeClaim, phase: &str, volume: Option<&PersistentVolume>) -> Result<PersistentVolumeClaim> {
        let Some(status) = claim_status(claim, phase, volume) else { return Ok(claim.clone()) };
        let mut updated = claim.clone();
        updated.status = Some(status);
        let (ns, name) = (claim.metadata.namespace.clone().unwrap_or_default(), claim.metadata.name.clone().unwrap_or_default());
        self.claims(&ns).replace_status(&name, &PostParams::default(), &updated).await.map_err(Error::Kube)
    }

    /// updateVolumePhase(WithEvent): written only when the phase changes; the event then.
    async fn write_volume_phase(&self, volume: &PersistentVolume, phase: &str, event: Option<(&'static str, &'static str, String)>) -> Result<PersistentVolume> {
        let message = event.as_ref().map(|(_, _, m)| m.as_str());
        let Some(updated) = volume_with_phase(volume, phase, message, Timestamp::now()) else { return Ok(volume.clone()) };
        let name = volume.metadata.name.clone().unwrap_or_default();
        let written = self.volumes().replace_status(&name, &PostParams::default(), &updated).await.map_err(Error::Kube)?;
        if let Some((type_, reason, message)) = event {
            self.recorder.event(volume_reference(&written), type_, reason, message);
        }
        Ok(written)
    }

    /// syncVolume for the volume `name`, carried out.
    async fn sync_volume(&self, caches: &Caches, name: &str, claim_queue: &WorkQueue<String>) -> Result<()> {
        let Some(volume) = caches.volumes.get(&ObjectRef::new(name)) else { return Ok(()) };
        let claim = self.claim_of(caches, &volume).await?;
        let action = sync_volume(&volume, claim.as_ref());
        tracing::debug!(target: TARGET, volume = %name, ?action, "syncVolume");
        match action {
            VolumeAction::Phase(phase) => self.write_volume_phase(&volume, phase, None).await.map(|_| ()),
            VolumeAction::QueueClaim(key) => {
                claim_queue.add(key);
                Ok(())
            }
            VolumeAction::VolumeModeMismatch { volume_message, claim_message } => {
                self.recorder.event(volume_reference(&volume), client::record::WARNING, "VolumeMismatch", volume_message);
                if let Some(c) = &claim {
                    self.recorder.event(claim_reference(c), client::record::WARNING, "VolumeMismatch", claim_message);
                }
                Ok(())
            }
            VolumeAction::Unbind => {
                let written = self.volumes().replace(name, &PostParams::default(), &unbind_volume(&volume)).await.map_err(Error::Kube)?;
                self.write_volume_phase(&written, VOLUME_AVAILABLE, None).await.map(|_| ())
            }
            VolumeAction::Release => {
                let mut volume = (*volume).clone();
                let phase = volume_phase(&volume);
                if phase != VOLUME_RELEASED && phase != VOLUME_FAILED {
                    tracing::info!(target: TARGET, volume = %name, policy = %reclaim_policy(&volume), "volume is released and its reclaim policy will be carried out");
                    volume = self.write_volume_phase(&volume, VOLUME_RELEASED, None).await?;
                }
                self.reclaim(&volume).await
            }
        }
    }

    /// The claim a volume's claimRef names: from the cache, and — as Kubernetes does, so that a
    /// volume is never released because of a cache that lags — from the API server when the
    /// cache has none (unless the volume is Released or Failed already) or one with another uid.
    async fn claim_of(&self, caches: &Caches, volume: &PersistentVolume) -> Result<Option<PersistentVolumeClaim>> {
        let Some(r) = claim_ref(volume) else { return Ok(None) };
        if r.uid.as_deref().is_none_or(str::is_empty) {
            return Ok(None);
        }
        let (ns, name) = (r.namespace.clone().unwrap_or_default(), r.name.clone().unwrap_or_default());
        let cached = caches.claims.get(&ObjectRef::new(&name).within(&ns)).map(|c| (*c).clone());
        let phase = volume_phase(volume);
        let must_ask = match &cached {
            None => phase != VOLUME_RELEASED && phase != VOLUME_FAILED,
            Some(c) => c.metadata.uid != r.uid,
        };
        if !must_ask {
            return Ok(cached);
        }
        self.claims(&ns).get_opt(&name).await.map_err(Error::Kube)
    }

    /// reclaimVolume, for a Released volume.
    async fn reclaim(&self, volume: &PersistentVolume) -> Result<()> {
        let name = volume.metadata.name.as_deref().unwrap_or_default();
        match reclaim(volume) {
            Reclaim::Nothing => Ok(()),
            Reclaim::External { provisioner } => {
                tracing::debug!(target: TARGET, volume = %name, provisioner = %provisioner, "deletion is the external provisioner's");
                Ok(())
            }
            // A volume being deleted already is left to go.
            Reclaim::Fail { .. } if volume.metadata.deletion_timestamp.is_some() => Ok(()),
            Reclaim::Fail { reason, message } => self.write_volume_phase(volume, VOLUME_FAILED, Some((client::record::WARNING, reason, message))).await.map(|_| ()),
        }
    }

    fn volumes(&self) -> Api<PersistentVolume> {
        Api::all(self.client.clone())
    }

    fn claims(&self, ns: &str) -> Api<PersistentVolumeClaim> {
        Api::namespaced(self.client.clone(), ns)
    }
}

/// Runs one informer's stream into `on_change` (the object, and whether it was deleted); the
/// watcher retries by itself (with backoff), errors are logged.
async fn drive<K>(what: &'static str, stream: impl Stream<Item = watcher::Result<watcher::Event<K>>>, on_change: impl Fn(&K, bool)) {
    let mut stream = std::pin::pin!(stream.default_backoff());
    while let Some(ev) = stream.next().await {
        match ev {
            Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) => on_change(&o, false),
            Ok(watcher::Event::Delete(o)) => on_change(&o, true),
            Ok(_) => {}
            Err(e) => tracing::warn!(target: TARGET, resource = what, error = %e, "watch failed; retrying"),
        }
    }
}
