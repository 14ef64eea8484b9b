//! Mirrors pkg/registry/core/endpoint/strategy.go: defaulted (TCP ports) and validated
//! (`api::core::validation::validate_endpoints`: no loopback or link-local addresses) on create
//! and update alike; no status.

use k8s_openapi::api::core::v1::Endpoints;
use serde_json::Value;

use super::printer::EndpointsPrinter;
use crate::error::Cause;
use crate::registry::generic::strategy::{ResourceInfo, Strategy, causes, set_defaults_on_update};
use crate::registry::generic::typed::{Object, Typed};

pub static ENDPOINTS: ResourceInfo = ResourceInfo {
    group: "",
    version: "v1",
    kind: "Endpoints",
    plural: "endpoints",
    singular: "endpoints",
    namespaced: true,
    short_names: &["ep"],
    storage_name: "services/endpoints",
    subresources: &[],
    categories: &[],
    codec: &Typed::<Endpoints>::NEW,
    printer: &EndpointsPrinter,
};

pub struct EndpointsStrategy;

impl Strategy for EndpointsStrategy {
    fn info(&self) -> &'static ResourceInfo {
        &ENDPOINTS
    }

    fn set_defaults(&self, obj: &mut Object) {
        if let Some(ep) = obj.typed_mut::<Endpoints>() {
            api::core::v1::defaults::set_defaults_endpoints(ep);
        }
    }

    fn validate(&self, obj: &Value) -> Vec<Cause> {
        causes(api::core::validation::validate_endpoints(obj))
    }

    fn prepare_for_update(&self, new: &mut Value, _old: &Value) {
        set_defaults_on_update(self, new);
    }
}
