//! Mirrors pkg/registry/apps/daemonset/strategy.go: defaulted and validated by the `api` crate
//! ([`api::apps::v1::defaults::set_defaults_daemon_set`], [`api::apps::validation`]); a new
//! DaemonSet starts with an empty status; an update of the spec bumps `metadata.generation`, which
//! the daemonset controller answers with `status.observedGeneration`. (No scale: a DaemonSet's size
//! is its nodes.)
//!
//! The template generation (the internal `spec.templateGeneration`, which apps/v1 carries as the
//! `deprecated.daemonset.template.generation` annotation) starts at 1 and goes up by one with
//! each change of the pod template; the daemonset controller labels its pods with it
//! (`pod-template-generation`).

use k8s_openapi::api::apps::v1::DaemonSet;
use serde_json::Value;

use super::printer::DaemonSetPrinter;
use crate::registry::apps::status_subresource;
use crate::error::Cause;
use crate::registry::generic::strategy::{ResourceInfo, StandardStrategy, Strategy};
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

/// The annotation that holds the template generation.
pub const TEMPLATE_GENERATION_ANNOTATION: &str = "deprecated.daemonset.template.generation";

const STANDARD: StandardStrategy = StandardStrategy {
    info: &DAEMONSETS,
    defaults: |obj| {
        if let Some(o) = obj.typed_mut::<DaemonSet>() {
            api::apps::v1::defaults::set_defaults_daemon_set(o);
        }
    },
    validate: api::apps::validation::validate_daemon_set,
    validate_update: api::apps::validation::validate_daemon_set_update,
};

/// daemonSetStrategy: the standard workload strategy, plus the template generation.
pub struct DaemonSetStrategy;

pub const DAEMONSET_STRATEGY: DaemonSetStrategy = DaemonSetStrategy;

fn template_generation(obj: &Value) -> Option<i64> {
    obj.pointer("/metadata/annotations")?.get(TEMPLATE_GENERATION_ANNOTATION)?.as_str()?.parse().ok()
}

fn set_template_generation(obj: &mut Value, generation: i64) {
    let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) else { return };
    let annotations = meta.entry("annotations").or_insert_with(|| Value::Object(Default::default()));
    if let Some(a) = annotations.as_object_mut() {
        a.insert(TEMPLATE_GENERATION_ANNOTATION.into(), Value::String(generation.to_string()));
    }
}

impl Strategy for DaemonSetStrategy {
    fn info(&self) -> &'static ResourceInfo {
        STANDARD.info()
    }

    fn set_defaults(&self, obj: &mut Object) {
        STANDARD.set_defaults(obj);
    }

    /// PrepareForCreate: an empty status, and a template generation of at least 1.
    fn prepare_for_create(&self, obj: &mut Object) {
        STANDARD.prepare_for_create(obj);
        let json = obj.json_mut();
        let generation = template_generation(json).filter(|g| *g >= 1).unwrap_or(1);
        set_template_generation(json, generation);
    }

    /// PrepareForUpdate: the status kept; the template generation one more than the old one's
    /// when the template changed, the old one's otherwise.
    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        STANDARD.prepare_for_update(new, old);
        let old_generation = template_generation(old).unwrap_or(1);
        let changed = new.pointer("/spec/template") != old.pointer("/spec/template");
        set_template_generation(new, if changed { old_generation + 1 } else { old_generation });
    }

    fn validate(&self, obj: &Value) -> Vec<Cause> {
        STANDARD.validate(obj)
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<Cause> {
        STANDARD.validate_update(new, old)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_template_generation_follows_template_changes() {
        let ds = |image: &str| json!({"metadata": {"name": "d", "namespace": "default"}, "spec": {"selector": {"matchLabels": {"a": "b"}},
            "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": image}]}}}});
        let mut created = Object::new(ds("busybox"));
        DAEMONSET_STRATEGY.set_defaults(&mut created);
        DAEMONSET_STRATEGY.prepare_for_create(&mut created);
        let created = created.into_json();
        assert_eq!(template_generation(&created), Some(1));
        // The same template (a label added elsewhere): unchanged.
        let mut same = ds("busybox");
        same["metadata"]["labels"] = json!({"x": "y"});
        DAEMONSET_STRATEGY.prepare_for_update(&mut same, &created);
        assert_eq!(template_generation(&same), Some(1));
        // A new image: 2.
        let mut changed = ds("busybox:1.36");
        DAEMONSET_STRATEGY.prepare_for_update(&mut changed, &same);
        assert_eq!(template_generation(&changed), Some(2));
    }
}
