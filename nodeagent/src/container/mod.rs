//! Mirrors kubelet's pkg/kubelet/container: the runtime-neutral view of pods and containers that
//! the rest of the node agent works with.

pub mod runtime;

pub use runtime::*;
