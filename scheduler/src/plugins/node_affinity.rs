//! Mirrors kube-scheduler's plugins/nodeaffinity: a pod only goes to nodes that its
//! `spec.nodeSelector` AND its required node affinity both allow, and prefers the nodes its
//! preferred node affinity terms match.
//!
//! - Filter: every `nodeSelector` label must be on the node with the same value, and — if the pod
//!   has `requiredDuringSchedulingIgnoredDuringExecution` — at least one of its `nodeSelectorTerms`
//!   must match (terms are ORed; inside a term every matchExpression and matchField must hold;
//!   operators In, NotIn, Exists, DoesNotExist, Gt, Lt; matchFields only on `metadata.name`).
//! - Score: the sum of the weights of the `preferredDuringSchedulingIgnoredDuringExecution` terms
//!   the node matches, scaled so that the best node gets 100.
//!
//! PreFilter and PreScore skip pods that use neither, which is most pods. A malformed required
//! term (Gt with a non-integer, an unknown operator) rejects the pod in PreFilter with a reason
//! naming the problem — Kubernetes would quietly treat the term as not matching; a malformed
//! preferred term never matches.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{NodeSelectorTerm, Pod, PreferredSchedulingTerm};

use super::helper::{node_selector_term_matches, validate_node_selector_term};
use crate::framework::interface::default_normalize_score;
use crate::framework::{
    ClusterEvent, CycleState, FilterPlugin, MAX_NODE_SCORE, NodeInfo, NodeScore, Plugin, PodInfo, PreFilterPlugin,
    PreScorePlugin, ScorePlugin, Status,
};

pub const NAME: &str = "NodeAffinity";
/// Kubernetes' ErrReasonPod.
pub const ERR_REASON_POD: &str = "node(s) didn't match Pod's node affinity/selector";

pub struct NodeAffinity;

fn required_terms(pod: &Pod) -> Option<&[NodeSelectorTerm]> {
    let na = pod.spec.as_ref()?.affinity.as_ref()?.node_affinity.as_ref()?;
    na.required_during_scheduling_ignored_during_execution.as_ref().map(|s| s.node_selector_terms.as_slice())
}

fn preferred_terms(pod: &Pod) -> &[PreferredSchedulingTerm] {
    let na = pod.spec.as_ref().and_then(|s| s.affinity.as_ref()).and_then(|a| a.node_affinity.as_ref());
    na.and_then(|na| na.preferred_during_scheduling_ignored_during_execution.as_deref()).unwrap_or_default()
}

/// Whether the pod constrains nodes at all (a nodeSelector or required node affinity).
fn has_required(pod: &Pod) -> bool {
    let selector = pod.spec.as_ref().and_then(|s| s.node_selector.as_ref()).is_some_and(|s| !s.is_empty());
    selector || required_terms(pod).is_some()
}

/// The decision (component-helpers' RequiredNodeAffinity.Match, the API types' own:
/// `api::core::v1::helper::node_affinity`): the nodeSelector AND any of the required terms. A
/// malformed term never matches; its problem is returned if no term matched.
pub fn match_required(pod: &Pod, node: &NodeInfo) -> Result<bool, String> {
    match pod.spec.as_ref() {
        Some(spec) => api::core::v1::helper::match_required_node_affinity(spec, node.name(), node.labels()),
        None => Ok(true),
    }
}

/// Whether the node passes the pod's nodeSelector and required affinity, ignoring malformed
/// terms as Kubernetes does where other plugins (PodTopologySpread) ask the same question.
pub fn required_node_affinity_matches(pod: &Pod, node: &NodeInfo) -> bool {
    match_required(pod, node).unwrap_or(false)
}

impl Plugin for NodeAffinity {
    fn name(&self) -> &'static str {
        NAME
    }
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        vec![ClusterEvent::NodeAdd, ClusterEvent::NodeLabelChange]
    }
}

impl PreFilterPlugin for NodeAffinity {
    fn pre_filter(&self, _state: &mut CycleState, pod: &PodInfo, _nodes: &[Arc<NodeInfo>]) -> Status {
        if !has_required(&pod.pod) {
            return Status::skip();
        }
        // A malformed term would fail the same way on every node: say so once, here.
        for (i, term) in required_terms(&pod.pod).unwrap_or_default().iter().enumerate() {
            if let Err(e) = validate_node_selector_term(term) {
                return Status::unresolvable(format!("invalid required node affinity: nodeSelectorTerms[{i}]: {e}"))
                    .with_plugin(NAME);
            }
        }
        Status::success()
    }
}

impl FilterPlugin for NodeAffinity {
    fn filter(&self, _state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        match match_required(&pod.pod, node) {
            Ok(true) => Status::success(),
            Ok(false) => Status::unresolvable(ERR_REASON_POD).with_plugin(NAME),
            Err(e) => Status::unresolvable(format!("invalid required node affinity: {e}")).with_plugin(NAME),
        }
    }
}

impl PreScorePlugin for NodeAffinity {
    fn pre_score(&self, _state: &mut CycleState, pod: &PodInfo, _nodes: &[Arc<NodeInfo>]) -> Status {
        let terms = preferred_terms(&pod.pod);
        if terms.is_empty() {
            return Status::skip();
        }
        for (i, t) in terms.iter().enumerate() {
            if let Err(e) = validate_node_selector_term(&t.preference) {
                // Kubernetes fails the cycle with an error here; a preference must not keep a pod
                // from running, so the term just never matches.
                tracing::warn!(target: "scheduler::framework", pod = %pod.key(), term = i, error = %e,
                    "ignoring malformed preferred node affinity term");
            }
        }
        Status::success()
    }
}

/// The raw score: the sum of the weights of the preferred terms the node matches.
fn preferred_score(pod: &Pod, node: &NodeInfo) -> i64 {
    preferred_terms(pod)
        .iter()
        .filter(|t| t.weight != 0 && node_selector_term_matches(&t.preference, node.name(), node.labels()) == Ok(true))
        .map(|t| i64::from(t.weight))
        .sum()
}

impl ScorePlugin for NodeAffinity {
    fn score(&self, _state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Result<i64, Status> {
        Ok(preferred_score(&pod.pod, node))
    }
    fn normalize_score(&self, _state: &CycleState, _pod: &PodInfo, scores: &mut [NodeScore]) -> Status {
        default_normalize_score(MAX_NODE_SCORE, false, scores);
        Status::success()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::Code;
    use crate::framework::types::testing::*;
    use serde_json::{Value, json};

    fn labeled(name: &str, labels: Value) -> NodeInfo {
        node(name, json!({"labels": labels}), json!({}), "4", "8Gi", "110")
    }

    fn required(terms: Value) -> Value {
        json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}})
    }

    fn expr(key: &str, op: &str, values: &[&str]) -> Value {
        json!({"matchExpressions": [{"key": key, "operator": op, "values": values}]})
    }

    #[test]
    fn filter_table() {
        let n = || labeled("n1", json!({"zone": "a", "disk": "ssd", "gen": "5"}));
        let cases = [
            ("no constraints", json!({}), Code::Success),
            ("nodeSelector matches", json!({"nodeSelector": {"zone": "a", "disk": "ssd"}}), Code::Success),
            ("nodeSelector value differs", json!({"nodeSelector": {"zone": "b"}}), Code::UnschedulableAndUnresolvable),
            (
                "nodeSelector label missing",
                json!({"nodeSelector": {"gpu": "true"}}),
                Code::UnschedulableAndUnresolvable,
            ),
            ("In", required(json!([expr("zone", "In", &["a", "b"])])), Code::Success),
            ("In, no value matches", required(json!([expr("zone", "In", &["b"])])), Code::UnschedulableAndUnresolvable),
            ("NotIn", required(json!([expr("zone", "NotIn", &["b"])])), Code::Success),
            ("NotIn rejects", required(json!([expr("zone", "NotIn", &["a"])])), Code::UnschedulableAndUnresolvable),
            ("Exists", required(json!([expr("disk", "Exists", &[])])), Code::Success),
            ("Exists, missing", required(json!([expr("gpu", "Exists", &[])])), Code::UnschedulableAndUnresolvable),
            ("DoesNotExist", required(json!([expr("gpu", "DoesNotExist", &[])])), Code::Success),
            (
                "DoesNotExist rejects",
                required(json!([expr("disk", "DoesNotExist", &[])])),
                Code::UnschedulableAndUnresolvable,
            ),
            ("Gt", required(json!([expr("gen", "Gt", &["4"])])), Code::Success),
            ("Gt rejects", required(json!([expr("gen", "Gt", &["5"])])), Code::UnschedulableAndUnresolvable),
            ("Lt", required(json!([expr("gen", "Lt", &["6"])])), Code::Success),
            ("Lt rejects", required(json!([expr("gen", "Lt", &["5"])])), Code::UnschedulableAndUnresolvable),
            (
                "terms are ORed",
                required(json!([expr("zone", "In", &["b"]), expr("disk", "In", &["ssd"])])),
                Code::Success,
            ),
            (
                "expressions in a term are ANDed",
                required(json!([{"matchExpressions": [
                    {"key": "zone", "operator": "In", "values": ["a"]},
                    {"key": "disk", "operator": "In", "values": ["hdd"]}]}])),
                Code::UnschedulableAndUnresolvable,
            ),
            (
                "matchFields metadata.name",
                required(json!([{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}])),
                Code::Success,
            ),
            (
                "matchFields other node",
                required(json!([{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n2"]}]}])),
                Code::UnschedulableAndUnresolvable,
            ),
            (
                "nodeSelector AND affinity",
                json!({"nodeSelector": {"zone": "b"}, "affinity": required(json!([expr("disk", "Exists", &[])]))["affinity"]}),
                Code::UnschedulableAndUnresolvable,
            ),
            ("empty term matches nothing", required(json!([{}])), Code::UnschedulableAndUnresolvable),
            ("no terms match nothing", required(json!([])), Code::UnschedulableAndUnresolvable),
        ];
        for (case, spec, want) in cases {
            let s = NodeAffinity.filter(&CycleState::new(), &pod("p", spec), &n());
            assert_eq!(s.code, want, "{case}");
            if want != Code::Success {
                assert_eq!(s.reasons, vec![ERR_REASON_POD], "{case}");
                assert_eq!(s.plugin, NAME, "{case}");
            }
        }
    }

    #[test]
    fn malformed_terms_are_reported_not_panicked_on() {
        let n = labeled("n1", json!({"gen": "5"}));
        let cases = [
            (expr("gen", "Gt", &["five"]), "\"five\" is not an integer"),
            (expr("gen", "Lt", &["1", "2"]), "needs exactly one value"),
            (expr("gen", "Near", &["1"]), "not a valid node selector operator"),
            (
                json!({"matchFields": [{"key": "metadata.uid", "operator": "In", "values": ["x"]}]}),
                "not a supported field",
            ),
        ];
        for (term, want) in cases {
            let p = pod("p", required(json!([term])));
            let s = NodeAffinity.pre_filter(&mut CycleState::new(), &p, &[Arc::new(n.clone())]);
            assert_eq!(s.code, Code::UnschedulableAndUnresolvable, "{term}");
            assert!(s.message().contains(want) && s.message().contains("nodeSelectorTerms[0]"), "{}", s.message());
            let s = NodeAffinity.filter(&CycleState::new(), &p, &n);
            assert_eq!(s.code, Code::UnschedulableAndUnresolvable, "{term}");
            assert!(s.message().contains(want), "{}", s.message());
        }
        // A valid term that matches still wins over a malformed one in Filter (Kubernetes' lazy errors).
        let p = pod("p", required(json!([expr("gen", "Gt", &["x"]), expr("gen", "Exists", &[])])));
        assert_eq!(NodeAffinity.filter(&CycleState::new(), &p, &n).code, Code::Success);
    }

    #[test]
    fn pre_filter_and_pre_score_skip_unconstrained_pods() {
        let nodes = [Arc::new(plain_node("n1"))];
        let plain = pod("p", json!({}));
        assert!(NodeAffinity.pre_filter(&mut CycleState::new(), &plain, &nodes).is_skip());
        assert!(NodeAffinity.pre_score(&mut CycleState::new(), &plain, &nodes).is_skip());
        let empty_selector = pod("p", json!({"nodeSelector": {}}));
        assert!(NodeAffinity.pre_filter(&mut CycleState::new(), &empty_selector, &nodes).is_skip());
        let selector = pod("p", json!({"nodeSelector": {"zone": "a"}}));
        assert!(NodeAffinity.pre_filter(&mut CycleState::new(), &selector, &nodes).is_success());
        let affinity = pod("p", required(json!([expr("zone", "In", &["a"])])));
        assert!(NodeAffinity.pre_filter(&mut CycleState::new(), &affinity, &nodes).is_success());
    }

    #[test]
    fn score_table() {
        let preferred = json!({"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 2, "preference": expr("zone", "In", &["a"])},
            {"weight": 5, "preference": expr("disk", "In", &["ssd"])},
            {"weight": 7, "preference": expr("gen", "Gt", &["oops"])},
        ]}}});
        let p = pod("p", preferred);
        let nodes = [
            labeled("both", json!({"zone": "a", "disk": "ssd", "gen": "9"})),
            labeled("zone", json!({"zone": "a"})),
            labeled("disk", json!({"disk": "ssd"})),
            labeled("none", json!({})),
        ];
        let state = CycleState::new();
        assert!(NodeAffinity.pre_score(&mut CycleState::new(), &p, &[]).is_success());
        let mut scores: Vec<NodeScore> = nodes
            .iter()
            .map(|n| NodeScore { name: n.name().into(), score: NodeAffinity.score(&state, &p, n).unwrap() })
            .collect();
        // The malformed term (weight 7) never matches.
        assert_eq!(scores.iter().map(|s| s.score).collect::<Vec<_>>(), vec![7, 2, 5, 0]);
        NodeAffinity.normalize_score(&state, &p, &mut scores);
        assert_eq!(scores.iter().map(|s| s.score).collect::<Vec<_>>(), vec![100, 28, 71, 0]);
    }
}
