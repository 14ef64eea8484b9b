//! Mirrors kube-scheduler's plugins/tainttoleration: a node's taints repel pods that do not
//! tolerate them.
//!
//! - Filter: a taint with effect `NoSchedule` or `NoExecute` that none of the pod's tolerations
//!   tolerates keeps the pod off the node.
//! - Score: `PreferNoSchedule` taints are a soft version: the fewer of them the pod does not
//!   tolerate (looking only at its tolerations with effect `PreferNoSchedule` or no effect), the
//!   better; normalized reversed, so the node with the fewest gets 100.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Taint, Toleration};

use api::core::v1::helper::{find_untolerated, tolerates};
use crate::framework::interface::default_normalize_score;
use crate::framework::{
    ClusterEvent, CycleState, FilterPlugin, MAX_NODE_SCORE, NodeInfo, NodeScore, Plugin, PodInfo, PreScorePlugin,
    ScorePlugin, Status,
};

pub const NAME: &str = "TaintToleration";

pub struct TaintToleration;

fn taints(node: &NodeInfo) -> &[Taint] {
    node.node.spec.as_ref().and_then(|s| s.taints.as_deref()).unwrap_or_default()
}

fn tolerations(pod: &PodInfo) -> &[Toleration] {
    pod.pod.spec.as_ref().and_then(|s| s.tolerations.as_deref()).unwrap_or_default()
}

/// Kubernetes' wording: `node(s) had untolerated taint {key: value}`.
pub fn untolerated_reason(taint: &Taint) -> String {
    format!("node(s) had untolerated taint {{{}: {}}}", taint.key, taint.value.as_deref().unwrap_or(""))
}

/// The Score decision: how many PreferNoSchedule taints the pod does not tolerate. Only
/// tolerations meant for them (effect PreferNoSchedule, or empty for every effect) count.
pub fn count_intolerable_prefer_no_schedule(taints: &[Taint], tolerations: &[Toleration]) -> i64 {
    let soft = |t: &&Toleration| matches!(t.effect.as_deref(), None | Some("") | Some("PreferNoSchedule"));
    taints
        .iter()
        .filter(|taint| taint.effect == "PreferNoSchedule")
        .filter(|taint| !tolerations.iter().filter(soft).any(|t| tolerates(t, taint)))
        .count() as i64
}

impl Plugin for TaintToleration {
    fn name(&self) -> &'static str {
        NAME
    }
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        vec![ClusterEvent::NodeAdd, ClusterEvent::NodeTaintChange]
    }
}

impl FilterPlugin for TaintToleration {
    fn filter(&self, _state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        match find_untolerated(taints(node), tolerations(pod), &["NoSchedule", "NoExecute"]) {
            None => Status::success(),
            Some(taint) => Status::unresolvable(untolerated_reason(taint)).with_plugin(NAME),
        }
    }
}

impl PreScorePlugin for TaintToleration {
    fn pre_score(&self, _state: &mut CycleState, _pod: &PodInfo, nodes: &[Arc<NodeInfo>]) -> Status {
        // Not in Kubernetes: when no feasible node has a PreferNoSchedule taint every node would
        // score 100, which changes no ranking — so skip the per-node work.
        if nodes.iter().all(|n| taints(n).iter().all(|t| t.effect != "PreferNoSchedule")) {
            return Status::skip();
        }
        Status::success()
    }
}

impl ScorePlugin for TaintToleration {
    fn score(&self, _state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Result<i64, Status> {
        Ok(count_intolerable_prefer_no_schedule(taints(node), tolerations(pod)))
    }
    fn normalize_score(&self, _state: &CycleState, _pod: &PodInfo, scores: &mut [NodeScore]) -> Status {
        default_normalize_score(MAX_NODE_SCORE, true, scores);
        Status::success()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::Code;
    use crate::framework::types::testing::*;
    use serde_json::{Value, json};

    fn tainted(name: &str, taints: Value) -> NodeInfo {
        node(name, json!({}), json!({"taints": taints}), "4", "8Gi", "110")
    }

    #[test]
    fn filter_table() {
        let gpu = json!([{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]);
        let cases = [
            ("no taints", json!([]), json!([]), None),
            ("untolerated NoSchedule", gpu.clone(), json!([]), Some("node(s) had untolerated taint {dedicated: gpu}")),
            (
                "tolerated by Equal",
                gpu.clone(),
                json!([{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]),
                None,
            ),
            ("tolerated by Exists", gpu.clone(), json!([{"key": "dedicated", "operator": "Exists"}]), None),
            (
                "wrong value",
                gpu.clone(),
                json!([{"key": "dedicated", "value": "cpu"}]),
                Some("node(s) had untolerated taint {dedicated: gpu}"),
            ),
            (
                "wrong effect",
                gpu,
                json!([{"key": "dedicated", "operator": "Exists", "effect": "NoExecute"}]),
                Some("node(s) had untolerated taint {dedicated: gpu}"),
            ),
            (
                "untolerated NoExecute without value",
                json!([{"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"}]),
                json!([]),
                Some("node(s) had untolerated taint {node.kubernetes.io/not-ready: }"),
            ),
            (
                "PreferNoSchedule does not filter",
                json!([{"key": "k", "value": "v", "effect": "PreferNoSchedule"}]),
                json!([]),
                None,
            ),
            (
                "second taint untolerated",
                json!([{"key": "a", "effect": "NoSchedule"}, {"key": "b", "value": "x", "effect": "NoSchedule"}]),
                json!([{"key": "a", "operator": "Exists"}]),
                Some("node(s) had untolerated taint {b: x}"),
            ),
            (
                "tolerate everything",
                json!([{"key": "a", "effect": "NoExecute"}]),
                json!([{"operator": "Exists"}]),
                None,
            ),
        ];
        for (case, taints, tols, want) in cases {
            let s = TaintToleration.filter(
                &CycleState::new(),
                &pod("p", json!({"tolerations": tols})),
                &tainted("n", taints),
            );
            match want {
                None => assert_eq!(s.code, Code::Success, "{case}"),
                Some(reason) => {
                    assert_eq!(s.code, Code::UnschedulableAndUnresolvable, "{case}");
                    assert_eq!(s.reasons, vec![reason], "{case}");
                }
            }
        }
    }

    #[test]
    fn score_table() {
        let soft = |k: &str| json!({"key": k, "value": "v", "effect": "PreferNoSchedule"});
        let nodes = [
            tainted("clean", json!([])),
            tainted("one", json!([soft("a")])),
            tainted("two", json!([soft("a"), soft("b")])),
            tainted("hard-only", json!([{"key": "h", "effect": "NoSchedule"}])),
        ];
        let nodes: Vec<Arc<NodeInfo>> = nodes.into_iter().map(Arc::new).collect();
        let cases = [
            ("no tolerations", json!([]), vec![0, 1, 2, 0], vec![100, 50, 0, 100]),
            (
                "tolerates a",
                json!([{"key": "a", "operator": "Exists", "effect": "PreferNoSchedule"}]),
                vec![0, 0, 1, 0],
                vec![100, 100, 0, 100],
            ),
            (
                "empty effect counts",
                json!([{"key": "a", "operator": "Exists"}]),
                vec![0, 0, 1, 0],
                vec![100, 100, 0, 100],
            ),
            (
                "NoSchedule toleration is ignored for scoring",
                json!([{"key": "a", "operator": "Exists", "effect": "NoSchedule"}]),
                vec![0, 1, 2, 0],
                vec![100, 50, 0, 100],
            ),
            ("tolerates all", json!([{"operator": "Exists"}]), vec![0, 0, 0, 0], vec![100, 100, 100, 100]),
        ];
        for (case, tols, raw, normalized) in cases {
            let p = pod("p", json!({"tolerations": tols}));
            let mut state = CycleState::new();
            assert!(TaintToleration.pre_score(&mut state, &p, &nodes).is_success(), "{case}");
            let mut scores: Vec<NodeScore> = nodes
                .iter()
                .map(|n| NodeScore { name: n.name().into(), score: TaintToleration.score(&state, &p, n).unwrap() })
                .collect();
            assert_eq!(scores.iter().map(|s| s.score).collect::<Vec<_>>(), raw, "{case}");
            TaintToleration.normalize_score(&state, &p, &mut scores);
            assert_eq!(scores.iter().map(|s| s.score).collect::<Vec<_>>(), normalized, "{case}");
        }
    }

    #[test]
    fn pre_score_skips_without_soft_taints() {
        let nodes = [Arc::new(plain_node("a")), Arc::new(tainted("b", json!([{"key": "h", "effect": "NoSchedule"}])))];
        assert!(TaintToleration.pre_score(&mut CycleState::new(), &pod("p", json!({})), &nodes).is_skip());
    }
}
