//! Mirrors pkg/controller/volume/pvprotection/pv_protection_controller.go: a volume bound to a
//! claim is not deleted from under it. The API server's StorageObjectInUseProtection admission
//! puts the finalizer `kubernetes.io/pv-protection` on every PersistentVolume; a deleted volume
//! stays (Terminating) until this controller takes the finalizer off, once it is no longer Bound.
//!
//! 1. Volumes are watched into a cache; one lacking the finalizer, or being deleted with it,
//!    queues itself.
//! 2. For a queued volume ([`decide`]): being deleted with the finalizer and not Bound (the phase
//!    the binder writes) → the finalizer is removed; not being deleted and without it → added.

use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::PersistentVolume;
use kube::api::{Api, PostParams};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};

use crate::error::{Error, Result};
use crate::volume::persistentvolume::util::{VOLUME_BOUND, volume_phase};
use crate::workqueue::WorkQueue;

const TARGET: &str = "controllers::pvprotection";
/// The finalizer (`volumeutil.PVProtectionFinalizer`).
pub const PV_PROTECTION_FINALIZER: &str = "kubernetes.io/pv-protection";

/// What one sync does with a volume.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    RemoveFinalizer,
    AddFinalizer,
    /// Being deleted but still Bound: kept.
    Keep,
    Nothing,
}

fn has_finalizer(pv: &PersistentVolume) -> bool {
    pv.metadata.finalizers.iter().flatten().any(|f| f == PV_PROTECTION_FINALIZER)
}

fn is_deletion_candidate(pv: &PersistentVolume) -> bool {
    pv.metadata.deletion_timestamp.is_some() && has_finalizer(pv)
}

fn need_to_add_finalizer(pv: &PersistentVolume) -> bool {
    pv.metadata.deletion_timestamp.is_none() && !has_finalizer(pv)
}

/// Step 2 (processPV; isBeingUsed is "the phase is Bound").
pub fn decide(pv: &PersistentVolume) -> Action {
    if is_deletion_candidate(pv) {
        return if volume_phase(pv) == VOLUME_BOUND { Action::Keep } else { Action::RemoveFinalizer };
    }
    if need_to_add_finalizer(pv) { Action::AddFinalizer } else { Action::Nothing }
}

pub struct PvProtectionController {
    /// Lists and watches for the cache: the controller manager's own client.
    informers: kube::Client,
    /// Everything else: `pv-protection-controller`'s client.
    client: kube::Client,
}

impl PvProtectionController {
    pub fn new(informers: kube::Client, client: kube::Client) -> Self {
        Self { informers, client }
    }

    /// Steps 1 and 2 with one worker.
    pub async fn run(self) -> Result<()> {
        let (volumes, volumes_w) = reflector::store::<PersistentVolume>();
        let queue: WorkQueue<String> = WorkQueue::new();
        let on_volume = |pv: &PersistentVolume| {
            if need_to_add_finalizer(pv) || is_deletion_candidate(pv) {
                queue.add(pv.metadata.name.clone().unwrap_or_default());
            }
        };
        let informers = drive(reflector::reflector(volumes_w, watcher(Api::<PersistentVolume>::all(self.informers.clone()), watcher::Config::default())), on_volume);
        let work = async {
            if volumes.wait_until_ready().await.is_err() {
                return;
            }
            tracing::info!(target: TARGET, "cache synced; protecting bound volumes");
            while let Some(name) = queue.get().await {
                match self.process_pv(&volumes, &name).await {
                    Ok(()) => queue.forget(&name),
                    Err(e) => {
                        tracing::warn!(target: TARGET, volume = %name, error = %e, "sync failed; will retry");
                        queue.add_rate_limited(name.clone());
                    }
                }
                queue.done(&name);
            }
        };
        tokio::select! {
            () = informers => {}
            () = work => {}
        }
        Ok(())
    }

    async fn process_pv(&self, volumes: &Store<PersistentVolume>, name: &str) -> Result<()> {
        let Some(pv) = volumes.get(&ObjectRef::new(name)) else { return Ok(()) };
        let mut updated = (*pv).clone();
        match decide(&pv) {
            Action::Nothing => return Ok(()),
            Action::Keep => {
                tracing::debug!(target: TARGET, volume = %name, "keeping the volume: it is bound");
                return Ok(());
            }
            Action::RemoveFinalizer => {
                updated.metadata.finalizers.get_or_insert_with(Vec::new).retain(|f| f != PV_PROTECTION_FINALIZER);
                tracing::info!(target: TARGET, volume = %name, "removed the protection finalizer: the volume is not bound");
            }
            Action::AddFinalizer => updated.metadata.finalizers.get_or_insert_with(Vec::new).push(PV_PROTECTION_FINALIZER.into()),
        }
        match Api::<PersistentVolume>::all(self.client.clone()).replace(name, &PostParams::default(), &updated).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            Err(e) => Err(Error::Kube(e)),
        }
    }
}

async fn drive<K>(stream: impl Stream<Item = watcher::Result<watcher::Event<K>>>, on_change: impl Fn(&K)) {
    let mut stream = std::pin::pin!(stream.default_backoff());
    while let Some(ev) = stream.next().await {
        match ev {
            Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) => on_change(&o),
            Ok(_) => {}
            Err(e) => tracing::warn!(target: TARGET, resource = "persistentvolumes", error = %e, "watch failed; retrying"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn finalizer_decisions() {
        let pv = |v: serde_json::Value| -> PersistentVolume { serde_json::from_value(v).expect("pv") };
        let deleting = |phase: &str| pv(json!({"metadata": {"name": "a", "deletionTimestamp": "2026-12-06T00:00:00Z", "finalizers": [PV_PROTECTION_FINALIZER]}, "status": {"phase": phase}}));
        // (what, volume, action)
        let cases = [
            ("deleting, Bound", deleting("Bound"), Action::Keep),
            ("deleting, Released", deleting("Released"), Action::RemoveFinalizer),
            ("deleting, Available", deleting("Available"), Action::RemoveFinalizer),
            ("no finalizer", pv(json!({"metadata": {"name": "a"}})), Action::AddFinalizer),
            ("protected", pv(json!({"metadata": {"name": "a", "finalizers": [PV_PROTECTION_FINALIZER]}, "status": {"phase": "Bound"}})), Action::Nothing),
        ];
        for (what, v, want) in cases {
            assert_eq!(decide(&v), want, "{what}");
        }
    }
}
