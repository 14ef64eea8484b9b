//! Mirrors pkg/registry/rbac/clusterrole/strategy.go: validated by the `api` crate
//! ([`api::rbac::validation::validate_cluster_role`]), nothing else of its own. Its table is the
//! default one (NAME, CREATED AT), as clusterrole/storage/storage.go asks for.
//!
//! An aggregated ClusterRole (one with an `aggregationRule`) is written like any other: the
//! rules its author sends are stored, and the ClusterRole aggregation controller then replaces
//! them with the union of the ClusterRoles its selectors match.

use k8s_openapi::api::rbac::v1::ClusterRole;
use serde_json::Value;

use crate::error::{Cause, Result};
use crate::printers::tablegenerator::DefaultTableConvertor;
use crate::registry::rbac::escalation;
use crate::registry::generic::strategy::{Writer, ResourceInfo, Strategy, causes};
use crate::registry::generic::typed::Typed;

pub static CLUSTERROLES: ResourceInfo = ResourceInfo {
    group: "rbac.authorization.k8s.io",
    version: "v1",
    kind: "ClusterRole",
    plural: "clusterroles",
    singular: "clusterrole",
    namespaced: false,
    short_names: &[],
    storage_name: "clusterroles",
    subresources: &[],
    categories: &[],
    codec: &Typed::<ClusterRole>::NEW,
    printer: &DefaultTableConvertor,
};

pub struct ClusterRoleStrategy;

impl Strategy for ClusterRoleStrategy {
    fn info(&self) -> &'static ResourceInfo {
        &CLUSTERROLES
    }

    fn validate(&self, obj: &Value) -> Vec<Cause> {
        causes(api::rbac::validation::validate_cluster_role(obj))
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<Cause> {
        causes(api::rbac::validation::validate_cluster_role_update(new, old))
    }

    fn check_writer(&self, writer: &Writer<'_>, obj: &Value) -> Result<()> {
        escalation::check_role(writer, &CLUSTERROLES, obj)
    }
}
