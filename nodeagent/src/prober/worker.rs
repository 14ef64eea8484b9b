//! Mirrors kubelet's prober/worker.go: one worker per container and probe type, ticking every
//! `periodSeconds`.
//!
//! The decisions live in [`Worker`], a plain state machine that is given the pod's status and
//! the time, so its rules are tested with a clock the test controls. [`run`] is the tokio task
//! around it: the ticker, the manual trigger, the stop signal and the probe call.
//!
//! One tick (kubelet's doProbe):
//! 1. No status for the pod yet: wait. A terminal pod: stop.
//! 2. Find the container's current ID in the status. A new ID (the container restarted) drops
//!    the old ID's result and starts the new one from the probe type's initial value (readiness:
//!    Failure, liveness: Success, startup: Unknown), and lifts a hold.
//! 3. On hold (after a liveness or startup failure, until the container is replaced): wait.
//! 4. Not running: the result is Failure; stop if it will never run again (restartPolicy Never).
//! 5. Fewer than `initialDelaySeconds` since the container started: wait.
//! 6. A startup probe stops probing once the container has started; liveness and readiness
//!    wait until it has.
//! 7. Probe. A result counts once it repeats `successThreshold` (or `failureThreshold`) times
//!    in a row; then it is cached, which tells the sync loop if it changed.

use std::sync::Arc;
use std::time::{Duration, Instant};

use api::pod::is_pod_phase_terminal;
use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::{Container, Pod, PodStatus, Probe};
use tokio::sync::{Notify, oneshot};

use super::results::{Manager, ProbeResult};
use super::{ProbeRunner, ProbeType};
use crate::status::StatusManager;
use crate::status::container_statuses::parse_container_id;

/// A probe's timing, with Kubernetes' defaults filled in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Timing {
    pub(crate) initial_delay_seconds: i64,
    pub(crate) period: Duration,
    pub(crate) success_threshold: u32,
    pub(crate) failure_threshold: u32,
}

impl Timing {
    pub(crate) fn new(p: &Probe, probe_type: ProbeType) -> Timing {
        let at_least_one = |v: Option<i32>, default: i32| v.unwrap_or(default).max(1) as u32;
        Timing {
            initial_delay_seconds: p.initial_delay_seconds.unwrap_or(0).max(0) as i64,
            period: Duration::from_secs(at_least_one(p.period_seconds, super::DEFAULT_PERIOD_SECONDS) as u64),
            // Validation holds liveness and startup probes to 1; take that as given.
            success_threshold: if probe_type == ProbeType::Readiness {
                at_least_one(p.success_threshold, super::DEFAULT_SUCCESS_THRESHOLD)
            } else {
                1
            },
            failure_threshold: at_least_one(p.failure_threshold, super::DEFAULT_FAILURE_THRESHOLD),
        }
    }
}

/// The result a container starts from before its first probe counts.
pub(crate) fn initial_value(probe_type: ProbeType) -> ProbeResult {
    match probe_type {
        // Not ready until proven ready.
        ProbeType::Readiness => ProbeResult::Failure,
        // Alive until proven dead.
        ProbeType::Liveness => ProbeResult::Success,
        ProbeType::Startup => ProbeResult::Unknown,
    }
}

/// What a tick decided before probing.
#[derive(Debug, PartialEq)]
pub(crate) enum Step {
    /// Nothing to do this tick.
    Wait,
    /// The worker is done for good.
    Stop,
    /// Run the probe against this container.
    Probe { container_id: String },
}

/// The probe worker's state (the fields of kubelet's worker struct), without the I/O.
#[derive(Debug)]
pub(crate) struct Worker {
    pub(crate) probe_type: ProbeType,
    /// The pod as it was when the worker started (its spec does not change).
    pub(crate) pod: Arc<Pod>,
    pub(crate) container: Container,
    pub(crate) timing: Timing,
    container_id: Option<String>,
    last_result: ProbeResult,
    result_run: u32,
    on_hold: bool,
}

impl Worker {
    /// `None` when the container has no probe of this type.
    pub(crate) fn new(probe_type: ProbeType, pod: Arc<Pod>, container: Container) -> Option<Worker> {
        let timing = Timing::new(super::prober::probe_spec(&container, probe_type)?, probe_type);
        Some(Worker {
            probe_type,
            pod,
            container,
            timing,
            container_id: None,
            last_result: ProbeResult::Unknown,
            result_run: 0,
            on_hold: false,
        })
    }

    fn pod_uid(&self) -> &str {
        self.pod.metadata.uid.as_deref().unwrap_or_default()
    }

    /// The container ID the worker follows (the latest it saw).
    pub(crate) fn container_id(&self) -> Option<&str> {
        self.container_id.as_deref()
    }

    /// Steps 1–6 of a tick, given the pod's latest status and the time.
    pub(crate) fn check(&mut self, status: Option<&PodStatus>, now: DateTime<Utc>, results: &Manager) -> Step {
        // Step 1: a status to look at; a terminal pod is never probed again.
        let Some(status) = status else { return Step::Wait };
        if is_pod_phase_terminal(status.phase.as_deref()) {
            return Step::Stop;
        }
        let Some(c) = status.container_statuses.iter().flatten().find(|c| c.name == self.container.name) else {
            return Step::Wait;
        };
        let Some(id) = c.container_id.as_deref().map(parse_container_id).filter(|id| !id.is_empty()) else {
            return Step::Wait;
        };

        // Step 2: a new container instance starts from fresh results.
        if self.container_id.as_deref() != Some(id) {
            if let Some(old) = &self.container_id {
                results.remove(old);
            }
            self.container_id = Some(id.to_string());
            results.set(id, initial_value(self.probe_type), self.pod_uid());
            self.on_hold = false;
            self.last_result = ProbeResult::Unknown;
            self.result_run = 0;
        }

        // Step 3.
        if self.on_hold {
            return Step::Wait;
        }

        // Step 4: a container that does not run is not ready, not alive, not started.
        let state = c.state.as_ref();
        let Some(running) = state.and_then(|s| s.running.as_ref()) else {
            results.set(id, ProbeResult::Failure, self.pod_uid());
            let terminated = state.is_some_and(|s| s.terminated.is_some());
            let never = self.pod.spec.as_ref().and_then(|s| s.restart_policy.as_deref()) == Some("Never");
            return if terminated && never { Step::Stop } else { Step::Wait };
        };

        // Step 5: initialDelaySeconds after the container started.
        if let Some(started_at) = &running.started_at
            && now.timestamp() - started_at.0.as_second() < self.timing.initial_delay_seconds
        {
            return Step::Wait;
        }

        // Step 6: the startup probe gates the other two.
        let started = c.started == Some(true);
        if started == (self.probe_type == ProbeType::Startup) {
            return Step::Wait;
        }
        Step::Probe { container_id: id.to_string() }
    }

    /// Step 7: count a probe's result, and cache it once it reached its threshold.
    pub(crate) fn record(&mut self, result: ProbeResult, results: &Manager) {
        let Some(id) = self.container_id.clone() else { return };
        if self.last_result == result {
            self.result_run += 1;
        } else {
            self.last_result = result;
            self.result_run = 1;
        }
        let threshold = match result {
            ProbeResult::Failure => self.timing.failure_threshold,
            ProbeResult::Success => self.timing.success_threshold,
            ProbeResult::Unknown => 1,
        };
        if self.result_run < threshold {
            return;
        }
        results.set(&id, result, self.pod_uid());
        if result == ProbeResult::Failure && self.probe_type != ProbeType::Readiness {
            // The container will be killed: probe nothing until its replacement appears.
            self.on_hold = true;
            self.result_run = 0;
        }
    }
}

/// Everything a running worker task needs besides its [`Worker`].
pub(crate) struct WorkerContext {
    pub(crate) runner: Arc<dyn ProbeRunner>,
    pub(crate) results: Arc<Manager>,
    pub(crate) status: StatusManager,
    /// When the agent started: a worker started within one period of it waits a random part of
    /// the period first, so that probes of adopted pods do not all fire at once.
    pub(crate) agent_started: Instant,
    /// Probe now, without waiting for the next tick (readiness of a container that just started).
    pub(crate) trigger: Arc<Notify>,
    /// Fires, or is dropped, to stop the worker.
    pub(crate) stop: oneshot::Receiver<()>,
}

/// The worker task (kubelet's worker.run): tick until stopped or done, then drop the
/// container's result. Returns when the worker is finished.
pub(crate) async fn run(mut w: Worker, mut ctx: WorkerContext) {
    let period = w.timing.period;
    tracing::debug!(target: "kubelet::prober", probe = %w.probe_type, pod_uid = w.pod_uid(), container = %w.container.name, ?period, "probe worker started");
    if ctx.agent_started.elapsed() < period {
        let jitter = period.mul_f64(rand::random::<f64>());
        tokio::select! {
            _ = tokio::time::sleep(jitter) => {}
            _ = &mut ctx.stop => return finish(&w, &ctx),
        }
    }
    let mut ticker = tokio::time::interval(period);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticker.tick().await; // the first tick is immediate
    loop {
        if !do_probe(&mut w, &ctx).await {
            break;
        }
        tokio::select! {
            _ = &mut ctx.stop => break,
            _ = ticker.tick() => {}
            _ = ctx.trigger.notified() => {}
        }
    }
    finish(&w, &ctx)
}

fn finish(w: &Worker, ctx: &WorkerContext) {
    if let Some(id) = w.container_id() {
        ctx.results.remove(id);
    }
    tracing::debug!(target: "kubelet::prober", probe = %w.probe_type, pod_uid = w.pod_uid(), container = %w.container.name, "probe worker stopped");
}

/// One tick; false when the worker is done.
async fn do_probe(w: &mut Worker, ctx: &WorkerContext) -> bool {
    let status = ctx.status.get_pod_status(w.pod_uid());
    let container_id = match w.check(status.as_ref(), Utc::now(), &ctx.results) {
        Step::Stop => return false,
        Step::Wait => return true,
        Step::Probe { container_id } => container_id,
    };
    let status = status.unwrap_or_default();
    // An error means the probe could not run (runtime away, no pod IP yet): the tick does not
    // count.
    if let Ok(result) = ctx.runner.probe(w.probe_type, &w.pod, &status, &w.container, &container_id).await {
        w.record(result, &ctx.results);
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{Error, Result};
    use futures::future::BoxFuture;
    use k8s_openapi::api::core::v1::{
        ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStatus, ExecAction, PodSpec,
    };
    use std::sync::Mutex;
    use tokio::sync::mpsc;

    fn exec_probe(initial_delay: i32, period: i32, success: i32, failure: i32) -> Probe {
        Probe {
            exec: Some(ExecAction { command: Some(vec!["true".into()]) }),
            initial_delay_seconds: Some(initial_delay),
            period_seconds: Some(period),
            success_threshold: Some(success),
            failure_threshold: Some(failure),
            ..Default::default()
        }
    }

    fn pod(policy: &str, c: Container) -> Arc<Pod> {
        let mut p = Pod::default();
        p.metadata.uid = Some("uid-1".into());
        p.metadata.name = Some("p".into());
        p.spec = Some(PodSpec { restart_policy: Some(policy.into()), containers: vec![c], ..Default::default() });
        Arc::new(p)
    }

    fn t(secs: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_700_000_000 + secs, 0).unwrap_or_default()
    }

    /// A pod status with container "c" as `id`, running since `t(0)` unless `running` is false.
    fn status(id: &str, running: bool, started: bool) -> PodStatus {
        let state = if running {
            ContainerState { running: Some(ContainerStateRunning { started_at: Some(crate::status::container_statuses::to_time(t(0))) }), ..Default::default() }
        } else {
            ContainerState { terminated: Some(ContainerStateTerminated { exit_code: 137, ..Default::default() }), ..Default::default() }
        };
        PodStatus {
            phase: Some("Running".into()),
            container_statuses: Some(vec![ContainerStatus {
                name: "c".into(),
                container_id: Some(format!("containerd://{id}")),
                state: Some(state),
                started: Some(started),
                ..Default::default()
            }]),
            ..Default::default()
        }
    }

    fn manager(pt: ProbeType) -> (Manager, mpsc::UnboundedReceiver<super::super::results::Update>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (Manager::new(pt, tx), rx)
    }

    fn worker(pt: ProbeType, probe: Probe, policy: &str) -> Worker {
        let mut c = Container { name: "c".into(), ..Default::default() };
        match pt {
            ProbeType::Liveness => c.liveness_probe = Some(probe),
            ProbeType::Readiness => c.readiness_probe = Some(probe),
            ProbeType::Startup => c.startup_probe = Some(probe),
        }
        Worker::new(pt, pod(policy, c.clone()), c).expect("has the probe")
    }

    #[test]
    fn defaults_are_kubernetes_defaults() {
        let t = Timing::new(&Probe::default(), ProbeType::Readiness);
        assert_eq!(t, Timing { initial_delay_seconds: 0, period: Duration::from_secs(10), success_threshold: 1, failure_threshold: 3 });
        let t = Timing::new(&exec_probe(0, 0, 5, 0), ProbeType::Liveness);
        assert_eq!((t.period, t.success_threshold, t.failure_threshold), (Duration::from_secs(1), 1, 1), "floors of 1; liveness succeeds once");
    }

    #[test]
    fn failure_threshold_counts_consecutive_failures() {
        let (m, mut rx) = manager(ProbeType::Readiness);
        let mut w = worker(ProbeType::Readiness, exec_probe(0, 10, 2, 3), "Always");
        let s = status("c1", true, true);
        assert_eq!(w.check(Some(&s), t(1), &m), Step::Probe { container_id: "c1".into() });
        assert_eq!(m.get("c1"), Some(ProbeResult::Failure), "readiness starts as not ready");

        // successThreshold 2: one success is not enough, two in a row are.
        w.record(ProbeResult::Success, &m);
        assert_eq!(m.get("c1"), Some(ProbeResult::Failure));
        w.record(ProbeResult::Success, &m);
        assert_eq!(m.get("c1"), Some(ProbeResult::Success));

        // failureThreshold 3: two failures, a success in between resets the run.
        w.record(ProbeResult::Failure, &m);
        w.record(ProbeResult::Failure, &m);
        w.record(ProbeResult::Success, &m);
        w.record(ProbeResult::Failure, &m);
        w.record(ProbeResult::Failure, &m);
        assert_eq!(m.get("c1"), Some(ProbeResult::Success), "never three failures in a row");
        w.record(ProbeResult::Failure, &m);
        assert_eq!(m.get("c1"), Some(ProbeResult::Failure));
        let changes: Vec<ProbeResult> = std::iter::from_fn(|| rx.try_recv().ok()).map(|u| u.result).collect();
        assert_eq!(changes, [ProbeResult::Failure, ProbeResult::Success, ProbeResult::Failure]);

        // A readiness failure does not hold the worker: it keeps probing.
        assert_eq!(w.check(Some(&s), t(2), &m), Step::Probe { container_id: "c1".into() });
    }

    #[test]
    fn initial_delay_counts_from_the_container_start() {
        let (m, _rx) = manager(ProbeType::Liveness);
        let mut w = worker(ProbeType::Liveness, exec_probe(15, 10, 1, 3), "Always");
        let s = status("c1", true, true);
        assert_eq!(w.check(Some(&s), t(0), &m), Step::Wait);
        assert_eq!(w.check(Some(&s), t(14), &m), Step::Wait);
        assert_eq!(m.get("c1"), Some(ProbeResult::Success), "alive until proven dead");
        assert_eq!(w.check(Some(&s), t(15), &m), Step::Probe { container_id: "c1".into() });
    }

    #[test]
    fn liveness_failure_holds_until_a_new_container_which_starts_fresh() {
        let (m, _rx) = manager(ProbeType::Liveness);
        let mut w = worker(ProbeType::Liveness, exec_probe(0, 10, 1, 2), "Always");
        let s1 = status("c1", true, true);
        assert!(matches!(w.check(Some(&s1), t(1), &m), Step::Probe { .. }));
        w.record(ProbeResult::Failure, &m);
        assert_eq!(m.get("c1"), Some(ProbeResult::Success));
        w.record(ProbeResult::Failure, &m);
        assert_eq!(m.get("c1"), Some(ProbeResult::Failure));
        assert_eq!(w.check(Some(&s1), t(2), &m), Step::Wait, "on hold: the container is being killed");

        // The restarted container: the old result is gone, the new one starts alive.
        let s2 = status("c2", true, true);
        assert_eq!(w.check(Some(&s2), t(3), &m), Step::Probe { container_id: "c2".into() });
        assert_eq!(m.get("c1"), None);
        assert_eq!(m.get("c2"), Some(ProbeResult::Success));
        w.record(ProbeResult::Failure, &m);
        assert_eq!(m.get("c2"), Some(ProbeResult::Success), "the failure count starts over for a new container");
    }

    #[test]
    fn startup_probe_gates_liveness_and_readiness() {
        let s_not_started = status("c1", true, false);
        let s_started = status("c1", true, true);
        for pt in [ProbeType::Liveness, ProbeType::Readiness] {
            let (m, _rx) = manager(pt);
            let mut w = worker(pt, exec_probe(0, 10, 1, 3), "Always");
            assert_eq!(w.check(Some(&s_not_started), t(100), &m), Step::Wait, "{pt} waits for the startup probe");
            assert_eq!(w.check(Some(&s_started), t(101), &m), Step::Probe { container_id: "c1".into() }, "{pt} runs once started");
        }
        let (m, _rx) = manager(ProbeType::Startup);
        let mut w = worker(ProbeType::Startup, exec_probe(0, 10, 1, 3), "Always");
        assert_eq!(w.check(Some(&s_not_started), t(1), &m), Step::Probe { container_id: "c1".into() });
        assert_eq!(m.get("c1"), Some(ProbeResult::Unknown));
        w.record(ProbeResult::Success, &m);
        assert_eq!(m.get("c1"), Some(ProbeResult::Success));
        assert_eq!(w.check(Some(&s_started), t(2), &m), Step::Wait, "a started container is not startup-probed again");
    }

    #[test]
    fn dead_containers_and_terminal_pods() {
        let (m, _rx) = manager(ProbeType::Readiness);
        let mut w = worker(ProbeType::Readiness, exec_probe(0, 10, 1, 3), "Always");
        assert_eq!(w.check(None, t(0), &m), Step::Wait, "no status yet");
        let dead = status("c1", false, false);
        assert_eq!(w.check(Some(&dead), t(1), &m), Step::Wait, "will be restarted: keep watching");
        assert_eq!(m.get("c1"), Some(ProbeResult::Failure));

        let (m, _rx) = manager(ProbeType::Liveness);
        let mut w = worker(ProbeType::Liveness, exec_probe(0, 10, 1, 3), "Never");
        assert_eq!(w.check(Some(&dead), t(1), &m), Step::Stop, "Never: the container will not come back");

        let mut done = status("c1", false, false);
        done.phase = Some("Succeeded".into());
        let (m, _rx) = manager(ProbeType::Liveness);
        let mut w = worker(ProbeType::Liveness, exec_probe(0, 10, 1, 3), "Always");
        assert_eq!(w.check(Some(&done), t(1), &m), Step::Stop);
    }

    /// Answers from a script; records when each probe ran (tokio's clock).
    struct Scripted {
        answers: Mutex<Vec<Result<ProbeResult>>>,
        ran_at: Mutex<Vec<tokio::time::Instant>>,
    }

    impl ProbeRunner for Scripted {
        fn probe<'a>(&'a self, _: ProbeType, _: &'a Pod, _: &'a PodStatus, _: &'a Container, _: &'a str) -> BoxFuture<'a, Result<ProbeResult>> {
            self.ran_at.lock().unwrap_or_else(|e| e.into_inner()).push(tokio::time::Instant::now());
            let mut a = self.answers.lock().unwrap_or_else(|e| e.into_inner());
            let r = if a.is_empty() { Ok(ProbeResult::Failure) } else { a.remove(0) };
            Box::pin(async move { r })
        }
    }

    /// The task: probes every period (errors do not count), reaches the failure threshold on
    /// time, runs at once on a trigger, and drops its result when stopped.
    #[tokio::test(start_paused = true)]
    async fn the_worker_task_ticks_every_period() {
        let w = worker(ProbeType::Readiness, exec_probe(0, 10, 1, 2), "Always");
        let status_manager = StatusManager::new(None, Default::default());
        status_manager.set_pod_status(&w.pod, status("c1", true, true));
        let (tx, mut rx) = mpsc::unbounded_channel();
        let results = Arc::new(Manager::new(ProbeType::Readiness, tx));
        let runner = Arc::new(Scripted {
            answers: Mutex::new(vec![Ok(ProbeResult::Success), Err(Error::NotReady("no IP".into())), Ok(ProbeResult::Failure)]),
            ran_at: Mutex::new(vec![]),
        });
        let trigger = Arc::new(Notify::new());
        let (stop_tx, stop_rx) = oneshot::channel();
        let start = tokio::time::Instant::now();
        let task = tokio::spawn(run(
            w,
            WorkerContext {
                runner: runner.clone(),
                results: results.clone(),
                status: status_manager,
                // Started long ago: no jitter, the first probe is immediate.
                agent_started: Instant::now().checked_sub(Duration::from_secs(3600)).unwrap_or_else(Instant::now),
                trigger: trigger.clone(),
                stop: stop_rx,
            },
        ));
        let next = |rx: &mut mpsc::UnboundedReceiver<super::super::results::Update>| rx.try_recv().ok().map(|u| u.result);

        tokio::time::sleep(Duration::from_millis(1)).await;
        assert_eq!(next(&mut rx), Some(ProbeResult::Failure), "initial value");
        assert_eq!(next(&mut rx), Some(ProbeResult::Success), "first probe at once; successThreshold 1");
        // t=10 s: an error (not counted); t=20 s: a failure (1 of 2); t=30 s: a failure (2 of 2).
        tokio::time::sleep(Duration::from_secs(25)).await;
        assert_eq!(next(&mut rx), None);
        tokio::time::sleep(Duration::from_secs(10)).await;
        assert_eq!(next(&mut rx), Some(ProbeResult::Failure));
        let offsets: Vec<u64> = runner.ran_at.lock().unwrap_or_else(|e| e.into_inner()).iter().map(|i| (*i - start).as_secs()).collect();
        assert_eq!(offsets, [0, 10, 20, 30]);

        // A trigger probes at once, between ticks.
        tokio::time::sleep(Duration::from_secs(2)).await;
        trigger.notify_one();
        tokio::time::sleep(Duration::from_millis(1)).await;
        assert_eq!(runner.ran_at.lock().unwrap_or_else(|e| e.into_inner()).len(), 5);

        drop(stop_tx);
        task.await.expect("worker task");
        assert_eq!(results.get("c1"), None, "a stopped worker drops its container's result");
    }

    /// Right after the agent starts, a worker waits a random part of its period first.
    #[tokio::test(start_paused = true)]
    async fn jitter_only_right_after_the_agent_started() {
        let w = worker(ProbeType::Liveness, exec_probe(0, 10, 1, 3), "Always");
        let status_manager = StatusManager::new(None, Default::default());
        status_manager.set_pod_status(&w.pod, status("c1", true, true));
        let (tx, _rx) = mpsc::unbounded_channel();
        let runner = Arc::new(Scripted { answers: Mutex::new(vec![]), ran_at: Mutex::new(vec![]) });
        let (_stop_tx, stop_rx) = oneshot::channel();
        let start = tokio::time::Instant::now();
        tokio::spawn(run(
            w,
            WorkerContext {
                runner: runner.clone(),
                results: Arc::new(Manager::new(ProbeType::Liveness, tx)),
                status: status_manager,
                agent_started: Instant::now(),
                trigger: Arc::new(Notify::new()),
                stop: stop_rx,
            },
        ));
        tokio::time::sleep(Duration::from_secs(25)).await;
        let ran: Vec<Duration> = runner.ran_at.lock().unwrap_or_else(|e| e.into_inner()).iter().map(|i| *i - start).collect();
        assert!(ran.len() >= 2, "{ran:?}");
        assert!(ran[0] < Duration::from_secs(10), "the first probe within one period: {ran:?}");
        assert_eq!(ran[1] - ran[0], Duration::from_secs(10), "then every period: {ran:?}");
    }
}
