//! Mirrors kube-scheduler's plugins/nodeports: two pods cannot bind the same host port on one
//! node. A pod asking for `hostPort` 8080/TCP does not fit a node where a pod already holds
//! 8080/TCP on the same host IP — or on any IP when either side listens on 0.0.0.0 (the default).
//! Pods without host ports (nearly all) skip this plugin in PreFilter.

use std::sync::Arc;

use crate::framework::types::HostPort;
use crate::framework::{ClusterEvent, CycleState, FilterPlugin, NodeInfo, Plugin, PodInfo, PreFilterPlugin, Status};

pub const NAME: &str = "NodePorts";
/// Kubernetes' ErrReason.
pub const ERR_REASON: &str = "node(s) didn't have free ports for the requested pod ports";

pub struct NodePorts;

/// The decision (fitsPorts): none of the wanted ports conflicts with one in use.
pub fn fits_ports(want: &[HostPort], used: &[HostPort]) -> bool {
    !want.iter().any(|w| used.iter().any(|u| w.conflicts(u)))
}

impl Plugin for NodePorts {
    fn name(&self) -> &'static str {
        NAME
    }
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        // A port frees up when its pod goes away; a new node has all its ports free.
        vec![ClusterEvent::AssignedPodDelete, ClusterEvent::NodeAdd]
    }
}

impl PreFilterPlugin for NodePorts {
    fn pre_filter(&self, _state: &mut CycleState, pod: &PodInfo, _nodes: &[Arc<NodeInfo>]) -> Status {
        // The ports themselves are already in PodInfo (computed once per pod), so there is no
        // state to write: PreFilter only decides whether Filter has anything to check.
        if pod.host_ports.is_empty() { Status::skip() } else { Status::success() }
    }
}

impl FilterPlugin for NodePorts {
    fn filter(&self, _state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        if fits_ports(&pod.host_ports, &node.used_ports) {
            Status::success()
        } else {
            Status::unschedulable(ERR_REASON).with_plugin(NAME)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::Code;
    use crate::framework::types::testing::*;
    use serde_json::{Value, json};

    /// A pod with one container exposing `ports` ([hostIP, protocol, hostPort]).
    fn with_ports(name: &str, ports: &[(&str, &str, i32)]) -> PodInfo {
        let ports: Vec<Value> = ports
            .iter()
            .map(|(ip, proto, port)| {
                let mut p = json!({"containerPort": 80, "hostPort": port, "protocol": proto});
                if !ip.is_empty() {
                    p["hostIP"] = json!(ip);
                }
                p
            })
            .collect();
        pod(name, json!({"containers": [{"name": "c", "image": "b", "ports": ports}]}))
    }

    #[test]
    fn filter_table() {
        /// (case, wanted ports, ports in use, expected code); a port is (hostIP, protocol, hostPort).
        type Case<'a> = (&'a str, &'a [(&'a str, &'a str, i32)], &'a [(&'a str, &'a str, i32)], Code);
        let cases: &[Case] = &[
            ("nothing used", &[("", "TCP", 8080)], &[], Code::Success),
            ("same port, all addresses", &[("", "TCP", 8080)], &[("", "TCP", 8080)], Code::Unschedulable),
            ("other port", &[("", "TCP", 8080)], &[("", "TCP", 8081)], Code::Success),
            ("other protocol", &[("", "UDP", 8080)], &[("", "TCP", 8080)], Code::Success),
            ("same ip", &[("10.0.0.1", "TCP", 80)], &[("10.0.0.1", "TCP", 80)], Code::Unschedulable),
            ("other ip", &[("10.0.0.1", "TCP", 80)], &[("10.0.0.2", "TCP", 80)], Code::Success),
            ("wanted on 0.0.0.0, used on one ip", &[("", "TCP", 80)], &[("10.0.0.2", "TCP", 80)], Code::Unschedulable),
            (
                "wanted on one ip, used on 0.0.0.0",
                &[("10.0.0.1", "TCP", 80)],
                &[("0.0.0.0", "TCP", 80)],
                Code::Unschedulable,
            ),
            (
                "one of several conflicts",
                &[("", "TCP", 80), ("", "TCP", 443)],
                &[("", "TCP", 443)],
                Code::Unschedulable,
            ),
        ];
        for (case, want, used, code) in cases {
            let mut n = plain_node("n");
            if !used.is_empty() {
                n.add_pod(Arc::new(with_ports("existing", used)));
            }
            let s = NodePorts.filter(&CycleState::new(), &with_ports("p", want), &n);
            assert_eq!(s.code, *code, "{case}");
            if *code != Code::Success {
                assert_eq!(s.reasons, vec![ERR_REASON], "{case}");
            }
        }
    }

    #[test]
    fn pre_filter_skips_pods_without_host_ports() {
        let nodes = [Arc::new(plain_node("n"))];
        let no_host_port =
            pod("p", json!({"containers": [{"name": "c", "image": "b", "ports": [{"containerPort": 80}]}]}));
        assert!(NodePorts.pre_filter(&mut CycleState::new(), &no_host_port, &nodes).is_skip());
        assert!(
            NodePorts.pre_filter(&mut CycleState::new(), &with_ports("p", &[("", "TCP", 80)]), &nodes).is_success()
        );
    }
}
