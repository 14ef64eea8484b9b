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
//! `is_dns1123_subdomain` for most kinds, `is_dns1123_label` for namespaces).

pub mod configmap;
pub mod event;
pub mod namespace;
pub mod node;
pub mod pod;
pub mod secret;
pub mod serviceaccount;

use apimachinery::validation::FieldError;
use serde_json::Value;

pub use configmap::validate_config_map;
pub use event::validate_event_create;
pub use namespace::validate_namespace;
pub use node::{validate_node, validate_node_update};
pub use pod::{POD_UPDATE_FORBIDDEN, validate_pod_create, validate_pod_spec, validate_pod_template_spec, validate_pod_update};
pub use secret::{validate_secret, validate_secret_update};
pub use serviceaccount::validate_service_account;

/// ValidateObjectMeta: the object's `metadata` checked with the kind's name rule; a missing
/// `metadata` is itself the error.
pub fn validate_object_meta(obj: &Value, namespaced: bool, name_rule: fn(&str) -> Vec<String>) -> Vec<FieldError> {
    match obj.get("metadata") {
        Some(meta) => apimachinery::validation::validate_object_meta(meta, namespaced, name_rule, "metadata"),
        None => vec![FieldError::required("metadata", "")],
    }
}
