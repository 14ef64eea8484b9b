//! Mirrors pkg/registry/batch/cronjob/strategy.go: defaulted and validated by the `api` crate
//! ([`api::batch::v1::defaults::set_defaults_cron_job`], [`api::batch::validation`]); a new CronJob
//! starts with an empty status.

use k8s_openapi::api::batch::v1::CronJob;

use super::printer::CronJobPrinter;
use crate::registry::batch::status_subresource;
use crate::registry::generic::strategy::{ResourceInfo, StandardStrategy};
use crate::registry::generic::typed::Typed;

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

pub const CRONJOB_STRATEGY: StandardStrategy = StandardStrategy {
    info: &CRONJOBS,
    defaults: |obj| {
        if let Some(o) = obj.typed_mut::<CronJob>() {
            api::batch::v1::defaults::set_defaults_cron_job(o);
        }
    },
    validate: api::batch::validation::validate_cron_job,
    validate_update: api::batch::validation::validate_cron_job_update,
};
