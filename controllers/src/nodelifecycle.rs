//! Mirrors pkg/controller/nodelifecycle/node_lifecycle_controller.go: notices nodes whose kubelet
//! went silent, says so in their status, taints them, and marks their pods not ready.
//!
//! A kubelet proves it is alive two ways: by renewing its Lease in `kube-node-lease` (every 10 s,
//! cheap) and by posting its node status (the Ready condition's `lastHeartbeatTime`). Every
//! `--node-monitor-period` (5 s) the controller, for each node:
//! 1. observes the node's Ready heartbeat and its Lease's `renewTime`; when either *changed* since
//!    the last pass it notes "alive now" by its own clock ([`observe_node_health`], Kubernetes'
//!    `tryUpdateNodeHealth` bookkeeping). Clocks of different machines are never compared: a node
//!    with a skewed clock is judged only by whether it keeps renewing;
//! 2. decides ([`compute_node_actions`]): when the last sign of life is older than
//!    `--node-monitor-grace-period` (40 s), every kubelet-owned condition becomes Unknown
//!    ("Kubelet stopped posting node status."); the taints follow the Ready condition
//!    ([`desired_taints`]: Unknown → `node.kubernetes.io/unreachable`, False →
//!    `node.kubernetes.io/not-ready`, True → neither);
//! 3. once every node is decided, gives each zone a state and a tainting rate from how many of
//!    its nodes are Ready ([`crate::zone_disruption`]);
//! 4. carries it out: patches `nodes/<n>/status`, records `NodeNotReady` on the node when Ready
//!    left True, patches the taints — a new NoExecute one only when the zone's rate allows
//!    ([`gate_no_execute`]) — and sets Ready=False on every pod of an unreachable node
//!    ([`pod_not_ready_condition`], Kubernetes' `MarkPodsNotReady`) through `pods/<p>/status`.
//!
//! Every write carries the resourceVersion it was computed from: if the kubelet posted its status
//! in between, the write fails with a conflict and the next pass decides again on fresh data,
//! instead of overwriting a live kubelet's Ready=True with Unknown.
//!
//! A node first seen gets a whole grace period from that moment (as Kubernetes does), so a newly
//! elected controller manager does not declare every node dead at once on stale heartbeats.
//! Conditions belong to the kubelet: when it comes back it sets them itself; the controller only
//! takes its taints away.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use api::core::v1::well_known::{
    TAINT_NODE_DISK_PRESSURE, TAINT_NODE_MEMORY_PRESSURE, TAINT_NODE_NETWORK_UNAVAILABLE, TAINT_NODE_NOT_READY,
    TAINT_NODE_PID_PRESSURE, TAINT_NODE_UNREACHABLE, TAINT_NODE_UNSCHEDULABLE,
};
use futures::{Stream, StreamExt};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, NodeCondition, ObjectReference, Pod, PodCondition, Taint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::json;

use crate::error::{Error, Result};
use crate::zone_disruption::{self, Rates, ZoneLimiters, ZoneState};

/// Where kubelets keep their heartbeat Leases (one per node, named after it).
pub const NODE_LEASE_NAMESPACE: &str = "kube-node-lease";
/// `--node-monitor-period`'s default: how often node health is checked.
pub const DEFAULT_NODE_MONITOR_PERIOD: Duration = Duration::from_secs(5);
/// `--node-monitor-grace-period`'s default: how long a silent node is still trusted. Several
/// lease renewals (10 s each) must be missed, so one slow write does not fail a node.
pub const DEFAULT_NODE_MONITOR_GRACE_PERIOD: Duration = Duration::from_secs(40);


/// The conditions the kubelet posts, and so the ones that go Unknown when it falls silent.
pub const KUBELET_CONDITIONS: [&str; 4] = ["Ready", "MemoryPressure", "DiskPressure", "PIDPressure"];

/// Which condition status means which NoSchedule taint (Kubernetes'
/// `nodeConditionToTaintKeyStatusMap`, the TaintNodesByCondition table).
const CONDITION_TAINTS: [(&str, &str, &str); 6] = [
    ("Ready", "False", TAINT_NODE_NOT_READY),
    ("Ready", "Unknown", TAINT_NODE_UNREACHABLE),
    ("MemoryPressure", "True", TAINT_NODE_MEMORY_PRESSURE),
    ("DiskPressure", "True", TAINT_NODE_DISK_PRESSURE),
    ("PIDPressure", "True", TAINT_NODE_PID_PRESSURE),
    ("NetworkUnavailable", "True", TAINT_NODE_NETWORK_UNAVAILABLE),
];

const NO_SCHEDULE: &str = "NoSchedule";
const NO_EXECUTE: &str = "NoExecute";

/// The node lifecycle part of kube-controller-manager's flags.
#[derive(Clone, Debug)]
pub struct Options {
    /// `--node-monitor-period`.
    pub node_monitor_period: Duration,
    /// `--node-monitor-grace-period`.
    pub node_monitor_grace_period: Duration,
    /// `--node-eviction-rate`, `--secondary-node-eviction-rate`, `--unhealthy-zone-threshold`,
    /// `--large-cluster-size-threshold`: how fast dead nodes get their NoExecute taint.
    pub rates: Rates,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            node_monitor_period: DEFAULT_NODE_MONITOR_PERIOD,
            node_monitor_grace_period: DEFAULT_NODE_MONITOR_GRACE_PERIOD,
            rates: Rates::default(),
        }
    }
}

/// What the controller last saw of a node (Kubernetes' `nodeHealthData`).
#[derive(Clone, Debug, PartialEq)]
pub struct NodeHealth {
    /// When, by this controller's clock, the node last showed a sign of life.
    pub probe_timestamp: Instant,
    /// The Ready condition's `lastHeartbeatTime` as last seen (compared for change, never to a clock).
    pub ready_heartbeat: Option<Time>,
    /// The Lease's `renewTime` as last seen (likewise).
    pub lease_renew_time: Option<MicroTime>,
}

/// Step 1: the node's health record after looking at it at `now`. A node seen for the first time
/// is given a fresh grace period; after that, only a *change* of the Ready heartbeat or the
/// Lease's renewTime counts as a sign of life.
pub fn observe_node_health(saved: Option<&NodeHealth>, node: &Node, lease: Option<&Lease>, now: Instant) -> NodeHealth {
    let heartbeat = condition(node, "Ready").and_then(|c| c.last_heartbeat_time.clone());
    let renew = lease.and_then(|l| l.spec.as_ref()).and_then(|s| s.renew_time.clone());
    let Some(saved) = saved else {
        return NodeHealth { probe_timestamp: now, ready_heartbeat: heartbeat, lease_renew_time: renew };
    };
    let mut health = saved.clone();
    if heartbeat != saved.ready_heartbeat {
        // The kubelet posted its status (or its Ready condition appeared or vanished).
        health.probe_timestamp = now;
        health.ready_heartbeat = heartbeat;
    }
    if renew != saved.lease_renew_time {
        // A Lease deleted is no sign of life; one renewed (or recreated) is.
        if renew.is_some() {
            health.probe_timestamp = now;
        }
        health.lease_renew_time = renew;
    }
    health
}

/// What one pass decided for one node.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodeActions {
    /// Conditions to write to the node's status (merged by type): the ones the controller set to
    /// Unknown because the kubelet fell silent. Empty: no status write.
    pub conditions: Vec<NodeCondition>,
    /// The node's whole new taint list, when it must change.
    pub taints: Option<Vec<Taint>>,
    /// Ready left True in this pass: record `NodeNotReady` on the node.
    pub record_not_ready: bool,
    /// The kubelet is unreachable: its pods' Ready condition is no longer trustworthy.
    pub mark_pods_not_ready: bool,
}

/// Step 2 (the decisions of `monitorNodeHealth`, `tryUpdateNodeHealth`,
/// `doNoScheduleTaintingPass` and `processTaintBaseEviction`): given the node, what the controller
/// knows of its health, the time on its own clock (`now`, for staleness) and on the wall
/// (`wall`, for the timestamps it writes).
pub fn compute_node_actions(node: &Node, health: &NodeHealth, now: Instant, grace: Duration, wall: Timestamp) -> NodeActions {
    let mut actions = NodeActions::default();
    let stale = now.saturating_duration_since(health.probe_timestamp) > grace;
    let observed_ready = condition(node, "Ready").map(|c| c.status.clone());
    let mut ready = observed_ready.clone();
    if stale {
        actions.conditions = unknown_conditions(node, wall);
        if let Some(c) = actions.conditions.iter().find(|c| c.type_ == "Ready") {
            ready = Some(c.status.clone());
        }
        actions.mark_pods_not_ready = true;
    }
    actions.record_not_ready = observed_ready.as_deref() == Some("True") && ready.as_deref() != Some("True");
    // The taints follow the conditions as they will be after the status write.
    let mut statuses: Vec<(String, String)> = node_conditions(node).iter().map(|c| (c.type_.clone(), c.status.clone())).collect();
    for c in &actions.conditions {
        match statuses.iter_mut().find(|(t, _)| *t == c.type_) {
            Some(s) => s.1 = c.status.clone(),
            None => statuses.push((c.type_.clone(), c.status.clone())),
        }
    }
    let unschedulable = node.spec.as_ref().and_then(|s| s.unschedulable).unwrap_or(false);
    actions.taints = desired_taints(node_taints(node), &statuses, unschedulable, wall);
    actions
}

/// The kubelet-owned conditions as they must read once the kubelet is presumed gone: each one not
/// yet Unknown becomes Unknown (its heartbeat kept: nobody heard from the kubelet since); one the
/// kubelet never posted is added. Only the conditions that change are returned.
fn unknown_conditions(node: &Node, wall: Timestamp) -> Vec<NodeCondition> {
    let mut out = Vec::new();
    for type_ in KUBELET_CONDITIONS {
        match condition(node, type_) {
            Some(c) if c.status == "Unknown" => {}
            Some(c) => out.push(NodeCondition {
                status: "Unknown".into(),
                reason: Some("NodeStatusUnknown".into()),
                message: Some("Kubelet stopped posting node status.".into()),
                last_transition_time: Some(Time(wall)),
                ..c.clone()
            }),
            None => out.push(NodeCondition {
                type_: type_.into(),
                status: "Unknown".into(),
                reason: Some("NodeStatusNeverUpdated".into()),
                message: Some("Kubelet never posted node status.".into()),
                last_heartbeat_time: node.metadata.creation_timestamp.clone(),
                last_transition_time: Some(Time(wall)),
            }),
        }
    }
    out
}

/// The node's taints as the controller wants them, or None when they are already right. Only the
/// taints this controller owns are touched; the others (an admin's, the kubelet's own) stay as
/// they are and where they are.
///
/// - NoSchedule, from the conditions (`doNoScheduleTaintingPass`): one taint per
///   [`CONDITION_TAINTS`] row that holds, and `node.kubernetes.io/unschedulable` for a cordoned
///   node. New pods stay off.
/// - NoExecute, from Ready (`processTaintBaseEviction`): `not-ready` for False, `unreachable` for
///   Unknown, neither for True, unchanged while the node has no Ready condition. They carry
///   `timeAdded`, from which Kubernetes counts each pod's `tolerationSeconds`.
pub fn desired_taints(current: &[Taint], conditions: &[(String, String)], unschedulable: bool, wall: Timestamp) -> Option<Vec<Taint>> {
    let status = |t: &str| conditions.iter().find(|(ty, _)| ty == t).map(|(_, s)| s.as_str());
    let mut wanted: Vec<(&str, &str)> = CONDITION_TAINTS
        .iter()
        .filter(|(ty, st, _)| status(ty) == Some(*st))
        .map(|(_, _, key)| (*key, NO_SCHEDULE))
        .collect();
    if unschedulable {
        wanted.push((TAINT_NODE_UNSCHEDULABLE, NO_SCHEDULE));
    }
    let mut owned: Vec<(&str, &str)> = CONDITION_TAINTS.iter().map(|(_, _, key)| (*key, NO_SCHEDULE)).collect();
    owned.push((TAINT_NODE_UNSCHEDULABLE, NO_SCHEDULE));
    match status("Ready") {
        Some("False") => wanted.push((TAINT_NODE_NOT_READY, NO_EXECUTE)),
        Some("Unknown") => wanted.push((TAINT_NODE_UNREACHABLE, NO_EXECUTE)),
        _ => {}
    }
    if status("Ready").is_some() {
        owned.extend([(TAINT_NODE_NOT_READY, NO_EXECUTE), (TAINT_NODE_UNREACHABLE, NO_EXECUTE)]);
    }
    let is = |t: &Taint, (key, effect): (&str, &str)| t.key == key && t.effect == effect;
    let mut next: Vec<Taint> = current
        .iter()
        .filter(|t| !owned.iter().any(|o| is(t, *o)) || wanted.iter().any(|w| is(t, *w)))
        .cloned()
        .collect();
    for (key, effect) in wanted {
        if !next.iter().any(|t| is(t, (key, effect))) {
            next.push(Taint {
                key: key.into(),
                effect: effect.into(),
                time_added: (effect == NO_EXECUTE).then_some(Time(wall)),
                value: None,
            });
        }
    }
    (next != current).then_some(next)
}

/// Step 4's gate on the taints [`desired_taints`] chose (the rate-limited half of
/// `processTaintBaseEviction`): a node that has no `unreachable`/`not-ready` NoExecute taint yet
/// gets one only if `may_add` says its zone has a token; otherwise it keeps its other changes
/// and waits for a later pass. Swapping one of the two for the other is not limited, as in
/// Kubernetes. With `drop_all` (every zone fully disrupted) both are taken away.
pub fn gate_no_execute(current: &[Taint], desired: Option<Vec<Taint>>, drop_all: bool, may_add: impl FnOnce() -> bool) -> Option<Vec<Taint>> {
    let ours = |t: &Taint| t.effect == NO_EXECUTE && (t.key == TAINT_NODE_UNREACHABLE || t.key == TAINT_NODE_NOT_READY);
    let mut next = desired.unwrap_or_else(|| current.to_vec());
    if drop_all {
        next.retain(|t| !ours(t));
    } else if !current.iter().any(ours) && next.iter().any(ours) && !may_add() {
        next.retain(|t| !ours(t));
    }
    (next != current).then_some(next)
}

/// The node's Ready status once `actions` are written: what its zone's state counts.
fn ready_after(node: &Node, actions: &NodeActions) -> Option<bool> {
    let set = actions.conditions.iter().find(|c| c.type_ == "Ready").map(|c| c.status.as_str());
    set.or_else(|| condition(node, "Ready").map(|c| c.status.as_str())).map(|s| s == "True")
}

/// Kubernetes' `MarkPodsNotReady` for one pod: the Ready condition to write when `pod` runs on
/// the unreachable `node` and still claims to be ready (or Unknown). Pods without a Ready
/// condition were never ready and are left alone, as in Kubernetes.
pub fn pod_not_ready_condition(pod: &Pod, node: &str, wall: Timestamp) -> Option<PodCondition> {
    if pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) != Some(node) {
        return None;
    }
    let ready = pod.status.as_ref()?.conditions.as_ref()?.iter().find(|c| c.type_ == "Ready")?;
    if ready.status == "False" {
        return None;
    }
    Some(PodCondition {
        status: "False".into(),
        reason: Some("NodeNotReady".into()),
        message: Some("Node is not ready".into()),
        last_transition_time: Some(Time(wall)),
        ..ready.clone()
    })
}

fn node_conditions(node: &Node) -> &[NodeCondition] {
    node.status.as_ref().and_then(|s| s.conditions.as_deref()).unwrap_or(&[])
}

fn node_taints(node: &Node) -> &[Taint] {
    node.spec.as_ref().and_then(|s| s.taints.as_deref()).unwrap_or(&[])
}

fn condition<'a>(node: &'a Node, type_: &str) -> Option<&'a NodeCondition> {
    node_conditions(node).iter().find(|c| c.type_ == type_)
}

/// The object reference events about a node carry (Kubernetes uses the name as the UID, since
/// events about nodes are looked up by name).
fn node_reference(node: &Node) -> ObjectReference {
    let name = node.metadata.name.clone();
    ObjectReference { api_version: Some("v1".into()), kind: Some("Node".into()), uid: name.clone(), name, ..Default::default() }
}

pub struct NodeLifecycleController {
    /// Lists and watches for the caches: the controller manager's own client (see
    /// [`crate::controller_context`]).
    informers: kube::Client,
    /// Everything else: the controller's own client.
    client: kube::Client,
    recorder: client::record::EventRecorder,
    opts: Options,
    /// Per node name; only the monitor loop touches it.
    health: HashMap<String, NodeHealth>,
    /// Per zone: its state on the last pass, and its tainting rate.
    zone_states: HashMap<String, ZoneState>,
    limiters: ZoneLimiters,
}

impl NodeLifecycleController {
    pub fn new(informers: kube::Client, client: kube::Client, opts: Options) -> Self {
        let recorder = client::record::EventRecorder::new(client.clone(), "node-controller", None);
        Self { informers, client, recorder, opts, health: HashMap::new(), zone_states: HashMap::new(), limiters: ZoneLimiters::default() }
    }

    /// Watches nodes, node Leases and pods into local caches (client-go's informers), waits until
    /// all three have listed, then checks node health every `node_monitor_period`.
    pub async fn run(mut self) -> Result<()> {
        let (nodes, nodes_w) = reflector::store::<Node>();
        let (leases, leases_w) = reflector::store::<Lease>();
        let (pods, pods_w) = reflector::store::<Pod>();
        let informer_client = self.informers.clone();
        let informers = async {
            tokio::join!(
                drive("nodes", reflector::reflector(nodes_w, watcher(Api::<Node>::all(informer_client.clone()), watcher::Config::default()))),
                drive(
                    "leases",
                    reflector::reflector(
                        leases_w,
                        watcher(Api::<Lease>::namespaced(informer_client.clone(), NODE_LEASE_NAMESPACE), watcher::Config::default())
                    )
                ),
                drive("pods", reflector::reflector(pods_w, watcher(Api::<Pod>::all(informer_client.clone()), watcher::Config::default()))),
            );
        };
        let monitor = async {
            // A pass on half-filled caches would give nodes a grace period computed from nothing.
            for ready in [nodes.wait_until_ready().await, leases.wait_until_ready().await, pods.wait_until_ready().await] {
                if ready.is_err() {
                    return; // the informers are gone; so is this controller
                }
            }
            tracing::info!(target: "controllers::nodelifecycle", period = ?self.opts.node_monitor_period, grace = ?self.opts.node_monitor_grace_period, "caches synced; monitoring node health");
            let mut tick = tokio::time::interval(self.opts.node_monitor_period);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                self.monitor_node_health(&nodes, &leases, &pods).await;
            }
        };
        tokio::select! {
            () = informers => {}
            () = monitor => {}
        }
        Ok(())
    }

    /// One pass over every node (Kubernetes' `monitorNodeHealth` and `handleDisruption`).
    /// Failures are logged and left to the next pass, which decides again from what it then sees.
    pub async fn monitor_node_health(&mut self, nodes: &Store<Node>, leases: &Store<Lease>, pods: &Store<Pod>) {
        let mut all = nodes.state();
        all.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        self.health.retain(|name, _| all.iter().any(|n| n.metadata.name.as_deref() == Some(name)));
        let (now, wall) = (Instant::now(), Timestamp::now());
        let mut decided = Vec::with_capacity(all.len());
        for node in all {
            let Some(name) = node.metadata.name.clone() else { continue };
            let lease = leases.get(&ObjectRef::new(&name).within(NODE_LEASE_NAMESPACE));
            // Step 1: observe.
            let health = observe_node_health(self.health.get(&name), &node, lease.as_deref(), now);
            self.health.insert(name.clone(), health.clone());
            // Step 2: decide.
            let actions = compute_node_actions(&node, &health, now, self.opts.node_monitor_grace_period, wall);
            decided.push((node, actions));
        }
        // Step 3: each zone's state and tainting rate, from Ready as this pass leaves it.
        let all_fully_disrupted = self.update_zones(&decided, now);
        // Step 4: act; a new NoExecute taint only when the node's zone has a token.
        for (node, mut actions) in decided {
            let zone = zone_disruption::zone_of(&node);
            let limiters = &mut self.limiters;
            actions.taints = gate_no_execute(node_taints(&node), actions.taints, all_fully_disrupted, || limiters.try_take(&zone, now));
            let name = node.metadata.name.clone().unwrap_or_default();
            if let Err(e) = self.apply(&node, &actions, pods).await {
                if e.is_conflict() {
                    tracing::debug!(target: "controllers::nodelifecycle", node = %name, "node changed meanwhile; the next pass decides again");
                } else {
                    tracing::warn!(target: "controllers::nodelifecycle", node = %name, error = %e, "node health update failed; will retry");
                }
            }
        }
    }

    /// Step 3: counts Ready and not-Ready nodes per zone (nodes without a Ready condition do not
    /// count), logs every zone whose state changed, sets each zone's rate. Returns whether every
    /// zone is fully disrupted.
    fn update_zones(&mut self, decided: &[(std::sync::Arc<Node>, NodeActions)], now: Instant) -> bool {
        let mut counts: HashMap<String, (usize, usize)> = HashMap::new();
        for (node, actions) in decided {
            let Some(ready) = ready_after(node, actions) else { continue };
            let c = counts.entry(zone_disruption::zone_of(node)).or_default();
            if ready { c.0 += 1 } else { c.1 += 1 }
        }
        let rates = self.opts.rates;
        let states: HashMap<String, ZoneState> =
            counts.iter().map(|(z, (r, nr))| (z.clone(), zone_disruption::compute_zone_state(*r, *nr, rates.unhealthy_zone_threshold))).collect();
        let all_fully_disrupted = !states.is_empty() && states.values().all(|s| *s == ZoneState::FullDisruption);
        for (zone, state) in &states {
            let before = self.zone_states.get(zone).copied().unwrap_or(ZoneState::Normal);
            if before != *state {
                let (ready, not_ready) = counts[zone];
                tracing::info!(target: "controllers::nodelifecycle", zone = %zone, from = ?before, to = ?state, ready, not_ready, "zone state changed");
            }
            let (ready, not_ready) = counts[zone];
            self.limiters.set_qps(zone, zone_disruption::zone_qps(*state, ready + not_ready, all_fully_disrupted, &rates), now);
        }
        let was_all = !self.zone_states.is_empty() && self.zone_states.values().all(|s| *s == ZoneState::FullDisruption);
        if all_fully_disrupted && !was_all {
            tracing::warn!(target: "controllers::nodelifecycle", "no node in any zone is Ready: controller is entering master disruption mode, NoExecute taints are taken away and nothing is evicted");
        } else if was_all && !all_fully_disrupted {
            tracing::info!(target: "controllers::nodelifecycle", "a node is Ready again: controller is exiting master disruption mode");
        }
        let zones: Vec<&String> = states.keys().collect();
        self.limiters.retain(&zones);
        self.zone_states = states;
        all_fully_disrupted
    }

    async fn apply(&self, node: &Node, actions: &NodeActions, pods: &Store<Pod>) -> Result<()> {
        let api: Api<Node> = Api::all(self.client.clone());
        let name = node.metadata.name.clone().unwrap_or_default();
        let mut rv = node.metadata.resource_version.clone();
        if !actions.conditions.is_empty() {
            let patch = json!({"metadata": {"resourceVersion": rv}, "status": {"conditions": actions.conditions}});
            let updated = api.patch_status(&name, &PatchParams::default(), &Patch::Strategic(&patch)).await.map_err(Error::Kube)?;
            rv = updated.metadata.resource_version;
            let types: Vec<&str> = actions.conditions.iter().map(|c| c.type_.as_str()).collect();
            tracing::info!(target: "controllers::nodelifecycle", node = %name, conditions = ?types, "kubelet stopped posting node status; conditions set to Unknown");
        }
        if actions.record_not_ready {
            let msg = format!("Node {name} status is now: NodeNotReady");
            self.recorder.event(node_reference(node), client::record::NORMAL, "NodeNotReady", msg);
        }
        if let Some(taints) = &actions.taints {
            let patch = json!({"metadata": {"resourceVersion": rv}, "spec": {"taints": taints}});
            api.patch(&name, &PatchParams::default(), &Patch::Strategic(&patch)).await.map_err(Error::Kube)?;
            let keys: Vec<String> = taints.iter().map(|t| format!("{}:{}", t.key, t.effect)).collect();
            tracing::info!(target: "controllers::nodelifecycle", node = %name, taints = ?keys, "node taints updated");
        }
        if actions.mark_pods_not_ready {
            self.mark_pods_not_ready(&name, pods).await?;
        }
        Ok(())
    }

    /// Kubernetes' `MarkPodsNotReady`: the kubelet that would report these pods is unreachable,
    /// so their Ready=True is a claim nobody stands behind any more; endpoints stop using them.
    async fn mark_pods_not_ready(&self, node: &str, pods: &Store<Pod>) -> Result<()> {
        let wall = Timestamp::now();
        let mut first_err = None;
        for pod in pods.state() {
            let Some(cond) = pod_not_ready_condition(&pod, node, wall) else { continue };
            let (Some(ns), Some(name)) = (pod.metadata.namespace.as_deref(), pod.metadata.name.as_deref()) else { continue };
            let patch = json!({"metadata": {"resourceVersion": pod.metadata.resource_version}, "status": {"conditions": [cond]}});
            let api: Api<Pod> = Api::namespaced(self.client.clone(), ns);
            match api.patch_status(name, &PatchParams::default(), &Patch::Strategic(&patch)).await {
                Ok(_) => {
                    tracing::info!(target: "controllers::nodelifecycle", pod = %format!("{ns}/{name}"), uid = api::pod::uid(&pod), node, "updating ready status of pod to false");
                    self.recorder.event(client::record::pod_reference(&pod), client::record::WARNING, "NodeNotReady", "Node is not ready");
                }
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                // Keep going: one pod's failure must not leave the others claiming to be ready.
                Err(e) => first_err = first_err.or(Some(Error::Kube(e))),
            }
        }
        first_err.map_or(Ok(()), Err)
    }
}

/// Runs one informer's stream; the watcher retries by itself (with backoff), errors are logged.
async fn drive<K>(what: &'static str, stream: impl Stream<Item = watcher::Result<watcher::Event<K>>>) {
    let mut stream = std::pin::pin!(stream.default_backoff());
    while let Some(ev) = stream.next().await {
        if let Err(e) = ev {
            tracing::warn!(target: "controllers::nodelifecycle", resource = what, error = %e, "watch failed; retrying");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::coordination::v1::LeaseSpec;
    use serde_json::Value;

    const GRACE: Duration = Duration::from_secs(40);

    fn ts(s: &str) -> Timestamp {
        s.parse().expect("valid timestamp")
    }

    fn wall() -> Timestamp {
        ts("2025-01-01T00:10:00Z")
    }

    fn node(conditions: Value, taints: Value) -> Node {
        serde_json::from_value(json!({
            "metadata": {"name": "n1", "creationTimestamp": "2025-01-01T00:00:00Z", "resourceVersion": "7"},
            "spec": {"taints": taints},
            "status": {"conditions": conditions},
        }))
        .expect("valid node")
    }

    fn cond(type_: &str, status: &str, heartbeat: &str) -> Value {
        json!({"type": type_, "status": status, "lastHeartbeatTime": heartbeat, "lastTransitionTime": "2025-01-01T00:00:00Z", "reason": "Kubelet", "message": "kubelet says"})
    }

    fn all_true(heartbeat: &str) -> Value {
        json!([
            cond("Ready", "True", heartbeat),
            cond("MemoryPressure", "False", heartbeat),
            cond("DiskPressure", "False", heartbeat),
            cond("PIDPressure", "False", heartbeat),
        ])
    }

    fn lease(renew: Option<&str>) -> Lease {
        Lease {
            metadata: Default::default(),
            spec: Some(LeaseSpec { renew_time: renew.map(|r| MicroTime(ts(r))), ..Default::default() }),
        }
    }

    fn taint(key: &str, effect: &str) -> Value {
        json!({"key": key, "effect": effect})
    }

    fn keys(taints: &Option<Vec<Taint>>) -> Option<Vec<String>> {
        taints.as_ref().map(|ts| ts.iter().map(|t| format!("{}:{}", t.key, t.effect)).collect())
    }

    #[test]
    fn observe_node_health_table() {
        let t0 = Instant::now();
        let later = t0 + Duration::from_secs(30);
        let hb1 = "2025-01-01T00:01:00Z";
        let hb2 = "2025-01-01T00:01:10Z";
        let saved = NodeHealth {
            probe_timestamp: t0,
            ready_heartbeat: Some(Time(ts(hb1))),
            lease_renew_time: Some(MicroTime(ts("2025-01-01T00:05:00Z"))),
        };
        // (name, saved, node heartbeat, lease renewTime, expected probe timestamp)
        type Case<'a> = (&'a str, Option<&'a NodeHealth>, &'a str, Option<&'a str>, Instant);
        let cases: Vec<Case> = vec![
            ("first sight: a fresh grace period however old the heartbeat", None, hb1, None, later),
            ("nothing changed", Some(&saved), hb1, Some("2025-01-01T00:05:00Z"), t0),
            ("lease renewed", Some(&saved), hb1, Some("2025-01-01T00:05:10Z"), later),
            ("lease renewTime in the past still counts as a change", Some(&saved), hb1, Some("2024-01-01T00:00:00Z"), later),
            ("status posted", Some(&saved), hb2, Some("2025-01-01T00:05:00Z"), later),
            ("lease deleted is no sign of life", Some(&saved), hb1, None, t0),
        ];
        for (name, saved, hb, renew, want) in cases {
            let n = node(json!([cond("Ready", "True", hb)]), json!([]));
            let l = renew.map(|r| lease(Some(r)));
            let got = observe_node_health(saved, &n, l.as_ref(), later);
            assert_eq!(got.probe_timestamp, want, "{name}");
            assert_eq!(got.ready_heartbeat, Some(Time(ts(hb))), "{name}: heartbeat remembered");
            assert_eq!(got.lease_renew_time, renew.map(|r| MicroTime(ts(r))), "{name}: renewTime remembered");
        }
    }

    #[test]
    fn an_ancient_heartbeat_first_seen_gets_a_fresh_grace_period() {
        // The heartbeat value itself is ancient (the node's clock is an hour behind): being seen
        // to change is what counts, not its value.
        let t0 = Instant::now();
        let n = node(all_true("1999-01-01T00:00:00Z"), json!([]));
        let h = observe_node_health(None, &n, None, t0);
        let a = compute_node_actions(&n, &h, t0 + Duration::from_secs(5), GRACE, wall());
        assert_eq!(a, NodeActions::default());
    }

    #[test]
    fn compute_node_actions_table() {
        let t0 = Instant::now();
        let fresh = t0 + Duration::from_secs(10);
        let stale = t0 + Duration::from_secs(41);
        let hb = "2025-01-01T00:01:00Z";
        let unreachable = json!([taint(TAINT_NODE_UNREACHABLE, "NoSchedule"), taint(TAINT_NODE_UNREACHABLE, "NoExecute")]);
        let unknown = json!([
            cond("Ready", "Unknown", hb),
            cond("MemoryPressure", "Unknown", hb),
            cond("DiskPressure", "Unknown", hb),
            cond("PIDPressure", "Unknown", hb),
        ]);
        struct Case {
            name: &'static str,
            conditions: Value,
            taints: Value,
            now: Instant,
            unknown: Vec<&'static str>,
            taints_after: Option<Vec<&'static str>>,
            event: bool,
            pods: bool,
        }
        let cases = vec![
            Case {
                name: "healthy node: nothing to do",
                conditions: all_true(hb),
                taints: json!([]),
                now: fresh,
                unknown: vec![],
                taints_after: None,
                event: false,
                pods: false,
            },
            Case {
                name: "silent past the grace period: Unknown, unreachable taints, pods, event",
                conditions: all_true(hb),
                taints: json!([taint("dedicated", "NoSchedule")]),
                now: stale,
                unknown: vec!["Ready", "MemoryPressure", "DiskPressure", "PIDPressure"],
                taints_after: Some(vec!["dedicated:NoSchedule", "node.kubernetes.io/unreachable:NoSchedule", "node.kubernetes.io/unreachable:NoExecute"]),
                event: true,
                pods: true,
            },
            Case {
                name: "exactly at the grace period: still trusted",
                conditions: all_true(hb),
                taints: json!([]),
                now: t0 + GRACE,
                unknown: vec![],
                taints_after: None,
                event: false,
                pods: false,
            },
            Case {
                name: "already Unknown and tainted: only the pods are looked at again",
                conditions: unknown.clone(),
                taints: unreachable.clone(),
                now: stale,
                unknown: vec![],
                taints_after: None,
                event: false,
                pods: true,
            },
            Case {
                name: "kubelet back but Ready not yet posted: taints stay",
                conditions: unknown.clone(),
                taints: unreachable.clone(),
                now: fresh,
                unknown: vec![],
                taints_after: None,
                event: false,
                pods: false,
            },
            Case {
                name: "kubelet posted Ready=True: unreachable taints go, others stay",
                conditions: all_true(hb),
                taints: json!([taint(TAINT_NODE_UNREACHABLE, "NoSchedule"), taint("dedicated", "NoSchedule"), taint(TAINT_NODE_UNREACHABLE, "NoExecute")]),
                now: fresh,
                unknown: vec![],
                taints_after: Some(vec!["dedicated:NoSchedule"]),
                event: false,
                pods: false,
            },
            Case {
                name: "kubelet says Ready=False: not-ready taints, its pods are its own business",
                conditions: json!([cond("Ready", "False", hb)]),
                taints: json!([]),
                now: fresh,
                unknown: vec![],
                taints_after: Some(vec!["node.kubernetes.io/not-ready:NoSchedule", "node.kubernetes.io/not-ready:NoExecute"]),
                event: false,
                pods: false,
            },
            Case {
                name: "Ready=False going silent: swaps not-ready for unreachable, no event (was not True)",
                conditions: json!([
                    cond("Ready", "False", hb),
                    cond("MemoryPressure", "False", hb),
                    cond("DiskPressure", "False", hb),
                    cond("PIDPressure", "False", hb),
                ]),
                taints: json!([taint(TAINT_NODE_NOT_READY, "NoSchedule"), taint(TAINT_NODE_NOT_READY, "NoExecute")]),
                now: stale,
                unknown: vec!["Ready", "MemoryPressure", "DiskPressure", "PIDPressure"],
                taints_after: Some(vec!["node.kubernetes.io/unreachable:NoSchedule", "node.kubernetes.io/unreachable:NoExecute"]),
                event: false,
                pods: true,
            },
            Case {
                name: "never posted a status: stays untouched until the grace period ends",
                conditions: json!([]),
                taints: json!([taint(TAINT_NODE_NOT_READY, "NoExecute")]),
                now: fresh,
                unknown: vec![],
                taints_after: None,
                event: false,
                pods: false,
            },
            Case {
                name: "memory pressure: its NoSchedule taint",
                conditions: json!([cond("Ready", "True", hb), cond("MemoryPressure", "True", hb)]),
                taints: json!([]),
                now: fresh,
                unknown: vec![],
                taints_after: Some(vec!["node.kubernetes.io/memory-pressure:NoSchedule"]),
                event: false,
                pods: false,
            },
        ];
        for c in cases {
            let n = node(c.conditions, c.taints);
            let h = NodeHealth { probe_timestamp: t0, ready_heartbeat: None, lease_renew_time: None };
            let a = compute_node_actions(&n, &h, c.now, GRACE, wall());
            let types: Vec<&str> = a.conditions.iter().map(|c| c.type_.as_str()).collect();
            assert_eq!(types, c.unknown, "{}: conditions", c.name);
            for cond in &a.conditions {
                assert_eq!(cond.status, "Unknown", "{}", c.name);
                assert_eq!(cond.reason.as_deref(), Some("NodeStatusUnknown"), "{}", c.name);
                assert_eq!(cond.message.as_deref(), Some("Kubelet stopped posting node status."), "{}", c.name);
                assert_eq!(cond.last_heartbeat_time, Some(Time(ts(hb))), "{}: heartbeat kept", c.name);
                assert_eq!(cond.last_transition_time, Some(Time(wall())), "{}", c.name);
            }
            assert_eq!(keys(&a.taints), c.taints_after.map(|v| v.iter().map(|s| s.to_string()).collect()), "{}: taints", c.name);
            assert_eq!(a.record_not_ready, c.event, "{}: event", c.name);
            assert_eq!(a.mark_pods_not_ready, c.pods, "{}: pods", c.name);
        }
    }

    #[test]
    fn missing_conditions_are_added_as_never_updated() {
        let t0 = Instant::now();
        let n = node(json!([cond("Ready", "True", "2025-01-01T00:01:00Z")]), json!([]));
        let h = NodeHealth { probe_timestamp: t0, ready_heartbeat: None, lease_renew_time: None };
        let a = compute_node_actions(&n, &h, t0 + Duration::from_secs(60), GRACE, wall());
        let pressure = a.conditions.iter().find(|c| c.type_ == "DiskPressure").expect("DiskPressure added");
        assert_eq!(pressure.reason.as_deref(), Some("NodeStatusNeverUpdated"));
        assert_eq!(pressure.message.as_deref(), Some("Kubelet never posted node status."));
        assert_eq!(pressure.last_heartbeat_time, Some(Time(ts("2025-01-01T00:00:00Z"))), "creation time as the heartbeat");
        assert_eq!(a.conditions.len(), 4);
    }

    #[test]
    fn noexecute_taints_carry_time_added_and_keep_it() {
        let conds = vec![("Ready".to_string(), "Unknown".to_string())];
        let added = desired_taints(&[], &conds, false, wall()).expect("taints added");
        let ne = added.iter().find(|t| t.effect == "NoExecute").expect("NoExecute taint");
        assert_eq!(ne.time_added, Some(Time(wall())));
        assert!(added.iter().filter(|t| t.effect == "NoSchedule").all(|t| t.time_added.is_none()));
        // A later pass keeps the first timeAdded: it is when the node became unreachable.
        assert_eq!(desired_taints(&added, &conds, false, ts("2025-01-01T01:00:00Z")), None);
    }

    #[test]
    fn gate_no_execute_table() {
        let t = |v: Value| -> Vec<Taint> { serde_json::from_value(v).unwrap() };
        let none = t(json!([]));
        let ns = t(json!([taint(TAINT_NODE_UNREACHABLE, "NoSchedule")]));
        let both = t(json!([taint(TAINT_NODE_UNREACHABLE, "NoSchedule"), taint(TAINT_NODE_UNREACHABLE, "NoExecute")]));
        let not_ready = t(json!([taint(TAINT_NODE_NOT_READY, "NoSchedule"), taint(TAINT_NODE_NOT_READY, "NoExecute")]));
        let admin = t(json!([taint("dedicated", "NoExecute")]));
        let allow = || true;
        let deny = || false;
        // A first NoExecute taint needs a token; without one the NoSchedule part still goes on.
        assert_eq!(gate_no_execute(&none, Some(both.clone()), false, allow), Some(both.clone()));
        assert_eq!(gate_no_execute(&none, Some(both.clone()), false, deny), Some(ns.clone()));
        // Waiting on a later pass: desired_taints has nothing new to say, the gate adds it.
        assert_eq!(gate_no_execute(&ns, None, false, deny), None);
        // (desired_taints returns the whole wanted list again while the taint is missing.)
        assert_eq!(gate_no_execute(&ns, Some(both.clone()), false, allow), Some(both.clone()));
        // Swapping unreachable for not-ready takes no token.
        assert_eq!(gate_no_execute(&both, Some(not_ready.clone()), false, deny), Some(not_ready.clone()));
        // Every zone fully disrupted: ours go, an admin's stays.
        let mut with_admin = both.clone();
        with_admin.extend(admin.clone());
        let mut ns_admin = ns.clone();
        ns_admin.extend(admin.clone());
        assert_eq!(gate_no_execute(&with_admin, None, true, allow), Some(ns_admin));
        assert_eq!(gate_no_execute(&admin, None, false, deny), None, "an admin's NoExecute taint is not ours to gate");
    }

    #[test]
    fn cordoned_node_gets_the_unschedulable_taint() {
        let conds = vec![("Ready".to_string(), "True".to_string())];
        let got = desired_taints(&[], &conds, true, wall()).expect("taint added");
        assert_eq!(got.len(), 1);
        assert_eq!((got[0].key.as_str(), got[0].effect.as_str()), (TAINT_NODE_UNSCHEDULABLE, "NoSchedule"));
        let back = desired_taints(&got, &conds, false, wall()).expect("taint removed on uncordon");
        assert!(back.is_empty());
    }

    #[test]
    fn pod_not_ready_condition_table() {
        let pod = |node: &str, conditions: Value| -> Pod {
            serde_json::from_value(json!({
                "metadata": {"name": "p", "namespace": "default"},
                "spec": {"nodeName": node, "containers": [{"name": "c", "image": "busybox"}]},
                "status": {"conditions": conditions},
            }))
            .expect("valid pod")
        };
        let ready = |s: &str| json!([{"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": s, "lastProbeTime": null}]);
        let cases = vec![
            ("ready pod on the node", pod("n1", ready("True")), true),
            ("Unknown readiness is not trusted either", pod("n1", ready("Unknown")), true),
            ("already not ready", pod("n1", ready("False")), false),
            ("on another node", pod("n2", ready("True")), false),
            ("no Ready condition", pod("n1", json!([{"type": "PodScheduled", "status": "True"}])), false),
        ];
        for (name, p, want) in cases {
            let got = pod_not_ready_condition(&p, "n1", wall());
            assert_eq!(got.is_some(), want, "{name}");
            if let Some(c) = got {
                assert_eq!((c.type_.as_str(), c.status.as_str()), ("Ready", "False"), "{name}");
                assert_eq!(c.reason.as_deref(), Some("NodeNotReady"), "{name}");
                assert_eq!(c.message.as_deref(), Some("Node is not ready"), "{name}");
                assert_eq!(c.last_transition_time, Some(Time(wall())), "{name}");
            }
        }
    }
}
