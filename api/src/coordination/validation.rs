//! Mirrors pkg/apis/coordination/validation/validation.go: ValidateLease.

use apimachinery::validation::{FieldError, is_dns1123_subdomain};
use serde_json::{Value, json};

use crate::core::validation::validate_object_meta;

/// ValidateLease, the parts kubelab enforces: metadata, and a positive `leaseDurationSeconds`.
pub fn validate_lease(obj: &Value) -> Vec<FieldError> {
    let mut errs = validate_object_meta(obj, true, is_dns1123_subdomain);
    if let Some(d) = obj.pointer("/spec/leaseDurationSeconds").and_then(Value::as_i64)
        && d <= 0
    {
        errs.push(FieldError::invalid("spec.leaseDurationSeconds", &json!(d), "must be greater than 0"));
    }
    errs
}
