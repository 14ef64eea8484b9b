//! Mirrors pkg/registry/rbac/role: namespaced lists of rules.

pub mod strategy;
