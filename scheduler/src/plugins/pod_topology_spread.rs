//! Mirrors kube-scheduler's plugins/podtopologyspread: spreads matching pods evenly over
//! topology domains (zones, nodes, …) as the pod's `topologySpreadConstraints` ask.
//!
//! A constraint names a `topologyKey` (a node label: every distinct value is one domain), a
//! `labelSelector` (which pods of the pod's namespace count) and a `maxSkew`. For a candidate node:
//!
//! ```text
//! skew = matching pods in the node's domain + (1 if the pod matches its own selector)
//!        − the fewest matching pods in any eligible domain
//! ```
//!
//! - `whenUnsatisfiable: DoNotSchedule` (Filter): the node needs the topologyKey label, and the
//!   skew must be ≤ maxSkew. With `minDomains`, fewer eligible domains than that make the minimum 0.
//! - `whenUnsatisfiable: ScheduleAnyway` (Score): fewer matching pods in the node's domain is
//!   better; nodes lacking a constraint's key score 0.
//!
//! Which nodes count as domains: only nodes with every constraint's key, and — by
//! `nodeAffinityPolicy: Honor` (default) — that match the pod's nodeSelector/required node
//! affinity, and — only with `nodeTaintsPolicy: Honor` (default Ignore) — whose NoSchedule and
//! NoExecute taints the pod tolerates. `matchLabelKeys` narrows the selector to pods sharing the
//! pod's values for those labels (e.g. `pod-template-hash`: one Deployment revision). Pods being
//! deleted do not count.
//!
//! Left out: kube-scheduler's cluster-default constraints for pods that declare none (they need
//! the pod's Services and ReplicaSets to build a selector), so such pods are not spread here.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use api::core::v1::helper::find_untolerated;
use apimachinery::labels::{Operator, Requirement, Selector};
use k8s_openapi::api::core::v1::TopologySpreadConstraint;

use super::helper::label_selector;
use super::node_affinity::required_node_affinity_matches;
use crate::framework::{
    ClusterEvent, CycleState, FilterPlugin, MAX_NODE_SCORE, NodeInfo, NodeScore, Plugin, PodInfo, PreFilterPlugin,
    PreScorePlugin, ScorePlugin, Status,
};

pub const NAME: &str = "PodTopologySpread";
/// Kubernetes' ErrReasonConstraintsNotMatch.
pub const ERR_REASON_CONSTRAINTS_NOT_MATCH: &str = "node(s) didn't match pod topology spread constraints";
/// Kubernetes' ErrReasonNodeLabelNotMatch.
pub const ERR_REASON_NODE_LABEL_NOT_MATCH: &str =
    "node(s) didn't match pod topology spread constraints (missing required label)";
/// The per-node domain: Score counts it on the node itself instead of building a map.
pub const LABEL_HOSTNAME: &str = "kubernetes.io/hostname";

const PRE_FILTER_STATE_KEY: &str = "PodTopologySpread/PreFilter";
const PRE_SCORE_STATE_KEY: &str = "PodTopologySpread/PreScore";
/// PreScore is handed the feasible nodes only, but matching pods on the other nodes of a domain
/// count too (Kubernetes reads the snapshot's full node list there). PreFilter, which sees every
/// node, keeps them here for PreScore — only for pods with soft constraints.
const ALL_NODES_KEY: &str = "PodTopologySpread/AllNodes";

pub struct PodTopologySpread;

/// A constraint with its selector parsed and its defaults filled in.
#[derive(Debug)]
struct Constraint {
    max_skew: i64,
    topology_key: String,
    selector: Selector,
    min_domains: i64,
    /// nodeAffinityPolicy == Honor (the default).
    honor_node_affinity: bool,
    /// nodeTaintsPolicy == Honor (default Ignore).
    honor_node_taints: bool,
}

impl Constraint {
    /// Whether `node` counts as a domain for this constraint (matchNodeInclusionPolicies).
    fn includes_node(&self, pod: &PodInfo, node: &NodeInfo) -> bool {
        if self.honor_node_affinity && !required_node_affinity_matches(&pod.pod, node) {
            return false;
        }
        if self.honor_node_taints {
            let taints = node.node.spec.as_ref().and_then(|s| s.taints.as_deref()).unwrap_or_default();
            let tolerations = pod.pod.spec.as_ref().and_then(|s| s.tolerations.as_deref()).unwrap_or_default();
            if find_untolerated(taints, tolerations, &["NoSchedule", "NoExecute"]).is_some() {
                return false;
            }
        }
        true
    }
}

fn spec_constraints(pod: &PodInfo) -> &[TopologySpreadConstraint] {
    pod.pod.spec.as_ref().and_then(|s| s.topology_spread_constraints.as_deref()).unwrap_or_default()
}

/// The pod's constraints with `whenUnsatisfiable == action` (filterTopologySpreadConstraints).
/// A selector that does not parse is an error naming the constraint.
fn constraints(pod: &PodInfo, action: &str) -> Result<Vec<Constraint>, String> {
    let mut out = Vec::new();
    for (i, c) in spec_constraints(pod).iter().enumerate() {
        if c.when_unsatisfiable != action {
            continue;
        }
        let mut selector = label_selector(c.label_selector.as_ref())
            .map_err(|e| format!("invalid topologySpreadConstraints[{i}].labelSelector: {e}"))?;
        // matchLabelKeys: also require the pod's own value of each listed label it has.
        for key in c.match_label_keys.iter().flatten() {
            if let Some(value) = pod.labels().get(key) {
                let r = Requirement::new(key, Operator::In, BTreeSet::from([value.clone()]))
                    .map_err(|e| format!("invalid topologySpreadConstraints[{i}].matchLabelKeys: {e}"))?;
                selector = selector.add_requirement(r);
            }
        }
        out.push(Constraint {
            max_skew: i64::from(c.max_skew),
            topology_key: c.topology_key.clone(),
            selector,
            min_domains: c.min_domains.map_or(1, i64::from),
            honor_node_affinity: c.node_affinity_policy.as_deref() != Some("Ignore"),
            honor_node_taints: c.node_taints_policy.as_deref() == Some("Honor"),
        });
    }
    Ok(out)
}

/// Whether the node has every constraint's topology key (nodeLabelsMatchSpreadConstraints).
fn has_all_keys(node: &NodeInfo, constraints: &[Constraint]) -> bool {
    constraints.iter().all(|c| node.labels().contains_key(&c.topology_key))
}

/// The pods on `pods` in namespace `ns` that `selector` matches, leaving out pods being deleted
/// (countPodsMatchSelector). As in Kubernetes an empty selector (`{}`) counts nothing.
fn count_matching(pods: &[Arc<PodInfo>], selector: &Selector, ns: &str) -> i64 {
    if selector.is_empty() {
        return 0;
    }
    pods.iter()
        .filter(|p| p.pod.metadata.deletion_timestamp.is_none() && p.namespace() == ns && selector.matches(p.labels()))
        .count() as i64
}

/// What Filter needs, computed once over every node.
struct PreFilterState {
    constraints: Vec<Constraint>,
    /// Per constraint: domain (topology value) → matching pods, over the eligible nodes.
    match_num: Vec<HashMap<String, i64>>,
    /// Per constraint: the "global minimum" of the skew formula.
    min_match_num: Vec<i64>,
}

fn pre_filter_state(pod: &PodInfo, constraints: Vec<Constraint>, nodes: &[Arc<NodeInfo>]) -> PreFilterState {
    let mut match_num: Vec<HashMap<String, i64>> = vec![HashMap::new(); constraints.len()];
    for node in nodes {
        if !has_all_keys(node, &constraints) {
            continue;
        }
        for (i, c) in constraints.iter().enumerate() {
            if !c.includes_node(pod, node) {
                continue;
            }
            let value = &node.labels()[&c.topology_key];
            *match_num[i].entry(value.clone()).or_default() += count_matching(&node.pods, &c.selector, pod.namespace());
        }
    }
    let min_match_num = constraints
        .iter()
        .zip(&match_num)
        .map(|(c, domains)| {
            // Too few eligible domains (minDomains): pretend an empty one exists.
            if (domains.len() as i64) < c.min_domains { 0 } else { domains.values().copied().min().unwrap_or(0) }
        })
        .collect();
    PreFilterState { constraints, match_num, min_match_num }
}

/// The Filter decision for one node.
fn filter_node(s: &PreFilterState, pod: &PodInfo, node: &NodeInfo) -> Status {
    for (i, c) in s.constraints.iter().enumerate() {
        let Some(value) = node.labels().get(&c.topology_key) else {
            return Status::unresolvable(ERR_REASON_NODE_LABEL_NOT_MATCH).with_plugin(NAME);
        };
        let self_match = i64::from(c.selector.matches(pod.labels()));
        let match_num = s.match_num[i].get(value).copied().unwrap_or(0);
        if match_num + self_match - s.min_match_num[i] > c.max_skew {
            return Status::unschedulable(ERR_REASON_CONSTRAINTS_NOT_MATCH).with_plugin(NAME);
        }
    }
    Status::success()
}

/// What Score and NormalizeScore need.
struct PreScoreState {
    constraints: Vec<Constraint>,
    /// Feasible nodes lacking some constraint's key: they score 0.
    ignored_nodes: HashSet<String>,
    /// Per constraint: domain → matching pods (empty for the hostname key, counted in Score).
    pod_counts: Vec<HashMap<String, i64>>,
    /// Per constraint: log(domains + 2), so that a skew in a topology with many small domains
    /// weighs as much as one in a topology with a few big ones.
    weights: Vec<f64>,
}

fn pre_score_state(
    pod: &PodInfo,
    constraints: Vec<Constraint>,
    feasible: &[Arc<NodeInfo>],
    all: &[Arc<NodeInfo>],
) -> PreScoreState {
    let mut ignored_nodes = HashSet::new();
    let mut pod_counts: Vec<HashMap<String, i64>> = vec![HashMap::new(); constraints.len()];
    // Step 1: the domains of the feasible nodes.
    for node in feasible {
        if !has_all_keys(node, &constraints) {
            ignored_nodes.insert(node.name().to_string());
            continue;
        }
        for (i, c) in constraints.iter().enumerate() {
            if c.topology_key != LABEL_HOSTNAME {
                pod_counts[i].entry(node.labels()[&c.topology_key].clone()).or_insert(0);
            }
        }
    }
    let weights = constraints
        .iter()
        .zip(&pod_counts)
        .map(|(c, domains)| {
            let size =
                if c.topology_key == LABEL_HOSTNAME { feasible.len() - ignored_nodes.len() } else { domains.len() };
            ((size + 2) as f64).ln()
        })
        .collect();
    // Step 2: count the matching pods of those domains, over every node.
    for node in all {
        if !has_all_keys(node, &constraints) {
            continue;
        }
        for (i, c) in constraints.iter().enumerate() {
            if !c.includes_node(pod, node) {
                continue;
            }
            if let Some(count) = pod_counts[i].get_mut(&node.labels()[&c.topology_key]) {
                *count += count_matching(&node.pods, &c.selector, pod.namespace());
            }
        }
    }
    PreScoreState { constraints, ignored_nodes, pod_counts, weights }
}

/// scoreForCount: `maxSkew − 1` is added so that a larger maxSkew waters differences down.
fn score_for_count(count: i64, max_skew: i64, weight: f64) -> f64 {
    count as f64 * weight + (max_skew - 1) as f64
}

impl Plugin for PodTopologySpread {
    fn name(&self) -> &'static str {
        NAME
    }
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        vec![
            ClusterEvent::AssignedPodAdd,
            ClusterEvent::AssignedPodUpdate,
            ClusterEvent::AssignedPodDelete,
            ClusterEvent::NodeAdd,
            ClusterEvent::NodeLabelChange,
            ClusterEvent::NodeTaintChange,
        ]
    }
}

impl PreFilterPlugin for PodTopologySpread {
    fn pre_filter(&self, state: &mut CycleState, pod: &PodInfo, nodes: &[Arc<NodeInfo>]) -> Status {
        let spec = spec_constraints(pod);
        if spec.is_empty() {
            return Status::skip();
        }
        let (hard, soft) = match (constraints(pod, "DoNotSchedule"), constraints(pod, "ScheduleAnyway")) {
            (Ok(h), Ok(s)) => (h, s),
            (Err(e), _) | (_, Err(e)) => return Status::unresolvable(e).with_plugin(NAME),
        };
        if !soft.is_empty() {
            state.write(ALL_NODES_KEY, nodes.to_vec());
        }
        if hard.is_empty() {
            return Status::skip();
        }
        state.write(PRE_FILTER_STATE_KEY, pre_filter_state(pod, hard, nodes));
        Status::success()
    }
}

impl FilterPlugin for PodTopologySpread {
    fn filter(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        match state.read::<PreFilterState>(PRE_FILTER_STATE_KEY) {
            Some(s) => filter_node(s, pod, node),
            None => {
                Status::error(format!("reading {PRE_FILTER_STATE_KEY} from cycle state: not found")).with_plugin(NAME)
            }
        }
    }
}

impl PreScorePlugin for PodTopologySpread {
    fn pre_score(&self, state: &mut CycleState, pod: &PodInfo, nodes: &[Arc<NodeInfo>]) -> Status {
        if nodes.is_empty() || spec_constraints(pod).iter().all(|c| c.when_unsatisfiable != "ScheduleAnyway") {
            return Status::skip();
        }
        let soft = match constraints(pod, "ScheduleAnyway") {
            Ok(s) => s,
            Err(e) => return Status::unresolvable(e).with_plugin(NAME),
        };
        let s = match state.read::<Vec<Arc<NodeInfo>>>(ALL_NODES_KEY) {
            Some(all) => pre_score_state(pod, soft, nodes, all),
            None => pre_score_state(pod, soft, nodes, nodes),
        };
        state.write(PRE_SCORE_STATE_KEY, s);
        Status::success()
    }
}

impl ScorePlugin for PodTopologySpread {
    fn score(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Result<i64, Status> {
        let Some(s) = state.read::<PreScoreState>(PRE_SCORE_STATE_KEY) else {
            return Err(
                Status::error(format!("reading {PRE_SCORE_STATE_KEY} from cycle state: not found")).with_plugin(NAME)
            );
        };
        if s.ignored_nodes.contains(node.name()) {
            return Ok(0);
        }
        let mut score = 0.0;
        for (i, c) in s.constraints.iter().enumerate() {
            let Some(value) = node.labels().get(&c.topology_key) else { continue };
            let count = if c.topology_key == LABEL_HOSTNAME {
                count_matching(&node.pods, &c.selector, pod.namespace())
            } else {
                s.pod_counts[i].get(value).copied().unwrap_or(0)
            };
            score += score_for_count(count, c.max_skew, s.weights[i]);
        }
        Ok(score.round() as i64)
    }

    /// Kubernetes' normalization: `100 × (max + min − score) / max`, so the node with the fewest
    /// matching pods gets 100 and the one with the most `100 × min / max`; ignored nodes get 0.
    fn normalize_score(&self, state: &CycleState, _pod: &PodInfo, scores: &mut [NodeScore]) -> Status {
        let Some(s) = state.read::<PreScoreState>(PRE_SCORE_STATE_KEY) else { return Status::success() };
        let counted = || scores.iter().filter(|n| !s.ignored_nodes.contains(&*n.name)).map(|n| n.score);
        let min = counted().min().unwrap_or(0);
        let max = counted().max().unwrap_or(0).max(0);
        for n in scores.iter_mut() {
            n.score = if s.ignored_nodes.contains(&*n.name) {
                0
            } else if max == 0 {
                MAX_NODE_SCORE
            } else {
                MAX_NODE_SCORE * (max + min - n.score) / max
            };
        }
        Status::success()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::Code;
    use crate::framework::types::testing::*;
    use serde_json::{Value, json};

    /// A node with `labels` (plus its hostname label) holding `pods` pods labeled `pod_labels`.
    fn node_with(name: &str, labels: Value, spec: Value, pods: &[(Value, Value)]) -> Arc<NodeInfo> {
        let mut labels = labels;
        labels[LABEL_HOSTNAME] = json!(name);
        let mut n = node(name, json!({"labels": labels}), spec, "4", "8Gi", "110");
        for (i, (meta, spec)) in pods.iter().enumerate() {
            n.add_pod(Arc::new(pod_with(&format!("{name}-{i}"), meta.clone(), spec.clone())));
        }
        Arc::new(n)
    }

    fn web(n: usize) -> Vec<(Value, Value)> {
        vec![(json!({"labels": {"app": "web"}}), json!({})); n]
    }

    fn constraint(key: &str, max_skew: i32, when: &str, extra: Value) -> Value {
        let mut c = json!({"maxSkew": max_skew, "topologyKey": key, "whenUnsatisfiable": when,
                           "labelSelector": {"matchLabels": {"app": "web"}}});
        if let (Some(c), Value::Object(extra)) = (c.as_object_mut(), extra) {
            c.extend(extra);
        }
        c
    }

    fn incoming(labels: Value, spec: Value) -> PodInfo {
        pod_with("incoming", json!({"labels": labels}), spec)
    }

    /// Runs PreFilter over `nodes`, then Filter on each; the codes in node order.
    fn filter_all(p: &PodInfo, nodes: &[Arc<NodeInfo>]) -> Vec<Code> {
        let mut state = CycleState::new();
        let s = PodTopologySpread.pre_filter(&mut state, p, nodes);
        assert!(s.is_success(), "pre_filter: {s:?}");
        nodes.iter().map(|n| PodTopologySpread.filter(&state, p, n).code).collect()
    }

    use Code::{Success as Ok_, Unschedulable as Un, UnschedulableAndUnresolvable as Unres};

    #[test]
    fn filter_table() {
        let deleting = json!({"labels": {"app": "web"}, "deletionTimestamp": "2024-01-01T00:00:00Z"});
        let other_ns = json!({"labels": {"app": "web"}, "namespace": "other"});
        // a1, a2 in zone a; b1 in zone b; x has no zone.
        let zones = |a1: Vec<(Value, Value)>, b1: Vec<(Value, Value)>| {
            vec![
                node_with("a1", json!({"zone": "a"}), json!({}), &a1),
                node_with("a2", json!({"zone": "a"}), json!({}), &[]),
                node_with("b1", json!({"zone": "b"}), json!({}), &b1),
                node_with("x", json!({}), json!({}), &[]),
            ]
        };
        let hard = |extra: Value| json!({"topologySpreadConstraints": [constraint("zone", 1, "DoNotSchedule", extra)]});
        /// (case, nodes, incoming pod, Filter's code per node).
        type Case = (&'static str, Vec<Arc<NodeInfo>>, PodInfo, Vec<Code>);
        let cases: Vec<Case> = vec![
            (
                "zone a is 2 ahead: only b fits; x lacks the key",
                zones(web(2), vec![]),
                incoming(json!({"app": "web"}), hard(json!({}))),
                vec![Un, Un, Ok_, Unres],
            ),
            (
                "balanced: every zone fits",
                zones(web(1), web(1)),
                incoming(json!({"app": "web"}), hard(json!({}))),
                vec![Ok_, Ok_, Ok_, Unres],
            ),
            (
                "maxSkew 3 tolerates it",
                zones(web(2), vec![]),
                incoming(json!({"app": "web"}), hard(json!({"maxSkew": 3}))),
                vec![Ok_, Ok_, Ok_, Unres],
            ),
            (
                "the pod does not match its own selector: no +1",
                zones(web(1), vec![]),
                incoming(json!({"app": "db"}), hard(json!({}))),
                vec![Ok_, Ok_, Ok_, Unres],
            ),
            (
                "minDomains 3 with 2 domains: the minimum is 0",
                zones(web(1), web(1)),
                incoming(json!({"app": "web"}), hard(json!({"minDomains": 3}))),
                vec![Un, Un, Un, Unres],
            ),
            (
                "pods being deleted do not count",
                zones(vec![(deleting.clone(), json!({})), (deleting, json!({}))], vec![]),
                incoming(json!({"app": "web"}), hard(json!({}))),
                vec![Ok_, Ok_, Ok_, Unres],
            ),
            (
                "pods of other namespaces do not count",
                zones(vec![(other_ns.clone(), json!({})), (other_ns, json!({}))], vec![]),
                incoming(json!({"app": "web"}), hard(json!({}))),
                vec![Ok_, Ok_, Ok_, Unres],
            ),
            (
                "matchLabelKeys: only this revision counts",
                zones(vec![(json!({"labels": {"app": "web", "rev": "1"}}), json!({})); 2], vec![]),
                incoming(json!({"app": "web", "rev": "2"}), hard(json!({"matchLabelKeys": ["rev"]}))),
                vec![Ok_, Ok_, Ok_, Unres],
            ),
            (
                "matchLabelKeys: same revision counts",
                zones(vec![(json!({"labels": {"app": "web", "rev": "1"}}), json!({})); 2], vec![]),
                incoming(json!({"app": "web", "rev": "1"}), hard(json!({"matchLabelKeys": ["rev"]}))),
                vec![Un, Un, Ok_, Unres],
            ),
            (
                "an empty selector counts nothing (as in Kubernetes)",
                zones(web(3), vec![]),
                incoming(json!({"app": "web"}), hard(json!({"labelSelector": {}}))),
                vec![Ok_, Ok_, Ok_, Unres],
            ),
            (
                "two constraints: zone and hostname",
                zones(web(1), web(1)),
                incoming(
                    json!({"app": "web"}),
                    json!({"topologySpreadConstraints": [
                        constraint("zone", 1, "DoNotSchedule", json!({})),
                        constraint(LABEL_HOSTNAME, 1, "DoNotSchedule", json!({}))]}),
                ),
                // Zones are even (1 and 1); per node a1 and b1 already hold one pod and a2 none, so
                // only a2 keeps the hostname skew ≤ 1; x lacks the zone key.
                vec![Un, Ok_, Un, Unres],
            ),
        ];
        for (case, nodes, p, want) in cases {
            assert_eq!(filter_all(&p, &nodes), want, "{case}");
        }
    }

    #[test]
    fn node_inclusion_policies() {
        // a1 (zone a, env=prod) holds one web pod; b1 (zone b) is not prod and is tainted.
        let nodes = vec![
            node_with("a1", json!({"zone": "a", "env": "prod"}), json!({}), &web(1)),
            node_with("b1", json!({"zone": "b"}), json!({"taints": [{"key": "k", "effect": "NoSchedule"}]}), &[]),
        ];
        let case = |selector: Value, extra: Value| {
            let mut spec = json!({"topologySpreadConstraints": [constraint("zone", 1, "DoNotSchedule", extra)]});
            if !selector.is_null() {
                spec["nodeSelector"] = selector;
            }
            filter_all(&incoming(json!({"app": "web"}), spec), &nodes)[0]
        };
        // nodeAffinityPolicy Honor (default): zone b is not a domain for a prod-only pod: min 1.
        assert_eq!(case(json!({"env": "prod"}), json!({})), Ok_);
        assert_eq!(case(json!({"env": "prod"}), json!({"nodeAffinityPolicy": "Honor"})), Ok_);
        // Ignore: zone b counts, with 0 pods: 1 + 1 − 0 > 1.
        assert_eq!(case(json!({"env": "prod"}), json!({"nodeAffinityPolicy": "Ignore"})), Un);
        // nodeTaintsPolicy Ignore (default): the tainted zone b counts.
        assert_eq!(case(Value::Null, json!({})), Un);
        // Honor: the untolerated taint takes zone b out.
        assert_eq!(case(Value::Null, json!({"nodeTaintsPolicy": "Honor"})), Ok_);
    }

    #[test]
    fn pre_filter_skips_and_rejects() {
        let nodes = vec![node_with("a1", json!({"zone": "a"}), json!({}), &[])];
        let none = incoming(json!({}), json!({}));
        assert!(PodTopologySpread.pre_filter(&mut CycleState::new(), &none, &nodes).is_skip());
        let soft_only = incoming(
            json!({}),
            json!({"topologySpreadConstraints": [constraint("zone", 1, "ScheduleAnyway", json!({}))]}),
        );
        assert!(PodTopologySpread.pre_filter(&mut CycleState::new(), &soft_only, &nodes).is_skip());
        let bad = incoming(
            json!({}),
            json!({"topologySpreadConstraints": [constraint("zone", 1, "DoNotSchedule",
                json!({"labelSelector": {"matchExpressions": [{"key": "app", "operator": "Near"}]}}))]}),
        );
        let s = PodTopologySpread.pre_filter(&mut CycleState::new(), &bad, &nodes);
        assert_eq!(s.code, Unres);
        assert!(s.message().contains("topologySpreadConstraints[0].labelSelector"), "{}", s.message());
        // Filter without PreFilter state is an internal error, not a panic.
        assert_eq!(PodTopologySpread.filter(&CycleState::new(), &bad, &nodes[0]).code, Code::Error);
    }

    /// PreFilter over `all`, PreScore over `feasible`, then Score and NormalizeScore: (raw, normalized).
    fn score_all(p: &PodInfo, all: &[Arc<NodeInfo>], feasible: &[Arc<NodeInfo>]) -> (Vec<i64>, Vec<i64>) {
        let mut state = CycleState::new();
        PodTopologySpread.pre_filter(&mut state, p, all);
        assert!(PodTopologySpread.pre_score(&mut state, p, feasible).is_success());
        let mut scores: Vec<NodeScore> = feasible
            .iter()
            .map(|n| NodeScore { name: n.name().into(), score: PodTopologySpread.score(&state, p, n).unwrap() })
            .collect();
        let raw = scores.iter().map(|s| s.score).collect();
        PodTopologySpread.normalize_score(&state, p, &mut scores);
        (raw, scores.iter().map(|s| s.score).collect())
    }

    #[test]
    fn score_table() {
        let nodes = vec![
            node_with("a1", json!({"zone": "a"}), json!({}), &web(2)),
            node_with("a2", json!({"zone": "a"}), json!({}), &[]),
            node_with("b1", json!({"zone": "b"}), json!({}), &web(1)),
            node_with("x", json!({}), json!({}), &[]),
        ];
        let soft = |key: &str, skew: i32| {
            incoming(
                json!({"app": "web"}),
                json!({"topologySpreadConstraints": [constraint(key, skew, "ScheduleAnyway", json!({}))]}),
            )
        };
        // Zone: 2 domains → weight ln 4 ≈ 1.386; a = 2 pods → 2.77 ≈ 3, b = 1 → 1; x lacks the key.
        // Normalized 100 × (3 + 1 − s) / 3.
        assert_eq!(score_all(&soft("zone", 1), &nodes, &nodes), (vec![3, 3, 1, 0], vec![33, 33, 100, 0]));
        // maxSkew 3 adds 2 to every counted node.
        assert_eq!(score_all(&soft("zone", 3), &nodes, &nodes), (vec![5, 5, 3, 0], vec![60, 60, 100, 0]));
        // Hostname: 4 nodes → weight ln 6 ≈ 1.79, counted per node.
        assert_eq!(score_all(&soft(LABEL_HOSTNAME, 1), &nodes, &nodes), (vec![4, 0, 2, 0], vec![0, 100, 50, 100]));
        // Pods on nodes that are not feasible still count for their domain (a1 is full, say).
        assert_eq!(score_all(&soft("zone", 1), &nodes, &nodes[1..3]), (vec![3, 1], vec![33, 100]));
        // Nothing matches anywhere: every counted node gets 100.
        assert_eq!(
            score_all(
                &incoming(
                    json!({}),
                    json!({"topologySpreadConstraints": [
            constraint("zone", 1, "ScheduleAnyway", json!({"labelSelector": {"matchLabels": {"app": "none"}}}))]})
                ),
                &nodes,
                &nodes
            ),
            (vec![0, 0, 0, 0], vec![100, 100, 100, 0])
        );
    }

    #[test]
    fn pre_score_skips_without_soft_constraints() {
        let nodes = vec![node_with("a1", json!({"zone": "a"}), json!({}), &[])];
        let hard_only = incoming(
            json!({}),
            json!({"topologySpreadConstraints": [constraint("zone", 1, "DoNotSchedule", json!({}))]}),
        );
        assert!(PodTopologySpread.pre_score(&mut CycleState::new(), &hard_only, &nodes).is_skip());
        assert!(PodTopologySpread.pre_score(&mut CycleState::new(), &incoming(json!({}), json!({})), &nodes).is_skip());
    }
}
