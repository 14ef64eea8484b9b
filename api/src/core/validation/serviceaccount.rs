//! Mirrors the serviceAccount part of pkg/apis/core/validation/validation.go:
//! ValidateServiceAccount.

use apimachinery::validation::{FieldError, is_dns1123_subdomain};
use serde_json::Value;

use super::validate_object_meta;

/// ValidateServiceAccount: its metadata (kubelab checks nothing else on it).
pub fn validate_service_account(obj: &Value) -> Vec<FieldError> {
    validate_object_meta(obj, true, is_dns1123_subdomain)
}
