//! Mirrors pkg/registry/storage/csinode/strategy.go: one CSINode per node, named after it,
//! written by the node's agent as drivers register (no status); validated by the `api` crate.

use k8s_openapi::api::storage::v1::CSINode;
use serde_json::Value;

use super::printer::CSINODE_PRINTER;
use crate::error::Cause;
use crate::registry::generic::strategy::{ResourceInfo, Strategy, causes};
use crate::registry::generic::typed::Typed;

pub static CSINODES: ResourceInfo = ResourceInfo {
    group: "storage.k8s.io",
    version: "v1",
    kind: "CSINode",
    plural: "csinodes",
    singular: "csinode",
    namespaced: false,
    short_names: &[],
    storage_name: "csinodes",
    subresources: &[],
    categories: &[],
    codec: &Typed::<CSINode>::NEW,
    printer: &CSINODE_PRINTER,
};

pub struct CSINodeStrategy;

impl Strategy for CSINodeStrategy {
    fn info(&self) -> &'static ResourceInfo {
        &CSINODES
    }

    /// A delete answers with the object deleted, not a Status (its store's ReturnDeletedObject),
    /// which the typed clients decode.
    fn return_deleted_object(&self) -> bool {
        true
    }

    fn validate(&self, obj: &Value) -> Vec<Cause> {
        causes(api::storage::validation::validate_csi_node(obj))
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<Cause> {
        causes(api::storage::validation::validate_csi_node_update(new, old))
    }
}
