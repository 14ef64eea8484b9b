//! Mirrors pkg/apis/core/validation/events.go: ValidateEventCreate.

use apimachinery::validation::{FieldError, is_dns1123_subdomain};
use serde_json::{Value, json};

use super::validate_object_meta;

/// ValidateEventCreate, the parts kubelab enforces: metadata, an `involvedObject`, and that the
/// object it names lives in the event's namespace.
pub fn validate_event_create(obj: &Value) -> Vec<FieldError> {
    let mut errs = validate_object_meta(obj, true, is_dns1123_subdomain);
    if obj.pointer("/involvedObject").is_none() {
        errs.push(FieldError::required("involvedObject", ""));
    }
    let ns = obj.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or("");
    let involved_ns = obj.pointer("/involvedObject/namespace").and_then(Value::as_str).unwrap_or("");
    if !involved_ns.is_empty() && involved_ns != ns {
        errs.push(FieldError::invalid("involvedObject.namespace", &json!(involved_ns), "does not match event.namespace"));
    }
    errs
}
