//! Mirrors pkg/registry/batch/job.

pub mod printer;
pub mod strategy;
