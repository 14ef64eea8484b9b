//! Mirrors pkg/registry/apps/deployment.

pub mod printer;
pub mod strategy;
