//! Mirrors kubelet's prober/prober_manager.go: the probe workers of every pod, the three result
//! caches, and what the rest of the agent reads from them.
//!
//! - SyncPod calls [`ProberManager::add_pod`] (idempotent): a worker for each container and
//!   probe type that has none yet.
//! - SyncTerminatingPod calls [`ProberManager::stop_liveness_and_startup`]: a pod that is shutting
//!   down must not have its containers restarted by a failing probe.
//! - SyncTerminatedPod calls [`ProberManager::remove_pod`].
//! - The status generator reads [`ProberManager::readiness_and_startup`] (kubelet's
//!   UpdatePodStatus); `compute_pod_actions` reads [`ProberManager::pod_probe_results`].
//! - The sync loop takes [`ProberManager::take_updates`] and resyncs a pod whose result changed.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Instant;

use k8s_openapi::api::core::v1::Pod;
use tokio::sync::{Notify, mpsc, oneshot};

use super::results::{Manager, PodProbeResults, ProbeResult, Update};
use super::worker::{self, Worker, WorkerContext};
use super::{ProbeRunner, ProbeType};
use crate::container::{self as kc, ContainerState};
use crate::status::StatusManager;

/// (pod UID, container name, probe type): one worker each.
type WorkerKey = (String, String, ProbeType);

struct WorkerHandle {
    /// Tells this worker apart from a later one under the same key.
    id: u64,
    /// Dropping it stops the worker.
    _stop: oneshot::Sender<()>,
    trigger: Arc<Notify>,
}

/// The probe workers and their results. Cheap to clone.
#[derive(Clone)]
pub(crate) struct ProberManager {
    inner: Arc<Inner>,
}

struct Inner {
    /// A std Mutex: held only to look up, insert or remove a handle, never across an await.
    workers: Mutex<HashMap<WorkerKey, WorkerHandle>>,
    liveness: Arc<Manager>,
    readiness: Arc<Manager>,
    startup: Arc<Manager>,
    runner: Arc<dyn ProbeRunner>,
    status: StatusManager,
    started: Instant,
    next_id: AtomicU64,
    updates: Mutex<Option<mpsc::UnboundedReceiver<Update>>>,
}

impl ProberManager {
    /// Workers read pod statuses from `status` and probe through `runner`.
    pub(crate) fn new(runner: Arc<dyn ProbeRunner>, status: StatusManager) -> ProberManager {
        let (tx, rx) = mpsc::unbounded_channel();
        ProberManager {
            inner: Arc::new(Inner {
                workers: Mutex::new(HashMap::new()),
                liveness: Arc::new(Manager::new(ProbeType::Liveness, tx.clone())),
                readiness: Arc::new(Manager::new(ProbeType::Readiness, tx.clone())),
                startup: Arc::new(Manager::new(ProbeType::Startup, tx)),
                runner,
                status,
                started: Instant::now(),
                next_id: AtomicU64::new(0),
                updates: Mutex::new(Some(rx)),
            }),
        }
    }

    fn workers(&self) -> MutexGuard<'_, HashMap<WorkerKey, WorkerHandle>> {
        self.inner.workers.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn results(&self, probe_type: ProbeType) -> &Arc<Manager> {
        match probe_type {
            ProbeType::Liveness => &self.inner.liveness,
            ProbeType::Readiness => &self.inner.readiness,
            ProbeType::Startup => &self.inner.startup,
        }
    }

    /// The stream of result changes, for the sync loop (once; `None` afterwards).
    pub(crate) fn take_updates(&self) -> Option<mpsc::UnboundedReceiver<Update>> {
        self.inner.updates.lock().unwrap_or_else(|e| e.into_inner()).take()
    }

    /// AddPod: start a worker for every probe of the pod's containers that has none. Must be
    /// called within a tokio runtime.
    pub(crate) fn add_pod(&self, pod: &Pod) {
        let Some(uid) = pod.metadata.uid.clone() else { return };
        let Some(spec) = &pod.spec else { return };
        let pod = Arc::new(pod.clone());
        let mut workers = self.workers();
        for c in &spec.containers {
            for probe_type in [ProbeType::Startup, ProbeType::Readiness, ProbeType::Liveness] {
                let key = (uid.clone(), c.name.clone(), probe_type);
                if workers.contains_key(&key) {
                    continue;
                }
                let Some(w) = Worker::new(probe_type, pod.clone(), c.clone()) else { continue };
                let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
                let (stop_tx, stop_rx) = oneshot::channel();
                let trigger = Arc::new(Notify::new());
                let ctx = WorkerContext {
                    runner: self.inner.runner.clone(),
                    results: self.results(probe_type).clone(),
                    status: self.inner.status.clone(),
                    agent_started: self.inner.started,
                    trigger: trigger.clone(),
                    stop: stop_rx,
                };
                let inner: Weak<Inner> = Arc::downgrade(&self.inner);
                let done_key = key.clone();
                tokio::spawn(async move {
                    worker::run(w, ctx).await;
                    // A worker that finished by itself forgets its handle (not a newer one's).
                    if let Some(inner) = inner.upgrade() {
                        let mut workers = inner.workers.lock().unwrap_or_else(|e| e.into_inner());
                        if workers.get(&done_key).is_some_and(|h| h.id == id) {
                            workers.remove(&done_key);
                        }
                    }
                });
                workers.insert(key, WorkerHandle { id, _stop: stop_tx, trigger });
            }
        }
    }

    fn stop_where(&self, keep: impl Fn(&WorkerKey) -> bool) {
        // Dropping a handle's sender stops its worker, which then drops its results.
        self.workers().retain(|k, _| keep(k));
    }

    /// StopLivenessAndStartup: the pod is terminating.
    pub(crate) fn stop_liveness_and_startup(&self, pod_uid: &str) {
        self.stop_where(|(uid, _, t)| !(uid == pod_uid && *t != ProbeType::Readiness));
    }

    /// RemovePod: stop every worker of the pod.
    pub(crate) fn remove_pod(&self, pod_uid: &str) {
        self.stop_where(|(uid, _, _)| uid != pod_uid);
    }

    /// CleanupPods: stop the workers of pods not in `desired`.
    pub(crate) fn cleanup_pods(&self, desired: &HashSet<String>) {
        self.stop_where(|(uid, _, _)| desired.contains(uid));
    }

    /// How many workers run (for tests).
    #[cfg(test)]
    pub(crate) fn worker_count(&self) -> usize {
        self.workers().len()
    }

    /// `started` and `ready` inputs of the status generator, by CRI container ID (kubelet's
    /// UpdatePodStatus). A running container with a startup probe is started only once that
    /// probe succeeded; one with a readiness probe is ready only once that probe succeeded.
    /// Containers without such probes are left out (the generator takes them as started and
    /// ready once running). A started, not-ready container gets an immediate readiness probe
    /// rather than waiting for its next tick.
    pub(crate) fn readiness_and_startup(&self, pod: &Pod, runtime: &kc::PodStatus) -> (HashMap<String, bool>, HashMap<String, bool>) {
        let (mut readiness, mut startup) = (HashMap::new(), HashMap::new());
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        for c in pod.spec.iter().flat_map(|s| &s.containers) {
            let Some(s) = runtime.find_container(&c.name).filter(|s| s.state == ContainerState::Running) else { continue };
            let mut started = true;
            if c.startup_probe.is_some() {
                started = self.inner.startup.get(&s.id) == Some(ProbeResult::Success);
                startup.insert(s.id.clone(), started);
            }
            if c.readiness_probe.is_some() {
                let ready = started && self.inner.readiness.get(&s.id) == Some(ProbeResult::Success);
                readiness.insert(s.id.clone(), ready);
                if started && !ready && let Some(h) = self.workers().get(&(uid.clone(), c.name.clone(), ProbeType::Readiness)) {
                    h.trigger.notify_one();
                }
            }
        }
        (readiness, startup)
    }

    /// The liveness and startup results of the pod's containers, for `compute_pod_actions`.
    pub(crate) fn pod_probe_results(&self, runtime: &kc::PodStatus) -> PodProbeResults {
        let mut r = PodProbeResults::default();
        for c in &runtime.containers {
            if let Some(v) = self.inner.liveness.get(&c.id) {
                r.liveness.insert(c.id.clone(), v);
            }
            if let Some(v) = self.inner.startup.get(&c.id) {
                r.startup.insert(c.id.clone(), v);
            }
        }
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Result;
    use crate::testing::wait_for;
    use futures::future::BoxFuture;
    use k8s_openapi::api::core::v1::{
        Container, ContainerState as ApiState, ContainerStateRunning, ContainerStatus, ExecAction, PodSpec, PodStatus, Probe,
    };

    /// Every probe answers with `answer`.
    struct Always(ProbeResult);

    impl ProbeRunner for Always {
        fn probe<'a>(&'a self, _: ProbeType, _: &'a Pod, _: &'a PodStatus, _: &'a Container, _: &'a str) -> BoxFuture<'a, Result<ProbeResult>> {
            let r = self.0;
            Box::pin(async move { Ok(r) })
        }
    }

    fn probe() -> Option<Probe> {
        Some(Probe { exec: Some(ExecAction { command: Some(vec!["true".into()]) }), period_seconds: Some(1), failure_threshold: Some(1), ..Default::default() })
    }

    fn pod() -> Pod {
        let mut p = Pod::default();
        p.metadata.uid = Some("u1".into());
        p.spec = Some(PodSpec {
            containers: vec![
                Container { name: "probed".into(), readiness_probe: probe(), liveness_probe: probe(), startup_probe: probe(), ..Default::default() },
                Container { name: "plain".into(), ..Default::default() },
            ],
            ..Default::default()
        });
        p
    }

    fn runtime_status() -> kc::PodStatus {
        let c = |id: &str, name: &str| kc::ContainerStatus {
            id: id.into(),
            name: name.into(),
            state: ContainerState::Running,
            created_at: None,
            started_at: None,
            finished_at: None,
            exit_code: 0,
            image: String::new(),
            image_ref: String::new(),
            restart_count: 0,
            reason: String::new(),
            message: String::new(),
            hash: 0,
        };
        kc::PodStatus { uid: "u1".into(), containers: vec![c("id-probed", "probed"), c("id-plain", "plain")], ..Default::default() }
    }

    fn api_status(started: bool) -> PodStatus {
        let running = ApiState { running: Some(ContainerStateRunning { started_at: None }), ..Default::default() };
        PodStatus {
            phase: Some("Running".into()),
            container_statuses: Some(vec![ContainerStatus {
                name: "probed".into(),
                container_id: Some("containerd://id-probed".into()),
                state: Some(running),
                started: Some(started),
                ..Default::default()
            }]),
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn workers_start_once_feed_the_status_and_stop() {
        let status = StatusManager::new(None, Default::default());
        let m = ProberManager::new(Arc::new(Always(ProbeResult::Success)), status.clone());
        let mut updates = m.take_updates().expect("updates");
        assert!(m.take_updates().is_none());
        let p = pod();
        m.add_pod(&p);
        m.add_pod(&p);
        assert_eq!(m.worker_count(), 3, "one worker per probe, however often the pod is synced");

        // Before any result: started and ready are false for the probed container; the plain
        // one is left to the generator's defaults.
        let rt = runtime_status();
        let (ready, started) = m.readiness_and_startup(&p, &rt);
        assert_eq!(ready, HashMap::from([("id-probed".to_string(), false)]));
        assert_eq!(started, HashMap::from([("id-probed".to_string(), false)]));

        // The startup probe runs first and succeeds.
        status.set_pod_status(&p, api_status(false));
        wait_for("startup success", || m.readiness_and_startup(&p, &rt).1.get("id-probed") == Some(&true)).await;
        // A worker announces its initial value when it first sees the container (startup:
        // Unknown), then each change.
        let seen: Vec<(ProbeType, ProbeResult)> = std::iter::from_fn(|| updates.try_recv().ok()).map(|u| (u.probe_type, u.result)).collect();
        let startup: Vec<ProbeResult> = seen.iter().filter(|(t, _)| *t == ProbeType::Startup).map(|(_, r)| *r).collect();
        assert_eq!(startup, [ProbeResult::Unknown, ProbeResult::Success], "{seen:?}");
        // Readiness waits for `started` in the status; then it probes (at once: triggered).
        assert_eq!(m.readiness_and_startup(&p, &rt).0.get("id-probed"), Some(&false));
        status.set_pod_status(&p, api_status(true));
        wait_for("ready", || m.readiness_and_startup(&p, &rt).0.get("id-probed") == Some(&true)).await;
        // Liveness probes on its own worker, in no set order with readiness.
        wait_for("liveness success", || m.pod_probe_results(&rt).liveness.get("id-probed") == Some(&ProbeResult::Success)).await;

        m.stop_liveness_and_startup("u1");
        assert_eq!(m.worker_count(), 1);
        wait_for("liveness result dropped", || m.pod_probe_results(&rt).liveness.is_empty()).await;
        m.remove_pod("u1");
        assert_eq!(m.worker_count(), 0);
        wait_for("readiness result dropped", || m.readiness_and_startup(&p, &rt).0.get("id-probed") == Some(&false)).await;
        m.add_pod(&p);
        m.cleanup_pods(&HashSet::new());
        assert_eq!(m.worker_count(), 0);
    }

    #[tokio::test]
    async fn liveness_failure_reaches_pod_probe_results() {
        let status = StatusManager::new(None, Default::default());
        let m = ProberManager::new(Arc::new(Always(ProbeResult::Failure)), status.clone());
        let mut p = pod();
        p.spec.as_mut().expect("spec").containers[0].startup_probe = None;
        status.set_pod_status(&p, api_status(true));
        m.add_pod(&p);
        let rt = runtime_status();
        wait_for("liveness failure", || m.pod_probe_results(&rt).kill_reason("id-probed") == Some(ProbeType::Liveness)).await;
    }
}
