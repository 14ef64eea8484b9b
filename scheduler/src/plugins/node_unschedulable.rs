//! Mirrors kube-scheduler's plugins/nodeunschedulable: a cordoned node (`spec.unschedulable`,
//! what `kubectl cordon` sets) takes no new pods, unless the pod tolerates the
//! `node.kubernetes.io/unschedulable:NoSchedule` taint that stands for it.

use api::core::v1::well_known::TAINT_NODE_UNSCHEDULABLE;
use k8s_openapi::api::core::v1::Taint;

use api::core::v1::helper::tolerates;
use crate::framework::{ClusterEvent, CycleState, FilterPlugin, NodeInfo, Plugin, PodInfo, Status};

pub const NAME: &str = "NodeUnschedulable";
pub const ERR_REASON_UNSCHEDULABLE: &str = "node(s) were unschedulable";

pub struct NodeUnschedulable;

impl Plugin for NodeUnschedulable {
    fn name(&self) -> &'static str {
        NAME
    }
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        vec![ClusterEvent::NodeAdd, ClusterEvent::NodeSpecUnschedulableChange, ClusterEvent::NodeTaintChange]
    }
}

impl FilterPlugin for NodeUnschedulable {
    fn filter(&self, _state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        if !node.unschedulable {
            return Status::success();
        }
        let taint = Taint { key: TAINT_NODE_UNSCHEDULABLE.into(), effect: "NoSchedule".into(), ..Default::default() };
        let tolerations = pod.pod.spec.as_ref().and_then(|s| s.tolerations.as_deref()).unwrap_or_default();
        if tolerations.iter().any(|t| tolerates(t, &taint)) {
            return Status::success();
        }
        Status::unresolvable(ERR_REASON_UNSCHEDULABLE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::Code;
    use crate::framework::types::testing::*;
    use serde_json::json;

    #[test]
    fn filter_table() {
        let tolerating = json!({"tolerations": [{"key": TAINT_NODE_UNSCHEDULABLE, "operator": "Exists", "effect": "NoSchedule"}]});
        let cases = [
            ("schedulable node", json!({}), json!({}), Code::Success),
            ("cordoned node", json!({}), json!({"unschedulable": true}), Code::UnschedulableAndUnresolvable),
            ("explicitly schedulable", json!({}), json!({"unschedulable": false}), Code::Success),
            ("cordoned, tolerated", tolerating, json!({"unschedulable": true}), Code::Success),
        ];
        for (case, pod_spec, node_spec, want) in cases {
            let n = node("n", json!({}), node_spec, "4", "8Gi", "110");
            let s = NodeUnschedulable.filter(&CycleState::new(), &pod("p", pod_spec), &n);
            assert_eq!(s.code, want, "{case}");
            if want != Code::Success {
                assert_eq!(s.reasons, vec![ERR_REASON_UNSCHEDULABLE]);
            }
        }
    }
}
