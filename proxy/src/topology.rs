//! Mirrors kube-proxy's topology.go (`CategorizeEndpoints`): which endpoints of a Service port
//! take cluster-wide traffic and which take node-local traffic (the `Local` traffic policies).
//!
//! Within each set, ready endpoints are used; when none is ready, the endpoints that are still
//! serving while they terminate are used instead (KEP-1669, "ProxyTerminatingEndpoints"), so that
//! a rolling update or a scale-down to zero ready pods does not drop connections that could still
//! be served.

use crate::endpoint::Endpoint;
use crate::serviceport::ServicePortInfo;

#[derive(Debug, Default, PartialEq, Eq)]
pub struct Categorized<'a> {
    /// Endpoints for `Cluster` policies (all nodes); empty if no policy of the port is Cluster.
    pub cluster: Vec<&'a Endpoint>,
    /// This node's endpoints, for `Local` policies; empty if no policy of the port is Local.
    pub local: Vec<&'a Endpoint>,
    /// Every endpoint some rule may send traffic to: the KUBE-SEP chains to write.
    pub all_reachable: Vec<&'a Endpoint>,
}

/// Ready endpoints, or else the serving-and-terminating ones.
fn usable<'a>(eps: impl Iterator<Item = &'a Endpoint> + Clone) -> Vec<&'a Endpoint> {
    let ready: Vec<_> = eps.clone().filter(|e| e.ready).collect();
    if !ready.is_empty() {
        return ready;
    }
    eps.filter(|e| e.serving && e.terminating).collect()
}

pub fn categorize_endpoints<'a>(svc: &ServicePortInfo, endpoints: &'a [Endpoint]) -> Categorized<'a> {
    // External traffic uses the cluster-wide set under either policy: with `Local`, traffic from
    // pods and from the node itself is still sent cluster-wide (the KUBE-EXT chain's first rules).
    let uses_cluster = !svc.internal_policy_local || svc.externally_accessible();
    let uses_local = svc.internal_policy_local || svc.external_policy_local;
    let cluster = if uses_cluster { usable(endpoints.iter()) } else { Vec::new() };
    let local = if uses_local { usable(endpoints.iter().filter(|e| e.is_local)) } else { Vec::new() };
    let mut all_reachable: Vec<&Endpoint> = cluster.iter().chain(local.iter()).copied().collect();
    all_reachable.sort();
    all_reachable.dedup();
    Categorized { cluster, local, all_reachable }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serviceport::{Protocol, ServicePortName};

    fn ep(last: u8, local: bool, ready: bool, serving: bool, terminating: bool) -> Endpoint {
        Endpoint { ip: [10, 244, 0, last].into(), port: 80, is_local: local, ready, serving, terminating }
    }

    fn svc(itp_local: bool, etp_local: bool, node_port: bool) -> ServicePortInfo {
        ServicePortInfo {
            name: ServicePortName { namespace: "d".into(), name: "s".into(), port: String::new(), protocol: Protocol::Tcp },
            cluster_ip: [10, 96, 0, 1].into(),
            port: 80,
            node_port: node_port.then_some(30000),
            external_ips: vec![],
            affinity_timeout: None,
            external_policy_local: etp_local,
            internal_policy_local: itp_local,
        }
    }

    fn ips(v: &[&Endpoint]) -> Vec<u8> {
        v.iter().map(|e| e.ip.octets()[3]).collect()
    }

    #[test]
    fn table() {
        let eps = [
            ep(1, true, true, true, false),
            ep(2, false, true, true, false),
            ep(3, true, false, true, true),  // local, terminating but serving
            ep(4, false, false, false, false), // not ready
        ];
        let only_terminating = [ep(3, true, false, true, true), ep(4, false, false, false, true)];
        // (itp local, etp local, nodeport, endpoints, cluster, local)
        type Case<'a> = (bool, bool, bool, &'a [Endpoint], &'a [u8], &'a [u8]);
        let cases: [Case; 5] = [
            (false, false, false, &eps, &[1, 2], &[]),
            (true, false, false, &eps, &[], &[1]),
            (false, true, true, &eps, &[1, 2], &[1]),
            (false, false, false, &only_terminating, &[3], &[]),
            (true, false, false, &[ep(2, false, true, true, false), ep(3, true, false, true, true)], &[], &[3]),
        ];
        for (i, (itp, etp, np, eps, cluster, local)) in cases.into_iter().enumerate() {
            let c = categorize_endpoints(&svc(itp, etp, np), eps);
            assert_eq!(ips(&c.cluster), cluster, "case {i}: cluster");
            assert_eq!(ips(&c.local), local, "case {i}: local");
        }
    }
}
