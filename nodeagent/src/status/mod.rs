//! Mirrors kubelet's pkg/kubelet/status: what the node agent reports about its pods.
//!
//! - [`generate`] computes a pod's API status from what the runtime reports (pure, table-tested):
//!   the phase and the conditions, from the container statuses [`container_statuses`] converts.
//! - [`status_manager`] holds the latest status of every pod, the source of truth for the rest
//!   of the agent, and writes it to the API server's `pods/<name>/status`: at once when it
//!   changes and every [`SYNC_PERIOD`] for everything. It also finishes a pod's deletion once
//!   the agent has released its resources.

use std::time::Duration;

pub(crate) mod container_statuses;
pub(crate) mod generate;
pub(crate) mod status_manager;

pub(crate) use container_statuses::should_container_be_restarted;
pub(crate) use generate::{StatusInputs, generate_api_pod_status};
pub(crate) use status_manager::StatusManager;

/// How often every status the API server has not confirmed is written again, and every pod's
/// status is compared with the API server's (kubelet's syncPeriod).
pub(crate) const SYNC_PERIOD: Duration = Duration::from_secs(10);
