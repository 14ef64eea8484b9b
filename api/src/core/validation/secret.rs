//! Mirrors the secret part of pkg/apis/core/validation/validation.go: ValidateSecret and
//! ValidateSecretUpdate.

use apimachinery::validation::{FieldError, is_dns1123_subdomain};
use serde_json::Value;

use super::configmap::validate_data_keys;
use super::validate_object_meta;

/// ValidateSecret: metadata, and the keys of `data` (by then `stringData` has been folded in).
pub fn validate_secret(obj: &Value) -> Vec<FieldError> {
    let mut errs = validate_object_meta(obj, true, is_dns1123_subdomain);
    errs.extend(validate_data_keys(obj, &["data"]));
    errs
}

/// ValidateSecretUpdate: the new secret is valid, and its `type` is the old one's.
pub fn validate_secret_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let mut errs = validate_secret(new);
    if new.get("type") != old.get("type") {
        errs.push(FieldError::invalid("type", new.get("type").unwrap_or(&Value::Null), "field is immutable"));
    }
    errs
}
