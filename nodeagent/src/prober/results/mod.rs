//! Mirrors kubelet's pkg/kubelet/prober/results: the cached probe results, one manager per
//! probe type.

pub mod results_manager;

pub use results_manager::{Manager, PodProbeResults, ProbeResult, Update};
