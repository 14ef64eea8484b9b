//! Mirrors kube-proxy's servicechangetracker.go: the Services the watch reported, and the
//! [`ServicePortMap`] the proxier syncs from.
//!
//! kube-proxy keeps, per changed Service, the map before and after; kubelab keeps the current
//! objects and the names of the Services whose ports changed since the last sync, which is what
//! a partial sync needs (the chains of those Services are rewritten, the others left alone).

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;

use k8s_openapi::api::core::v1::Service;

use crate::serviceport::{Protocol, ServicePortInfo, ServicePortName};

/// Every Service port the proxier writes rules for, sorted (so the rules come out in one order).
pub type ServicePortMap = BTreeMap<ServicePortName, ServicePortInfo>;

/// `sessionAffinityConfig.clientIP.timeoutSeconds` when unset.
pub const DEFAULT_AFFINITY_TIMEOUT_SECONDS: u32 = 10800;

#[derive(Default)]
pub struct ServiceChangeTracker {
    /// By (namespace, name).
    services: BTreeMap<(String, String), Service>,
    /// The Services whose ports changed since the last [`ServiceChangeTracker::take_changed`].
    changed: BTreeSet<(String, String)>,
}

fn key(svc: &Service) -> (String, String) {
    (svc.metadata.namespace.clone().unwrap_or_default(), svc.metadata.name.clone().unwrap_or_default())
}

impl ServiceChangeTracker {
    /// A Service added or updated; an update that changes nothing the rules read is no change.
    pub fn update(&mut self, svc: Service) {
        let k = key(&svc);
        let before = self.services.get(&k).map(service_to_service_map);
        let after = service_to_service_map(&svc);
        if before.as_ref() != Some(&after) {
            self.changed.insert(k.clone());
        }
        self.services.insert(k, svc);
    }

    pub fn delete(&mut self, svc: &Service) {
        let k = key(svc);
        if self.services.remove(&k).is_some() {
            self.changed.insert(k);
        }
    }

    /// Everything a relist returned: what it no longer holds is gone.
    pub fn replace_all(&mut self, services: Vec<Service>) {
        let fresh: BTreeMap<_, _> = services.into_iter().map(|s| (key(&s), s)).collect();
        for (k, s) in &self.services {
            if fresh.get(k).map(service_to_service_map) != Some(service_to_service_map(s)) {
                self.changed.insert(k.clone());
            }
        }
        for (k, s) in &fresh {
            if !self.services.contains_key(k) && !service_to_service_map(s).is_empty() {
                self.changed.insert(k.clone());
            }
        }
        self.services = fresh;
    }

    /// A Service's UID, while it exists.
    pub fn uid(&self, key: &(String, String)) -> Option<String> {
        self.services.get(key)?.metadata.uid.clone()
    }

    /// The Services that changed since the last call (the proxier's pending changes).
    pub fn take_changed(&mut self) -> BTreeSet<(String, String)> {
        std::mem::take(&mut self.changed)
    }

    pub fn service_port_map(&self) -> ServicePortMap {
        self.services.values().flat_map(service_to_service_map).map(|p| (p.name.clone(), p)).collect()
    }
}

/// The Service's ports the proxier serves (`serviceToServiceMap`): none for ExternalName and
/// headless Services, nor for a cluster IP that is not IPv4 (kubelab's proxy is IPv4 only).
pub fn service_to_service_map(svc: &Service) -> Vec<ServicePortInfo> {
    let Some(spec) = &svc.spec else { return Vec::new() };
    if spec.type_.as_deref() == Some("ExternalName") {
        return Vec::new();
    }
    let Some(cluster_ip) = spec.cluster_ip.as_deref().and_then(|ip| ip.parse::<Ipv4Addr>().ok()) else {
        return Vec::new(); // headless ("None"), unallocated, or IPv6
    };
    let affinity_timeout = (spec.session_affinity.as_deref() == Some("ClientIP")).then(|| {
        spec.session_affinity_config
            .as_ref()
            .and_then(|c| c.client_ip.as_ref())
            .and_then(|c| c.timeout_seconds)
            .and_then(|t| u32::try_from(t).ok())
            .unwrap_or(DEFAULT_AFFINITY_TIMEOUT_SECONDS)
    });
    let external_ips: Vec<Ipv4Addr> = spec.external_ips.iter().flatten().filter_map(|ip| ip.parse().ok()).collect();
    let externally_reachable_type = matches!(spec.type_.as_deref(), Some("NodePort") | Some("LoadBalancer"));
    let mut out = Vec::new();
    for port in spec.ports.iter().flatten() {
        let Some(protocol) = Protocol::parse(port.protocol.as_deref()) else { continue };
        let Ok(number) = u16::try_from(port.port) else { continue };
        let node_port = if externally_reachable_type { port.node_port.and_then(|p| u16::try_from(p).ok()).filter(|p| *p != 0) } else { None };
        let mut info = ServicePortInfo {
            name: ServicePortName {
                namespace: svc.metadata.namespace.clone().unwrap_or_default(),
                name: svc.metadata.name.clone().unwrap_or_default(),
                port: port.name.clone().unwrap_or_default(),
                protocol,
            },
            cluster_ip,
            port: number,
            node_port,
            external_ips: external_ips.clone(),
            affinity_timeout,
            external_policy_local: false,
            internal_policy_local: spec.internal_traffic_policy.as_deref() == Some("Local"),
        };
        // externalTrafficPolicy means something only for a Service reachable from outside.
        info.external_policy_local = info.externally_accessible() && spec.external_traffic_policy.as_deref() == Some("Local");
        out.push(info);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{ServicePort, ServiceSpec};

    fn svc(type_: &str, cluster_ip: &str) -> Service {
        let mut s = Service::default();
        s.metadata.namespace = Some("default".into());
        s.metadata.name = Some("web".into());
        s.spec = Some(ServiceSpec {
            type_: Some(type_.into()),
            cluster_ip: Some(cluster_ip.into()),
            ports: Some(vec![ServicePort { name: Some("http".into()), port: 80, node_port: Some(30080), ..Default::default() }]),
            ..Default::default()
        });
        s
    }

    #[test]
    fn headless_external_name_and_ipv6_have_no_ports() {
        assert!(service_to_service_map(&svc("ClusterIP", "None")).is_empty());
        assert!(service_to_service_map(&svc("ExternalName", "")).is_empty());
        assert!(service_to_service_map(&svc("ClusterIP", "fd00::1")).is_empty());
        assert_eq!(service_to_service_map(&svc("ClusterIP", "10.96.0.5")).len(), 1);
    }

    #[test]
    fn node_port_only_for_node_port_and_load_balancer() {
        assert_eq!(service_to_service_map(&svc("ClusterIP", "10.96.0.5"))[0].node_port, None);
        assert_eq!(service_to_service_map(&svc("NodePort", "10.96.0.5"))[0].node_port, Some(30080));
        assert_eq!(service_to_service_map(&svc("LoadBalancer", "10.96.0.5"))[0].node_port, Some(30080));
    }

    #[test]
    fn an_update_that_changes_no_rule_is_no_change() {
        let mut t = ServiceChangeTracker::default();
        t.update(svc("ClusterIP", "10.96.0.5"));
        assert_eq!(t.take_changed(), [("default".to_string(), "web".to_string())].into());
        let mut same = svc("ClusterIP", "10.96.0.5");
        same.metadata.labels = Some([("a".to_string(), "b".to_string())].into());
        t.update(same);
        assert!(t.take_changed().is_empty());
        t.update(svc("NodePort", "10.96.0.5"));
        assert_eq!(t.take_changed().len(), 1);
        t.replace_all(vec![svc("NodePort", "10.96.0.5")]);
        assert!(t.take_changed().is_empty(), "a relist of the same objects changes nothing");
        t.replace_all(vec![]);
        assert_eq!(t.take_changed().len(), 1);
        assert!(t.service_port_map().is_empty());
    }
}
