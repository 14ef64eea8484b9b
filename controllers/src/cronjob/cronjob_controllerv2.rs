//! Mirrors pkg/controller/cronjob/cronjob_controllerv2.go: the CronJob controller. It creates a
//! Job from a CronJob's `jobTemplate` at each time of its schedule, and keeps the CronJob's
//! status and its history of finished Jobs.
//!
//! Events feed a work queue of CronJob keys ([`CronJobController::run`]): a CronJob added or
//! changed queues itself (at once, or — when its schedule or time zone changed — at its next
//! schedule time), and a Job's change queues the CronJob that controls it. Each sync asks to be
//! queued again just after the next schedule time, so a quiet CronJob still fires.
//!
//! One sync ([`CronJobController::sync`], then `sync_cron_job`):
//! 1. Read the CronJob from the cache (gone: nothing to do) and its Jobs: those it controls.
//! 2. Reconcile `status.active` with the Jobs: an unfinished Job missing from it is reported
//!    (`UnexpectedJob`, after a fresh read of the CronJob, whose cache may lag our own status
//!    write); a finished one in it leaves it (`SawCompletedJob`); a succeeded one moves
//!    `lastSuccessfulTime`; an entry whose Job no longer exists (checked by a live GET) leaves
//!    it (`MissingJob`).
//! 3. Stop there if the CronJob is being deleted, its `timeZone` is unknown (`UnknownTimeZone`),
//!    it is suspended, or its schedule does not parse.
//! 4. Find the most recent schedule time not yet run ([`next_schedule_time`]; more than 100
//!    missed: `TooManyMissedTimes`); none: wait for the next one.
//! 5. Skip it if it is more than `startingDeadlineSeconds` old (`MissSchedule`), or already run
//!    (its Job is active, or it is `lastScheduleTime`).
//! 6. Apply `concurrencyPolicy` ([`concurrency_action`]): Forbid with a Job active skips the
//!    time (`JobAlreadyActive`); Replace deletes the active Jobs first (background propagation).
//! 7. Create the Job ([`job_from_template`]): `SuccessfulCreate`, or, if it exists already and
//!    is ours but not in `active`, take it in; record it in `active` and `lastScheduleTime`.
//! 8. Delete the finished Jobs beyond `successfulJobsHistoryLimit` / `failedJobsHistoryLimit`,
//!    the oldest first ([`jobs_to_remove`], `SuccessfulDelete`).
//! 9. Write the status if it changed; queue the CronJob again just after its next schedule time.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{Stream, StreamExt};
use jiff::Timestamp;
use k8s_openapi::api::batch::v1::{CronJob, CronJobStatus, Job};
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, DeleteParams, PostParams, PropagationPolicy};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};

use api::batch::cron::Schedule;

use super::utils::{
    ConcurrencyAction, Missed, ScheduleState, annotation_zone, concurrency_action, delete_from_active_list, finished_status, in_active_list,
    in_active_list_by_name, is_job_finished, job_from_template, job_name, job_reference, jobs_to_remove, next_schedule_time, next_schedule_time_duration,
    schedule_zone,
};
use crate::controller_utils::controller_of;
use crate::error::{Error, Result};
use crate::workqueue::WorkQueue;

const TARGET: &str = "controllers::cronjob";
/// Workers syncing CronJobs at once (`--concurrent-cron-job-syncs`).
pub const CONCURRENT_CRON_JOB_SYNCS: usize = 5;

pub struct CronJobController {
    /// Lists and watches for the caches: the controller manager's own client (see
    /// [`crate::controller_context`]).
    informers: kube::Client,
    /// Everything else: the controller's own client.
    client: kube::Client,
    recorder: client::record::EventRecorder,
}

fn key(namespace: &str, name: &str) -> String {
    format!("{namespace}/{name}")
}

fn key_of(cj: &CronJob) -> String {
    key(cj.metadata.namespace.as_deref().unwrap_or_default(), cj.metadata.name.as_deref().unwrap_or_default())
}

fn reference(cj: &CronJob) -> ObjectReference {
    client::record::object_reference("batch/v1", "CronJob", &cj.metadata)
}

/// What a sync of the CronJob decided (Kubernetes' `syncCronJob` results).
struct Outcome {
    /// Queue again after this long.
    requeue: Option<Duration>,
    /// The status was changed and must be written.
    update_status: bool,
    error: Option<Error>,
}

impl Outcome {
    fn done(update_status: bool) -> Outcome {
        Outcome { requeue: None, update_status, error: None }
    }
    fn requeue(after: Option<Duration>, update_status: bool) -> Outcome {
        Outcome { requeue: after, update_status, error: None }
    }
    fn failed(update_status: bool, error: Error) -> Outcome {
        Outcome { requeue: None, update_status, error: Some(error) }
    }
}

impl CronJobController {
    pub fn new(informers: kube::Client, client: kube::Client) -> Self {
        let recorder = client::record::EventRecorder::new(client.clone(), "cronjob-controller", None);
        Self { informers, client, recorder }
    }

    /// Watches CronJobs and Jobs into caches; [`CONCURRENT_CRON_JOB_SYNCS`] workers sync the
    /// keys their events queue, each sync queueing its CronJob again for the next schedule time.
    pub async fn run(self) -> Result<()> {
        let (cron_jobs, cron_jobs_w) = reflector::store::<CronJob>();
        let (jobs, jobs_w) = reflector::store::<Job>();
        let queue: WorkQueue<String> = WorkQueue::new();
        let informer_client = self.informers.clone();
        // The schedule and time zone each CronJob was last seen with (updateCronJob compares).
        let seen: Mutex<HashMap<String, (String, Option<String>)>> = Mutex::new(HashMap::new());
        let informers = async {
            let on_cron_job = |ev: Change<&CronJob>| self.cron_job_changed(ev, &queue, &seen);
            let on_job = |ev: Change<&Job>| {
                // addJob, updateJob, deleteJob: the controlling CronJob, if it still is that one.
                let job = ev.object();
                let ns = job.metadata.namespace.as_deref().unwrap_or_default();
                if let Some(owner) = controller_of(&job.metadata).filter(|r| r.kind == "CronJob")
                    && let Some(cj) = cron_jobs.get(&ObjectRef::new(&owner.name).within(ns))
                    && cj.metadata.uid.as_deref() == Some(owner.uid.as_str())
                {
                    queue.add(key_of(&cj));
                }
            };
            tokio::join!(
                drive("cronjobs", reflector::reflector(cron_jobs_w, watcher(Api::<CronJob>::all(informer_client.clone()), watcher::Config::default())), on_cron_job),
                drive("jobs", reflector::reflector(jobs_w, watcher(Api::<Job>::all(informer_client.clone()), watcher::Config::default())), on_job),
            );
        };
        let work = async {
            if cron_jobs.wait_until_ready().await.is_err() || jobs.wait_until_ready().await.is_err() {
                return;
            }
            tracing::info!(target: TARGET, workers = CONCURRENT_CRON_JOB_SYNCS, "caches synced; syncing CronJobs");
            let worker = || async {
                while let Some(k) = queue.get().await {
                    match self.sync(&cron_jobs, &jobs, &k, Timestamp::now()).await {
                        Ok(Some(after)) => {
                            queue.forget(&k);
                            queue.add_after(k.clone(), after);
                        }
                        Ok(None) => queue.forget(&k),
                        Err(e) => {
                            tracing::warn!(target: TARGET, cronjob = %k, error = %e, "sync failed; will retry");
                            queue.add_rate_limited(k.clone());
                        }
                    }
                    queue.done(&k);
                }
            };
            futures::future::join_all((0..CONCURRENT_CRON_JOB_SYNCS).map(|_| worker())).await;
        };
        tokio::select! {
            () = informers => {}
            () = work => {}
        }
        Ok(())
    }

    /// addCronJob, updateCronJob, deleteCronJob. A changed schedule or time zone queues the
    /// CronJob for its next schedule time under the new one (a sync sooner would find nothing to
    /// run); any other change queues it at once.
    fn cron_job_changed(&self, ev: Change<&CronJob>, queue: &WorkQueue<String>, seen: &Mutex<HashMap<String, (String, Option<String>)>>) {
        let cj = ev.object();
        let k = key_of(cj);
        let spec = cj.spec.clone();
        let now_seen = (spec.schedule.clone(), spec.time_zone.clone());
        let before = {
            let mut seen = seen.lock().unwrap_or_else(|e| e.into_inner());
            if matches!(ev, Change::Deleted(_)) { seen.remove(&k) } else { seen.insert(k.clone(), now_seen.clone()) }
        };
        if matches!(ev, Change::Applied(_))
            && let Some(before) = before
            && before != now_seen
        {
            let sched = match Schedule::parse(&spec.schedule) {
                Ok(s) => s,
                Err(e) => {
                    tracing::info!(target: TARGET, cronjob = %k, schedule = %spec.schedule, error = %e, "unparseable schedule");
                    let msg = format!("unparseable schedule for cronjob: {}", spec.schedule);
                    self.recorder.event(reference(cj), client::record::WARNING, "UnParseableCronJobSchedule", msg);
                    return;
                }
            };
            // An unknown zone: the sync reports it.
            let Ok(tz) = schedule_zone(spec.time_zone.as_deref()) else { return queue.add(k) };
            let after = next_schedule_time_duration(&ScheduleState::of(cj), Timestamp::now(), &sched, &tz);
            tracing::debug!(target: TARGET, cronjob = %k, after = ?after, "schedule changed");
            if let Some(after) = after {
                queue.add_after(k, after);
            }
            return;
        }
        queue.add(k);
    }

    /// One sync of the CronJob `k` at `now` (steps 1–9); the delay after which to sync it again.
    pub async fn sync(&self, cron_jobs: &Store<CronJob>, jobs: &Store<Job>, k: &str, now: Timestamp) -> Result<Option<Duration>> {
        // Step 1.
        let (ns, name) = k.split_once('/').unwrap_or(("", k));
        let Some(cj) = cron_jobs.get(&ObjectRef::new(name).within(ns)) else {
            tracing::debug!(target: TARGET, cronjob = %k, "gone; nothing to do");
            return Ok(None);
        };
        // getJobsToBeReconciled: every Job it controls, whatever its labels say now.
        let uid = cj.metadata.uid.clone().unwrap_or_default();
        let mine: Vec<Arc<Job>> = jobs
            .state()
            .into_iter()
            .filter(|j| j.metadata.namespace.as_deref() == Some(ns))
            .filter(|j| controller_of(&j.metadata).is_some_and(|r| r.kind == "CronJob" && r.name == name && r.uid == uid))
            .collect();
        let mut copy = (*cj).clone();
        // Steps 2–7.
        let outcome = self.sync_cron_job(&mut copy, &mine, now).await;
        // Step 8.
        let cleaned = copy.metadata.deletion_timestamp.is_none() && self.cleanup_finished_jobs(&mut copy, &mine).await;
        // Step 9.
        if outcome.update_status || cleaned {
            let api: Api<CronJob> = Api::namespaced(self.client.clone(), ns);
            match api.replace_status(name, &PostParams::default(), &copy).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 404 => return Ok(None),
                Err(e) => return Err(Error::Kube(e)),
            }
        }
        match (outcome.requeue, outcome.error) {
            (Some(after), _) => Ok(Some(after)),
            (None, Some(e)) => Err(e),
            (None, None) => Ok(None),
        }
    }

    /// Steps 2–7 (Kubernetes' `syncCronJob`) on `cj`, a copy whose status they change.
    async fn sync_cron_job(&self, cj: &mut CronJob, jobs: &[Arc<Job>], now: Timestamp) -> Outcome {
        let k = key_of(cj);
        let ns = cj.metadata.namespace.clone().unwrap_or_default();
        let name = cj.metadata.name.clone().unwrap_or_default();
        let jobs_api: Api<Job> = Api::namespaced(self.client.clone(), &ns);
        let mut update = false;
        // Step 2.
        for job in jobs {
            let job_uid = job.metadata.uid.clone().unwrap_or_default();
            let job_name = job.metadata.name.clone().unwrap_or_default();
            let found = in_active_list(cj, &job_uid);
            if !found && !is_job_finished(job) {
                // Our cache may not show the status we wrote a moment ago: ask the API server.
                let fresh = match Api::<CronJob>::namespaced(self.client.clone(), &ns).get_opt(&name).await {
                    Ok(Some(fresh)) => fresh,
                    Ok(None) => return Outcome::done(update),
                    Err(e) => return Outcome::failed(update, Error::Kube(e)),
                };
                if in_active_list(&fresh, &job_uid) {
                    *cj = fresh;
                    continue;
                }
                // Created by hand (`kubectl create job --from=cronjob/...`), or by us just
                // before a crash: left running, not adopted into `active`.
                tracing::info!(target: TARGET, cronjob = %k, job = %job_name, "unexpected job");
                self.recorder.event(reference(cj), client::record::WARNING, "UnexpectedJob", format!("Saw a job that the controller did not create or forgot: {job_name}"));
            } else if found && let Some(condition) = finished_status(job) {
                tracing::info!(target: TARGET, cronjob = %k, job = %job_name, condition, "saw completed job");
                self.recorder.event(reference(cj), client::record::NORMAL, "SawCompletedJob", format!("Saw completed job: {job_name}, condition: {condition}"));
                delete_from_active_list(cj, &job_uid);
                update = true;
            }
            if finished_status(job) == Some("Complete")
                && let Some(done) = job.status.as_ref().and_then(|s| s.completion_time.as_ref())
            {
                let status = cj.status.get_or_insert_with(CronJobStatus::default);
                if status.last_successful_time.as_ref().is_none_or(|t| t.0 < done.0) {
                    status.last_successful_time = Some(done.clone());
                    update = true;
                }
            }
        }
        // An active entry whose Job is gone would hold a Forbid CronJob for ever.
        let active: Vec<ObjectReference> = cj.status.as_ref().and_then(|s| s.active.clone()).unwrap_or_default();
        for r in active {
            if jobs.iter().any(|j| j.metadata.uid == r.uid) {
                continue;
            }
            // The Job cache may lag: ask the API server before calling it missing.
            let job_name = r.name.clone().unwrap_or_default();
            match jobs_api.get_opt(&job_name).await {
                Ok(None) => {
                    tracing::info!(target: TARGET, cronjob = %k, job = %job_name, "active job went missing");
                    self.recorder.event(reference(cj), client::record::NORMAL, "MissingJob", format!("Active job went missing: {job_name}"));
                    delete_from_active_list(cj, r.uid.as_deref().unwrap_or_default());
                    update = true;
                }
                Ok(Some(_)) => {}
                Err(e) => return Outcome::failed(update, Error::Kube(e)),
            }
        }
        // Step 3.
        if cj.metadata.deletion_timestamp.is_some() {
            return Outcome::done(update);
        }
        let spec = cj.spec.clone();
        let tz = match schedule_zone(spec.time_zone.as_deref()) {
            Ok(tz) => tz,
            Err(e) => {
                let zone = spec.time_zone.clone().unwrap_or_default();
                tracing::info!(target: TARGET, cronjob = %k, time_zone = %zone, error = %e, "not starting job because timeZone is invalid");
                self.recorder.event(reference(cj), client::record::WARNING, "UnknownTimeZone", format!("invalid timeZone: {zone:?}: {e}"));
                return Outcome::done(update);
            }
        };
        if spec.suspend == Some(true) {
            tracing::debug!(target: TARGET, cronjob = %k, "not starting job because the cron is suspended");
            return Outcome::done(update);
        }
        let sched = match Schedule::parse(&spec.schedule) {
            Ok(s) => s,
            Err(e) => {
                tracing::info!(target: TARGET, cronjob = %k, schedule = %spec.schedule, error = %e, "unparseable schedule");
                self.recorder.event(reference(cj), client::record::WARNING, "UnparseableSchedule", format!("unparseable schedule: {:?} : {e}", spec.schedule));
                return Outcome::done(update);
            }
        };
        // Step 4.
        let st = ScheduleState::of(cj);
        let scheduled = match next_schedule_time(&st, now, &sched, &tz) {
            Err(e) => {
                tracing::info!(target: TARGET, cronjob = %k, schedule = %spec.schedule, error = %e, "invalid schedule");
                self.recorder.event(reference(cj), client::record::WARNING, "InvalidSchedule", format!("invalid schedule: {} : {e}", spec.schedule));
                return Outcome::done(update);
            }
            Ok((scheduled, missed)) => {
                if missed == Missed::Many {
                    tracing::info!(target: TARGET, cronjob = %k, "too many missed times");
                    let msg = "too many missed start times. Set or decrease .spec.startingDeadlineSeconds or check clock skew";
                    self.recorder.event(reference(cj), client::record::WARNING, "TooManyMissedTimes", msg);
                }
                scheduled
            }
        };
        let next = |cj: &CronJob| next_schedule_time_duration(&ScheduleState::of(cj), now, &sched, &tz);
        let Some(scheduled) = scheduled else {
            tracing::debug!(target: TARGET, cronjob = %k, "no unmet start times");
            return Outcome::requeue(next(cj), update);
        };
        // Step 5.
        if let Some(deadline) = spec.starting_deadline_seconds
            && scheduled.checked_add(jiff::SignedDuration::from_secs(deadline)).is_ok_and(|d| d < now)
        {
            tracing::info!(target: TARGET, cronjob = %k, scheduled = %scheduled, "missed starting window");
            let msg = format!("Missed scheduled time to start a job: {}", rfc1123z(scheduled));
            self.recorder.event(reference(cj), client::record::WARNING, "MissSchedule", msg);
            return Outcome::requeue(next(cj), update);
        }
        let last = cj.status.as_ref().and_then(|s| s.last_schedule_time.as_ref()).map(|t| t.0);
        if in_active_list_by_name(cj, &ns, &job_name(&name, scheduled)) || last == Some(scheduled) {
            tracing::debug!(target: TARGET, cronjob = %k, scheduled = %scheduled, "not starting job because the scheduled time is already processed");
            return Outcome::requeue(next(cj), update);
        }
        // Step 6.
        let active: Vec<ObjectReference> = cj.status.as_ref().and_then(|s| s.active.clone()).unwrap_or_default();
        match concurrency_action(spec.concurrency_policy.as_deref(), active.len()) {
            ConcurrencyAction::Skip => {
                tracing::info!(target: TARGET, cronjob = %k, "not starting job because prior execution is still running and concurrency policy is Forbid");
                let msg = "Not starting job because prior execution is running and concurrency policy is Forbid";
                self.recorder.event(reference(cj), client::record::NORMAL, "JobAlreadyActive", msg);
                return Outcome::requeue(next(cj), update);
            }
            ConcurrencyAction::ReplaceThenCreate => {
                for r in active {
                    let job_name = r.name.clone().unwrap_or_default();
                    tracing::info!(target: TARGET, cronjob = %k, job = %job_name, "deleting job that was still running at next scheduled start time");
                    let job = match jobs_api.get(&job_name).await {
                        Ok(j) => j,
                        Err(e) => {
                            self.recorder.event(reference(cj), client::record::WARNING, "FailedGet", format!("Get job: {e}"));
                            return Outcome::failed(update, Error::Kube(e));
                        }
                    };
                    match self.delete_job(cj, &job).await {
                        Ok(()) => update = true,
                        Err(e) => return Outcome::failed(update, e),
                    }
                }
            }
            ConcurrencyAction::Create => {}
        }
        // Step 7.
        let zone = match annotation_zone(spec.time_zone.as_deref()) {
            Ok(z) => z,
            Err(_) => return Outcome::done(update),
        };
        let request = job_from_template(cj, scheduled, &zone);
        let request_name = request.metadata.name.clone().unwrap_or_default();
        let created = match jobs_api.create(&PostParams::default(), &request).await {
            Ok(job) => {
                tracing::info!(target: TARGET, cronjob = %k, job = %request_name, scheduled = %scheduled, "created job");
                self.recorder.event(reference(cj), client::record::NORMAL, "SuccessfulCreate", format!("Created job {request_name}"));
                job
            }
            Err(kube::Error::Api(s)) if s.code == 409 && s.reason == "AlreadyExists" => {
                // Ours from an earlier sync whose status write was lost, or someone else's.
                let job = match jobs_api.get(&request_name).await {
                    Ok(j) => j,
                    Err(e) => return Outcome::failed(update, Error::Kube(e)),
                };
                let ours = controller_of(&job.metadata).is_some_and(|r| Some(r.uid.as_str()) == cj.metadata.uid.as_deref());
                tracing::info!(target: TARGET, cronjob = %k, job = %request_name, ours, "job already exists");
                if !ours || in_active_list(cj, job.metadata.uid.as_deref().unwrap_or_default()) {
                    return Outcome::done(update);
                }
                job
            }
            Err(e) => {
                let msg = match &e {
                    kube::Error::Api(s) => s.message.clone(),
                    e => e.to_string(),
                };
                self.recorder.event(reference(cj), client::record::WARNING, "FailedCreate", format!("Error creating job: {msg}"));
                return Outcome::failed(update, Error::Kube(e));
            }
        };
        let status = cj.status.get_or_insert_with(CronJobStatus::default);
        status.active.get_or_insert_with(Vec::new).push(job_reference(&created));
        status.last_schedule_time = Some(Time(scheduled));
        Outcome::requeue(next(cj), true)
    }

    /// Step 8 (cleanupFinishedJobs): the finished Jobs beyond the history limits, the oldest
    /// first. Whether the status changed (a deleted Job leaves `active`).
    async fn cleanup_finished_jobs(&self, cj: &mut CronJob, jobs: &[Arc<Job>]) -> bool {
        let spec = cj.spec.clone();
        if spec.successful_jobs_history_limit.is_none() && spec.failed_jobs_history_limit.is_none() {
            return false;
        }
        let of = |kind: &str| jobs.iter().map(|j| j.as_ref()).filter(|j| finished_status(j) == Some(kind)).collect::<Vec<&Job>>();
        let (succeeded, failed) = (of("Complete"), of("Failed"));
        let mut doomed = Vec::new();
        if let Some(limit) = spec.successful_jobs_history_limit {
            doomed.extend(jobs_to_remove(&succeeded, limit));
        }
        if let Some(limit) = spec.failed_jobs_history_limit {
            doomed.extend(jobs_to_remove(&failed, limit));
        }
        let mut update = false;
        for job in doomed {
            tracing::info!(target: TARGET, cronjob = %key_of(cj), job = job.metadata.name.as_deref().unwrap_or_default(), "removing job beyond the history limit");
            // A failed delete has its event; the next sync tries again.
            if self.delete_job(cj, job).await.is_ok() {
                update = true;
            }
        }
        update
    }

    /// deleteJob: the Job with background propagation (its pods follow through the garbage
    /// collector), then its `active` entry; an event either way.
    async fn delete_job(&self, cj: &mut CronJob, job: &Job) -> Result<()> {
        let ns = job.metadata.namespace.clone().unwrap_or_default();
        let name = job.metadata.name.clone().unwrap_or_default();
        let api: Api<Job> = Api::namespaced(self.client.clone(), &ns);
        let params = DeleteParams { propagation_policy: Some(PropagationPolicy::Background), ..DeleteParams::default() };
        match api.delete(&name, &params).await {
            Ok(_) => {}
            // Already gone: as good as deleted.
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => {
                let msg = match &e {
                    kube::Error::Api(s) => s.message.clone(),
                    e => e.to_string(),
                };
                tracing::warn!(target: TARGET, cronjob = %key_of(cj), job = %name, error = %msg, "error deleting job");
                self.recorder.event(reference(cj), client::record::WARNING, "FailedDelete", format!("Deleted job: {msg}"));
                return Err(Error::Kube(e));
            }
        }
        delete_from_active_list(cj, job.metadata.uid.as_deref().unwrap_or_default());
        self.recorder.event(reference(cj), client::record::NORMAL, "SuccessfulDelete", format!("Deleted job {name}"));
        Ok(())
    }
}

/// Go's `time.RFC1123Z` in UTC (`Mon, 02 Jan 2006 15:04:05 +0000`), as the MissSchedule event
/// prints the time.
fn rfc1123z(t: Timestamp) -> String {
    t.strftime("%a, %d %b %Y %H:%M:%S +0000").to_string()
}

/// An informer event, reduced to what the handlers need.
enum Change<T> {
    Applied(T),
    Deleted(T),
}

impl<T> Change<T> {
    fn object(&self) -> &T {
        match self {
            Change::Applied(o) | Change::Deleted(o) => o,
        }
    }
}

/// Runs one informer's stream into `on_change`; the watcher retries by itself (with backoff),
/// errors are logged.
async fn drive<K>(what: &'static str, stream: impl Stream<Item = watcher::Result<watcher::Event<K>>>, on_change: impl Fn(Change<&K>)) {
    let mut stream = std::pin::pin!(stream.default_backoff());
    while let Some(ev) = stream.next().await {
        match ev {
            Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) => on_change(Change::Applied(&o)),
            Ok(watcher::Event::Delete(o)) => on_change(Change::Deleted(&o)),
            Ok(_) => {}
            Err(e) => tracing::warn!(target: TARGET, resource = what, error = %e, "watch failed; retrying"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn miss_schedule_prints_rfc1123z() {
        assert_eq!(rfc1123z("2026-05-01T10:04:00Z".parse().unwrap()), "Fri, 01 May 2026 10:04:00 +0000");
    }
}
