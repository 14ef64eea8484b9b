//! Mirrors kube-proxy's endpointschangetracker.go and endpointslicecache.go: the EndpointSlices
//! the watch reported, grouped by the Service they belong to (their
//! `kubernetes.io/service-name` label), and the [`EndpointsMap`] the proxier syncs from.

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;

use k8s_openapi::api::discovery::v1::EndpointSlice;

use crate::endpoint::Endpoint;
use crate::serviceport::{Protocol, ServicePortName};

/// The label naming a slice's Service.
pub const LABEL_SERVICE_NAME: &str = "kubernetes.io/service-name";

/// Each Service port's endpoints, sorted by address then port.
pub type EndpointsMap = BTreeMap<ServicePortName, Vec<Endpoint>>;

#[derive(Default)]
pub struct EndpointsChangeTracker {
    /// (namespace, service name) → slice name → slice.
    slices: BTreeMap<(String, String), BTreeMap<String, EndpointSlice>>,
    /// The Services whose endpoints changed since the last [`EndpointsChangeTracker::take_changed`].
    changed: BTreeSet<(String, String)>,
}

/// Where a slice goes: its Service, then its own name. None for a slice without the label
/// (kube-proxy ignores those too) or of another address type than IPv4.
fn key(slice: &EndpointSlice) -> Option<((String, String), String)> {
    if slice.address_type != "IPv4" {
        return None;
    }
    let service = slice.metadata.labels.as_ref()?.get(LABEL_SERVICE_NAME)?.clone();
    Some(((slice.metadata.namespace.clone().unwrap_or_default(), service), slice.metadata.name.clone().unwrap_or_default()))
}

impl EndpointsChangeTracker {
    pub fn update(&mut self, slice: EndpointSlice) {
        let Some((svc, name)) = key(&slice) else { return };
        let slices = self.slices.entry(svc.clone()).or_default();
        let same = slices.get(&name).is_some_and(|old| old.endpoints == slice.endpoints && old.ports == slice.ports);
        if !same {
            self.changed.insert(svc);
        }
        slices.insert(name, slice);
    }

    pub fn delete(&mut self, slice: &EndpointSlice) {
        let Some((svc, name)) = key(slice) else { return };
        if let Some(slices) = self.slices.get_mut(&svc) {
            if slices.remove(&name).is_some() {
                self.changed.insert(svc.clone());
            }
            if slices.is_empty() {
                self.slices.remove(&svc);
            }
        }
    }

    /// Everything a relist returned: what it no longer holds is gone.
    pub fn replace_all(&mut self, slices: Vec<EndpointSlice>) {
        let mut fresh = EndpointsChangeTracker::default();
        for s in slices {
            fresh.update(s);
        }
        let same = |a: Option<&BTreeMap<String, EndpointSlice>>, b: Option<&BTreeMap<String, EndpointSlice>>| match (a, b) {
            (Some(a), Some(b)) => {
                a.len() == b.len() && a.iter().zip(b).all(|((na, sa), (nb, sb))| na == nb && sa.endpoints == sb.endpoints && sa.ports == sb.ports)
            }
            (None, None) => true,
            _ => false,
        };
        for k in self.slices.keys().chain(fresh.slices.keys()) {
            if !same(self.slices.get(k), fresh.slices.get(k)) {
                self.changed.insert(k.clone());
            }
        }
        self.slices = fresh.slices;
    }

    /// The Services whose endpoints changed since the last call.
    pub fn take_changed(&mut self) -> BTreeSet<(String, String)> {
        std::mem::take(&mut self.changed)
    }

    /// Every Service port's endpoints (`EndpointSliceCache.getEndpointsMap`); an endpoint is
    /// local when its `nodeName` is `hostname`. An address two slices both list counts once.
    pub fn endpoints_map(&self, hostname: &str) -> EndpointsMap {
        let mut map = EndpointsMap::new();
        for ((namespace, service), slices) in &self.slices {
            for slice in slices.values() {
                for port in slice.ports.iter().flatten() {
                    let Some(protocol) = Protocol::parse(port.protocol.as_deref()) else { continue };
                    let Some(number) = port.port.and_then(|p| u16::try_from(p).ok()) else { continue };
                    let name = ServicePortName {
                        namespace: namespace.clone(),
                        name: service.clone(),
                        port: port.name.clone().unwrap_or_default(),
                        protocol,
                    };
                    let eps = map.entry(name).or_default();
                    for ep in slice.endpoints.iter().flatten() {
                        // One address per endpoint: the API allows no more (kube-proxy takes the first).
                        let Some(ip) = ep.addresses.first().and_then(|a| a.parse::<Ipv4Addr>().ok()) else { continue };
                        let c = ep.conditions.clone().unwrap_or_default();
                        let ready = c.ready.unwrap_or(true);
                        eps.push(Endpoint {
                            ip,
                            port: number,
                            is_local: ep.node_name.as_deref() == Some(hostname),
                            ready,
                            serving: c.serving.unwrap_or(ready),
                            terminating: c.terminating.unwrap_or(false),
                        });
                    }
                }
            }
        }
        for eps in map.values_mut() {
            // Ready before not-ready for one address, so that the copy kept is the better one.
            eps.sort_by_key(|e| (e.ip, e.port, !e.ready));
            eps.dedup_by(|b, a| a.ip == b.ip && a.port == b.port);
        }
        map.retain(|_, eps| !eps.is_empty());
        map
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use k8s_openapi::api::discovery::v1::{Endpoint as SliceEndpoint, EndpointConditions, EndpointPort};

    pub(crate) fn slice(name: &str, svc: &str, eps: &[(&str, &str, bool)]) -> EndpointSlice {
        let mut s = EndpointSlice::default();
        s.metadata.namespace = Some("default".into());
        s.metadata.name = Some(name.into());
        s.metadata.labels = Some([(LABEL_SERVICE_NAME.to_string(), svc.to_string())].into());
        s.address_type = "IPv4".into();
        s.ports = Some(vec![EndpointPort { name: Some("http".into()), port: Some(8080), protocol: Some("TCP".into()), ..Default::default() }]);
        s.endpoints = Some(eps
            .iter()
            .map(|(ip, node, ready)| SliceEndpoint {
                addresses: vec![ip.to_string()],
                node_name: Some(node.to_string()),
                conditions: Some(EndpointConditions { ready: Some(*ready), ..Default::default() }),
                ..Default::default()
            })
            .collect());
        s
    }

    #[test]
    fn slices_merge_per_service_port_and_duplicates_count_once() {
        let mut t = EndpointsChangeTracker::default();
        t.update(slice("web-a", "web", &[("10.244.1.3", "n1", true), ("10.244.2.2", "n2", true)]));
        t.update(slice("web-b", "web", &[("10.244.1.3", "n1", false)]));
        assert_eq!(t.take_changed(), [("default".to_string(), "web".to_string())].into());
        let m = t.endpoints_map("n1");
        let eps: Vec<String> = m.values().next().unwrap().iter().map(|e| format!("{e} local={} ready={}", e.is_local, e.ready)).collect();
        assert_eq!(eps, ["10.244.1.3:8080 local=true ready=true", "10.244.2.2:8080 local=false ready=true"]);
        assert_eq!(m.keys().next().unwrap().to_string(), "default/web:http");
    }

    #[test]
    fn slices_without_the_label_or_of_ipv6_are_ignored_and_deletes_are_changes() {
        let mut t = EndpointsChangeTracker::default();
        let mut unlabelled = slice("x", "web", &[("10.244.1.3", "n1", true)]);
        unlabelled.metadata.labels = None;
        t.update(unlabelled);
        let mut v6 = slice("y", "web", &[("fd00::3", "n1", true)]);
        v6.address_type = "IPv6".into();
        t.update(v6);
        assert!(t.take_changed().is_empty());
        let s = slice("web-a", "web", &[("10.244.1.3", "n1", true)]);
        t.update(s.clone());
        t.update(s.clone());
        assert_eq!(t.take_changed().len(), 1);
        t.replace_all(vec![s.clone(), slice("db-a", "db", &[("10.244.1.4", "n1", true)])]);
        assert_eq!(t.take_changed(), [("default".to_string(), "db".to_string())].into(), "a relist: only what differs");
        t.delete(&s);
        assert_eq!(t.take_changed().len(), 1);
        assert!(t.endpoints_map("n1").keys().all(|k| k.name == "db"));
    }
}
