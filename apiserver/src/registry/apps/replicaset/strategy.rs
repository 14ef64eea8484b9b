//! Mirrors pkg/registry/apps/replicaset/strategy.go: defaulted and validated by the `api` crate
//! ([`api::apps::v1::defaults::set_defaults_replica_set`], [`api::apps::validation`]); a new
//! ReplicaSet starts with an empty status; an update of the spec bumps `metadata.generation`, which
//! the replicaset controller answers with `status.observedGeneration`.

use k8s_openapi::api::apps::v1::ReplicaSet;

use super::printer::ReplicaSetPrinter;
use crate::registry::apps::{SCALE_SUBRESOURCE, status_subresource};
use crate::registry::generic::strategy::{ResourceInfo, StandardStrategy};
use crate::registry::generic::typed::Typed;

pub static REPLICASETS: ResourceInfo = ResourceInfo {
    group: "apps",
    version: "v1",
    kind: "ReplicaSet",
    plural: "replicasets",
    singular: "replicaset",
    namespaced: true,
    short_names: &["rs"],
    storage_name: "replicasets",
    subresources: &[status_subresource("ReplicaSet"), SCALE_SUBRESOURCE],
    categories: &["all"],
    codec: &Typed::<ReplicaSet>::NEW,
    printer: &ReplicaSetPrinter,
};

pub const REPLICASET_STRATEGY: StandardStrategy = StandardStrategy {
    info: &REPLICASETS,
    defaults: |obj| {
        if let Some(o) = obj.typed_mut::<ReplicaSet>() {
            api::apps::v1::defaults::set_defaults_replica_set(o);
        }
    },
    validate: api::apps::validation::validate_replica_set,
    validate_update: api::apps::validation::validate_replica_set_update,
};
