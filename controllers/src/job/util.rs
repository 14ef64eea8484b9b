//! Mirrors pkg/controller/job/util/utils.go (and the condition helpers of job_controller.go):
//! when a Job is finished, and how its conditions are set.

use k8s_openapi::api::batch::v1::{Job, JobCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

pub const COMPLETE: &str = "Complete";
pub const FAILED: &str = "Failed";
pub const FAILURE_TARGET: &str = "FailureTarget";
pub const SUCCESS_CRITERIA_MET: &str = "SuccessCriteriaMet";
pub const SUSPENDED: &str = "Suspended";

/// FinishedCondition: the Complete or Failed condition that is True, if any.
pub fn finished_condition(job: &Job) -> Option<&JobCondition> {
    job.status.as_ref()?.conditions.as_ref()?.iter().find(|c| (c.type_ == COMPLETE || c.type_ == FAILED) && c.status == "True")
}

/// IsJobFinished.
pub fn is_job_finished(job: &Job) -> bool {
    finished_condition(job).is_some()
}

/// The condition of that type, if the Job has it.
pub fn find_condition<'a>(conditions: &'a [JobCondition], type_: &str) -> Option<&'a JobCondition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// newCondition: probed and changed `now`.
pub fn new_condition(type_: &str, status: &str, reason: &str, message: &str, now: Timestamp) -> JobCondition {
    JobCondition {
        type_: type_.into(),
        status: status.into(),
        reason: (!reason.is_empty()).then(|| reason.into()),
        message: (!message.is_empty()).then(|| message.into()),
        last_probe_time: Some(Time(now)),
        last_transition_time: Some(Time(now)),
    }
}

/// ensureJobConditionStatus: sets the condition of `type_` to what is given, replacing one that
/// differs in status, reason or message; a condition not there is only added when its status
/// is not False (nothing → False says nothing). Whether the list changed.
pub fn ensure_condition(list: &mut Vec<JobCondition>, type_: &str, status: &str, reason: &str, message: &str, now: Timestamp) -> bool {
    let fresh = new_condition(type_, status, reason, message, now);
    match list.iter_mut().find(|c| c.type_ == type_) {
        Some(c) if c.status != fresh.status || c.reason != fresh.reason || c.message != fresh.message => {
            *c = fresh;
            true
        }
        Some(_) => false,
        None if status != "False" => {
            list.push(fresh);
            true
        }
        None => false,
    }
}

/// The moment the Job finished (the True Complete or Failed condition's transition), as the
/// TTL-after-finished controller counts from it.
pub fn finish_time(job: &Job) -> Option<Timestamp> {
    finished_condition(job)?.last_transition_time.as_ref().map(|t| t.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn job(conditions: serde_json::Value) -> Job {
        serde_json::from_value(json!({"metadata": {"name": "j"}, "status": {"conditions": conditions}})).expect("job")
    }

    #[test]
    fn finished_means_complete_or_failed_true() {
        let at = "2027-01-15T08:00:00Z";
        // (conditions, finished)
        let cases = [
            (json!([]), false),
            (json!([{"type": "Complete", "status": "True", "lastTransitionTime": at}]), true),
            (json!([{"type": "Failed", "status": "True", "lastTransitionTime": at}]), true),
            (json!([{"type": "Complete", "status": "False"}]), false),
            (json!([{"type": "FailureTarget", "status": "True"}, {"type": "SuccessCriteriaMet", "status": "True"}]), false),
            (json!([{"type": "Suspended", "status": "True"}]), false),
        ];
        for (conds, want) in cases {
            let j = job(conds.clone());
            assert_eq!(is_job_finished(&j), want, "{conds}");
            assert_eq!(finish_time(&j).is_some(), want, "{conds}");
        }
    }

    #[test]
    fn conditions_change_only_when_they_differ() {
        let t0 = Timestamp::from_second(1_800_000_000).expect("t");
        let t1 = Timestamp::from_second(1_800_000_060).expect("t");
        let mut list = Vec::new();
        assert!(!ensure_condition(&mut list, SUSPENDED, "False", "JobResumed", "Job resumed", t0), "nothing to False: no condition");
        assert!(list.is_empty());
        assert!(ensure_condition(&mut list, SUSPENDED, "True", "JobSuspended", "Job suspended", t0));
        assert!(!ensure_condition(&mut list, SUSPENDED, "True", "JobSuspended", "Job suspended", t1), "the same: unchanged");
        assert_eq!(list[0].last_transition_time, Some(Time(t0)));
        assert!(ensure_condition(&mut list, SUSPENDED, "False", "JobResumed", "Job resumed", t1));
        assert_eq!((list.len(), list[0].status.as_str(), list[0].reason.as_deref(), list[0].last_transition_time.clone()), (1, "False", Some("JobResumed"), Some(Time(t1))));
    }
}
