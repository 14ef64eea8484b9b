//! Mirrors pkg/registry/apps/replicaset/strategy.go: defaulted and validated by the `api` crate
//! ([`api::apps::v1::defaults::set_defaults_replica_set`], [`api::apps::validation`]); a new ReplicaSet starts with an empty status; an update of the spec bumps `metadata.generation`, which the replicaset controller answers with `status.observedGeneration`.

use k8s_openapi::api::apps::v1::ReplicaSet;
use serde_json::Value;

use super::printer::ReplicaSetPrinter;
use crate::error::Cause;
use crate::registry::apps::{SCALE_SUBRESOURCE, status_subresource};
use crate::registry::generic::strategy::{ResourceInfo, Strategy, causes, keep_status, reset_status, set_defaults_on_update};
use crate::registry::generic::typed::{Object, Typed};

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

pub struct ReplicaSetStrategy;

impl Strategy for ReplicaSetStrategy {
    fn info(&self) -> &'static ResourceInfo {
        &REPLICASETS
    }

    fn set_defaults(&self, obj: &mut Object) {
        if let Some(o) = obj.typed_mut::<ReplicaSet>() {
            api::apps::v1::defaults::set_defaults_replica_set(o);
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
        causes(api::apps::validation::validate_replica_set(obj))
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<Cause> {
        causes(api::apps::validation::validate_replica_set_update(new, old))
    }
}
