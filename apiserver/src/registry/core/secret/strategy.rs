//! Mirrors pkg/registry/core/secret/strategy.go: `type` defaults to Opaque, `stringData` is folded
//! into `data`, the type may not change (the `api` crate's ValidateSecret and ValidateSecretUpdate),
//! and `type` is a field selector.

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use serde_json::{Value, json};

use super::printer::SecretPrinter;
use crate::error::Cause;
use crate::registry::generic::strategy::{ResourceInfo, Strategy, causes, meta_field};
use crate::registry::generic::typed::{Object, Typed};
use api::core::validation::{validate_secret, validate_secret_update};

pub static SECRETS: ResourceInfo = ResourceInfo {
    group: "",
    version: "v1",
    kind: "Secret",
    plural: "secrets",
    singular: "secret",
    namespaced: true,
    short_names: &[],
    storage_name: "secrets",
    subresources: &[],
    categories: &[],
    codec: &Typed::<Secret>::NEW,
    printer: &SecretPrinter,
};

pub struct SecretStrategy;

impl Strategy for SecretStrategy {
    fn info(&self) -> &'static ResourceInfo {
        &SECRETS
    }

    fn prepare_for_create(&self, obj: &mut Object) {
        let obj = obj.json_mut();
        if obj.get("type").and_then(Value::as_str).is_none_or(str::is_empty) {
            obj["type"] = json!("Opaque");
        }
        // stringData is write-only: folded into data (base64) as Kubernetes does.
        if let Some(sd) = obj.as_object_mut().and_then(|m| m.remove("stringData"))
            && let Some(sd) = sd.as_object()
        {
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
