//! Mirrors kubelet's kubelet.go: the Kubelet, its sync loop, and SyncPod / SyncTerminatingPod /
//! SyncTerminatedPod — the three functions a pod worker calls.
//!
//! The sync loop (`syncLoopIteration`) waits on four channels: pod updates from the sources
//! (config), lifecycle events from PLEG, a housekeeping tick (every 2 s) and shutdown. It never
//! does pod work itself: it hands each pod to its worker ([`crate::pod_workers`]).

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use api::core::v1::helper::qos::compute_pod_qos;
use api::pod::kubelet_types::{APISERVER_SOURCE, CONFIG_SOURCE_ANNOTATION_KEY};
use api::pod::{full_name, is_mirror_pod, is_pod_phase_terminal, is_pod_terminal, uid};
use k8s_openapi::api::core::v1::{Node, Pod};
use tokio::sync::{mpsc, watch};
use tracing::Instrument;

use crate::cm::PodContainerManager;
use crate::config::{PodOperation, PodUpdate};
use crate::container::{self as kc, PodLifecycleEvent};
use crate::events::{self, Recorder};
use crate::kuberuntime::kuberuntime_container::{Deadline, FORCED_GRACE_PERIOD};
use crate::kuberuntime::{RuntimeManager, SyncInputs};
use crate::pod_workers::{PodWorkers, UpdatePodOptions, UpdateType, WorkerState};
use crate::prober::{ProbeResult, ProbeType, ProberManager};
use crate::status::StatusManager;
use crate::volumemanager::VolumeManager;

/// Container name → (waiting reason, message) from a pod's last sync.
pub type WaitingReasons = HashMap<String, (String, String)>;

/// What a SyncPod tells its worker.
#[derive(Debug)]
pub enum SyncOutcome {
    /// Keep syncing; look again after this long (the resync period, or the end of a backoff).
    Continue { resync_after: Duration },
    /// The pod reached Succeeded or Failed: terminate it.
    Terminal,
}

/// The pods the sources want, by UID, and the mirror pods of static pods by full name
/// (kubelet's pod manager).
#[derive(Default)]
pub struct PodManager {
    pub pods: HashMap<String, Arc<Pod>>,
    /// `<namespace>/<name>` → the mirror pod the API server has for that static pod.
    pub mirrors: HashMap<String, Pod>,
}

/// The node agent. Shared by the sync loop, the pod workers, housekeeping and the HTTP server.
pub struct Kubelet {
    pub node_name: String,
    pub root_dir: PathBuf,
    pub client: Option<kube::Client>,
    pub runtime: RuntimeManager,
    pub volumes: VolumeManager,
    pub pcm: PodContainerManager,
    pub status: StatusManager,
    /// The probe workers and their results (kubelet's probeManager).
    pub probes: ProberManager,
    pub recorder: Recorder,
    pub pod_manager: Mutex<PodManager>,
    pub node: watch::Receiver<Option<Node>>,
    pub host_ip: String,
    pub max_pods: u32,
    pub resync_interval: Duration,
    /// The eviction manager's node pressure, for admission.
    pub pressure: watch::Receiver<crate::eviction::NodePressure>,
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

pub struct KubeletDeps {
    pub node_name: String,
    pub root_dir: PathBuf,
    pub client: Option<kube::Client>,
    pub runtime: RuntimeManager,
    pub volumes: VolumeManager,
    pub pcm: PodContainerManager,
    pub status: StatusManager,
    pub probes: ProberManager,
    pub recorder: Recorder,
    pub node: watch::Receiver<Option<Node>>,
    pub host_ip: String,
    pub max_pods: u32,
    pub resync_interval: Duration,
    pub pressure: watch::Receiver<crate::eviction::NodePressure>,
}

impl Kubelet {
    pub fn new(d: KubeletDeps) -> Kubelet {
        Kubelet {
            node_name: d.node_name,
            root_dir: d.root_dir,
            client: d.client,
            runtime: d.runtime,
            volumes: d.volumes,
            pcm: d.pcm,
            status: d.status,
            probes: d.probes,
            recorder: d.recorder,
            pod_manager: Mutex::new(PodManager::default()),
            node: d.node,
            host_ip: d.host_ip,
            max_pods: d.max_pods,
            resync_interval: d.resync_interval,
            pressure: d.pressure,
            reasons: Mutex::new(HashMap::new()),
            first_seen: Mutex::new(HashMap::new()),
            runtime_pods: Mutex::new(HashSet::new()),
            terminations: Mutex::new(HashMap::new()),
        }
    }

    /// Whether some source still wants the pod.
    pub fn is_desired(&self, uid: &str) -> bool {
        self.pod_manager.lock().unwrap_or_else(|e| e.into_inner()).pods.contains_key(uid)
    }

    pub fn desired_pods(&self) -> Vec<Arc<Pod>> {
        self.pod_manager.lock().unwrap_or_else(|e| e.into_inner()).pods.values().cloned().collect()
    }

    /// The pods the eviction manager may act on (GetActivePods, as kubelet hands it to the
    /// eviction manager): wanted by a source, not being deleted, and not finished as far as the
    /// status manager (else the API server's copy) knows. Admission's [`active_pods`] asks the pod
    /// workers as well, which only the sync loop holds.
    pub fn get_active_pods(&self) -> Vec<Arc<Pod>> {
        self.desired_pods()
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .filter(|p| {
                let phase = self.status.get_pod_status(uid(p)).and_then(|s| s.phase).or_else(|| p.status.as_ref().and_then(|s| s.phase.clone()));
                !is_pod_phase_terminal(phase.as_deref())
            })
            .collect()
    }

    /// The eviction manager of this kubelet (kubelet builds it in NewMainKubelet and starts it
    /// with GetActivePods): it reads the node through a stats provider over this kubelet's
    /// runtime and cgroups, and kills through `kill_tx`, the sync loop's channel for kills.
    pub(crate) fn new_eviction_manager(
        self: &Arc<Self>,
        config: crate::eviction::Config,
        container_gc: Arc<crate::kuberuntime::kuberuntime_gc::ContainerGc>,
        image_gc: Arc<crate::images::image_gc_manager::ImageGcManager>,
        sources_ready: Arc<dyn Fn() -> bool + Send + Sync>,
        kill_tx: mpsc::Sender<UpdatePodOptions>,
        pressure_tx: watch::Sender<crate::eviction::NodePressure>,
    ) -> crate::eviction::EvictionManager {
        let stats = crate::stats::StatsProvider::new(
            self.runtime.runtime.clone(),
            self.pcm.clone(),
            self.root_dir.clone(),
            self.runtime.logs_root().to_path_buf(),
            image_gc.clone(),
        );
        let kubelet = self.clone();
        let deps = crate::eviction::eviction_manager::Dependencies {
            stats,
            active_pods: Arc::new(move || kubelet.get_active_pods()),
            kill_pod: crate::pod_workers::kill_pod_now(kill_tx, self.status.clone()),
            container_gc,
            image_gc,
            sources_ready,
            recorder: self.recorder.clone(),
            node_name: self.node_name.clone(),
        };
        crate::eviction::EvictionManager::new(config, deps, pressure_tx)
    }

    /// Whether the runtime had anything of this pod at the last housekeeping.
    pub fn has_runtime_state(&self, uid: &str) -> bool {
        self.runtime_pods.lock().unwrap_or_else(|e| e.into_inner()).contains(uid)
    }

    pub(crate) fn set_runtime_pods(&self, uids: HashSet<String>) {
        *self.runtime_pods.lock().unwrap_or_else(|e| e.into_inner()) = uids;
    }

    /// Build the API status from what the runtime reports and hand it to the status manager.
    async fn update_status(&self, pod: &Pod, runtime_status: &kc::PodStatus) -> k8s_openapi::api::core::v1::PodStatus {
        let uid = uid(pod).to_string();
        let reasons = self.reasons.lock().unwrap_or_else(|e| e.into_inner()).get(&uid).cloned().unwrap_or_default();
        let old = self.status.get_pod_status(&uid).or_else(|| pod.status.clone());
        let qos = compute_pod_qos(pod);
        let (readiness, startup) = self.probes.readiness_and_startup(pod, runtime_status);
        let host_ips: Vec<String> = if self.host_ip.is_empty() { vec![] } else { vec![self.host_ip.clone()] };
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
        self.status.set_pod_status(pod, status.clone());
        status
    }

    /// SyncPod: the eight steps that make the runtime match the pod. Each step is a tracing span
    /// carrying the pod UID.
    pub async fn sync_pod(&self, pod: &Pod) -> SyncOutcome {
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

        let runtime_status = match self.runtime.get_pod_status(uid, &name, &ns).await {
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
        self.probes.add_pod(pod);

        // Step 1: the pod cgroup under kubepods/<qos>/pod<uid>.
        let cgroup_parent = {
            let _s = tracing::info_span!(target: "kubelet::sync_pod", "step1_pod_cgroup", pod_uid = %uid).entered();
            let pcm = self.pcm.clone();
            let p = pod.clone();
            match tokio::task::spawn_blocking(move || pcm.ensure_exists(&p)).await {
                Ok(Ok(parent)) => parent,
                Ok(Err(e)) => {
                    self.recorder.pod_event(pod, None, events::WARNING, events::FAILED_SYNC, format!("error creating the pod cgroup: {e}"));
                    return retry(5);
                }
                Err(e) => {
                    tracing::error!(target: "kubelet::sync_pod", pod_uid = %uid, error = %e, "cgroup task");
                    return retry(5);
                }
            }
        };

        // Step 2: the pod's data directory.
        {
            let root = self.root_dir.clone();
            let u = uid.to_string();
            let r = tokio::task::spawn_blocking(move || crate::kubelet_getters::make_pod_data_dirs(&root, &u))
                .instrument(tracing::info_span!(target: "kubelet::sync_pod", "step2_data_dirs", pod_uid = %uid))
                .await;
            if let Ok(Err(e)) | Err(e) = r.map_err(|e| crate::Error::Invalid(e.to_string())) {
                self.recorder.pod_event(pod, None, events::WARNING, events::FAILED_SYNC, format!("error making pod data directories: {e}"));
                return retry(5);
            }
        }

        // Step 3: volumes, all ready before any container starts.
        let volumes = match self
            .volumes
            .mount_volumes(pod)
            .instrument(tracing::info_span!(target: "kubelet::sync_pod", "step3_volumes", pod_uid = %uid))
            .await
        {
            Ok(v) => v,
            Err(e) => {
                self.recorder.pod_event(pod, None, events::WARNING, events::FAILED_MOUNT_VOLUME, e.to_string());
                return retry(2);
            }
        };

        // Step 4: image pull secrets (and the configMaps/secrets the environment uses).
        let (pull_secrets, env_objects) = self
            .fetch_pod_references(pod)
            .instrument(tracing::info_span!(target: "kubelet::sync_pod", "step4_pull_secrets", pod_uid = %uid))
            .await;

        let etc_hosts = crate::kubelet_getters::pod_etc_hosts_path(&self.root_dir, uid);
        {
            let ips = runtime_status.ips.clone();
            let (path, p) = (etc_hosts.clone(), pod.clone());
            let _ = tokio::task::spawn_blocking(move || crate::kubelet_pods::ensure_hosts_file(&path, &p, &ips)).await;
        }

        // Steps 5–7: sandbox, init containers, app containers (kuberuntime).
        let inputs = SyncInputs {
            volumes: &volumes,
            env_objects: &env_objects,
            pull_secrets: &pull_secrets,
            etc_hosts: Some(etc_hosts),
            cgroup_parent,
            host_ip: self.host_ip.clone(),
            probes: self.probes.pod_probe_results(&runtime_status),
        };
        let result = self.runtime.sync_pod(pod, &runtime_status, &inputs).await;
        if let Some(e) = &result.error {
            tracing::warn!(target: "kubelet::sync_pod", pod_uid = %uid, error = %e, "sync failed");
        }
        self.reasons.lock().unwrap_or_else(|e| e.into_inner()).insert(uid.to_string(), result.waiting_reasons.clone());

        // Step 8: the status, from what the runtime now runs.
        let span = tracing::info_span!(target: "kubelet::sync_pod", "step8_status", pod_uid = %uid);
        if let Ok(now) = self.runtime.get_pod_status(uid, &name, &ns).instrument(span.clone()).await {
            // The sandbox IP is known only now: rewrite /etc/hosts with it.
            if now.ips != runtime_status.ips {
                let path = crate::kubelet_getters::pod_etc_hosts_path(&self.root_dir, uid);
                let (p, ips) = (pod.clone(), now.ips.clone());
                let _ = tokio::task::spawn_blocking(move || crate::kubelet_pods::ensure_hosts_file(&path, &p, &ips)).await;
            }
            let status = self.update_status(pod, &now).instrument(span).await;
            self.observe_start(pod, &status);
        }
        let resync = result.retry_after.map(|d| d + Duration::from_millis(100)).unwrap_or(self.resync_interval);
        SyncOutcome::Continue { resync_after: resync.min(self.resync_interval) }
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

    /// Secrets named in imagePullSecrets (their `.dockerconfigjson`), and the configMaps and
    /// secrets the containers' environment refers to. Without an API server: none.
    async fn fetch_pod_references(&self, pod: &Pod) -> (Vec<serde_json::Value>, crate::kuberuntime::kuberuntime_container::EnvObjects) {
        use crate::kuberuntime::kuberuntime_container::{EnvObjects, env_references};
        use k8s_openapi::api::core::v1::{ConfigMap, Secret};
        let allocatable = self.node.borrow().as_ref().and_then(|n| n.status.as_ref()).and_then(|s| s.allocatable.clone());
        let mut env = EnvObjects { node_allocatable: allocatable.unwrap_or_default(), ..Default::default() };
        let mut pull = vec![];
        let Some(client) = &self.client else { return (pull, env) };
        let ns = pod.metadata.namespace.clone().unwrap_or_default();
        let secrets: kube::Api<Secret> = kube::Api::namespaced(client.clone(), &ns);
        let cms: kube::Api<ConfigMap> = kube::Api::namespaced(client.clone(), &ns);
        for r in pod.spec.as_ref().and_then(|s| s.image_pull_secrets.clone()).unwrap_or_default() {
            match secrets.get_opt(&r.name).await {
                Ok(Some(s)) => {
                    if let Some(b) = s.data.as_ref().and_then(|d| d.get(".dockerconfigjson"))
                        && let Ok(v) = serde_json::from_slice(&b.0)
                    {
                        pull.push(v);
                    }
                }
                Ok(None) => tracing::warn!(target: "kubelet::sync_pod", secret = %r.name, "image pull secret not found; pulling without it"),
                Err(e) => tracing::warn!(target: "kubelet::sync_pod", secret = %r.name, error = %e, "reading image pull secret"),
            }
        }
        let (cm_names, secret_names) = env_references(pod);
        for n in cm_names {
            if let Ok(cm) = cms.get_opt(&n).await {
                env.config_maps.insert(n, cm.map(|c| c.data.unwrap_or_default()));
            }
        }
        for n in secret_names {
            if let Ok(s) = secrets.get_opt(&n).await {
                let decoded = s.map(|s| {
                    let mut m: std::collections::BTreeMap<String, String> = s
                        .data
                        .unwrap_or_default()
                        .into_iter()
                        .map(|(k, v)| (k, String::from_utf8_lossy(&v.0).into_owned()))
                        .collect();
                    m.extend(s.string_data.unwrap_or_default());
                    m
                });
                env.secrets.insert(n, decoded);
            }
        }
        (pull, env)
    }

    /// SyncTerminatingPod: stop every container within the grace period (the override, else
    /// the pod's deletion grace period, else its terminationGracePeriodSeconds), then the
    /// sandbox. Returns whether everything stopped.
    ///
    /// An override is a forced kill: a pod gone from the API server at once (1 s), or one that
    /// already finished (0 s). While the containers stop, a shorter grace period from the sync
    /// loop ([`Kubelet::shorten_termination`]) moves the deadline earlier.
    pub async fn sync_terminating_pod(&self, pod: &Pod, grace_override: Option<i64>) -> bool {
        let uid = uid(pod).to_string();
        let span = tracing::info_span!(target: "kubelet::sync_terminating_pod", "sync_terminating_pod", pod = %full_name(pod), pod_uid = %uid);
        async {
            // The newest version of the pod may carry a shorter grace period than the one this
            // worker was handed (a second DELETE that arrived while the worker was busy).
            let latest = self.pod_manager.lock().unwrap_or_else(|e| e.into_inner()).pods.get(&uid).cloned();
            let deletion_grace = [Some(pod), latest.as_deref()]
                .into_iter()
                .flatten()
                .filter_map(|p| p.metadata.deletion_grace_period_seconds)
                .min();
            // A pod shutting down is not restarted by a failing probe.
            self.probes.stop_liveness_and_startup(&uid);
            let grace = grace_override
                .or(deletion_grace)
                .or_else(|| pod.spec.as_ref().and_then(|s| s.termination_grace_period_seconds))
                .unwrap_or(30)
                .max(0);
            let name = pod.metadata.name.clone().unwrap_or_default();
            let ns = pod.metadata.namespace.clone().unwrap_or_default();
            let status = match self.runtime.get_pod_status(&uid, &name, &ns).await {
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
            let killed = self.runtime.kill_pod_until(Some(pod), &status, rx).await;
            self.terminations.lock().unwrap_or_else(|e| e.into_inner()).remove(&uid);
            if let Err(e) = killed {
                tracing::warn!(target: "kubelet::sync_terminating_pod", pod_uid = %uid, error = %e, "stopping the pod");
                return false;
            }
            if let Ok(after) = self.runtime.get_pod_status(&uid, &name, &ns).await {
                self.update_status(pod, &after).await;
            }
            // The containers are stopped: the status manager may now report a terminal phase.
            self.status.terminate_pod(pod);
            true
        }
        .instrument(span)
        .await
    }

    /// A shorter grace period for a pod whose termination may be in progress: its new
    /// `deletionGracePeriodSeconds` from now, or [`FORCED_GRACE_PERIOD`] when `forced` (the pod
    /// is gone from the API server). Only ever moves a deadline earlier; no-op when the pod is
    /// not being stopped right now (its worker then reads the new grace period itself).
    pub fn shorten_termination(&self, pod: &Pod, forced: bool) {
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
    pub async fn sync_terminated_pod(&self, pod: &Pod, removed: bool) {
        let uid = uid(pod).to_string();
        let span = tracing::info_span!(target: "kubelet::sync_terminated_pod", "sync_terminated_pod", pod = %full_name(pod), pod_uid = %uid, removed);
        async {
            let name = pod.metadata.name.clone().unwrap_or_default();
            let ns = pod.metadata.namespace.clone().unwrap_or_default();
            if removed || pod.metadata.deletion_timestamp.is_some() {
                match self.runtime.get_pod_status(&uid, &name, &ns).await {
                    Ok(s) => {
                        if let Err(e) = self.runtime.remove_pod(&s).await {
                            tracing::warn!(target: "kubelet::sync_terminated_pod", pod_uid = %uid, error = %e, "removing containers");
                        }
                    }
                    Err(e) => tracing::warn!(target: "kubelet::sync_terminated_pod", pod_uid = %uid, error = %e, "reading runtime status"),
                }
            }
            if let Err(e) = self.volumes.unmount_volumes(&uid).await {
                tracing::warn!(target: "kubelet::sync_terminated_pod", pod_uid = %uid, error = %e, "unmounting volumes");
            }
            let pcm = self.pcm.clone();
            let u = uid.clone();
            match tokio::task::spawn_blocking(move || pcm.destroy(&u)).await {
                Ok(Err(e)) => tracing::warn!(target: "kubelet::sync_terminated_pod", pod_uid = %uid, error = %e, "removing the pod cgroup"),
                Err(e) => tracing::warn!(target: "kubelet::sync_terminated_pod", pod_uid = %uid, error = %e, "cgroup task"),
                Ok(Ok(())) => {}
            }
            if removed || pod.metadata.deletion_timestamp.is_some() {
                let root = self.root_dir.clone();
                let u = uid.clone();
                let _ = tokio::task::spawn_blocking(move || crate::kubelet_getters::remove_pod_dir(&root, &u)).await;
                let log_dir = crate::kuberuntime::kuberuntime_sandbox::pod_log_dir(self.runtime.logs_root(), pod);
                let _ = tokio::fs::remove_dir_all(&log_dir).await;
                self.reasons.lock().unwrap_or_else(|e| e.into_inner()).remove(&uid);
                self.first_seen.lock().unwrap_or_else(|e| e.into_inner()).remove(&uid);
            }
            self.probes.remove_pod(&uid);
            self.status.pod_resources_released(&uid);
        }
        .instrument(span)
        .await
    }
}

/// The sync loop (kubelet's syncLoop / syncLoopIteration). Runs until shutdown; owns the pod
/// workers.
pub async fn sync_loop(
    kubelet: Arc<Kubelet>,
    mut updates: mpsc::Receiver<PodUpdate>,
    mut pleg_events: mpsc::Receiver<PodLifecycleEvent>,
    sources_ready: Arc<dyn Fn() -> bool + Send + Sync>,
    mut pod_kills: mpsc::Receiver<UpdatePodOptions>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut workers = PodWorkers::new(kubelet.clone());
    let mut probe_updates = kubelet.probes.take_updates();
    let mut housekeeping = tokio::time::interval(Duration::from_secs(2));
    housekeeping.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            u = updates.recv() => match u {
                Some(u) => handle_pod_update(&kubelet, &mut workers, u).await,
                None => break,
            },
            Some(e) = pleg_events.recv() => {
                tracing::debug!(target: "kubelet::pleg", pod_uid = %e.id, event = ?e.kind, container = %e.data, "PLEG event");
                let pod = kubelet.pod_manager.lock().unwrap_or_else(|e| e.into_inner()).pods.get(&e.id).cloned();
                if let Some(pod) = pod {
                    workers.update_pod(UpdatePodOptions { pod, update_type: UpdateType::Sync, grace_override: None, removed: false });
                }
            }
            // Kills decided outside the loop (the eviction manager's killPodFunc).
            Some(kill) = pod_kills.recv() => workers.update_pod(kill),
            Some(u) = next_probe_update(&mut probe_updates) => {
                // handleProbeSync: a container became (un)ready, started, or failed its
                // liveness probe — sync its pod now, which regenerates the status or kills it.
                if u.probe_type == ProbeType::Liveness && u.result != ProbeResult::Failure {
                    continue;
                }
                tracing::debug!(target: "kubelet::prober", pod_uid = %u.pod_uid, probe = %u.probe_type, container_id = %u.container_id, result = ?u.result, "probe result changed; syncing the pod");
                let pod = kubelet.pod_manager.lock().unwrap_or_else(|e| e.into_inner()).pods.get(&u.pod_uid).cloned();
                if let Some(pod) = pod {
                    workers.update_pod(UpdatePodOptions { pod, update_type: UpdateType::Sync, grace_override: None, removed: false });
                }
            }
            _ = housekeeping.tick() => {
                crate::kubelet_pods::handle_pod_cleanups(&kubelet, &mut workers, sources_ready()).await;
            }
            _ = shutdown.changed() => break,
        }
    }
    tracing::info!(target: "kubelet", "sync loop stopped; pods keep running until the agent is restarted");
}

/// The next probe result change, or never when there is no channel.
async fn next_probe_update(rx: &mut Option<mpsc::UnboundedReceiver<crate::prober::results::Update>>) -> Option<crate::prober::results::Update> {
    match rx {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

async fn handle_pod_update(kubelet: &Arc<Kubelet>, workers: &mut PodWorkers, u: PodUpdate) {
    match u.op {
        PodOperation::Add => {
            let mut pods = u.pods;
            pods.sort_by(|a, b| a.metadata.creation_timestamp.cmp(&b.metadata.creation_timestamp));
            for pod in pods {
                if is_mirror_pod(&pod) {
                    kubelet.pod_manager.lock().unwrap_or_else(|e| e.into_inner()).mirrors.insert(full_name(&pod), pod);
                    continue;
                }
                handle_pod_addition(kubelet, workers, pod);
            }
        }
        PodOperation::Update => {
            for pod in u.pods {
                if is_mirror_pod(&pod) {
                    kubelet.pod_manager.lock().unwrap_or_else(|e| e.into_inner()).mirrors.insert(full_name(&pod), pod);
                    continue;
                }
                let uid = uid(&pod).to_string();
                let pod = Arc::new(pod);
                let known = {
                    let mut pm = kubelet.pod_manager.lock().unwrap_or_else(|e| e.into_inner());
                    let known = pm.pods.contains_key(&uid);
                    if known {
                        pm.pods.insert(uid.clone(), pod.clone());
                    }
                    known
                };
                if !known {
                    // Rejected at admission (or never seen): nothing runs for it.
                    continue;
                }
                let kill = pod.metadata.deletion_timestamp.is_some();
                if kill {
                    kubelet.shorten_termination(&pod, false);
                }
                workers.update_pod(UpdatePodOptions {
                    pod,
                    update_type: if kill { UpdateType::Kill } else { UpdateType::Update },
                    grace_override: None,
                    removed: false,
                });
            }
        }
        PodOperation::Remove => {
            for pod in u.pods {
                if is_mirror_pod(&pod) {
                    let mut pm = kubelet.pod_manager.lock().unwrap_or_else(|e| e.into_inner());
                    if pm.mirrors.get(&full_name(&pod)).and_then(|m| m.metadata.uid.clone()) == pod.metadata.uid {
                        pm.mirrors.remove(&full_name(&pod));
                    }
                    continue;
                }
                let uid = uid(&pod).to_string();
                kubelet.pod_manager.lock().unwrap_or_else(|e| e.into_inner()).pods.remove(&uid);
                // Gone from the API server while still running here: a forced delete
                // (`--force --grace-period=0`). The containers get 1 s, not the pod's grace
                // period. A static pod whose file went away stops with its own grace period.
                let from_api = pod
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(CONFIG_SOURCE_ANNOTATION_KEY))
                    .is_some_and(|s| s == APISERVER_SOURCE);
                if from_api {
                    kubelet.shorten_termination(&pod, true);
                }
                workers.update_pod(UpdatePodOptions {
                    pod: Arc::new(pod),
                    update_type: UpdateType::Kill,
                    grace_override: from_api.then_some(FORCED_GRACE_PERIOD.as_secs() as i64),
                    removed: true,
                });
            }
        }
    }
}

/// HandlePodAdditions: admit the pod (or reject it with a reason), then hand it to a worker.
fn handle_pod_addition(kubelet: &Arc<Kubelet>, workers: &mut PodWorkers, pod: Pod) {
    let uid = uid(&pod).to_string();
    let terminal = is_pod_terminal(&pod);
    let already_running = kubelet.has_runtime_state(&uid) || workers.state(&uid).is_some();
    if !terminal && !already_running && pod.metadata.deletion_timestamp.is_none() {
        // The eviction manager's admit handler comes first, as in kubelet.
        let pressure = kubelet.pressure.borrow().clone();
        if let Some((reason, message)) = crate::eviction::eviction_manager::admit(&pressure, &pod) {
            reject_pod(kubelet, &pod, &reason, &message);
            return;
        }
        let active = active_pods(kubelet, workers);
        let node = kubelet.node.borrow().clone();
        if let Some(node) = node {
            let r = crate::lifecycle::predicate::can_admit_pod(&node, &active, &pod, kubelet.max_pods as usize);
            if !r.admit {
                reject_pod(kubelet, &pod, &r.reason, &r.message);
                return;
            }
        }
    }
    let pod = Arc::new(pod);
    kubelet.pod_manager.lock().unwrap_or_else(|e| e.into_inner()).pods.insert(uid, pod.clone());
    workers.update_pod(UpdatePodOptions {
        pod: pod.clone(),
        update_type: if pod.metadata.deletion_timestamp.is_some() { UpdateType::Kill } else { UpdateType::Create },
        grace_override: None,
        removed: false,
    });
}

/// The pods that hold resources on this node, for admission (kubelet's GetActivePods and
/// filterOutInactivePods): every pod a source wants except those that are done. A pod is done
/// once its containers have stopped, which the status manager's terminal phase (set at that
/// moment) and the worker's Terminated state say at once; the API server's copy, which the pod
/// manager holds, says so only later. The scheduler frees a pod's resources as soon as it sees
/// that terminal status, and a pod it then binds here must not be refused for them (seen in the
/// lab: a pod bound the moment the pod filling the node turned Failed was rejected OutOfcpu).
pub(crate) fn active_pods(kubelet: &Kubelet, workers: &PodWorkers) -> Vec<Pod> {
    kubelet
        .desired_pods()
        .iter()
        .filter(|p| {
            let uid = uid(p);
            !is_pod_terminal(p)
                && !kubelet.status.get_pod_status(uid).is_some_and(|s| is_pod_phase_terminal(s.phase.as_deref()))
                && workers.state(uid) != Some(WorkerState::Terminated)
        })
        .map(|p| (**p).clone())
        .collect()
}

/// rejectPod: the pod fails on this node with the admission reason, and an event says why.
fn reject_pod(kubelet: &Kubelet, pod: &Pod, reason: &str, message: &str) {
    kubelet.recorder.pod_event(pod, None, events::WARNING, reason, message);
    let mut status = pod.status.clone().unwrap_or_default();
    status.phase = Some("Failed".into());
    status.reason = Some(reason.to_string());
    status.message = Some(format!("Pod was rejected: {message}"));
    kubelet.status.set_pod_status(pod, status);
    // Nothing runs for a rejected pod: its terminal phase may be reported at once.
    kubelet.status.terminate_pod(pod);
}
