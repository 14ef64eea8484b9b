//! Mirrors pkg/registry/core/namespace: a namespace is deleted in two stages. Deleting it marks it
//! Terminating (it carries the `kubernetes` finalizer in spec.finalizers); the namespace
//! controller deletes everything in it, then removes the finalizer through `/finalize`, and the
//! namespace goes.

use k8s_openapi::api::core::v1::Namespace;
use serde_json::{Value, json};

use super::validation::causes;
use super::{ResourceInfo, Strategy, Subresource, meta_field, typed_roundtrip};
use crate::error::{Cause, Result};
use api::core::v1::well_known::FINALIZER_KUBERNETES;

pub static NAMESPACES: ResourceInfo = ResourceInfo {
    group: "",
    version: "v1",
    kind: "Namespace",
    plural: "namespaces",
    singular: "namespace",
    namespaced: false,
    short_names: &["ns"],
    storage_name: "namespaces",
    subresources: &[
        Subresource { name: "status", group: "", version: "v1", kind: "Namespace", verbs: &["get", "patch", "update"] },
        Subresource { name: "finalize", group: "", version: "v1", kind: "Namespace", verbs: &["update"] },
    ],
    categories: &[],
};

pub struct NamespaceStrategy;

impl Strategy for NamespaceStrategy {
    fn info(&self) -> &'static ResourceInfo {
        &NAMESPACES
    }
    fn decode(&self, v: Value) -> Result<(Value, Vec<String>)> {
        typed_roundtrip::<Namespace>("Namespace", v)
    }
    fn prepare_for_create(&self, obj: &mut Value) {
        obj["spec"]["finalizers"] = json!([FINALIZER_KUBERNETES]);
        obj["status"] = json!({"phase": "Active"});
    }
    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        // spec.finalizers change only through /finalize, the status only through /status.
        new["spec"]["finalizers"] = old.pointer("/spec/finalizers").cloned().unwrap_or(json!([]));
        new["status"] = old.get("status").cloned().unwrap_or(json!({}));
    }
    fn validate(&self, obj: &Value) -> Vec<Cause> {
        causes(api::core::validation::validate_namespace(obj))
    }
    fn field(&self, obj: &Value, field: &str) -> Option<String> {
        match field {
            "status.phase" => Some(obj.pointer("/status/phase").and_then(Value::as_str).unwrap_or("").to_string()),
            f => meta_field(obj, f),
        }
    }
    fn supported_fields(&self) -> &'static [&'static str] {
        &["metadata.name", "status.phase"]
    }
}
