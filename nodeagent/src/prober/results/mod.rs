//! Mirrors kubelet's pkg/kubelet/prober/results: the cached probe results, one manager per
//! probe type.

pub(crate) mod results_manager;

pub(crate) use results_manager::{Manager, PodProbeResults, ProbeResult, Update};
