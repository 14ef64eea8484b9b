//! Mirrors kubelet's pkg/kubelet/eviction: the eviction manager, which keeps the node alive when
//! it runs short of memory, disk or process IDs.
//!
//! The manager is built from its [`eviction_manager::Dependencies`], as kubelet's is: a stats
//! provider ([`crate::stats::StatsProvider`]), an active-pods function and a kill-pod function
//! ([`types::ActivePodsFunc`], [`types::KillPodFunc`]), container and image GC. It does not know
//! the kubelet. Every [`DEFAULT_MONITORING_INTERVAL`] [`eviction_manager::EvictionManager`]:
//! 1. observes the signals ([`types::Signal`]) through the stats provider: memory.available,
//!    nodefs/imagefs available bytes and free inodes, pid.available;
//! 2. evicts pods that broke their own local-storage limits (emptyDir `sizeLimit`, container
//!    ephemeral-storage limits);
//! 3. compares the signals with the hard thresholds (`--eviction-hard`) and publishes the node
//!    conditions they set (MemoryPressure, DiskPressure, PIDPressure), held for the pressure
//!    transition period; the node status reports them, admission refuses pods by them, and the
//!    node lifecycle controller taints the Node by them;
//! 4. under disk pressure first reclaims node-level resources (container and image GC);
//! 5. if still under pressure, ranks the pods ([`helpers::rank_memory_pressure`], …) and evicts
//!    one: an `Evicted` event is recorded, and the kill function sets its status to
//!    Failed/Evicted with a message saying why and has its pod worker kill it.
//!
//! Admission under pressure ([`eviction_manager::admit`]) is a plain function of the pressure the
//! manager last published: the sync loop calls it before a new pod gets a worker.
//!
//! ## Implementation caveats
//! - Hard thresholds only: no soft thresholds, grace periods or `--eviction-minimum-reclaim`.
//! - Memory is read through [`crate::stats`] from cgroup v1 or v2 files; PSI (`memory.pressure`)
//!   is not used.
//! - No memcg notifications: memory is only looked at every interval.
//! - PID pressure ranks pods by priority only (kubelab counts no processes per pod).

pub(crate) mod eviction_manager;
pub(crate) mod helpers;
pub(crate) mod types;

use std::time::Duration;

pub(crate) use eviction_manager::EvictionManager;
pub use helpers::{ThresholdError, parse_threshold_config};
pub(crate) use types::NodePressure;
pub use types::{Config, Signal, Threshold, ThresholdValue};

/// Kubernetes' default `--eviction-hard` on Linux.
pub const DEFAULT_EVICTION_HARD: &str = "memory.available<100Mi,nodefs.available<10%,nodefs.inodesFree<5%,imagefs.available<15%";
/// `--eviction-pressure-transition-period`'s default.
pub(crate) const DEFAULT_PRESSURE_TRANSITION_PERIOD: Duration = Duration::from_secs(300);
/// How often the eviction manager observes the node (kubelet's evictionMonitoringPeriod).
pub(crate) const DEFAULT_MONITORING_INTERVAL: Duration = Duration::from_secs(10);
/// The grace period an evicted pod's containers get (immediateEvictionGracePeriodSeconds).
pub(crate) const IMMEDIATE_EVICTION_GRACE_PERIOD_SECONDS: i64 = 1;

impl Default for Config {
    fn default() -> Config {
        Config {
            thresholds: helpers::parse_threshold_config(DEFAULT_EVICTION_HARD).unwrap_or_default(),
            pressure_transition_period: DEFAULT_PRESSURE_TRANSITION_PERIOD,
            monitoring_interval: DEFAULT_MONITORING_INTERVAL,
        }
    }
}
