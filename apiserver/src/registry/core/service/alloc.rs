//! Mirrors pkg/registry/core/service/storage/alloc.go: what a Service takes from the two pools —
//! its cluster IP ([`IpAllocator`]) and its node ports ([`PortAllocator`]) — on create and
//! update, and gives back when a write fails or the Service goes.
//!
//! The flow of a create (`allocate_create`), once the Service is valid:
//! 1. A Service that needs a cluster IP (not `ExternalName`, not headless) takes the one it
//!    names or a free one; `clusterIPs`, `ipFamilies` and `ipFamilyPolicy` follow from it.
//! 2. A NodePort or LoadBalancer Service takes, for each port, the node port it names or a free
//!    one (a TCP and a UDP port of the same number share one); a LoadBalancer Service with
//!    `externalTrafficPolicy: Local` takes a `healthCheckNodePort` too.
//! 3. Whatever fails gives back what the steps before it took, and answers 422 naming the field.
//!
//! An update (`allocate_update`) takes what the new Service holds that the old did not and
//! frees, once the write has succeeded, what the old held that the new does not.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use super::ipallocator::{Holder, IpAllocator};
use super::portallocator::{Change, PortAllocator};
use crate::error::{Cause, Error, Result};
use crate::storage::store::Storage;

/// Both pools.
#[derive(Clone)]
pub struct Allocators {
    pub ips: IpAllocator,
    pub ports: PortAllocator,
}

/// What one write took and what it frees: given back on failure, and on success respectively.
#[derive(Default, Debug)]
pub struct Transaction {
    pub taken_ips: Vec<String>,
    pub taken_ports: Vec<u16>,
    pub freed_ips: Vec<String>,
    pub freed_ports: Vec<u16>,
}

fn type_of(svc: &Value) -> &str {
    svc.pointer("/spec/type").and_then(Value::as_str).unwrap_or("ClusterIP")
}

/// needsClusterIP: every Service but ExternalName and headless ones.
pub fn needs_cluster_ip(svc: &Value) -> bool {
    type_of(svc) != "ExternalName" && svc.pointer("/spec/clusterIP").and_then(Value::as_str) != Some("None")
}

/// needsNodePort: NodePort Services, and LoadBalancer ones unless they opt out.
pub fn needs_node_ports(svc: &Value) -> bool {
    match type_of(svc) {
        "NodePort" => true,
        "LoadBalancer" => svc.pointer("/spec/allocateLoadBalancerNodePorts").and_then(Value::as_bool) != Some(false),
        _ => false,
    }
}

/// needsHCNodePort: LoadBalancer Services that keep traffic on the node it arrives at.
pub fn needs_health_check_node_port(svc: &Value) -> bool {
    type_of(svc) == "LoadBalancer" && svc.pointer("/spec/externalTrafficPolicy").and_then(Value::as_str) == Some("Local")
}

/// The cluster IPs a Service holds (none for headless and ExternalName ones).
pub fn cluster_ips(svc: &Value) -> Vec<String> {
    if !needs_cluster_ip(svc) {
        return Vec::new();
    }
    svc.pointer("/spec/clusterIP").and_then(Value::as_str).filter(|s| !s.is_empty()).map(str::to_string).into_iter().collect()
}

/// The node ports a Service holds, health check port included.
pub fn node_ports(svc: &Value) -> BTreeSet<u16> {
    let mut out = BTreeSet::new();
    for p in svc.pointer("/spec/ports").and_then(Value::as_array).into_iter().flatten() {
        if let Some(n) = p.get("nodePort").and_then(Value::as_u64).filter(|n| *n > 0 && *n <= 65535) {
            out.insert(n as u16);
        }
    }
    if let Some(n) = svc.pointer("/spec/healthCheckNodePort").and_then(Value::as_u64).filter(|n| *n > 0 && *n <= 65535) {
        out.insert(n as u16);
    }
    out
}

fn invalid(svc: &Value, field: &str, value: &str, message: String) -> Error {
    let name = svc.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("").to_string();
    let cause = Cause { field: field.into(), reason: "FieldValueInvalid".into(), message: format!("Invalid value: {value}: {message}") };
    Error::Invalid { kind: "Service".into(), kind_singular: "Service".into(), name, causes: vec![cause] }
}

impl Allocators {
    /// Steps 1–3 for a new Service.
    pub async fn allocate_create(&self, storage: &Storage, svc: &mut Value, dry_run: bool) -> Result<Transaction> {
        let mut tx = Transaction::default();
        match self.take(storage, svc, None, dry_run, &mut tx).await {
            Ok(()) => Ok(tx),
            Err(e) => {
                self.give_back(storage, &tx.taken_ips, &tx.taken_ports, svc).await;
                Err(e)
            }
        }
    }

    /// What an update takes beyond the old Service, and what it frees.
    pub async fn allocate_update(&self, storage: &Storage, new: &mut Value, old: &Value, dry_run: bool) -> Result<Transaction> {
        let mut tx = Transaction::default();
        if let Err(e) = self.take(storage, new, Some(old), dry_run, &mut tx).await {
            self.give_back(storage, &tx.taken_ips, &tx.taken_ports, new).await;
            return Err(e);
        }
        let new_ips = cluster_ips(new);
        tx.freed_ips = cluster_ips(old).into_iter().filter(|ip| !new_ips.contains(ip)).collect();
        let new_ports = node_ports(new);
        tx.freed_ports = node_ports(old).into_iter().filter(|p| !new_ports.contains(p)).collect();
        Ok(tx)
    }

    async fn take(&self, storage: &Storage, svc: &mut Value, old: Option<&Value>, dry_run: bool, tx: &mut Transaction) -> Result<()> {
        let namespace = svc.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or("default").to_string();
        let name = svc.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("").to_string();
        let holder = Holder { namespace: &namespace, name: &name };
        // Step 1: the cluster IP.
        let old_ips = old.map(cluster_ips).unwrap_or_default();
        if type_of(svc) == "ExternalName" {
            if let Some(spec) = svc.get_mut("spec").and_then(Value::as_object_mut) {
                for f in ["clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"] {
                    spec.remove(f);
                }
            }
        } else if !needs_cluster_ip(svc) {
            svc["spec"]["clusterIPs"] = json!(["None"]);
            set_families(svc);
        } else {
            let requested = svc.pointer("/spec/clusterIP").and_then(Value::as_str).unwrap_or("").to_string();
            let ip = if !requested.is_empty() && old_ips.contains(&requested) {
                requested
            } else if !requested.is_empty() {
                if let Err(e) = self.ips.allocate(storage, &requested, &holder, dry_run).await? {
                    return Err(invalid(svc, "spec.clusterIPs", &format!("[]string{{{requested:?}}}"), format!("failed to allocate IP {requested}: {e}")));
                }
                tx.taken_ips.push(requested.clone());
                requested
            } else {
                match self.ips.allocate_next(storage, &holder, dry_run).await? {
                    Ok(ip) => {
                        tx.taken_ips.push(ip.to_string());
                        ip.to_string()
                    }
                    Err(e) => return Err(Error::Internal(format!("failed to allocate a serviceIP: {e}"))),
                }
            };
            svc["spec"]["clusterIP"] = json!(ip);
            svc["spec"]["clusterIPs"] = json!([ip]);
            set_families(svc);
        }
        // Step 2: node ports.
        let old_ports = old.map(node_ports).unwrap_or_default();
        if needs_node_ports(svc) {
            // A port number asked for by several ports of different protocols is taken once.
            let mut taken_here: BTreeMap<u16, ()> = BTreeMap::new();
            let count = svc.pointer("/spec/ports").and_then(Value::as_array).map_or(0, Vec::len);
            for i in 0..count {
                let requested = svc["spec"]["ports"][i].get("nodePort").and_then(Value::as_u64).unwrap_or(0);
                let port = if requested > 0 {
                    let p = requested.min(65535) as u16;
                    if !old_ports.contains(&p) && !taken_here.contains_key(&p) {
                        if let Err(e) = self.ports.change(storage, Change::Allocate(p), dry_run).await? {
                            return Err(invalid(svc, &format!("spec.ports[{i}].nodePort"), &p.to_string(), e.to_string()));
                        }
                        tx.taken_ports.push(p);
                    }
                    p
                } else {
                    match self.ports.change(storage, Change::AllocateNext, dry_run).await? {
                        Ok(Some(p)) => {
                            tx.taken_ports.push(p);
                            p
                        }
                        Ok(None) | Err(_) => return Err(Error::Internal("failed to allocate a nodePort: range is full".into())),
                    }
                };
                taken_here.insert(port, ());
                svc["spec"]["ports"][i]["nodePort"] = json!(port);
            }
        }
        if needs_health_check_node_port(svc) {
            let requested = svc.pointer("/spec/healthCheckNodePort").and_then(Value::as_u64).unwrap_or(0);
            if requested > 0 {
                let p = requested.min(65535) as u16;
                if !old_ports.contains(&p) {
                    if let Err(e) = self.ports.change(storage, Change::Allocate(p), dry_run).await? {
                        return Err(invalid(svc, "spec.healthCheckNodePort", &p.to_string(), e.to_string()));
                    }
                    tx.taken_ports.push(p);
                }
            } else {
                match self.ports.change(storage, Change::AllocateNext, dry_run).await? {
                    Ok(Some(p)) => {
                        tx.taken_ports.push(p);
                        svc["spec"]["healthCheckNodePort"] = json!(p);
                    }
                    _ => return Err(Error::Internal("failed to allocate a healthCheck nodePort: range is full".into())),
                }
            }
        }
        Ok(())
    }

    /// Gives back addresses and ports (a failed write's, a deleted Service's, what an update freed).
    pub async fn give_back(&self, storage: &Storage, ips: &[String], ports: &[u16], svc: &Value) {
        let namespace = svc.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or("default");
        let name = svc.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("");
        for ip in ips {
            if let Err(e) = self.ips.release(storage, ip, &Holder { namespace, name }).await {
                tracing::warn!(target: "apiserver", ip, error = %e, "could not release a cluster IP; the repair loop will");
            }
        }
        if !ports.is_empty()
            && let Err(e) = self.ports.change(storage, Change::Release(ports), false).await
        {
            tracing::warn!(target: "apiserver", ?ports, error = %e, "could not release node ports; the repair loop will");
        }
    }

    /// What a deleted Service held, given back.
    pub async fn release_all(&self, storage: &Storage, svc: &Value) {
        let ports: Vec<u16> = node_ports(svc).into_iter().collect();
        self.give_back(storage, &cluster_ips(svc), &ports, svc).await;
    }
}

/// A single-stack IPv4 Service (the only kind kubelab allocates).
fn set_families(svc: &mut Value) {
    svc["spec"]["ipFamilies"] = json!(["IPv4"]);
    if svc.pointer("/spec/ipFamilyPolicy").and_then(Value::as_str).is_none_or(str::is_empty) {
        svc["spec"]["ipFamilyPolicy"] = json!("SingleStack");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_each_kind_of_service_holds() {
        let cluster_ip = json!({"spec": {"type": "ClusterIP", "clusterIP": "10.96.0.5", "ports": [{"port": 80}]}});
        assert!(needs_cluster_ip(&cluster_ip) && !needs_node_ports(&cluster_ip));
        assert_eq!(cluster_ips(&cluster_ip), ["10.96.0.5"]);
        let headless = json!({"spec": {"type": "ClusterIP", "clusterIP": "None"}});
        assert!(!needs_cluster_ip(&headless) && cluster_ips(&headless).is_empty());
        let node_port = json!({"spec": {"type": "NodePort", "clusterIP": "10.96.0.6", "ports": [{"port": 80, "nodePort": 30080}, {"port": 81, "nodePort": 30081}]}});
        assert!(needs_node_ports(&node_port));
        assert_eq!(node_ports(&node_port).into_iter().collect::<Vec<_>>(), [30080, 30081]);
        let lb_local = json!({"spec": {"type": "LoadBalancer", "externalTrafficPolicy": "Local", "allocateLoadBalancerNodePorts": false, "healthCheckNodePort": 31000}});
        assert!(!needs_node_ports(&lb_local) && needs_health_check_node_port(&lb_local));
        assert_eq!(node_ports(&lb_local).into_iter().collect::<Vec<_>>(), [31000]);
        let external = json!({"spec": {"type": "ExternalName", "externalName": "db.example.com"}});
        assert!(!needs_cluster_ip(&external));
    }
}
