//! Mirrors pkg/registry/policy: the resources of `policy/v1` — PodDisruptionBudgets, which the
//! eviction subresource of pods (pods/eviction) consults before it deletes a pod.

pub mod poddisruptionbudget;
