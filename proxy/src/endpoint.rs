//! Mirrors kube-proxy's endpoint.go (`BaseEndpointInfo`): one address:port behind a Service port,
//! with the conditions its EndpointSlice gave it.

use std::fmt;
use std::net::Ipv4Addr;

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Endpoint {
    pub ip: Ipv4Addr,
    pub port: u16,
    /// On this node (its `nodeName` is the proxy's `--hostname-override`).
    pub is_local: bool,
    /// `conditions.ready` (unset counts as ready, as the API says).
    pub ready: bool,
    /// `conditions.serving` (unset: as ready).
    pub serving: bool,
    /// `conditions.terminating` (unset: false).
    pub terminating: bool,
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.ip, self.port)
    }
}
