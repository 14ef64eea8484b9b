//! Mirrors kubelet's pkg/kubelet/status: what the node agent reports about its pods.
//!
//! - [`generate`] computes a pod's API status from what the runtime reports (pure, table-tested):
//!   the phase and the conditions, from the container statuses [`container_statuses`] converts.
//! - [`status_manager`] holds the latest status of every pod, the source of truth for the rest
//!   of the agent, and writes it to the API server's `pods/<name>/status`: at once when it
//!   changes and every [`SYNC_PERIOD`] for everything. It also finishes a pod's deletion once
//!   the agent has released its resources.

use std::time::Duration;

pub mod container_statuses;
pub mod generate;
pub mod status_manager;

pub use container_statuses::should_container_be_restarted;
pub use generate::{StatusInputs, generate_api_pod_status, get_phase};
pub use status_manager::{KubeStatusWriter, Options, PodStatusWriter, StatusManager, create_merge_patch, merge_pod_status};

/// How often every status the API server has not confirmed is written again, and every pod's
/// status is compared with the API server's (kubelet's syncPeriod).
pub const SYNC_PERIOD: Duration = Duration::from_secs(10);
