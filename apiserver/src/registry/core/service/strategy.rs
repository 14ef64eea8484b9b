//! Mirrors pkg/registry/core/service/strategy.go and the hooks of
//! pkg/registry/core/service/storage/storage.go: a Service is defaulted and validated by the
//! `api` crate, starts with an empty load-balancer status, and takes its cluster IP and node
//! ports from the shared pools ([`super::alloc`]) just before it is written — given back when the
//! write fails and when the Service is deleted.
//!
//! An update is defaulted as a create is. It may leave out what the server allocated (`kubectl apply` of a manifest without a
//! `clusterIP` or `nodePort`): the old values are kept (`patchAllocatedValues`). A type change
//! drops what the new type does not use (`dropTypeDependentFields`): node ports when a NodePort
//! Service becomes ClusterIP, the cluster IP when it becomes ExternalName.

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::Service;
use serde_json::{Value, json};

use super::alloc::{Allocators, needs_cluster_ip, needs_health_check_node_port, needs_node_ports};
use super::printer::ServicePrinter;
use crate::error::{Cause, Result};
use crate::registry::generic::strategy::{Finish, ResourceInfo, Strategy, Subresource, causes, keep_status, set_defaults_on_update};
use crate::registry::generic::typed::{Object, Typed};
use crate::storage::store::Storage;

pub static SERVICES: ResourceInfo = ResourceInfo {
    group: "",
    version: "v1",
    kind: "Service",
    plural: "services",
    singular: "service",
    namespaced: true,
    short_names: &["svc"],
    storage_name: "services/specs",
    subresources: &[
        Subresource { name: "status", group: "", version: "v1", kind: "Service", verbs: &["get", "patch", "update"] },
        Subresource { name: "proxy", group: "", version: "v1", kind: "ServiceProxyOptions", verbs: &crate::registry::core::pod::strategy::PROXY_VERBS },
    ],
    categories: &["all"],
    codec: &Typed::<Service>::NEW,
    printer: &ServicePrinter,
};

pub struct ServiceStrategy {
    pub alloc: Allocators,
}

impl Strategy for ServiceStrategy {
    fn info(&self) -> &'static ResourceInfo {
        &SERVICES
    }

    /// Services are what `kubelab trace svc/<name>` follows.
    fn traced(&self) -> bool {
        true
    }

    fn set_defaults(&self, obj: &mut Object) {
        if let Some(svc) = obj.typed_mut::<Service>() {
            api::core::v1::defaults::set_defaults_service(svc);
        }
    }

    fn prepare_for_create(&self, obj: &mut Object) {
        obj.json_mut()["status"] = json!({"loadBalancer": {}});
    }

    fn validate(&self, obj: &Value) -> Vec<Cause> {
        causes(api::core::validation::validate_service_create(obj))
    }

    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        set_defaults_on_update(self, new);
        keep_status(new, old);
        normalize_cluster_ips(new, old);
        patch_allocated_values(new, old);
        drop_type_dependent_fields(new, old);
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<Cause> {
        causes(api::core::validation::validate_service_update(new, old))
    }

    fn begin_create<'a>(&'a self, storage: &'a Storage, obj: &'a mut Value, dry_run: bool) -> BoxFuture<'a, Result<Option<Finish>>> {
        Box::pin(async move {
            let tx = self.alloc.allocate_create(storage, obj, dry_run).await?;
            Ok(self.finish(storage, tx, obj, dry_run))
        })
    }

    fn begin_update<'a>(&'a self, storage: &'a Storage, new: &'a mut Value, old: &'a Value, dry_run: bool) -> BoxFuture<'a, Result<Option<Finish>>> {
        Box::pin(async move {
            let tx = self.alloc.allocate_update(storage, new, old, dry_run).await?;
            Ok(self.finish(storage, tx, old, dry_run))
        })
    }

    fn after_delete<'a>(&'a self, storage: &'a Storage, obj: &'a Value) -> BoxFuture<'a, ()> {
        Box::pin(self.alloc.release_all(storage, obj))
    }
}

impl ServiceStrategy {
    /// What the write's end does with a transaction: a failed write gives back what it took; a
    /// successful one gives back what it freed (`holder`: the Service whose addresses they are).
    fn finish(&self, storage: &Storage, tx: super::alloc::Transaction, holder: &Value, dry_run: bool) -> Option<Finish> {
        if dry_run {
            return None;
        }
        let (alloc, storage) = (self.alloc.clone(), storage.clone());
        let holder = json!({"metadata": holder.get("metadata").cloned().unwrap_or(Value::Null)});
        Some(Box::new(move |ok: bool| {
            Box::pin(async move {
                if ok {
                    alloc.give_back(&storage, &tx.freed_ips, &tx.freed_ports, &holder).await;
                } else {
                    alloc.give_back(&storage, &tx.taken_ips, &tx.taken_ports, &holder).await;
                }
            }) as BoxFuture<'static, ()>
        }))
    }
}

/// normalizeClusterIPs: an update that changes `clusterIP` alone changes `clusterIPs[0]` with it
/// (and one that clears it clears both), so that validation speaks of one change, not two.
fn normalize_cluster_ips(new: &mut Value, old: &Value) {
    let (new_ip, old_ip) = (new.pointer("/spec/clusterIP").cloned(), old.pointer("/spec/clusterIP").cloned());
    if new_ip == old_ip || new.pointer("/spec/clusterIPs") != old.pointer("/spec/clusterIPs") {
        return;
    }
    match new_ip.as_ref().and_then(Value::as_str).filter(|s| !s.is_empty()) {
        Some(ip) => {
            if let Some(first) = new.pointer_mut("/spec/clusterIPs/0") {
                *first = json!(ip);
            }
        }
        None => {
            if let Some(spec) = new.get_mut("spec").and_then(Value::as_object_mut) {
                spec.remove("clusterIPs");
            }
        }
    }
}

/// patchAllocatedValues: what the server allocated and the update leaves out stays.
fn patch_allocated_values(new: &mut Value, old: &Value) {
    if needs_cluster_ip(old) && needs_cluster_ip(new) {
        for field in ["clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"] {
            let unset = new.pointer(&format!("/spec/{field}")).is_none_or(|v| v.is_null() || v.as_str() == Some(""));
            if unset && let Some(v) = old.pointer(&format!("/spec/{field}")) {
                new["spec"][field] = v.clone();
            }
        }
    }
    if needs_node_ports(old) && needs_node_ports(new) {
        let old_ports = old.pointer("/spec/ports").and_then(Value::as_array).cloned().unwrap_or_default();
        for port in new.pointer_mut("/spec/ports").and_then(Value::as_array_mut).into_iter().flatten() {
            if port.get("nodePort").and_then(Value::as_u64).unwrap_or(0) != 0 {
                continue;
            }
            let same = |o: &&Value| o.get("port") == port.get("port") && o.get("protocol") == port.get("protocol");
            let by_name = |o: &&Value| o.get("name").is_some() && o.get("name") == port.get("name");
            if let Some(n) = old_ports.iter().find(same).or_else(|| old_ports.iter().find(by_name)).and_then(|o| o.get("nodePort")).cloned() {
                port["nodePort"] = n;
            }
        }
    }
    if needs_health_check_node_port(old)
        && needs_health_check_node_port(new)
        && new.pointer("/spec/healthCheckNodePort").and_then(Value::as_u64).unwrap_or(0) == 0
        && let Some(v) = old.pointer("/spec/healthCheckNodePort")
    {
        new["spec"]["healthCheckNodePort"] = v.clone();
    }
}

/// dropTypeDependentFields: a field the new type does not use, left as the old Service had it,
/// is dropped (a NodePort Service turned ClusterIP loses its node ports; one turned ExternalName
/// its cluster IP).
fn drop_type_dependent_fields(new: &mut Value, old: &Value) {
    if !needs_cluster_ip(new) && needs_cluster_ip(old) && new.pointer("/spec/type").and_then(Value::as_str) == Some("ExternalName") {
        let same = new.pointer("/spec/clusterIP") == old.pointer("/spec/clusterIP");
        if let (true, Some(spec)) = (same, new.get_mut("spec").and_then(Value::as_object_mut)) {
            for f in ["clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"] {
                spec.remove(f);
            }
        }
    }
    if !needs_node_ports(new) && needs_node_ports(old) {
        let old_ports = old.pointer("/spec/ports").and_then(Value::as_array).cloned().unwrap_or_default();
        for port in new.pointer_mut("/spec/ports").and_then(Value::as_array_mut).into_iter().flatten() {
            let n = port.get("nodePort").cloned();
            if n.is_some() && old_ports.iter().any(|o| o.get("nodePort") == n.as_ref())
                && let Some(m) = port.as_object_mut()
            {
                m.remove("nodePort");
            }
        }
    }
    if !needs_health_check_node_port(new) && needs_health_check_node_port(old) && new.pointer("/spec/healthCheckNodePort") == old.pointer("/spec/healthCheckNodePort")
        && let Some(spec) = new.get_mut("spec").and_then(Value::as_object_mut)
    {
        spec.remove("healthCheckNodePort");
    }
    if new.pointer("/spec/type").and_then(Value::as_str) != Some("NodePort")
        && new.pointer("/spec/type").and_then(Value::as_str) != Some("LoadBalancer")
        && new.pointer("/spec/externalTrafficPolicy") == old.pointer("/spec/externalTrafficPolicy")
        && let Some(spec) = new.get_mut("spec").and_then(Value::as_object_mut)
    {
        spec.remove("externalTrafficPolicy");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_apply_without_the_allocated_values_keeps_them() {
        let old = json!({"spec": {"type": "NodePort", "clusterIP": "10.96.0.7", "clusterIPs": ["10.96.0.7"], "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack",
            "ports": [{"name": "http", "port": 80, "protocol": "TCP", "nodePort": 30080}]}});
        let mut new = json!({"spec": {"type": "NodePort", "ports": [{"name": "http", "port": 80, "protocol": "TCP"}]}});
        patch_allocated_values(&mut new, &old);
        assert_eq!(new["spec"]["clusterIP"], "10.96.0.7");
        assert_eq!(new["spec"]["clusterIPs"], json!(["10.96.0.7"]));
        assert_eq!(new["spec"]["ports"][0]["nodePort"], 30080);
    }

    #[test]
    fn a_type_change_drops_what_the_new_type_does_not_use() {
        let old = json!({"spec": {"type": "NodePort", "clusterIP": "10.96.0.7", "externalTrafficPolicy": "Cluster", "ports": [{"port": 80, "protocol": "TCP", "nodePort": 30080}]}});
        let mut new = old.clone();
        new["spec"]["type"] = json!("ClusterIP");
        drop_type_dependent_fields(&mut new, &old);
        assert_eq!(new["spec"]["ports"][0].get("nodePort"), None);
        assert_eq!(new["spec"].get("externalTrafficPolicy"), None);
        assert_eq!(new["spec"]["clusterIP"], "10.96.0.7");
        let mut external = old.clone();
        external["spec"]["type"] = json!("ExternalName");
        external["spec"]["externalName"] = json!("db.example.com");
        drop_type_dependent_fields(&mut external, &old);
        assert_eq!(external["spec"].get("clusterIP"), None);
    }
}
