//! Mirrors pkg/registry/core/serviceaccount/strategy.go: validated by the `api` crate
//! ([`api::core::validation::validate_service_account`]), nothing else of its own.

use k8s_openapi::api::core::v1::ServiceAccount;
use serde_json::Value;

use super::printer::SERVICEACCOUNT_PRINTER;
use crate::error::Cause;
use crate::registry::generic::strategy::{ResourceInfo, Strategy, causes, Subresource};
use crate::registry::generic::typed::Typed;

pub static SERVICEACCOUNTS: ResourceInfo = ResourceInfo {
    group: "",
    version: "v1",
    kind: "ServiceAccount",
    plural: "serviceaccounts",
    singular: "serviceaccount",
    namespaced: true,
    short_names: &["sa"],
    storage_name: "serviceaccounts",
    subresources: &[Subresource { name: "token", group: "authentication.k8s.io", version: "v1", kind: "TokenRequest", verbs: &["create"] }],
    categories: &[],
    codec: &Typed::<ServiceAccount>::NEW,
    printer: &SERVICEACCOUNT_PRINTER,
};

/// `serviceaccount.DefaultServiceAccountName`: the service account every namespace gets, and
/// every pod runs as unless it names another.
pub const DEFAULT_SERVICE_ACCOUNT_NAME: &str = "default";

pub struct ServiceAccountStrategy;

impl Strategy for ServiceAccountStrategy {
    fn info(&self) -> &'static ResourceInfo {
        &SERVICEACCOUNTS
    }

    fn validate(&self, obj: &Value) -> Vec<Cause> {
        causes(api::core::validation::validate_service_account(obj))
    }
}
