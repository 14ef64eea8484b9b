//! Mirrors pkg/registry/apps/deployment/strategy.go: defaulted and validated by the `api` crate
//! ([`api::apps::v1::defaults::set_defaults_deployment`], [`api::apps::validation`]); a new
//! Deployment starts with an empty status; an update of the spec bumps `metadata.generation` (the
//! generic store), which the deployment controller answers with `status.observedGeneration` — what
//! `kubectl rollout status` waits for.

use k8s_openapi::api::apps::v1::Deployment;

use super::printer::DeploymentPrinter;
use crate::registry::apps::{SCALE_SUBRESOURCE, status_subresource};
use crate::registry::generic::strategy::{ResourceInfo, StandardStrategy};
use crate::registry::generic::typed::Typed;

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

pub const DEPLOYMENT_STRATEGY: StandardStrategy = StandardStrategy {
    info: &DEPLOYMENTS,
    defaults: |obj| {
        if let Some(o) = obj.typed_mut::<Deployment>() {
            api::apps::v1::defaults::set_defaults_deployment(o);
        }
    },
    validate: api::apps::validation::validate_deployment,
    validate_update: api::apps::validation::validate_deployment_update,
};
