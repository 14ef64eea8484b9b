//! Mirrors pkg/registry/policy/poddisruptionbudget.

pub mod printer;
pub mod strategy;
