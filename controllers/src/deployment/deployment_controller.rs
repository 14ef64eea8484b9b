//! Mirrors pkg/controller/deployment/deployment_controller.go: the Deployment controller. A
//! Deployment owns ReplicaSets, one per pod template it has had; it rolls from the old ones to
//! the one of its current template.
//!
//! Events feed a work queue of Deployment keys ([`DeploymentController::run`]): a Deployment's
//! own changes; a ReplicaSet's (its controlling Deployment, or, for an orphan, every Deployment
//! whose selector matches it, which may adopt it); a pod's deletion (its ReplicaSet's
//! Deployment: a Recreate rollout waits for the old pods to be gone).
//!
//! One sync ([`DeploymentController::sync`]):
//! 1. Read the Deployment from the cache (gone: nothing to do).
//! 2. Claim its ReplicaSets (adopting matching orphans, releasing what no longer matches:
//!    [`crate::controller_ref_manager`]).
//! 3. Being deleted: only the status. Paused: only scaling, cleanup and status, with the
//!    Progressing condition `DeploymentPaused`. A changed `replicas` (a scaling event): scale
//!    the ReplicaSets in proportion (`sync.rs`).
//! 4. Otherwise one step of the rollout: `rolling.rs` or `recreate.rs`; each ends by writing the
//!    status, and asks to be queued again at the progress deadline.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use futures::{Stream, StreamExt};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::Value;

use super::util::{DESIRED_REPLICAS_ANNOTATION, replicas, rs_replicas};
use crate::controller_ref_manager::ControllerRefManager;
use crate::controller_utils::{controller_of, controller_ref};
use crate::error::{Error, Result};
use crate::workqueue::WorkQueue;

pub(super) const TARGET: &str = "controllers::deployment";
/// Workers syncing Deployments at once (`--concurrent-deployment-syncs`).
pub const CONCURRENT_DEPLOYMENT_SYNCS: usize = 5;

/// The ReplicaSets a Deployment owns, as step 2 claimed them.
#[derive(Clone, Debug, Default)]
pub struct Sets {
    pub all: Vec<ReplicaSet>,
}

pub struct DeploymentController {
    /// Lists and watches for the caches: the controller manager's own client (see
    /// [`crate::controller_context`]).
    pub(super) informers: kube::Client,
    /// Everything else: the controller's own client.
    pub(super) client: kube::Client,
    pub(super) recorder: client::record::EventRecorder,
    pub(super) pods: Store<Pod>,
    pods_w: Mutex<Option<reflector::store::Writer<Pod>>>,
    /// A Progressing condition a step decided (a ReplicaSet created or found) that the status
    /// written at the end of the sync carries, by Deployment key.
    pub(super) notes: Mutex<HashMap<String, (String, String)>>,
}

pub(super) fn key_of(d: &Deployment) -> String {
    format!("{}/{}", d.metadata.namespace.as_deref().unwrap_or_default(), d.metadata.name.as_deref().unwrap_or_default())
}

pub(super) fn selector_of(d: &Deployment) -> Option<apimachinery::labels::Selector> {
    apimachinery::labels::Selector::from_label_selector(&serde_json::to_value(&d.spec.selector).unwrap_or(Value::Null)).ok()
}

impl DeploymentController {
    pub fn new(informers: kube::Client, client: kube::Client) -> Self {
        let recorder = client::record::EventRecorder::new(client.clone(), "deployment-controller", None);
        let (pods, pods_w) = reflector::store::<Pod>();
        Self { informers, client, recorder, pods, pods_w: Mutex::new(Some(pods_w)), notes: Mutex::new(HashMap::new()) }
    }

    /// Watches Deployments, ReplicaSets and pods; [`CONCURRENT_DEPLOYMENT_SYNCS`] workers sync
    /// the keys their events queue.
    pub async fn run(self) -> Result<()> {
        let (deps, deps_w) = reflector::store::<Deployment>();
        let (sets, sets_w) = reflector::store::<ReplicaSet>();
        let Some(pods_w) = self.pods_w.lock().unwrap_or_else(|e| e.into_inner()).take() else { return Ok(()) };
        let queue: WorkQueue<String> = WorkQueue::new();
        let informer_client = self.informers.clone();
        let informers = async {
            let on_deployment = |d: &Deployment, _gone: bool| queue.add(key_of(d));
            let on_set = |rs: &ReplicaSet, _gone: bool| {
                let ns = rs.metadata.namespace.clone().unwrap_or_default();
                match controller_of(&rs.metadata) {
                    Some(r) if r.kind == "Deployment" => {
                        if let Some(d) = deps.get(&ObjectRef::new(&r.name).within(&ns)).filter(|d| d.metadata.uid.as_deref() == Some(r.uid.as_str())) {
                            queue.add(key_of(&d));
                        }
                    }
                    Some(_) => {}
                    None => {
                        let labels: BTreeMap<String, String> = rs.metadata.labels.clone().unwrap_or_default();
                        for d in deps.state() {
                            if d.metadata.namespace.as_deref() == Some(ns.as_str()) && selector_of(&d).is_some_and(|s| !s.is_empty() && s.matches(&labels)) {
                                queue.add(key_of(&d));
                            }
                        }
                    }
                }
            };
            let on_pod = |pod: &Pod, gone: bool| {
                if !gone && pod.metadata.deletion_timestamp.is_none() {
                    return;
                }
                let ns = pod.metadata.namespace.clone().unwrap_or_default();
                let Some(r) = controller_of(&pod.metadata).filter(|r| r.kind == "ReplicaSet") else { return };
                let Some(rs) = sets.get(&ObjectRef::new(&r.name).within(&ns)) else { return };
                if let Some(dr) = controller_of(&rs.metadata).filter(|r| r.kind == "Deployment") {
                    queue.add(format!("{ns}/{}", dr.name));
                }
            };
            tokio::join!(
                drive("deployments", reflector::reflector(deps_w, watcher(Api::<Deployment>::all(informer_client.clone()), watcher::Config::default())), on_deployment),
                drive("replicasets", reflector::reflector(sets_w, watcher(Api::<ReplicaSet>::all(informer_client.clone()), watcher::Config::default())), on_set),
                drive("pods", reflector::reflector(pods_w, watcher(Api::<Pod>::all(informer_client.clone()), watcher::Config::default())), on_pod),
            );
        };
        let work = async {
            if deps.wait_until_ready().await.is_err() || sets.wait_until_ready().await.is_err() || self.pods.wait_until_ready().await.is_err() {
                return;
            }
            tracing::info!(target: TARGET, workers = CONCURRENT_DEPLOYMENT_SYNCS, "caches synced; syncing Deployments");
            let worker = || async {
                while let Some(k) = queue.get().await {
                    match self.sync(&deps, &sets, &k).await {
                        Ok(requeue) => {
                            queue.forget(&k);
                            if let Some(after) = requeue {
                                queue.add_after(k.clone(), after);
                            }
                        }
                        Err(e) => {
                            tracing::warn!(target: TARGET, deployment = %k, error = %e, "sync failed; will retry");
                            queue.add_rate_limited(k.clone());
                        }
                    }
                    queue.done(&k);
                }
            };
            futures::future::join_all((0..CONCURRENT_DEPLOYMENT_SYNCS).map(|_| worker())).await;
        };
        tokio::select! {
            () = informers => {}
            () = work => {}
        }
        Ok(())
    }

    /// Steps 1–4 for one Deployment; when to look at it again.
    async fn sync(&self, deps: &Store<Deployment>, sets: &Store<ReplicaSet>, k: &str) -> Result<Option<std::time::Duration>> {
        // Step 1.
        let (ns, name) = k.split_once('/').unwrap_or(("", k));
        let Some(d) = deps.get(&ObjectRef::new(name).within(ns)) else { return Ok(None) };
        let d: Deployment = (*d).clone();
        let Some(selector) = selector_of(&d) else {
            tracing::warn!(target: TARGET, deployment = %k, "selector does not parse; nothing to do");
            return Ok(None);
        };
        if selector.is_empty() {
            self.recorder.event(super::util::reference(&d), client::record::WARNING, "SelectingAll", "This deployment is selecting all pods. A non-empty selector is required.");
            return Ok(None);
        }
        // Step 2.
        let candidates: Vec<Arc<ReplicaSet>> = sets.state().into_iter().filter(|rs| rs.metadata.namespace.as_deref() == Some(ns)).collect();
        let manager = ControllerRefManager {
            api: Api::<ReplicaSet>::namespaced(self.client.clone(), ns),
            owner: controller_ref("apps/v1", "Deployment", &d.metadata),
            owner_deleting: d.metadata.deletion_timestamp.is_some(),
            selector: &selector,
        };
        let deps_api: Api<Deployment> = Api::namespaced(self.client.clone(), ns);
        let uid = d.metadata.uid.clone();
        let can_adopt = || async move {
            match deps_api.get_opt(name).await.map_err(Error::Kube)? {
                Some(fresh) => Ok(fresh.metadata.uid == uid && fresh.metadata.deletion_timestamp.is_none()),
                None => Ok(false),
            }
        };
        let claimed = Sets { all: manager.claim(candidates, can_adopt).await?.into_iter().map(|rs| (*rs).clone()).collect() };
        // Step 3.
        if d.metadata.deletion_timestamp.is_some() {
            let (new_rs, olds) = self.get_all_replica_sets_and_sync_revision(&d, claimed, false).await?;
            return self.sync_rollout_status(&d, &super::util::scaled_all(&olds, new_rs.as_ref()), new_rs.as_ref()).await;
        }
        if d.spec.paused == Some(true) {
            return self.sync_paused(&d, claimed).await;
        }
        if is_scaling_event(&d, &claimed.all) {
            return self.sync_scale(&d, claimed).await;
        }
        // Step 4.
        if super::util::is_recreate(&d) { self.rollout_recreate(&d, claimed).await } else { self.rollout_rolling(&d, claimed).await }
    }

    /// oldPodsRunning: a pod of an old ReplicaSet that has not finished.
    pub(super) fn old_pods_running(&self, olds: &[ReplicaSet]) -> bool {
        let uids: Vec<&str> = olds.iter().filter_map(|rs| rs.metadata.uid.as_deref()).collect();
        self.pods.state().iter().any(|p| {
            controller_of(&p.metadata).is_some_and(|r| uids.contains(&r.uid.as_str()))
                && !matches!(p.status.as_ref().and_then(|s| s.phase.as_deref()), Some("Succeeded" | "Failed"))
        })
    }
}

/// isScalingEvent: an active ReplicaSet was sized for another `replicas` than the Deployment
/// has now (its desired-replicas annotation).
pub fn is_scaling_event(d: &Deployment, sets: &[ReplicaSet]) -> bool {
    sets.iter().filter(|rs| rs_replicas(rs) > 0).any(|rs| {
        rs.metadata.annotations.as_ref().and_then(|a| a.get(DESIRED_REPLICAS_ANNOTATION)).and_then(|v| v.parse::<i32>().ok()).is_some_and(|desired| desired != replicas(d))
    })
}

/// Runs one informer's stream into `on_change(object, gone)`; the watcher retries by itself
/// (with backoff), errors are logged.
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
