//! Mirrors pkg/registry/apps/controllerrevision/strategy.go: validated by the `api` crate
//! ([`api::apps::validation::validate_controller_revision`]); its `data` never changes once
//! written. A DaemonSet or StatefulSet controller writes one per template it has run, named
//! `<owner>-<hash>`, so `kubectl rollout history` and `undo` can find a past template.

use k8s_openapi::api::apps::v1::ControllerRevision;
use serde_json::Value;

use super::printer::ControllerRevisionPrinter;
use crate::error::Cause;
use crate::registry::generic::strategy::{ResourceInfo, Strategy, causes};
use crate::registry::generic::typed::Typed;

pub static CONTROLLERREVISIONS: ResourceInfo = ResourceInfo {
    group: "apps",
    version: "v1",
    kind: "ControllerRevision",
    plural: "controllerrevisions",
    singular: "controllerrevision",
    namespaced: true,
    short_names: &[],
    storage_name: "controllerrevisions",
    subresources: &[],
    categories: &[],
    codec: &Typed::<ControllerRevision>::NEW,
    printer: &ControllerRevisionPrinter,
};

pub struct ControllerRevisionStrategy;

impl Strategy for ControllerRevisionStrategy {
    fn info(&self) -> &'static ResourceInfo {
        &CONTROLLERREVISIONS
    }

    fn validate(&self, obj: &Value) -> Vec<Cause> {
        causes(api::apps::validation::validate_controller_revision(obj))
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<Cause> {
        causes(api::apps::validation::validate_controller_revision_update(new, old))
    }
}
