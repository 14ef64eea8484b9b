//! Mirrors pkg/registry/core/event/strategy.go: validated by the `api` crate
//! ([`api::core::validation::validate_event_create`]), selectable by the involved object, and kept
//! for `--event-ttl` through a store lease.

use k8s_openapi::api::core::v1::Event;
use serde_json::Value;

use super::printer::EventPrinter;
use crate::error::Cause;
use crate::registry::generic::strategy::{GarbageCollectionPolicy, ResourceInfo, Strategy, causes, meta_field};
use crate::registry::generic::typed::Typed;

pub static EVENTS: ResourceInfo = ResourceInfo {
    group: "",
    version: "v1",
    kind: "Event",
    plural: "events",
    singular: "event",
    namespaced: true,
    short_names: &["ev"],
    storage_name: "events",
    subresources: &[],
    categories: &[],
    codec: &Typed::<Event>::NEW,
    printer: &EventPrinter,
};

/// Events live for `--event-ttl` (one hour by default), through a store lease.
pub struct EventStrategy {
    pub ttl_seconds: i64,
}

impl Strategy for EventStrategy {
    fn garbage_collection_policy(&self) -> GarbageCollectionPolicy {
        GarbageCollectionPolicy::Unsupported
    }

    fn info(&self) -> &'static ResourceInfo {
        &EVENTS
    }

    fn validate(&self, obj: &Value) -> Vec<Cause> {
        causes(api::core::validation::validate_event_create(obj))
    }

    fn field(&self, obj: &Value, field: &str) -> Option<String> {
        let s = |p: &str| Some(obj.pointer(p).and_then(Value::as_str).unwrap_or("").to_string());
        match field {
            "involvedObject.kind" => s("/involvedObject/kind"),
            "involvedObject.namespace" => s("/involvedObject/namespace"),
            "involvedObject.name" => s("/involvedObject/name"),
            "involvedObject.uid" => s("/involvedObject/uid"),
            "involvedObject.apiVersion" => s("/involvedObject/apiVersion"),
            "involvedObject.resourceVersion" => s("/involvedObject/resourceVersion"),
            "involvedObject.fieldPath" => s("/involvedObject/fieldPath"),
            "reason" => s("/reason"),
            "reportingComponent" => s("/reportingComponent"),
            "source" => s("/source/component"),
            "type" => s("/type"),
            f => meta_field(obj, f),
        }
    }

    fn supported_fields(&self) -> &'static [&'static str] {
        &[
            "metadata.name", "metadata.namespace", "involvedObject.kind", "involvedObject.namespace", "involvedObject.name",
            "involvedObject.uid", "involvedObject.apiVersion", "involvedObject.resourceVersion", "involvedObject.fieldPath",
            "reason", "reportingComponent", "source", "type",
        ]
    }

    fn ttl(&self) -> Option<i64> {
        Some(self.ttl_seconds)
    }
}
