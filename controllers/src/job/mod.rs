//! Mirrors pkg/controller/job: the Job controller ([`job_controller`]), the failure backoff
//! before failed pods are replaced ([`backoff_utils`]), Indexed Jobs' completion indexes
//! ([`indexed_job_utils`]), the finalizer removals it waits to see ([`tracking_utils`]) and
//! when a Job is finished ([`util`]).

pub mod backoff_utils;
pub mod indexed_job_utils;
pub mod job_controller;
pub mod tracking_utils;
pub mod util;

pub use job_controller::JobController;
