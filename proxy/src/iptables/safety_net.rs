//! kubelab's own (no Kubernetes file): the service-range safety net.
//!
//! A packet to an address in `--service-cluster-ip-range` that no Service rule translated (an
//! address no Service holds, a port a Service does not have, or any Service address before the
//! first sync) must not be routed on as if it were a real address: it would leave through the
//! default route, towards whatever network that is. So the filter table's OUTPUT (the node's own
//! traffic) and FORWARD (pods' and other hosts') send everything to the range to
//! `KUBELAB-SERVICE-RANGE`, which REJECTs it with an ICMP port unreachable — "connection refused".
//!
//! It is safe for translated traffic because netfilter runs the nat table's DNAT (PREROUTING,
//! OUTPUT) before the filter table: a packet that matched a Service rule has an endpoint's
//! address as destination by the time the filter table sees it.
//!
//! The chain is not one the sync rewrites: it is installed before the first sync (the proxy may
//! not reach the API server for a while) and stays when the proxy stops (a stopped proxy leaves
//! its last rules in place too, as kube-proxy does). Only `--cleanup` removes it.

use crate::error::Result;
use crate::util::cidr::Ipv4Cidr;
use crate::util::iptables::{Iptables, Table};

pub const KUBELAB_SERVICE_RANGE: &str = "KUBELAB-SERVICE-RANGE";
const JUMP_COMMENT: &str = "kubelab service range safety net";

/// The built-in filter chains that jump to the safety net.
pub const JUMP_FROM: [&str; 2] = ["OUTPUT", "FORWARD"];

pub fn jump_rule() -> [&'static str; 6] {
    ["-m", "comment", "--comment", JUMP_COMMENT, "-j", KUBELAB_SERVICE_RANGE]
}

/// The chain's text for iptables-restore.
pub fn rules(range: Ipv4Cidr) -> String {
    format!(
        "*filter\n:{KUBELAB_SERVICE_RANGE} - [0:0]\n-A {KUBELAB_SERVICE_RANGE} -d {range} -m comment --comment \"no Service translated this: refuse, never route\" -j REJECT --reject-with icmp-port-unreachable\nCOMMIT\n"
    )
}

/// Installs (or rewrites) the chain and makes sure OUTPUT and FORWARD jump to it first.
pub fn ensure(ipt: &Iptables, range: Ipv4Cidr) -> Result<()> {
    ipt.restore(&rules(range))?;
    for chain in JUMP_FROM {
        ipt.ensure_rule(Table::Filter, chain, &jump_rule(), true)?;
    }
    Ok(())
}
