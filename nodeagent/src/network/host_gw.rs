//! Mirrors flannel's backend/hostgw (the host-gw backend): pods on other nodes are reached through a
//! plain route per node, `<peer podCIDR> via <peer InternalIP>`, with no encapsulation.
//!
//! This works only when every node sits on one layer-2 segment (the Docker Compose lab's bridge
//! network), which is exactly flannel's host-gw precondition. In Kubernetes this is the job of a
//! network add-on running as a DaemonSet; kubelab's agent does it itself behind `--host-gw`.
//!
//! The loop, every [`RESYNC_PERIOD`]:
//! 1. List the Nodes.
//! 2. Compute the desired routes ([`desired_routes`]): every *other* node that has a
//!    `spec.podCIDR` and an IPv4 `InternalIP`.
//! 3. Read the routes we own (`ip -4 route show proto` [`ROUTE_PROTOCOL`]) and parse them
//!    ([`parse_routes`]).
//! 4. Diff ([`diff`]): `ip route replace` what is missing or points elsewhere, `ip route del` what
//!    belongs to a node that is gone.
//!
//! Why a route protocol number: it marks the routes this backend made, so step 4 can delete a
//! stale route after an agent restart without touching routes someone else added (the kernel's
//! own, docker's, an operator's). Why a periodic full resync rather than only Node watch events:
//! when a node container is disconnected from its network and reconnected, the kernel drops every
//! route through the old interface; the next resync puts them back without any event to react to.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams};
use tokio::sync::watch;

use crate::error::{Error, Result};

/// How often routes are recomputed and re-applied (flannel's host-gw resyncs its routes on a
/// timer too, for the same reason: routes can vanish under it).
pub(crate) const RESYNC_PERIOD: Duration = Duration::from_secs(10);

/// The `proto` number of the routes this backend owns (an unassigned id in
/// `/etc/iproute2/rt_protos`). `ip route show proto 77` lists exactly ours.
pub(crate) const ROUTE_PROTOCOL: u8 = 77;

/// One route to a peer node's pods.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Route {
    /// The peer's pod CIDR, as the Node's `spec.podCIDR` writes it (`10.244.2.0/24`).
    pub(crate) dst: String,
    /// The peer's InternalIP.
    pub(crate) via: Ipv4Addr,
}

/// What one resync changes.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct RouteDiff {
    /// `ip route replace`: missing, or pointing at another gateway.
    pub(crate) replace: Vec<Route>,
    /// `ip route del`: ours, but no node wants it any more.
    pub(crate) delete: Vec<Route>,
}

impl RouteDiff {
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.replace.is_empty() && self.delete.is_empty()
    }
}

/// Step 2: the routes this node should have, keyed by destination CIDR. Our own node, nodes
/// without a pod CIDR and nodes without an IPv4 InternalIP are skipped (nothing to route to).
pub(crate) fn desired_routes(nodes: &[Node], self_name: &str) -> BTreeMap<String, Ipv4Addr> {
    let mut out = BTreeMap::new();
    for node in nodes {
        if node.metadata.name.as_deref() == Some(self_name) {
            continue;
        }
        let Some(cidr) = node.spec.as_ref().and_then(|s| s.pod_cidr.as_deref()) else { continue };
        let Some(ip) = internal_ipv4(node) else { continue };
        out.insert(cidr.to_string(), ip);
    }
    out
}

fn internal_ipv4(node: &Node) -> Option<Ipv4Addr> {
    let addrs = node.status.as_ref()?.addresses.as_ref()?;
    addrs.iter().filter(|a| a.type_ == "InternalIP").find_map(|a| a.address.parse().ok())
}

/// Step 3: parse `ip -4 route show proto <n>` output (`10.244.2.0/24 via 172.31.250.12 dev eth0 …`)
/// into destination → gateway. Lines without a `via` (not ours to manage) are ignored.
pub(crate) fn parse_routes(out: &str) -> BTreeMap<String, Ipv4Addr> {
    let mut routes = BTreeMap::new();
    for line in out.lines() {
        let mut words = line.split_whitespace();
        let Some(dst) = words.next() else { continue };
        let mut via = None;
        while let Some(w) = words.next() {
            if w == "via" {
                via = words.next().and_then(|v| v.parse::<Ipv4Addr>().ok());
                break;
            }
        }
        if let Some(via) = via {
            routes.insert(dst.to_string(), via);
        }
    }
    routes
}

/// Step 4: what to replace and what to delete to turn `current` (our routes) into `desired`.
pub(crate) fn diff(desired: &BTreeMap<String, Ipv4Addr>, current: &BTreeMap<String, Ipv4Addr>) -> RouteDiff {
    let replace = desired
        .iter()
        .filter(|(dst, via)| current.get(*dst) != Some(via))
        .map(|(dst, via)| Route { dst: dst.clone(), via: *via })
        .collect();
    let delete = current
        .iter()
        .filter(|(dst, _)| !desired.contains_key(*dst))
        .map(|(dst, via)| Route { dst: dst.clone(), via: *via })
        .collect();
    RouteDiff { replace, delete }
}

/// Runs the backend until `shutdown` turns true. Errors (API server unreachable, `ip` failing)
/// are logged and retried at the next resync: routes already in place keep working meanwhile.
pub(crate) async fn run(client: kube::Client, node_name: String, mut shutdown: watch::Receiver<bool>) {
    let api: Api<Node> = Api::all(client);
    let mut tick = tokio::time::interval(RESYNC_PERIOD);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tracing::info!(target: "kubelet::network::host_gw", node = %node_name, period_s = RESYNC_PERIOD.as_secs(), "host-gw routes on");
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = shutdown.wait_for(|s| *s) => return,
        }
        if let Err(e) = resync(&api, &node_name).await {
            tracing::warn!(target: "kubelet::network::host_gw", error = %e, "resyncing host-gw routes");
        }
    }
}

/// One pass of steps 1–4.
async fn resync(api: &Api<Node>, node_name: &str) -> Result<()> {
    // Step 1: list the Nodes.
    let nodes = api.list(&ListParams::default()).await?.items;
    // Step 2: the desired routes.
    let desired = desired_routes(&nodes, node_name);
    // Step 3: the routes we own now.
    let proto = ROUTE_PROTOCOL.to_string();
    let current = parse_routes(&ip(&["-4", "route", "show", "proto", &proto]).await?);
    // Step 4: apply the difference.
    let d = diff(&desired, &current);
    for r in &d.replace {
        let via = r.via.to_string();
        ip(&["-4", "route", "replace", &r.dst, "via", &via, "proto", &proto]).await?;
        tracing::info!(target: "kubelet::network::host_gw", dst = %r.dst, via = %r.via, "route replaced");
    }
    for r in &d.delete {
        let via = r.via.to_string();
        ip(&["-4", "route", "del", &r.dst, "via", &via, "proto", &proto]).await?;
        tracing::info!(target: "kubelet::network::host_gw", dst = %r.dst, via = %r.via, "route deleted: its node is gone");
    }
    Ok(())
}

/// Runs `ip ARGS…` (iproute2) and returns its stdout.
async fn ip(args: &[&str]) -> Result<String> {
    let what = format!("ip {}", args.join(" "));
    let out = tokio::process::Command::new("ip")
        .args(args)
        .kill_on_drop(true)
        .output()
        .await
        .map_err(|e| Error::io(what.clone(), e))?;
    if !out.status.success() {
        return Err(Error::Command { command: what, status: out.status, stderr: String::from_utf8_lossy(&out.stderr).trim().to_string() });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{NodeAddress, NodeSpec, NodeStatus};

    fn node(name: &str, cidr: Option<&str>, addrs: &[(&str, &str)]) -> Node {
        Node {
            metadata: kube::api::ObjectMeta { name: Some(name.into()), ..Default::default() },
            spec: Some(NodeSpec { pod_cidr: cidr.map(Into::into), ..Default::default() }),
            status: Some(NodeStatus {
                addresses: Some(addrs.iter().map(|(t, a)| NodeAddress { type_: (*t).into(), address: (*a).into() }).collect()),
                ..Default::default()
            }),
        }
    }

    fn ip(s: &str) -> Ipv4Addr {
        s.parse().unwrap()
    }

    #[test]
    fn desired_routes_skip_self_and_incomplete_nodes() {
        let nodes = vec![
            node("node1", Some("10.244.1.0/24"), &[("InternalIP", "172.31.250.11")]),
            node("node2", Some("10.244.2.0/24"), &[("Hostname", "node2"), ("InternalIP", "172.31.250.12")]),
            node("node3", None, &[("InternalIP", "172.31.250.13")]),
            node("node4", Some("10.244.4.0/24"), &[("Hostname", "node4")]),
            node("node5", Some("10.244.5.0/24"), &[("InternalIP", "fd00::5"), ("InternalIP", "172.31.250.15")]),
        ];
        let got = desired_routes(&nodes, "node1");
        let want: BTreeMap<String, Ipv4Addr> = [
            ("10.244.2.0/24".to_string(), ip("172.31.250.12")),
            ("10.244.5.0/24".to_string(), ip("172.31.250.15")),
        ]
        .into();
        assert_eq!(got, want);
    }

    #[test]
    fn parse_ip_route_show() {
        let out = "10.244.2.0/24 via 172.31.250.12 dev eth0 proto 77 \n\
                   10.244.3.0/24 via 172.31.250.13 dev eth1 proto 77 onlink\n\
                   \n\
                   172.31.250.0/24 dev eth0 proto kernel scope link src 172.31.250.11\n";
        let got = parse_routes(out);
        let want: BTreeMap<String, Ipv4Addr> = [
            ("10.244.2.0/24".to_string(), ip("172.31.250.12")),
            ("10.244.3.0/24".to_string(), ip("172.31.250.13")),
        ]
        .into();
        assert_eq!(got, want);
    }

    #[test]
    fn diff_table() {
        let m = |v: &[(&str, &str)]| -> BTreeMap<String, Ipv4Addr> { v.iter().map(|(d, g)| (d.to_string(), ip(g))).collect() };
        let r = |d: &str, g: &str| Route { dst: d.into(), via: ip(g) };
        struct Case {
            name: &'static str,
            desired: BTreeMap<String, Ipv4Addr>,
            current: BTreeMap<String, Ipv4Addr>,
            want: RouteDiff,
        }
        let cases = [
            Case { name: "nothing to do", desired: m(&[("10.244.2.0/24", "10.0.0.2")]), current: m(&[("10.244.2.0/24", "10.0.0.2")]), want: RouteDiff::default() },
            Case {
                name: "missing route added (e.g. dropped after a reconnect)",
                desired: m(&[("10.244.2.0/24", "10.0.0.2"), ("10.244.3.0/24", "10.0.0.3")]),
                current: m(&[("10.244.2.0/24", "10.0.0.2")]),
                want: RouteDiff { replace: vec![r("10.244.3.0/24", "10.0.0.3")], delete: vec![] },
            },
            Case {
                name: "node moved to a new address",
                desired: m(&[("10.244.2.0/24", "10.0.0.9")]),
                current: m(&[("10.244.2.0/24", "10.0.0.2")]),
                want: RouteDiff { replace: vec![r("10.244.2.0/24", "10.0.0.9")], delete: vec![] },
            },
            Case {
                name: "node gone",
                desired: m(&[]),
                current: m(&[("10.244.2.0/24", "10.0.0.2")]),
                want: RouteDiff { replace: vec![], delete: vec![r("10.244.2.0/24", "10.0.0.2")] },
            },
        ];
        for c in cases {
            assert_eq!(diff(&c.desired, &c.current), c.want, "{}", c.name);
            assert_eq!(diff(&c.desired, &c.current).is_empty(), c.want.is_empty(), "{}", c.name);
        }
    }
}
