//! Mirrors kubelet's pkg/kubelet/kuberuntime: the runtime manager that carries out SyncPod
//! through the CRI — sandboxes, containers, images, logs, garbage collection.

pub mod kuberuntime_container;
pub mod kuberuntime_gc;
pub mod kuberuntime_image;
pub mod kuberuntime_manager;
pub mod kuberuntime_sandbox;
pub mod labels;
pub mod logs;

pub use kuberuntime_manager::{PodActions, PodSyncResult, RuntimeManager, SyncInputs, compute_pod_actions};

#[cfg(test)]
mod kuberuntime_container_test;
