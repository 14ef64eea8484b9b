//! Mirrors pkg/apis/rbac/v1.

pub mod defaults;
