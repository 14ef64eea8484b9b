//! Mirrors pkg/registry/coordination/lease/strategy.go: validated by the `api` crate
//! ([`api::coordination::validation::validate_lease`]), nothing else of its own.

use k8s_openapi::api::coordination::v1::Lease;
use serde_json::Value;

use super::printer::LEASE_PRINTER;
use crate::error::Cause;
use crate::registry::generic::strategy::{ResourceInfo, Strategy, causes};
use crate::registry::generic::typed::Typed;

/// The namespace of the nodes' heartbeat Leases, one a node, named after it
/// (`api.NamespaceNodeLease`).
pub const NAMESPACE_NODE_LEASE: &str = "kube-node-lease";

pub static LEASES: ResourceInfo = ResourceInfo {
    group: "coordination.k8s.io",
    version: "v1",
    kind: "Lease",
    plural: "leases",
    singular: "lease",
    namespaced: true,
    short_names: &[],
    storage_name: "leases",
    subresources: &[],
    categories: &[],
    codec: &Typed::<Lease>::NEW,
    printer: &LEASE_PRINTER,
};

pub struct LeaseStrategy;

impl Strategy for LeaseStrategy {
    fn info(&self) -> &'static ResourceInfo {
        &LEASES
    }

    fn validate(&self, obj: &Value) -> Vec<Cause> {
        causes(api::coordination::validation::validate_lease(obj))
    }
}
