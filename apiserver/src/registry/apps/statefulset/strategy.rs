//! Mirrors pkg/registry/apps/statefulset/strategy.go: defaulted and validated by the `api` crate
//! ([`api::apps::v1::defaults::set_defaults_stateful_set`], [`api::apps::validation`]); a new StatefulSet starts with an empty status; an update of the spec bumps `metadata.generation`, which the statefulset controller answers with `status.observedGeneration`.

use k8s_openapi::api::apps::v1::StatefulSet;
use serde_json::Value;

use super::printer::StatefulSetPrinter;
use crate::error::Cause;
use crate::registry::apps::{SCALE_SUBRESOURCE, status_subresource};
use crate::registry::generic::strategy::{ResourceInfo, Strategy, causes, keep_status, reset_status, set_defaults_on_update};
use crate::registry::generic::typed::{Object, Typed};

pub static STATEFULSETS: ResourceInfo = ResourceInfo {
    group: "apps",
    version: "v1",
    kind: "StatefulSet",
    plural: "statefulsets",
    singular: "statefulset",
    namespaced: true,
    short_names: &["sts"],
    storage_name: "statefulsets",
    subresources: &[status_subresource("StatefulSet"), SCALE_SUBRESOURCE],
    categories: &["all"],
    codec: &Typed::<StatefulSet>::NEW,
    printer: &StatefulSetPrinter,
};

pub struct StatefulSetStrategy;

impl Strategy for StatefulSetStrategy {
    fn info(&self) -> &'static ResourceInfo {
        &STATEFULSETS
    }

    fn set_defaults(&self, obj: &mut Object) {
        if let Some(o) = obj.typed_mut::<StatefulSet>() {
            api::apps::v1::defaults::set_defaults_stateful_set(o);
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
        causes(api::apps::validation::validate_stateful_set(obj))
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<Cause> {
        causes(api::apps::validation::validate_stateful_set_update(new, old))
    }
}
