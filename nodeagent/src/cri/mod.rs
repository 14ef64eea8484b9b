//! The Container Runtime Interface: a client to containerd's CRI plugin over its unix socket
//! ([`RemoteRuntime`], with the CRI messages as [`api`]), the containerd configuration the agent
//! expects ([`containerd_config`]) and, for the unit tests only (`#[cfg(test)]`: it is not in the node agent
//! the binary runs), an in-process fake runtime (`fake`).

pub mod containerd_config;
#[cfg(test)]
pub(crate) mod fake;
pub(crate) mod remote_runtime;

pub use k8s_cri::v1 as api;
pub use remote_runtime::RemoteRuntime;
