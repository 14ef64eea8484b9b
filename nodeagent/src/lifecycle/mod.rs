//! Mirrors kubelet's pkg/kubelet/lifecycle: the checks a pod passes before the node agent runs it.

pub mod predicate;
