//! Mirrors the node part of pkg/apis/core/validation/validation.go: ValidateNode and
//! ValidateNodeUpdate.

use apimachinery::validation::{FieldError, is_dns1123_subdomain};
use serde_json::{Value, json};

use super::validate_object_meta;

/// ValidateNode, the parts kubelab enforces: metadata, taints (a key and a known effect each),
/// and `spec.podCIDR` as a CIDR.
pub fn validate_node(obj: &Value) -> Vec<FieldError> {
    let mut errs = validate_object_meta(obj, false, is_dns1123_subdomain);
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
    errs
}

/// ValidateNodeUpdate: the new node is valid, and a podCIDR once set is never changed.
pub fn validate_node_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let mut errs = validate_node(new);
    let old_cidr = old.pointer("/spec/podCIDR").and_then(Value::as_str).unwrap_or("");
    let new_cidr = new.pointer("/spec/podCIDR").and_then(Value::as_str).unwrap_or("");
    if !old_cidr.is_empty() && old_cidr != new_cidr {
        errs.push(FieldError::forbidden("spec.podCIDR", "node updates may not change podCIDR except from \"\" to valid"));
    }
    errs
}
