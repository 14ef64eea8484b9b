//! Mirrors k8s.io/api/batch/v1/generated.proto: the Job and CronJob `kubectl create job` and
//! `kubectl create cronjob` send, field numbers as in that file.
//!
//! Almost every JobSpec field is a pointer in Go (`parallelism`, `completions`, `backoffLimit`,
//! `suspend`…): the server's defaults fill them in, and a `job --from=cronjob/x` sends them back
//! as read, so a present 0 or false is kept. `template` and `jobTemplate` are structs.

use serde_json::{Map, Value};

use super::core_v1::{ObjectReference, PodTemplateSpec};
use super::json::Fields;
use super::meta_v1::{LabelSelector, ObjectMeta, Time};

/// `batch/v1.Job`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct Job {
    #[prost(message, optional, tag = "1")]
    pub(super) metadata: Option<ObjectMeta>,
    #[prost(message, optional, tag = "2")]
    pub(super) spec: Option<JobSpec>,
    #[prost(message, optional, tag = "3")]
    pub(super) status: Option<JobStatus>,
}

impl Job {
    pub(super) fn to_json(&self) -> Map<String, Value> {
        let mut f = Fields::with_metadata(&self.metadata);
        f.message("spec", &self.spec, JobSpec::to_json);
        f.message("status", &self.status, JobStatus::to_json);
        f.0
    }
}

/// `batch/v1.JobSpec`, without `podFailurePolicy` and `successPolicy` (nested rules: such a body
/// does not round-trip).
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct JobSpec {
    #[prost(int32, optional, tag = "1")]
    pub(super) parallelism: Option<i32>,
    #[prost(int32, optional, tag = "2")]
    pub(super) completions: Option<i32>,
    #[prost(int64, optional, tag = "3")]
    pub(super) active_deadline_seconds: Option<i64>,
    #[prost(message, optional, tag = "4")]
    pub(super) selector: Option<LabelSelector>,
    #[prost(bool, optional, tag = "5")]
    pub(super) manual_selector: Option<bool>,
    #[prost(message, optional, tag = "6")]
    pub(super) template: Option<PodTemplateSpec>,
    #[prost(int32, optional, tag = "7")]
    pub(super) backoff_limit: Option<i32>,
    #[prost(int32, optional, tag = "8")]
    pub(super) ttl_seconds_after_finished: Option<i32>,
    #[prost(string, optional, tag = "9")]
    pub(super) completion_mode: Option<String>,
    #[prost(bool, optional, tag = "10")]
    pub(super) suspend: Option<bool>,
    #[prost(int32, optional, tag = "12")]
    pub(super) backoff_limit_per_index: Option<i32>,
    #[prost(int32, optional, tag = "13")]
    pub(super) max_failed_indexes: Option<i32>,
    #[prost(string, optional, tag = "14")]
    pub(super) pod_replacement_policy: Option<String>,
    #[prost(string, optional, tag = "15")]
    pub(super) managed_by: Option<String>,
}

impl JobSpec {
    pub(super) fn to_json(&self) -> Value {
        let mut f = Fields::default();
        f.ptr_int("parallelism", self.parallelism.map(i64::from));
        f.ptr_int("completions", self.completions.map(i64::from));
        f.ptr_int("activeDeadlineSeconds", self.active_deadline_seconds);
        f.ptr_int("backoffLimit", self.backoff_limit.map(i64::from));
        f.ptr_int(
            "backoffLimitPerIndex",
            self.backoff_limit_per_index.map(i64::from),
        );
        f.ptr_int("maxFailedIndexes", self.max_failed_indexes.map(i64::from));
        f.message("selector", &self.selector, LabelSelector::to_json);
        f.ptr_bool("manualSelector", self.manual_selector);
        f.message("template", &self.template, PodTemplateSpec::to_json);
        f.ptr_int(
            "ttlSecondsAfterFinished",
            self.ttl_seconds_after_finished.map(i64::from),
        );
        f.ptr_string("completionMode", &self.completion_mode);
        f.ptr_bool("suspend", self.suspend);
        f.ptr_string("podReplacementPolicy", &self.pod_replacement_policy);
        f.ptr_string("managedBy", &self.managed_by);
        f.into_json()
    }
}

/// `batch/v1.JobStatus`, without `conditions` and `uncountedTerminatedPods`. `active`,
/// `succeeded`, `failed` and `completedIndexes` are plain values in Go, on the wire even when
/// zero.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct JobStatus {
    #[prost(message, optional, tag = "2")]
    pub(super) start_time: Option<Time>,
    #[prost(message, optional, tag = "3")]
    pub(super) completion_time: Option<Time>,
    #[prost(int32, optional, tag = "4")]
    pub(super) active: Option<i32>,
    #[prost(int32, optional, tag = "5")]
    pub(super) succeeded: Option<i32>,
    #[prost(int32, optional, tag = "6")]
    pub(super) failed: Option<i32>,
    #[prost(string, optional, tag = "7")]
    pub(super) completed_indexes: Option<String>,
    #[prost(int32, optional, tag = "9")]
    pub(super) ready: Option<i32>,
    #[prost(string, optional, tag = "10")]
    pub(super) failed_indexes: Option<String>,
    #[prost(int32, optional, tag = "11")]
    pub(super) terminating: Option<i32>,
}

impl JobStatus {
    pub(super) fn to_json(&self) -> Value {
        let mut f = Fields::default();
        f.time("startTime", &self.start_time);
        f.time("completionTime", &self.completion_time);
        f.int("active", self.active.map(i64::from));
        f.int("succeeded", self.succeeded.map(i64::from));
        f.int("failed", self.failed.map(i64::from));
        f.ptr_int("terminating", self.terminating.map(i64::from));
        f.string("completedIndexes", &self.completed_indexes);
        f.ptr_string("failedIndexes", &self.failed_indexes);
        f.ptr_int("ready", self.ready.map(i64::from));
        f.into_json()
    }
}

/// `batch/v1.CronJob`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct CronJob {
    #[prost(message, optional, tag = "1")]
    pub(super) metadata: Option<ObjectMeta>,
    #[prost(message, optional, tag = "2")]
    pub(super) spec: Option<CronJobSpec>,
    #[prost(message, optional, tag = "3")]
    pub(super) status: Option<CronJobStatus>,
}

impl CronJob {
    pub(super) fn to_json(&self) -> Map<String, Value> {
        let mut f = Fields::with_metadata(&self.metadata);
        f.message("spec", &self.spec, CronJobSpec::to_json);
        f.message("status", &self.status, CronJobStatus::to_json);
        f.0
    }
}

/// `batch/v1.CronJobSpec`. `schedule` has no `omitempty` in Go; `concurrencyPolicy` is a plain
/// string, the rest pointers.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct CronJobSpec {
    #[prost(string, optional, tag = "1")]
    pub(super) schedule: Option<String>,
    #[prost(int64, optional, tag = "2")]
    pub(super) starting_deadline_seconds: Option<i64>,
    #[prost(string, optional, tag = "3")]
    pub(super) concurrency_policy: Option<String>,
    #[prost(bool, optional, tag = "4")]
    pub(super) suspend: Option<bool>,
    #[prost(message, optional, tag = "5")]
    pub(super) job_template: Option<JobTemplateSpec>,
    #[prost(int32, optional, tag = "6")]
    pub(super) successful_jobs_history_limit: Option<i32>,
    #[prost(int32, optional, tag = "7")]
    pub(super) failed_jobs_history_limit: Option<i32>,
    #[prost(string, optional, tag = "8")]
    pub(super) time_zone: Option<String>,
}

impl CronJobSpec {
    pub(super) fn to_json(&self) -> Value {
        let mut f = Fields::default();
        f.required_string("schedule", &self.schedule);
        f.ptr_string("timeZone", &self.time_zone);
        f.ptr_int("startingDeadlineSeconds", self.starting_deadline_seconds);
        f.string("concurrencyPolicy", &self.concurrency_policy);
        f.ptr_bool("suspend", self.suspend);
        f.message("jobTemplate", &self.job_template, JobTemplateSpec::to_json);
        f.ptr_int(
            "successfulJobsHistoryLimit",
            self.successful_jobs_history_limit.map(i64::from),
        );
        f.ptr_int(
            "failedJobsHistoryLimit",
            self.failed_jobs_history_limit.map(i64::from),
        );
        f.into_json()
    }
}

/// `batch/v1.JobTemplateSpec`: a CronJob's `jobTemplate`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct JobTemplateSpec {
    #[prost(message, optional, tag = "1")]
    pub(super) metadata: Option<ObjectMeta>,
    #[prost(message, optional, tag = "2")]
    pub(super) spec: Option<JobSpec>,
}

impl JobTemplateSpec {
    pub(super) fn to_json(&self) -> Value {
        let mut f = Fields::with_metadata(&self.metadata);
        f.message("spec", &self.spec, JobSpec::to_json);
        f.into_json()
    }
}

/// `batch/v1.CronJobStatus`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct CronJobStatus {
    #[prost(message, repeated, tag = "1")]
    pub(super) active: Vec<ObjectReference>,
    #[prost(message, optional, tag = "4")]
    pub(super) last_schedule_time: Option<Time>,
    #[prost(message, optional, tag = "5")]
    pub(super) last_successful_time: Option<Time>,
}

impl CronJobStatus {
    pub(super) fn to_json(&self) -> Value {
        let mut f = Fields::default();
        f.list("active", &self.active, ObjectReference::to_json);
        f.time("lastScheduleTime", &self.last_schedule_time);
        f.time("lastSuccessfulTime", &self.last_successful_time);
        f.into_json()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::core_v1::tests::{go_container, go_pod_spec};
    use super::super::core_v1::{PodSecurityContext, PodSpec};
    use super::super::meta_v1::tests::go_meta;
    use super::super::tests::{body, decode_ok};
    use super::*;

    fn template(restart_policy: &str) -> PodTemplateSpec {
        PodTemplateSpec {
            metadata: Some(go_meta("")),
            spec: Some(PodSpec {
                restart_policy: Some(restart_policy.into()),
                security_context: Some(PodSecurityContext {
                    run_as_user: Some(0),
                    supplemental_groups: vec![1000, 2000],
                    ..Default::default()
                }),
                ..go_pod_spec(vec![go_container("pi", "perl:5.34")])
            }),
        }
    }

    fn template_json(restart_policy: &str) -> Value {
        json!({"metadata": {}, "spec": {
            "containers": [{"name": "pi", "image": "perl:5.34", "resources": {}}],
            "restartPolicy": restart_policy,
            "securityContext": {"runAsUser": 0, "supplementalGroups": [1000, 2000]},
        }})
    }

    #[test]
    fn job_keeps_present_zero_pointers() {
        let job = Job {
            metadata: Some(go_meta("pi")),
            spec: Some(JobSpec {
                parallelism: Some(0),
                completions: Some(1),
                backoff_limit: Some(0),
                manual_selector: Some(true),
                selector: Some(LabelSelector::default()),
                template: Some(template("Never")),
                completion_mode: Some("Indexed".into()),
                suspend: Some(false),
                ..Default::default()
            }),
            status: Some(JobStatus {
                start_time: Some(Time {
                    seconds: Some(1_767_323_045),
                    nanos: Some(0),
                }),
                active: Some(1),
                succeeded: Some(0),
                failed: Some(0),
                completed_indexes: Some(String::new()),
                ready: Some(0),
                ..Default::default()
            }),
        };
        assert_eq!(
            decode_ok(&body("batch/v1", "Job", &job)),
            json!({
                "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "pi"},
                "spec": {"parallelism": 0, "completions": 1, "backoffLimit": 0,
                         "manualSelector": true, "selector": {},
                         "template": template_json("Never"),
                         "completionMode": "Indexed", "suspend": false},
                "status": {"startTime": "2026-01-02T03:04:05Z", "active": 1, "ready": 0},
            })
        );
    }

    #[test]
    fn cron_job_with_every_spec_field() {
        let cron_job = CronJob {
            metadata: Some(go_meta("hello")),
            spec: Some(CronJobSpec {
                schedule: Some("0 * * * *".into()),
                starting_deadline_seconds: Some(0),
                concurrency_policy: Some("Forbid".into()),
                suspend: Some(true),
                job_template: Some(JobTemplateSpec {
                    metadata: Some(go_meta("hello")),
                    spec: Some(JobSpec {
                        template: Some(template("OnFailure")),
                        ttl_seconds_after_finished: Some(100),
                        ..Default::default()
                    }),
                }),
                successful_jobs_history_limit: Some(0),
                failed_jobs_history_limit: Some(1),
                time_zone: Some("Etc/UTC".into()),
            }),
            status: Some(CronJobStatus {
                last_schedule_time: Some(Time {
                    seconds: Some(1_767_323_045),
                    nanos: Some(0),
                }),
                ..Default::default()
            }),
        };
        assert_eq!(
            decode_ok(&body("batch/v1", "CronJob", &cron_job)),
            json!({
                "apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "hello"},
                "spec": {"schedule": "0 * * * *", "timeZone": "Etc/UTC",
                         "startingDeadlineSeconds": 0, "concurrencyPolicy": "Forbid",
                         "suspend": true,
                         "jobTemplate": {"metadata": {"name": "hello"},
                                         "spec": {"template": template_json("OnFailure"),
                                                  "ttlSecondsAfterFinished": 100}},
                         "successfulJobsHistoryLimit": 0, "failedJobsHistoryLimit": 1},
                "status": {"lastScheduleTime": "2026-01-02T03:04:05Z"},
            })
        );
    }
}
