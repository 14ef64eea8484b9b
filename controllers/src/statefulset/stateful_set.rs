//! Mirrors pkg/controller/statefulset/stateful_set.go: the StatefulSet controller. It keeps each
//! StatefulSet's pods — one per ordinal, each with a stable name — at `spec.replicas` and at
//! the set's template, through [`super::stateful_set_control`].
//!
//! Events feed a work queue of StatefulSet keys ([`StatefulSetController::run`]):
//! - a StatefulSet added, changed or deleted queues itself;
//! - a pod added, changed or deleted queues its controller (and, if its controller changed,
//!   the old one); an orphan queues every StatefulSet of its namespace whose selector matches,
//!   which may adopt it; a pod turning Ready queues its set again after `minReadySeconds`.
//!
//! Unlike the ReplicaSet controller it keeps no expectations: a pod's name is its identity, so
//! a sync acting on a stale cache at worst asks to create a pod that exists (refused, retried).
//!
//! One sync ([`StatefulSetController::sync`]):
//! 1. Read the StatefulSet from the cache (gone: nothing to do).
//! 2. Claim its pods among the pods of its namespace — those its selector matches whose name
//!    says they are its own (`<set>-<ordinal>`), adopting orphans and releasing what no longer
//!    matches ([`crate::controller_ref_manager`]).
//! 3. Run the update algorithm on them ([`StatefulSetControl::update_stateful_set`]).
//! 4. With `minReadySeconds`, while not every replica is available, queue the set again after
//!    that long.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{Stream, StreamExt};
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::Value;

use super::stateful_set_control::StatefulSetControl;
use super::stateful_set_utils::{is_member_of, replicas_of};
use crate::controller_ref_manager::ControllerRefManager;
use crate::controller_utils::{controller_of, controller_ref};
use crate::error::{Error, Result};
use crate::workqueue::WorkQueue;

const TARGET: &str = "controllers::statefulset";
/// Workers syncing StatefulSets at once (`--concurrent-statefulset-syncs`).
pub const CONCURRENT_STATEFULSET_SYNCS: usize = 5;

pub struct StatefulSetController {
    /// Lists and watches for the caches: the controller manager's own client (see
    /// [`crate::controller_context`]).
    informers: kube::Client,
    /// Everything else: the controller's own client.
    client: kube::Client,
    control: StatefulSetControl,
}

/// `<namespace>/<name>`, the queue's key.
fn key_of(set: &StatefulSet) -> String {
    format!("{}/{}", set.metadata.namespace.as_deref().unwrap_or_default(), set.metadata.name.as_deref().unwrap_or_default())
}

fn selector_of(set: &StatefulSet) -> Option<apimachinery::labels::Selector> {
    let sel = serde_json::to_value(&set.spec.selector).unwrap_or(Value::Null);
    apimachinery::labels::Selector::from_label_selector(&sel).ok()
}

/// What a pod's uid was last seen as (the previous object of an update event).
struct SeenPod {
    controller: Option<(String, String)>,
    ready: bool,
}

impl StatefulSetController {
    pub fn new(informers: kube::Client, client: kube::Client) -> Self {
        Self { informers, control: StatefulSetControl::new(client.clone()), client }
    }

    /// Watches StatefulSets and pods into caches; [`CONCURRENT_STATEFULSET_SYNCS`] workers sync
    /// the keys their events queue.
    pub async fn run(self) -> Result<()> {
        let (sets, sets_w) = reflector::store::<StatefulSet>();
        let (pods, pods_w) = reflector::store::<Pod>();
        let queue: WorkQueue<String> = WorkQueue::new();
        let informer_client = self.informers.clone();
        let seen: Mutex<HashMap<String, SeenPod>> = Mutex::new(HashMap::new());
        let informers = async {
            let on_set = |set: &StatefulSet, _deleted: bool| queue.add(key_of(set));
            let on_pod = |pod: &Pod, deleted: bool| pod_changed(pod, deleted, &sets, &queue, &seen);
            tokio::join!(
                drive("statefulsets", reflector::reflector(sets_w, watcher(Api::<StatefulSet>::all(informer_client.clone()), watcher::Config::default())), on_set),
                drive("pods", reflector::reflector(pods_w, watcher(Api::<Pod>::all(informer_client.clone()), watcher::Config::default())), on_pod),
            );
        };
        let work = async {
            if sets.wait_until_ready().await.is_err() || pods.wait_until_ready().await.is_err() {
                return;
            }
            tracing::info!(target: TARGET, workers = CONCURRENT_STATEFULSET_SYNCS, "caches synced; syncing StatefulSets");
            let worker = || async {
                while let Some(k) = queue.get().await {
                    match self.sync(&sets, &pods, &k, &queue).await {
                        Ok(()) => queue.forget(&k),
                        Err(e) => {
                            tracing::warn!(target: TARGET, statefulset = %k, error = %e, "sync failed; will retry");
                            queue.add_rate_limited(k.clone());
                        }
                    }
                    queue.done(&k);
                }
            };
            futures::future::join_all((0..CONCURRENT_STATEFULSET_SYNCS).map(|_| worker())).await;
        };
        tokio::select! {
            () = informers => {}
            () = work => {}
        }
        Ok(())
    }

    /// Steps 1–4 for one StatefulSet.
    async fn sync(&self, sets: &Store<StatefulSet>, pods: &Store<Pod>, k: &str, queue: &WorkQueue<String>) -> Result<()> {
        // Step 1.
        let (ns, name) = k.split_once('/').unwrap_or(("", k));
        let Some(set) = sets.get(&ObjectRef::new(name).within(ns)) else { return Ok(()) };
        let Some(selector) = selector_of(&set) else {
            tracing::warn!(target: TARGET, statefulset = %k, "selector does not parse; nothing to do");
            return Ok(());
        };
        // Step 2 (getPodsForStatefulSet): only pods named as its own are claimed.
        let candidates: Vec<Arc<Pod>> = pods.state().into_iter().filter(|p| p.metadata.namespace.as_deref() == Some(ns) && is_member_of(&set, p)).collect();
        let manager = ControllerRefManager {
            api: Api::<Pod>::namespaced(self.client.clone(), ns),
            owner: controller_ref("apps/v1", "StatefulSet", &set.metadata),
            owner_deleting: set.metadata.deletion_timestamp.is_some(),
            selector: &selector,
        };
        let sets_api: Api<StatefulSet> = Api::namespaced(self.client.clone(), ns);
        let uid = set.metadata.uid.clone();
        let can_adopt = || async move {
            // canAdopt: a fresh read, not the cache.
            match sets_api.get_opt(name).await.map_err(Error::Kube)? {
                Some(fresh) => Ok(fresh.metadata.uid == uid && fresh.metadata.deletion_timestamp.is_none()),
                None => Ok(false),
            }
        };
        let mine = manager.claim(candidates, can_adopt).await?;
        // Step 3.
        let status = self.control.update_stateful_set(&set, &mine, &selector).await?;
        // Step 4.
        let min_ready = set.spec.min_ready_seconds.unwrap_or(0);
        if min_ready > 0 && status.available_replicas.unwrap_or(0) != replicas_of(&set) {
            queue.add_after(k.to_string(), Duration::from_secs(min_ready as u64));
        }
        Ok(())
    }
}

/// The pod event handlers (addPod, updatePod, deletePod).
fn pod_changed(pod: &Pod, deleted: bool, sets: &Store<StatefulSet>, queue: &WorkQueue<String>, seen: &Mutex<HashMap<String, SeenPod>>) {
    let ns = pod.metadata.namespace.clone().unwrap_or_default();
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    let controller = controller_of(&pod.metadata).filter(|r| r.kind == "StatefulSet").map(|r| (r.name.clone(), r.uid.clone()));
    let ready = api::pod::is_pod_ready(pod);
    let before = {
        let mut seen = seen.lock().unwrap_or_else(|e| e.into_inner());
        if deleted { seen.remove(&uid) } else { seen.insert(uid, SeenPod { controller: controller.clone(), ready }) }
    };
    // The StatefulSet a controller reference names, if it is that one (same uid).
    let resolve = |(set_name, set_uid): &(String, String)| sets.get(&ObjectRef::new(set_name).within(&ns)).filter(|s| s.metadata.uid.as_deref() == Some(set_uid.as_str()));
    if let Some(before) = &before
        && before.controller != controller
        && let Some(old) = before.controller.as_ref().and_then(resolve)
    {
        queue.add(key_of(&old));
    }
    match controller.as_ref().and_then(resolve) {
        Some(set) => {
            let k = key_of(&set);
            let min_ready = set.spec.min_ready_seconds.unwrap_or(0);
            if ready && before.as_ref().is_some_and(|b| !b.ready) && min_ready > 0 {
                queue.add_after(k.clone(), Duration::from_secs(min_ready as u64));
            }
            queue.add(k);
        }
        None if controller.is_none() && !deleted && pod.metadata.deletion_timestamp.is_none() => {
            // An orphan: every StatefulSet that might adopt it.
            let labels: BTreeMap<String, String> = pod.metadata.labels.clone().unwrap_or_default();
            for set in sets.state() {
                if set.metadata.namespace.as_deref() == Some(ns.as_str()) && selector_of(&set).is_some_and(|s| !s.is_empty() && s.matches(&labels)) {
                    queue.add(key_of(&set));
                }
            }
        }
        None => {}
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
