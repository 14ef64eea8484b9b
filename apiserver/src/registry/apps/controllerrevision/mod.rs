//! Mirrors pkg/registry/apps/controllerrevision.

pub mod printer;
pub mod strategy;
