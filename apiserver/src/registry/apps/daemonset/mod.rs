//! Mirrors pkg/registry/apps/daemonset.

pub mod printer;
pub mod strategy;
