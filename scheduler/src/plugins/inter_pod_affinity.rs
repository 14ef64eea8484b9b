//! Mirrors kube-scheduler's plugins/interpodaffinity: places a pod near (affinity) or away from
//! (anti-affinity) pods already running, where "near" means the same topology domain — the same
//! value of a node label (`topologyKey`, e.g. `topology.kubernetes.io/zone`).
//!
//! A term selects existing pods by `labelSelector` in `namespaces` (default: the pod's own). The
//! Filter checks, for a candidate node's domain:
//! 1. required podAffinity: each term is matched by some existing pod in the domain — unless no
//!    pod anywhere matches and the pod matches its own terms (the first pod of a group that wants
//!    to be together must go somewhere);
//! 2. required podAntiAffinity: no existing pod in the domain matches any term;
//! 3. symmetry: no existing pod in the domain has required anti-affinity that matches this pod.
//!
//! PreFilter counts matches per (topologyKey, value) over every node once, so Filter is a few map
//! lookups. Score adds each preferred affinity term's weight for every matching pod in the
//! domain, subtracts for preferred anti-affinity, and does the same with the existing pods' terms
//! that match this pod (their required affinity weighing 1, kube-scheduler's default
//! hardPodAffinityWeight); then scales the result to 0–100.
//!
//! `namespaceSelector`: kubelab's scheduler does not watch namespaces, so a selector is matched
//! against the one label every namespace carries, `kubernetes.io/metadata.name`; `{}` therefore
//! selects every namespace, as in Kubernetes. `matchLabelKeys`/`mismatchLabelKeys` add
//! `key in (value)`/`key notin (value)` with the owning pod's value for each listed label.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use api::core::v1::well_known::LABEL_METADATA_NAME;
use apimachinery::labels::{Operator, Requirement, Selector};
use k8s_openapi::api::core::v1::{Affinity, PodAffinityTerm, WeightedPodAffinityTerm};

use super::helper::label_selector;
use crate::framework::{
    ClusterEvent, CycleState, FilterPlugin, MAX_NODE_SCORE, NodeInfo, NodeScore, Plugin, PodInfo, PreFilterPlugin,
    PreScorePlugin, ScorePlugin, Status,
};

pub const NAME: &str = "InterPodAffinity";
pub const ERR_REASON_AFFINITY_RULES_NOT_MATCH: &str = "node(s) didn't match pod affinity rules";
pub const ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH: &str = "node(s) didn't match pod anti-affinity rules";
pub const ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH: &str =
    "node(s) didn't satisfy existing pods anti-affinity rules";
/// What an existing pod's required affinity toward the incoming pod weighs in Score
/// (InterPodAffinityArgs.hardPodAffinityWeight, default 1).
pub const HARD_POD_AFFINITY_WEIGHT: i64 = 1;

const PRE_FILTER_STATE_KEY: &str = "InterPodAffinity/PreFilter";
const PRE_SCORE_STATE_KEY: &str = "InterPodAffinity/PreScore";
/// PreScore is handed the feasible nodes only, but pods on the other nodes of a domain count too
/// (Kubernetes reads the snapshot there). PreFilter, which sees every node, keeps the ones
/// PreScore will look at: all of them if the pod has preferred terms, else those holding pods
/// with affinity — none, for most pods, so this costs nothing then.
const PRE_SCORE_NODES_KEY: &str = "InterPodAffinity/PreScoreNodes";

pub struct InterPodAffinity;

/// A PodAffinityTerm made ready to match (framework.AffinityTerm).
#[derive(Debug)]
struct AffinityTerm {
    namespaces: BTreeSet<String>,
    namespace_selector: Option<Selector>,
    selector: Selector,
    topology_key: String,
}

impl AffinityTerm {
    /// `owner` is the pod declaring the term: its namespace is the default, its labels feed
    /// matchLabelKeys.
    fn parse(t: &PodAffinityTerm, owner: &PodInfo) -> Result<AffinityTerm, String> {
        let mut selector = label_selector(t.label_selector.as_ref()).map_err(|e| format!("labelSelector: {e}"))?;
        let keyed = [(&t.match_label_keys, Operator::In), (&t.mismatch_label_keys, Operator::NotIn)];
        for (keys, op) in keyed {
            for key in keys.iter().flatten() {
                if let Some(v) = owner.labels().get(key) {
                    let r =
                        Requirement::new(key, op, BTreeSet::from([v.clone()])).map_err(|e| format!("{key}: {e}"))?;
                    selector = selector.add_requirement(r);
                }
            }
        }
        let listed = t.namespaces.as_deref().unwrap_or_default();
        let namespaces = if listed.is_empty() && t.namespace_selector.is_none() {
            BTreeSet::from([owner.namespace().to_string()])
        } else {
            listed.iter().cloned().collect()
        };
        let namespace_selector = match &t.namespace_selector {
            None => None,
            Some(s) => Some(label_selector(Some(s)).map_err(|e| format!("namespaceSelector: {e}"))?),
        };
        Ok(AffinityTerm { namespaces, namespace_selector, selector, topology_key: t.topology_key.clone() })
    }

    fn matches_namespace(&self, ns: &str) -> bool {
        if self.namespaces.contains(ns) {
            return true;
        }
        match &self.namespace_selector {
            None => false,
            Some(s) if s.is_empty() => true,
            Some(s) => s.matches(&BTreeMap::from([(LABEL_METADATA_NAME.to_string(), ns.to_string())])),
        }
    }

    /// Whether `pod` is one of the pods this term selects.
    fn matches(&self, pod: &PodInfo) -> bool {
        self.matches_namespace(pod.namespace()) && self.selector.matches(pod.labels())
    }
}

/// Kubernetes' podMatchesAllAffinityTerms: false for no terms.
fn matches_all(terms: &[AffinityTerm], pod: &PodInfo) -> bool {
    !terms.is_empty() && terms.iter().all(|t| t.matches(pod))
}

fn affinity(pod: &PodInfo) -> Option<&Affinity> {
    pod.pod.spec.as_ref()?.affinity.as_ref()
}

fn required_affinity(pod: &PodInfo) -> &[PodAffinityTerm] {
    let a = affinity(pod).and_then(|a| a.pod_affinity.as_ref());
    a.and_then(|a| a.required_during_scheduling_ignored_during_execution.as_deref()).unwrap_or_default()
}
fn required_anti_affinity(pod: &PodInfo) -> &[PodAffinityTerm] {
    let a = affinity(pod).and_then(|a| a.pod_anti_affinity.as_ref());
    a.and_then(|a| a.required_during_scheduling_ignored_during_execution.as_deref()).unwrap_or_default()
}
fn preferred_affinity(pod: &PodInfo) -> &[WeightedPodAffinityTerm] {
    let a = affinity(pod).and_then(|a| a.pod_affinity.as_ref());
    a.and_then(|a| a.preferred_during_scheduling_ignored_during_execution.as_deref()).unwrap_or_default()
}
fn preferred_anti_affinity(pod: &PodInfo) -> &[WeightedPodAffinityTerm] {
    let a = affinity(pod).and_then(|a| a.pod_anti_affinity.as_ref());
    a.and_then(|a| a.preferred_during_scheduling_ignored_during_execution.as_deref()).unwrap_or_default()
}

/// Parses the incoming pod's terms; an error names the field.
fn parse_terms(terms: &[PodAffinityTerm], owner: &PodInfo, field: &str) -> Result<Vec<AffinityTerm>, String> {
    terms
        .iter()
        .enumerate()
        .map(|(i, t)| AffinityTerm::parse(t, owner).map_err(|e| format!("invalid {field}[{i}].{e}")))
        .collect()
}

fn parse_weighted(
    terms: &[WeightedPodAffinityTerm],
    owner: &PodInfo,
    field: &str,
) -> Result<Vec<(i64, AffinityTerm)>, String> {
    terms
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let term =
                AffinityTerm::parse(&t.pod_affinity_term, owner).map_err(|e| format!("invalid {field}[{i}].{e}"))?;
            Ok((i64::from(t.weight), term))
        })
        .collect()
}

/// An existing pod's terms. They were accepted by the API server long ago; if one does not parse
/// its list is dropped (as kube-scheduler's NewPodInfo does), it cannot block other pods.
fn existing_terms(terms: &[PodAffinityTerm], owner: &PodInfo) -> Vec<AffinityTerm> {
    terms.iter().map(|t| AffinityTerm::parse(t, owner)).collect::<Result<_, _>>().unwrap_or_default()
}
fn existing_weighted(terms: &[WeightedPodAffinityTerm], owner: &PodInfo) -> Vec<(i64, AffinityTerm)> {
    parse_weighted(terms, owner, "").unwrap_or_default()
}

/// topologyKey → topology value → count (or score): Kubernetes' topologyToMatchedTermCount.
type TopologyCounts = HashMap<String, HashMap<String, i64>>;

/// Adds `value` to the node's domain for `key`, if the node has that label.
fn add(counts: &mut TopologyCounts, node: &NodeInfo, key: &str, value: i64) {
    if let Some(v) = node.labels().get(key) {
        *counts.entry(key.to_string()).or_default().entry(v.clone()).or_default() += value;
    }
}

fn lookup(counts: &TopologyCounts, key: &str, node: &NodeInfo) -> Option<i64> {
    let v = node.labels().get(key)?;
    counts.get(key)?.get(v).copied()
}

struct PreFilterState {
    required_affinity: Vec<AffinityTerm>,
    required_anti_affinity: Vec<AffinityTerm>,
    /// Existing pods whose required anti-affinity matches the incoming pod, per their domain.
    existing_anti_affinity_counts: TopologyCounts,
    /// Existing pods matching all of the incoming pod's required affinity terms, per domain.
    affinity_counts: TopologyCounts,
    /// Existing pods matching one of the incoming pod's required anti-affinity terms, per domain.
    anti_affinity_counts: TopologyCounts,
    /// Whether the incoming pod matches all its own required affinity terms.
    matches_own_affinity: bool,
}

fn pre_filter_state(
    pod: &PodInfo,
    affinity: Vec<AffinityTerm>,
    anti_affinity: Vec<AffinityTerm>,
    nodes: &[Arc<NodeInfo>],
    with_required_anti_affinity: Option<&[Arc<NodeInfo>]>,
) -> PreFilterState {
    // Step 1: existing pods' required anti-affinity toward this pod (only the few nodes holding
    // such pods have any).
    let mut existing_anti_affinity_counts = TopologyCounts::new();
    let holders = with_required_anti_affinity.unwrap_or(nodes);
    for node in holders.iter().filter(|n| !n.pods_with_required_anti_affinity.is_empty()) {
        for existing in &node.pods_with_required_anti_affinity {
            for t in existing_terms(required_anti_affinity(existing), existing) {
                if t.matches(pod) {
                    add(&mut existing_anti_affinity_counts, node, &t.topology_key, 1);
                }
            }
        }
    }
    // Step 2: existing pods matching this pod's required terms.
    let mut affinity_counts = TopologyCounts::new();
    let mut anti_affinity_counts = TopologyCounts::new();
    if !affinity.is_empty() || !anti_affinity.is_empty() {
        for node in nodes {
            for existing in &node.pods {
                if matches_all(&affinity, existing) {
                    for t in &affinity {
                        add(&mut affinity_counts, node, &t.topology_key, 1);
                    }
                }
                for t in anti_affinity.iter().filter(|t| t.matches(existing)) {
                    add(&mut anti_affinity_counts, node, &t.topology_key, 1);
                }
            }
        }
    }
    let matches_own_affinity = matches_all(&affinity, pod);
    PreFilterState {
        required_affinity: affinity,
        required_anti_affinity: anti_affinity,
        existing_anti_affinity_counts,
        affinity_counts,
        anti_affinity_counts,
        matches_own_affinity,
    }
}

/// Check 1 (satisfyPodAffinity).
fn satisfies_pod_affinity(s: &PreFilterState, node: &NodeInfo) -> bool {
    let mut pods_exist = true;
    for t in &s.required_affinity {
        if !node.labels().contains_key(&t.topology_key) {
            // Every topology label must be on the node, first pod of a group or not.
            return false;
        }
        if lookup(&s.affinity_counts, &t.topology_key, node).unwrap_or(0) <= 0 {
            pods_exist = false;
        }
    }
    // No matching pod anywhere, and the pod would match itself: let it start the group.
    pods_exist || (s.affinity_counts.is_empty() && s.matches_own_affinity)
}

/// Check 2 (satisfyPodAntiAffinity).
fn satisfies_pod_anti_affinity(s: &PreFilterState, node: &NodeInfo) -> bool {
    s.required_anti_affinity.iter().all(|t| lookup(&s.anti_affinity_counts, &t.topology_key, node).unwrap_or(0) <= 0)
}

/// Check 3 (satisfyExistingPodsAntiAffinity).
fn satisfies_existing_pods_anti_affinity(s: &PreFilterState, node: &NodeInfo) -> bool {
    s.existing_anti_affinity_counts
        .keys()
        .all(|key| lookup(&s.existing_anti_affinity_counts, key, node).unwrap_or(0) <= 0)
}

fn filter_node(s: &PreFilterState, node: &NodeInfo) -> Status {
    if !satisfies_pod_affinity(s, node) {
        return Status::unresolvable(ERR_REASON_AFFINITY_RULES_NOT_MATCH).with_plugin(NAME);
    }
    if !satisfies_pod_anti_affinity(s, node) {
        return Status::unschedulable(ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH).with_plugin(NAME);
    }
    if !satisfies_existing_pods_anti_affinity(s, node) {
        return Status::unschedulable(ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH).with_plugin(NAME);
    }
    Status::success()
}

/// The incoming pod's preferred terms.
struct Preferred {
    affinity: Vec<(i64, AffinityTerm)>,
    anti_affinity: Vec<(i64, AffinityTerm)>,
}

fn parse_preferred(pod: &PodInfo) -> Result<Preferred, String> {
    Ok(Preferred {
        affinity: parse_weighted(
            preferred_affinity(pod),
            pod,
            "podAffinity.preferredDuringSchedulingIgnoredDuringExecution",
        )?,
        anti_affinity: parse_weighted(
            preferred_anti_affinity(pod),
            pod,
            "podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution",
        )?,
    })
}

/// Adds `weight × sign` to `node`'s domain for each term `target` matches (processTerms).
fn process_terms(
    scores: &mut TopologyCounts,
    terms: &[(i64, AffinityTerm)],
    target: &PodInfo,
    node: &NodeInfo,
    sign: i64,
) {
    for (weight, t) in terms {
        if t.matches(target) {
            add(scores, node, &t.topology_key, weight * sign);
        }
    }
}

/// One existing pod's contribution to the domain scores (processExistingPod).
fn process_existing_pod(
    scores: &mut TopologyCounts,
    pref: &Preferred,
    pod: &PodInfo,
    existing: &PodInfo,
    node: &NodeInfo,
) {
    // The incoming pod's preferences toward the existing pod.
    process_terms(scores, &pref.affinity, existing, node, 1);
    process_terms(scores, &pref.anti_affinity, existing, node, -1);
    if !existing.has_pod_affinity() {
        return;
    }
    // Symmetry: the existing pod's wishes toward the incoming pod.
    for t in existing_terms(required_affinity(existing), existing) {
        if t.matches(pod) {
            add(scores, node, &t.topology_key, HARD_POD_AFFINITY_WEIGHT);
        }
    }
    process_terms(scores, &existing_weighted(preferred_affinity(existing), existing), pod, node, 1);
    process_terms(scores, &existing_weighted(preferred_anti_affinity(existing), existing), pod, node, -1);
}

fn topology_scores(pod: &PodInfo, pref: &Preferred, nodes: &[Arc<NodeInfo>]) -> TopologyCounts {
    let has_preferred = !pref.affinity.is_empty() || !pref.anti_affinity.is_empty();
    let mut scores = TopologyCounts::new();
    for node in nodes {
        if node.labels().is_empty() {
            continue;
        }
        // Without preferences of its own, only existing pods with affinity can have a say.
        let pods = if has_preferred { &node.pods } else { &node.pods_with_affinity };
        for existing in pods {
            process_existing_pod(&mut scores, pref, pod, existing, node);
        }
    }
    scores
}

impl Plugin for InterPodAffinity {
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
        ]
    }
}

impl PreFilterPlugin for InterPodAffinity {
    fn pre_filter(&self, state: &mut CycleState, pod: &PodInfo, nodes: &[Arc<NodeInfo>]) -> Status {
        let has_preferred = !preferred_affinity(pod).is_empty() || !preferred_anti_affinity(pod).is_empty();
        let score_nodes: Vec<Arc<NodeInfo>> = if has_preferred {
            nodes.to_vec()
        } else {
            match &state.nodes_with_affinity {
                Some(list) => list.clone(),
                None => nodes.iter().filter(|n| !n.pods_with_affinity.is_empty()).cloned().collect(),
            }
        };
        state.write(PRE_SCORE_NODES_KEY, score_nodes);

        let (affinity, anti_affinity) = match (
            parse_terms(required_affinity(pod), pod, "podAffinity.requiredDuringSchedulingIgnoredDuringExecution"),
            parse_terms(
                required_anti_affinity(pod),
                pod,
                "podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution",
            ),
        ) {
            (Ok(a), Ok(b)) => (a, b),
            (Err(e), _) | (_, Err(e)) => return Status::unresolvable(e).with_plugin(NAME),
        };
        // Checked here so that a bad preferred term is reported once, up front.
        if let Err(e) = parse_preferred(pod) {
            return Status::unresolvable(e).with_plugin(NAME);
        }
        let s = pre_filter_state(pod, affinity, anti_affinity, nodes, state.nodes_with_required_anti_affinity.as_deref());
        if s.existing_anti_affinity_counts.is_empty()
            && s.required_affinity.is_empty()
            && s.required_anti_affinity.is_empty()
        {
            return Status::skip();
        }
        state.write(PRE_FILTER_STATE_KEY, s);
        Status::success()
    }
}

impl FilterPlugin for InterPodAffinity {
    fn filter(&self, state: &CycleState, _pod: &PodInfo, node: &NodeInfo) -> Status {
        match state.read::<PreFilterState>(PRE_FILTER_STATE_KEY) {
            Some(s) => filter_node(s, node),
            None => {
                Status::error(format!("reading {PRE_FILTER_STATE_KEY} from cycle state: not found")).with_plugin(NAME)
            }
        }
    }
}

impl PreScorePlugin for InterPodAffinity {
    fn pre_score(&self, state: &mut CycleState, pod: &PodInfo, nodes: &[Arc<NodeInfo>]) -> Status {
        if nodes.is_empty() {
            return Status::skip();
        }
        let pref = match parse_preferred(pod) {
            Ok(p) => p,
            Err(e) => return Status::unresolvable(e).with_plugin(NAME),
        };
        let scores = match state.read::<Vec<Arc<NodeInfo>>>(PRE_SCORE_NODES_KEY) {
            Some(all) => topology_scores(pod, &pref, all),
            None => topology_scores(pod, &pref, nodes),
        };
        if scores.is_empty() {
            return Status::skip();
        }
        state.write(PRE_SCORE_STATE_KEY, scores);
        Status::success()
    }
}

impl ScorePlugin for InterPodAffinity {
    fn score(&self, state: &CycleState, _pod: &PodInfo, node: &NodeInfo) -> Result<i64, Status> {
        let Some(scores) = state.read::<TopologyCounts>(PRE_SCORE_STATE_KEY) else {
            return Err(
                Status::error(format!("reading {PRE_SCORE_STATE_KEY} from cycle state: not found")).with_plugin(NAME)
            );
        };
        Ok(scores.keys().filter_map(|key| lookup(scores, key, node)).sum())
    }

    /// `(score − min) × 100 / (max − min)`; all 0 when every node scored the same.
    fn normalize_score(&self, _state: &CycleState, _pod: &PodInfo, scores: &mut [NodeScore]) -> Status {
        let min = scores.iter().map(|s| s.score).min().unwrap_or(0);
        let max = scores.iter().map(|s| s.score).max().unwrap_or(0);
        for s in scores.iter_mut() {
            s.score = if max > min {
                ((s.score - min) as f64 * MAX_NODE_SCORE as f64 / (max - min) as f64) as i64
            } else {
                0
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

    use Code::{Success as Ok_, Unschedulable as Un, UnschedulableAndUnresolvable as Unres};

    /// A node labeled `zone` (none if empty) holding `pods` ((metadata, spec) pairs).
    fn node_in(name: &str, zone: &str, pods: &[(Value, Value)]) -> Arc<NodeInfo> {
        let labels = if zone.is_empty() { json!({}) } else { json!({"zone": zone}) };
        let mut n = node(name, json!({"labels": labels}), json!({}), "4", "8Gi", "110");
        for (i, (meta, spec)) in pods.iter().enumerate() {
            n.add_pod(Arc::new(pod_with(&format!("{name}-{i}"), meta.clone(), spec.clone())));
        }
        Arc::new(n)
    }

    fn labeled(app: &str) -> (Value, Value) {
        (json!({"labels": {"app": app}}), json!({}))
    }

    fn term(app: &str, extra: Value) -> Value {
        let mut t = json!({"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": "zone"});
        if let (Some(t), Value::Object(extra)) = (t.as_object_mut(), extra) {
            t.extend(extra);
        }
        t
    }

    fn required(kind: &str, terms: Value) -> Value {
        json!({"affinity": {kind: {"requiredDuringSchedulingIgnoredDuringExecution": terms}}})
    }

    fn preferred(kind: &str, weight: i32, t: Value) -> Value {
        json!({"affinity": {kind: {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": weight, "podAffinityTerm": t}]}}})
    }

    /// Runs PreFilter, then Filter on each node; None when PreFilter skipped.
    fn filter_all(p: &PodInfo, nodes: &[Arc<NodeInfo>]) -> Option<Vec<Code>> {
        let mut state = CycleState::new();
        let s = InterPodAffinity.pre_filter(&mut state, p, nodes);
        if s.is_skip() {
            return None;
        }
        assert!(s.is_success(), "pre_filter: {s:?}");
        Some(nodes.iter().map(|n| InterPodAffinity.filter(&state, p, n).code).collect())
    }

    #[test]
    fn filter_table() {
        let web_anti_self =
            (json!({"labels": {"app": "web"}}), required("podAntiAffinity", json!([term("web", json!({}))])));
        // a1, a2 in zone a; b1 in zone b; x has no zone label.
        let cluster = |a1: Vec<(Value, Value)>, b1: Vec<(Value, Value)>| {
            vec![node_in("a1", "a", &a1), node_in("a2", "a", &[]), node_in("b1", "b", &b1), node_in("x", "", &[])]
        };
        let p = |labels: Value, spec: Value| pod_with("incoming", json!({"labels": labels}), spec);
        /// (case, nodes, incoming pod, Filter's code per node or None when PreFilter skips).
        type Case = (&'static str, Vec<Arc<NodeInfo>>, PodInfo, Option<Vec<Code>>);
        let cases: Vec<Case> = vec![
            ("no affinity anywhere: skip", cluster(vec![labeled("db")], vec![]), p(json!({}), json!({})), None),
            (
                "affinity: only zone a has a db pod",
                cluster(vec![labeled("db")], vec![]),
                p(json!({"app": "web"}), required("podAffinity", json!([term("db", json!({}))]))),
                Some(vec![Ok_, Ok_, Unres, Unres]),
            ),
            (
                "affinity: no db pod anywhere, pod is not db: nowhere",
                cluster(vec![labeled("cache")], vec![]),
                p(json!({"app": "web"}), required("podAffinity", json!([term("db", json!({}))]))),
                Some(vec![Unres, Unres, Unres, Unres]),
            ),
            (
                "affinity to itself, first of its group: anywhere with the key",
                cluster(vec![], vec![]),
                p(json!({"app": "web"}), required("podAffinity", json!([term("web", json!({}))]))),
                Some(vec![Ok_, Ok_, Ok_, Unres]),
            ),
            (
                "affinity: two terms need one pod matching both",
                cluster(vec![labeled("db")], vec![(json!({"labels": {"app": "db", "tier": "gold"}}), json!({}))]),
                p(
                    json!({}),
                    required(
                        "podAffinity",
                        json!([term("db", json!({})), {"labelSelector": {"matchLabels": {"tier": "gold"}}, "topologyKey": "zone"}]),
                    ),
                ),
                Some(vec![Unres, Unres, Ok_, Unres]),
            ),
            (
                "affinity: a pod of another namespace does not count",
                cluster(vec![(json!({"labels": {"app": "db"}, "namespace": "other"}), json!({}))], vec![]),
                p(json!({}), required("podAffinity", json!([term("db", json!({}))]))),
                Some(vec![Unres, Unres, Unres, Unres]),
            ),
            (
                "affinity: namespaces lists it",
                cluster(vec![(json!({"labels": {"app": "db"}, "namespace": "other"}), json!({}))], vec![]),
                p(json!({}), required("podAffinity", json!([term("db", json!({"namespaces": ["other"]}))]))),
                Some(vec![Ok_, Ok_, Unres, Unres]),
            ),
            (
                "affinity: namespaceSelector {} is every namespace",
                cluster(vec![(json!({"labels": {"app": "db"}, "namespace": "other"}), json!({}))], vec![]),
                p(json!({}), required("podAffinity", json!([term("db", json!({"namespaceSelector": {}}))]))),
                Some(vec![Ok_, Ok_, Unres, Unres]),
            ),
            (
                "affinity: namespaceSelector by the metadata.name label",
                cluster(vec![], vec![(json!({"labels": {"app": "db"}, "namespace": "other"}), json!({}))]),
                p(
                    json!({}),
                    required(
                        "podAffinity",
                        json!([term(
                            "db",
                            json!({"namespaceSelector": {"matchLabels": {LABEL_METADATA_NAME: "other"}}})
                        )]),
                    ),
                ),
                Some(vec![Unres, Unres, Ok_, Unres]),
            ),
            (
                "anti-affinity: zone a has a web pod",
                cluster(vec![labeled("web")], vec![]),
                p(json!({"app": "web"}), required("podAntiAffinity", json!([term("web", json!({}))]))),
                Some(vec![Un, Un, Ok_, Ok_]),
            ),
            (
                "anti-affinity: matchLabelKeys narrows to the same revision",
                cluster(vec![(json!({"labels": {"app": "web", "rev": "1"}}), json!({}))], vec![]),
                p(
                    json!({"app": "web", "rev": "2"}),
                    required("podAntiAffinity", json!([term("web", json!({"matchLabelKeys": ["rev"]}))])),
                ),
                Some(vec![Ok_, Ok_, Ok_, Ok_]),
            ),
            (
                "anti-affinity: mismatchLabelKeys only counts other tenants",
                cluster(vec![(json!({"labels": {"app": "web", "tenant": "t1"}}), json!({}))], vec![]),
                p(
                    json!({"app": "web", "tenant": "t1"}),
                    required("podAntiAffinity", json!([term("web", json!({"mismatchLabelKeys": ["tenant"]}))])),
                ),
                Some(vec![Ok_, Ok_, Ok_, Ok_]),
            ),
            (
                "symmetry: an existing web pod wants no web pod in its zone",
                cluster(vec![web_anti_self.clone()], vec![]),
                p(json!({"app": "web"}), json!({})),
                Some(vec![Un, Un, Ok_, Ok_]),
            ),
            (
                "symmetry: it does not mind a db pod",
                cluster(vec![web_anti_self], vec![]),
                p(json!({"app": "db"}), json!({})),
                None,
            ),
        ];
        for (case, nodes, p, want) in cases {
            assert_eq!(filter_all(&p, &nodes), want, "{case}");
        }
    }

    #[test]
    fn filter_reasons() {
        let nodes = vec![node_in("a1", "a", &[labeled("web")])];
        let check = |spec: Value, reason: &str, code: Code| {
            let p = pod_with("incoming", json!({"labels": {"app": "web"}}), spec);
            let mut state = CycleState::new();
            assert!(InterPodAffinity.pre_filter(&mut state, &p, &nodes).is_success());
            let s = InterPodAffinity.filter(&state, &p, &nodes[0]);
            assert_eq!((s.code, s.reasons), (code, vec![reason.to_string()]));
        };
        check(required("podAffinity", json!([term("db", json!({}))])), ERR_REASON_AFFINITY_RULES_NOT_MATCH, Unres);
        check(
            required("podAntiAffinity", json!([term("web", json!({}))])),
            ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH,
            Un,
        );
        let nodes = vec![node_in(
            "a1",
            "a",
            &[(json!({"labels": {"app": "db"}}), required("podAntiAffinity", json!([term("web", json!({}))])))],
        )];
        let p = pod_with("incoming", json!({"labels": {"app": "web"}}), json!({}));
        let mut state = CycleState::new();
        assert!(InterPodAffinity.pre_filter(&mut state, &p, &nodes).is_success());
        assert_eq!(
            InterPodAffinity.filter(&state, &p, &nodes[0]).reasons,
            vec![ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH]
        );
    }

    #[test]
    fn invalid_selectors_are_unresolvable() {
        let nodes = vec![node_in("a1", "a", &[])];
        let bad =
            json!({"labelSelector": {"matchExpressions": [{"key": "app", "operator": "Near"}]}, "topologyKey": "zone"});
        let cases = [
            (
                required("podAffinity", json!([bad.clone()])),
                "podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].labelSelector",
            ),
            (
                required("podAntiAffinity", json!([bad.clone()])),
                "podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].labelSelector",
            ),
            (
                preferred("podAffinity", 1, bad.clone()),
                "podAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].labelSelector",
            ),
            (
                required(
                    "podAffinity",
                    json!([term(
                        "db",
                        json!({"namespaceSelector": {"matchExpressions": [{"key": "x", "operator": "Near"}]}})
                    )]),
                ),
                "namespaceSelector",
            ),
        ];
        for (spec, want) in cases {
            let s = InterPodAffinity.pre_filter(&mut CycleState::new(), &pod("p", spec), &nodes);
            assert_eq!(s.code, Unres, "{want}");
            assert!(s.message().contains(want), "{}", s.message());
        }
        // An existing pod with a bad term does not block anyone.
        let nodes = vec![node_in("a1", "a", &[(json!({}), required("podAntiAffinity", json!([bad])))])];
        assert_eq!(filter_all(&pod("p", json!({})), &nodes), None);
    }

    /// PreFilter over `all`, PreScore over `feasible`, Score and NormalizeScore: (raw, normalized),
    /// or None when PreScore skipped.
    fn score_all(p: &PodInfo, all: &[Arc<NodeInfo>], feasible: &[Arc<NodeInfo>]) -> Option<(Vec<i64>, Vec<i64>)> {
        let mut state = CycleState::new();
        let s = InterPodAffinity.pre_filter(&mut state, p, all);
        assert!(s.is_success() || s.is_skip(), "{s:?}");
        let s = InterPodAffinity.pre_score(&mut state, p, feasible);
        if s.is_skip() {
            return None;
        }
        assert!(s.is_success(), "{s:?}");
        let mut scores: Vec<NodeScore> = feasible
            .iter()
            .map(|n| NodeScore { name: n.name().into(), score: InterPodAffinity.score(&state, p, n).unwrap() })
            .collect();
        let raw = scores.iter().map(|s| s.score).collect();
        InterPodAffinity.normalize_score(&state, p, &mut scores);
        Some((raw, scores.iter().map(|s| s.score).collect()))
    }

    #[test]
    fn score_table() {
        // Zone a: two db pods; zone b: one db pod and one web pod; c: empty; x: no labels.
        let nodes = vec![
            node_in("a1", "a", &[labeled("db"), labeled("db")]),
            node_in("b1", "b", &[labeled("db"), labeled("web")]),
            node_in("c1", "c", &[]),
            node_in("x", "", &[labeled("db")]),
        ];
        let p = |labels: Value, spec: Value| pod_with("incoming", json!({"labels": labels}), spec);
        /// (case, incoming pod, (raw, normalized) scores or None when PreScore skips).
        type Case = (&'static str, PodInfo, Option<(Vec<i64>, Vec<i64>)>);
        let cases: Vec<Case> = vec![
            ("no preferences, no affinity around: skip", p(json!({}), json!({})), None),
            (
                "preferred affinity: weight per matching pod in the domain",
                p(json!({}), preferred("podAffinity", 5, term("db", json!({})))),
                Some((vec![10, 5, 0, 0], vec![100, 50, 0, 0])),
            ),
            (
                "preferred anti-affinity subtracts",
                p(json!({}), preferred("podAntiAffinity", 5, term("db", json!({})))),
                Some((vec![-10, -5, 0, 0], vec![0, 50, 100, 100])),
            ),
            (
                "nothing matches: all zero, skip",
                p(json!({}), preferred("podAffinity", 5, term("nothing", json!({})))),
                None,
            ),
        ];
        for (case, p, want) in cases {
            assert_eq!(score_all(&p, &nodes, &nodes), want, "{case}");
        }
    }

    #[test]
    fn score_symmetry() {
        let wants_web = |kind: &str| (json!({"labels": {"app": "db"}}), preferred(kind, 7, term("web", json!({}))));
        let requires_web = (json!({"labels": {"app": "db"}}), required("podAffinity", json!([term("web", json!({}))])));
        let nodes = vec![
            node_in("a1", "a", &[wants_web("podAffinity")]),
            node_in("b1", "b", &[wants_web("podAntiAffinity")]),
            node_in("c1", "c", &[requires_web]),
            node_in("d1", "d", &[]),
        ];
        let web = pod_with("incoming", json!({"labels": {"app": "web"}}), json!({}));
        // a: +7 (preferred affinity), b: −7 (preferred anti-affinity), c: +1 (required affinity, hardPodAffinityWeight).
        assert_eq!(score_all(&web, &nodes, &nodes), Some((vec![7, -7, 1, 0], vec![100, 0, 57, 50])));
        // Existing pods on nodes that are not feasible still count for their domain.
        let a2 = node_in("a2", "a", &[]);
        let all = [nodes.clone(), vec![a2.clone()]].concat();
        assert_eq!(score_all(&web, &all, &[a2, nodes[3].clone()]), Some((vec![7, 0], vec![100, 0])));
        // Not a web pod: none of their terms match it.
        let other = pod_with("incoming", json!({"labels": {"app": "cache"}}), json!({}));
        assert_eq!(score_all(&other, &nodes, &nodes), None);
    }
}
