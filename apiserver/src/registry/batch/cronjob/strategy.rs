//! Mirrors pkg/registry/batch/cronjob/strategy.go: defaulted and validated by the `api` crate
//! ([`api::batch::v1::defaults::set_defaults_cron_job`], [`api::batch::validation`]); a new
//! CronJob starts with an empty status.

use k8s_openapi::api::batch::v1::CronJob;
use serde_json::Value;

use super::printer::CronJobPrinter;
use crate::error::Cause;
use crate::registry::batch::status_subresource;
use crate::registry::generic::strategy::{ResourceInfo, Strategy, causes, keep_status, reset_status, set_defaults_on_update};
use crate::registry::generic::typed::{Object, Typed};

pub static CRONJOBS: ResourceInfo = ResourceInfo {
    group: "batch",
    version: "v1",
    kind: "CronJob",
    plural: "cronjobs",
    singular: "cronjob",
    namespaced: true,
    short_names: &["cj"],
    storage_name: "cronjobs",
    subresources: &[status_subresource("CronJob")],
    categories: &["all"],
    codec: &Typed::<CronJob>::NEW,
    printer: &CronJobPrinter,
};

pub struct CronJobStrategy;

impl Strategy for CronJobStrategy {
    fn info(&self) -> &'static ResourceInfo {
        &CRONJOBS
    }

    fn set_defaults(&self, obj: &mut Object) {
        if let Some(cj) = obj.typed_mut::<CronJob>() {
            api::batch::v1::defaults::set_defaults_cron_job(cj);
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
        causes(api::batch::validation::validate_cron_job(obj))
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<Cause> {
        causes(api::batch::validation::validate_cron_job_update(new, old))
    }
}
