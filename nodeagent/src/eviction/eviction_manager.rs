//! Mirrors kubelet's eviction/eviction_manager.go: the loop that observes the node, reports
//! pressure, reclaims disk and evicts pods (the steps are in [`super`]'s docs and marked in
//! [`EvictionManager::synchronize`]).
//!
//! The manager knows nothing of the kubelet. It is built from its [`Dependencies`], as kubelet's
//! is: a stats provider to read the node and the pods, an active-pods function
//! ([`ActivePodsFunc`]) for the pods it may evict, and a kill function ([`KillPodFunc`]). It kills
//! nothing itself: the kill function sets the pod's final status (Failed, reason `Evicted`, a
//! message saying which resource ran short and who used it) in the status manager and sends the
//! pod's worker a Kill through the sync loop — the same termination path a deletion takes, so the
//! containers get their grace period and the volumes and cgroup are released as for any other
//! pod.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use api::pod::{full_name, is_critical_pod, uid};
use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use tokio::sync::watch;

use super::helpers::{self, Candidate};
use super::types::{ActivePodsFunc, Config, KillPodFunc, NodeConditionType, NodePressure, SignalObservations};
use crate::events::{Recorder, WARNING};
use crate::images::image_gc_manager::ImageGcManager;
use crate::kuberuntime::kuberuntime_gc::ContainerGc;
use crate::stats::StatsProvider;

const TARGET: &str = "kubelet::eviction";

/// What the eviction manager acts through (the arguments of kubelet's eviction.NewManager and
/// Start). It reads the node and the pods only through these, and never reaches into the rest of
/// the agent.
pub(crate) struct Dependencies {
    /// The node's and the pods' usage (kubelet's summary provider).
    pub(crate) stats: StatsProvider,
    /// The pods it may evict.
    pub(crate) active_pods: ActivePodsFunc,
    /// How it stops a pod: through the pod's worker, as a deletion does.
    pub(crate) kill_pod: KillPodFunc,
    /// Node-level reclaim under disk pressure (kubelet's ContainerGC and ImageGC).
    pub(crate) container_gc: Arc<ContainerGc>,
    pub(crate) image_gc: Arc<ImageGcManager>,
    /// Whether every pod source has delivered its pods: until then container GC keeps the dead
    /// containers of pods it does not know.
    pub(crate) sources_ready: Arc<dyn Fn() -> bool + Send + Sync>,
    /// Events on the pods it evicts and on the Node.
    pub(crate) recorder: Recorder,
    pub(crate) node_name: String,
}

pub(crate) struct EvictionManager {
    config: Config,
    deps: Dependencies,
    pressure_tx: watch::Sender<NodePressure>,
    node_ref: ObjectReference,
    /// When each condition's threshold was last met (nodeConditionsLastObservedAt).
    last_observed: BTreeMap<NodeConditionType, Instant>,
}

impl EvictionManager {
    /// A manager that publishes the node pressure it finds on `pressure_tx`.
    pub(crate) fn new(config: Config, deps: Dependencies, pressure_tx: watch::Sender<NodePressure>) -> EvictionManager {
        let node_ref = ObjectReference {
            kind: Some("Node".into()),
            name: Some(deps.node_name.clone()),
            uid: Some(deps.node_name.clone()),
            ..Default::default()
        };
        EvictionManager { config, deps, pressure_tx, node_ref, last_observed: BTreeMap::new() }
    }

    /// Run [`Self::synchronize`] every monitoring interval until shutdown. The first round comes
    /// one interval after start: by then the pod sources have delivered their pods, so pods that
    /// were already running when the agent restarted are re-admitted on what the node was, and
    /// pressure is acted on by eviction (as kubelet starts its eviction manager only once the
    /// runtime-dependent modules are up).
    pub(crate) async fn run(mut self, mut shutdown: watch::Receiver<bool>) {
        let period = self.config.monitoring_interval;
        let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                r = shutdown.changed() => if r.is_err() || *shutdown.borrow() { return },
            }
            if let Some(uid) = self.synchronize().await {
                tracing::info!(target: TARGET, pod_uid = %uid, "evicted a pod");
            }
        }
    }

    async fn observe(&self) -> SignalObservations {
        helpers::make_signal_observations(&self.deps.stats.node_stats().await)
    }

    /// The pods the manager may act on, in UID order (the order ties are ranked in).
    fn active_pods(&self) -> Vec<Arc<Pod>> {
        let mut pods = (self.deps.active_pods)();
        pods.sort_by(|a, b| a.metadata.uid.cmp(&b.metadata.uid));
        pods
    }

    /// One round (kubelet's synchronize). Returns the UID of the pod evicted, if any.
    pub(crate) async fn synchronize(&mut self) -> Option<String> {
        // Step 1: observe the signals.
        let observations = self.observe().await;
        tracing::debug!(target: TARGET, ?observations, "observed");
        let pods = self.active_pods();
        let usage = self.deps.stats.pod_stats(&pods).await;

        // Step 2: pods over their own local-storage limits go first, whatever the node has.
        for pod in &pods {
            let uid = uid(pod).to_string();
            if let Some(message) = usage.get(&uid).and_then(|u| helpers::local_storage_violation(pod, u))
                && self.evict_pod(pod, 0, message).await
            {
                return Some(uid);
            }
        }

        // Step 3: thresholds met now, and the conditions they hold for the transition period.
        let met = helpers::thresholds_met(&self.config.thresholds, &observations);
        let conditions = helpers::conditions_observed_since(
            &mut self.last_observed,
            &helpers::node_conditions(&met),
            self.config.pressure_transition_period,
            Instant::now(),
        );
        let pressure = NodePressure::from_conditions(&conditions);
        self.pressure_tx.send_if_modified(|old| {
            if *old == pressure {
                return false;
            }
            tracing::info!(target: TARGET, ?pressure, "node pressure changed");
            *old = pressure.clone();
            true
        });
        // Memory first, then disk, then PIDs (byEvictionPriority).
        let threshold = met.iter().min_by_key(|t| t.signal).copied()?;
        let signal = threshold.signal;
        self.deps.recorder.object_event(
            self.node_ref.clone(),
            WARNING,
            helpers::EVICTION_THRESHOLD_MET,
            format!("Attempting to reclaim {}", signal.resource()),
        );

        // Step 4: under disk pressure, reclaim what the node itself holds first.
        let mut observation = observations.get(&signal).copied()?;
        if signal.is_disk() {
            if let Err(e) = self.deps.container_gc.garbage_collect((self.deps.sources_ready)()).await {
                tracing::warn!(target: TARGET, error = %e, "container GC while reclaiming disk");
            }
            if let Err(e) = self.deps.image_gc.free_space(i64::MAX).await {
                tracing::warn!(target: TARGET, error = %e, "image GC while reclaiming disk");
            }
            let after = self.observe().await;
            if helpers::thresholds_met(&[threshold], &after).is_empty() {
                tracing::info!(target: TARGET, %signal, "node-level reclaim relieved the pressure");
                return None;
            }
            observation = after.get(&signal).copied().unwrap_or(observation);
        }

        // Step 5: rank the pods and evict one.
        let mut candidates: Vec<Candidate> = pods
            .iter()
            .filter(|p| !is_critical_pod(p))
            .map(|p| Candidate { pod: p.clone(), usage: usage.get(uid(p)).cloned().unwrap_or_default() })
            .collect();
        match signal.node_condition() {
            NodeConditionType::MemoryPressure => helpers::rank_memory_pressure(&mut candidates),
            NodeConditionType::DiskPressure => helpers::rank_disk_pressure(&mut candidates),
            NodeConditionType::PidPressure => helpers::rank_pid_pressure(&mut candidates),
        }
        let quantity = helpers::threshold_quantity(threshold.value, observation.capacity);
        for c in candidates {
            let message = helpers::eviction_message(signal, quantity, observation.available, &c.pod, &c.usage);
            if self.evict_pod(&c.pod, super::IMMEDIATE_EVICTION_GRACE_PERIOD_SECONDS, message).await {
                return c.pod.metadata.uid.clone();
            }
        }
        tracing::info!(target: TARGET, %signal, "no pod to evict");
        None
    }

    /// evictPod: the event, then the kill function, which sets the pod's final status (Failed,
    /// reason Evicted, the message) and hands its worker a Kill.
    async fn evict_pod(&self, pod: &Arc<Pod>, grace: i64, message: String) -> bool {
        if is_critical_pod(pod) {
            tracing::warn!(target: TARGET, pod = %full_name(pod), "cannot evict a critical pod");
            return false;
        }
        let uid = uid(pod).to_string();
        tracing::info!(target: TARGET, pod = %full_name(pod), pod_uid = %uid, %message, "evicting");
        self.deps.recorder.pod_event(pod, None, WARNING, helpers::REASON, message.clone());
        let verdict = Box::new(move |status: &mut k8s_openapi::api::core::v1::PodStatus| {
            status.phase = Some("Failed".into());
            status.reason = Some(helpers::REASON.into());
            status.message = Some(message);
        });
        (self.deps.kill_pod)(pod.clone(), grace, verdict).await
    }
}

/// The eviction manager's admission check (its Admit), for the sync loop's HandlePodAdditions: a
/// plain function of the pressure the manager last published.
pub(crate) fn admit(pressure: &NodePressure, pod: &Pod) -> Option<(String, String)> {
    helpers::admit_under_pressure(&pressure.conditions(), pod)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eviction::Signal;

    #[test]
    fn the_node_is_observable() {
        let dir = tempfile::tempdir().expect("tmp");
        let cg = dir.path().join("memory");
        std::fs::create_dir_all(&cg).expect("mkdir");
        std::fs::write(cg.join("memory.usage_in_bytes"), "1048576\n").expect("write");
        std::fs::write(cg.join("memory.stat"), "total_inactive_file 0\n").expect("write");
        let obs = helpers::make_signal_observations(&crate::stats::read_node_stats(&crate::stats::NodeMemory::V1Root(cg.clone()), dir.path(), dir.path()));
        let mem = obs.get(&Signal::MemoryAvailable).expect("memory observed");
        assert_eq!(mem.capacity - mem.available, 1 << 20, "capacity minus the working set");
        for s in [Signal::NodeFsAvailable, Signal::ImageFsAvailable, Signal::PidAvailable, Signal::NodeFsInodesFree] {
            assert!(obs.get(&s).is_some_and(|o| o.available <= o.capacity), "{s}");
        }
        let without_memory_root =
            helpers::make_signal_observations(&crate::stats::read_node_stats(&crate::stats::NodeMemory::Unknown, dir.path(), dir.path()));
        assert!(!without_memory_root.contains_key(&Signal::MemoryAvailable));
        // cgroup v2: the node from /proc/meminfo.
        let v2 = helpers::make_signal_observations(&crate::stats::read_node_stats(&crate::stats::NodeMemory::Meminfo, dir.path(), dir.path()));
        assert!(v2.get(&Signal::MemoryAvailable).is_some_and(|o| o.available > 0 && o.available <= o.capacity));
    }
}
