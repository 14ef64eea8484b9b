//! Mirrors pkg/registry/rbac/clusterrole: cluster-wide lists of rules, some aggregated from
//! others.

pub mod strategy;
