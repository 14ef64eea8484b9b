//! Mirrors pkg/registry/coordination: the resources of `coordination.k8s.io`.

pub mod lease;
