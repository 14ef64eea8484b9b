//! Mirrors pkg/registry/batch/cronjob.

pub mod printer;
pub mod strategy;
