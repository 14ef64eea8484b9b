//! Mirrors pkg/registry/apps/daemonset/strategy.go: defaulted and validated by the `api` crate
//! ([`api::apps::v1::defaults::set_defaults_daemon_set`], [`api::apps::validation`]); a new
//! DaemonSet starts with an empty status; an update of the spec bumps `metadata.generation`, which
//! the daemonset controller answers with `status.observedGeneration`. (No scale: a DaemonSet's size
//! is its nodes.)

use k8s_openapi::api::apps::v1::DaemonSet;

use super::printer::DaemonSetPrinter;
use crate::registry::apps::status_subresource;
use crate::registry::generic::strategy::{ResourceInfo, StandardStrategy};
use crate::registry::generic::typed::Typed;

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

pub const DAEMONSET_STRATEGY: StandardStrategy = StandardStrategy {
    info: &DAEMONSETS,
    defaults: |obj| {
        if let Some(o) = obj.typed_mut::<DaemonSet>() {
            api::apps::v1::defaults::set_defaults_daemon_set(o);
        }
    },
    validate: api::apps::validation::validate_daemon_set,
    validate_update: api::apps::validation::validate_daemon_set_update,
};
