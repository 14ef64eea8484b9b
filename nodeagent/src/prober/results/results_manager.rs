//! Mirrors kubelet's prober/results/results_manager.go: the latest result of one probe type for
//! each container, keyed by CRI container ID, and a channel of changes.
//!
//! Keyed by container ID, not by name: a restarted container is a new ID and starts from a
//! fresh result, and a result for a container that is gone can never be mistaken for the new
//! one's.

use std::collections::HashMap;
use std::sync::Mutex;

use tokio::sync::mpsc;

use crate::prober::ProbeType;

/// A probe's cached result (results.Result).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ProbeResult {
    /// Not probed yet (a startup probe's initial value).
    Unknown,
    Success,
    Failure,
}

/// A cached result changed (results.Update).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Update {
    pub(crate) probe_type: ProbeType,
    pub(crate) container_id: String,
    pub(crate) result: ProbeResult,
    pub(crate) pod_uid: String,
}

/// The results of one probe type.
///
/// The update channel is unbounded: a worker sends at most one update per period, only when
/// its result *changes*, and the sync loop drains the channel as it goes. A bounded channel
/// would let a full channel stall probe workers behind the sync loop for no gain.
pub(crate) struct Manager {
    probe_type: ProbeType,
    /// A std Mutex: held only to read or write one map entry, never across an await.
    cache: Mutex<HashMap<String, ProbeResult>>,
    updates: mpsc::UnboundedSender<Update>,
}

impl Manager {
    pub(crate) fn new(probe_type: ProbeType, updates: mpsc::UnboundedSender<Update>) -> Manager {
        Manager { probe_type, cache: Mutex::new(HashMap::new()), updates }
    }

    /// The cached result for a container, if any.
    pub(crate) fn get(&self, container_id: &str) -> Option<ProbeResult> {
        self.cache.lock().unwrap_or_else(|e| e.into_inner()).get(container_id).copied()
    }

    /// Cache `result`; an actual change is sent on the update channel.
    pub(crate) fn set(&self, container_id: &str, result: ProbeResult, pod_uid: &str) {
        let previous = self.cache.lock().unwrap_or_else(|e| e.into_inner()).insert(container_id.to_string(), result);
        if previous != Some(result) {
            tracing::debug!(target: "kubelet::prober", probe = %self.probe_type, container_id, pod_uid, ?result, "probe result changed");
            // The receiver is gone only when the agent shuts down.
            let _ = self.updates.send(Update {
                probe_type: self.probe_type,
                container_id: container_id.to_string(),
                result,
                pod_uid: pod_uid.to_string(),
            });
        }
    }

    pub(crate) fn remove(&self, container_id: &str) {
        self.cache.lock().unwrap_or_else(|e| e.into_inner()).remove(container_id);
    }
}

/// What `compute_pod_actions` reads from the prober about a pod's containers: the liveness and
/// startup results by CRI container ID (kubelet's livenessManager.Get / startupManager.Get).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct PodProbeResults {
    pub(crate) liveness: HashMap<String, ProbeResult>,
    pub(crate) startup: HashMap<String, ProbeResult>,
}

impl PodProbeResults {
    /// Why a running container must be killed: a failed liveness probe first, then a failed
    /// startup probe (the order computePodActions checks them in).
    pub(crate) fn kill_reason(&self, container_id: &str) -> Option<ProbeType> {
        if self.liveness.get(container_id) == Some(&ProbeResult::Failure) {
            Some(ProbeType::Liveness)
        } else if self.startup.get(container_id) == Some(&ProbeResult::Failure) {
            Some(ProbeType::Startup)
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_changes_are_sent() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let m = Manager::new(ProbeType::Readiness, tx);
        assert_eq!(m.get("c1"), None);
        m.set("c1", ProbeResult::Failure, "u");
        m.set("c1", ProbeResult::Failure, "u");
        m.set("c1", ProbeResult::Success, "u");
        assert_eq!(m.get("c1"), Some(ProbeResult::Success));
        let got: Vec<ProbeResult> = std::iter::from_fn(|| rx.try_recv().ok()).map(|u| u.result).collect();
        assert_eq!(got, [ProbeResult::Failure, ProbeResult::Success]);
        m.remove("c1");
        assert_eq!(m.get("c1"), None);
        // A fresh result after removal is a change again.
        m.set("c1", ProbeResult::Success, "u");
        assert_eq!(rx.try_recv().map(|u| (u.probe_type, u.container_id)), Ok((ProbeType::Readiness, "c1".to_string())));
    }

    #[test]
    fn liveness_failure_wins_over_startup_failure() {
        let mut r = PodProbeResults::default();
        assert_eq!(r.kill_reason("a"), None);
        r.startup.insert("a".into(), ProbeResult::Failure);
        assert_eq!(r.kill_reason("a"), Some(ProbeType::Startup));
        r.liveness.insert("a".into(), ProbeResult::Failure);
        assert_eq!(r.kill_reason("a"), Some(ProbeType::Liveness));
        r.liveness.insert("a".into(), ProbeResult::Success);
        r.startup.insert("a".into(), ProbeResult::Unknown);
        assert_eq!(r.kill_reason("a"), None);
    }
}
