//! Mirrors pkg/controller/replicaset/replica_set.go: the ReplicaSet controller. It keeps each
//! ReplicaSet's number of running pods at `spec.replicas`.
//!
//! Events feed a work queue of ReplicaSet keys ([`ReplicaSetController::run`]):
//! - a ReplicaSet added, changed or deleted queues itself;
//! - a pod seen for the first time counts as an observed creation for its controller and queues
//!   it; a pod being deleted or gone counts as an observed deletion; any pod change queues its
//!   controller (and, if the controller changed, the old one); an orphan queues every ReplicaSet
//!   of its namespace whose selector matches, which may adopt it; a pod turning Ready queues its
//!   ReplicaSet again after `minReadySeconds`.
//!
//! One sync ([`ReplicaSetController::sync`]):
//! 1. Read the ReplicaSet from the cache (gone: forget its expectations).
//! 2. Claim its pods among the active pods of its namespace (adopting orphans, releasing what no
//!    longer matches: [`crate::controller_ref_manager`]).
//! 3. Only if its expectations are met (every create and delete of the last sync seen), create
//!    the missing pods in slow-start batches or delete the surplus, the worst first
//!    ([`crate::controller_utils`]), at most 500 a sync; each success or failure is an event.
//! 4. Write the status (replicas, fully labeled, ready, available, observedGeneration,
//!    `ReplicaFailure`) when it changed; queue the ReplicaSet again when a pod will become
//!    available after `minReadySeconds`.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use futures::{Stream, StreamExt};
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, PostParams};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::Value;

use super::replica_set_utils::{ManageFailure, calculate_status, next_available_in};
use crate::controller_ref_manager::ControllerRefManager;
use crate::controller_utils::{
    BURST_REPLICAS, ControllerExpectations, SLOW_START_INITIAL_BATCH_SIZE, controller_of, controller_ref, deletion_order, is_pod_active, pod_from_template,
    slow_start_batch,
};
use crate::error::{Error, Result};
use crate::workqueue::WorkQueue;

const TARGET: &str = "controllers::replicaset";
/// Workers syncing ReplicaSets at once (`--concurrent-replicaset-syncs`).
pub const CONCURRENT_REPLICASET_SYNCS: usize = 5;

pub struct ReplicaSetController {
    /// Lists and watches for the caches: the controller manager's own client (see
    /// [`crate::controller_context`]).
    informers: kube::Client,
    /// Everything else: the controller's own client.
    client: kube::Client,
    recorder: client::record::EventRecorder,
    expectations: ControllerExpectations,
}

/// `<namespace>/<name>`, the queue's and the expectations' key.
fn key(namespace: &str, name: &str) -> String {
    format!("{namespace}/{name}")
}

fn key_of_rs(rs: &ReplicaSet) -> String {
    key(rs.metadata.namespace.as_deref().unwrap_or_default(), rs.metadata.name.as_deref().unwrap_or_default())
}

fn selector_of(rs: &ReplicaSet) -> Option<apimachinery::labels::Selector> {
    let sel = serde_json::to_value(&rs.spec.selector).unwrap_or(Value::Null);
    apimachinery::labels::Selector::from_label_selector(&sel).ok()
}

impl ReplicaSetController {
    pub fn new(informers: kube::Client, client: kube::Client) -> Self {
        let recorder = client::record::EventRecorder::new(client.clone(), "replicaset-controller", None);
        Self { informers, client, recorder, expectations: ControllerExpectations::default() }
    }

    /// Watches ReplicaSets and pods into caches; [`CONCURRENT_REPLICASET_SYNCS`] workers sync
    /// the keys their events queue.
    pub async fn run(self) -> Result<()> {
        let (sets, sets_w) = reflector::store::<ReplicaSet>();
        let (pods, pods_w) = reflector::store::<Pod>();
        let queue: WorkQueue<String> = WorkQueue::new();
        let informer_client = self.informers.clone();
        // What each pod's uid was last seen as: its controller, namespace, readiness.
        let seen: Mutex<HashMap<String, SeenPod>> = Mutex::new(HashMap::new());
        let informers = async {
            let on_set = |ev: Change<&ReplicaSet>| {
                let rs = ev.object();
                let k = key_of_rs(rs);
                if matches!(ev, Change::Deleted(_)) {
                    self.expectations.delete(&k);
                }
                queue.add(k);
            };
            let on_pod = |ev: Change<&Pod>| self.pod_changed(ev, &sets, &queue, &seen);
            tokio::join!(
                drive("replicasets", reflector::reflector(sets_w, watcher(Api::<ReplicaSet>::all(informer_client.clone()), watcher::Config::default())), on_set),
                drive("pods", reflector::reflector(pods_w, watcher(Api::<Pod>::all(informer_client.clone()), watcher::Config::default())), on_pod),
            );
        };
        let work = async {
            if sets.wait_until_ready().await.is_err() || pods.wait_until_ready().await.is_err() {
                return;
            }
            tracing::info!(target: TARGET, workers = CONCURRENT_REPLICASET_SYNCS, "caches synced; syncing ReplicaSets");
            let worker = || async {
                while let Some(k) = queue.get().await {
                    match self.sync(&sets, &pods, &k, &queue).await {
                        Ok(()) => queue.forget(&k),
                        Err(e) => {
                            tracing::warn!(target: TARGET, replicaset = %k, error = %e, "sync failed; will retry");
                            queue.add_rate_limited(k.clone());
                        }
                    }
                    queue.done(&k);
                }
            };
            futures::future::join_all((0..CONCURRENT_REPLICASET_SYNCS).map(|_| worker())).await;
        };
        tokio::select! {
            () = informers => {}
            () = work => {}
        }
        Ok(())
    }

    /// The pod event handlers (addPod, updatePod, deletePod).
    fn pod_changed(&self, ev: Change<&Pod>, sets: &Store<ReplicaSet>, queue: &WorkQueue<String>, seen: &Mutex<HashMap<String, SeenPod>>) {
        let pod = ev.object();
        let ns = pod.metadata.namespace.clone().unwrap_or_default();
        let name = pod.metadata.name.clone().unwrap_or_default();
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let controller = controller_of(&pod.metadata).filter(|r| r.kind == "ReplicaSet").map(|r| (r.name.clone(), r.uid.clone()));
        let ready = api::pod::is_pod_ready(pod);
        let going = matches!(ev, Change::Deleted(_)) || pod.metadata.deletion_timestamp.is_some();
        let before = {
            let mut seen = seen.lock().unwrap_or_else(|e| e.into_inner());
            if matches!(ev, Change::Deleted(_)) { seen.remove(&uid) } else { seen.insert(uid, SeenPod { controller: controller.clone(), ready }) }
        };
        // The ReplicaSet a controller reference names, if it is that one (same uid).
        let resolve = |(rs_name, rs_uid): &(String, String)| {
            sets.get(&ObjectRef::new(rs_name).within(&ns)).filter(|rs| rs.metadata.uid.as_deref() == Some(rs_uid.as_str()))
        };
        if let Some(before) = &before
            && before.controller != controller
            && let Some(old) = before.controller.as_ref().and_then(resolve)
        {
            queue.add(key_of_rs(&old));
        }
        match controller.as_ref().and_then(resolve) {
            Some(rs) => {
                let k = key_of_rs(&rs);
                if before.is_none() && !going {
                    self.expectations.creation_observed(&k);
                }
                if going {
                    self.expectations.deletion_observed(&k, &name);
                }
                let min_ready = rs.spec.min_ready_seconds.unwrap_or(0);
                if ready && before.as_ref().is_some_and(|b| !b.ready) && min_ready > 0 {
                    queue.add_after(k.clone(), std::time::Duration::from_secs(min_ready as u64 + 1));
                }
                queue.add(k);
            }
            None if controller.is_none() && !going => {
                // An orphan: every ReplicaSet that might adopt it.
                let labels: BTreeMap<String, String> = pod.metadata.labels.clone().unwrap_or_default();
                for rs in sets.state() {
                    if rs.metadata.namespace.as_deref() == Some(ns.as_str()) && selector_of(&rs).is_some_and(|s| !s.is_empty() && s.matches(&labels)) {
                        queue.add(key_of_rs(&rs));
                    }
                }
            }
            None => {}
        }
    }

    /// Steps 1–4 for one ReplicaSet.
    async fn sync(&self, sets: &Store<ReplicaSet>, pods: &Store<Pod>, k: &str, queue: &WorkQueue<String>) -> Result<()> {
        // Step 1.
        let (ns, name) = k.split_once('/').unwrap_or(("", k));
        let Some(rs) = sets.get(&ObjectRef::new(name).within(ns)) else {
            self.expectations.delete(k);
            return Ok(());
        };
        let Some(selector) = selector_of(&rs) else {
            tracing::warn!(target: TARGET, replicaset = %k, "selector does not parse; nothing to do");
            return Ok(());
        };
        let needs_sync = self.expectations.satisfied(k);
        // Step 2.
        let candidates: Vec<Arc<Pod>> = pods.state().into_iter().filter(|p| p.metadata.namespace.as_deref() == Some(ns) && is_pod_active(p)).collect();
        let manager = ControllerRefManager {
            api: Api::<Pod>::namespaced(self.client.clone(), ns),
            owner: controller_ref("apps/v1", "ReplicaSet", &rs.metadata),
            owner_deleting: rs.metadata.deletion_timestamp.is_some(),
            selector: &selector,
        };
        let sets_api: Api<ReplicaSet> = Api::namespaced(self.client.clone(), ns);
        let rs_uid = rs.metadata.uid.clone();
        let can_adopt = || async move {
            // canAdopt: a fresh read, not the cache.
            match sets_api.get_opt(name).await.map_err(Error::Kube)? {
                Some(fresh) => Ok(fresh.metadata.uid == rs_uid && fresh.metadata.deletion_timestamp.is_none()),
                None => Ok(false),
            }
        };
        let mut mine = manager.claim(candidates, can_adopt).await?;
        // Step 3.
        let mut failure = None;
        if needs_sync && rs.metadata.deletion_timestamp.is_none() {
            failure = self.manage_replicas(&rs, k, &mut mine).await;
        }
        // Step 4.
        let now = Timestamp::now();
        let status = calculate_status(&rs, &mine, failure.as_ref(), now);
        if Some(&status) != rs.status.as_ref() {
            let api: Api<ReplicaSet> = Api::namespaced(self.client.clone(), ns);
            let mut updated = (*rs).clone();
            updated.status = Some(status.clone());
            match api.replace_status(name, &PostParams::default(), &updated).await {
                Ok(_) => {}
                // Changed or gone meanwhile: its event queues it again.
                Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => {}
                Err(e) => return Err(Error::Kube(e)),
            }
        }
        let min_ready = rs.spec.min_ready_seconds.unwrap_or(0);
        if failure.is_none()
            && let Some(after) = next_available_in(&mine, min_ready, now)
        {
            queue.add_after(k.to_string(), after + std::time::Duration::from_millis(100));
        }
        Ok(())
    }

    /// Step 3 (manageReplicas): create or delete the difference; the failure, if any, for the
    /// status. `mine` loses the pods deleted.
    async fn manage_replicas(&self, rs: &ReplicaSet, k: &str, mine: &mut Vec<Arc<Pod>>) -> Option<ManageFailure> {
        let spec = rs.spec.clone();
        let want = spec.replicas.unwrap_or(1).max(0) as usize;
        let ns = rs.metadata.namespace.clone().unwrap_or_default();
        let name = rs.metadata.name.clone().unwrap_or_default();
        let pods_api: Api<Pod> = Api::namespaced(self.client.clone(), &ns);
        let reference = reference(rs);
        if mine.len() < want {
            let n = (want - mine.len()).min(BURST_REPLICAS);
            self.expectations.expect_creations(k, n);
            let template = spec.template.clone().unwrap_or_default();
            let owner = controller_ref("apps/v1", "ReplicaSet", &rs.metadata);
            tracing::info!(target: TARGET, replicaset = %k, need = want, creating = n, "too few replicas");
            let (created, err) = slow_start_batch(n, SLOW_START_INITIAL_BATCH_SIZE, || {
                let pod = pod_from_template(&template, &ns, &name, owner.clone());
                let (api, recorder, reference) = (pods_api.clone(), &self.recorder, reference.clone());
                async move {
                    match api.create(&PostParams::default(), &pod).await {
                        Ok(p) => {
                            recorder.event(reference, client::record::NORMAL, "SuccessfulCreate", format!("Created pod: {}", p.metadata.name.unwrap_or_default()));
                            Ok(())
                        }
                        Err(e) => {
                            let msg = match &e {
                                kube::Error::Api(s) => s.message.clone(),
                                other => other.to_string(),
                            };
                            recorder.event(reference, client::record::WARNING, "FailedCreate", format!("Error creating: {msg}"));
                            Err(msg)
                        }
                    }
                }
            })
            .await;
            // The creations never made will never be observed.
            for _ in created..n {
                self.expectations.creation_observed(k);
            }
            return err.map(ManageFailure::Create);
        }
        if mine.len() > want {
            let n = (mine.len() - want).min(BURST_REPLICAS);
            mine.sort_by(|a, b| deletion_order(a, b));
            let doomed: Vec<Arc<Pod>> = mine.drain(..n).collect();
            self.expectations.expect_deletions(k, doomed.iter().filter_map(|p| p.metadata.name.clone()));
            tracing::info!(target: TARGET, replicaset = %k, need = want, deleting = n, "too many replicas");
            let results = futures::future::join_all(doomed.iter().map(|p| {
                let pod_name = p.metadata.name.clone().unwrap_or_default();
                let (api, reference) = (pods_api.clone(), reference.clone());
                let uid = p.metadata.uid.clone();
                async move {
                    let params = DeleteParams { preconditions: uid.map(|uid| kube::api::Preconditions { uid: Some(uid), resource_version: None }), ..DeleteParams::default() };
                    match api.delete(&pod_name, &params).await {
                        Ok(_) => {
                            self.recorder.event(reference, client::record::NORMAL, "SuccessfulDelete", format!("Deleted pod: {pod_name}"));
                            Ok(())
                        }
                        Err(kube::Error::Api(s)) if s.code == 404 => {
                            self.expectations.deletion_observed(k, &pod_name);
                            Ok(())
                        }
                        Err(e) => {
                            self.expectations.deletion_observed(k, &pod_name);
                            let msg = match &e {
                                kube::Error::Api(s) => s.message.clone(),
                                other => other.to_string(),
                            };
                            self.recorder.event(reference, client::record::WARNING, "FailedDelete", format!("Error deleting: {msg}"));
                            Err(msg)
                        }
                    }
                }
            }))
            .await;
            return results.into_iter().find_map(|r| r.err()).map(ManageFailure::Delete);
        }
        None
    }
}

/// What a pod's uid was last seen as (the previous object of an update event).
struct SeenPod {
    controller: Option<(String, String)>,
    ready: bool,
}

fn reference(rs: &ReplicaSet) -> ObjectReference {
    client::record::object_reference("apps/v1", "ReplicaSet", &rs.metadata)
}

/// An informer's event, as the handlers take it.
pub enum Change<T> {
    Applied(T),
    Deleted(T),
}

impl<T> Change<T> {
    fn object(&self) -> &T {
        match self {
            Change::Applied(o) | Change::Deleted(o) => o,
        }
    }
}

/// Runs one informer's stream into `on_change`; the watcher retries by itself (with backoff),
/// errors are logged.
async fn drive<K>(what: &'static str, stream: impl Stream<Item = watcher::Result<watcher::Event<K>>>, on_change: impl Fn(Change<&K>)) {
    let mut stream = std::pin::pin!(stream.default_backoff());
    while let Some(ev) = stream.next().await {
        match ev {
            Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) => on_change(Change::Applied(&o)),
            Ok(watcher::Event::Delete(o)) => on_change(Change::Deleted(&o)),
            Ok(_) => {}
            Err(e) => tracing::warn!(target: TARGET, resource = what, error = %e, "watch failed; retrying"),
        }
    }
}
