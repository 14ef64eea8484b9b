//! Mirrors kube-proxy's serviceport.go and types.go (`ServicePortName`): one port of one Service,
//! as the proxier needs it, taken out of the API object once.

use std::fmt;
use std::net::Ipv4Addr;

/// `namespace/name:port-name` (`namespace/name` for an unnamed port): the key of every map the
/// proxier reads, and the text its chain names are hashed from.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ServicePortName {
    pub namespace: String,
    pub name: String,
    /// The port's name (empty for a Service's only, unnamed port).
    pub port: String,
    pub protocol: Protocol,
}

impl fmt::Display for ServicePortName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)?;
        if !self.port.is_empty() {
            write!(f, ":{}", self.port)?;
        }
        Ok(())
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Protocol {
    Tcp,
    Udp,
    Sctp,
}

impl Protocol {
    /// From the API's `TCP`/`UDP`/`SCTP` (TCP when unset, the API's default).
    pub fn parse(s: Option<&str>) -> Option<Protocol> {
        match s.unwrap_or("TCP") {
            "TCP" => Some(Protocol::Tcp),
            "UDP" => Some(Protocol::Udp),
            "SCTP" => Some(Protocol::Sctp),
            _ => None,
        }
    }

    /// As iptables spells it (`-p tcp -m tcp`).
    pub fn lower(self) -> &'static str {
        match self {
            Protocol::Tcp => "tcp",
            Protocol::Udp => "udp",
            Protocol::Sctp => "sctp",
        }
    }

    /// As the API spells it; part of the hashed chain names, as in kube-proxy.
    pub fn upper(self) -> &'static str {
        match self {
            Protocol::Tcp => "TCP",
            Protocol::Udp => "UDP",
            Protocol::Sctp => "SCTP",
        }
    }
}

/// kube-proxy's `BaseServicePortInfo`: what the rules of one Service port are written from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServicePortInfo {
    pub name: ServicePortName,
    pub cluster_ip: Ipv4Addr,
    pub port: u16,
    /// The node port, for NodePort and LoadBalancer Services that have one.
    pub node_port: Option<u16>,
    /// `spec.externalIPs` (IPv4 ones).
    pub external_ips: Vec<Ipv4Addr>,
    /// `sessionAffinity: ClientIP`: its `timeoutSeconds` (default 10800).
    pub affinity_timeout: Option<u32>,
    /// `externalTrafficPolicy: Local` (only for Services reachable from outside).
    pub external_policy_local: bool,
    /// `internalTrafficPolicy: Local`.
    pub internal_policy_local: bool,
}

impl ServicePortInfo {
    /// Whether traffic can reach this port other than through its cluster IP.
    pub fn externally_accessible(&self) -> bool {
        self.node_port.is_some() || !self.external_ips.is_empty()
    }
}
