//! Strategies of the core/v1 and coordination.k8s.io/v1 resources that have no behaviour beyond
//! validation: configmaps, secrets, serviceaccounts, events, leases (pkg/registry/core/<r>/strategy.go).
//! The validation itself is the `api` crate's ([`api::core::validation`],
//! [`api::coordination::validation`]).

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Event, Secret, ServiceAccount};
use serde_json::{Value, json};

use super::validation::causes;
use super::{ResourceInfo, Strategy, Typed, meta_field, typed_roundtrip};
use crate::error::{Cause, Result};
use api::core::validation::{
    validate_config_map, validate_event_create, validate_secret, validate_secret_update, validate_service_account,
};

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

impl Strategy for Typed<ConfigMap> {
    fn info(&self) -> &'static ResourceInfo {
        self.info
    }
    fn decode(&self, v: Value) -> Result<(Value, Vec<String>)> {
        typed_roundtrip::<ConfigMap>("ConfigMap", v)
    }
    fn validate(&self, obj: &Value) -> Vec<Cause> {
        causes(validate_config_map(obj))
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
        causes(validate_secret(obj))
    }
    fn validate_update(&self, new: &Value, old: &Value) -> Vec<Cause> {
        causes(validate_secret_update(new, old))
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
        causes(validate_service_account(obj))
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
        causes(validate_event_create(obj))
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
        causes(api::coordination::validation::validate_lease(obj))
    }
}
