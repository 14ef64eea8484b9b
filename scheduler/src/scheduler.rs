//! Mirrors kube-scheduler's scheduler.go: the Scheduler — queue, cache and framework put together —
//! its scheduling loop, and the handling of each attempt's outcome (schedule_one.go's
//! handleSchedulingFailure and the binding cycle).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams};
use tokio::runtime::Handle;
use tokio::sync::Semaphore;
use tokio::time::Instant;
use tracing::Instrument as _;

use client::record::{self, EventRecorder};

use crate::cache::{Cache, Snapshot};
use crate::framework::runtime::Framework;
use crate::framework::{CycleState, PodInfo, Status};
use crate::informers::Informers;
use crate::metrics::Metrics;
use crate::schedule_one::{ScheduleError, schedule_pod};
use crate::scheduling_queue::{QueuedPodInfo, SchedulingQueue};

/// Bindings in flight at once; the scheduling loop waits when this many are outstanding.
const MAX_CONCURRENT_BINDINGS: usize = 64;

pub struct Scheduler {
    pub framework: Arc<Framework>,
    pub cache: Arc<Mutex<Cache>>,
    pub queue: Arc<SchedulingQueue>,
    pub metrics: Arc<Metrics>,
    /// The storage objects the volume plugins read, filled by the watches in eventhandlers.rs.
    pub informers: Informers,
    client: kube::Client,
    recorder: EventRecorder,
    bindings: Arc<Semaphore>,
    /// Bumped whenever a pod is deleted, so that a binding cycle waiting in PreBind notices
    /// that its pod is gone (kube-scheduler's checkBindings looks the pod up each second).
    pub(crate) pod_deletions: tokio::sync::watch::Sender<u64>,
}

impl Scheduler {
    pub fn new(framework: Framework, client: kube::Client, metrics: Arc<Metrics>, informers: Informers) -> Arc<Scheduler> {
        let recorder = EventRecorder::new(client.clone(), &framework.scheduler_name, None);
        let queue = SchedulingQueue::with_pre_enqueue(framework.pre_enqueue_plugins());
        Arc::new(Scheduler {
            framework: Arc::new(framework),
            cache: Arc::new(Mutex::new(Cache::new())),
            queue: Arc::new(queue),
            metrics,
            informers,
            client,
            recorder,
            bindings: Arc::new(Semaphore::new(MAX_CONCURRENT_BINDINGS)),
            pod_deletions: tokio::sync::watch::channel(0).0,
        })
    }

    /// Whether this scheduler is responsible for the pod (its `spec.schedulerName`).
    pub fn responsible_for(&self, pod: &Pod) -> bool {
        let name = pod.spec.as_ref().and_then(|s| s.scheduler_name.as_deref()).unwrap_or(api::core::v1::well_known::DEFAULT_SCHEDULER_NAME);
        name == self.framework.scheduler_name
    }

    /// The scheduling loop: one pod at a time, on a thread of its own (the cycle is CPU work;
    /// Filter and Score fan out over scoped threads, see `framework::parallelize`). Returns when
    /// the queue is closed.
    pub fn run_loop(self: &Arc<Self>, rt: Handle) {
        let mut snapshot = Snapshot::default();
        let mut next_start = 0;
        while let Some(qp) = rt.block_on(self.queue.pop()) {
            self.schedule_one(qp, &mut snapshot, &mut next_start, &rt);
        }
    }

    /// One pod's scheduling cycle; its binding cycle is spawned onto `rt`.
    fn schedule_one(self: &Arc<Self>, qp: QueuedPodInfo, snapshot: &mut Snapshot, next_start: &mut usize, rt: &Handle) {
        let start = Instant::now();
        let cycle = self.queue.scheduling_cycle();
        // The newest version of the pod; None if it was deleted or bound meanwhile.
        let Some(pod) = self.queue.in_flight(qp.pod.uid()) else { return };
        if pod.pod.metadata.deletion_timestamp.is_some() || self.cache.lock().expect("cache lock").contains_pod(pod.uid()) {
            self.queue.done(pod.uid());
            return;
        }
        let span = tracing::debug_span!(target: "scheduler::schedule_one", "schedule_one", pod = pod.key(), pod_uid = pod.uid(), attempt = qp.attempts, node = tracing::field::Empty, error = tracing::field::Empty);
        // One trace per pod with --otlp-endpoint: this cycle continues the pod's create request.
        podtrace::otel::set_parent_from(&span, pod.pod.metadata.annotations.as_ref());
        let _guard = span.enter();
        self.cache.lock().expect("cache lock").update_snapshot(snapshot);
        let mut state = CycleState::new();
        let result = schedule_pod(&self.framework, &mut state, &pod, snapshot, next_start);
        let node = match result {
            Ok(r) => {
                span.record("node", r.node.as_str());
                r.node
            }
            Err(e) => {
                let why = match &e {
                    ScheduleError::Fit(fe) => fe.message(),
                    ScheduleError::Internal(m) => m.clone(),
                };
                span.record("error", why);
                self.handle_failure(qp, cycle, e, start, rt);
                return;
            }
        };
        // Assume: the next cycle counts this pod on its node before the binding is written.
        self.cache.lock().expect("cache lock").assume_pod(pod.clone(), &node);
        let s = tracing::debug_span!(target: "scheduler::framework", "reserve", pod_uid = tracing::field::Empty, node).in_scope(|| self.framework.run_reserve(&mut state, &pod, &node));
        if !s.is_success() {
            self.cache.lock().expect("cache lock").forget_pod(pod.uid());
            self.handle_failure(qp, cycle, ScheduleError::Internal(format!("running Reserve plugin {}: {}", s.plugin, s.message())), start, rt);
            return;
        }
        self.queue.done(pod.uid());
        tracing::debug!(target: "scheduler::schedule_one", pod = pod.key(), node, "assumed");
        let permit = rt.block_on(self.bindings.clone().acquire_owned()).expect("semaphore never closed");
        let this = self.clone();
        rt.spawn(async move {
            this.binding_cycle(state, qp, pod, node, start).await;
            drop(permit);
        });
    }

    async fn binding_cycle(self: Arc<Self>, mut state: CycleState, qp: QueuedPodInfo, pod: Arc<PodInfo>, node: String, start: Instant) {
        let profile = self.framework.scheduler_name.as_str();
        // PreBind (VolumeBinding writes the pod's volume bindings and waits for them). A failure
        // is the pod's, not the API server's: it goes back to the queue with backoff.
        let pre_bind = tracing::debug_span!(target: "scheduler::framework", "pre_bind", pod_uid = pod.uid(), node, error = tracing::field::Empty);
        podtrace::otel::set_parent_from(&pre_bind, pod.pod.metadata.annotations.as_ref());
        let s = tokio::select! {
            s = self.framework.run_pre_bind(&state, &pod, &node).instrument(pre_bind.clone()) => s,
            () = self.deleted(pod.uid()) => Status::error("pod does not exist any more"),
        };
        if !s.is_success() {
            let msg = format!("running PreBind plugin {:?}: {}", s.plugin, s.message());
            pre_bind.record("error", msg.as_str());
            self.framework.run_unreserve(&mut state, &pod, &node);
            let gone = {
                let mut cache = self.cache.lock().expect("cache lock");
                let gone = !cache.contains_pod(pod.uid());
                cache.forget_pod(pod.uid());
                gone
            };
            if gone {
                // Deleted meanwhile: nothing to retry.
                tracing::info!(target: "scheduler::schedule_one", pod = pod.key(), "binding not needed any more: {msg}");
                return;
            }
            tracing::warn!(target: "scheduler::schedule_one", pod = pod.key(), node, "{msg}");
            self.metrics.schedule_attempts.with_label_values(&["error", profile]).inc();
            self.recorder.event(record::pod_reference(&pod.pod), record::WARNING, "FailedScheduling", msg);
            self.queue.add_backoff(qp, pod);
            return;
        }
        let span = tracing::debug_span!(target: "scheduler::framework", "bind", pod_uid = pod.uid(), node, error = tracing::field::Empty);
        podtrace::otel::set_parent_from(&span, pod.pod.metadata.annotations.as_ref());
        let s = self.framework.run_bind(&pod, &node).instrument(span.clone()).await;
        if !s.is_success() {
            span.record("error", s.message());
        }
        if s.is_success() {
            self.cache.lock().expect("cache lock").finish_binding(pod.uid(), Instant::now());
            let m = &self.metrics;
            m.schedule_attempts.with_label_values(&["scheduled", profile]).inc();
            m.e2e_scheduling_duration.with_label_values(&["scheduled", profile]).observe(start.elapsed().as_secs_f64());
            m.pod_scheduling_duration
                .with_label_values(&[&qp.attempts.min(16).to_string()])
                .observe(qp.initial_timestamp.elapsed().as_secs_f64());
            tracing::info!(target: "scheduler::schedule_one", pod = pod.key(), uid = pod.uid(), node, "Successfully bound pod to node");
            self.recorder.event(
                record::pod_reference(&pod.pod),
                record::NORMAL,
                "Scheduled",
                format!("Successfully assigned {} to {node}", pod.key()),
            );
            return;
        }
        // Roll back: the pod is no longer on the node as far as the scheduler is concerned.
        self.framework.run_unreserve(&mut state, &pod, &node);
        self.cache.lock().expect("cache lock").forget_pod(pod.uid());
        let msg = s.message();
        if msg.contains("already assigned") || msg.contains("NotFound") || msg.contains("not found") {
            // Bound by someone else or deleted meanwhile: the pod watch takes it from here.
            tracing::info!(target: "scheduler::schedule_one", pod = pod.key(), "binding not needed any more: {msg}");
            return;
        }
        tracing::warn!(target: "scheduler::schedule_one", pod = pod.key(), node, "binding failed: {msg}");
        self.metrics.schedule_attempts.with_label_values(&["error", profile]).inc();
        self.recorder.event(record::pod_reference(&pod.pod), record::WARNING, "FailedScheduling", format!("Binding rejected: {msg}"));
        // Back into the queue with backoff, as a failed attempt.
        self.queue.add_backoff(qp, pod);
    }

    /// Completes once the pod with `uid` has left the cache (deleted), checked after each pod
    /// deletion.
    async fn deleted(&self, uid: &str) {
        let mut deletions = self.pod_deletions.subscribe();
        loop {
            if !self.cache.lock().expect("cache lock").contains_pod(uid) {
                return;
            }
            if deletions.changed().await.is_err() {
                return std::future::pending().await;
            }
        }
    }

    /// handleSchedulingFailure: event, condition, and back into the queue.
    fn handle_failure(self: &Arc<Self>, mut qp: QueuedPodInfo, cycle: u64, err: ScheduleError, start: Instant, rt: &Handle) {
        let profile = self.framework.scheduler_name.as_str();
        let (reason, message, error) = match &err {
            ScheduleError::Fit(fe) => {
                qp.unschedulable_plugins = fe.unschedulable_plugins.clone();
                ("Unschedulable", fe.message(), false)
            }
            ScheduleError::Internal(e) => ("SchedulerError", e.clone(), true),
        };
        let result = if error { "error" } else { "unschedulable" };
        self.metrics.schedule_attempts.with_label_values(&[result, profile]).inc();
        self.metrics.e2e_scheduling_duration.with_label_values(&[result, profile]).observe(start.elapsed().as_secs_f64());
        let pod = self.queue.in_flight(qp.pod.uid()).unwrap_or_else(|| qp.pod.clone());
        tracing::info!(target: "scheduler::schedule_one", pod = pod.key(), uid = pod.uid(), "Unable to schedule pod; waiting: {message}");
        self.queue.add_unschedulable(qp, cycle, error);
        self.recorder.event(record::pod_reference(&pod.pod), record::WARNING, "FailedScheduling", message.clone());
        let api: Api<Pod> = Api::namespaced(self.client.clone(), pod.namespace());
        let name = pod.name().to_string();
        let now = k8s_openapi::jiff::Timestamp::now();
        rt.spawn(async move {
            // PodScheduled=False: what `kubectl describe pod` shows under Conditions.
            let patch = serde_json::json!({"status": {"conditions": [{
                "type": "PodScheduled", "status": "False", "reason": reason, "message": message,
                "lastProbeTime": null, "lastTransitionTime": now.to_string(),
            }]}});
            if let Err(e) = api.patch_status(&name, &PatchParams::default(), &Patch::Strategic(&patch)).await {
                tracing::debug!(target: "scheduler::schedule_one", "could not update the condition of {name}: {e}");
            }
        });
    }

    /// Safety nets on timers: the backoff and unschedulable flushes, expired assumptions, and the
    /// pending-pods gauge.
    pub async fn run_housekeeping(self: Arc<Self>) {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        let mut n: u64 = 0;
        loop {
            tick.tick().await;
            n += 1;
            self.queue.flush(n.is_multiple_of(30));
            let expired = self.cache.lock().expect("cache lock").cleanup_expired_assumed_pods(Instant::now());
            if !expired.is_empty() {
                self.queue.move_all_to_active_or_backoff(&self.framework.plugins_interested_in(crate::framework::ClusterEvent::AssignedPodDelete));
            }
            self.metrics.set_pending(self.queue.pending());
        }
    }
}
