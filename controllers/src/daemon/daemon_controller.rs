//! Mirrors pkg/controller/daemon/daemon_controller.go: the DaemonSet controller. It keeps one
//! pod of each DaemonSet on every node that should run one.
//!
//! Events feed a work queue of DaemonSet keys ([`DaemonSetsController::run`]):
//! - a DaemonSet added, changed or deleted queues itself;
//! - a pod seen for the first time counts as an observed creation for its controller, a pod
//!   being deleted or gone as an observed deletion; any pod change queues its DaemonSet (and the
//!   old one if the controller changed); an orphan queues every DaemonSet that might adopt it;
//!   a pod turning Ready queues its DaemonSet again after `minReadySeconds`;
//! - a node added queues the DaemonSets that should run on it; a node changed queues those for
//!   which it now should or should not run (or keep) a pod; a node deleted queues them all.
//!
//! One sync ([`DaemonSetsController::sync`]):
//! 1. Read the DaemonSet from the cache (gone: forget its expectations). One selecting every
//!    pod gets a `SelectingAll` event and nothing more; one being deleted is left alone.
//! 2. Construct its history: the current ControllerRevision (its hash labels the new pods) and
//!    the old ones ([`DaemonSetsController::construct_history`], with [`super::update`]'s
//!    revision patch).
//! 3. Unless expectations are outstanding (then only the status is written), manage: for each
//!    node, [`pods_should_be_on_node`] says whether a pod is missing and which pods must go
//!    (surplus, on a node that should no longer run one, failed — the latter with a per-node
//!    backoff and a `FailedDaemonPod` event); pods never bound to a node that is gone go too.
//!    [`DaemonSetsController::sync_nodes`] creates (slow-start batches, each pod pinned to its
//!    node by node affinity for the scheduler) and deletes, at most 500 each.
//! 4. When the expectations are met and the strategy is RollingUpdate, one rolling update step
//!    ([`super::update::rolling_update_plan`]).
//! 5. Delete old revisions beyond `revisionHistoryLimit`.
//! 6. Write the status ([`calculate_status`]) when it changed; queue again after
//!    `minReadySeconds` while pods wait to become available.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering as AtomicOrdering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{Stream, StreamExt};
use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet, DaemonSetStatus};
use k8s_openapi::api::core::v1::{Node, ObjectReference, Pod};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::{Value, json};

use super::update::{RollingInput, get_patch, matches, revisions_to_delete, rolling_update_plan};
use super::util::{
    allows_surge, by_creation_timestamp_and_phase, create_pod_template, is_pod_updated, node_should_run_daemon_pod, replace_daemon_set_pod_node_name_node_affinity, surge_count,
    target_node_name, template_generation, unavailable_count,
};
use crate::controller_ref_manager::ControllerRefManager;
use crate::controller_utils::{BURST_REPLICAS, ControllerExpectations, SLOW_START_INITIAL_BATCH_SIZE, controller_of, controller_ref, pod_from_template, slow_start_batch};
use crate::error::{Error, Result};
use crate::history::{CONTROLLER_REVISION_HASH_LABEL, History, new_controller_revision, next_revision, sort_controller_revisions};
use crate::replicaset::replica_set_utils::is_pod_available;
use crate::workqueue::WorkQueue;

pub(super) const TARGET: &str = "controllers::daemon";
/// Workers syncing DaemonSets at once (`--concurrent-daemonset-syncs`).
pub const CONCURRENT_DAEMONSET_SYNCS: usize = 2;
/// The first and the longest wait before a failed daemon pod on a node is deleted again
/// (`failedPodsBackoff`: 1 s, doubling, up to 15 min).
pub const FAILED_POD_BACKOFF_INITIAL: Duration = Duration::from_secs(1);
pub const FAILED_POD_BACKOFF_MAX: Duration = Duration::from_secs(15 * 60);

/// What one node needs (podsShouldBeOnNode's answer).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct NodePlan {
    /// A daemon pod must be created here.
    pub create: bool,
    /// Pods to delete: surplus, or on a node that should no longer run them.
    pub delete: Vec<String>,
    /// Failed pods, deleted unless their node's backoff holds them (then the node is retried later).
    pub failed: Vec<String>,
}

/// podsShouldBeOnNode: given whether the node should run (and keep) a daemon pod and the pods
/// it has, what to create and delete there.
/// 1. Should run and has none: create one.
/// 2. May keep its pods: failed pods are to go (and be replaced); of the rest, without surge
///    the oldest stays and any other goes; with surge a node may hold one old and one new
///    pod — the oldest of each — and the old one goes when it is not ready or the new one is
///    available. A node that should run a pod but has only failed or deleted ones gets a new
///    one (when surging; otherwise after the failed pods are gone).
/// 3. May not keep them: every pod goes.
pub fn pods_should_be_on_node(should_run: bool, should_continue: bool, pods: Option<&[Arc<Pod>]>, ds: &DaemonSet, hash: &str, now: Timestamp) -> NodePlan {
    let mut plan = NodePlan::default();
    match pods {
        // Step 1.
        None if should_run => plan.create = true,
        // Step 2.
        Some(pods) if should_continue => {
            let mut running: Vec<&Arc<Pod>> = Vec::new();
            for pod in pods.iter().filter(|p| p.metadata.deletion_timestamp.is_none()) {
                if pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Failed") {
                    plan.failed.push(pod.metadata.name.clone().unwrap_or_default());
                } else {
                    running.push(pod);
                }
            }
            running.sort_by(|a, b| by_creation_timestamp_and_phase(a, b));
            let name = |p: &Pod| p.metadata.name.clone().unwrap_or_default();
            if !allows_surge(ds) {
                plan.delete.extend(running.iter().skip(1).map(|p| name(p)));
                return plan;
            }
            if running.is_empty() {
                plan.create = should_run;
                return plan;
            }
            let generation = template_generation(ds).ok().flatten();
            let (mut oldest_new, mut oldest_old): (Option<&Pod>, Option<&Pod>) = (None, None);
            for pod in running {
                let slot = if is_pod_updated(pod, hash, generation) { &mut oldest_new } else { &mut oldest_old };
                if slot.is_none() {
                    *slot = Some(pod);
                } else {
                    plan.delete.push(name(pod));
                }
            }
            if let (Some(new), Some(old)) = (oldest_new, oldest_old)
                && (!api::pod::is_pod_ready(old) || is_pod_available(new, ds.spec.min_ready_seconds.unwrap_or(0), now))
            {
                plan.delete.push(name(old));
            }
        }
        // Step 3.
        Some(pods) if !should_continue => {
            plan.delete.extend(pods.iter().filter(|p| p.metadata.deletion_timestamp.is_none()).filter_map(|p| p.metadata.name.clone()));
        }
        _ => {}
    }
    plan
}

/// updateDaemonSetStatus's counts: over the nodes that should run a pod, how many have one
/// (the oldest counts), ready, available, made from the current revision; pods on nodes that
/// should not run one are misscheduled.
pub fn calculate_status(ds: &DaemonSet, nodes: &[Arc<Node>], node_to_pods: &BTreeMap<String, Vec<Arc<Pod>>>, hash: &str, now: Timestamp) -> DaemonSetStatus {
    let generation = template_generation(ds).ok().flatten();
    let min_ready = ds.spec.min_ready_seconds.unwrap_or(0);
    let mut s = DaemonSetStatus { collision_count: ds.status.as_ref().and_then(|s| s.collision_count), ..DaemonSetStatus::default() };
    let (mut ready, mut available, mut updated) = (0, 0, 0);
    for node in nodes {
        let (should_run, _) = node_should_run_daemon_pod(node, ds);
        let pods = node_to_pods.get(node.metadata.name.as_deref().unwrap_or_default()).filter(|p| !p.is_empty());
        match pods {
            Some(pods) if should_run => {
                s.desired_number_scheduled += 1;
                s.current_number_scheduled += 1;
                let mut pods: Vec<&Arc<Pod>> = pods.iter().collect();
                pods.sort_by(|a, b| by_creation_timestamp_and_phase(a, b));
                let pod = pods[0];
                if api::pod::is_pod_ready(pod) {
                    ready += 1;
                    if is_pod_available(pod, min_ready, now) {
                        available += 1;
                    }
                }
                if is_pod_updated(pod, hash, generation) {
                    updated += 1;
                }
            }
            None if should_run => s.desired_number_scheduled += 1,
            Some(_) => s.number_misscheduled += 1,
            None => {}
        }
    }
    s.number_ready = ready;
    s.number_available = Some(available);
    s.updated_number_scheduled = Some(updated);
    s.number_unavailable = Some(s.desired_number_scheduled - available);
    s.observed_generation = ds.status.as_ref().and_then(|s| s.observed_generation);
    s.conditions = ds.status.as_ref().and_then(|s| s.conditions.clone());
    s
}

/// client-go's flowcontrol.Backoff, for failed daemon pods: per key, a wait that doubles each
/// time up to a maximum, forgotten after twice the maximum without use.
#[derive(Default)]
pub struct Backoff {
    entries: Mutex<HashMap<String, (Duration, Instant)>>,
}

impl Backoff {
    /// IsInBackOffSinceUpdate: how long is left of the key's wait, if any.
    pub fn remaining(&self, key: &str, now: Instant) -> Option<Duration> {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let (wait, at) = entries.get(key)?;
        wait.checked_sub(now.duration_since(*at)).filter(|d| !d.is_zero())
    }

    /// Next: start (or double) the key's wait from `now`.
    pub fn next(&self, key: &str, now: Instant) {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let wait = match entries.get(key) {
            Some((wait, at)) if now.duration_since(*at) <= FAILED_POD_BACKOFF_MAX * 2 => (*wait * 2).min(FAILED_POD_BACKOFF_MAX),
            _ => FAILED_POD_BACKOFF_INITIAL,
        };
        entries.insert(key.to_string(), (wait, now));
    }
}

pub struct DaemonSetsController {
    /// Lists and watches for the caches: the controller manager's own client (see
    /// [`crate::controller_context`]).
    pub(super) informers: kube::Client,
    /// Everything else: the controller's own client.
    pub(super) client: kube::Client,
    pub(super) history: History,
    recorder: client::record::EventRecorder,
    expectations: ControllerExpectations,
    failed_pods_backoff: Backoff,
    sets: Store<DaemonSet>,
    pub(super) pods: Store<Pod>,
    nodes: Store<Node>,
    writers: Mutex<Option<Writers>>,
    queue: WorkQueue<String>,
}

struct Writers {
    sets: reflector::store::Writer<DaemonSet>,
    pods: reflector::store::Writer<Pod>,
    nodes: reflector::store::Writer<Node>,
}

/// `<namespace>/<name>`, the queue's and the expectations' key.
fn key_of(ds: &DaemonSet) -> String {
    format!("{}/{}", ds.metadata.namespace.as_deref().unwrap_or_default(), ds.metadata.name.as_deref().unwrap_or_default())
}

fn selector_of(ds: &DaemonSet) -> Option<apimachinery::labels::Selector> {
    let sel = serde_json::to_value(&ds.spec.selector).unwrap_or(Value::Null);
    apimachinery::labels::Selector::from_label_selector(&sel).ok()
}

fn reference(ds: &DaemonSet) -> ObjectReference {
    client::record::object_reference("apps/v1", "DaemonSet", &ds.metadata)
}

fn api_message(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => s.message.clone(),
        other => other.to_string(),
    }
}

/// What a pod's uid was last seen as: its controller (name, uid) and readiness.
struct SeenPod {
    controller: Option<(String, String)>,
    ready: bool,
}

impl DaemonSetsController {
    pub fn new(informers: kube::Client, client: kube::Client) -> Self {
        let recorder = client::record::EventRecorder::new(client.clone(), "daemonset-controller", None);
        let (sets, sets_w) = reflector::store::<DaemonSet>();
        let (pods, pods_w) = reflector::store::<Pod>();
        let (nodes, nodes_w) = reflector::store::<Node>();
        Self {
            history: History::new(client.clone()),
            informers,
            client,
            recorder,
            expectations: ControllerExpectations::default(),
            failed_pods_backoff: Backoff::default(),
            sets,
            pods,
            nodes,
            writers: Mutex::new(Some(Writers { sets: sets_w, pods: pods_w, nodes: nodes_w })),
            queue: WorkQueue::new(),
        }
    }

    /// Watches DaemonSets, pods and nodes into caches; [`CONCURRENT_DAEMONSET_SYNCS`] workers
    /// sync the keys their events queue.
    pub async fn run(self) -> Result<()> {
        let Some(w) = self.writers.lock().unwrap_or_else(|e| e.into_inner()).take() else { return Ok(()) };
        let informer_client = self.informers.clone();
        let seen_pods: Mutex<HashMap<String, SeenPod>> = Mutex::new(HashMap::new());
        let seen_nodes: Mutex<HashMap<String, Node>> = Mutex::new(HashMap::new());
        let informers = async {
            let on_set = |ev: Change<&DaemonSet>| {
                let k = key_of(ev.object());
                if matches!(ev, Change::Deleted(_)) {
                    self.expectations.delete(&k);
                }
                self.queue.add(k);
            };
            let on_pod = |ev: Change<&Pod>| self.pod_changed(ev, &seen_pods);
            let on_node = |ev: Change<&Node>| self.node_changed(ev, &seen_nodes);
            tokio::join!(
                drive("daemonsets", reflector::reflector(w.sets, watcher(Api::<DaemonSet>::all(informer_client.clone()), watcher::Config::default())), on_set),
                drive("pods", reflector::reflector(w.pods, watcher(Api::<Pod>::all(informer_client.clone()), watcher::Config::default())), on_pod),
                drive("nodes", reflector::reflector(w.nodes, watcher(Api::<Node>::all(informer_client.clone()), watcher::Config::default())), on_node),
            );
        };
        let work = async {
            if self.sets.wait_until_ready().await.is_err() || self.pods.wait_until_ready().await.is_err() || self.nodes.wait_until_ready().await.is_err() {
                return;
            }
            tracing::info!(target: TARGET, workers = CONCURRENT_DAEMONSET_SYNCS, "caches synced; syncing DaemonSets");
            let worker = || async {
                while let Some(k) = self.queue.get().await {
                    match Box::pin(self.sync(&k)).await {
                        Ok(()) => self.queue.forget(&k),
                        Err(e) => {
                            tracing::warn!(target: TARGET, daemonset = %k, error = %e, "sync failed; will retry");
                            self.queue.add_rate_limited(k.clone());
                        }
                    }
                    self.queue.done(&k);
                }
            };
            futures::future::join_all((0..CONCURRENT_DAEMONSET_SYNCS).map(|_| worker())).await;
        };
        tokio::select! {
            () = informers => {}
            () = work => {}
        }
        Ok(())
    }

    /// The DaemonSet a controller reference names, if it is that one (same uid).
    fn resolve(&self, ns: &str, (name, uid): &(String, String)) -> Option<Arc<DaemonSet>> {
        self.sets.get(&ObjectRef::new(name).within(ns)).filter(|ds| ds.metadata.uid.as_deref() == Some(uid.as_str()))
    }

    /// addPod, updatePod, deletePod.
    fn pod_changed(&self, ev: Change<&Pod>, seen: &Mutex<HashMap<String, SeenPod>>) {
        let pod = ev.object();
        let ns = pod.metadata.namespace.clone().unwrap_or_default();
        let name = pod.metadata.name.clone().unwrap_or_default();
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let controller = controller_of(&pod.metadata).filter(|r| r.kind == "DaemonSet").map(|r| (r.name.clone(), r.uid.clone()));
        let ready = api::pod::is_pod_ready(pod);
        let going = matches!(ev, Change::Deleted(_)) || pod.metadata.deletion_timestamp.is_some();
        let before = {
            let mut seen = seen.lock().unwrap_or_else(|e| e.into_inner());
            if matches!(ev, Change::Deleted(_)) { seen.remove(&uid) } else { seen.insert(uid, SeenPod { controller: controller.clone(), ready }) }
        };
        if let Some(before) = &before
            && before.controller != controller
            && let Some(old) = before.controller.as_ref().and_then(|c| self.resolve(&ns, c))
        {
            self.queue.add(key_of(&old));
        }
        match controller.as_ref().and_then(|c| self.resolve(&ns, c)) {
            Some(ds) => {
                let k = key_of(&ds);
                if before.is_none() && !going {
                    self.expectations.creation_observed(&k);
                }
                if going {
                    self.expectations.deletion_observed(&k, &name);
                }
                let min_ready = ds.spec.min_ready_seconds.unwrap_or(0);
                if ready && before.as_ref().is_some_and(|b| !b.ready) && min_ready > 0 {
                    self.queue.add_after(k.clone(), Duration::from_secs(min_ready as u64 + 1));
                }
                self.queue.add(k);
            }
            None if controller.is_none() && !going => {
                // An orphan: every DaemonSet that might adopt it (getDaemonSetsForPod).
                let labels: BTreeMap<String, String> = pod.metadata.labels.clone().unwrap_or_default();
                for ds in self.sets.state() {
                    if ds.metadata.namespace.as_deref() == Some(ns.as_str()) && selector_of(&ds).is_some_and(|s| !s.is_empty() && s.matches(&labels)) {
                        self.queue.add(key_of(&ds));
                    }
                }
            }
            None => {}
        }
    }

    /// addNode, updateNode (only the DaemonSets whose answer for the node changed), and a
    /// deleted node (every DaemonSet: its desired count changes).
    fn node_changed(&self, ev: Change<&Node>, seen: &Mutex<HashMap<String, Node>>) {
        let node = ev.object();
        let name = node.metadata.name.clone().unwrap_or_default();
        let before = {
            let mut seen = seen.lock().unwrap_or_else(|e| e.into_inner());
            if matches!(ev, Change::Deleted(_)) { seen.remove(&name) } else { seen.insert(name, (*node).clone()) }
        };
        for ds in self.sets.state() {
            let now = node_should_run_daemon_pod(node, &ds);
            let queue = match (&ev, &before) {
                (Change::Deleted(_), _) => true,
                (_, None) => now.0,
                (_, Some(old)) => node_should_run_daemon_pod(old, &ds) != now,
            };
            if queue {
                self.queue.add(key_of(&ds));
            }
        }
    }

    /// canAdopt: a fresh read, not the cache, says the DaemonSet still exists and is not going.
    pub(super) async fn can_adopt(&self, ds: &DaemonSet) -> Result<bool> {
        let api: Api<DaemonSet> = Api::namespaced(self.client.clone(), ds.metadata.namespace.as_deref().unwrap_or_default());
        match api.get_opt(ds.metadata.name.as_deref().unwrap_or_default()).await.map_err(Error::Kube)? {
            Some(fresh) => Ok(fresh.metadata.uid == ds.metadata.uid && fresh.metadata.deletion_timestamp.is_none()),
            None => Ok(false),
        }
    }

    /// getNodesToDaemonPods: the DaemonSet's pods (after adoption and release) by the node each
    /// is for.
    async fn node_to_daemon_pods(&self, ds: &DaemonSet, selector: &apimachinery::labels::Selector) -> Result<BTreeMap<String, Vec<Arc<Pod>>>> {
        let ns = ds.metadata.namespace.as_deref().unwrap_or_default();
        let candidates: Vec<Arc<Pod>> = self.pods.state().into_iter().filter(|p| p.metadata.namespace.as_deref() == Some(ns)).collect();
        let manager = ControllerRefManager {
            api: Api::<Pod>::namespaced(self.client.clone(), ns),
            owner: controller_ref("apps/v1", "DaemonSet", &ds.metadata),
            owner_deleting: ds.metadata.deletion_timestamp.is_some(),
            selector,
        };
        let mine = manager.claim(candidates, || self.can_adopt(ds)).await?;
        let mut by_node: BTreeMap<String, Vec<Arc<Pod>>> = BTreeMap::new();
        for pod in mine {
            match target_node_name(&pod) {
                Some(node) => by_node.entry(node).or_default().push(pod),
                None => tracing::warn!(target: TARGET, pod = ?pod.metadata.name, "daemon pod names no node; ignoring it"),
            }
        }
        Ok(by_node)
    }

    /// Steps 1–6 for one DaemonSet.
    async fn sync(&self, k: &str) -> Result<()> {
        // Step 1.
        let (ns, name) = k.split_once('/').unwrap_or(("", k));
        let Some(ds) = self.sets.get(&ObjectRef::new(name).within(ns)) else {
            self.expectations.delete(k);
            return Ok(());
        };
        let Some(selector) = selector_of(&ds) else {
            tracing::warn!(target: TARGET, daemonset = %k, "selector does not parse; nothing to do");
            return Ok(());
        };
        if selector.is_empty() {
            self.recorder.event(reference(&ds), client::record::WARNING, "SelectingAll", "This daemon set is selecting all pods. A non-empty selector is required.");
            return Ok(());
        }
        if ds.metadata.deletion_timestamp.is_some() {
            return Ok(());
        }
        let nodes: Vec<Arc<Node>> = self.nodes.state();
        // Step 2.
        let (cur, old) = self.construct_history(&ds, &selector).await?;
        let hash = cur.metadata.labels.as_ref().and_then(|l| l.get(crate::history::CONTROLLER_REVISION_HASH_LABEL)).cloned().unwrap_or_default();
        // Step 3.
        if !self.expectations.satisfied(k) {
            return self.update_status(&ds, &selector, &nodes, &hash, false).await;
        }
        self.manage(&ds, &selector, &nodes, &hash, k).await?;
        // Step 4.
        let rolling = ds.spec.update_strategy.as_ref().and_then(|s| s.type_.as_deref()).unwrap_or("RollingUpdate") == "RollingUpdate";
        if self.expectations.satisfied(k) && rolling {
            self.rolling_update(&ds, &selector, &nodes, &hash, k).await?;
        }
        // Step 5.
        let node_to_pods = self.node_to_daemon_pods(&ds, &selector).await?;
        self.cleanup_history(&ds, &old, &node_to_pods).await?;
        // Step 6.
        self.update_status(&ds, &selector, &nodes, &hash, true).await
    }

    /// Step 3 (manage).
    async fn manage(&self, ds: &DaemonSet, selector: &apimachinery::labels::Selector, nodes: &[Arc<Node>], hash: &str, k: &str) -> Result<()> {
        let node_to_pods = self.node_to_daemon_pods(ds, selector).await?;
        let now = Timestamp::now();
        let mut create_on = Vec::new();
        let mut delete = Vec::new();
        let mut failed_deleted = 0;
        for node in nodes {
            let node_name = node.metadata.name.clone().unwrap_or_default();
            let (should_run, should_continue) = node_should_run_daemon_pod(node, ds);
            let plan = pods_should_be_on_node(should_run, should_continue, node_to_pods.get(&node_name).map(Vec::as_slice), ds, hash, now);
            if plan.create {
                create_on.push(node_name.clone());
            }
            delete.extend(plan.delete);
            for pod in plan.failed {
                // failedPodsBackoffKey: per DaemonSet, generation seen and node.
                let backoff_key = format!("{}/{}/{}", ds.metadata.uid.as_deref().unwrap_or_default(), ds.status.as_ref().and_then(|s| s.observed_generation).unwrap_or(0), node_name);
                if let Some(left) = self.failed_pods_backoff.remaining(&backoff_key, Instant::now()) {
                    tracing::info!(target: TARGET, daemonset = %k, node = %node_name, pod = %pod, wait = ?left, "deleting the failed pod is held back by backoff");
                    self.queue.add_after(k.to_string(), left);
                    continue;
                }
                self.failed_pods_backoff.next(&backoff_key, Instant::now());
                let msg = format!("Found failed daemon pod {}/{pod} on node {node_name}, will try to kill it", ds.metadata.namespace.as_deref().unwrap_or_default());
                tracing::info!(target: TARGET, daemonset = %k, node = %node_name, pod = %pod, "found a failed daemon pod; deleting it");
                self.recorder.event(reference(ds), client::record::WARNING, "FailedDaemonPod", msg);
                delete.push(pod);
                failed_deleted += 1;
            }
        }
        // getUnscheduledPodsWithoutNode: pods never bound, for a node that is gone.
        let known: std::collections::BTreeSet<&str> = nodes.iter().filter_map(|n| n.metadata.name.as_deref()).collect();
        for (node, pods) in &node_to_pods {
            if !known.contains(node.as_str()) {
                delete.extend(pods.iter().filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()).is_none_or(str::is_empty)).filter_map(|p| p.metadata.name.clone()));
            }
        }
        self.sync_nodes(ds, delete, create_on, hash, k).await?;
        if failed_deleted > 0 {
            // Retried with the queue's backoff, so a pod failing at once is not a hot loop.
            return Err(Error::Kube(kube::Error::Service(format!("deleted {failed_deleted} failed pods of DaemonSet {k}").into())));
        }
        Ok(())
    }

    /// Step 4 (rollingUpdate).
    async fn rolling_update(&self, ds: &DaemonSet, selector: &apimachinery::labels::Selector, nodes: &[Arc<Node>], hash: &str, k: &str) -> Result<()> {
        let mut node_to_pods = self.node_to_daemon_pods(ds, selector).await?;
        // updatedDesiredNodeCounts: every node that should run a pod takes part, pod or not.
        let mut desired = 0;
        let mut should_run_on = std::collections::BTreeSet::new();
        for node in nodes {
            if node_should_run_daemon_pod(node, ds).0 {
                desired += 1;
                let name = node.metadata.name.clone().unwrap_or_default();
                node_to_pods.entry(name.clone()).or_default();
                should_run_on.insert(name);
            }
        }
        let invalid = |e: String| Error::Kube(kube::Error::Service(format!("invalid rolling update of DaemonSet {k}: {e}").into()));
        let mut max_unavailable = unavailable_count(ds, desired).map_err(invalid)?;
        let max_surge = surge_count(ds, desired).map_err(invalid)?;
        if desired > 0 && max_unavailable == 0 && max_surge == 0 {
            // Neither would ever move: accept one unavailable node, as Kubernetes does.
            max_unavailable = 1;
        }
        let should_run = |n: &str| should_run_on.contains(n);
        let plan = rolling_update_plan(&RollingInput {
            node_to_pods: &node_to_pods,
            should_run: &should_run,
            hash,
            generation: template_generation(ds).ok().flatten(),
            max_surge,
            max_unavailable,
            min_ready_seconds: ds.spec.min_ready_seconds.unwrap_or(0),
            now: Timestamp::now(),
        });
        if !plan.delete.is_empty() || !plan.create_on.is_empty() {
            tracing::info!(target: TARGET, daemonset = %k, max_unavailable, max_surge, delete = ?plan.delete, create_on = ?plan.create_on, "rolling update step");
        }
        self.sync_nodes(ds, plan.delete, plan.create_on, hash, k).await
    }

    /// syncNodes: deletes `delete` and creates a pod on each of `create_on` (at most
    /// [`BURST_REPLICAS`] each), with expectations for both; creations in slow-start batches.
    pub(super) async fn sync_nodes(&self, ds: &DaemonSet, mut delete: Vec<String>, mut create_on: Vec<String>, hash: &str, k: &str) -> Result<()> {
        create_on.truncate(BURST_REPLICAS);
        delete.sort();
        delete.dedup();
        delete.truncate(BURST_REPLICAS);
        if create_on.is_empty() && delete.is_empty() {
            return Ok(());
        }
        self.expectations.set_expectations(k, create_on.len(), delete.iter().cloned());
        let ns = ds.metadata.namespace.clone().unwrap_or_default();
        let name = ds.metadata.name.clone().unwrap_or_default();
        let pods_api: Api<Pod> = Api::namespaced(self.client.clone(), &ns);
        let template = create_pod_template(&ds.spec.template, template_generation(ds).ok().flatten(), hash);
        let owner = controller_ref("apps/v1", "DaemonSet", &ds.metadata);
        let mut first_err = None;
        if !create_on.is_empty() {
            tracing::info!(target: TARGET, daemonset = %k, nodes = ?create_on, "creating daemon pods");
            let next = AtomicUsize::new(0);
            let (created, err) = slow_start_batch(create_on.len(), SLOW_START_INITIAL_BATCH_SIZE, || {
                let node = create_on.get(next.fetch_add(1, AtomicOrdering::SeqCst)).cloned().unwrap_or_default();
                let mut t = template.clone();
                if let Some(spec) = t.spec.as_mut() {
                    spec.affinity = Some(replace_daemon_set_pod_node_name_node_affinity(spec.affinity.take(), &node));
                }
                let pod = pod_from_template(&t, &ns, &name, owner.clone());
                let (api, reference) = (pods_api.clone(), reference(ds));
                async move {
                    match api.create(&PostParams::default(), &pod).await {
                        Ok(p) => {
                            self.recorder.event(reference, client::record::NORMAL, "SuccessfulCreate", format!("Created pod: {}", p.metadata.name.unwrap_or_default()));
                            Ok(())
                        }
                        Err(e) => {
                            let msg = api_message(&e);
                            self.recorder.event(reference, client::record::WARNING, "FailedCreate", format!("Error creating: {msg}"));
                            Err(msg)
                        }
                    }
                }
            })
            .await;
            // The creations never made will never be observed.
            for _ in created..create_on.len() {
                self.expectations.creation_observed(k);
            }
            first_err = err;
        }
        if !delete.is_empty() {
            tracing::info!(target: TARGET, daemonset = %k, pods = ?delete, "deleting daemon pods");
            let results = futures::future::join_all(delete.iter().map(|pod_name| {
                let (api, reference) = (pods_api.clone(), reference(ds));
                async move {
                    match api.delete(pod_name, &DeleteParams::default()).await {
                        Ok(_) => {
                            self.recorder.event(reference, client::record::NORMAL, "SuccessfulDelete", format!("Deleted pod: {pod_name}"));
                            Ok(())
                        }
                        Err(kube::Error::Api(s)) if s.code == 404 => {
                            self.expectations.deletion_observed(k, pod_name);
                            Ok(())
                        }
                        Err(e) => {
                            self.expectations.deletion_observed(k, pod_name);
                            let msg = api_message(&e);
                            self.recorder.event(reference, client::record::WARNING, "FailedDelete", format!("Error deleting: {msg}"));
                            Err(msg)
                        }
                    }
                }
            }))
            .await;
            first_err = first_err.or(results.into_iter().find_map(|r| r.err()));
        }
        match first_err {
            Some(e) => Err(Error::Kube(kube::Error::Service(e.into()))),
            None => Ok(()),
        }
    }

    /// Step 6 (updateDaemonSetStatus): written only when it changed.
    async fn update_status(&self, ds: &DaemonSet, selector: &apimachinery::labels::Selector, nodes: &[Arc<Node>], hash: &str, observed: bool) -> Result<()> {
        let node_to_pods = self.node_to_daemon_pods(ds, selector).await?;
        let mut status = calculate_status(ds, nodes, &node_to_pods, hash, Timestamp::now());
        if observed {
            status.observed_generation = ds.metadata.generation;
        }
        if Some(&status) != ds.status.as_ref() {
            let api: Api<DaemonSet> = Api::namespaced(self.client.clone(), ds.metadata.namespace.as_deref().unwrap_or_default());
            let mut updated = ds.clone();
            updated.status = Some(status.clone());
            match api.replace_status(ds.metadata.name.as_deref().unwrap_or_default(), &PostParams::default(), &updated).await {
                Ok(_) => {}
                // Changed or gone meanwhile: its event queues it again.
                Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => {}
                Err(e) => return Err(Error::Kube(e)),
            }
        }
        // A resync after minReadySeconds, for the pods waiting to become available.
        let min_ready = ds.spec.min_ready_seconds.unwrap_or(0);
        if min_ready > 0 && status.number_ready != status.number_available.unwrap_or(0) {
            self.queue.add_after(key_of(ds), Duration::from_secs(min_ready as u64));
        }
        Ok(())
    }
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

// ---- the history (update.go's constructHistory, controlledHistories, cleanupHistory) ----

impl DaemonSetsController {
    /// controlledHistories: the revisions the DaemonSet's selector matches that it controls,
    /// after adopting orphans and releasing what no longer matches.
    async fn controlled_histories(&self, ds: &DaemonSet, selector: &apimachinery::labels::Selector) -> Result<Vec<ControllerRevision>> {
        let ns = ds.metadata.namespace.as_deref().unwrap_or_default();
        let uid = ds.metadata.uid.as_deref().unwrap_or_default();
        let candidates = self.history.list_controller_revisions(ns, uid, &selector.to_string()).await?;
        let manager = ControllerRefManager {
            api: Api::<ControllerRevision>::namespaced(self.client.clone(), ns),
            owner: controller_ref("apps/v1", "DaemonSet", &ds.metadata),
            owner_deleting: ds.metadata.deletion_timestamp.is_some(),
            selector,
        };
        let claimed = manager.claim(candidates.into_iter().map(Arc::new).collect(), || self.can_adopt(ds)).await?;
        Ok(claimed.into_iter().map(|r| (*r).clone()).collect())
    }

    /// constructHistory: (the current revision, the old ones). The current one is the revision
    /// holding the current template — created if there is none, re-numbered newest if it is not
    /// (a rollback), deduplicated if there are several.
    pub(super) async fn construct_history(&self, ds: &DaemonSet, selector: &apimachinery::labels::Selector) -> Result<(ControllerRevision, Vec<ControllerRevision>)> {
        let ns = ds.metadata.namespace.as_deref().unwrap_or_default();
        let revisions = self.controlled_histories(ds, selector).await?;
        let (mut current, old): (Vec<ControllerRevision>, Vec<ControllerRevision>) = revisions.into_iter().partition(|r| matches(ds, r));
        let next = next_revision(&old);
        let cur = if current.is_empty() {
            // snapshot: a new revision of the current template.
            let labels = ds.spec.template.metadata.as_ref().and_then(|m| m.labels.clone()).unwrap_or_default();
            let owner = controller_ref("apps/v1", "DaemonSet", &ds.metadata);
            let mut revision = new_controller_revision(&ds.metadata, owner, &labels, get_patch(ds), next, None);
            revision.metadata.annotations = ds.metadata.annotations.clone();
            let before = ds.status.as_ref().and_then(|s| s.collision_count);
            let mut collision_count = before.unwrap_or(0);
            let created = self.history.create_controller_revision(&ds.metadata, &revision, &mut collision_count).await?;
            if Some(collision_count) != before && collision_count != 0 {
                // The name was taken: remember the count so the next sync finds this revision —
                // as Kubernetes, by an update of the status of a fresh read (its role allows
                // `update` of daemonsets/status, not `patch`); a Conflict goes back to the queue.
                let api: Api<DaemonSet> = Api::namespaced(self.client.clone(), ns);
                let name = ds.metadata.name.as_deref().unwrap_or_default();
                if let Some(mut fresh) = api.get_opt(name).await.map_err(Error::Kube)? {
                    fresh.status.get_or_insert_with(DaemonSetStatus::default).collision_count = Some(collision_count);
                    api.replace_status(name, &PostParams::default(), &fresh).await.map_err(Error::Kube)?;
                }
            }
            tracing::info!(target: TARGET, daemonset = %key_of(ds), revision = ?created.metadata.name, number = next, "created a ControllerRevision");
            created
        } else {
            // dedupCurHistories: keep the newest; its duplicates' pods take its hash, then go.
            sort_controller_revisions(&mut current);
            let keep = current.pop().unwrap_or_default();
            let keep_hash = keep.metadata.labels.as_ref().and_then(|l| l.get(CONTROLLER_REVISION_HASH_LABEL)).cloned().unwrap_or_default();
            for dup in &current {
                let dup_hash = dup.metadata.labels.as_ref().and_then(|l| l.get(CONTROLLER_REVISION_HASH_LABEL)).cloned().unwrap_or_default();
                let pods_api: Api<Pod> = Api::namespaced(self.client.clone(), ns);
                for pod in self.pods.state().iter().filter(|p| p.metadata.namespace.as_deref() == Some(ns) && p.metadata.labels.as_ref().and_then(|l| l.get(CONTROLLER_REVISION_HASH_LABEL)) == Some(&dup_hash)) {
                    let patch = json!({"metadata": {"labels": {CONTROLLER_REVISION_HASH_LABEL: keep_hash}}});
                    pods_api.patch(pod.metadata.name.as_deref().unwrap_or_default(), &PatchParams::default(), &Patch::Merge(&patch)).await.map_err(Error::Kube)?;
                }
                self.history.delete_controller_revision(dup).await?;
            }
            if keep.revision.unwrap_or(0) < next { self.history.update_controller_revision(&keep, next).await? } else { keep }
        };
        Ok((cur, old))
    }

    /// cleanupHistory: old revisions beyond `revisionHistoryLimit` deleted, oldest first, but
    /// never one a live pod of the DaemonSet still carries the hash of.
    pub(super) async fn cleanup_history(&self, ds: &DaemonSet, old: &[ControllerRevision], node_to_pods: &BTreeMap<String, Vec<Arc<Pod>>>) -> Result<()> {
        let limit = ds.spec.revision_history_limit.unwrap_or(api::apps::v1::defaults::DEFAULT_REVISION_HISTORY_LIMIT);
        if old.len() <= limit.max(0) as usize {
            return Ok(());
        }
        let live: BTreeSet<String> = node_to_pods
            .values()
            .flatten()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .filter_map(|p| p.metadata.labels.as_ref()?.get(CONTROLLER_REVISION_HASH_LABEL).cloned())
            .collect();
        for r in revisions_to_delete(old, &live, limit) {
            tracing::info!(target: TARGET, daemonset = %key_of(ds), revision = ?r.metadata.name, "deleting an old ControllerRevision");
            self.history.delete_controller_revision(&r).await?;
        }
        Ok(())
    }
}


#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::CONTROLLER_REVISION_HASH_LABEL;
    use serde_json::json;

    fn ds(strategy: Value, min_ready: i32) -> DaemonSet {
        serde_json::from_value(json!({"metadata": {"name": "d", "namespace": "default", "generation": 2},
            "spec": {"selector": {"matchLabels": {"app": "d"}}, "minReadySeconds": min_ready, "updateStrategy": strategy,
                     "template": {"metadata": {"labels": {"app": "d"}}, "spec": {"nodeSelector": {"daemon": "yes"}, "containers": [{"name": "c", "image": "busybox"}]}}}}))
        .expect("ds")
    }

    fn pod(name: &str, node: &str, hash: &str, phase: &str, ready_since: Option<&str>, created: &str) -> Arc<Pod> {
        let mut v = json!({"metadata": {"name": name, "creationTimestamp": created, "labels": {CONTROLLER_REVISION_HASH_LABEL: hash}},
                           "spec": {"containers": [], "nodeName": node}, "status": {"phase": phase}});
        if let Some(t) = ready_since {
            v["status"]["conditions"] = json!([{"type": "Ready", "status": "True", "lastTransitionTime": t}]);
        }
        Arc::new(serde_json::from_value(v).expect("pod"))
    }

    const T0: &str = "2026-12-03T00:00:00Z";
    const T1: &str = "2026-12-03T00:05:00Z";

    #[test]
    fn what_each_node_needs() {
        let now: Timestamp = "2026-12-03T00:10:00Z".parse().expect("time");
        let plain = ds(json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}}), 0);
        let surge = ds(json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}}), 0);
        let deleting = |p: Arc<Pod>| {
            let mut p = (*p).clone();
            p.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(now));
            Arc::new(p)
        };
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let plan = |should_run, should_continue, pods: Option<Vec<Arc<Pod>>>, d: &DaemonSet| pods_should_be_on_node(should_run, should_continue, pods.as_deref(), d, "new", now);
        let cases = [
            ("should run, none yet", plan(true, true, None, &plain), NodePlan { create: true, ..NodePlan::default() }),
            ("should not run, none", plan(false, false, None, &plain), NodePlan::default()),
            ("NoSchedule taint, none: none made", plan(false, true, None, &plain), NodePlan::default()),
            ("one running pod", plan(true, true, Some(vec![pod("a", "n", "new", "Running", Some(T0), T0)]), &plain), NodePlan::default()),
            ("NoSchedule taint keeps its pod", plan(false, true, Some(vec![pod("a", "n", "new", "Running", Some(T0), T0)]), &plain), NodePlan::default()),
            (
                "two: the younger goes",
                plan(true, true, Some(vec![pod("young", "n", "new", "Running", None, T1), pod("old", "n", "new", "Running", None, T0)]), &plain),
                NodePlan { delete: s(&["young"]), ..NodePlan::default() },
            ),
            (
                "a failed pod goes",
                plan(true, true, Some(vec![pod("f", "n", "new", "Failed", None, T0)]), &plain),
                NodePlan { failed: s(&["f"]), ..NodePlan::default() },
            ),
            ("a pod being deleted is left be", plan(true, true, Some(vec![deleting(pod("x", "n", "new", "Running", None, T0))]), &plain), NodePlan::default()),
            (
                "should not keep: all go",
                plan(false, false, Some(vec![pod("a", "n", "new", "Running", None, T0), pod("b", "n", "old", "Running", None, T1), deleting(pod("c", "n", "new", "Running", None, T0))]), &plain),
                NodePlan { delete: s(&["a", "b"]), ..NodePlan::default() },
            ),
            ("surge: only a failed pod, a new one at once", plan(true, true, Some(vec![pod("f", "n", "new", "Failed", None, T0)]), &surge), NodePlan { create: true, failed: s(&["f"]), ..NodePlan::default() }),
            (
                "surge: old ready, new not available: both stay",
                plan(true, true, Some(vec![pod("o", "n", "old", "Running", Some(T0), T0), pod("n", "n", "new", "Running", None, T1)]), &surge),
                NodePlan::default(),
            ),
            (
                "surge: new available: the old goes",
                plan(true, true, Some(vec![pod("o", "n", "old", "Running", Some(T0), T0), pod("n", "n", "new", "Running", Some(T1), T1)]), &surge),
                NodePlan { delete: s(&["o"]), ..NodePlan::default() },
            ),
            (
                "surge: old not ready: it goes",
                plan(true, true, Some(vec![pod("o", "n", "old", "Running", None, T0), pod("n", "n", "new", "Running", None, T1)]), &surge),
                NodePlan { delete: s(&["o"]), ..NodePlan::default() },
            ),
            (
                "surge: a second new pod goes",
                plan(true, true, Some(vec![pod("n1", "n", "new", "Running", Some(T0), T0), pod("n2", "n", "new", "Running", None, T1)]), &surge),
                NodePlan { delete: s(&["n2"]), ..NodePlan::default() },
            ),
        ];
        for (case, got, want) in cases {
            assert_eq!(got, want, "{case}");
        }
    }

    #[test]
    fn status_counts_the_nodes() {
        let now: Timestamp = "2026-12-03T00:05:30Z".parse().expect("time");
        let node = |name: &str, daemon: bool| -> Arc<Node> {
            let labels = if daemon { json!({"daemon": "yes"}) } else { json!({}) };
            Arc::new(serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}})).expect("node"))
        };
        let nodes = vec![node("n1", true), node("n2", true), node("n3", true), node("n4", true), node("off", false)];
        let pods: BTreeMap<String, Vec<Arc<Pod>>> = [
            ("n1", vec![pod("a", "n1", "new", "Running", Some(T0), T0)]),                 // ready long ago, updated
            ("n2", vec![pod("b", "n2", "old", "Running", Some("2026-12-03T00:05:20Z"), T0)]), // ready 10 s, old
            ("n3", vec![pod("c", "n3", "new", "Pending", None, T1)]),                     // not ready
            ("off", vec![pod("d", "off", "new", "Running", Some(T0), T0)]),               // misscheduled
        ]
        .into_iter()
        .map(|(n, p)| (n.to_string(), p))
        .collect();
        let d = ds(json!({"type": "RollingUpdate"}), 30);
        let s = calculate_status(&d, &nodes, &pods, "new", now);
        let counts = (s.desired_number_scheduled, s.current_number_scheduled, s.number_misscheduled, s.number_ready, s.number_available, s.updated_number_scheduled, s.number_unavailable);
        assert_eq!(counts, (4, 3, 1, 2, Some(1), Some(2), Some(3)));
        let s0 = calculate_status(&ds(json!({"type": "RollingUpdate"}), 0), &nodes, &pods, "new", now);
        assert_eq!((s0.number_available, s0.number_unavailable), (Some(2), Some(2)));
    }

    #[test]
    fn failed_pod_backoff_doubles() {
        let b = Backoff::default();
        let t0 = Instant::now();
        assert_eq!(b.remaining("k", t0), None);
        b.next("k", t0);
        assert_eq!(b.remaining("k", t0), Some(Duration::from_secs(1)));
        assert_eq!(b.remaining("k", t0 + Duration::from_secs(1)), None);
        b.next("k", t0 + Duration::from_secs(1));
        assert_eq!(b.remaining("k", t0 + Duration::from_secs(2)), Some(Duration::from_secs(1)));
        assert_eq!(b.remaining("other", t0), None);
    }
}
