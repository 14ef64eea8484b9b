//! Mirrors pkg/registry/rbac/clusterrolebinding: a ClusterRole granted in every namespace.

pub mod printer;
pub mod strategy;
