//! Mirrors CoreDNS's plugin/kubernetes/object: the few fields of each API object that DNS
//! needs, copied out of the watch events so the index holds no full objects.

pub mod endpoint;
pub mod service;

/// One port of a Service or an EndpointSlice: SRV records name it `_<name>._<protocol>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Port {
    /// The port's name, lowercased; empty for an unnamed port (which gets no SRV record).
    pub name: String,
    /// `tcp`, `udp` or `sctp` (lowercased, as the SRV label carries it).
    pub protocol: String,
    pub port: u16,
}

impl Port {
    pub(crate) fn new(name: Option<&str>, protocol: Option<&str>, port: i32) -> Option<Port> {
        Some(Port {
            name: name.unwrap_or_default().to_ascii_lowercase(),
            protocol: protocol.unwrap_or("TCP").to_ascii_lowercase(),
            port: u16::try_from(port).ok()?,
        })
    }
}
