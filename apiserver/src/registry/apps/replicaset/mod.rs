//! Mirrors pkg/registry/apps/replicaset.

pub mod printer;
pub mod strategy;
