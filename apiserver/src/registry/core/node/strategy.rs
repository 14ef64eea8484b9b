//! Mirrors pkg/registry/core/node/strategy.go: nodes are cluster-scoped, kept under `minions`,
//! and registered by the node agent with their status; validated by the `api` crate.

use k8s_openapi::api::core::v1::Node;
use serde_json::Value;

use super::printer::NodePrinter;
use crate::error::Cause;
use crate::registry::generic::strategy::{ResourceInfo, Strategy, Subresource, causes, meta_field};
use crate::registry::generic::typed::Typed;
use api::core::validation::{validate_node, validate_node_update};

pub static NODES: ResourceInfo = ResourceInfo {
    group: "",
    version: "v1",
    kind: "Node",
    plural: "nodes",
    singular: "node",
    namespaced: false,
    short_names: &["no"],
    storage_name: "minions",
    subresources: &[
        Subresource { name: "status", group: "", version: "v1", kind: "Node", verbs: &["get", "patch", "update"] },
        Subresource { name: "proxy", group: "", version: "v1", kind: "NodeProxyOptions", verbs: &crate::registry::core::pod::strategy::PROXY_VERBS },
    ],
    categories: &[],
    codec: &Typed::<Node>::NEW,
    printer: &NodePrinter,
};

pub struct NodeStrategy;

impl Strategy for NodeStrategy {
    fn info(&self) -> &'static ResourceInfo {
        &NODES
    }

    fn validate(&self, obj: &Value) -> Vec<Cause> {
        causes(validate_node(obj))
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<Cause> {
        causes(validate_node_update(new, old))
    }

    fn field(&self, obj: &Value, field: &str) -> Option<String> {
        match field {
            "spec.unschedulable" => Some(obj.pointer("/spec/unschedulable").and_then(Value::as_bool).unwrap_or(false).to_string()),
            f => meta_field(obj, f),
        }
    }

    fn supported_fields(&self) -> &'static [&'static str] {
        &["metadata.name", "spec.unschedulable"]
    }
}
