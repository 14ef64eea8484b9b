//! Mirrors pkg/controller/job/job_controller.go: the Job controller. It runs a Job's pods until
//! `completions` of them have succeeded (at most `parallelism` at a time), or the Job fails —
//! more than `backoffLimit` failed pods, or `activeDeadlineSeconds` passed.
//!
//! Every pod it creates carries the `batch.kubernetes.io/job-tracking` finalizer, so no
//! finished pod disappears before it is counted. Counting is a three-step protocol
//! ([`JobController::track_job_status_and_remove_finalizers`]), safe across crashes:
//! 1. write the UIDs of newly finished pods into `status.uncountedTerminatedPods`;
//! 2. remove their finalizers;
//! 3. move the UIDs whose finalizer is gone from the uncounted lists to `status.succeeded` /
//!    `status.failed`.
//!
//! A crash between the steps leaves either a UID listed and its pod still held (done again) or
//! a UID listed and its pod free (counted at step 3 next time): no pod counted twice or never.
//!
//! Events feed two work queues ([`JobController::run`]): Job keys (a Job's changes; a pod's,
//! for the Job controlling it, or, for an orphan, every Job whose selector matches it) and pod
//! keys of orphans still holding the finalizer (their Job is gone or finished: the finalizer
//! comes off, [`JobController::sync_orphan_pod`]).
//!
//! One sync ([`JobController::sync_job`]):
//! 1. Read the Job from the cache (gone: forget its expectations and backoff; finished:
//!    nothing to do).
//! 2. Claim its pods (adopting matching orphans, with the finalizer added; releasing what no
//!    longer matches).
//! 3. Count: active (not finished, not being deleted), ready, terminating; succeeded and failed
//!    as the status has them plus the uncounted UIDs plus the newly finished pods.
//! 4. Decide whether the Job is failing ([`failure_decision`]: backoff limit, deadline), or
//!    else queue it again at its deadline.
//! 5. Failing: delete its active pods (finalizers kept: they are counted as failed). Otherwise,
//!    if the expectations are met, manage the pods ([`JobController::manage_job`]: delete all
//!    when suspended, the surplus, or create the missing ones after the failure backoff), then
//!    see whether it is complete ([`is_complete`]); keep the `Suspended` condition.
//! 6. Track: the protocol above, then the terminal condition. Kubernetes 1.31's order: first the
//!    interim `FailureTarget` or `SuccessCriteriaMet` condition, and `Failed` / `Complete` only
//!    once no pod is uncounted or terminating; then the event.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering as AtomicOrdering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{Stream, StreamExt};
use k8s_openapi::api::batch::v1::{Job, JobCondition, JobStatus, UncountedTerminatedPods};
use k8s_openapi::api::core::v1::{ObjectReference, Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::{Value, json};

use super::backoff_utils::{BackoffRecord, BackoffStore, DEFAULT_JOB_POD_FAILURE_BACKOFF, MAX_JOB_POD_FAILURE_BACKOFF};
use super::indexed_job_utils::{OrderedIntervals, completion_index, duplicated_index_pods, first_pending_indexes, succeeded_indexes, template_for_index};
use super::tracking_utils::FinalizerExpectations;
use super::util::{COMPLETE, FAILED, FAILURE_TARGET, SUCCESS_CRITERIA_MET, SUSPENDED, ensure_condition, find_condition, is_job_finished, new_condition};
use crate::controller_ref_manager::ControllerRefManager;
use crate::controller_utils::{ControllerExpectations, SLOW_START_INITIAL_BATCH_SIZE, controller_of, controller_ref, deletion_order, is_pod_active, pod_from_template, slow_start_batch};
use crate::error::{Error, Result};
use crate::workqueue::WorkQueue;

const TARGET: &str = "controllers::job";
/// The finalizer on every pod of a Job until it is counted (`batch.JobTrackingFinalizer`).
pub const JOB_TRACKING_FINALIZER: &str = "batch.kubernetes.io/job-tracking";
/// The most UIDs `status.uncountedTerminatedPods` holds at once (`MaxUncountedPods`).
pub const MAX_UNCOUNTED_PODS: usize = 500;
/// The most pods one sync creates or deletes (`MaxPodCreateDeletePerSync`).
pub const MAX_POD_CREATE_DELETE_PER_SYNC: usize = 500;
/// Workers syncing Jobs at once (`--concurrent-job-syncs`).
pub const CONCURRENT_JOB_SYNCS: usize = 5;

pub const REASON_BACKOFF_LIMIT_EXCEEDED: &str = "BackoffLimitExceeded";
pub const REASON_DEADLINE_EXCEEDED: &str = "DeadlineExceeded";
pub const REASON_COMPLETIONS_REACHED: &str = "CompletionsReached";

pub struct JobController {
    /// Lists and watches for the caches: the controller manager's own client (see
    /// [`crate::controller_context`]).
    informers: kube::Client,
    /// Everything else: the controller's own client.
    client: kube::Client,
    recorder: client::record::EventRecorder,
    expectations: ControllerExpectations,
    finalizer_expectations: FinalizerExpectations,
    backoff: BackoffStore,
}

/// `<namespace>/<name>`, the queues' and the expectations' key.
fn key(namespace: &str, name: &str) -> String {
    format!("{namespace}/{name}")
}

fn key_of<K: kube::Resource>(o: &K) -> String {
    key(o.meta().namespace.as_deref().unwrap_or_default(), o.meta().name.as_deref().unwrap_or_default())
}

fn selector_of(job: &Job) -> Option<apimachinery::labels::Selector> {
    let sel = serde_json::to_value(job.spec.as_ref().and_then(|s| s.selector.as_ref())).unwrap_or(Value::Null);
    apimachinery::labels::Selector::from_label_selector(&sel).ok()
}

fn phase(pod: &Pod) -> &str {
    pod.status.as_ref().and_then(|s| s.phase.as_deref()).unwrap_or("")
}

/// hasJobTrackingFinalizer.
pub fn has_tracking_finalizer(pod: &Pod) -> bool {
    pod.metadata.finalizers.iter().flatten().any(|f| f == JOB_TRACKING_FINALIZER)
}

/// isPodFailed: Failed, or being deleted before it succeeded (an orphaned or deleted pod never
/// reaches the Failed phase; it still counts as a failure).
pub fn is_pod_failed(pod: &Pod) -> bool {
    phase(pod) == "Failed" || (pod.metadata.deletion_timestamp.is_some() && phase(pod) != "Succeeded")
}

/// CountTerminatingPods' test: being deleted, not yet finished.
fn is_terminating(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_some() && !matches!(phase(pod), "Succeeded" | "Failed")
}

fn is_indexed(job: &Job) -> bool {
    job.spec.as_ref().and_then(|s| s.completion_mode.as_deref()) == Some("Indexed")
}

fn is_suspended(job: &Job) -> bool {
    job.spec.as_ref().and_then(|s| s.suspend) == Some(true)
}

/// How many pods should be running (manageJob's `wantActive`): with `completions`, the
/// completions still missing, at most `parallelism`; without (a work queue), `parallelism`
/// until the first success, then whatever still runs.
pub fn want_active(completions: Option<i32>, parallelism: i32, succeeded: i32, active: i32) -> i32 {
    match completions {
        None if succeeded > 0 => active,
        None => parallelism,
        Some(c) => (c - succeeded).min(parallelism).max(0),
    }
}

/// Whether the Job has succeeded: with `completions`, that many successes and nothing left
/// running; without, one success and nothing left running.
pub fn is_complete(completions: Option<i32>, succeeded: i32, active: i32) -> bool {
    active == 0 && succeeded >= completions.unwrap_or(1).max(1)
}

/// What step 4 decides about a Job not yet known to fail.
#[derive(Debug, PartialEq)]
pub enum FailureDecision {
    /// Fail with this reason and message.
    Fail(&'static str, &'static str),
    /// Not failing; look again when the deadline comes.
    RequeueAfter(Duration),
    None,
}

/// Step 4: more failures than `backoffLimit` (or, for `restartPolicy: OnFailure`, container
/// restarts reaching it: `restarts` is their sum over running and pending pods), then the
/// active deadline (not while suspended).
pub fn failure_decision(job: &Job, failed: i32, restarts: Option<i32>, now: Timestamp) -> FailureDecision {
    let spec = job.spec.clone().unwrap_or_default();
    let limit = spec.backoff_limit.unwrap_or(6);
    let past_on_failure = restarts.is_some_and(|r| if limit == 0 { r > 0 } else { r >= limit });
    if failed > limit || past_on_failure {
        return FailureDecision::Fail(REASON_BACKOFF_LIMIT_EXCEEDED, "Job has reached the specified backoff limit");
    }
    let start = job.status.as_ref().and_then(|s| s.start_time.as_ref()).map(|t| t.0);
    if let (Some(ads), Some(start), false) = (spec.active_deadline_seconds, start, is_suspended(job)) {
        let elapsed = now.duration_since(start).as_secs_f64();
        if elapsed >= ads as f64 {
            return FailureDecision::Fail(REASON_DEADLINE_EXCEEDED, "Job was active longer than specified deadline");
        }
        return FailureDecision::RequeueAfter(Duration::from_secs_f64(ads as f64 - elapsed));
    }
    FailureDecision::None
}

/// pastBackoffLimitOnFailure's sum: the restarts of the containers of running and pending pods.
fn restarts_of(pods: &[Arc<Pod>]) -> i32 {
    pods.iter()
        .filter(|p| matches!(phase(p), "Running" | "Pending"))
        .filter_map(|p| p.status.as_ref())
        .flat_map(|s| s.init_container_statuses.iter().flatten().chain(s.container_statuses.iter().flatten()))
        .map(|c| c.restart_count)
        .sum()
}

/// The UIDs in `status.uncountedTerminatedPods`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Uncounted {
    pub succeeded: HashSet<String>,
    pub failed: HashSet<String>,
}

impl Uncounted {
    fn of(status: &JobStatus) -> Self {
        let u = status.uncounted_terminated_pods.clone().unwrap_or_default();
        Uncounted { succeeded: u.succeeded.unwrap_or_default().into_iter().collect(), failed: u.failed.unwrap_or_default().into_iter().collect() }
    }
}

/// The pods whose finalizer a tracking pass removes, and the UIDs (or, Indexed, the indexes) it
/// records first.
#[derive(Debug, Default, PartialEq)]
pub struct TrackingPlan {
    /// Indexes into the pods given.
    pub remove_finalizer: Vec<usize>,
    pub uncounted_succeeded: Vec<String>,
    pub uncounted_failed: Vec<String>,
    pub new_succeeded_indexes: Vec<usize>,
    /// Stopped at [`MAX_UNCOUNTED_PODS`]; the rest waits for the next sync.
    pub reached_max: bool,
}

/// The Job-wide facts a tracking pass decides with.
pub struct TrackingInput<'a> {
    pub uncounted: &'a Uncounted,
    /// UIDs whose finalizer removal is asked and not yet seen: processed already.
    pub expected_removals: &'a HashSet<String>,
    pub job_deleting: bool,
    /// The condition the Job is finishing with (its type), if any.
    pub finishing: Option<&'a str>,
    /// Indexed: `completions` and the indexes counted before.
    pub indexed: Option<(usize, &'a OrderedIntervals)>,
}

/// trackJobStatusAndRemoveFinalizers' loop: a pod still holding the finalizer loses it once it
/// succeeded, failed (or is being deleted), or the Job is finishing or being deleted; before
/// that, a succeeded pod is recorded as succeeded (Indexed: its index), any other as failed
/// when it failed or the Job is failing — each UID once.
pub fn plan_tracking(pods: &[Arc<Pod>], input: &TrackingInput<'_>) -> TrackingPlan {
    let mut plan = TrackingPlan::default();
    let already = input.uncounted.succeeded.len() + input.uncounted.failed.len();
    let failing = input.finishing.is_some_and(|t| t != SUCCESS_CRITERIA_MET);
    for (i, pod) in pods.iter().enumerate() {
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        if !has_tracking_finalizer(pod) || input.expected_removals.contains(&uid) {
            continue;
        }
        let failed = is_pod_failed(pod);
        // canRemoveFinalizer.
        if !(input.job_deleting || input.finishing.is_some() || phase(pod) == "Succeeded" || failed) {
            continue;
        }
        plan.remove_finalizer.push(i);
        let ix = completion_index(pod);
        if phase(pod) == "Succeeded" && !input.uncounted.failed.contains(&uid) {
            match input.indexed {
                Some((completions, prev)) => {
                    if let Some(ix) = ix.filter(|ix| *ix < completions && !prev.has(*ix)) {
                        plan.new_succeeded_indexes.push(ix);
                    }
                }
                None if !input.uncounted.succeeded.contains(&uid) => plan.uncounted_succeeded.push(uid),
                None => {}
            }
        } else if (failed || failing) && !input.uncounted.failed.contains(&uid) {
            let valid_index = input.indexed.is_none_or(|(completions, _)| ix.is_some_and(|ix| ix < completions));
            if valid_index {
                plan.uncounted_failed.push(uid);
            }
        }
        if already + plan.new_succeeded_indexes.len() + plan.uncounted_succeeded.len() + plan.uncounted_failed.len() >= MAX_UNCOUNTED_PODS {
            plan.reached_max = true;
            break;
        }
    }
    plan
}

/// cleanUncountedPodsWithoutFinalizers: the uncounted UIDs whose pod no longer holds the
/// finalizer (or is gone) move into the counters. Whether the status changed.
pub fn clean_uncounted(status: &mut JobStatus, with_finalizer: &HashSet<String>) -> bool {
    let mut changed = false;
    let uncounted = status.uncounted_terminated_pods.get_or_insert_with(UncountedTerminatedPods::default);
    for (list, counter) in [(&mut uncounted.succeeded, &mut status.succeeded), (&mut uncounted.failed, &mut status.failed)] {
        let before = list.as_ref().map_or(0, Vec::len);
        let kept: Vec<String> = list.take().unwrap_or_default().into_iter().filter(|uid| with_finalizer.contains(uid)).collect();
        if kept.len() != before {
            changed = true;
            *counter = Some(counter.unwrap_or(0) + (before - kept.len()) as i32);
        }
        *list = (!kept.is_empty()).then_some(kept);
    }
    changed
}

/// What one sync knows about its Job (`syncJobCtx`).
struct SyncCtx {
    job: Job,
    pods: Vec<Arc<Pod>>,
    active: Vec<Arc<Pod>>,
    ready: i32,
    terminating: i32,
    expected_removals: HashSet<String>,
    succeeded: i32,
    new_backoff: BackoffRecord,
    finished: Option<JobCondition>,
    prev_succeeded_indexes: OrderedIntervals,
    succeeded_indexes: OrderedIntervals,
}

impl JobController {
    pub fn new(informers: kube::Client, client: kube::Client) -> Self {
        let recorder = client::record::EventRecorder::new(client.clone(), "job-controller", None);
        Self {
            informers,
            client,
            recorder,
            expectations: ControllerExpectations::default(),
            finalizer_expectations: FinalizerExpectations::default(),
            backoff: BackoffStore::default(),
        }
    }

    /// Watches Jobs and pods into caches; [`CONCURRENT_JOB_SYNCS`] workers sync the Job keys
    /// their events queue, one more takes the orphan pods.
    pub async fn run(self) -> Result<()> {
        let (jobs, jobs_w) = reflector::store::<Job>();
        let (pods, pods_w) = reflector::store::<Pod>();
        let queue: WorkQueue<String> = WorkQueue::new();
        let orphans: WorkQueue<String> = WorkQueue::new();
        let informer_client = self.informers.clone();
        // The Job (name, uid) each pod uid was last seen controlled by.
        let seen: Mutex<HashMap<String, Option<(String, String)>>> = Mutex::new(HashMap::new());
        let informers = async {
            let on_job = |job: &Job, gone: bool| {
                let k = key_of(job);
                if gone {
                    // deleteJob: its pods still holding the finalizer are orphans now.
                    let uid = job.metadata.uid.clone().unwrap_or_default();
                    for p in pods.state() {
                        if has_tracking_finalizer(&p) && controller_of(&p.metadata).is_some_and(|r| r.uid == uid) {
                            orphans.add(key_of(p.as_ref()));
                        }
                    }
                }
                queue.add(k);
            };
            let on_pod = |pod: &Pod, gone: bool| self.pod_changed(pod, gone, &jobs, &queue, &orphans, &seen);
            tokio::join!(
                drive("jobs", reflector::reflector(jobs_w, watcher(Api::<Job>::all(informer_client.clone()), watcher::Config::default())), on_job),
                drive("pods", reflector::reflector(pods_w, watcher(Api::<Pod>::all(informer_client.clone()), watcher::Config::default())), on_pod),
            );
        };
        let work = async {
            if jobs.wait_until_ready().await.is_err() || pods.wait_until_ready().await.is_err() {
                return;
            }
            tracing::info!(target: TARGET, workers = CONCURRENT_JOB_SYNCS, "caches synced; syncing Jobs");
            let worker = || async {
                while let Some(k) = queue.get().await {
                    match self.sync_job(&jobs, &pods, &k, &queue).await {
                        Ok(()) => queue.forget(&k),
                        Err(e) => {
                            tracing::warn!(target: TARGET, job = %k, error = %e, "sync failed; will retry");
                            queue.add_rate_limited(k.clone());
                        }
                    }
                    queue.done(&k);
                }
            };
            let orphan_worker = async {
                while let Some(k) = orphans.get().await {
                    match self.sync_orphan_pod(&jobs, &pods, &k).await {
                        Ok(()) => orphans.forget(&k),
                        Err(e) => {
                            tracing::warn!(target: TARGET, pod = %k, error = %e, "orphan pod cleanup failed; will retry");
                            orphans.add_rate_limited(k.clone());
                        }
                    }
                    orphans.done(&k);
                }
            };
            tokio::join!(futures::future::join_all((0..CONCURRENT_JOB_SYNCS).map(|_| worker())), orphan_worker);
        };
        tokio::select! {
            () = informers => {}
            () = work => {}
        }
        Ok(())
    }

    /// The pod event handlers (addPod, updatePod, deletePod).
    fn pod_changed(&self, pod: &Pod, gone: bool, jobs: &Store<Job>, queue: &WorkQueue<String>, orphans: &WorkQueue<String>, seen: &Mutex<HashMap<String, Option<(String, String)>>>) {
        let ns = pod.metadata.namespace.clone().unwrap_or_default();
        let name = pod.metadata.name.clone().unwrap_or_default();
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let controller = controller_of(&pod.metadata).filter(|r| r.kind == "Job" && r.api_version == "batch/v1").map(|r| (r.name.clone(), r.uid.clone()));
        let going = gone || pod.metadata.deletion_timestamp.is_some();
        let before = {
            let mut seen = seen.lock().unwrap_or_else(|e| e.into_inner());
            if gone { seen.remove(&uid) } else { seen.insert(uid.clone(), controller.clone()) }
        };
        // resolveControllerRef: the Job named, if it is that one (same uid).
        let resolve = |(job_name, job_uid): &(String, String)| jobs.get(&ObjectRef::new(job_name).within(&ns)).filter(|j| j.metadata.uid.as_deref() == Some(job_uid.as_str()));
        if let Some(Some(old)) = &before
            && before.as_ref() != Some(&controller)
            && let Some(old) = resolve(old)
        {
            queue.add(key_of(old.as_ref()));
        }
        match controller.as_ref().and_then(resolve) {
            Some(job) => {
                let k = key_of(job.as_ref());
                if before.is_none() && !going {
                    self.expectations.creation_observed(&k);
                }
                if going {
                    self.expectations.deletion_observed(&k, &name);
                }
                if gone || !has_tracking_finalizer(pod) {
                    self.finalizer_expectations.removal_observed(&k, &uid);
                }
                if !gone && has_tracking_finalizer(pod) && is_job_finished(&job) {
                    orphans.add(key(&ns, &name));
                }
                queue.add(k);
            }
            None => {
                if !gone && has_tracking_finalizer(pod) {
                    orphans.add(key(&ns, &name));
                }
                if controller_of(&pod.metadata).is_none() && !going {
                    // An orphan: every Job that might adopt it.
                    let labels: BTreeMap<String, String> = pod.metadata.labels.clone().unwrap_or_default();
                    for job in jobs.state() {
                        if job.metadata.namespace.as_deref() == Some(ns.as_str()) && selector_of(&job).is_some_and(|s| !s.is_empty() && s.matches(&labels)) {
                            queue.add(key_of(job.as_ref()));
                        }
                    }
                }
            }
        }
    }

    /// syncOrphanPod: the finalizer comes off a pod whose Job is gone or finished (or that has
    /// no controller at all); a pod of a running Job, or of another kind's, keeps it.
    async fn sync_orphan_pod(&self, jobs: &Store<Job>, pods: &Store<Pod>, k: &str) -> Result<()> {
        let (ns, name) = k.split_once('/').unwrap_or(("", k));
        let Some(pod) = pods.get(&ObjectRef::new(name).within(ns)) else { return Ok(()) };
        if let Some(r) = controller_of(&pod.metadata) {
            if r.kind != "Job" || r.api_version != "batch/v1" {
                return Ok(());
            }
            let job = jobs.get(&ObjectRef::new(&r.name).within(ns)).filter(|j| j.metadata.uid.as_deref() == Some(r.uid.as_str()));
            if job.is_some_and(|j| !is_job_finished(&j)) {
                return Ok(());
            }
        }
        remove_tracking_finalizer(&Api::namespaced(self.client.clone(), ns), &pod).await
    }

    /// Steps 1–6 for one Job.
    async fn sync_job(&self, jobs: &Store<Job>, pods: &Store<Pod>, k: &str, queue: &WorkQueue<String>) -> Result<()> {
        // Step 1.
        let (ns, name) = k.split_once('/').unwrap_or(("", k));
        let Some(shared) = jobs.get(&ObjectRef::new(name).within(ns)) else {
            self.expectations.delete(k);
            self.finalizer_expectations.delete(k);
            self.backoff.remove(k);
            return Ok(());
        };
        if is_job_finished(&shared) {
            self.backoff.remove(k);
            return Ok(());
        }
        let mode = shared.spec.as_ref().and_then(|s| s.completion_mode.clone());
        if mode.as_deref().is_some_and(|m| m != "NonIndexed" && m != "Indexed") {
            self.recorder.event(reference(&shared), client::record::WARNING, "UnknownCompletionMode", "Skipped Job sync because completion mode is unknown");
            return Ok(());
        }
        let mut job = (*shared).clone();
        let status = job.status.get_or_insert_with(JobStatus::default);
        status.uncounted_terminated_pods.get_or_insert_with(UncountedTerminatedPods::default);
        let before = status.clone();
        // Step 2 (the expectations first: a pod arriving after the listing defers the sync).
        let satisfied = self.expectations.satisfied(k);
        let claimed = self.get_pods_for_job(&job, pods).await?;
        // Step 3.
        let now = Timestamp::now();
        let active: Vec<Arc<Pod>> = claimed.iter().filter(|p| is_pod_active(p)).cloned().collect();
        let expected_removals = self.finalizer_expectations.expected_uids(k);
        let uncounted = Uncounted::of(&before);
        let countable = |p: &&Arc<Pod>| {
            let uid = p.metadata.uid.clone().unwrap_or_default();
            has_tracking_finalizer(p) && !uncounted.succeeded.contains(&uid) && !uncounted.failed.contains(&uid) && !expected_removals.contains(&uid) && (!is_indexed(&job) || completion_index(p).is_some_and(|ix| ix < completions_of(&job) as usize))
        };
        let new_succeeded: Vec<&Pod> = claimed.iter().filter(countable).filter(|p| phase(p) == "Succeeded").map(|p| p.as_ref()).collect();
        let new_failed: Vec<&Pod> = claimed.iter().filter(countable).filter(|p| is_pod_failed(p)).map(|p| p.as_ref()).collect();
        let mut ctx = SyncCtx {
            ready: active.iter().filter(|p| api::pod::is_pod_ready(p)).count() as i32,
            terminating: claimed.iter().filter(|p| is_terminating(p)).count() as i32,
            succeeded: before.succeeded.unwrap_or(0) + (new_succeeded.len() + uncounted.succeeded.len()) as i32,
            new_backoff: self.backoff.new_record(k, &new_succeeded, &new_failed, now),
            finished: None,
            prev_succeeded_indexes: OrderedIntervals::default(),
            succeeded_indexes: OrderedIntervals::default(),
            expected_removals: expected_removals.clone(),
            active,
            pods: Vec::new(),
            job: Job::default(),
        };
        let failed = before.failed.unwrap_or(0) + (new_failed.len() + uncounted.failed.len()) as i32;
        if before.start_time.is_none() && !is_suspended(&job) {
            job.status.get_or_insert_with(JobStatus::default).start_time = Some(Time(now));
        }
        // Step 4.
        let conditions = before.conditions.clone().unwrap_or_default();
        ctx.finished = find_condition(&conditions, SUCCESS_CRITERIA_MET).filter(|c| c.status == "True").cloned();
        if ctx.finished.is_none()
            && let Some(target) = find_condition(&conditions, FAILURE_TARGET).filter(|c| c.status == "True")
        {
            ctx.finished = Some(new_condition(FAILED, "True", target.reason.as_deref().unwrap_or(""), target.message.as_deref().unwrap_or(""), now));
        }
        if ctx.finished.is_none() {
            let on_failure = job.spec.as_ref().and_then(|s| s.template.spec.as_ref()).and_then(|s| s.restart_policy.as_deref()) == Some("OnFailure");
            match failure_decision(&job, failed, on_failure.then(|| restarts_of(&claimed)), now) {
                FailureDecision::Fail(reason, message) => ctx.finished = Some(new_condition(FAILURE_TARGET, "True", reason, message, now)),
                FailureDecision::RequeueAfter(after) => {
                    tracing::debug!(target: TARGET, job = %k, next_sync_in = ?after, "job has activeDeadlineSeconds; will sync again");
                    queue.add_after(k.to_string(), after);
                }
                FailureDecision::None => {}
            }
        }
        if is_indexed(&job) {
            let completions = completions_of(&job) as usize;
            let (prev, all) = succeeded_indexes(before.completed_indexes.as_deref().unwrap_or(""), completions, &claimed, has_tracking_finalizer);
            ctx.succeeded = all.total() as i32;
            (ctx.prev_succeeded_indexes, ctx.succeeded_indexes) = (prev, all);
        }
        ctx.pods = claimed;
        ctx.job = job;
        // Step 5.
        let mut active = ctx.active.len() as i32;
        let mut suspend_changed = false;
        let mut manage_err = None;
        if ctx.finished.is_some() {
            let (deleted_ready, deleted, err) = self.delete_active_pods(&ctx.job, &ctx.active).await;
            if deleted != active || !satisfied {
                // Not finished yet: pods may remain, or be missing from the cache.
                ctx.finished = None;
            }
            active -= deleted;
            ctx.terminating += deleted;
            ctx.ready -= deleted_ready;
            manage_err = err;
        } else {
            let mut managed = false;
            if satisfied && ctx.job.metadata.deletion_timestamp.is_none() {
                let (now_active, err) = self.manage_job(&mut ctx, k, queue, now).await;
                active = now_active;
                manage_err = err;
                managed = true;
            }
            let completions = ctx.job.spec.as_ref().and_then(|s| s.completions);
            if is_complete(completions, ctx.succeeded, active) {
                ctx.finished = Some(new_condition(SUCCESS_CRITERIA_MET, "True", REASON_COMPLETIONS_REACHED, "Reached expected number of succeeded pods", now));
            } else if managed {
                let (suspended, job_ref) = (is_suspended(&ctx.job), reference(&ctx.job));
                let status = ctx.job.status.get_or_insert_with(JobStatus::default);
                let conditions = status.conditions.get_or_insert_with(Vec::new);
                if suspended {
                    if ensure_condition(conditions, SUSPENDED, "True", "JobSuspended", "Job suspended", now) {
                        suspend_changed = true;
                        self.recorder.event(job_ref, client::record::NORMAL, "Suspended", "Job suspended");
                    }
                } else if ensure_condition(conditions, SUSPENDED, "False", "JobResumed", "Job resumed", now) {
                    suspend_changed = true;
                    self.recorder.event(job_ref, client::record::NORMAL, "Resumed", "Job resumed");
                    // The deadline counts from the resumption.
                    status.start_time = Some(Time(now));
                }
            }
        }
        // Step 6.
        let status = ctx.job.status.get_or_insert_with(JobStatus::default);
        let needs_update = suspend_changed
            || status.active.unwrap_or(0) != active
            || status.ready != Some(ctx.ready)
            || status.terminating != Some(ctx.terminating)
            || status.start_time != before.start_time;
        status.active = Some(active);
        status.ready = Some(ctx.ready);
        status.terminating = Some(ctx.terminating);
        self.track_job_status_and_remove_finalizers(&mut ctx, k, needs_update, now).await?;
        match manage_err {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// getPodsForJob: every pod of the namespace the Job owns after adoption and release; an
    /// adopted pod gets the tracking finalizer.
    async fn get_pods_for_job(&self, job: &Job, pods: &Store<Pod>) -> Result<Vec<Arc<Pod>>> {
        let ns = job.metadata.namespace.clone().unwrap_or_default();
        let name = job.metadata.name.clone().unwrap_or_default();
        let Some(selector) = selector_of(job) else {
            tracing::warn!(target: TARGET, job = %key(&ns, &name), "selector does not parse; nothing to do");
            return Ok(Vec::new());
        };
        let uid = job.metadata.uid.clone();
        let candidates: Vec<Arc<Pod>> = pods.state().into_iter().filter(|p| p.metadata.namespace.as_deref() == Some(ns.as_str())).collect();
        let ours_before: HashSet<String> = candidates.iter().filter(|p| controller_of(&p.metadata).is_some_and(|r| Some(&r.uid) == uid.as_ref())).filter_map(|p| p.metadata.uid.clone()).collect();
        let pods_api: Api<Pod> = Api::namespaced(self.client.clone(), &ns);
        let manager = ControllerRefManager {
            api: pods_api.clone(),
            owner: controller_ref("batch/v1", "Job", &job.metadata),
            owner_deleting: job.metadata.deletion_timestamp.is_some(),
            selector: &selector,
        };
        let jobs_api: Api<Job> = Api::namespaced(self.client.clone(), &ns);
        let can_adopt = || async move {
            // RecheckDeletionTimestamp: a fresh read, not the cache.
            match jobs_api.get_opt(&name).await.map_err(Error::Kube)? {
                Some(fresh) => Ok(fresh.metadata.uid == uid && fresh.metadata.deletion_timestamp.is_none()),
                None => Ok(false),
            }
        };
        let mut claimed = manager.claim(candidates, can_adopt).await?;
        for p in claimed.iter_mut() {
            let adopted = !p.metadata.uid.as_ref().is_some_and(|u| ours_before.contains(u));
            if adopted && !has_tracking_finalizer(p) {
                *p = Arc::new(add_tracking_finalizer(&pods_api, p).await?);
            }
        }
        Ok(claimed)
    }

    /// manageJob: the active pods after deleting (all, when suspended; the surplus) or creating
    /// (once the failure backoff has passed) — one of the two per sync, deletion first — and
    /// the first error.
    async fn manage_job(&self, ctx: &mut SyncCtx, k: &str, queue: &WorkQueue<String>, now: Timestamp) -> (i32, Option<Error>) {
        let job = ctx.job.clone();
        let spec = job.spec.clone().unwrap_or_default();
        let active = ctx.active.len() as i32;
        if is_suspended(&job) {
            tracing::info!(target: TARGET, job = %k, active, "deleting all active pods of a suspended job");
            let doomed = active_pods_for_removal(&job, &ctx.active, ctx.active.len());
            let (ready, removed, err) = self.delete_job_pods(&job, k, &doomed).await;
            ctx.terminating += removed;
            ctx.ready -= ready;
            return (active - removed, err);
        }
        let want = want_active(spec.completions, spec.parallelism.unwrap_or(1), ctx.succeeded, active);
        let rm_at_least = (active - want).max(0) as usize;
        let mut doomed = active_pods_for_removal(&job, &ctx.active, rm_at_least);
        doomed.truncate(MAX_POD_CREATE_DELETE_PER_SYNC);
        if !doomed.is_empty() {
            tracing::info!(target: TARGET, job = %k, deleting = doomed.len(), target_active = want, "too many pods running");
            let (ready, removed, err) = self.delete_job_pods(&job, k, &doomed).await;
            ctx.terminating += removed;
            ctx.ready -= ready;
            return (active - removed, err);
        }
        let diff = want - active;
        if diff <= 0 {
            return (active, None);
        }
        let remaining = ctx.new_backoff.remaining_time(now, DEFAULT_JOB_POD_FAILURE_BACKOFF, MAX_JOB_POD_FAILURE_BACKOFF);
        if !remaining.is_zero() {
            tracing::info!(target: TARGET, job = %k, delay = ?remaining, failures = ctx.new_backoff.failures_after_last_success, "failed pods are replaced after a backoff");
            queue.add_after(k.to_string(), remaining);
            return (active, None);
        }
        let mut n = (diff as usize).min(MAX_POD_CREATE_DELETE_PER_SYNC);
        let name = job.metadata.name.clone().unwrap_or_default();
        let indexes: Vec<Option<usize>> = if is_indexed(&job) {
            first_pending_indexes(&ctx.succeeded_indexes, &ctx.active, n, completions_of(&job) as usize).into_iter().map(Some).collect()
        } else {
            vec![None; n]
        };
        n = indexes.len();
        if n == 0 {
            return (active, None);
        }
        self.expectations.expect_creations(k, n);
        tracing::info!(target: TARGET, job = %k, need = want, creating = n, "too few pods running");
        let mut template: PodTemplateSpec = spec.template.clone();
        let finalizers = template.metadata.get_or_insert_with(Default::default).finalizers.get_or_insert_with(Vec::new);
        if !finalizers.iter().any(|f| f == JOB_TRACKING_FINALIZER) {
            finalizers.push(JOB_TRACKING_FINALIZER.into());
        }
        let ns = job.metadata.namespace.clone().unwrap_or_default();
        let pods_api: Api<Pod> = Api::namespaced(self.client.clone(), &ns);
        let owner = controller_ref("batch/v1", "Job", &job.metadata);
        let next = AtomicUsize::new(0);
        let job_ref = reference(&job);
        let (created, err) = slow_start_batch(n, SLOW_START_INITIAL_BATCH_SIZE, || {
            let ix = indexes.get(next.fetch_add(1, AtomicOrdering::SeqCst)).copied().flatten();
            let pod = match ix {
                Some(ix) => pod_from_template(&template_for_index(&template, &name, ix), &ns, &format!("{name}-{ix}"), owner.clone()),
                None => pod_from_template(&template, &ns, &name, owner.clone()),
            };
            let (api, recorder, job_ref) = (pods_api.clone(), &self.recorder, job_ref.clone());
            async move {
                match api.create(&PostParams::default(), &pod).await {
                    Ok(p) => {
                        recorder.event(job_ref, client::record::NORMAL, "SuccessfulCreate", format!("Created pod: {}", p.metadata.name.unwrap_or_default()));
                        Ok(())
                    }
                    Err(e) => {
                        recorder.event(job_ref, client::record::WARNING, "FailedCreate", format!("Error creating: {}", api_message(&e)));
                        Err(Error::Kube(e))
                    }
                }
            }
        })
        .await;
        // The creations never made will never be observed.
        for _ in created..n {
            self.expectations.creation_observed(k);
        }
        (active + created as i32, err)
    }

    /// deleteJobPods (suspension, surplus): the finalizer first — a pod the controller removes
    /// on purpose is not a failure — then the delete. (ready deleted, deleted, first error).
    async fn delete_job_pods(&self, job: &Job, k: &str, doomed: &[Arc<Pod>]) -> (i32, i32, Option<Error>) {
        let ns = job.metadata.namespace.clone().unwrap_or_default();
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &ns);
        self.expectations.expect_deletions(k, doomed.iter().filter_map(|p| p.metadata.name.clone()));
        let job_ref = reference(job);
        let results = futures::future::join_all(doomed.iter().map(|p| {
            let (api, job_ref) = (api.clone(), job_ref.clone());
            async move {
                let pod_name = p.metadata.name.clone().unwrap_or_default();
                let result = match remove_tracking_finalizer(&api, p).await {
                    Ok(()) => self.delete_pod(&api, p, job_ref).await,
                    Err(e) => Err(e),
                };
                match result {
                    Ok(()) => Ok(api::pod::is_pod_ready(p)),
                    Err(e) => {
                        // No deletion will be observed.
                        self.expectations.deletion_observed(k, &pod_name);
                        Err(e)
                    }
                }
            }
        }))
        .await;
        tally(results)
    }

    /// deleteActivePods (the Job is failing): deletes, finalizers kept, so the pods are
    /// counted as failed before they go.
    async fn delete_active_pods(&self, job: &Job, active: &[Arc<Pod>]) -> (i32, i32, Option<Error>) {
        let ns = job.metadata.namespace.clone().unwrap_or_default();
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &ns);
        let job_ref = reference(job);
        let results = futures::future::join_all(active.iter().map(|p| {
            let (api, job_ref) = (api.clone(), job_ref.clone());
            async move { self.delete_pod(&api, p, job_ref).await.map(|()| api::pod::is_pod_ready(p)) }
        }))
        .await;
        tally(results)
    }

    /// One pod deleted (already gone counts as deleted), with its event.
    async fn delete_pod(&self, api: &Api<Pod>, pod: &Pod, job_ref: ObjectReference) -> Result<()> {
        let name = pod.metadata.name.clone().unwrap_or_default();
        let params = DeleteParams { preconditions: pod.metadata.uid.clone().map(|uid| kube::api::Preconditions { uid: Some(uid), resource_version: None }), ..DeleteParams::default() };
        match api.delete(&name, &params).await {
            Ok(_) => {
                self.recorder.event(job_ref, client::record::NORMAL, "SuccessfulDelete", format!("Deleted pod: {name}"));
                Ok(())
            }
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            Err(e) => {
                self.recorder.event(job_ref, client::record::WARNING, "FailedDelete", format!("Error deleting: {}", api_message(&e)));
                Err(Error::Kube(e))
            }
        }
    }

    /// trackJobStatusAndRemoveFinalizers (step 6): record the newly finished pods, take their
    /// finalizers off, count them, then — nothing left uncounted or terminating — the terminal
    /// condition and its event.
    async fn track_job_status_and_remove_finalizers(&self, ctx: &mut SyncCtx, k: &str, mut needs_flush: bool, now: Timestamp) -> Result<()> {
        let with_finalizer: HashSet<String> = ctx.pods.iter().filter(|p| has_tracking_finalizer(p)).filter_map(|p| p.metadata.uid.clone()).filter(|u| !ctx.expected_removals.contains(u)).collect();
        let status = ctx.job.status.get_or_insert_with(JobStatus::default);
        needs_flush |= clean_uncounted(status, &with_finalizer);
        let uncounted = Uncounted::of(status);
        let indexed = is_indexed(&ctx.job).then(|| (completions_of(&ctx.job) as usize, &ctx.prev_succeeded_indexes));
        let finishing = ctx.finished.as_ref().map(|c| c.type_.clone());
        let input = TrackingInput {
            uncounted: &uncounted,
            expected_removals: &ctx.expected_removals,
            job_deleting: ctx.job.metadata.deletion_timestamp.is_some(),
            finishing: finishing.as_deref(),
            indexed,
        };
        let plan = plan_tracking(&ctx.pods, &input);
        let status = ctx.job.status.get_or_insert_with(JobStatus::default);
        let lists = status.uncounted_terminated_pods.get_or_insert_with(UncountedTerminatedPods::default);
        if !plan.uncounted_succeeded.is_empty() || !plan.uncounted_failed.is_empty() {
            needs_flush = true;
            lists.succeeded.get_or_insert_with(Vec::new).extend(plan.uncounted_succeeded.iter().cloned());
            lists.failed.get_or_insert_with(Vec::new).extend(plan.uncounted_failed.iter().cloned());
        }
        if indexed.is_some() {
            let all = ctx.succeeded_indexes.with_indexes(plan.new_succeeded_indexes.iter().copied());
            let text = all.to_string();
            if status.completed_indexes.as_deref().unwrap_or("") != text {
                needs_flush = true;
            }
            status.succeeded = Some(all.total() as i32);
            status.completed_indexes = Some(text);
        }
        // The interim condition goes in with the uncounted UIDs; the final one is prepared.
        if let Some(cond) = ctx.finished.clone() {
            let conditions = status.conditions.get_or_insert_with(Vec::new);
            if cond.type_ == FAILURE_TARGET {
                conditions.push(cond.clone());
                needs_flush = true;
                ctx.finished = Some(new_condition(FAILED, "True", cond.reason.as_deref().unwrap_or(""), cond.message.as_deref().unwrap_or(""), now));
            } else if cond.type_ == SUCCESS_CRITERIA_MET {
                if find_condition(conditions, SUCCESS_CRITERIA_MET).is_none() {
                    conditions.push(cond.clone());
                    needs_flush = true;
                }
                ctx.finished = Some(new_condition(COMPLETE, "True", cond.reason.as_deref().unwrap_or(""), cond.message.as_deref().unwrap_or(""), now));
            }
        }
        // flushUncountedAndRemoveFinalizers, step 1: the status with the uncounted UIDs.
        if needs_flush {
            self.update_status(ctx).await?;
            self.backoff.update(ctx.new_backoff.clone());
            needs_flush = false;
        }
        // Step 2: the finalizers.
        let doomed: Vec<Arc<Pod>> = plan.remove_finalizer.iter().map(|i| ctx.pods[*i].clone()).collect();
        let mut with_finalizer = with_finalizer;
        let mut rm_err = None;
        if !doomed.is_empty() {
            self.finalizer_expectations.expect_removed(k, doomed.iter().filter_map(|p| p.metadata.uid.clone()));
            let ns = ctx.job.metadata.namespace.clone().unwrap_or_default();
            let api: Api<Pod> = Api::namespaced(self.client.clone(), &ns);
            let results = futures::future::join_all(doomed.iter().map(|p| remove_tracking_finalizer(&api, p))).await;
            for (p, r) in doomed.iter().zip(results) {
                let uid = p.metadata.uid.clone().unwrap_or_default();
                match r {
                    Ok(()) => {
                        with_finalizer.remove(&uid);
                    }
                    Err(e) => {
                        self.finalizer_expectations.removal_observed(k, &uid);
                        rm_err.get_or_insert(e);
                    }
                }
            }
        }
        // Step 3: the counters.
        let status = ctx.job.status.get_or_insert_with(JobStatus::default);
        needs_flush |= clean_uncounted(status, &with_finalizer);
        if rm_err.is_some() && needs_flush {
            self.update_status(ctx).await?;
        }
        if let Some(e) = rm_err {
            return Err(e);
        }
        // enactJobFinished.
        let finished = !plan.reached_max && self.enact_job_finished(ctx, now);
        if finished || needs_flush {
            self.update_status(ctx).await?;
            if finished && let Some(cond) = &ctx.finished {
                self.record_job_finished(&ctx.job, cond);
            }
        }
        Ok(())
    }

    /// enactJobFinished: the terminal condition (and, for Complete, the completion time), once
    /// no pod is uncounted or terminating.
    fn enact_job_finished(&self, ctx: &mut SyncCtx, now: Timestamp) -> bool {
        let Some(cond) = ctx.finished.clone() else { return false };
        let status = ctx.job.status.get_or_insert_with(JobStatus::default);
        let uncounted = Uncounted::of(status);
        if !uncounted.succeeded.is_empty() || !uncounted.failed.is_empty() || ctx.terminating > 0 {
            return false;
        }
        let conditions = status.conditions.get_or_insert_with(Vec::new);
        ensure_condition(conditions, &cond.type_, "True", cond.reason.as_deref().unwrap_or(""), cond.message.as_deref().unwrap_or(""), now);
        if cond.type_ == COMPLETE {
            status.completion_time = find_condition(conditions, COMPLETE).and_then(|c| c.last_transition_time.clone());
        }
        true
    }

    /// recordJobFinished: Completed (and TooManySucceededPods), or the failure's reason.
    fn record_job_finished(&self, job: &Job, cond: &JobCondition) {
        let k = key_of(job);
        if cond.type_ == COMPLETE {
            let succeeded = job.status.as_ref().and_then(|s| s.succeeded).unwrap_or(0);
            if job.spec.as_ref().and_then(|s| s.completions).is_some_and(|c| succeeded > c) {
                self.recorder.event(reference(job), client::record::WARNING, "TooManySucceededPods", "Too many succeeded pods running after completion count reached");
            }
            tracing::info!(target: TARGET, job = %k, succeeded, "job completed");
            self.recorder.event(reference(job), client::record::NORMAL, "Completed", "Job completed");
        } else {
            let reason = cond.reason.clone().unwrap_or_default();
            tracing::info!(target: TARGET, job = %k, reason = %reason, "job failed");
            self.recorder.event(reference(job), client::record::WARNING, &reason, cond.message.clone().unwrap_or_default());
        }
    }

    /// updateJobStatus: the status written over the version read (a conflict is an error:
    /// the sync is retried from a fresh cache).
    async fn update_status(&self, ctx: &mut SyncCtx) -> Result<()> {
        let ns = ctx.job.metadata.namespace.clone().unwrap_or_default();
        let name = ctx.job.metadata.name.clone().unwrap_or_default();
        let api: Api<Job> = Api::namespaced(self.client.clone(), &ns);
        let written = api.replace_status(&name, &PostParams::default(), &ctx.job).await.map_err(Error::Kube)?;
        ctx.job = written;
        Ok(())
    }
}

/// activePodsForRemoval: `at_least` pods to delete — Indexed: first those with a missing,
/// out-of-range or repeated index — the earliest in their life first (ActivePods' order).
fn active_pods_for_removal(job: &Job, active: &[Arc<Pod>], at_least: usize) -> Vec<Arc<Pod>> {
    let (mut rm, mut left) = if is_indexed(job) {
        // Of two pods holding one index, the one further along stays.
        duplicated_index_pods(active, completions_of(job) as usize, |a, b| deletion_order(b, a))
    } else {
        (Vec::new(), active.to_vec())
    };
    if rm.len() < at_least {
        left.sort_by(|a, b| deletion_order(a, b));
        rm.extend(left.into_iter().take(at_least - rm.len()));
    }
    rm
}

fn completions_of(job: &Job) -> i32 {
    job.spec.as_ref().and_then(|s| s.completions).unwrap_or(0)
}

/// (ready among the deleted, deleted, first error) of a batch of deletions.
fn tally(results: Vec<Result<bool>>) -> (i32, i32, Option<Error>) {
    let (mut ready, mut deleted, mut err) = (0, 0, None);
    for r in results {
        match r {
            Ok(was_ready) => {
                deleted += 1;
                ready += i32::from(was_ready);
            }
            Err(e) => {
                err.get_or_insert(e);
            }
        }
    }
    (ready, deleted, err)
}

fn api_message(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => s.message.clone(),
        other => other.to_string(),
    }
}

fn reference(job: &Job) -> ObjectReference {
    client::record::object_reference("batch/v1", "Job", &job.metadata)
}

/// removeTrackingFinalizerPatch: a JSON patch that tests the finalizer is where the cache saw
/// it and removes it. A pod already gone is fine.
async fn remove_tracking_finalizer(api: &Api<Pod>, pod: &Pod) -> Result<()> {
    let Some(i) = pod.metadata.finalizers.iter().flatten().position(|f| f == JOB_TRACKING_FINALIZER) else { return Ok(()) };
    let ops = json!([
        {"op": "test", "path": format!("/metadata/finalizers/{i}"), "value": JOB_TRACKING_FINALIZER},
        {"op": "remove", "path": format!("/metadata/finalizers/{i}")},
    ]);
    let patch: json_patch::Patch = serde_json::from_value(ops).map_err(|e| Error::Kube(kube::Error::SerdeError(e)))?;
    let name = pod.metadata.name.clone().unwrap_or_default();
    match api.patch(&name, &PatchParams::default(), &Patch::<()>::Json(patch)).await {
        Ok(_) => {
            tracing::debug!(target: TARGET, pod = %name, uid = pod.metadata.uid.as_deref().unwrap_or_default(), "removed the tracking finalizer");
            Ok(())
        }
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(Error::Kube(e)),
    }
}

/// The finalizer added to an adopted pod (if it has not changed since it was read).
async fn add_tracking_finalizer(api: &Api<Pod>, pod: &Pod) -> Result<Pod> {
    let mut ops = vec![json!({"op": "test", "path": "/metadata/resourceVersion", "value": pod.metadata.resource_version.clone().unwrap_or_default()})];
    if pod.metadata.finalizers.is_some() {
        ops.push(json!({"op": "add", "path": "/metadata/finalizers/-", "value": JOB_TRACKING_FINALIZER}));
    } else {
        ops.push(json!({"op": "add", "path": "/metadata/finalizers", "value": [JOB_TRACKING_FINALIZER]}));
    }
    let patch: json_patch::Patch = serde_json::from_value(json!(ops)).map_err(|e| Error::Kube(kube::Error::SerdeError(e)))?;
    api.patch(pod.metadata.name.as_deref().unwrap_or_default(), &PatchParams::default(), &Patch::<()>::Json(patch)).await.map_err(Error::Kube)
}

/// Runs one informer's stream into `on_change(object, gone)`; the watcher retries by itself
/// (with backoff), errors are logged.
async fn drive<K>(what: &'static str, stream: impl Stream<Item = watcher::Result<watcher::Event<K>>>, on_change: impl Fn(&K, bool)) {
    let mut stream = std::pin::pin!(stream.default_backoff());
    while let Some(ev) = stream.next().await {
        match ev {
            Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) => on_change(&o, false),
            Ok(watcher::Event::Delete(o)) => on_change(&o, true),
            Ok(_) => {}
            Err(e) => tracing::warn!(target: TARGET, resource = what, error = %e, "watch failed; retrying"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(spec: Value, status: Value) -> Job {
        serde_json::from_value(json!({"metadata": {"name": "j", "namespace": "default"}, "spec": spec, "status": status})).expect("job")
    }

    fn pod(uid: &str, phase: &str, finalizer: bool, deleting: bool, index: Option<usize>) -> Arc<Pod> {
        let mut v = json!({"metadata": {"name": uid, "uid": uid}, "status": {"phase": phase}});
        if finalizer {
            v["metadata"]["finalizers"] = json!([JOB_TRACKING_FINALIZER]);
        }
        if deleting {
            v["metadata"]["deletionTimestamp"] = json!("2027-01-15T08:00:00Z");
        }
        if let Some(ix) = index {
            v["metadata"]["annotations"] = json!({super::super::indexed_job_utils::JOB_COMPLETION_INDEX: ix.to_string()});
        }
        Arc::new(serde_json::from_value(v).expect("pod"))
    }

    #[test]
    fn how_many_pods_should_run() {
        // (completions, parallelism, succeeded, active) -> want
        let cases = [
            (Some(5), 2, 0, 0, 2),
            (Some(5), 2, 4, 1, 1),
            (Some(5), 2, 5, 1, 0),
            (Some(5), 2, 7, 0, 0),
            (Some(1), 3, 0, 0, 1),
            (Some(3), 0, 0, 2, 0),
            (None, 3, 0, 1, 3),
            (None, 3, 1, 2, 2), // after a success, what runs keeps running, nothing new
        ];
        for (completions, parallelism, succeeded, active, want) in cases {
            assert_eq!(want_active(completions, parallelism, succeeded, active), want, "{completions:?} {parallelism} {succeeded} {active}");
        }
    }

    #[test]
    fn when_a_job_is_complete() {
        // (completions, succeeded, active) -> complete
        let cases = [(Some(3), 3, 0, true), (Some(3), 3, 1, false), (Some(3), 2, 0, false), (Some(3), 4, 0, true), (None, 1, 0, true), (None, 1, 1, false), (None, 0, 0, false)];
        for (completions, succeeded, active, want) in cases {
            assert_eq!(is_complete(completions, succeeded, active), want, "{completions:?} {succeeded} {active}");
        }
    }

    #[test]
    fn when_a_job_fails() {
        let now = Timestamp::from_second(1_800_000_100).expect("t");
        let started = Timestamp::from_second(1_800_000_000).expect("t").to_string();
        let backoff = FailureDecision::Fail(REASON_BACKOFF_LIMIT_EXCEEDED, "Job has reached the specified backoff limit");
        let deadline = FailureDecision::Fail(REASON_DEADLINE_EXCEEDED, "Job was active longer than specified deadline");
        // (spec, status, failed, restarts (OnFailure)) -> decision
        let cases = [
            (json!({"backoffLimit": 2}), json!({}), 2, None, FailureDecision::None),
            (json!({"backoffLimit": 2}), json!({}), 3, None, backoff),
            (json!({"backoffLimit": 0}), json!({}), 1, None, FailureDecision::Fail(REASON_BACKOFF_LIMIT_EXCEEDED, "Job has reached the specified backoff limit")),
            (json!({}), json!({}), 6, None, FailureDecision::None), // the default limit is 6
            (json!({"backoffLimit": 2}), json!({}), 0, Some(2), FailureDecision::Fail(REASON_BACKOFF_LIMIT_EXCEEDED, "Job has reached the specified backoff limit")),
            (json!({"backoffLimit": 0}), json!({}), 0, Some(1), FailureDecision::Fail(REASON_BACKOFF_LIMIT_EXCEEDED, "Job has reached the specified backoff limit")),
            (json!({"backoffLimit": 2}), json!({}), 0, Some(1), FailureDecision::None),
            (json!({"activeDeadlineSeconds": 100}), json!({"startTime": started}), 0, None, deadline),
            (json!({"activeDeadlineSeconds": 130}), json!({"startTime": started}), 0, None, FailureDecision::RequeueAfter(Duration::from_secs(30))),
            (json!({"activeDeadlineSeconds": 10, "suspend": true}), json!({"startTime": started}), 0, None, FailureDecision::None),
            (json!({"activeDeadlineSeconds": 10}), json!({}), 0, None, FailureDecision::None),
        ];
        for (spec, status, failed, restarts, want) in cases {
            assert_eq!(failure_decision(&job(spec.clone(), status.clone()), failed, restarts, now), want, "{spec} {status} {failed} {restarts:?}");
        }
    }

    #[test]
    fn finished_pods_are_recorded_once_then_released() {
        let none = HashSet::new();
        let uncounted = Uncounted { succeeded: ["s-old".to_string()].into(), failed: ["f-old".to_string()].into() };
        let pods = [
            pod("running", "Running", true, false, None),
            pod("s-new", "Succeeded", true, false, None),
            pod("f-new", "Failed", true, false, None),
            pod("s-old", "Succeeded", true, false, None),   // recorded already: released again, not re-recorded
            pod("f-old", "Failed", true, false, None),
            pod("deleted", "Running", true, true, None),    // deleted before finishing: a failure
            pod("counted", "Succeeded", false, false, None), // no finalizer: counted long ago
        ];
        let input = TrackingInput { uncounted: &uncounted, expected_removals: &none, job_deleting: false, finishing: None, indexed: None };
        let plan = plan_tracking(&pods, &input);
        assert_eq!(plan.remove_finalizer, [1, 2, 3, 4, 5]);
        assert_eq!((plan.uncounted_succeeded.as_slice(), plan.uncounted_failed.as_slice()), (&["s-new".to_string()][..], &["f-new".to_string(), "deleted".to_string()][..]));
        // A removal already asked for is left alone.
        let asked: HashSet<String> = ["s-new".to_string()].into();
        let plan = plan_tracking(&pods, &TrackingInput { expected_removals: &asked, ..input });
        assert_eq!(plan.uncounted_succeeded, Vec::<String>::new());
        // Failing: the running pod is released and counted as failed too.
        let empty = Uncounted::default();
        let plan = plan_tracking(&pods[..1], &TrackingInput { uncounted: &empty, expected_removals: &none, job_deleting: false, finishing: Some(FAILURE_TARGET), indexed: None });
        assert_eq!((plan.remove_finalizer.as_slice(), plan.uncounted_failed.as_slice()), (&[0][..], &["running".to_string()][..]));
        // Succeeding (SuccessCriteriaMet): released, not a failure.
        let plan = plan_tracking(&pods[..1], &TrackingInput { uncounted: &empty, expected_removals: &none, job_deleting: false, finishing: Some(SUCCESS_CRITERIA_MET), indexed: None });
        assert_eq!((plan.remove_finalizer.as_slice(), plan.uncounted_failed.len()), (&[0][..], 0));
        // The Job being deleted: released, not counted.
        let plan = plan_tracking(&pods[..1], &TrackingInput { uncounted: &empty, expected_removals: &none, job_deleting: true, finishing: None, indexed: None });
        assert_eq!((plan.remove_finalizer.as_slice(), plan.uncounted_failed.len()), (&[0][..], 0));
    }

    #[test]
    fn indexed_successes_are_recorded_by_index() {
        let none = HashSet::new();
        let empty = Uncounted::default();
        let prev = OrderedIntervals::parse("0", 3);
        let pods = [pod("a", "Succeeded", true, false, Some(0)), pod("b", "Succeeded", true, false, Some(2)), pod("c", "Succeeded", true, false, Some(7)), pod("d", "Failed", true, false, None)];
        let plan = plan_tracking(&pods, &TrackingInput { uncounted: &empty, expected_removals: &none, job_deleting: false, finishing: None, indexed: Some((3, &prev)) });
        assert_eq!(plan.remove_finalizer, [0, 1, 2, 3]);
        assert_eq!(plan.new_succeeded_indexes, [2]);
        assert!(plan.uncounted_succeeded.is_empty() && plan.uncounted_failed.is_empty(), "no index, no count: {plan:?}");
    }

    #[test]
    fn uncounted_uids_move_to_the_counters_once_released() {
        let mut status: JobStatus = serde_json::from_value(json!({"succeeded": 2, "failed": 1, "uncountedTerminatedPods": {"succeeded": ["a", "b"], "failed": ["c"]}})).expect("status");
        assert!(!clean_uncounted(&mut status.clone(), &["a", "b", "c"].map(String::from).into()));
        assert!(clean_uncounted(&mut status, &["b".to_string()].into()));
        let u = status.uncounted_terminated_pods.clone().unwrap_or_default();
        assert_eq!((status.succeeded, status.failed, u.succeeded, u.failed), (Some(3), Some(2), Some(vec!["b".to_string()]), None));
    }

    #[test]
    fn failed_and_terminating_pods() {
        // (phase, deleting) -> (failed, terminating)
        let cases = [("Running", false, false, false), ("Failed", false, true, false), ("Running", true, true, true), ("Succeeded", true, false, false), ("Failed", true, true, false), ("Pending", true, true, true)];
        for (ph, deleting, failed, terminating) in cases {
            let p = pod("p", ph, true, deleting, None);
            assert_eq!((is_pod_failed(&p), is_terminating(&p)), (failed, terminating), "{ph} {deleting}");
        }
    }
}
