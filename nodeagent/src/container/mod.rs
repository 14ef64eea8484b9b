//! Mirrors kubelet's pkg/kubelet/container: the runtime-neutral view of pods and containers that
//! the rest of the node agent works with.

pub(crate) mod runtime;

pub(crate) use runtime::*;
