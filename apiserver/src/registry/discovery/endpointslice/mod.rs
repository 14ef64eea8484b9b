//! Mirrors pkg/registry/discovery/endpointslice.

pub mod printer;
pub mod strategy;
