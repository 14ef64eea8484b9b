//! Mirrors the indexes of CoreDNS's plugin/kubernetes/controller.go (dnsControl): Services by
//! namespace/name and by ClusterIP, EndpointSlices by their Service. The watches write it, every
//! query reads it; it knows nothing of DNS.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::IpAddr;

use crate::object::endpoint::EndpointSlice;
use crate::object::service::Service;

type Key = (String, String);

/// What the watches have seen. A plain struct: the server shares it behind a lock (see
/// [`SharedIndex`]), the unit tests build one by hand.
#[derive(Debug, Default)]
pub struct Index {
    services: HashMap<Key, Service>,
    /// Slices by namespace/slice name.
    slices: HashMap<Key, EndpointSlice>,
    /// namespace/service name → the names of its slices.
    slices_by_service: HashMap<Key, BTreeSet<String>>,
    /// ClusterIP → namespace/service name (the reverse zone's PTR records).
    services_by_ip: HashMap<IpAddr, Key>,
    /// Endpoint address → the slices (namespace/slice name) that hold it (PTR records too).
    slices_by_ip: HashMap<IpAddr, BTreeSet<Key>>,
    /// Services per namespace: a namespace with none is unknown to DNS.
    namespaces: BTreeMap<String, usize>,
    /// Bumped on every change: the SOA serial.
    generation: u32,
}

/// The index as the watches and the server share it. A std lock: every holder only copies in
/// or out, never awaits, so a reader never waits long.
pub type SharedIndex = std::sync::Arc<std::sync::RwLock<Index>>;

impl Index {
    pub fn service(&self, namespace: &str, name: &str) -> Option<&Service> {
        self.services.get(&(namespace.to_string(), name.to_string()))
    }

    /// The slices of a Service, in name order.
    pub fn slices_of(&self, namespace: &str, service: &str) -> impl Iterator<Item = &EndpointSlice> {
        let key = (namespace.to_string(), service.to_string());
        self.slices_by_service
            .get(&key)
            .into_iter()
            .flatten()
            .filter_map(move |s| self.slices.get(&(key.0.clone(), s.clone())))
    }

    pub fn service_by_ip(&self, ip: IpAddr) -> Option<&Service> {
        self.services_by_ip.get(&ip).and_then(|k| self.services.get(k))
    }

    /// The slices that hold an endpoint address, in namespace/name order.
    pub fn slices_by_ip(&self, ip: IpAddr) -> impl Iterator<Item = &EndpointSlice> {
        self.slices_by_ip.get(&ip).into_iter().flatten().filter_map(|k| self.slices.get(k))
    }

    /// Whether any Service lives in the namespace.
    pub fn has_namespace(&self, namespace: &str) -> bool {
        self.namespaces.contains_key(namespace)
    }

    pub fn generation(&self) -> u32 {
        self.generation
    }

    pub fn upsert_service(&mut self, svc: Service) {
        let key = (svc.namespace.clone(), svc.name.clone());
        self.delete_service(&key.0, &key.1);
        for ip in &svc.cluster_ips {
            self.services_by_ip.insert(*ip, key.clone());
        }
        *self.namespaces.entry(key.0.clone()).or_default() += 1;
        self.services.insert(key, svc);
        self.generation = self.generation.wrapping_add(1);
    }

    pub fn delete_service(&mut self, namespace: &str, name: &str) {
        let key = (namespace.to_string(), name.to_string());
        let Some(old) = self.services.remove(&key) else { return };
        for ip in &old.cluster_ips {
            if self.services_by_ip.get(ip) == Some(&key) {
                self.services_by_ip.remove(ip);
            }
        }
        if let Some(n) = self.namespaces.get_mut(namespace) {
            *n -= 1;
            if *n == 0 {
                self.namespaces.remove(namespace);
            }
        }
        self.generation = self.generation.wrapping_add(1);
    }

    /// Replaces every Service (a watch's relist: what is not in it was deleted meanwhile).
    pub fn replace_services(&mut self, services: Vec<Service>) {
        let keys: Vec<Key> = self.services.keys().cloned().collect();
        for (ns, name) in keys {
            self.delete_service(&ns, &name);
        }
        for s in services {
            self.upsert_service(s);
        }
    }

    pub fn upsert_slice(&mut self, slice: EndpointSlice) {
        self.delete_slice(&slice.namespace, &slice.name);
        self.slices_by_service
            .entry((slice.namespace.clone(), slice.service.clone()))
            .or_default()
            .insert(slice.name.clone());
        let key = (slice.namespace.clone(), slice.name.clone());
        for a in &slice.addresses {
            self.slices_by_ip.entry(a.ip).or_default().insert(key.clone());
        }
        self.slices.insert(key, slice);
        self.generation = self.generation.wrapping_add(1);
    }

    pub fn delete_slice(&mut self, namespace: &str, name: &str) {
        let slice_key = (namespace.to_string(), name.to_string());
        let Some(old) = self.slices.remove(&slice_key) else { return };
        for a in &old.addresses {
            if let Some(set) = self.slices_by_ip.get_mut(&a.ip) {
                set.remove(&slice_key);
                if set.is_empty() {
                    self.slices_by_ip.remove(&a.ip);
                }
            }
        }
        let key = (old.namespace, old.service);
        if let Some(set) = self.slices_by_service.get_mut(&key) {
            set.remove(name);
            if set.is_empty() {
                self.slices_by_service.remove(&key);
            }
        }
        self.generation = self.generation.wrapping_add(1);
    }

    /// Replaces every EndpointSlice (a watch's relist).
    pub fn replace_slices(&mut self, slices: Vec<EndpointSlice>) {
        self.slices.clear();
        self.slices_by_service.clear();
        self.slices_by_ip.clear();
        for s in slices {
            self.upsert_slice(s);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn svc(ns: &str, name: &str, ip: &str) -> Service {
        Service {
            namespace: ns.into(),
            name: name.into(),
            cluster_ips: vec![ip.parse().unwrap()],
            headless: false,
            external_name: None,
            ports: vec![],
        }
    }

    #[test]
    fn services_by_name_ip_and_namespace_follow_updates() {
        let mut i = Index::default();
        i.upsert_service(svc("a", "web", "10.96.0.1"));
        i.upsert_service(svc("a", "web", "10.96.0.2"));
        assert!(i.service_by_ip("10.96.0.1".parse().unwrap()).is_none(), "the old ClusterIP is forgotten");
        assert_eq!(i.service_by_ip("10.96.0.2".parse().unwrap()).map(|s| s.name.as_str()), Some("web"));
        assert!(i.has_namespace("a"));
        i.replace_services(vec![svc("b", "db", "10.96.0.3")]);
        assert!(i.service("a", "web").is_none() && !i.has_namespace("a"));
        assert!(i.service("b", "db").is_some());
    }

    #[test]
    fn slices_are_found_by_their_service() {
        let mut i = Index::default();
        let slice = |name: &str| EndpointSlice {
            namespace: "a".into(),
            name: name.into(),
            service: "web".into(),
            addresses: vec![crate::object::endpoint::EndpointAddress { ip: "10.244.0.5".parse().unwrap(), hostname: None }],
            ports: vec![],
        };
        i.upsert_slice(slice("web-2"));
        i.upsert_slice(slice("web-1"));
        let names: Vec<&str> = i.slices_of("a", "web").map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["web-1", "web-2"]);
        assert_eq!(i.slices_by_ip("10.244.0.5".parse().unwrap()).count(), 2);
        i.delete_slice("a", "web-1");
        assert_eq!(i.slices_of("a", "web").count(), 1);
        assert_eq!(i.slices_by_ip("10.244.0.5".parse().unwrap()).count(), 1);
        i.replace_slices(vec![]);
        assert_eq!(i.slices_of("a", "web").count(), 0);
        assert_eq!(i.slices_by_ip("10.244.0.5".parse().unwrap()).count(), 0);
    }
}
