//! Mirrors pkg/registry/core/pod: pods — their strategy, their columns, and the subresources
//! their own code serves.

pub mod printer;
pub mod strategy;
