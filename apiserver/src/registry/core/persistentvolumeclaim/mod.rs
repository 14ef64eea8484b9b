//! Mirrors pkg/registry/core/persistentvolumeclaim.

pub mod printer;
pub mod strategy;
