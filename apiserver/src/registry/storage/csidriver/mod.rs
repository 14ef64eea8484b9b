//! Mirrors pkg/registry/storage/csidriver.

pub mod printer;
pub mod strategy;
