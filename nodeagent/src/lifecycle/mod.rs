//! Mirrors kubelet's pkg/kubelet/lifecycle: the checks a pod passes before the node agent runs it
//! ([`predicate`]) and the container lifecycle hooks ([`handlers`]).

pub(crate) mod handlers;
pub(crate) mod predicate;
