//! Mirrors pkg/controller/job/backoff_utils.go: the delay before a Job replaces failed pods.
//! Each Job has a record of its failures since its last success and the time of the latest;
//! new pods wait 10 s after one failure, doubling with each further failure up to 6 min, and a
//! success wipes the record. The records live in memory (a restarted controller forgets
//! them, as Kubernetes' does).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;

/// The first delay after a failure (`DefaultJobPodFailureBackOff`).
pub const DEFAULT_JOB_POD_FAILURE_BACKOFF: Duration = Duration::from_secs(10);
/// The longest delay (`MaxJobPodFailureBackOff`).
pub const MAX_JOB_POD_FAILURE_BACKOFF: Duration = Duration::from_secs(360);

/// One Job's failures since its last success (`backoffRecord`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BackoffRecord {
    pub key: String,
    pub failures_after_last_success: u32,
    pub last_failure_time: Option<Timestamp>,
}

impl BackoffRecord {
    /// getRemainingTime: how long new pods must still wait at `now` — `base` doubled for each
    /// failure after the first, at most `max`, counted from the last failure.
    pub fn remaining_time(&self, now: Timestamp, base: Duration, max: Duration) -> Duration {
        let Some(last) = self.last_failure_time else { return Duration::ZERO };
        if self.failures_after_last_success == 0 {
            return Duration::ZERO;
        }
        let mut backoff = base;
        for _ in 1..self.failures_after_last_success {
            backoff = backoff.saturating_mul(2);
            if backoff >= max {
                backoff = max;
                break;
            }
        }
        let elapsed = Duration::try_from(now.duration_since(last)).unwrap_or(Duration::ZERO);
        backoff.saturating_sub(elapsed)
    }
}

/// The records of every Job, by key (`backoffStore`).
#[derive(Clone, Default)]
pub struct BackoffStore {
    records: Arc<Mutex<HashMap<String, BackoffRecord>>>,
}

impl BackoffStore {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, BackoffRecord>> {
        self.records.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// newBackoffRecord: the stored record updated with the pods that finished since it was
    /// last written (not yet stored: [`BackoffStore::update`] does, once the status holding
    /// those pods is written).
    pub fn new_record(&self, key: &str, new_succeeded: &[&Pod], new_failed: &[&Pod], now: Timestamp) -> BackoffRecord {
        let stored = self.lock().get(key).cloned().unwrap_or(BackoffRecord { key: key.into(), ..BackoffRecord::default() });
        let times = |pods: &[&Pod]| {
            let mut t: Vec<Timestamp> = pods.iter().map(|p| finished_time(p, now)).collect();
            t.sort();
            t
        };
        next_record(stored, &times(new_succeeded), &times(new_failed))
    }

    /// updateBackoffRecord.
    pub fn update(&self, record: BackoffRecord) {
        self.lock().insert(record.key.clone(), record);
    }

    /// removeBackoffRecord: the Job finished or went.
    pub fn remove(&self, key: &str) {
        self.lock().remove(key);
    }
}

/// The record after pods that succeeded and failed at the given (sorted) times: no success
/// adds the failures; a success resets the count to the failures after the latest success.
pub fn next_record(mut record: BackoffRecord, succeeded: &[Timestamp], failed: &[Timestamp]) -> BackoffRecord {
    match (succeeded.last(), failed.last()) {
        (None, None) => {}
        (None, Some(&last_failure)) => {
            record.failures_after_last_success += failed.len() as u32;
            record.last_failure_time = Some(last_failure);
        }
        (Some(_), None) => {
            record.failures_after_last_success = 0;
            record.last_failure_time = None;
        }
        (Some(&last_success), Some(&last_failure)) => {
            let after = failed.iter().filter(|t| **t > last_success).count() as u32;
            record.failures_after_last_success = after;
            record.last_failure_time = (after > 0).then_some(last_failure);
        }
    }
    record
}

/// getFinishedTime: when a pod finished — the latest of its containers' termination, else the
/// time its Ready condition turned False, else its deletion, else `now`.
pub fn finished_time(pod: &Pod, now: Timestamp) -> Timestamp {
    let status = pod.status.as_ref();
    let terminated = status
        .and_then(|s| s.container_statuses.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|c| c.state.as_ref()?.terminated.as_ref()?.finished_at.as_ref().map(|t| t.0))
        .max();
    let not_ready = || {
        status?.conditions.as_ref()?.iter().find(|c| c.type_ == "Ready" && c.status == "False")?.last_transition_time.as_ref().map(|t| t.0)
    };
    terminated.or_else(not_ready).or_else(|| pod.metadata.deletion_timestamp.as_ref().map(|t| t.0)).unwrap_or(now)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn t(s: u64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + s as i64).expect("time")
    }

    #[test]
    fn the_delay_doubles_from_ten_seconds_up_to_six_minutes() {
        let rec = |failures: u32| BackoffRecord { key: "k".into(), failures_after_last_success: failures, last_failure_time: Some(t(0)) };
        // (failures, seconds since the last failure) -> remaining seconds
        let cases = [(0, 0, 0), (1, 0, 10), (1, 4, 6), (1, 10, 0), (1, 60, 0), (2, 0, 20), (3, 5, 35), (5, 0, 160), (6, 0, 320), (7, 0, 360), (30, 0, 360), (30, 400, 0)];
        for (failures, since, want) in cases {
            let got = rec(failures).remaining_time(t(since), DEFAULT_JOB_POD_FAILURE_BACKOFF, MAX_JOB_POD_FAILURE_BACKOFF);
            assert_eq!(got, Duration::from_secs(want), "{failures} failures, {since} s ago");
        }
        assert_eq!(BackoffRecord::default().remaining_time(t(0), DEFAULT_JOB_POD_FAILURE_BACKOFF, MAX_JOB_POD_FAILURE_BACKOFF), Duration::ZERO);
    }

    #[test]
    fn failures_add_up_until_a_success() {
        let start = BackoffRecord { key: "k".into(), failures_after_last_success: 2, last_failure_time: Some(t(5)) };
        // (succeeded at, failed at) -> (failures, last failure)
        type Case<'a> = (&'a [u64], &'a [u64], u32, Option<u64>);
        let cases: [Case<'_>; 5] = [
            (&[], &[], 2, Some(5)),
            (&[], &[7, 9], 4, Some(9)),
            (&[8], &[], 0, None),
            (&[8], &[6, 9, 10], 2, Some(10)),
            (&[12], &[6, 9], 0, None),
        ];
        for (succeeded, failed, failures, last) in cases {
            let s: Vec<Timestamp> = succeeded.iter().map(|s| t(*s)).collect();
            let f: Vec<Timestamp> = failed.iter().map(|s| t(*s)).collect();
            let got = next_record(start.clone(), &s, &f);
            assert_eq!((got.failures_after_last_success, got.last_failure_time), (failures, last.map(t)), "{succeeded:?} {failed:?}");
        }
    }

    #[test]
    fn a_pod_finished_when_its_containers_did() {
        let pod = |status: serde_json::Value| -> Pod { serde_json::from_value(json!({"metadata": {"name": "p"}, "status": status})).expect("pod") };
        let term = |at: &str| json!({"name": "c", "image": "i", "imageID": "", "ready": false, "restartCount": 0, "state": {"terminated": {"exitCode": 1, "finishedAt": at}}});
        let p = pod(json!({"phase": "Failed", "containerStatuses": [term("2027-01-15T08:00:00Z"), term("2027-01-15T08:00:05Z")]}));
        assert_eq!(finished_time(&p, t(0)).to_string(), "2027-01-15T08:00:05Z");
        let p = pod(json!({"phase": "Failed", "conditions": [{"type": "Ready", "status": "False", "lastTransitionTime": "2027-01-15T09:00:00Z"}]}));
        assert_eq!(finished_time(&p, t(0)).to_string(), "2027-01-15T09:00:00Z");
        assert_eq!(finished_time(&pod(json!({"phase": "Failed"})), t(3)), t(3));
        let store = BackoffStore::default();
        let failed = pod(json!({"phase": "Failed"}));
        let rec = store.new_record("ns/j", &[], &[&failed], t(3));
        assert_eq!((rec.failures_after_last_success, rec.last_failure_time), (1, Some(t(3))));
        assert_eq!(store.new_record("ns/j", &[], &[], t(4)).failures_after_last_success, 0, "not stored until update");
        store.update(rec);
        assert_eq!(store.new_record("ns/j", &[], &[], t(4)).failures_after_last_success, 1);
        store.remove("ns/j");
        assert_eq!(store.new_record("ns/j", &[], &[], t(4)).failures_after_last_success, 0);
    }
}
