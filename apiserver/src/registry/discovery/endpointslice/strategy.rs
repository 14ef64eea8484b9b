//! Mirrors pkg/registry/discovery/endpointslice/strategy.go: each port's protocol defaults to TCP
//! (SetDefaults_EndpointSlice), validated by `api::discovery::validation` (the address type is
//! immutable); an update bumps the generation like any spec change does.

use serde_json::{Value, json};

use super::printer::EndpointSlicePrinter;
use crate::error::Cause;
use crate::registry::generic::strategy::{ResourceInfo, Strategy, causes};
use crate::registry::generic::typed::{Object, Typed};
use k8s_openapi::api::discovery::v1::EndpointSlice;

pub static ENDPOINTSLICES: ResourceInfo = ResourceInfo {
    group: "discovery.k8s.io",
    version: "v1",
    kind: "EndpointSlice",
    plural: "endpointslices",
    singular: "endpointslice",
    namespaced: true,
    short_names: &[],
    storage_name: "endpointslices",
    subresources: &[],
    categories: &[],
    codec: &Typed::<EndpointSlice>::NEW,
    printer: &EndpointSlicePrinter,
};

pub struct EndpointSliceStrategy;

/// SetDefaults_EndpointSlice: a port without a protocol is TCP, without a name "".
fn set_defaults(obj: &mut Value) {
    for port in obj.get_mut("ports").and_then(Value::as_array_mut).into_iter().flatten() {
        if port.get("protocol").is_none_or(Value::is_null) {
            port["protocol"] = json!("TCP");
        }
        if port.get("name").is_none_or(Value::is_null) {
            port["name"] = json!("");
        }
    }
}

impl Strategy for EndpointSliceStrategy {
    fn info(&self) -> &'static ResourceInfo {
        &ENDPOINTSLICES
    }

    /// A slice's watch events are steps of its Service (`kubelab trace svc/<name>`).
    fn traced(&self) -> bool {
        true
    }

    fn set_defaults(&self, obj: &mut Object) {
        set_defaults(obj.json_mut());
    }

    fn validate(&self, obj: &Value) -> Vec<Cause> {
        causes(api::discovery::validation::validate_endpoint_slice(obj))
    }

    fn prepare_for_update(&self, new: &mut Value, _old: &Value) {
        set_defaults(new);
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<Cause> {
        causes(api::discovery::validation::validate_endpoint_slice_update(new, old))
    }
}
