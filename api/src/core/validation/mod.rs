//! Mirrors pkg/apis/core/validation/validation.go, split by kind: what makes a core/v1 object
//! valid, as a list of field errors (Kubernetes' `field.ErrorList`).
//!
//! Every check takes the object as JSON (what the API server holds) and returns every problem it
//! finds, each with its field path, in the order Kubernetes reports them; an empty list means
//! valid. The API server turns the list into the causes of a 422 `Status`; the node agent into
//! the warning that says why a static pod manifest was refused.
//!
//! This file holds the glue every kind starts with: [`validate_object_meta`], over
//! apimachinery's checks of `metadata`, given the kind's name rule (apimachinery's
//! `is_dns1123_subdomain` for most kinds, `is_dns1123_label` for namespaces); and the small
//! checks every workload kind shares: [`validate_nonnegative_field`],
//! [`validate_immutable_field`] and [`validate_label_selector`].

pub mod configmap;
pub mod event;
pub mod namespace;
pub mod node;
pub mod persistentvolume;
pub mod pod;
pub mod secret;
pub mod service;
pub mod serviceaccount;

use apimachinery::labels::Selector;
use apimachinery::validation::FieldError;
use serde_json::{Value, json};

pub use configmap::validate_config_map;
pub use event::validate_event_create;
pub use namespace::validate_namespace;
pub use node::{validate_node, validate_node_update};
pub use persistentvolume::{
    validate_persistent_volume, validate_persistent_volume_claim, validate_persistent_volume_claim_status_update,
    validate_persistent_volume_claim_update, validate_persistent_volume_status_update, validate_persistent_volume_update,
};
pub use pod::{POD_UPDATE_FORBIDDEN, validate_pod_create, validate_pod_spec, validate_pod_template_spec, validate_pod_update};
pub use secret::{validate_secret, validate_secret_update};
pub use service::{validate_endpoint_ip, validate_endpoints, validate_service, validate_service_create, validate_service_update};
pub use serviceaccount::validate_service_account;

/// ValidateObjectMeta: the object's `metadata` checked with the kind's name rule; a missing
/// `metadata` is itself the error.
pub fn validate_object_meta(obj: &Value, namespaced: bool, name_rule: fn(&str) -> Vec<String>) -> Vec<FieldError> {
    match obj.get("metadata") {
        Some(meta) => apimachinery::validation::validate_object_meta(meta, namespaced, name_rule, "metadata"),
        None => vec![FieldError::required("metadata", "")],
    }
}

/// ValidateNonnegativeField: the integer `value` (the field at `field`), if set, is not negative.
pub fn validate_nonnegative_field(value: Option<&Value>, field: &str) -> Vec<FieldError> {
    match value.and_then(Value::as_i64) {
        Some(v) if v < 0 => vec![FieldError::invalid(field, &json!(v), "must be greater than or equal to 0")],
        _ => Vec::new(),
    }
}

/// ValidateImmutableField: `new` (the field at `field`) equals `old`, unset and `null` counting
/// as the same; otherwise an Invalid error showing the new value.
pub fn validate_immutable_field(new: Option<&Value>, old: Option<&Value>, field: &str) -> Vec<FieldError> {
    let (n, o) = (new.filter(|v| !v.is_null()), old.filter(|v| !v.is_null()));
    if n == o {
        return Vec::new();
    }
    vec![FieldError::invalid(field, n.unwrap_or(&Value::Null), "field is immutable")]
}

/// metav1 validation's ValidateLabelSelector, folded into the conversion the workload kinds do
/// next (LabelSelectorAsSelector): the selector at `field`, converted, or the error that it does
/// not convert. An absent selector is `Ok(Selector::nothing())`, as in Kubernetes; the caller
/// decides whether absent is itself an error.
pub fn validate_label_selector(selector: Option<&Value>, field: &str) -> Result<Selector, FieldError> {
    let v = selector.unwrap_or(&Value::Null);
    Selector::from_label_selector(v).map_err(|e| FieldError::invalid(field, v, &e.to_string()))
}
