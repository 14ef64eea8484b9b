//! Mirrors kube-proxy's pkg/proxy/util/nodeport_addresses.go: the addresses node ports answer on.
//!
//! With `--nodeport-addresses` (CIDRs), the node's interface addresses inside them; without it,
//! the node's own addresses — its Node's InternalIP and ExternalIP (kube-proxy's `primary`
//! default since 1.31) — or, when the Node cannot be read or has none but loopback, every
//! non-loopback interface address. Loopback never answers node ports here.

use std::net::Ipv4Addr;

use k8s_openapi::api::core::v1::Node;

use crate::util::cidr::Ipv4Cidr;

/// The IPv4 addresses of this network namespace's interfaces, loopback excluded.
pub fn local_addresses() -> std::io::Result<Vec<Ipv4Addr>> {
    let mut out = Vec::new();
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `head` with a list we only read and then free once.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let mut cur = head;
    while !cur.is_null() {
        // SAFETY: `cur` is a node of the list getifaddrs returned, not yet freed.
        let ifa = unsafe { &*cur };
        if !ifa.ifa_addr.is_null() && i32::from(unsafe { (*ifa.ifa_addr).sa_family }) == libc::AF_INET {
            // SAFETY: an AF_INET address is a sockaddr_in.
            let sin = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in) };
            let ip = Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr));
            if !ip.is_loopback() && !out.contains(&ip) {
                out.push(ip);
            }
        }
        cur = ifa.ifa_next;
    }
    // SAFETY: the list came from getifaddrs and is freed once.
    unsafe { libc::freeifaddrs(head) };
    out.sort();
    Ok(out)
}

/// The addresses in `local` that one of `cidrs` holds.
pub fn matching(cidrs: &[Ipv4Cidr], local: &[Ipv4Addr]) -> Vec<Ipv4Addr> {
    local.iter().copied().filter(|ip| cidrs.iter().any(|c| c.contains(*ip))).collect()
}

/// A Node's IPv4 InternalIP and ExternalIP addresses, loopback excluded (node ports never
/// answer there: DNAT from 127.0.0.1 needs `route_localnet`, which the proxy leaves alone).
pub fn node_ips(node: &Node) -> Vec<Ipv4Addr> {
    let mut out: Vec<Ipv4Addr> = node
        .status
        .iter()
        .flat_map(|s| s.addresses.iter().flatten())
        .filter(|a| a.type_ == "InternalIP" || a.type_ == "ExternalIP")
        .filter_map(|a| a.address.parse::<Ipv4Addr>().ok())
        .filter(|ip| !ip.is_loopback())
        .collect();
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{NodeAddress, NodeStatus};

    #[test]
    fn cidrs_pick_local_addresses_and_nodes_give_their_ips() {
        let local: Vec<Ipv4Addr> = vec!["10.0.0.5".parse().unwrap(), "192.168.1.2".parse().unwrap()];
        assert_eq!(matching(&[Ipv4Cidr::parse("10.0.0.0/8").unwrap()], &local), vec![local[0]]);
        let n = Node {
            status: Some(NodeStatus {
                addresses: Some(vec![
                    NodeAddress { type_: "Hostname".into(), address: "n1".into() },
                    NodeAddress { type_: "InternalIP".into(), address: "172.18.0.3".into() },
                    NodeAddress { type_: "InternalIP".into(), address: "fd00::3".into() },
                    NodeAddress { type_: "ExternalIP".into(), address: "127.0.0.1".into() },
                ]),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(node_ips(&n), vec!["172.18.0.3".parse::<Ipv4Addr>().unwrap()]);
        assert!(local_addresses().is_ok());
    }
}
