//! Mirrors CoreDNS's plugin/kubernetes/kubernetes.go (Records: findServices, findPods) and
//! handler.go (ServeDNS): a question about a name in the cluster domain, answered from the
//! [`Index`] alone. Pure: no I/O, so the table tests drive it directly.
//!
//! The answers follow the Kubernetes DNS specification and CoreDNS where the specification is
//! silent:
//! - A name that does not exist is NXDOMAIN: an unknown Service, a headless Service with no ready
//!   endpoint, an endpoint or port the Service does not have, a namespace with no Service, a pod
//!   label that is not an IP.
//! - A name that exists but has no record of the asked type is NODATA (NOERROR, no answer), e.g.
//!   AAAA for an IPv4 Service.
//! - Both carry the zone's SOA in the authority section, so resolvers cache the negative answer
//!   for the zone's TTL.

use std::net::IpAddr;

use hickory_proto::op::ResponseCode;
use hickory_proto::rr::rdata::{A, AAAA, CNAME, NS, PTR, SOA, SRV, TXT};
use hickory_proto::rr::{Name, RData, Record, RecordType};

use crate::index::Index;
use crate::object::Port;
use crate::parse::{PortRequest, Request, parse_request};

/// The version of the Kubernetes DNS schema served at `dns-version.<domain>`.
pub const SCHEMA_VERSION: &str = "1.1.0";

/// The records of a reply, before they meet a request's header.
#[derive(Debug, Default, PartialEq)]
pub struct Answer {
    pub rcode: ResponseCode,
    pub answers: Vec<Record>,
    pub authorities: Vec<Record>,
    pub additionals: Vec<Record>,
}

/// The cluster domain this server is authoritative for, and the TTL of its records.
#[derive(Clone, Debug)]
pub struct Zone {
    domain: Name,
    ttl: u32,
}

impl Zone {
    pub fn new(domain: &str, ttl: u32) -> Result<Zone, hickory_proto::ProtoError> {
        let mut domain = Name::from_ascii(domain.trim_end_matches('.'))?.to_lowercase();
        domain.set_fqdn(true);
        Ok(Zone { domain, ttl })
    }

    pub fn domain(&self) -> &Name {
        &self.domain
    }

    /// Whether `name` is at or below the cluster domain (the kubernetes plugin's zone).
    pub fn contains(&self, name: &Name) -> bool {
        self.domain.zone_of(name)
    }

    /// ServeDNS for a name in the zone.
    pub fn lookup(&self, index: &Index, qname: &Name, qtype: RecordType) -> Answer {
        let n = qname.to_lowercase();
        let below = usize::from(n.num_labels().saturating_sub(self.domain.num_labels()));
        let labels: Vec<String> = n.iter().take(below).map(|l| String::from_utf8_lossy(l).into_owned()).collect();
        let answer = match parse_request(&labels) {
            Request::Apex => match qtype {
                RecordType::SOA => Answer::records(vec![self.soa(index)]),
                RecordType::NS => Answer::records(vec![self.record(qname, RData::NS(NS(self.name(&["ns", "dns"]))))]),
                _ => Answer::nodata(),
            },
            Request::DnsVersion => match qtype {
                RecordType::TXT => Answer::records(vec![self.record(qname, RData::TXT(TXT::new(vec![SCHEMA_VERSION.into()])))]),
                _ => Answer::nodata(),
            },
            Request::Subzone => Answer::nodata(),
            Request::Namespace(ns) if index.has_namespace(&ns) => Answer::nodata(),
            Request::Namespace(_) | Request::Invalid => Answer::nxdomain(),
            Request::Pod { name, .. } => match pod_ip(&name) {
                // `pods insecure`: the name's address is its answer; the namespace is not checked.
                Some(ip) => self.addresses(qname, qtype, [ip]),
                None => Answer::nxdomain(),
            },
            Request::Service { namespace, service, port, endpoint } => {
                self.service(index, qname, qtype, &namespace, &service, port.as_ref(), endpoint.as_deref())
            }
        };
        self.with_soa(index, answer)
    }

    /// The reverse zones (`in-addr.arpa`, `ip6.arpa`; CoreDNS's reverse.go): a ClusterIP's PTR
    /// record names its Service, an endpoint address's names the endpoint
    /// (`<hostname or a-b-c-d>.<svc>.<ns>.svc.<domain>`, one per Service it serves). `None` for
    /// any other address, which falls through to the upstream resolvers.
    pub fn reverse(&self, index: &Index, qname: &Name, qtype: RecordType) -> Option<Answer> {
        if qtype != RecordType::PTR {
            return None;
        }
        let net = qname.parse_arpa_name().ok()?;
        if net.prefix_len() != net.max_prefix_len() {
            return None;
        }
        let ip = net.addr();
        let mut targets: Vec<Name> = match index.service_by_ip(ip) {
            Some(svc) => vec![self.name(&[&svc.name, &svc.namespace, "svc"])],
            None => index
                .slices_by_ip(ip)
                .flat_map(|slice| {
                    slice
                        .addresses
                        .iter()
                        .filter(|a| a.ip == ip)
                        .map(|a| self.name(&[&a.dns_label(), &slice.service, &slice.namespace, "svc"]))
                })
                .collect(),
        };
        targets.dedup();
        if targets.is_empty() {
            return None;
        }
        Some(Answer::records(targets.into_iter().map(|t| self.record(qname, RData::PTR(PTR(t)))).collect()))
    }

    #[allow(clippy::too_many_arguments)]
    fn service(
        &self,
        index: &Index,
        qname: &Name,
        qtype: RecordType,
        namespace: &str,
        name: &str,
        port: Option<&PortRequest>,
        endpoint: Option<&str>,
    ) -> Answer {
        let Some(svc) = index.service(namespace, name) else { return Answer::nxdomain() };
        let svc_name = self.name(&[name, namespace, "svc"]);
        if let Some(target) = &svc.external_name {
            if port.is_some() || endpoint.is_some() {
                return Answer::nxdomain();
            }
            let Ok(mut target) = Name::from_ascii(target) else { return Answer::nxdomain() };
            target.set_fqdn(true);
            return match qtype {
                RecordType::A | RecordType::AAAA | RecordType::CNAME | RecordType::ANY => {
                    Answer::records(vec![self.record(qname, RData::CNAME(CNAME(target)))])
                }
                _ => Answer::nodata(),
            };
        }
        let matches = |p: &Port| port.is_none_or(|want| p.name == want.name && p.protocol == want.protocol);

        // Step 1: a headless Service, or one endpoint of any Service: the ready endpoints.
        if svc.headless || endpoint.is_some() {
            let mut targets: Vec<(String, IpAddr, Vec<u16>)> = vec![];
            for slice in index.slices_of(namespace, name) {
                let ports: Vec<u16> = slice.ports.iter().filter(|p| matches(p)).map(|p| p.port).collect();
                if port.is_some() && ports.is_empty() {
                    continue;
                }
                for a in &slice.addresses {
                    let label = a.dns_label();
                    if endpoint.is_some_and(|e| e != label) || targets.iter().any(|(_, ip, _)| *ip == a.ip) {
                        continue;
                    }
                    targets.push((label, a.ip, ports.clone()));
                }
            }
            if targets.is_empty() {
                return Answer::nxdomain();
            }
            if qtype != RecordType::SRV {
                return self.addresses(qname, qtype, targets.iter().map(|t| t.1));
            }
            let count = targets.iter().map(|t| t.2.len()).sum::<usize>();
            let mut answer = Answer::default();
            for (label, ip, ports) in &targets {
                let target = self.name(&[label, name, namespace, "svc"]);
                for p in ports {
                    answer.answers.push(self.record(qname, RData::SRV(SRV::new(0, srv_weight(count), *p, target.clone()))));
                }
                if !ports.is_empty() {
                    answer.additionals.push(self.address_record(&target, *ip));
                }
            }
            return answer;
        }

        // Step 2: a ClusterIP Service: its ClusterIPs, and SRV records that point at its name.
        let ports: Vec<&Port> = svc.ports.iter().filter(|p| matches(p)).collect();
        if port.is_some() && ports.is_empty() {
            return Answer::nxdomain();
        }
        if qtype != RecordType::SRV {
            return self.addresses(qname, qtype, svc.cluster_ips.iter().copied());
        }
        let mut answer = Answer::default();
        for p in &ports {
            answer.answers.push(self.record(qname, RData::SRV(SRV::new(0, srv_weight(ports.len()), p.port, svc_name.clone()))));
        }
        if !ports.is_empty() {
            answer.additionals.extend(svc.cluster_ips.iter().map(|ip| self.address_record(&svc_name, *ip)));
        }
        answer
    }

    /// A and AAAA records of `ips` under `qname`, as `qtype` asks; NODATA if none fits.
    fn addresses(&self, qname: &Name, qtype: RecordType, ips: impl IntoIterator<Item = IpAddr>) -> Answer {
        let records = ips
            .into_iter()
            .filter(|ip| match qtype {
                RecordType::A => ip.is_ipv4(),
                RecordType::AAAA => ip.is_ipv6(),
                RecordType::ANY => true,
                _ => false,
            })
            .map(|ip| self.address_record(qname, ip))
            .collect();
        // None that fits is NODATA: the name exists.
        Answer::records(records)
    }

    fn address_record(&self, name: &Name, ip: IpAddr) -> Record {
        let data = match ip {
            IpAddr::V4(v4) => RData::A(A(v4)),
            IpAddr::V6(v6) => RData::AAAA(AAAA(v6)),
        };
        self.record(name, data)
    }

    fn record(&self, name: &Name, data: RData) -> Record {
        Record::from_rdata(name.clone(), self.ttl, data)
    }

    /// `<labels>.<domain>`. The labels come from the API server's validated names, so they
    /// always make a valid name; one that does not (too long) becomes the domain itself.
    fn name(&self, labels: &[&str]) -> Name {
        Name::from_labels(labels.iter().map(|l| l.as_bytes()))
            .and_then(|n| n.append_domain(&self.domain))
            .unwrap_or_else(|_| self.domain.clone())
    }

    /// CoreDNS's SOA for the zone: the serial changes with the index.
    fn soa(&self, index: &Index) -> Record {
        let soa = SOA::new(self.name(&["ns", "dns"]), self.name(&["hostmaster"]), index.generation(), 7200, 1800, 86400, self.ttl);
        self.record(&self.domain, RData::SOA(soa))
    }

    fn with_soa(&self, index: &Index, mut answer: Answer) -> Answer {
        if answer.answers.is_empty() {
            answer.authorities.push(self.soa(index));
        }
        answer
    }
}

impl Answer {
    fn records(answers: Vec<Record>) -> Answer {
        Answer { answers, ..Default::default() }
    }

    fn nodata() -> Answer {
        Answer::default()
    }

    fn nxdomain() -> Answer {
        Answer { rcode: ResponseCode::NXDomain, ..Default::default() }
    }
}

/// The SRV records of a name share a weight of 100.
fn srv_weight(count: usize) -> u16 {
    u16::try_from(100 / count.max(1)).unwrap_or(1).max(1)
}

/// A pod's dashed IP back to its address (`10-244-1-5`, `fd00--5`).
fn pod_ip(label: &str) -> Option<IpAddr> {
    label.replace('-', ".").parse::<std::net::Ipv4Addr>().map(IpAddr::V4).ok().or_else(|| {
        label.replace('-', ":").parse::<std::net::Ipv6Addr>().map(IpAddr::V6).ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::object::endpoint::{EndpointAddress, EndpointSlice};
    use crate::object::service::Service;

    fn port(name: &str, protocol: &str, port: u16) -> Port {
        Port { name: name.into(), protocol: protocol.into(), port }
    }

    /// default/web (ClusterIP, dual-stack, http and dns ports), default/db (headless, two ready
    /// endpoints, one with a hostname, in two slices), default/empty (headless, no endpoints),
    /// default/ext (ExternalName).
    fn index() -> Index {
        let mut i = Index::default();
        let svc = |name: &str, ips: &[&str], headless: bool, ports: Vec<Port>| Service {
            namespace: "default".into(),
            name: name.into(),
            cluster_ips: ips.iter().map(|ip| ip.parse().unwrap()).collect(),
            headless,
            external_name: None,
            ports,
        };
        i.upsert_service(svc("web", &["10.96.0.10", "fd00::10"], false, vec![port("http", "tcp", 80), port("dns", "udp", 53)]));
        i.upsert_service(svc("db", &[], true, vec![port("pg", "tcp", 5432)]));
        i.upsert_service(svc("empty", &[], true, vec![]));
        i.upsert_service(Service { external_name: Some("example.com".into()), ..svc("ext", &[], false, vec![]) });
        let slice = |name: &str, addrs: &[(&str, Option<&str>)]| EndpointSlice {
            namespace: "default".into(),
            name: name.into(),
            service: "db".into(),
            addresses: addrs
                .iter()
                .map(|(ip, h)| EndpointAddress { ip: ip.parse().unwrap(), hostname: h.map(String::from) })
                .collect(),
            ports: vec![port("pg", "tcp", 5432)],
        };
        i.upsert_slice(slice("db-1", &[("10.244.0.5", Some("db-0"))]));
        i.upsert_slice(slice("db-2", &[("10.244.1.6", None)]));
        i
    }

    fn zone() -> Zone {
        Zone::new("cluster.local", 5).unwrap()
    }

    /// The answer as text: rcode, then each answer and additional record's data, sorted.
    fn ask(name: &str, qtype: RecordType) -> (ResponseCode, Vec<String>, Vec<String>) {
        let a = zone().lookup(&index(), &Name::from_ascii(name).unwrap(), qtype);
        let data = |rs: &[Record]| {
            let mut v: Vec<String> = rs.iter().map(|r| format!("{} {}", r.name, r.data)).collect();
            v.sort();
            v
        };
        if a.answers.is_empty() {
            assert!(
                a.authorities.iter().any(|r| r.record_type() == RecordType::SOA),
                "{name}: a negative answer carries the SOA"
            );
        }
        assert!(a.answers.iter().all(|r| r.ttl == 5), "{name}: the TTL");
        (a.rcode, data(&a.answers), data(&a.additionals))
    }

    const NX: ResponseCode = ResponseCode::NXDomain;
    const OK: ResponseCode = ResponseCode::NoError;

    #[test]
    fn cluster_ip_services() {
        let n = "web.default.svc.cluster.local.";
        assert_eq!(ask(n, RecordType::A), (OK, vec![format!("{n} 10.96.0.10")], vec![]));
        assert_eq!(ask(n, RecordType::AAAA), (OK, vec![format!("{n} fd00::10")], vec![]));
        assert_eq!(ask("WEB.Default.svc.cluster.local.", RecordType::A).1.len(), 1, "names are case-insensitive");
        assert_eq!(ask(n, RecordType::TXT), (OK, vec![], vec![]), "NODATA");
        assert_eq!(ask("nope.default.svc.cluster.local.", RecordType::A).0, NX);
        assert_eq!(ask("web.other.svc.cluster.local.", RecordType::A).0, NX);
    }

    #[test]
    fn srv_records() {
        let (rc, answers, extra) = ask("_http._tcp.web.default.svc.cluster.local.", RecordType::SRV);
        assert_eq!(rc, OK);
        assert_eq!(answers, ["_http._tcp.web.default.svc.cluster.local. 0 100 80 web.default.svc.cluster.local."]);
        assert_eq!(extra, ["web.default.svc.cluster.local. 10.96.0.10", "web.default.svc.cluster.local. fd00::10"]);
        // The Service's own name: one SRV per port.
        assert_eq!(ask("web.default.svc.cluster.local.", RecordType::SRV).1.len(), 2);
        assert_eq!(ask("_http._udp.web.default.svc.cluster.local.", RecordType::SRV).0, NX, "wrong protocol");
        assert_eq!(ask("_ftp._tcp.web.default.svc.cluster.local.", RecordType::SRV).0, NX, "no such port");
        // A headless Service: one SRV per endpoint, each aimed at the endpoint's own name.
        let (rc, answers, extra) = ask("_pg._tcp.db.default.svc.cluster.local.", RecordType::SRV);
        assert_eq!(rc, OK);
        assert_eq!(
            answers,
            [
                "_pg._tcp.db.default.svc.cluster.local. 0 50 5432 10-244-1-6.db.default.svc.cluster.local.",
                "_pg._tcp.db.default.svc.cluster.local. 0 50 5432 db-0.db.default.svc.cluster.local.",
            ]
        );
        assert_eq!(extra, ["10-244-1-6.db.default.svc.cluster.local. 10.244.1.6", "db-0.db.default.svc.cluster.local. 10.244.0.5"]);
    }

    #[test]
    fn headless_services_and_their_endpoints() {
        let (rc, answers, _) = ask("db.default.svc.cluster.local.", RecordType::A);
        assert_eq!((rc, answers.len()), (OK, 2), "{answers:?}");
        assert_eq!(ask("db.default.svc.cluster.local.", RecordType::AAAA), (OK, vec![], vec![]), "NODATA");
        assert_eq!(
            ask("db-0.db.default.svc.cluster.local.", RecordType::A).1,
            ["db-0.db.default.svc.cluster.local. 10.244.0.5"]
        );
        assert_eq!(
            ask("10-244-1-6.db.default.svc.cluster.local.", RecordType::A).1,
            ["10-244-1-6.db.default.svc.cluster.local. 10.244.1.6"],
            "an endpoint without a hostname goes by its dashed address"
        );
        assert_eq!(ask("db-9.db.default.svc.cluster.local.", RecordType::A).0, NX);
        assert_eq!(ask("empty.default.svc.cluster.local.", RecordType::A).0, NX, "no ready endpoint: as CoreDNS, NXDOMAIN");
    }

    #[test]
    fn external_names_pods_and_the_zone() {
        assert_eq!(
            ask("ext.default.svc.cluster.local.", RecordType::A),
            (OK, vec!["ext.default.svc.cluster.local. example.com.".into()], vec![])
        );
        assert_eq!(
            ask("10-244-1-6.anything.pod.cluster.local.", RecordType::A).1,
            ["10-244-1-6.anything.pod.cluster.local. 10.244.1.6"]
        );
        assert_eq!(ask("fd00--6.default.pod.cluster.local.", RecordType::AAAA).1, ["fd00--6.default.pod.cluster.local. fd00::6"]);
        assert_eq!(ask("10-244-1-6.default.pod.cluster.local.", RecordType::AAAA).0, OK, "NODATA");
        assert_eq!(ask("not-an-ip.default.pod.cluster.local.", RecordType::A).0, NX);
        assert_eq!(ask("default.svc.cluster.local.", RecordType::A), (OK, vec![], vec![]), "a namespace with Services");
        assert_eq!(ask("nowhere.svc.cluster.local.", RecordType::A).0, NX);
        assert_eq!(ask("svc.cluster.local.", RecordType::A).0, OK);
        assert_eq!(ask("cluster.local.", RecordType::SOA).1.len(), 1);
        assert_eq!(ask("dns-version.cluster.local.", RecordType::TXT).1, ["dns-version.cluster.local. 1.1.0"]);
        assert_eq!(ask("a.b.c.cluster.local.", RecordType::A).0, NX);
    }

    #[test]
    fn reverse_lookups_of_cluster_ips() {
        let z = zone();
        let i = index();
        let ptr = |n: &str| z.reverse(&i, &Name::from_ascii(n).unwrap(), RecordType::PTR);
        let a = ptr("10.0.96.10.in-addr.arpa.").expect("a ClusterIP");
        assert_eq!(a.answers[0].data.to_string(), "web.default.svc.cluster.local.");
        assert!(ptr("1.0.0.10.in-addr.arpa.").is_none(), "another address falls through");
        let ep = ptr("5.0.244.10.in-addr.arpa.").expect("an endpoint address");
        assert_eq!(ep.answers[0].data.to_string(), "db-0.db.default.svc.cluster.local.");
        let ep = ptr("6.1.244.10.in-addr.arpa.").expect("an endpoint address without a hostname");
        assert_eq!(ep.answers[0].data.to_string(), "10-244-1-6.db.default.svc.cluster.local.");
        assert!(z.contains(&Name::from_ascii("x.cluster.local.").unwrap()));
        assert!(!z.contains(&Name::from_ascii("cluster.localx.").unwrap()));
    }
}
