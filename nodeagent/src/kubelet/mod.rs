//! Mirrors kubelet's kubelet.go: the Kubelet, and SyncPod / SyncTerminatingPod /
//! SyncTerminatedPod — the three functions a pod worker calls, through the [`PodSyncer`] the
//! Kubelet implements.
//!
//! One Kubelet, behind an `Arc`, is shared by the sync loop, the pod workers, housekeeping, the
//! eviction manager's functions and the HTTP server. Its fields are private: it is built from one
//! [`Dependencies`] and the rest of the agent sees it through its methods and the [`PodSyncer`]
//! trait. Its methods are split over this folder as kubelet's are over its files:
//!
//! | file | kubelet | what |
//! | --- | --- | --- |
//! | `mod.rs` | `kubelet.go` | the Kubelet, SyncPod, SyncTerminatingPod, SyncTerminatedPod |
//! | [`sync_loop`] | `kubelet.go` | syncLoop / syncLoopIteration, HandlePodAdditions, HandlePodUpdates, HandlePodRemoves, admission |
//! | [`pods`] | `kubelet_pods.go` | housekeeping (HandlePodCleanups), mirror pods, pull secrets, the hosts file, active pods |
//! | [`getters`] | `kubelet_getters.go` | where a pod's data lives on the node |
//!
//! SyncPod ([`Kubelet::sync_pod`]) makes the runtime match the pod, in eight steps, each a tracing
//! span (target `kubelet::sync_pod`) carrying the pod UID:
//! 1. the pod cgroup under `kubepods/<qos>/pod<uid>` (`step1_pod_cgroup`);
//! 2. the pod's data directories (`step2_data_dirs`);
//! 3. volumes, all ready before any container starts (`step3_volumes`);
//! 4. image pull secrets and the configMaps and secrets the environment uses
//!    (`step4_pull_secrets`), and the managed `/etc/hosts` (`step4_etc_hosts`, written on a
//!    blocking thread);
//! 5. to 7. the sandbox, init containers in order, app containers in parallel — the runtime
//!    manager's `sync_pod` ([`crate::kuberuntime`]), which first decides what to do
//!    (`compute_pod_actions`, and the kill of a pod whose sandbox changed);
//! 8. the status, from what the runtime now runs (`step8_status`).
//!
//! SyncTerminatingPod stops every container within the grace period, then the sandbox;
//! SyncTerminatedPod releases what the pod held on the node (volumes, the pod cgroup, and for a
//! removed pod its containers and directories).

pub(crate) mod getters;
pub(crate) mod pods;
pub(crate) mod sync_loop;

#[cfg(test)]
mod kubelet_test;

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use api::core::v1::helper::qos::compute_pod_qos;
use api::pod::{full_name, is_pod_phase_terminal, uid};
use futures::future::LocalBoxFuture;
use k8s_openapi::api::core::v1::{Node, Pod};
use tokio::sync::{mpsc, watch};
use tracing::Instrument;

use crate::cm::PodContainerManager;
use crate::container as kc;
use crate::events::{self, Recorder};
use crate::eviction::{EvictionManager, NodePressure};
use crate::images::image_gc_manager::ImageGcManager;
use crate::kuberuntime::kuberuntime_container::{Deadline, FORCED_GRACE_PERIOD};
use crate::kuberuntime::kuberuntime_gc::ContainerGc;
use crate::kuberuntime::{RuntimeManager, SyncInputs};
use crate::pod::PodManager;
use crate::pod_workers::{PodSyncer, SyncOutcome, UpdatePodOptions};
use crate::prober::ProberManager;
use crate::status::StatusManager;
use crate::volumemanager::VolumeManager;

/// Container name → (waiting reason, message) from a pod's last sync.
type WaitingReasons = HashMap<String, (String, String)>;

/// What a Kubelet is built from: its collaborators (kubelet's Dependencies) and the node settings
/// SyncPod and admission read.
pub(crate) struct Dependencies {
    pub(crate) node_name: String,
    /// `--root-dir`: the pods' data directories.
    pub(crate) root_dir: PathBuf,
    /// `None` without an API server (static pods only).
    pub(crate) client: Option<kube::Client>,
    pub(crate) runtime: RuntimeManager,
    pub(crate) volumes: VolumeManager,
    pub(crate) pcm: PodContainerManager,
    pub(crate) status: StatusManager,
    /// The probe workers and their results (kubelet's probeManager).
    pub(crate) probes: ProberManager,
    pub(crate) recorder: Recorder,
    /// This node's object, once registered (for admission and downward API allocatable).
    pub(crate) node: watch::Receiver<Option<Node>>,
    /// The node's InternalIP, the pods' `status.hostIP`.
    pub(crate) host_ip: String,
    pub(crate) max_pods: u32,
    /// How often a running pod is synced when nothing happens to it.
    pub(crate) resync_interval: Duration,
    /// The eviction manager's node pressure, for admission.
    pub(crate) pressure: watch::Receiver<NodePressure>,
}

/// The node agent. Shared by the sync loop, the pod workers, housekeeping and the HTTP server.
pub(crate) struct Kubelet {
    deps: Dependencies,
    /// The pods the sources want and admission let in, and the mirror pods of static pods.
    pod_manager: PodManager,
    /// Waiting reasons from each pod's last sync (kubelet's reasonCache).
    reasons: Mutex<HashMap<String, WaitingReasons>>,
    /// When each pod was first seen, for kubelet_pod_start_duration_seconds.
    first_seen: Mutex<HashMap<String, Instant>>,
    /// Pods with something in the runtime (sandboxes or containers), from the last housekeeping.
    runtime_pods: Mutex<HashSet<String>>,
    /// The deadline of each SyncTerminatingPod in progress, by pod UID. The sync loop moves it
    /// earlier when a shorter grace period arrives while the worker is busy stopping the pod
    /// (kubelet cancels the running termination and restarts it with the shorter one).
    terminations: Mutex<HashMap<String, watch::Sender<Deadline>>>,
}

impl Kubelet {
    pub(crate) fn new(deps: Dependencies) -> Kubelet {
        Kubelet {
            deps,
            pod_manager: PodManager::default(),
            reasons: Mutex::new(HashMap::new()),
            first_seen: Mutex::new(HashMap::new()),
            runtime_pods: Mutex::new(HashSet::new()),
            terminations: Mutex::new(HashMap::new()),
        }
    }

    /// Whether some source still wants the pod.
    pub(crate) fn is_desired(&self, uid: &str) -> bool {
        self.pod_manager.contains(uid)
    }

    /// Whether the runtime had anything of this pod at the last housekeeping.
    pub(crate) fn has_runtime_state(&self, uid: &str) -> bool {
        self.runtime_pods.lock().unwrap_or_else(|e| e.into_inner()).contains(uid)
    }

    fn set_runtime_pods(&self, uids: HashSet<String>) {
        *self.runtime_pods.lock().unwrap_or_else(|e| e.into_inner()) = uids;
    }

    /// The eviction manager of this kubelet (kubelet builds it in NewMainKubelet and starts it
    /// with GetActivePods): it reads the node through a stats provider over this kubelet's
    /// runtime and cgroups, and kills through `kill_tx`, the sync loop's channel for kills.
    pub(crate) fn new_eviction_manager(
        self: &Arc<Self>,
        config: crate::eviction::Config,
        container_gc: Arc<ContainerGc>,
        image_gc: Arc<ImageGcManager>,
        sources_ready: Arc<dyn Fn() -> bool + Send + Sync>,
        kill_tx: mpsc::Sender<UpdatePodOptions>,
        pressure_tx: watch::Sender<NodePressure>,
    ) -> EvictionManager {
        let stats = crate::stats::StatsProvider::new(
            self.deps.runtime.runtime.clone(),
            self.deps.pcm.clone(),
            self.deps.root_dir.clone(),
            self.deps.runtime.logs_root().to_path_buf(),
            image_gc.clone(),
        );
        let kubelet = self.clone();
        let deps = crate::eviction::eviction_manager::Dependencies {
            stats,
            active_pods: Arc::new(move || kubelet.get_active_pods()),
            kill_pod: crate::pod_workers::kill_pod_now(kill_tx, self.deps.status.clone()),
            container_gc,
            image_gc,
            sources_ready,
            recorder: self.deps.recorder.clone(),
            node_name: self.deps.node_name.clone(),
        };
        EvictionManager::new(config, deps, pressure_tx)
    }

    /// Build the API status from what the runtime reports and hand it to the status manager.
    async fn update_status(&self, pod: &Pod, runtime_status: &kc::PodStatus) -> k8s_openapi::api::core::v1::PodStatus {
        let uid = uid(pod).to_string();
        let reasons = self.reasons.lock().unwrap_or_else(|e| e.into_inner()).get(&uid).cloned().unwrap_or_default();
        let old = self.deps.status.get_pod_status(&uid).or_else(|| pod.status.clone());
        let qos = compute_pod_qos(pod);
        let (readiness, startup) = self.deps.probes.readiness_and_startup(pod, runtime_status);
        let host_ips: Vec<String> = if self.deps.host_ip.is_empty() { vec![] } else { vec![self.deps.host_ip.clone()] };
        let status = crate::status::generate_api_pod_status(&crate::status::StatusInputs {
            pod,
            runtime: runtime_status,
            old: old.as_ref(),
            waiting_reasons: &reasons,
            readiness: &readiness,
            startup: &startup,
            host_ips: &host_ips,
            qos_class: qos.as_str(),
            pod_is_terminal: is_pod_phase_terminal(old.as_ref().and_then(|s| s.phase.as_deref())),
            now: chrono::Utc::now(),
        });
        self.deps.status.set_pod_status(pod, status.clone());
        status
    }

    /// SyncPod: the eight steps that make the runtime match the pod. Each step is a tracing span
    /// carrying the pod UID.
    async fn sync_pod(&self, pod: &Pod) -> SyncOutcome {
        let uid = uid(pod).to_string();
        let span = tracing::info_span!(target: "kubelet::sync_pod", "sync_pod", pod = %full_name(pod), pod_uid = %uid);
        // One trace per pod with --otlp-endpoint: the sync continues the pod's create request.
        podtrace::otel::set_parent_from(&span, pod.metadata.annotations.as_ref());
        self.sync_pod_inner(pod, &uid).instrument(span).await
    }

    async fn sync_pod_inner(&self, pod: &Pod, uid: &str) -> SyncOutcome {
        let retry = |d: u64| SyncOutcome::Continue { resync_after: Duration::from_secs(d) };
        self.first_seen.lock().unwrap_or_else(|e| e.into_inner()).entry(uid.to_string()).or_insert_with(Instant::now);
        let name = pod.metadata.name.clone().unwrap_or_default();
        let ns = pod.metadata.namespace.clone().unwrap_or_default();

        let runtime_status = match self.deps.runtime.get_pod_status(uid, &name, &ns).await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(target: "kubelet::sync_pod", pod_uid = %uid, error = %e, "reading the pod's runtime status");
                return retry(2);
            }
        };
        let api_status = self.update_status(pod, &runtime_status).await;
        if is_pod_phase_terminal(api_status.phase.as_deref()) {
            return SyncOutcome::Terminal;
        }
        // Ensure the pod is being probed (idempotent).
        self.deps.probes.add_pod(pod);

        // Step 1: the pod cgroup under kubepods/<qos>/pod<uid>.
        failpoint!("syncPodBeforePodCgroup");
        let cgroup_parent = {
            let _s = tracing::info_span!(target: "kubelet::sync_pod", "step1_pod_cgroup", pod_uid = %uid).entered();
            let pcm = self.deps.pcm.clone();
            let p = pod.clone();
            match tokio::task::spawn_blocking(move || pcm.ensure_exists(&p)).await {
                Ok(Ok(parent)) => parent,
                Ok(Err(e)) => {
                    self.deps.recorder.pod_event(pod, None, events::WARNING, events::FAILED_SYNC, format!("error creating the pod cgroup: {e}"));
                    return retry(5);
                }
                Err(e) => {
                    tracing::error!(target: "kubelet::sync_pod", pod_uid = %uid, error = %e, "cgroup task");
                    return retry(5);
                }
            }
        };

        // Step 2: the pod's data directory.
        failpoint!("syncPodBeforeDataDirs");
        {
            let root = self.deps.root_dir.clone();
            let u = uid.to_string();
            let r = tokio::task::spawn_blocking(move || getters::make_pod_data_dirs(&root, &u))
                .instrument(tracing::info_span!(target: "kubelet::sync_pod", "step2_data_dirs", pod_uid = %uid))
                .await;
            if let Ok(Err(e)) | Err(e) = r.map_err(crate::Error::Task) {
                self.deps.recorder.pod_event(pod, None, events::WARNING, events::FAILED_SYNC, format!("error making pod data directories: {e}"));
                return retry(5);
            }
        }

        // Step 3: volumes, all ready before any container starts.
        failpoint!("syncPodBeforeVolumes");
        let volumes = match self
            .deps
            .volumes
            .mount_volumes(pod)
            .instrument(tracing::info_span!(target: "kubelet::sync_pod", "step3_volumes", pod_uid = %uid))
            .await
        {
            Ok(v) => v,
            Err(e) => {
                self.deps.recorder.pod_event(pod, None, events::WARNING, events::FAILED_MOUNT_VOLUME, e.to_string());
                return retry(2);
            }
        };

        // Step 4: image pull secrets (and the configMaps/secrets the environment uses).
        failpoint!("syncPodBeforePullSecrets");
        let (pull_secrets, env_objects) = self
            .fetch_pod_references(pod)
            .instrument(tracing::info_span!(target: "kubelet::sync_pod", "step4_pull_secrets", pod_uid = %uid))
            .await;

        let etc_hosts = getters::pod_etc_hosts_path(&self.deps.root_dir, uid);
        self.ensure_hosts_file(pod, &runtime_status.ips)
            .instrument(tracing::info_span!(target: "kubelet::sync_pod", "step4_etc_hosts", pod_uid = %uid))
            .await;

        // Steps 5–7: sandbox, init containers, app containers (kuberuntime).
        let inputs = SyncInputs {
            volumes: &volumes,
            env_objects: &env_objects,
            pull_secrets: &pull_secrets,
            etc_hosts: Some(etc_hosts),
            cgroup_parent,
            host_ip: self.deps.host_ip.clone(),
            probes: self.deps.probes.pod_probe_results(&runtime_status),
        };
        let result = self.deps.runtime.sync_pod(pod, &runtime_status, &inputs).await;
        if let Some(e) = &result.error {
            tracing::warn!(target: "kubelet::sync_pod", pod_uid = %uid, error = %e, "sync failed");
        }
        self.reasons.lock().unwrap_or_else(|e| e.into_inner()).insert(uid.to_string(), result.waiting_reasons.clone());

        // Step 8: the status, from what the runtime now runs.
        failpoint!("syncPodBeforeStatus");
        let span = tracing::info_span!(target: "kubelet::sync_pod", "step8_status", pod_uid = %uid);
        if let Ok(now) = self.deps.runtime.get_pod_status(uid, &name, &ns).instrument(span.clone()).await {
            // The sandbox IP is known only now: rewrite /etc/hosts with it.
            if now.ips != runtime_status.ips {
                self.ensure_hosts_file(pod, &now.ips).await;
            }
            let status = self.update_status(pod, &now).instrument(span).await;
            self.observe_start(pod, &status);
        }
        let resync = result.retry_after.map(|d| d + Duration::from_millis(100)).unwrap_or(self.deps.resync_interval);
        SyncOutcome::Continue { resync_after: resync.min(self.deps.resync_interval) }
    }

    /// kubelet_pod_start_duration_seconds, once per pod, when all its containers first run.
    fn observe_start(&self, pod: &Pod, status: &k8s_openapi::api::core::v1::PodStatus) {
        let all_running = status.container_statuses.as_ref().is_some_and(|cs| {
            !cs.is_empty() && cs.iter().all(|c| c.state.as_ref().is_some_and(|s| s.running.is_some()))
        });
        if all_running
            && let Some(t) = self.first_seen.lock().unwrap_or_else(|e| e.into_inner()).get_mut(uid(pod))
            && t.elapsed() < Duration::from_secs(24 * 3600)
        {
            crate::metrics::metrics().pod_start_duration.observe(t.elapsed().as_secs_f64());
            // Observed once: push the mark far into the "already observed" range.
            *t = Instant::now().checked_sub(Duration::from_secs(48 * 3600)).unwrap_or(*t);
        }
    }

    /// SyncTerminatingPod: stop every container within the grace period (the override, else
    /// the pod's deletion grace period, else its terminationGracePeriodSeconds), then the
    /// sandbox. Returns whether everything stopped.
    ///
    /// An override is a forced kill: a pod gone from the API server at once (1 s), or one that
    /// already finished (0 s). While the containers stop, a shorter grace period from the sync
    /// loop ([`Kubelet::shorten_termination`]) moves the deadline earlier.
    async fn sync_terminating_pod(&self, pod: &Pod, grace_override: Option<i64>) -> bool {
        let uid = uid(pod).to_string();
        let span = tracing::info_span!(target: "kubelet::sync_terminating_pod", "sync_terminating_pod", pod = %full_name(pod), pod_uid = %uid);
        async {
            // The newest version of the pod may carry a shorter grace period than the one this
            // worker was handed (a second DELETE that arrived while the worker was busy).
            let latest = self.pod_manager.get_pod_by_uid(&uid);
            let deletion_grace = [Some(pod), latest.as_deref()]
                .into_iter()
                .flatten()
                .filter_map(|p| p.metadata.deletion_grace_period_seconds)
                .min();
            // A pod shutting down is not restarted by a failing probe.
            self.deps.probes.stop_liveness_and_startup(&uid);
            let grace = grace_override
                .or(deletion_grace)
                .or_else(|| pod.spec.as_ref().and_then(|s| s.termination_grace_period_seconds))
                .unwrap_or(30)
                .max(0);
            let name = pod.metadata.name.clone().unwrap_or_default();
            let ns = pod.metadata.namespace.clone().unwrap_or_default();
            let status = match self.deps.runtime.get_pod_status(&uid, &name, &ns).await {
                Ok(s) => s,
                Err(e) => {
                    tracing::warn!(target: "kubelet::sync_terminating_pod", pod_uid = %uid, error = %e, "reading runtime status");
                    return false;
                }
            };
            let deadline = Deadline::after(Duration::from_secs(grace as u64), grace_override.is_some());
            tracing::info!(target: "kubelet::sync_terminating_pod", pod_uid = %uid, grace_s = grace, forced = deadline.forced, "stopping the pod");
            let (tx, rx) = watch::channel(deadline);
            self.terminations.lock().unwrap_or_else(|e| e.into_inner()).insert(uid.clone(), tx);
            let killed = self.deps.runtime.kill_pod_until(Some(pod), &status, rx).await;
            self.terminations.lock().unwrap_or_else(|e| e.into_inner()).remove(&uid);
            if let Err(e) = killed {
                tracing::warn!(target: "kubelet::sync_terminating_pod", pod_uid = %uid, error = %e, "stopping the pod");
                return false;
            }
            failpoint!("syncTerminatingPodAfterKill");
            // A pod only the runtime knows (an orphan housekeeping stops: no spec, no source) gets
            // no status, as kubelet's runtime-only pods get none: a pod of that name in the API
            // server is not this agent's to report on.
            if pod.spec.is_none() {
                return true;
            }
            if let Ok(after) = self.deps.runtime.get_pod_status(&uid, &name, &ns).await {
                self.update_status(pod, &after).await;
            }
            // The containers are stopped: the status manager may now report a terminal phase.
            self.deps.status.terminate_pod(pod);
            true
        }
        .instrument(span)
        .await
    }

    /// A shorter grace period for a pod whose termination may be in progress: its new
    /// `deletionGracePeriodSeconds` from now, or [`FORCED_GRACE_PERIOD`] when `forced` (the pod
    /// is gone from the API server). Only ever moves a deadline earlier; no-op when the pod is
    /// not being stopped right now (its worker then reads the new grace period itself).
    pub(crate) fn shorten_termination(&self, pod: &Pod, forced: bool) {
        let new = if forced {
            Deadline::after(FORCED_GRACE_PERIOD, true)
        } else {
            match pod.metadata.deletion_grace_period_seconds {
                Some(g) => Deadline::after(Duration::from_secs(g.max(0) as u64), false),
                None => return,
            }
        };
        let terminations = self.terminations.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(tx) = terminations.get(uid(pod)) {
            tx.send_if_modified(|current| {
                let shorter = current.is_shortened_by(&new);
                if shorter {
                    tracing::info!(target: "kubelet::sync_terminating_pod", pod_uid = %uid(pod), forced, grace_s = new.at.saturating_duration_since(std::time::Instant::now()).as_secs_f64(), "grace period shortened");
                    *current = new;
                }
                shorter
            });
        }
    }

    /// SyncTerminatedPod: release what the pod held on the node — volumes and the pod cgroup —
    /// and, for a pod no source wants any more, its containers, sandbox and directories; then
    /// let the status manager complete an API deletion.
    async fn sync_terminated_pod(&self, pod: &Pod, removed: bool) {
        let uid = uid(pod).to_string();
        let span = tracing::info_span!(target: "kubelet::sync_terminated_pod", "sync_terminated_pod", pod = %full_name(pod), pod_uid = %uid, removed);
        async {
            let name = pod.metadata.name.clone().unwrap_or_default();
            let ns = pod.metadata.namespace.clone().unwrap_or_default();
            failpoint!("syncTerminatedPodBeforeRelease");
            if removed || pod.metadata.deletion_timestamp.is_some() {
                match self.deps.runtime.get_pod_status(&uid, &name, &ns).await {
                    Ok(s) => {
                        if let Err(e) = self.deps.runtime.remove_pod(&s).await {
                            tracing::warn!(target: "kubelet::sync_terminated_pod", pod_uid = %uid, error = %e, "removing containers");
                        }
                    }
                    Err(e) => tracing::warn!(target: "kubelet::sync_terminated_pod", pod_uid = %uid, error = %e, "reading runtime status"),
                }
            }
            if let Err(e) = self.deps.volumes.unmount_volumes(&uid).await {
                tracing::warn!(target: "kubelet::sync_terminated_pod", pod_uid = %uid, error = %e, "unmounting volumes");
            }
            let pcm = self.deps.pcm.clone();
            let u = uid.clone();
            match tokio::task::spawn_blocking(move || pcm.destroy(&u)).await {
                Ok(Err(e)) => tracing::warn!(target: "kubelet::sync_terminated_pod", pod_uid = %uid, error = %e, "removing the pod cgroup"),
                Err(e) => tracing::warn!(target: "kubelet::sync_terminated_pod", pod_uid = %uid, error = %e, "cgroup task"),
                Ok(Ok(())) => {}
            }
            if removed || pod.metadata.deletion_timestamp.is_some() {
                let root = self.deps.root_dir.clone();
                let u = uid.clone();
                let _ = tokio::task::spawn_blocking(move || getters::remove_pod_dir(&root, &u)).await;
                let log_dir = crate::kuberuntime::kuberuntime_sandbox::pod_log_dir(self.deps.runtime.logs_root(), pod);
                let _ = tokio::fs::remove_dir_all(&log_dir).await;
                self.reasons.lock().unwrap_or_else(|e| e.into_inner()).remove(&uid);
                self.first_seen.lock().unwrap_or_else(|e| e.into_inner()).remove(&uid);
            }
            self.deps.probes.remove_pod(&uid);
            self.deps.status.pod_resources_released(&uid);
        }
        .instrument(span)
        .await
    }
}


/// The pod workers see the Kubelet only through this (kubelet's podSyncer).
impl PodSyncer for Kubelet {
    fn sync_pod<'a>(&'a self, pod: &'a Pod) -> LocalBoxFuture<'a, SyncOutcome> {
        Box::pin(Kubelet::sync_pod(self, pod))
    }

    fn sync_terminating_pod<'a>(&'a self, pod: &'a Pod, grace_override: Option<i64>) -> LocalBoxFuture<'a, bool> {
        Box::pin(Kubelet::sync_terminating_pod(self, pod, grace_override))
    }

    fn sync_terminated_pod<'a>(&'a self, pod: &'a Pod, removed: bool) -> LocalBoxFuture<'a, ()> {
        Box::pin(Kubelet::sync_terminated_pod(self, pod, removed))
    }

    fn has_runtime_state(&self, uid: &str) -> bool {
        Kubelet::has_runtime_state(self, uid)
    }

    fn is_desired(&self, uid: &str) -> bool {
        Kubelet::is_desired(self, uid)
    }
}
