//! Mirrors pkg/registry/rbac/clusterrolebinding/strategy.go: validated by the `api` crate
//! ([`api::rbac::validation::validate_cluster_role_binding`]), whose update check refuses a new
//! `roleRef`; defaulted by [`api::rbac::v1::defaults::set_defaults_cluster_role_binding`]
//! (the groups left out), on updates too.

use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use serde_json::Value;

use super::printer::ClusterRoleBindingPrinter;
use crate::error::{Cause, Result};
use crate::registry::rbac::escalation;
use crate::registry::generic::strategy::{Writer, ResourceInfo, Strategy, causes, set_defaults_on_update};
use crate::registry::generic::typed::{Object, Typed};

pub static CLUSTERROLEBINDINGS: ResourceInfo = ResourceInfo {
    group: "rbac.authorization.k8s.io",
    version: "v1",
    kind: "ClusterRoleBinding",
    plural: "clusterrolebindings",
    singular: "clusterrolebinding",
    namespaced: false,
    short_names: &[],
    storage_name: "clusterrolebindings",
    subresources: &[],
    categories: &[],
    codec: &Typed::<ClusterRoleBinding>::NEW,
    printer: &ClusterRoleBindingPrinter,
};

pub struct ClusterRoleBindingStrategy;

impl Strategy for ClusterRoleBindingStrategy {
    fn info(&self) -> &'static ResourceInfo {
        &CLUSTERROLEBINDINGS
    }

    fn set_defaults(&self, obj: &mut Object) {
        if let Some(b) = obj.typed_mut::<ClusterRoleBinding>() {
            api::rbac::v1::defaults::set_defaults_cluster_role_binding(b);
        }
    }

    /// The defaults again, as Kubernetes' decoder gives them to every object it reads: a
    /// `roleRef` sent without its group is the stored one, not a change of it.
    fn prepare_for_update(&self, new: &mut Value, _old: &Value) {
        set_defaults_on_update(self, new);
    }

    fn validate(&self, obj: &Value) -> Vec<Cause> {
        causes(api::rbac::validation::validate_cluster_role_binding(obj))
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<Cause> {
        causes(api::rbac::validation::validate_cluster_role_binding_update(new, old))
    }

    fn check_writer(&self, writer: &Writer<'_>, obj: &Value) -> Result<()> {
        escalation::check_binding(writer, &CLUSTERROLEBINDINGS, obj)
    }
}
