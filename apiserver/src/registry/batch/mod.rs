//! Mirrors pkg/registry/batch: the resources of `batch/v1` — Jobs, which run pods to completion,
//! and CronJobs, which create Jobs on a schedule.

pub mod cronjob;
pub mod job;

use crate::registry::generic::strategy::Subresource;

/// `<job or cronjob>/status`.
pub const fn status_subresource(kind: &'static str) -> Subresource {
    Subresource { name: "status", group: "batch", version: "v1", kind, verbs: &["get", "patch", "update"] }
}
