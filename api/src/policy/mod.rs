//! Mirrors pkg/apis/policy: the PodDisruptionBudget.

pub mod validation;
