//! Mirrors CoreDNS's plugin/kubernetes/parse.go (parseRequest): what a name below the cluster
//! domain asks for, from its labels alone.
//!
//! ```text
//! <domain>                                        the zone's apex
//! dns-version.<domain>                            the schema version (TXT)
//! svc.<domain>, pod.<domain>                      the two subzones
//! <ns>.svc.<domain>                               a namespace
//! <svc>.<ns>.svc.<domain>                         a Service
//! <hostname>.<svc>.<ns>.svc.<domain>              one endpoint of a Service
//! _<port>._<proto>.<svc>.<ns>.svc.<domain>        a named port of a Service (SRV)
//! <a-b-c-d>.<ns>.pod.<domain>                     a pod, by its dashed IP
//! ```

/// recordRequest: the parts of a name, lowercased.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    Apex,
    DnsVersion,
    /// `svc.<domain>` or `pod.<domain>`.
    Subzone,
    /// `<ns>.svc.<domain>` or `<ns>.pod.<domain>`.
    Namespace(String),
    Service { namespace: String, service: String, port: Option<PortRequest>, endpoint: Option<String> },
    Pod { namespace: String, name: String },
    /// Nothing of this shape exists: NXDOMAIN.
    Invalid,
}

/// `_<port>._<proto>`: a port name and a protocol, both without their underscore.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortRequest {
    pub name: String,
    pub protocol: String,
}

/// parseRequest over the labels left of the cluster domain, leftmost first, lowercased.
pub fn parse_request(labels: &[String]) -> Request {
    let mut r = labels.iter().rev().map(String::as_str);
    let (kind, rest) = match (r.next(), labels.len()) {
        (None, _) => return Request::Apex,
        (Some("dns-version"), 1) => return Request::DnsVersion,
        (Some(k @ ("svc" | "pod")), _) => (k, r.collect::<Vec<&str>>()),
        _ => return Request::Invalid,
    };
    let owned = |s: &str| s.to_string();
    match (kind, rest.as_slice()) {
        (_, []) => Request::Subzone,
        (_, [ns]) => Request::Namespace(owned(ns)),
        ("pod", [ns, name]) => Request::Pod { namespace: owned(ns), name: owned(name) },
        ("svc", [ns, svc]) => Request::Service { namespace: owned(ns), service: owned(svc), port: None, endpoint: None },
        ("svc", [ns, svc, endpoint]) if !endpoint.starts_with('_') => {
            Request::Service { namespace: owned(ns), service: owned(svc), port: None, endpoint: Some(owned(endpoint)) }
        }
        ("svc", [ns, svc, proto, port]) => match (port.strip_prefix('_'), proto.strip_prefix('_')) {
            (Some(port), Some(proto)) if !port.is_empty() && !proto.is_empty() => Request::Service {
                namespace: owned(ns),
                service: owned(svc),
                port: Some(PortRequest { name: owned(port), protocol: owned(proto) }),
                endpoint: None,
            },
            _ => Request::Invalid,
        },
        _ => Request::Invalid,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(name: &str) -> Request {
        let labels: Vec<String> = if name.is_empty() { vec![] } else { name.split('.').map(String::from).collect() };
        parse_request(&labels)
    }

    #[test]
    fn names_and_what_they_ask_for() {
        let svc = |port: Option<(&str, &str)>, endpoint: Option<&str>| Request::Service {
            namespace: "ns".into(),
            service: "web".into(),
            port: port.map(|(n, p)| PortRequest { name: n.into(), protocol: p.into() }),
            endpoint: endpoint.map(String::from),
        };
        let table = [
            ("", Request::Apex),
            ("dns-version", Request::DnsVersion),
            ("svc", Request::Subzone),
            ("pod", Request::Subzone),
            ("ns.svc", Request::Namespace("ns".into())),
            ("web.ns.svc", svc(None, None)),
            ("web-0.web.ns.svc", svc(None, Some("web-0"))),
            ("_http._tcp.web.ns.svc", svc(Some(("http", "tcp")), None)),
            ("_http.web.ns.svc", Request::Invalid),
            ("x._tcp.web.ns.svc", Request::Invalid),
            ("a.b._http._tcp.web.ns.svc", Request::Invalid),
            ("10-0-0-1.ns.pod", Request::Pod { namespace: "ns".into(), name: "10-0-0-1".into() }),
            ("x.10-0-0-1.ns.pod", Request::Invalid),
            ("web.ns.other", Request::Invalid),
            ("dns-version.x", Request::Invalid),
        ];
        for (name, want) in table {
            assert_eq!(parse(name), want, "{name:?}");
        }
    }
}
