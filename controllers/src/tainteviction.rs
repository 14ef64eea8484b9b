//! Mirrors pkg/controller/tainteviction/taint_eviction.go (the NoExecute taint manager): a pod
//! bound to a node with a `NoExecute` taint it does not tolerate is deleted; one that tolerates
//! it for `tolerationSeconds` is deleted when they run out; one that tolerates it for ever stays.
//!
//! The node lifecycle controller puts `node.kubernetes.io/unreachable:NoExecute` on a node whose
//! kubelet fell silent (and `not-ready` when it says Ready=False), and the API server's
//! DefaultTolerationSeconds admission gives every pod 300 s of tolerance for both: so five
//! minutes after a node dies its pods are deleted, and their controllers (a ReplicaSet, a Job)
//! create replacements elsewhere. Every `EVICTION_CHECK_PERIOD` the controller:
//! 1. takes every pod bound to a node, not already being deleted, from its pod cache, and the
//!    node from its node cache;
//! 2. decides ([`compute_eviction`]): nothing when the node has no NoExecute taint or the pod
//!    tolerates them all for ever; now when one is not tolerated; else at the moment the
//!    shortest matching `tolerationSeconds` runs out, counted from when the pod and the taint
//!    met ([`eviction_base`]);
//! 3. carries it out when the moment has come: the pod gets the `DisruptionTarget` condition
//!    (reason `DeletionByTaintManager`), a `TaintManagerEviction` event, and a DELETE with its own
//!    grace period. An eviction that was waiting and whose taint went away is cancelled, with an
//!    event saying so.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use api::core::v1::helper::tolerates;
use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::{Node, Pod, Taint, Toleration};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::json;

use crate::error::{Error, Result};

/// How often pods on tainted nodes are looked at: an eviction happens at most this late.
pub const EVICTION_CHECK_PERIOD: Duration = Duration::from_secs(1);

const NO_EXECUTE: &str = "NoExecute";

/// What is to happen to a pod on its node (step 2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Eviction {
    /// No NoExecute taint, or every one tolerated for ever.
    Never,
    /// A NoExecute taint the pod does not tolerate.
    Now,
    /// When the shortest `tolerationSeconds` of the tolerations in use runs out.
    At(Timestamp),
}

/// Step 2: the pod's fate on a node with `taints`, counting its tolerance from `base`
/// (Kubernetes' `processPodOnNode`: `getMatchingTolerations`, then `getMinTolerationTime`).
pub fn compute_eviction(taints: &[Taint], tolerations: &[Toleration], base: Timestamp) -> Eviction {
    let no_execute: Vec<&Taint> = taints.iter().filter(|t| t.effect == NO_EXECUTE).collect();
    if no_execute.is_empty() {
        return Eviction::Never;
    }
    // For each taint, the first toleration that tolerates it (as Kubernetes picks them).
    let mut used = Vec::with_capacity(no_execute.len());
    for taint in &no_execute {
        match tolerations.iter().find(|t| tolerates(t, taint)) {
            Some(t) => used.push(t),
            None => return Eviction::Now,
        }
    }
    // The shortest limited tolerance wins; a negative one means none at all.
    match used.iter().filter_map(|t| t.toleration_seconds).min() {
        None => Eviction::Never,
        Some(s) => {
            let at = base.checked_add(SignedDuration::from_secs(s.max(0))).unwrap_or(base);
            if s <= 0 { Eviction::Now } else { Eviction::At(at) }
        }
    }
}

/// From when a pod's tolerance counts: when it and the NoExecute taints met — the later of the
/// earliest taint's `timeAdded` and the pod's binding to the node (its PodScheduled condition,
/// else its creation). Kubernetes counts from when its taint manager saw the two together; both
/// moments here are stored in the objects, so a controller manager that restarts (or a new
/// leader) does not give every pod a fresh tolerance.
pub fn eviction_base(taints: &[Taint], pod: &Pod) -> Option<Timestamp> {
    let tainted = taints.iter().filter(|t| t.effect == NO_EXECUTE).filter_map(|t| t.time_added.as_ref().map(|t| t.0)).min();
    let scheduled = pod
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "PodScheduled" && c.status == "True"))
        .and_then(|c| c.last_transition_time.as_ref().map(|t| t.0))
        .or_else(|| pod.metadata.creation_timestamp.as_ref().map(|t| t.0));
    match (tainted, scheduled) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

pub struct TaintEvictionController {
    /// Lists and watches for the caches: the controller manager's own client (see
    /// [`crate::controller_context`]).
    informers: kube::Client,
    /// Everything else: the controller's own client.
    client: kube::Client,
    recorder: client::record::EventRecorder,
    /// Pods whose eviction is waiting for its moment, by UID (for the log and the cancel event).
    scheduled: HashMap<String, Timestamp>,
    /// Pods deleted by this controller that the cache may still show (client-go's expectations,
    /// in small): not deleted twice.
    evicted: HashSet<String>,
}

impl TaintEvictionController {
    pub fn new(informers: kube::Client, client: kube::Client) -> Self {
        let recorder = client::record::EventRecorder::new(client.clone(), "taint-eviction-controller", None);
        Self { informers, client, recorder, scheduled: HashMap::new(), evicted: HashSet::new() }
    }

    /// Watches nodes and pods into caches, waits until both have listed, then works every
    /// [`EVICTION_CHECK_PERIOD`].
    pub async fn run(mut self) -> Result<()> {
        let (nodes, nodes_w) = reflector::store::<Node>();
        let (pods, pods_w) = reflector::store::<Pod>();
        let informer_client = self.informers.clone();
        let informers = async {
            tokio::join!(
                drive("nodes", reflector::reflector(nodes_w, watcher(Api::<Node>::all(informer_client.clone()), watcher::Config::default()))),
                drive("pods", reflector::reflector(pods_w, watcher(Api::<Pod>::all(informer_client.clone()), watcher::Config::default()))),
            );
        };
        let work = async {
            if nodes.wait_until_ready().await.is_err() || pods.wait_until_ready().await.is_err() {
                return;
            }
            tracing::info!(target: "controllers::tainteviction", period = ?EVICTION_CHECK_PERIOD, "caches synced; evicting pods from NoExecute-tainted nodes");
            let mut tick = tokio::time::interval(EVICTION_CHECK_PERIOD);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                self.pass(&nodes, &pods).await;
            }
        };
        tokio::select! {
            () = informers => {}
            () = work => {}
        }
        Ok(())
    }

    /// One look at every bound pod (steps 1 to 3).
    async fn pass(&mut self, nodes: &Store<Node>, pods: &Store<Pod>) {
        let now = Timestamp::now();
        let all = pods.state();
        let present: HashSet<String> = all.iter().filter_map(|p| p.metadata.uid.clone()).collect();
        self.evicted.retain(|uid| present.contains(uid));
        let mut waiting = HashMap::new();
        for pod in all {
            // Step 1.
            let Some(node_name) = pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) else { continue };
            let Some(uid) = pod.metadata.uid.clone() else { continue };
            if pod.metadata.deletion_timestamp.is_some() || self.evicted.contains(&uid) {
                continue;
            }
            let Some(node) = nodes.get(&ObjectRef::new(node_name)) else { continue };
            let taints = node.spec.as_ref().and_then(|s| s.taints.as_deref()).unwrap_or_default();
            let tolerations = pod.spec.as_ref().and_then(|s| s.tolerations.as_deref()).unwrap_or_default();
            // Step 2.
            let Some(base) = eviction_base(taints, &pod) else { continue };
            let decision = compute_eviction(taints, tolerations, base);
            // Step 3.
            match decision {
                Eviction::Never => {}
                Eviction::At(at) if at > now => {
                    if !self.scheduled.contains_key(&uid) {
                        tracing::info!(target: "controllers::tainteviction", pod = %key(&pod), uid = %uid, node = node_name, at = %at, "pod tolerates the node's NoExecute taints for a while: eviction scheduled");
                    }
                    waiting.insert(uid, at);
                }
                Eviction::Now | Eviction::At(_) => match self.evict(&pod, node_name).await {
                    Ok(()) => {
                        self.evicted.insert(uid);
                    }
                    Err(e) => tracing::warn!(target: "controllers::tainteviction", pod = %key(&pod), error = %e, "eviction failed; will retry"),
                },
            }
        }
        // Evictions that were waiting and are no longer due at all: the taint went (or the pod
        // now tolerates it for ever).
        for (uid, _) in self.scheduled.iter().filter(|(uid, _)| !waiting.contains_key(*uid) && !self.evicted.contains(*uid)) {
            if let Some(pod) = pods.state().into_iter().find(|p| p.metadata.uid.as_deref() == Some(uid.as_str())) {
                let msg = format!("Cancelling deletion of Pod {}", key(&pod));
                tracing::info!(target: "controllers::tainteviction", pod = %key(&pod), uid = %uid, "eviction cancelled");
                self.recorder.event(client::record::pod_reference(&pod), client::record::NORMAL, "TaintManagerEviction", msg);
            }
        }
        self.scheduled = waiting;
    }

    /// Kubernetes' `deletePodHandler`: mark the pod as a disruption target, say why, delete it.
    async fn evict(&self, pod: &Pod, node: &str) -> Result<()> {
        let (Some(ns), Some(name)) = (pod.metadata.namespace.as_deref(), pod.metadata.name.as_deref()) else { return Ok(()) };
        let api: Api<Pod> = Api::namespaced(self.client.clone(), ns);
        let condition = json!({
            "type": "DisruptionTarget", "status": "True", "reason": "DeletionByTaintManager",
            "message": "Taint manager: deleting due to NoExecute taint",
            "lastTransitionTime": Timestamp::now().to_string(),
        });
        let patch = json!({"status": {"conditions": [condition]}});
        match api.patch_status(name, &PatchParams::default(), &Patch::Strategic(&patch)).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => return Ok(()),
            Err(e) => return Err(Error::Kube(e)),
        }
        let msg = format!("Marking for deletion Pod {ns}/{name}");
        self.recorder.event(client::record::pod_reference(pod), client::record::NORMAL, "TaintManagerEviction", msg);
        // The UID precondition: a pod of the same name created meanwhile is not ours to delete.
        let params = DeleteParams { preconditions: pod.metadata.uid.clone().map(|uid| kube::api::Preconditions { uid: Some(uid), resource_version: None }), ..DeleteParams::default() };
        match api.delete(name, &params).await {
            Ok(_) => {
                tracing::info!(target: "controllers::tainteviction", pod = %format!("{ns}/{name}"), uid = api::pod::uid(pod), node, "deleted pod from a node with a NoExecute taint it does not tolerate (any longer)");
                Ok(())
            }
            Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => Ok(()),
            Err(e) => Err(Error::Kube(e)),
        }
    }
}

fn key(pod: &Pod) -> String {
    format!("{}/{}", pod.metadata.namespace.as_deref().unwrap_or(""), pod.metadata.name.as_deref().unwrap_or(""))
}

/// Runs one informer's stream; the watcher retries by itself (with backoff), errors are logged.
async fn drive<K>(what: &'static str, stream: impl Stream<Item = watcher::Result<watcher::Event<K>>>) {
    let mut stream = std::pin::pin!(stream.default_backoff());
    while let Some(ev) = stream.next().await {
        if let Err(e) = ev {
            tracing::warn!(target: "controllers::tainteviction", resource = what, error = %e, "watch failed; retrying");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }
    fn taints(v: Value) -> Vec<Taint> {
        serde_json::from_value(v).unwrap()
    }
    fn tolerations(v: Value) -> Vec<Toleration> {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn compute_eviction_table() {
        let base = ts("2026-12-02T10:00:00Z");
        let unreachable = json!([{"key": "node.kubernetes.io/unreachable", "effect": "NoExecute", "timeAdded": "2026-12-02T10:00:00Z"}]);
        let both = json!([
            {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"},
            {"key": "dedicated", "value": "db", "effect": "NoExecute"},
        ]);
        let default_tol = json!([{"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}]);
        let cases = [
            // No NoExecute taint: nothing, whatever the tolerations.
            (json!([{"key": "x", "effect": "NoSchedule"}]), json!([]), Eviction::Never),
            (json!([]), json!([]), Eviction::Never),
            // Not tolerated: now.
            (unreachable.clone(), json!([]), Eviction::Now),
            (unreachable.clone(), json!([{"key": "other", "operator": "Exists"}]), Eviction::Now),
            // Tolerated for 300 s (the admission default): then.
            (unreachable.clone(), default_tol.clone(), Eviction::At(ts("2026-12-02T10:05:00Z"))),
            // Tolerated for ever (no tolerationSeconds), by key or by an empty key with Exists.
            (unreachable.clone(), json!([{"key": "node.kubernetes.io/unreachable", "operator": "Exists"}]), Eviction::Never),
            (unreachable.clone(), json!([{"operator": "Exists"}]), Eviction::Never),
            // Zero or negative seconds: now.
            (unreachable.clone(), json!([{"operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 0}]), Eviction::Now),
            (unreachable.clone(), json!([{"operator": "Exists", "effect": "NoExecute", "tolerationSeconds": -5}]), Eviction::Now),
            // Two taints: one untolerated is enough to go now.
            (both.clone(), default_tol.clone(), Eviction::Now),
            // Both tolerated: the shortest limit wins; an unlimited one does not extend it.
            (both.clone(), json!([
                {"key": "dedicated", "operator": "Exists", "tolerationSeconds": 60},
                {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "tolerationSeconds": 300},
            ]), Eviction::At(ts("2026-12-02T10:01:00Z"))),
            (both, json!([
                {"key": "dedicated", "operator": "Equal", "value": "db"},
                {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "tolerationSeconds": 30},
            ]), Eviction::At(ts("2026-12-02T10:00:30Z"))),
        ];
        for (t, tol, want) in cases {
            assert_eq!(compute_eviction(&taints(t.clone()), &tolerations(tol.clone()), base), want, "taints {t} tolerations {tol}");
        }
    }

    #[test]
    fn tolerance_counts_from_when_pod_and_taint_met() {
        let pod = |scheduled: Option<&str>| -> Pod {
            let mut p = json!({"metadata": {"name": "p", "creationTimestamp": "2026-12-02T09:00:00Z"}});
            if let Some(t) = scheduled {
                p["status"] = json!({"conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": t}]});
            }
            serde_json::from_value(p).unwrap()
        };
        let tainted = taints(json!([{"key": "k", "effect": "NoExecute", "timeAdded": "2026-12-02T10:00:00Z"}, {"key": "j", "effect": "NoExecute", "timeAdded": "2026-12-02T10:30:00Z"}]));
        // Bound long before the node was tainted: from the earliest taint.
        assert_eq!(eviction_base(&tainted, &pod(Some("2026-12-02T09:00:05Z"))), Some(ts("2026-12-02T10:00:00Z")));
        // Bound (with a toleration) to a node already tainted: from the binding.
        assert_eq!(eviction_base(&tainted, &pod(Some("2026-12-02T11:00:00Z"))), Some(ts("2026-12-02T11:00:00Z")));
        // No PodScheduled condition: the pod's creation.
        assert_eq!(eviction_base(&tainted, &pod(None)), Some(ts("2026-12-02T10:00:00Z")));
        // A taint without timeAdded (put on by hand): from the binding.
        let by_hand = taints(json!([{"key": "k", "effect": "NoExecute"}]));
        assert_eq!(eviction_base(&by_hand, &pod(Some("2026-12-02T09:00:05Z"))), Some(ts("2026-12-02T09:00:05Z")));
    }
}
