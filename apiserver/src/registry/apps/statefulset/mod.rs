//! Mirrors pkg/registry/apps/statefulset.

pub mod printer;
pub mod strategy;
