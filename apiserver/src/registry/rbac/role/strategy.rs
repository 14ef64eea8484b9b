//! Mirrors pkg/registry/rbac/role/strategy.go: validated by the `api` crate
//! ([`api::rbac::validation::validate_role`]), nothing else of its own. Its table is the default
//! one (NAME, CREATED AT), as role/storage/storage.go asks for: printers.go has no Role printer.

use k8s_openapi::api::rbac::v1::Role;
use serde_json::Value;

use crate::error::{Cause, Result};
use crate::printers::tablegenerator::DefaultTableConvertor;
use crate::registry::rbac::escalation;
use crate::registry::generic::strategy::{Writer, ResourceInfo, Strategy, causes};
use crate::registry::generic::typed::Typed;

pub static ROLES: ResourceInfo = ResourceInfo {
    group: "rbac.authorization.k8s.io",
    version: "v1",
    kind: "Role",
    plural: "roles",
    singular: "role",
    namespaced: true,
    short_names: &[],
    storage_name: "roles",
    subresources: &[],
    categories: &[],
    codec: &Typed::<Role>::NEW,
    printer: &DefaultTableConvertor,
};

pub struct RoleStrategy;

impl Strategy for RoleStrategy {
    fn info(&self) -> &'static ResourceInfo {
        &ROLES
    }

    fn validate(&self, obj: &Value) -> Vec<Cause> {
        causes(api::rbac::validation::validate_role(obj))
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<Cause> {
        causes(api::rbac::validation::validate_role_update(new, old))
    }

    fn check_writer(&self, writer: &Writer<'_>, obj: &Value) -> Result<()> {
        escalation::check_role(writer, &ROLES, obj)
    }
}
