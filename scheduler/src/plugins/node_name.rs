//! Mirrors kube-scheduler's plugins/nodename: a pod that names a node in `spec.nodeName` fits only
//! there. (The scheduler does not pick up pods with a nodeName at all; the kubelet's admission uses
//! the same check. It stays for profiles and tests that feed such pods.)

use crate::framework::{ClusterEvent, CycleState, FilterPlugin, NodeInfo, Plugin, PodInfo, Status};

pub const NAME: &str = "NodeName";
pub const ERR_REASON: &str = "node(s) didn't match the requested node name";

pub struct NodeName;

impl Plugin for NodeName {
    fn name(&self) -> &'static str {
        NAME
    }
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        vec![ClusterEvent::NodeAdd]
    }
}

impl FilterPlugin for NodeName {
    fn filter(&self, _state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        match pod.pod.spec.as_ref().and_then(|s| s.node_name.as_deref()).filter(|n| !n.is_empty()) {
            Some(wanted) if wanted != node.name() => Status::unresolvable(ERR_REASON),
            _ => Status::success(),
        }
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
        for (case, spec, want) in [
            ("no node name", json!({}), Code::Success),
            ("this node", json!({"nodeName": "n1"}), Code::Success),
            ("another node", json!({"nodeName": "n2"}), Code::UnschedulableAndUnresolvable),
        ] {
            assert_eq!(NodeName.filter(&CycleState::new(), &pod("p", spec), &plain_node("n1")).code, want, "{case}");
        }
    }
}
