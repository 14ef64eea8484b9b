//! Mirrors the namespace part of pkg/apis/core/validation/validation.go: ValidateNamespace.

use apimachinery::validation::{FieldError, is_dns1123_label};
use serde_json::Value;

use super::validate_object_meta;

/// ValidateNamespace: a cluster-scoped object whose name is a DNS-1123 label (it becomes part of
/// other objects' DNS names).
pub fn validate_namespace(obj: &Value) -> Vec<FieldError> {
    validate_object_meta(obj, false, is_dns1123_label)
}
