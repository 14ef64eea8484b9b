//! Mirrors kubelet's pkg/kubelet/pleg: the Pod Lifecycle Event Generator.
//!
//! The pod workers only run when something asks them to. Changes they did not make themselves
//! — a container exiting, a sandbox dying, someone removing a container with `crictl` — reach
//! them through PLEG: every [`RELIST_PERIOD`] it lists all sandboxes and containers from the
//! runtime, compares them with the previous list and sends one [`PodLifecycleEvent`] per change
//! to the sync loop, which wakes that pod's worker.
//!
//! containerd 1.6 does not implement the CRI's `GetContainerEvents`, so the "evented PLEG" of
//! newer kubelets is impossible here; a relist costs about 1.2 ms.
//!
//! [`PodLifecycleEvent`]: crate::container::PodLifecycleEvent

use std::time::Duration;

pub(crate) mod generic;

pub(crate) use generic::GenericPleg;

/// How often the runtime is relisted (kubelet's genericPlegRelistPeriod).
pub(crate) const RELIST_PERIOD: Duration = Duration::from_secs(1);
/// PLEG is unhealthy when no relist has succeeded for this long (genericPlegRelistThreshold):
/// the node then reports NotReady, since the agent no longer sees what its containers do.
pub(crate) const RELIST_THRESHOLD: Duration = Duration::from_secs(3 * 60);
/// Capacity of the event channel (kubelet's plegChannelCapacity). Events beyond it are dropped
/// and counted: the sync loop's periodic resync catches up with those pods.
pub(crate) const CHANNEL_CAPACITY: usize = 1000;

/// Tuning; tests shrink the period.
#[derive(Clone, Debug)]
pub(crate) struct Options {
    pub(crate) relist_period: Duration,
    pub(crate) relist_threshold: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Options { relist_period: RELIST_PERIOD, relist_threshold: RELIST_THRESHOLD }
    }
}
