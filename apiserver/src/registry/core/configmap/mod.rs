//! Mirrors pkg/registry/core/configmap: configmaps, which have no behaviour beyond their
//! validation.

pub mod printer;
pub mod strategy;
