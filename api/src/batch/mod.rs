//! Mirrors pkg/apis/batch: Jobs and CronJobs.

pub mod cron;
pub mod v1;
pub mod validation;
