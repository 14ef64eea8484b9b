//! Mirrors pkg/registry/storage/volumeattachment.

pub mod printer;
pub mod strategy;
