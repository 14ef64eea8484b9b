//! Mirrors pkg/controller/ttlafterfinished/ttlafterfinished_controller.go: deletes a finished
//! Job once its `ttlSecondsAfterFinished` has passed since it finished (its Complete or Failed
//! condition's transition), with its pods (foreground propagation: the Job goes after them).
//!
//! Job events queue the Jobs that need it (finished, with a TTL, not being deleted). One pass
//! ([`TtlAfterFinishedController::process_job`]):
//! 1. Read the Job from the cache; gone, being deleted or not needing cleanup: nothing to do.
//! 2. Not yet expired: queue it again for the time left ([`time_left`]).
//! 3. Expired by the cache: read it fresh from the API server and check again (the TTL may
//!    have been changed or removed meanwhile).
//! 4. Delete it, foreground, with a precondition on its UID (a Job recreated under the same
//!    name is not this one).

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, PropagationPolicy};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};

use crate::error::{Error, Result};
use crate::job::util::{finish_time, is_job_finished};
use crate::workqueue::WorkQueue;

const TARGET: &str = "controllers::ttlafterfinished";
/// Workers cleaning up at once (`--concurrent-ttl-after-finished-syncs`).
pub const CONCURRENT_TTL_SYNCS: usize = 5;

pub struct TtlAfterFinishedController {
    /// Lists and watches for the caches: the controller manager's own client (see
    /// [`crate::controller_context`]).
    informers: kube::Client,
    /// Everything else: the controller's own client.
    client: kube::Client,
}

/// needsCleanup: a TTL, and finished.
pub fn needs_cleanup(job: &Job) -> bool {
    job.spec.as_ref().and_then(|s| s.ttl_seconds_after_finished).is_some() && is_job_finished(job)
}

/// timeLeft: how long until the Job expires (zero once it has), or `None` when it does not
/// need cleanup. A finish time in the future (clock skew) just makes the wait longer.
pub fn time_left(job: &Job, now: Timestamp) -> Option<Duration> {
    if !needs_cleanup(job) {
        return None;
    }
    let ttl = job.spec.as_ref()?.ttl_seconds_after_finished?;
    let finished = finish_time(job)?;
    let left = ttl as f64 - now.duration_since(finished).as_secs_f64();
    Some(if left > 0.0 { Duration::from_secs_f64(left) } else { Duration::ZERO })
}

fn key_of(job: &Job) -> String {
    format!("{}/{}", job.metadata.namespace.as_deref().unwrap_or_default(), job.metadata.name.as_deref().unwrap_or_default())
}

impl TtlAfterFinishedController {
    pub fn new(informers: kube::Client, client: kube::Client) -> Self {
        Self { informers, client }
    }

    /// Watches Jobs; [`CONCURRENT_TTL_SYNCS`] workers process the keys queued.
    pub async fn run(self) -> Result<()> {
        let (jobs, jobs_w) = reflector::store::<Job>();
        let queue: WorkQueue<String> = WorkQueue::new();
        let informer = async {
            let stream = reflector::reflector(jobs_w, watcher(Api::<Job>::all(self.informers.clone()), watcher::Config::default())).default_backoff();
            let mut stream = std::pin::pin!(stream);
            while let Some(ev) = stream.next().await {
                match ev {
                    // addJob / updateJob.
                    Ok(watcher::Event::Apply(j) | watcher::Event::InitApply(j)) if j.metadata.deletion_timestamp.is_none() && needs_cleanup(&j) => queue.add(key_of(&j)),
                    Ok(_) => {}
                    Err(e) => tracing::warn!(target: TARGET, error = %e, "watch failed; retrying"),
                }
            }
        };
        let work = async {
            if jobs.wait_until_ready().await.is_err() {
                return;
            }
            let worker = || async {
                while let Some(k) = queue.get().await {
                    match self.process_job(&jobs, &k, &queue).await {
                        Ok(()) => queue.forget(&k),
                        Err(e) => {
                            tracing::warn!(target: TARGET, job = %k, error = %e, "cleanup failed; will retry");
                            queue.add_rate_limited(k.clone());
                        }
                    }
                    queue.done(&k);
                }
            };
            futures::future::join_all((0..CONCURRENT_TTL_SYNCS).map(|_| worker())).await;
        };
        tokio::select! {
            () = informer => {}
            () = work => {}
        }
        Ok(())
    }

    /// Steps 1–4 for one Job.
    async fn process_job(&self, jobs: &Store<Job>, k: &str, queue: &WorkQueue<String>) -> Result<()> {
        // Step 1.
        let (ns, name) = k.split_once('/').unwrap_or(("", k));
        let Some(job) = jobs.get(&ObjectRef::new(name).within(ns)) else { return Ok(()) };
        if job.metadata.deletion_timestamp.is_some() {
            return Ok(());
        }
        // Step 2.
        let now = Timestamp::now();
        if finish_time(&job).is_some_and(|t| t > now) {
            tracing::warn!(target: TARGET, job = %k, "found a Job finished in the future, likely clock skew; its cleanup waits");
        }
        match time_left(&job, now) {
            None => return Ok(()),
            Some(left) if !left.is_zero() => {
                queue.add_after(k.to_string(), left);
                return Ok(());
            }
            Some(_) => {}
        }
        // Step 3.
        let api: Api<Job> = Api::namespaced(self.client.clone(), ns);
        let Some(fresh) = api.get_opt(name).await.map_err(Error::Kube)? else { return Ok(()) };
        if fresh.metadata.deletion_timestamp.is_some() {
            return Ok(());
        }
        match time_left(&fresh, Timestamp::now()) {
            None => return Ok(()),
            Some(left) if !left.is_zero() => {
                queue.add_after(k.to_string(), left);
                return Ok(());
            }
            Some(_) => {}
        }
        // Step 4.
        tracing::info!(target: TARGET, job = %k, uid = fresh.metadata.uid.as_deref().unwrap_or_default(), "cleaning up Job");
        let params = DeleteParams {
            propagation_policy: Some(PropagationPolicy::Foreground),
            preconditions: Some(kube::api::Preconditions { uid: fresh.metadata.uid.clone(), resource_version: None }),
            ..DeleteParams::default()
        };
        match api.delete(name, &params).await {
            Ok(_) => Ok(()),
            // Gone, or another Job of that name now (the precondition failed): nothing to do.
            Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => Ok(()),
            Err(e) => Err(Error::Kube(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_finished_job_expires_after_its_ttl() {
        let now = Timestamp::from_second(1_800_000_100).expect("t");
        let at = |s: i64| Timestamp::from_second(1_800_000_000 + s).expect("t").to_string();
        let job = |ttl: Option<i32>, cond: Option<(&str, &str, String)>| -> Job {
            let mut v = json!({"metadata": {"name": "j"}, "spec": {"template": {}}, "status": {}});
            if let Some(ttl) = ttl {
                v["spec"]["ttlSecondsAfterFinished"] = json!(ttl);
            }
            if let Some((t, s, when)) = cond {
                v["status"]["conditions"] = json!([{"type": t, "status": s, "lastTransitionTime": when}]);
            }
            serde_json::from_value(v).expect("job")
        };
        // (ttl, condition) -> time left
        let cases = [
            (None, Some(("Complete", "True", at(0))), None),
            (Some(30), None, None),
            (Some(30), Some(("Suspended", "True", at(0))), None),
            (Some(300), Some(("Complete", "True", at(0))), Some(200)),
            (Some(30), Some(("Complete", "True", at(0))), Some(0)),
            (Some(100), Some(("Failed", "True", at(0))), Some(0)),
            (Some(0), Some(("Failed", "True", at(100))), Some(0)),
            (Some(10), Some(("Complete", "True", at(150))), Some(60)), // finished "in the future"
        ];
        for (ttl, cond, want) in cases {
            let j = job(ttl, cond.clone());
            assert_eq!(time_left(&j, now), want.map(Duration::from_secs), "{ttl:?} {cond:?}");
        }
    }
}
