//! Mirrors pkg/registry/apps/statefulset/strategy.go: defaulted and validated by the `api` crate
//! ([`api::apps::v1::defaults::set_defaults_stateful_set`], [`api::apps::validation`]); a new
//! StatefulSet starts with an empty status; an update of the spec bumps `metadata.generation`,
//! which the statefulset controller answers with `status.observedGeneration`.

use k8s_openapi::api::apps::v1::StatefulSet;

use super::printer::StatefulSetPrinter;
use crate::registry::apps::{SCALE_SUBRESOURCE, status_subresource};
use crate::registry::generic::strategy::{ResourceInfo, StandardStrategy};
use crate::registry::generic::typed::Typed;

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

pub const STATEFULSET_STRATEGY: StandardStrategy = StandardStrategy {
    info: &STATEFULSETS,
    defaults: |obj| {
        if let Some(o) = obj.typed_mut::<StatefulSet>() {
            api::apps::v1::defaults::set_defaults_stateful_set(o);
        }
    },
    validate: api::apps::validation::validate_stateful_set,
    validate_update: api::apps::validation::validate_stateful_set_update,
};
