//! Mirrors pkg/registry/policy/poddisruptionbudget/strategy.go: validated by the `api` crate
//! ([`api::policy::validation`]); a new budget starts with an empty status, which the disruption
//! controller fills (`disruptionsAllowed`, the pods it counts healthy).

use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use serde_json::Value;

use super::printer::PodDisruptionBudgetPrinter;
use crate::error::Cause;
use crate::registry::generic::strategy::{ResourceInfo, Strategy, Subresource, causes, reset_status};
use crate::registry::generic::typed::{Object, Typed};

pub static PODDISRUPTIONBUDGETS: ResourceInfo = ResourceInfo {
    group: "policy",
    version: "v1",
    kind: "PodDisruptionBudget",
    plural: "poddisruptionbudgets",
    singular: "poddisruptionbudget",
    namespaced: true,
    short_names: &["pdb"],
    storage_name: "poddisruptionbudgets",
    subresources: &[Subresource { name: "status", group: "policy", version: "v1", kind: "PodDisruptionBudget", verbs: &["get", "patch", "update"] }],
    categories: &[],
    codec: &Typed::<PodDisruptionBudget>::NEW,
    printer: &PodDisruptionBudgetPrinter,
};

pub struct PodDisruptionBudgetStrategy;

impl Strategy for PodDisruptionBudgetStrategy {
    fn info(&self) -> &'static ResourceInfo {
        &PODDISRUPTIONBUDGETS
    }

    fn prepare_for_create(&self, obj: &mut Object) {
        reset_status(obj);
    }

    fn validate(&self, obj: &Value) -> Vec<Cause> {
        causes(api::policy::validation::validate_pod_disruption_budget(obj))
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<Cause> {
        causes(api::policy::validation::validate_pod_disruption_budget_update(new, old))
    }
}
