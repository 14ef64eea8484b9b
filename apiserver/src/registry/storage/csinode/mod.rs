//! Mirrors pkg/registry/storage/csinode.

pub mod printer;
pub mod strategy;
