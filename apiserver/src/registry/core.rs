//! Strategies of the core/v1 and coordination.k8s.io/v1 resources that have no behaviour beyond
//! validation: configmaps, secrets, serviceaccounts, events, leases (pkg/registry/core/<r>/strategy.go).

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Event, Secret, ServiceAccount};
use serde_json::{Value, json};

use super::validation::{causes, object_meta, subdomain};
use super::{ResourceInfo, Strategy, Typed, meta_field, typed_roundtrip};
use crate::error::{Cause, Result};
use apimachinery::validation::FieldError;

pub static CONFIGMAPS: ResourceInfo = ResourceInfo {
    group: "", version: "v1", kind: "ConfigMap", plural: "configmaps", singular: "configmap", namespaced: true,
    short_names: &["cm"], storage_name: "configmaps", subresources: &[], categories: &[],
};
pub static SECRETS: ResourceInfo = ResourceInfo {
    group: "", version: "v1", kind: "Secret", plural: "secrets", singular: "secret", namespaced: true,
    short_names: &[], storage_name: "secrets", subresources: &[], categories: &[],
};
pub static SERVICEACCOUNTS: ResourceInfo = ResourceInfo {
    group: "", version: "v1", kind: "ServiceAccount", plural: "serviceaccounts", singular: "serviceaccount", namespaced: true,
    short_names: &["sa"], storage_name: "serviceaccounts", subresources: &[], categories: &[],
};
pub static EVENTS: ResourceInfo = ResourceInfo {
    group: "", version: "v1", kind: "Event", plural: "events", singular: "event", namespaced: true,
    short_names: &["ev"], storage_name: "events", subresources: &[], categories: &[],
};
pub static LEASES: ResourceInfo = ResourceInfo {
    group: "coordination.k8s.io", version: "v1", kind: "Lease", plural: "leases", singular: "lease", namespaced: true,
    short_names: &[], storage_name: "leases", subresources: &[], categories: &[],
};

/// Keys of configMap and secret data: `[-._a-zA-Z0-9]+`, not `.` or `..`.
fn validate_data_keys(obj: &Value, fields: &[&str]) -> Vec<Cause> {
    let mut errs = Vec::new();
    for f in fields {
        if let Some(map) = obj.get(*f).and_then(Value::as_object) {
            for k in map.keys() {
                let ok = !k.is_empty() && k.len() <= 253 && k != "." && k != ".." && !k.starts_with("..")
                    && k.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
                if !ok {
                    errs.push(FieldError::invalid(
                        &format!("{f}[{k}]"),
                        &json!(k),
                        "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')",
                    ));
                }
            }
        }
    }
    causes(errs)
}

impl Strategy for Typed<ConfigMap> {
    fn info(&self) -> &'static ResourceInfo {
        self.info
    }
    fn decode(&self, v: Value) -> Result<(Value, Vec<String>)> {
        typed_roundtrip::<ConfigMap>("ConfigMap", v)
    }
    fn validate(&self, obj: &Value) -> Vec<Cause> {
        let mut c = object_meta(obj, true, subdomain);
        c.extend(validate_data_keys(obj, &["data", "binaryData"]));
        c
    }
}

impl Strategy for Typed<Secret> {
    fn info(&self) -> &'static ResourceInfo {
        self.info
    }
    fn decode(&self, v: Value) -> Result<(Value, Vec<String>)> {
        typed_roundtrip::<Secret>("Secret", v)
    }
    fn prepare_for_create(&self, obj: &mut Value) {
        if obj.get("type").and_then(Value::as_str).is_none_or(str::is_empty) {
            obj["type"] = json!("Opaque");
        }
        // stringData is write-only: folded into data (base64) as Kubernetes does.
        if let Some(sd) = obj.as_object_mut().and_then(|m| m.remove("stringData"))
            && let Some(sd) = sd.as_object()
        {
            use k8s_openapi::ByteString;
            for (k, v) in sd {
                let bytes = ByteString(v.as_str().unwrap_or("").as_bytes().to_vec());
                obj["data"][k] = serde_json::to_value(bytes).unwrap_or(Value::Null);
            }
        }
    }
    fn validate(&self, obj: &Value) -> Vec<Cause> {
        let mut c = object_meta(obj, true, subdomain);
        c.extend(validate_data_keys(obj, &["data"]));
        c
    }
    fn validate_update(&self, new: &Value, old: &Value) -> Vec<Cause> {
        let mut c = self.validate(new);
        if new.get("type") != old.get("type") {
            c.extend(causes(vec![FieldError::invalid("type", new.get("type").unwrap_or(&Value::Null), "field is immutable")]));
        }
        c
    }
    fn field(&self, obj: &Value, field: &str) -> Option<String> {
        match field {
            "type" => Some(obj.get("type").and_then(Value::as_str).unwrap_or("").to_string()),
            f => meta_field(obj, f),
        }
    }
    fn supported_fields(&self) -> &'static [&'static str] {
        &["metadata.name", "metadata.namespace", "type"]
    }
}

impl Strategy for Typed<ServiceAccount> {
    fn info(&self) -> &'static ResourceInfo {
        self.info
    }
    fn decode(&self, v: Value) -> Result<(Value, Vec<String>)> {
        typed_roundtrip::<ServiceAccount>("ServiceAccount", v)
    }
    fn validate(&self, obj: &Value) -> Vec<Cause> {
        object_meta(obj, true, subdomain)
    }
}

/// Events live for `--event-ttl` (one hour by default), through a store lease.
pub struct EventStrategy {
    pub ttl_seconds: i64,
}

impl Strategy for EventStrategy {
    fn info(&self) -> &'static ResourceInfo {
        &EVENTS
    }
    fn decode(&self, v: Value) -> Result<(Value, Vec<String>)> {
        typed_roundtrip::<Event>("Event", v)
    }
    fn validate(&self, obj: &Value) -> Vec<Cause> {
        let mut c = object_meta(obj, true, subdomain);
        if obj.pointer("/involvedObject").is_none() {
            c.extend(causes(vec![FieldError::required("involvedObject", "")]));
        }
        let ns = obj.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or("");
        let involved_ns = obj.pointer("/involvedObject/namespace").and_then(Value::as_str).unwrap_or("");
        if !involved_ns.is_empty() && involved_ns != ns {
            c.extend(causes(vec![FieldError::invalid("involvedObject.namespace", &json!(involved_ns), "does not match event.namespace")]));
        }
        c
    }
    fn field(&self, obj: &Value, field: &str) -> Option<String> {
        let s = |p: &str| Some(obj.pointer(p).and_then(Value::as_str).unwrap_or("").to_string());
        match field {
            "involvedObject.kind" => s("/involvedObject/kind"),
            "involvedObject.namespace" => s("/involvedObject/namespace"),
            "involvedObject.name" => s("/involvedObject/name"),
            "involvedObject.uid" => s("/involvedObject/uid"),
            "involvedObject.apiVersion" => s("/involvedObject/apiVersion"),
            "involvedObject.resourceVersion" => s("/involvedObject/resourceVersion"),
            "involvedObject.fieldPath" => s("/involvedObject/fieldPath"),
            "reason" => s("/reason"),
            "reportingComponent" => s("/reportingComponent"),
            "source" => s("/source/component"),
            "type" => s("/type"),
            f => meta_field(obj, f),
        }
    }
    fn supported_fields(&self) -> &'static [&'static str] {
        &[
            "metadata.name", "metadata.namespace", "involvedObject.kind", "involvedObject.namespace", "involvedObject.name",
            "involvedObject.uid", "involvedObject.apiVersion", "involvedObject.resourceVersion", "involvedObject.fieldPath",
            "reason", "reportingComponent", "source", "type",
        ]
    }
    fn ttl(&self) -> Option<i64> {
        Some(self.ttl_seconds)
    }
}

impl Strategy for Typed<Lease> {
    fn info(&self) -> &'static ResourceInfo {
        self.info
    }
    fn decode(&self, v: Value) -> Result<(Value, Vec<String>)> {
        typed_roundtrip::<Lease>("Lease", v)
    }
    fn validate(&self, obj: &Value) -> Vec<Cause> {
        let mut c = object_meta(obj, true, subdomain);
        if let Some(d) = obj.pointer("/spec/leaseDurationSeconds").and_then(Value::as_i64)
            && d <= 0
        {
            c.extend(causes(vec![FieldError::invalid("spec.leaseDurationSeconds", &json!(d), "must be greater than 0")]));
        }
        c
    }
}
