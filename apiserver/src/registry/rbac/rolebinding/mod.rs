//! Mirrors pkg/registry/rbac/rolebinding: a Role or ClusterRole granted within one namespace.

pub mod printer;
pub mod strategy;
