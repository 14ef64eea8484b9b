//! Mirrors the configMap part of pkg/apis/core/validation/validation.go: ValidateConfigMap, and
//! the key rule (apimachinery's IsConfigMapKey) it shares with secrets.

use apimachinery::validation::{FieldError, is_dns1123_subdomain};
use serde_json::{Value, json};

use super::validate_object_meta;

/// ValidateConfigMap: metadata, and the keys of `data` and `binaryData`.
pub fn validate_config_map(obj: &Value) -> Vec<FieldError> {
    let mut errs = validate_object_meta(obj, true, is_dns1123_subdomain);
    errs.extend(validate_data_keys(obj, &["data", "binaryData"]));
    errs
}

/// Keys of configMap and secret data: `[-._a-zA-Z0-9]+`, not `.` or `..`. Each key becomes a file
/// name when the object is mounted as a volume.
pub(super) fn validate_data_keys(obj: &Value, fields: &[&str]) -> Vec<FieldError> {
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
    errs
}
