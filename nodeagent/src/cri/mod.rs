//! The Container Runtime Interface: a client to containerd's CRI plugin over its unix socket
//! ([`remote_runtime`]) and, for tests, an in-process fake runtime ([`fake`]).

pub mod containerd_config;
pub mod fake;
pub mod remote_runtime;

pub use k8s_cri::v1 as api;
pub use remote_runtime::RemoteRuntime;
