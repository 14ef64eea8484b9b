//! Mirrors pkg/registry/apps/daemonset/strategy.go: defaulted and validated by the `api` crate
//! ([`api::apps::v1::defaults::set_defaults_daemon_set`], [`api::apps::validation`]); a new DaemonSet starts with an empty status; an update of the spec bumps `metadata.generation`, which the daemonset controller answers with `status.observedGeneration`. (No scale: a DaemonSet's size is its nodes.)

use k8s_openapi::api::apps::v1::DaemonSet;
use serde_json::Value;

use super::printer::DaemonSetPrinter;
use crate::error::Cause;
use crate::registry::apps::{status_subresource};
use crate::registry::generic::strategy::{ResourceInfo, Strategy, causes, keep_status, reset_status, set_defaults_on_update};
use crate::registry::generic::typed::{Object, Typed};

pub static DAEMONSETS: ResourceInfo = ResourceInfo {
    group: "apps",
    version: "v1",
    kind: "DaemonSet",
    plural: "daemonsets",
    singular: "daemonset",
    namespaced: true,
    short_names: &["ds"],
    storage_name: "daemonsets",
    subresources: &[status_subresource("DaemonSet")],
    categories: &["all"],
    codec: &Typed::<DaemonSet>::NEW,
    printer: &DaemonSetPrinter,
};

pub struct DaemonSetStrategy;

impl Strategy for DaemonSetStrategy {
    fn info(&self) -> &'static ResourceInfo {
        &DAEMONSETS
    }

    fn set_defaults(&self, obj: &mut Object) {
        if let Some(o) = obj.typed_mut::<DaemonSet>() {
            api::apps::v1::defaults::set_defaults_daemon_set(o);
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
        causes(api::apps::validation::validate_daemon_set(obj))
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<Cause> {
        causes(api::apps::validation::validate_daemon_set_update(new, old))
    }
}
