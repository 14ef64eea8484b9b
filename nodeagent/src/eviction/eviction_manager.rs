//! Mirrors kubelet's eviction/eviction_manager.go: the loop that observes the node, reports
//! pressure, reclaims disk and evicts pods (the steps are in [`super`]'s docs and marked in
//! [`EvictionManager::synchronize`]).
//!
//! The manager kills nothing itself. Like kubelet's `killPodFunc`, it sets the pod's final status
//! (Failed, reason `Evicted`, a message saying which resource ran short and who used it) in the
//! status manager and sends the pod's worker a Kill through the sync loop — the same termination
//! path a deletion takes, so the containers get their grace period and the volumes and cgroup
//! are released as for any other pod.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use api::pod::{full_name, is_critical_pod, is_pod_phase_terminal, uid};
use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use tokio::sync::{mpsc, watch};

use super::helpers::{self, Candidate, PodUsage};
use super::stats;
use super::types::{Config, NodeConditionType, NodePressure, Signal, SignalObservation, SignalObservations};
use crate::events::WARNING;
use crate::images::image_gc_manager::ImageGcManager;
use crate::kubelet::Kubelet;
use crate::kuberuntime::kuberuntime_gc::ContainerGc;
use crate::pod_workers::{UpdatePodOptions, UpdateType};

const TARGET: &str = "kubelet::eviction";

/// Read the node's signals (blocking): memory from `/proc/meminfo` and the root memory cgroup
/// (`memory_root`, the memory hierarchy's mount point), the filesystems of `nodefs` and
/// `imagefs` with `statvfs`, PIDs from `pid_max` and `sysinfo`. Unreadable signals are left out.
pub fn observe_node(memory_root: Option<&Path>, nodefs: &Path, imagefs: &Path) -> SignalObservations {
    let mut obs = SignalObservations::new();
    if let Some(root) = memory_root {
        let read = |p: PathBuf| std::fs::read_to_string(p).unwrap_or_default();
        if let Some(o) = helpers::memory_observation(
            &read("/proc/meminfo".into()),
            &read(root.join("memory.usage_in_bytes")),
            &read(root.join("memory.stat")),
        ) {
            obs.insert(Signal::MemoryAvailable, o);
        }
    }
    for (dir, bytes, inodes) in [
        (nodefs, Signal::NodeFsAvailable, Signal::NodeFsInodesFree),
        (imagefs, Signal::ImageFsAvailable, Signal::ImageFsInodesFree),
    ] {
        if let Some(fs) = stats::fs_stats(dir) {
            obs.insert(bytes, SignalObservation { available: fs.available, capacity: fs.capacity });
            if fs.inodes > 0 {
                obs.insert(inodes, SignalObservation { available: fs.inodes_free, capacity: fs.inodes });
            }
        }
    }
    if let (Ok(max), Some(running)) = (std::fs::read_to_string("/proc/sys/kernel/pid_max"), stats::running_processes())
        && let Some(o) = helpers::pid_observation(&max, running)
    {
        obs.insert(Signal::PidAvailable, o);
    }
    obs
}

pub struct EvictionManager {
    config: Config,
    kubelet: Arc<Kubelet>,
    container_gc: Arc<ContainerGc>,
    image_gc: Arc<ImageGcManager>,
    /// To the sync loop, which hands each Kill to the pod's worker.
    kill_tx: mpsc::Sender<UpdatePodOptions>,
    pressure_tx: watch::Sender<NodePressure>,
    sources_ready: Arc<dyn Fn() -> bool + Send + Sync>,
    node_ref: ObjectReference,
    /// When each condition's threshold was last met (nodeConditionsLastObservedAt).
    last_observed: BTreeMap<NodeConditionType, Instant>,
}

impl EvictionManager {
    pub fn new(
        config: Config,
        kubelet: Arc<Kubelet>,
        container_gc: Arc<ContainerGc>,
        image_gc: Arc<ImageGcManager>,
        kill_tx: mpsc::Sender<UpdatePodOptions>,
        pressure_tx: watch::Sender<NodePressure>,
        sources_ready: Arc<dyn Fn() -> bool + Send + Sync>,
    ) -> EvictionManager {
        let node_ref = ObjectReference {
            kind: Some("Node".into()),
            name: Some(kubelet.node_name.clone()),
            uid: Some(kubelet.node_name.clone()),
            ..Default::default()
        };
        EvictionManager {
            config,
            kubelet,
            container_gc,
            image_gc,
            kill_tx,
            pressure_tx,
            sources_ready,
            node_ref,
            last_observed: BTreeMap::new(),
        }
    }

    /// Run [`Self::synchronize`] every monitoring interval until shutdown. The first round comes
    /// one interval after start: by then the pod sources have delivered their pods, so pods that
    /// were already running when the agent restarted are re-admitted on what the node was, and
    /// pressure is acted on by eviction (as kubelet starts its eviction manager only once the
    /// runtime-dependent modules are up).
    pub async fn run(mut self, mut shutdown: watch::Receiver<bool>) {
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

    fn memory_root(&self) -> Option<PathBuf> {
        self.kubelet.pcm.hierarchies().iter().find(|h| !h.unified && h.controllers.iter().any(|c| c == "memory")).map(|h| h.path.clone())
    }

    async fn observe(&self) -> SignalObservations {
        let imagefs = self.image_gc.image_fs_dir().await;
        let (memory_root, nodefs) = (self.memory_root(), self.kubelet.root_dir.clone());
        tokio::task::spawn_blocking(move || observe_node(memory_root.as_deref(), &nodefs, &imagefs)).await.unwrap_or_default()
    }

    /// The pods the manager may act on: admitted, not finished, not being deleted.
    fn active_pods(&self) -> Vec<Arc<Pod>> {
        let mut pods: Vec<Arc<Pod>> = self
            .kubelet
            .desired_pods()
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .filter(|p| {
                let phase = self.kubelet.status.get_pod_status(uid(p)).and_then(|s| s.phase).or_else(|| p.status.as_ref().and_then(|s| s.phase.clone()));
                !is_pod_phase_terminal(phase.as_deref())
            })
            .collect();
        pods.sort_by(|a, b| a.metadata.uid.cmp(&b.metadata.uid));
        pods
    }

    /// What each pod uses (the summary stats): cgroup working sets, emptyDir and log sizes, and
    /// writable layers as CRI's ContainerStats reports them.
    async fn pod_usage(&self, pods: &[Arc<Pod>]) -> HashMap<String, PodUsage> {
        let rt = &self.kubelet.runtime.runtime;
        let running: Vec<(String, String, String)> = rt
            .list_containers(None)
            .await
            .unwrap_or_default()
            .into_iter()
            .filter(|c| c.state == k8s_cri::v1::ContainerState::ContainerRunning as i32)
            .filter_map(|c| {
                let uid = c.labels.get(crate::container::POD_UID_LABEL)?.clone();
                let name = c.labels.get(crate::container::CONTAINER_NAME_LABEL)?.clone();
                Some((uid, name, c.id))
            })
            .collect();
        let layers: HashMap<String, i64> = match rt.list_container_stats().await {
            Ok(s) => s
                .into_iter()
                .filter_map(|s| {
                    let id = s.attributes.as_ref()?.id.clone();
                    let used = s.writable_layer.as_ref()?.used_bytes.as_ref()?.value;
                    Some((id, i64::try_from(used).unwrap_or(i64::MAX)))
                })
                .collect(),
            Err(e) => {
                tracing::debug!(target: TARGET, error = %e, "ListContainerStats failed; writable layers not counted");
                HashMap::new()
            }
        };
        let memory_root = self.memory_root();
        let pcm = self.kubelet.pcm.clone();
        let root = self.kubelet.root_dir.clone();
        let logs_root = self.kubelet.runtime.logs_root().to_path_buf();
        let pods = pods.to_vec();
        tokio::task::spawn_blocking(move || {
            let mut out = HashMap::new();
            for pod in pods {
                let uid = uid(&pod).to_string();
                let mine: Vec<&(String, String, String)> = running.iter().filter(|(u, _, _)| *u == uid).collect();
                let mut u = PodUsage { disk_known: true, ..Default::default() };
                if let Some(mem) = &memory_root {
                    let dir = mem.join(pcm.cgroup_parent(&pod).trim_start_matches('/'));
                    u.memory = stats::cgroup_working_set(&dir);
                    for (_, name, id) in &mine {
                        if let Some(ws) = stats::cgroup_working_set(&dir.join(id)) {
                            *u.container_memory.entry(name.clone()).or_default() += ws;
                        }
                    }
                }
                let spec = pod.spec.as_ref();
                for v in spec.and_then(|s| s.volumes.as_ref()).into_iter().flatten() {
                    if let Some(ed) = &v.empty_dir
                        && ed.medium.as_deref().is_none_or(str::is_empty)
                    {
                        let dir = crate::kubelet_getters::pod_volume_dir(&root, &uid, crate::volumemanager::emptydir::PLUGIN_NAME, &v.name);
                        u.volumes.insert(v.name.clone(), stats::dir_usage(&dir));
                    }
                }
                let log_dir = crate::kuberuntime::kuberuntime_sandbox::pod_log_dir(&logs_root, &pod);
                for c in spec.map(|s| s.containers.as_slice()).unwrap_or_default() {
                    let layer: i64 = mine.iter().filter(|(_, n, _)| *n == c.name).filter_map(|(_, _, id)| layers.get(id)).sum();
                    u.container_disk.insert(c.name.clone(), layer + stats::dir_usage(&log_dir.join(&c.name)));
                }
                out.insert(uid, u);
            }
            out
        })
        .await
        .unwrap_or_default()
    }

    /// One round (kubelet's synchronize). Returns the UID of the pod evicted, if any.
    pub async fn synchronize(&mut self) -> Option<String> {
        // Step 1: observe the signals.
        let observations = self.observe().await;
        tracing::debug!(target: TARGET, ?observations, "observed");
        let pods = self.active_pods();
        let usage = self.pod_usage(&pods).await;

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
        self.kubelet.recorder.object_event(
            self.node_ref.clone(),
            WARNING,
            helpers::EVICTION_THRESHOLD_MET,
            format!("Attempting to reclaim {}", signal.resource()),
        );

        // Step 4: under disk pressure, reclaim what the node itself holds first.
        let mut observation = observations.get(&signal).copied()?;
        if signal.is_disk() {
            let k = self.kubelet.clone();
            if let Err(e) = self.container_gc.garbage_collect(|u| k.is_desired(u), (self.sources_ready)()).await {
                tracing::warn!(target: TARGET, error = %e, "container GC while reclaiming disk");
            }
            if let Err(e) = self.image_gc.free_space(i64::MAX).await {
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

    /// evictPod: the final status, the event, and a Kill for the pod's worker.
    async fn evict_pod(&self, pod: &Arc<Pod>, grace: i64, message: String) -> bool {
        if is_critical_pod(pod) {
            tracing::warn!(target: TARGET, pod = %full_name(pod), "cannot evict a critical pod");
            return false;
        }
        let uid = uid(pod).to_string();
        tracing::info!(target: TARGET, pod = %full_name(pod), pod_uid = %uid, %message, "evicting");
        let mut status = self.kubelet.status.get_pod_status(&uid).or_else(|| pod.status.clone()).unwrap_or_default();
        status.phase = Some("Failed".into());
        status.reason = Some(helpers::REASON.into());
        status.message = Some(message.clone());
        self.kubelet.status.set_pod_status(pod, status);
        self.kubelet.recorder.pod_event(pod, None, WARNING, helpers::REASON, message);
        let kill = UpdatePodOptions { pod: pod.clone(), update_type: UpdateType::Kill, grace_override: Some(grace), removed: false };
        self.kill_tx.send(kill).await.is_ok()
    }
}

/// The eviction manager's admission check (its Admit), for the sync loop's HandlePodAdditions.
pub fn admit(pressure: &NodePressure, pod: &Pod) -> Option<(String, String)> {
    helpers::admit_under_pressure(&pressure.conditions(), pod)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_node_is_observable() {
        let dir = tempfile::tempdir().expect("tmp");
        let cg = dir.path().join("memory");
        std::fs::create_dir_all(&cg).expect("mkdir");
        std::fs::write(cg.join("memory.usage_in_bytes"), "1048576\n").expect("write");
        std::fs::write(cg.join("memory.stat"), "total_inactive_file 0\n").expect("write");
        let obs = observe_node(Some(&cg), dir.path(), dir.path());
        let mem = obs.get(&Signal::MemoryAvailable).expect("memory observed");
        assert_eq!(mem.capacity - mem.available, 1 << 20, "capacity minus the working set");
        for s in [Signal::NodeFsAvailable, Signal::ImageFsAvailable, Signal::PidAvailable, Signal::NodeFsInodesFree] {
            assert!(obs.get(&s).is_some_and(|o| o.available <= o.capacity), "{s}");
        }
        assert!(!observe_node(None, dir.path(), dir.path()).contains_key(&Signal::MemoryAvailable));
    }
}
