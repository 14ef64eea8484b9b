//! Mirrors pkg/registry/core/configmap/strategy.go: validated by the `api` crate
//! ([`api::core::validation::validate_config_map`]), nothing else of its own.

use k8s_openapi::api::core::v1::ConfigMap;
use serde_json::Value;

use super::printer::CONFIGMAP_PRINTER;
use crate::error::Cause;
use crate::registry::generic::strategy::{ResourceInfo, Strategy, causes};
use crate::registry::generic::typed::Typed;

pub static CONFIGMAPS: ResourceInfo = ResourceInfo {
    group: "",
    version: "v1",
    kind: "ConfigMap",
    plural: "configmaps",
    singular: "configmap",
    namespaced: true,
    short_names: &["cm"],
    storage_name: "configmaps",
    subresources: &[],
    categories: &[],
    codec: &Typed::<ConfigMap>::NEW,
    printer: &CONFIGMAP_PRINTER,
};

pub struct ConfigMapStrategy;

impl Strategy for ConfigMapStrategy {
    fn info(&self) -> &'static ResourceInfo {
        &CONFIGMAPS
    }

    fn validate(&self, obj: &Value) -> Vec<Cause> {
        causes(api::core::validation::validate_config_map(obj))
    }
}
