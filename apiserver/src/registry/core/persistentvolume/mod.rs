//! Mirrors pkg/registry/core/persistentvolume.

pub mod printer;
pub mod strategy;
