//! Mirrors kubelet's pkg/kubelet/kuberuntime: the runtime manager that carries out SyncPod
//! through the CRI — sandboxes, containers, images, logs, garbage collection.

pub(crate) mod kuberuntime_container;
pub(crate) mod kuberuntime_gc;
pub(crate) mod kuberuntime_image;
pub(crate) mod kuberuntime_manager;
pub(crate) mod kuberuntime_sandbox;
pub(crate) mod labels;
pub(crate) mod logs;

pub(crate) use kuberuntime_manager::{RuntimeManager, SyncInputs};

#[cfg(test)]
mod kuberuntime_container_test;
