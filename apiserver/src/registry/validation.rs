//! Glue between apimachinery's field errors and the 422 causes of a Status.

use apimachinery::validation::FieldError;
use serde_json::Value;

use crate::error::Cause;

pub fn causes(errs: Vec<FieldError>) -> Vec<Cause> {
    errs.into_iter().map(|e| Cause { reason: e.reason_str().to_string(), field: e.field, message: e.message }).collect()
}

/// ValidateObjectMeta with the resource's name rule (DNS-1123 subdomain unless told otherwise).
pub fn object_meta(obj: &Value, namespaced: bool, name_rule: fn(&str) -> Vec<String>) -> Vec<Cause> {
    match obj.get("metadata") {
        Some(meta) => causes(apimachinery::validation::validate_object_meta(meta, namespaced, name_rule, "metadata")),
        None => causes(vec![FieldError::required("metadata", "")]),
    }
}

pub fn subdomain(name: &str) -> Vec<String> {
    apimachinery::validation::is_dns1123_subdomain(name)
}

pub fn label(name: &str) -> Vec<String> {
    apimachinery::validation::is_dns1123_label(name)
}
