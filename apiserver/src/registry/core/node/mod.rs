//! Mirrors pkg/registry/core/node: nodes, registered by their node agents, and where a node's
//! agent answers (for the pod subresources that reach it: log, exec, attach, portforward); and
//! `nodes/proxy` ([`proxy`]), to the agent itself.

pub mod kubelet_client;
pub mod printer;
pub mod proxy;
pub mod strategy;
