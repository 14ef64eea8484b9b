//! Mirrors kube-scheduler's plugins/noderesources/fit.go: a pod fits a node when the node's
//! allocatable cpu, memory, ephemeral-storage and pod count cover what the pods already there
//! request plus what this one requests (init containers and sidecars counted as Kubernetes counts
//! them, see `framework::types::pod_requests`).
//!
//! Score, by the configured strategy over cpu and memory (weighted):
//! - LeastAllocated (default): `(allocatable − requested) × 100 / allocatable` — spreads pods;
//! - MostAllocated: `requested × 100 / allocatable` — packs them.
//!
//! Scoring uses "non-zero" requests: a container without a cpu or memory request counts as 100m
//! and 200 MB, so best-effort pods still spread over nodes.

use serde::Deserialize;

use crate::framework::{
    ClusterEvent, CycleState, FilterPlugin, MAX_NODE_SCORE, NodeInfo, Plugin, PodInfo, ScorePlugin, Status,
};

pub const NAME: &str = "NodeResourcesFit";

/// How NodeResourcesFit scores (its `scoringStrategy.type`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
pub enum ScoringStrategyType {
    /// Prefer the emptiest nodes (spreads pods).
    #[default]
    LeastAllocated,
    /// Prefer the fullest nodes (packs pods, frees whole nodes).
    MostAllocated,
}

/// Weights of cpu and memory in NodeResourcesFit's score.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScoringStrategy {
    pub type_: ScoringStrategyType,
    pub cpu_weight: i64,
    pub memory_weight: i64,
}

impl Default for ScoringStrategy {
    fn default() -> Self {
        ScoringStrategy { type_: ScoringStrategyType::LeastAllocated, cpu_weight: 1, memory_weight: 1 }
    }
}

pub struct Fit {
    strategy: ScoringStrategy,
}

impl Fit {
    pub fn new(strategy: ScoringStrategy) -> Fit {
        Fit { strategy }
    }
}

impl Plugin for Fit {
    fn name(&self) -> &'static str {
        NAME
    }
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        vec![ClusterEvent::NodeAdd, ClusterEvent::NodeAllocatableChange, ClusterEvent::AssignedPodDelete, ClusterEvent::AssignedPodUpdate]
    }
}

/// The reasons `pod` does not fit `node`, in Kubernetes' words ("Insufficient cpu", "Too many pods").
pub fn insufficient_resources(pod: &PodInfo, node: &NodeInfo) -> Vec<String> {
    let mut reasons = Vec::new();
    if node.pods.len() as i64 + 1 > node.allocatable.allowed_pod_number {
        reasons.push("Too many pods".to_string());
    }
    let (want, used, have) = (&pod.request, &node.requested, &node.allocatable);
    if want.milli_cpu > 0 && have.milli_cpu < want.milli_cpu + used.milli_cpu {
        reasons.push("Insufficient cpu".to_string());
    }
    if want.memory > 0 && have.memory < want.memory + used.memory {
        reasons.push("Insufficient memory".to_string());
    }
    if want.ephemeral_storage > 0 && have.ephemeral_storage < want.ephemeral_storage + used.ephemeral_storage {
        reasons.push("Insufficient ephemeral-storage".to_string());
    }
    reasons
}

impl FilterPlugin for Fit {
    fn filter(&self, _state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        let reasons = insufficient_resources(pod, node);
        if reasons.is_empty() {
            Status::success()
        } else {
            Status { code: crate::framework::Code::Unschedulable, reasons, plugin: NAME }
        }
    }
}

fn least_requested(requested: i64, capacity: i64) -> i64 {
    if capacity == 0 || requested > capacity {
        return 0;
    }
    (capacity - requested) * MAX_NODE_SCORE / capacity
}

fn most_requested(requested: i64, capacity: i64) -> i64 {
    if capacity == 0 {
        return 0;
    }
    requested.min(capacity) * MAX_NODE_SCORE / capacity
}

impl ScorePlugin for Fit {
    fn score(&self, _state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Result<i64, Status> {
        let f = match self.strategy.type_ {
            ScoringStrategyType::LeastAllocated => least_requested,
            ScoringStrategyType::MostAllocated => most_requested,
        };
        let cpu = f(node.non_zero_requested.milli_cpu + pod.non_zero_request.milli_cpu, node.allocatable.milli_cpu);
        let mem = f(node.non_zero_requested.memory + pod.non_zero_request.memory, node.allocatable.memory);
        let (wc, wm) = (self.strategy.cpu_weight, self.strategy.memory_weight);
        if wc + wm == 0 {
            return Ok(0);
        }
        Ok((cpu * wc + mem * wm) / (wc + wm))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::Code;
    use crate::framework::types::testing::*;
    use serde_json::json;
    use std::sync::Arc;

    fn with_pods(mut n: NodeInfo, pods: &[PodInfo]) -> NodeInfo {
        for p in pods {
            n.add_pod(Arc::new(PodInfo::new(p.pod.clone())));
        }
        n
    }

    #[test]
    fn filter_table() {
        let big = pod("big", json!({"containers": [container("3", "6Gi")]}));
        let cases = [
            ("fits on an empty node", pod("p", json!({"containers": [container("1", "1Gi")]})), vec![], vec![]),
            ("cpu short", pod("p", json!({"containers": [container("2", "1Gi")]})), vec![big.pod.clone()], vec!["Insufficient cpu"]),
            (
                "cpu and memory short",
                pod("p", json!({"containers": [container("2", "3Gi")]})),
                vec![big.pod.clone()],
                vec!["Insufficient cpu", "Insufficient memory"],
            ),
            (
                "an init container's request counts",
                pod("p", json!({"initContainers": [container("2", "")], "containers": [container("100m", "")]})),
                vec![big.pod.clone()],
                vec!["Insufficient cpu"],
            ),
            ("best effort always fits resources", pod("p", json!({})), vec![big.pod.clone()], vec![]),
        ];
        for (case, p, existing, want) in cases {
            let n = with_pods(plain_node("n1"), &existing.into_iter().map(PodInfo::new).collect::<Vec<_>>());
            let s = Fit::new(ScoringStrategy::default()).filter(&CycleState::new(), &p, &n);
            assert_eq!(s.reasons, want, "{case}");
            assert_eq!(s.code == Code::Unschedulable, !want.is_empty(), "{case}");
        }
    }

    #[test]
    fn too_many_pods() {
        let n = with_pods(node("n1", json!({}), json!({}), "4", "8Gi", "1"), &[pod("a", json!({}))]);
        let s = Fit::new(ScoringStrategy::default()).filter(&CycleState::new(), &pod("b", json!({})), &n);
        assert_eq!(s.reasons, vec!["Too many pods"]);
    }

    #[test]
    fn score_table() {
        // Node: 4 cpu, 8 GiB. Pod asks 1 cpu and 2 GiB (a quarter of each).
        let p = pod("p", json!({"containers": [container("1", "2Gi")]}));
        let empty = plain_node("empty");
        let half = with_pods(plain_node("half"), &[pod("x", json!({"containers": [container("2", "4Gi")]}))]);
        let least = Fit::new(ScoringStrategy::default());
        let most = Fit::new(ScoringStrategy { type_: ScoringStrategyType::MostAllocated, ..Default::default() });
        let st = CycleState::new();
        assert_eq!(least.score(&st, &p, &empty).unwrap(), 75);
        assert_eq!(least.score(&st, &p, &half).unwrap(), 25);
        assert_eq!(most.score(&st, &p, &empty).unwrap(), 25);
        assert_eq!(most.score(&st, &p, &half).unwrap(), 75);
        // Best effort pods score with the non-zero defaults (100m, 200 MiB).
        let be = pod("be", json!({}));
        assert_eq!(least.score(&st, &be, &empty).unwrap(), (97 + 97) / 2);
        // Weights: cpu only.
        let cpu_only = Fit::new(ScoringStrategy { cpu_weight: 1, memory_weight: 0, ..Default::default() });
        let cpu_heavy = pod("c", json!({"containers": [container("2", "")]}));
        assert_eq!(cpu_only.score(&st, &cpu_heavy, &empty).unwrap(), 50);
    }
}
