//! Mirrors pkg/registry/core/node/strategy.go: nodes are cluster-scoped, kept under `minions`,
//! and registered by the node agent with their status.

use k8s_openapi::api::core::v1::Node;
use serde_json::{Value, json};

use super::validation::{causes, object_meta, subdomain};
use super::{ResourceInfo, Strategy, Subresource, meta_field, typed_roundtrip};
use crate::error::{Cause, Result};
use apimachinery::validation::FieldError;

pub static NODES: ResourceInfo = ResourceInfo {
    group: "",
    version: "v1",
    kind: "Node",
    plural: "nodes",
    singular: "node",
    namespaced: false,
    short_names: &["no"],
    storage_name: "minions",
    subresources: &[Subresource { name: "status", group: "", version: "v1", kind: "Node", verbs: &["get", "patch", "update"] }],
    categories: &[],
};

pub struct NodeStrategy;

fn validate_node(obj: &Value) -> Vec<Cause> {
    let mut c = object_meta(obj, false, subdomain);
    let mut errs = Vec::new();
    for (i, t) in obj.pointer("/spec/taints").and_then(Value::as_array).into_iter().flatten().enumerate() {
        let effect = t.get("effect").and_then(Value::as_str).unwrap_or("");
        if !["NoSchedule", "PreferNoSchedule", "NoExecute"].contains(&effect) {
            errs.push(FieldError::not_supported(&format!("spec.taints[{i}].effect"), &json!(effect), &["NoExecute", "NoSchedule", "PreferNoSchedule"]));
        }
        if t.get("key").and_then(Value::as_str).is_none_or(str::is_empty) {
            errs.push(FieldError::required(&format!("spec.taints[{i}].key"), ""));
        }
    }
    if let Some(cidr) = obj.pointer("/spec/podCIDR").and_then(Value::as_str).filter(|c| !c.is_empty()) {
        let ok = cidr.split_once('/').is_some_and(|(ip, bits)| ip.parse::<std::net::IpAddr>().is_ok() && bits.parse::<u8>().is_ok_and(|b| b <= 128));
        if !ok {
            errs.push(FieldError::invalid("spec.podCIDR", &json!(cidr), "must be a valid CIDR"));
        }
    }
    c.extend(causes(errs));
    c
}

impl Strategy for NodeStrategy {
    fn info(&self) -> &'static ResourceInfo {
        &NODES
    }
    fn decode(&self, v: Value) -> Result<(Value, Vec<String>)> {
        typed_roundtrip::<Node>("Node", v)
    }
    fn validate(&self, obj: &Value) -> Vec<Cause> {
        validate_node(obj)
    }
    fn validate_update(&self, new: &Value, old: &Value) -> Vec<Cause> {
        let mut c = validate_node(new);
        // podCIDR may be set once, never changed.
        let old_cidr = old.pointer("/spec/podCIDR").and_then(Value::as_str).unwrap_or("");
        let new_cidr = new.pointer("/spec/podCIDR").and_then(Value::as_str).unwrap_or("");
        if !old_cidr.is_empty() && old_cidr != new_cidr {
            c.extend(causes(vec![FieldError::forbidden("spec.podCIDR", &format!("node updates may not change podCIDR except from \"\" to valid"))]));
        }
        c
    }
    fn field(&self, obj: &Value, field: &str) -> Option<String> {
        match field {
            "spec.unschedulable" => Some(obj.pointer("/spec/unschedulable").and_then(Value::as_bool).unwrap_or(false).to_string()),
            f => meta_field(obj, f),
        }
    }
    fn supported_fields(&self) -> &'static [&'static str] {
        &["metadata.name", "spec.unschedulable"]
    }
}
