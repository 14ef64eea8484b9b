//! Mirrors pkg/registry/batch/job/strategy.go: defaulted and validated by the `api` crate
//! ([`api::batch::v1::defaults::set_defaults_job`], [`api::batch::validation`]); a new Job
//! starts with an empty status and, unless `spec.manualSelector` is true, with a selector the
//! server generates (`generateSelector`): the Job's UID in `batch.kubernetes.io/controller-uid`,
//! put into the template's labels along with the Job's name (and their legacy unprefixed forms),
//! so a Job's pods can never be confused with another's.

use k8s_openapi::api::batch::v1::Job;
use serde_json::{Value, json};

use super::printer::JobPrinter;
use crate::error::Cause;
use crate::registry::batch::status_subresource;
use crate::registry::generic::strategy::{GarbageCollectionPolicy, ResourceInfo, Strategy, causes, keep_status, reset_status, set_defaults_on_update};
use crate::registry::generic::typed::{Object, Typed};

/// The labels a generated selector is made of (batch/v1's well-known labels).
pub const CONTROLLER_UID_LABEL: &str = "batch.kubernetes.io/controller-uid";
pub const JOB_NAME_LABEL: &str = "batch.kubernetes.io/job-name";
pub const LEGACY_CONTROLLER_UID_LABEL: &str = "controller-uid";
pub const LEGACY_JOB_NAME_LABEL: &str = "job-name";

pub static JOBS: ResourceInfo = ResourceInfo {
    group: "batch",
    version: "v1",
    kind: "Job",
    plural: "jobs",
    singular: "job",
    namespaced: true,
    short_names: &[],
    storage_name: "jobs",
    subresources: &[status_subresource("Job")],
    categories: &["all"],
    codec: &Typed::<Job>::NEW,
    printer: &JobPrinter,
};

pub struct JobStrategy;

impl Strategy for JobStrategy {
    /// batch/v1 Jobs orphan their pods unless asked otherwise (kept for compatibility, with a
    /// warning on such a delete: `endpoints/handlers/delete.rs`).
    fn garbage_collection_policy(&self) -> GarbageCollectionPolicy {
        GarbageCollectionPolicy::OrphanDependents
    }

    fn warnings_on_delete(&self, propagation_given: bool) -> Vec<String> {
        if propagation_given {
            return Vec::new();
        }
        vec!["child pods are preserved by default when jobs are deleted; set propagationPolicy=Background to remove them or set propagationPolicy=Orphan to suppress this warning".into()]
    }

    fn info(&self) -> &'static ResourceInfo {
        &JOBS
    }

    fn set_defaults(&self, obj: &mut Object) {
        if let Some(job) = obj.typed_mut::<Job>() {
            api::batch::v1::defaults::set_defaults_job(job);
        }
    }

    fn prepare_for_create(&self, obj: &mut Object) {
        reset_status(obj);
        let job = obj.json_mut();
        if job.pointer("/spec/manualSelector").and_then(Value::as_bool) != Some(true) {
            generate_selector(job);
        }
    }

    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        set_defaults_on_update(self, new);
        keep_status(new, old);
    }

    fn validate(&self, obj: &Value) -> Vec<Cause> {
        causes(api::batch::validation::validate_job(obj))
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<Cause> {
        causes(api::batch::validation::validate_job_update(new, old))
    }
}

/// generateSelector: the template gets the job-name labels (where the user set none) and the
/// controller-uid ones; the selector selects the UID. A selector or label the user wrote that
/// contradicts them is left for validation to refuse (the selector would not match the template).
fn generate_selector(job: &mut Value) {
    let uid = job.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or("").to_string();
    let name = job.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("").to_string();
    let Some(spec) = job.get_mut("spec").and_then(Value::as_object_mut) else { return };
    let template = spec.entry("template").or_insert_with(|| json!({}));
    if !template.get("metadata").is_some_and(Value::is_object) {
        template["metadata"] = json!({});
    }
    let meta = &mut template["metadata"];
    if !meta.get("labels").is_some_and(Value::is_object) {
        meta["labels"] = json!({});
    }
    if let Some(labels) = meta["labels"].as_object_mut() {
        for (key, value) in [(LEGACY_JOB_NAME_LABEL, &name), (JOB_NAME_LABEL, &name), (LEGACY_CONTROLLER_UID_LABEL, &uid), (CONTROLLER_UID_LABEL, &uid)] {
            labels.entry(key).or_insert_with(|| json!(value));
        }
    }
    let selector = spec.entry("selector").or_insert_with(|| json!({}));
    if !selector.is_object() {
        *selector = json!({});
    }
    if !selector.get("matchLabels").is_some_and(Value::is_object) {
        selector["matchLabels"] = json!({});
    }
    if let Some(match_labels) = selector["matchLabels"].as_object_mut() {
        match_labels.entry(CONTROLLER_UID_LABEL).or_insert_with(|| json!(uid));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_generated_selector_selects_the_jobs_uid() {
        let mut job = json!({"metadata": {"name": "pi", "uid": "u1"}, "spec": {"template": {"metadata": {"labels": {"app": "pi"}}, "spec": {}}}});
        generate_selector(&mut job);
        assert_eq!(job["spec"]["selector"], json!({"matchLabels": {"batch.kubernetes.io/controller-uid": "u1"}}));
        assert_eq!(
            job["spec"]["template"]["metadata"]["labels"],
            json!({"app": "pi", "batch.kubernetes.io/controller-uid": "u1", "batch.kubernetes.io/job-name": "pi", "controller-uid": "u1", "job-name": "pi"})
        );
        // A label the user set stays (a contradiction is validation's to refuse).
        let mut own = json!({"metadata": {"name": "pi", "uid": "u1"}, "spec": {"template": {"metadata": {"labels": {"job-name": "mine"}}}}});
        generate_selector(&mut own);
        assert_eq!(own["spec"]["template"]["metadata"]["labels"]["job-name"], json!("mine"));
    }
}
