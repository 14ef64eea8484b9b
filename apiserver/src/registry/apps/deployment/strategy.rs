//! Mirrors pkg/registry/apps/deployment/strategy.go: defaulted and validated by the `api` crate
//! ([`api::apps::v1::defaults::set_defaults_deployment`], [`api::apps::validation`]); a new
//! Deployment starts with an empty status; an update of the spec bumps `metadata.generation`
//! (the generic store), which the deployment controller answers with `status.observedGeneration`
//! — what `kubectl rollout status` waits for.

use k8s_openapi::api::apps::v1::Deployment;
use serde_json::Value;

use super::printer::DeploymentPrinter;
use crate::error::Cause;
use crate::registry::apps::{SCALE_SUBRESOURCE, status_subresource};
use crate::registry::generic::strategy::{ResourceInfo, Strategy, causes, keep_status, reset_status, set_defaults_on_update};
use crate::registry::generic::typed::{Object, Typed};

pub static DEPLOYMENTS: ResourceInfo = ResourceInfo {
    group: "apps",
    version: "v1",
    kind: "Deployment",
    plural: "deployments",
    singular: "deployment",
    namespaced: true,
    short_names: &["deploy"],
    storage_name: "deployments",
    subresources: &[status_subresource("Deployment"), SCALE_SUBRESOURCE],
    categories: &["all"],
    codec: &Typed::<Deployment>::NEW,
    printer: &DeploymentPrinter,
};

pub struct DeploymentStrategy;

impl Strategy for DeploymentStrategy {
    fn info(&self) -> &'static ResourceInfo {
        &DEPLOYMENTS
    }

    fn set_defaults(&self, obj: &mut Object) {
        if let Some(d) = obj.typed_mut::<Deployment>() {
            api::apps::v1::defaults::set_defaults_deployment(d);
        }
    }

    fn prepare_for_create(&self, obj: &mut Object) {
        reset_status(obj);
    }

    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        set_defaults_on_update(self, new);
        keep_status(new, old);
    }

    fn validate(&self, obj: &Value) -> Vec<Cause> {
        causes(api::apps::validation::validate_deployment(obj))
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<Cause> {
        causes(api::apps::validation::validate_deployment_update(new, old))
    }
}
