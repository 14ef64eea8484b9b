//! Mirrors kube-scheduler's schedule_one.go: one pod, from the queue to a binding.
//!
//! **Scheduling cycle** (one pod at a time, on the scheduler's own thread):
//! 1. `find_nodes_that_fit`: PreFilter once, then Filter over the nodes in parallel, starting where
//!    the last cycle stopped, until enough feasible nodes are found (`num_feasible_nodes_to_find`:
//!    all nodes up to 100, then an adaptive percentage — 50 % minus 1 % per 125 nodes, at least
//!    5 % — so large clusters are not scanned in full for every pod).
//! 2. `prioritize_nodes`: PreScore, Score, NormalizeScore, weights — unless only one node fits.
//! 3. `select_host`: the highest total; ties broken at random.
//! 4. Assume the pod onto the node in the cache and run Reserve.
//!
//! **Binding cycle** (a task of its own, so the next pod need not wait for the API server):
//! PreBind (VolumeBinding writes the pod's volume bindings and waits until its claims are bound),
//! Bind, then the `Scheduled` event. A failure anywhere rolls back (Unreserve, forget the assumption)
//! and sends the pod back to the queue; a pod that fits nowhere gets a `FailedScheduling` event
//! with the reasons counted per node and the condition `PodScheduled=False` reason
//! `Unschedulable`.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use rand::Rng;

use crate::cache::Snapshot;
use crate::framework::runtime::Framework;
use crate::framework::parallelize;
use crate::framework::{Code, CycleState, NodeInfo, NodeScore, PodInfo, Status};

/// Clusters up to this size are always filtered in full.
pub const MIN_FEASIBLE_NODES_TO_FIND: usize = 100;
pub const MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND: usize = 5;
pub const DEFAULT_PERCENTAGE_OF_NODES_TO_SCORE: usize = 50;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduleResult {
    pub node: String,
    /// Nodes filtered.
    pub evaluated: usize,
    /// Of which fit.
    pub feasible: usize,
}

/// Why no node fits, per node; the FailedScheduling message is made from it.
#[derive(Debug, Clone, Default)]
pub struct FitError {
    pub num_all_nodes: usize,
    /// Node name → the status of the plugin that rejected it.
    pub node_to_status: BTreeMap<String, Status>,
    /// Plugins that rejected the pod somewhere: the queue moves it back on their events only.
    pub unschedulable_plugins: HashSet<&'static str>,
    /// Set when PreFilter rejected the pod before any node was looked at.
    pub pre_filter_msg: Option<String>,
}

impl FitError {
    /// kube-scheduler's message: "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) had
    /// untolerated taint {dedicated: gpu}." — reasons counted over nodes, sorted.
    pub fn message(&self) -> String {
        if self.num_all_nodes == 0 {
            return "no nodes available to schedule pods".to_string();
        }
        if let Some(m) = &self.pre_filter_msg {
            return format!("0/{} nodes are available: {m}.", self.num_all_nodes);
        }
        let mut histogram: BTreeMap<&str, usize> = BTreeMap::new();
        for s in self.node_to_status.values() {
            for r in &s.reasons {
                *histogram.entry(r).or_default() += 1;
            }
        }
        let mut reasons: Vec<String> = histogram.into_iter().map(|(r, n)| format!("{n} {r}")).collect();
        reasons.sort();
        format!("0/{} nodes are available: {}.", self.num_all_nodes, reasons.join(", "))
    }
}

#[derive(Debug)]
pub enum ScheduleError {
    /// No node fits: the pod waits in the unschedulable pods.
    Fit(FitError),
    /// A plugin failed: the pod is retried after its backoff.
    Internal(String),
}

/// How many feasible nodes to look for before stopping (numFeasibleNodesToFind).
pub fn num_feasible_nodes_to_find(percentage_of_nodes_to_score: u32, num_all_nodes: usize) -> usize {
    if num_all_nodes < MIN_FEASIBLE_NODES_TO_FIND {
        return num_all_nodes;
    }
    let mut pct = percentage_of_nodes_to_score as usize;
    if pct == 0 {
        pct = DEFAULT_PERCENTAGE_OF_NODES_TO_SCORE.saturating_sub(num_all_nodes / 125);
        pct = pct.max(MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND);
    }
    (num_all_nodes * pct / 100).clamp(MIN_FEASIBLE_NODES_TO_FIND.min(num_all_nodes), num_all_nodes)
}

/// Steps 1–3 of the scheduling cycle for one pod over a snapshot. `next_start` rotates the node
/// where filtering begins, so that every node gets its turn.
pub fn schedule_pod(
    fwk: &Framework,
    state: &mut CycleState,
    pod: &PodInfo,
    snapshot: &Snapshot,
    next_start: &mut usize,
) -> Result<ScheduleResult, ScheduleError> {
    let nodes = &snapshot.nodes;
    if nodes.is_empty() {
        return Err(ScheduleError::Fit(FitError::default()));
    }
    state.nodes_with_affinity = Some(snapshot.nodes_with_affinity());
    state.nodes_with_required_anti_affinity = Some(snapshot.nodes_with_required_anti_affinity());
    let span = tracing::debug_span!(target: "scheduler::framework", "filter", pod_uid = tracing::field::Empty, nodes = nodes.len(), feasible = tracing::field::Empty, rejected = tracing::field::Empty);
    let found = span.in_scope(|| find_nodes_that_fit(fwk, state, pod, nodes, next_start));
    match &found {
        Ok((feasible, _)) => span.record("feasible", feasible.len()),
        Err(ScheduleError::Fit(fe)) => span.record("feasible", 0).record("rejected", rejections(fe)),
        Err(_) => &span,
    };
    drop(span);
    let feasible = match found {
        Err(ScheduleError::Fit(fe)) => {
            // PostFilter: where preemption would nominate a node. None is registered in kubelab.
            if let Some(node) = fwk.run_post_filter(state, pod, &fe.node_to_status) {
                tracing::debug!(target: "scheduler::schedule_one", pod = pod.key(), node, "nominated by PostFilter");
            }
            return Err(ScheduleError::Fit(fe));
        }
        r => r?,
    };
    let evaluated = feasible.1;
    let feasible = feasible.0;
    if feasible.len() == 1 {
        return Ok(ScheduleResult { node: feasible[0].name().to_string(), evaluated, feasible: 1 });
    }
    let scores = prioritize_nodes(fwk, state, pod, &feasible)?;
    Ok(ScheduleResult { node: select_host(&scores), evaluated, feasible: feasible.len() })
}

/// How many nodes each plugin rejected and why, for a step of `kubelab trace`:
/// `NodeResourcesFit: 2 (Insufficient cpu); TaintToleration: 1 (…)`.
fn rejections(fe: &FitError) -> String {
    let mut by_plugin: std::collections::BTreeMap<&str, (usize, String)> = Default::default();
    for s in fe.node_to_status.values() {
        let e = by_plugin.entry(s.plugin).or_insert_with(|| (0, s.message()));
        e.0 += 1;
    }
    by_plugin.iter().map(|(p, (n, why))| format!("{p}: {n} ({why})")).collect::<Vec<_>>().join("; ")
}

/// PreFilter, then Filter in parallel until enough nodes fit. Returns the feasible nodes and how
/// many were evaluated, or the FitError with every rejected node's status.
pub fn find_nodes_that_fit(
    fwk: &Framework,
    state: &mut CycleState,
    pod: &PodInfo,
    nodes: &[Arc<NodeInfo>],
    next_start: &mut usize,
) -> Result<(Vec<Arc<NodeInfo>>, usize), ScheduleError> {
    let s = fwk.run_pre_filter(state, pod, nodes);
    if !s.is_success() {
        if s.code == Code::Error {
            return Err(ScheduleError::Internal(format!("running PreFilter plugin {}: {}", s.plugin, s.message())));
        }
        let mut fe = FitError { num_all_nodes: nodes.len(), pre_filter_msg: Some(s.message()), ..Default::default() };
        fe.unschedulable_plugins.insert(s.plugin);
        for n in nodes {
            fe.node_to_status.insert(n.name().to_string(), s.clone());
        }
        return Err(ScheduleError::Fit(fe));
    }
    let n = nodes.len();
    let want = num_feasible_nodes_to_find(fwk.percentage_of_nodes_to_score, n);
    let start = *next_start % n;
    let found = AtomicUsize::new(0);
    let enough = AtomicBool::new(false);
    let state = &*state;
    let filters = fwk.active_filters(state);
    // Each evaluated node's verdict, by its position in rotation order; nodes past the point where
    // enough were found are left for the next pod.
    let verdicts = parallelize::until(n, &enough, |i| {
        let node = &nodes[(start + i) % n];
        let s = Framework::run_filters(&filters, state, pod, node);
        if s.is_success() {
            let k = found.fetch_add(1, Ordering::Relaxed) + 1;
            if k >= want {
                enough.store(true, Ordering::Relaxed);
            }
            if k > want {
                return None; // found by another worker first
            }
        }
        Some(s)
    });
    let mut feasible = Vec::new();
    let mut fe = FitError { num_all_nodes: n, ..Default::default() };
    let mut processed = 0;
    let mut first_error = None;
    for (i, s) in verdicts {
        processed = i + 1;
        let node = &nodes[(start + i) % n];
        match s.code {
            Code::Success => feasible.push(node.clone()),
            Code::Error => {
                first_error.get_or_insert_with(|| format!("running Filter plugin {} on node {}: {}", s.plugin, node.name(), s.message()));
            }
            _ => {
                fe.unschedulable_plugins.insert(s.plugin);
                fe.node_to_status.insert(node.name().to_string(), s);
            }
        }
    }
    if let Some(e) = first_error {
        return Err(ScheduleError::Internal(e));
    }
    *next_start = (start + processed) % n;
    if feasible.is_empty() {
        return Err(ScheduleError::Fit(fe));
    }
    Ok((feasible, processed))
}

/// PreScore and Score over the feasible nodes: the weighted total per node.
pub fn prioritize_nodes(
    fwk: &Framework,
    state: &mut CycleState,
    pod: &PodInfo,
    feasible: &[Arc<NodeInfo>],
) -> Result<Vec<NodeScore>, ScheduleError> {
    if !fwk.has_score_plugins() {
        return Ok(feasible.iter().map(|n| NodeScore { name: n.node_name.clone(), score: 1 }).collect());
    }
    let s = fwk.run_pre_score(state, pod, feasible);
    if !s.is_success() {
        return Err(ScheduleError::Internal(format!("running PreScore plugin {}: {}", s.plugin, s.message())));
    }
    fwk.run_score(state, pod, feasible)
        .map_err(|s| ScheduleError::Internal(format!("running Score plugin {}: {}", s.plugin, s.message())))
}

/// The node with the highest score; among equals, each is equally likely (reservoir sampling).
pub fn select_host(scores: &[NodeScore]) -> String {
    let mut rng = rand::rng();
    let mut best = &scores[0];
    let mut ties = 1;
    for s in &scores[1..] {
        if s.score > best.score {
            best = s;
            ties = 1;
        } else if s.score == best.score {
            ties += 1;
            if rng.random_range(0..ties) == 0 {
                best = s;
            }
        }
    }
    best.name.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::Cache;
    use crate::config::Profile;
    use crate::framework::types::testing::*;
    use serde_json::{Value, json};

    fn framework() -> Framework {
        Framework::new(&Profile::default(), None, &crate::informers::Informers::default()).unwrap()
    }

    fn snapshot(nodes: Vec<NodeInfo>, bound: &[(&str, Value)]) -> Snapshot {
        let mut c = Cache::new();
        for n in nodes {
            c.upsert_node(n.node.clone());
        }
        for (name, spec) in bound {
            c.add_or_update_pod(pod(name, spec.clone()).pod.clone());
        }
        let mut s = Snapshot::default();
        c.update_snapshot(&mut s);
        s
    }

    fn schedule(snap: &Snapshot, p: &PodInfo) -> Result<ScheduleResult, ScheduleError> {
        schedule_pod(&framework(), &mut CycleState::new(), p, snap, &mut 0)
    }

    fn fit_message(r: Result<ScheduleResult, ScheduleError>) -> String {
        match r {
            Err(ScheduleError::Fit(fe)) => fe.message(),
            other => panic!("expected a FitError, got {other:?}"),
        }
    }

    #[test]
    fn adaptive_number_of_nodes_to_find() {
        assert_eq!(num_feasible_nodes_to_find(0, 10), 10);
        assert_eq!(num_feasible_nodes_to_find(0, 100), 100);
        assert_eq!(num_feasible_nodes_to_find(0, 1000), 420); // 50 − 1000/125 = 42 %
        assert_eq!(num_feasible_nodes_to_find(0, 5000), 500); // 50 − 40 = 10 %
        assert_eq!(num_feasible_nodes_to_find(0, 10000), 500); // floor of 5 %
        assert_eq!(num_feasible_nodes_to_find(30, 1000), 300);
        assert_eq!(num_feasible_nodes_to_find(1, 1000), 100); // never below 100 nodes
    }

    /// Golden: the FailedScheduling message for a pod that fits nowhere, reasons counted per node.
    #[test]
    fn golden_failed_scheduling_message() {
        let snap = snapshot(
            vec![
                node("cordoned", json!({}), json!({"unschedulable": true}), "4", "8Gi", "110"),
                node("tainted", json!({}), json!({"taints": [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]}), "4", "8Gi", "110"),
                node("small-1", json!({}), json!({}), "1", "8Gi", "110"),
                node("small-2", json!({}), json!({}), "1", "8Gi", "110"),
            ],
            &[],
        );
        let p = pod("big", json!({"containers": [container("2", "1Gi")]}));
        assert_eq!(
            fit_message(schedule(&snap, &p)),
            "0/4 nodes are available: 1 node(s) had untolerated taint {dedicated: gpu}, 1 node(s) were unschedulable, 2 Insufficient cpu."
        );
        assert_eq!(fit_message(schedule(&Snapshot::default(), &p)), "no nodes available to schedule pods");
    }

    /// Golden: where pods land.
    #[test]
    fn golden_placements() {
        let nodes = || {
            vec![
                node("a", json!({"labels": {"disk": "ssd"}}), json!({}), "4", "8Gi", "110"),
                node("b", json!({"labels": {"disk": "hdd"}}), json!({}), "4", "8Gi", "110"),
                node("c", json!({}), json!({"taints": [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]}), "4", "8Gi", "110"),
            ]
        };
        // (case, pod spec, pods already bound, the node it must land on or "" for none)
        type Case<'a> = (&'a str, Value, &'a [(&'a str, Value)], &'a str);
        let cases: &[Case] = &[
            ("nodeSelector", json!({"nodeSelector": {"disk": "hdd"}}), &[], "b"),
            (
                "toleration opens the tainted node, the selector pins it",
                json!({"nodeSelector": {"kubernetes.io/hostname": "c"}, "tolerations": [{"key": "dedicated", "operator": "Exists"}]}),
                &[],
                "",
            ),
            (
                "least allocated prefers the emptier node",
                json!({"containers": [container("1", "1Gi")]}),
                &[("busy", json!({"nodeName": "a", "containers": [container("3", "6Gi")]}))],
                "b",
            ),
            (
                "resources: only one node has room",
                json!({"containers": [container("3", "")]}),
                &[
                    ("x", json!({"nodeName": "a", "containers": [container("2", "")]})),
                    ("y", json!({"nodeName": "b", "containers": [container("2", "")]})),
                ],
                "",
            ),
        ];
        for (case, spec, bound, want) in cases {
            let snap = snapshot(nodes(), bound);
            let r = schedule(&snap, &pod("p", spec.clone()));
            match (r, *want) {
                (Ok(r), want) if !want.is_empty() => assert_eq!(r.node, want, "{case}"),
                (Err(ScheduleError::Fit(fe)), "") => {
                    // The hostname label is absent on c, and the tainted node is the only one left.
                    assert!(fe.message().starts_with("0/3 nodes are available"), "{case}: {}", fe.message())
                }
                (r, want) => panic!("{case}: want {want:?}, got {r:?}"),
            }
        }
    }

    #[test]
    fn filtering_rotates_through_a_large_cluster() {
        let nodes: Vec<NodeInfo> = (0..300).map(|i| plain_node(&format!("n{i:03}"))).collect();
        let snap = snapshot(nodes, &[]);
        let fwk = framework();
        let p = pod("p", json!({}));
        let mut next = 0;
        let (feasible, evaluated) = find_nodes_that_fit(&fwk, &mut CycleState::new(), &p, &snap.nodes, &mut next).unwrap();
        assert_eq!(feasible.len(), 144); // 300 × (50 − 300/125 = 48) %
        assert!(evaluated >= 144);
        assert_eq!(next, evaluated % 300);
        let (again, _) = find_nodes_that_fit(&fwk, &mut CycleState::new(), &p, &snap.nodes, &mut next).unwrap();
        assert_ne!(feasible[0].name(), again[0].name(), "the next pod starts where this one stopped");
    }

    /// Golden: pods with PersistentVolumeClaims, through the default profile's volume plugins.
    #[test]
    fn golden_volume_placements() {
        use crate::informers::Informers;
        use crate::plugins::pv_helpers::testing::{claim, claim_with, class, pinned_to, volume};
        let informers = Informers::default();
        let driver = "hostpath.csi.kubelab.io";
        informers.storage_classes.upsert(class("standard", driver, "WaitForFirstConsumer"));
        informers.storage_classes.upsert(class("fast", driver, "Immediate"));
        let bound = |name: &str, pv: &str, modes: Value| {
            claim_with(name, json!({"annotations": {"pv.kubernetes.io/bind-completed": "yes"}}),
                json!({"volumeName": pv, "storageClassName": "standard", "accessModes": modes}), json!({"phase": "Bound"}))
        };
        informers.persistent_volume_claims.upsert(bound("on-b", "pv-b", json!(["ReadWriteOnce"])));
        informers.persistent_volume_claims.upsert(bound("solo", "pv-solo", json!(["ReadWriteOncePod"])));
        informers.persistent_volume_claims.upsert(claim("later", json!({"storageClassName": "standard", "accessModes": ["ReadWriteOnce"]})));
        informers.persistent_volume_claims.upsert(claim("now", json!({"storageClassName": "fast", "accessModes": ["ReadWriteOnce"]})));
        for (pv, node) in [("pv-b", "b"), ("pv-solo", "a")] {
            let spec = json!({"capacity": {"storage": "1Gi"}, "storageClassName": "standard", "nodeAffinity": pinned_to(node),
                              "csi": {"driver": driver, "volumeHandle": pv}});
            informers.persistent_volumes.upsert(volume(pv, spec, "Bound").as_ref().clone());
        }
        let fwk = Framework::new(&Profile::default(), None, &informers).unwrap();
        let labelled = |n: &str| node(n, json!({"labels": {"topology.hostpath.csi.kubelab.io/node": n}}), json!({}), "4", "8Gi", "110");
        let with_claim = |claim: &str| json!({"volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": claim}}]});
        let holder = json!({"nodeName": "a", "volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": "solo"}}]});
        // (case, the pod's claim, pods already bound, the node it lands on, or the FailedScheduling message)
        type Case<'a> = (&'a str, &'a str, &'a [(&'a str, Value)], &'a str);
        let cases: &[Case] = &[
            ("a bound claim's PV pins the pod to its node", "on-b", &[], "b"),
            ("a WaitForFirstConsumer claim can be provisioned anywhere", "later", &[], "*"),
            ("missing claim", "gone", &[], "0/3 nodes are available: persistentvolumeclaim \"gone\" not found."),
            ("unbound Immediate claim", "now", &[], "0/3 nodes are available: pod has unbound immediate PersistentVolumeClaims."),
            (
                "a ReadWriteOncePod claim in use",
                "solo",
                &[("holder", holder)],
                "0/3 nodes are available: 3 node has pod using PersistentVolumeClaim with the same name and ReadWriteOncePod access mode.",
            ),
        ];
        for (case, claim_name, bound_pods, want) in cases {
            let snap = snapshot(vec![labelled("a"), labelled("b"), labelled("c")], bound_pods);
            let r = schedule_pod(&fwk, &mut CycleState::new(), &pod("p", with_claim(claim_name)), &snap, &mut 0);
            match (r, *want) {
                (Ok(_), "*") => {}
                (Ok(r), want) if !want.starts_with("0/") => assert_eq!(r.node, want, "{case}"),
                (Err(ScheduleError::Fit(fe)), want) => assert_eq!(fe.message(), want, "{case}"),
                (r, want) => panic!("{case}: want {want:?}, got {r:?}"),
            }
        }
        // The bound claim's PV pinned elsewhere: every node is an affinity conflict.
        let snap = snapshot(vec![labelled("a"), labelled("c")], &[]);
        let r = schedule_pod(&fwk, &mut CycleState::new(), &pod("p", with_claim("on-b")), &snap, &mut 0);
        assert_eq!(fit_message(r), "0/2 nodes are available: 2 node(s) had volume node affinity conflict.");
    }

    #[test]
    fn ties_are_broken_among_the_best() {
        let scores = vec![
            NodeScore { name: "a".into(), score: 5 },
            NodeScore { name: "b".into(), score: 9 },
            NodeScore { name: "c".into(), score: 9 },
        ];
        let picks: HashSet<String> = (0..200).map(|_| select_host(&scores)).collect();
        assert_eq!(picks, HashSet::from(["b".to_string(), "c".to_string()]));
    }
}
