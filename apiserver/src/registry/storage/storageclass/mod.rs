//! Mirrors pkg/registry/storage/storageclass.

pub mod printer;
pub mod strategy;
