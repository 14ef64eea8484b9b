//! Mirrors kube-scheduler's plugins/noderesources/balanced_allocation.go: prefer nodes whose cpu
//! and memory would be used in similar proportions after placing the pod, so that neither runs out
//! while the other sits idle. Score = (1 − standard deviation of the used fractions) × 100; with two
//! resources the deviation is |cpu fraction − memory fraction| / 2.

use crate::framework::{ClusterEvent, CycleState, MAX_NODE_SCORE, NodeInfo, Plugin, PodInfo, ScorePlugin, Status};

pub const NAME: &str = "NodeResourcesBalancedAllocation";

pub struct BalancedAllocation;

impl Plugin for BalancedAllocation {
    fn name(&self) -> &'static str {
        NAME
    }
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        vec![ClusterEvent::NodeAdd, ClusterEvent::NodeAllocatableChange, ClusterEvent::AssignedPodDelete]
    }
}

fn fraction(requested: i64, capacity: i64) -> f64 {
    if capacity <= 0 {
        return 1.0;
    }
    (requested as f64 / capacity as f64).min(1.0)
}

impl ScorePlugin for BalancedAllocation {
    fn score(&self, _state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Result<i64, Status> {
        // Kubernetes scores balance on actual requests (not the non-zero defaults).
        let cpu = fraction(node.requested.milli_cpu + pod.request.milli_cpu, node.allocatable.milli_cpu);
        let mem = fraction(node.requested.memory + pod.request.memory, node.allocatable.memory);
        let std = (cpu - mem).abs() / 2.0;
        Ok(((1.0 - std) * MAX_NODE_SCORE as f64) as i64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::types::testing::*;
    use serde_json::json;

    #[test]
    fn score_table() {
        let st = CycleState::new();
        let n = plain_node("n"); // 4 cpu, 8 GiB
        for (case, spec, want) in [
            ("balanced: a quarter of each", json!({"containers": [container("1", "2Gi")]}), 100),
            ("all cpu, no memory", json!({"containers": [container("4", "")]}), 50),
            ("half cpu, no memory", json!({"containers": [container("2", "")]}), 75),
            ("nothing requested", json!({}), 100),
        ] {
            assert_eq!(BalancedAllocation.score(&st, &pod("p", spec), &n).unwrap(), want, "{case}");
        }
    }
}
