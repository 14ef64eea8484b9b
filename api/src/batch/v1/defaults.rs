//! Mirrors pkg/apis/batch/v1/defaults.go: the `SetDefaults_*` functions of Jobs and CronJobs.
//!
//! A Job left bare runs one pod to one success, retrying a failed pod up to six times; a CronJob
//! left bare lets runs overlap and keeps three successful Jobs and one failed. Set fields are
//! left alone. The pod template inside (a CronJob's inside its jobTemplate) is defaulted as a
//! pod's spec ([`set_defaults_pod_template_spec`]).

use k8s_openapi::api::batch::v1::{CronJob, Job, JobSpec};

use crate::core::v1::defaults::set_defaults_pod_template_spec;

/// How often a Job retries a failed pod before it fails, when it does not say.
pub const DEFAULT_BACKOFF_LIMIT: i32 = 6;

/// SetDefaults_Job: one completion at a time (both unset → both 1; completions alone → one pod
/// at a time), a backoff limit (unlimited across indexes when each index has its own), the
/// NonIndexed completion mode, not suspended, and replacement pods made once the old one is
/// terminating or failed (only once failed when a pod failure policy must see the old pod's
/// end). A Job without labels takes its template's, so `kubectl get -l` finds it by them.
pub fn set_defaults_job(job: &mut Job) {
    let spec = job.spec.get_or_insert_with(JobSpec::default);
    if spec.completions.is_none() && spec.parallelism.is_none() {
        spec.completions = Some(1);
    }
    spec.parallelism.get_or_insert(1);
    let backoff = if spec.backoff_limit_per_index.is_some() { i32::MAX } else { DEFAULT_BACKOFF_LIMIT };
    spec.backoff_limit.get_or_insert(backoff);
    if let Some(labels) = spec.template.metadata.as_ref().and_then(|m| m.labels.as_ref())
        && job.metadata.labels.as_ref().is_none_or(|l| l.is_empty())
    {
        job.metadata.labels = Some(labels.clone());
    }
    spec.completion_mode.get_or_insert_with(|| "NonIndexed".to_string());
    spec.suspend.get_or_insert(false);
    if let Some(policy) = spec.pod_failure_policy.as_mut() {
        for pattern in policy.rules.iter_mut().flat_map(|r| r.on_pod_conditions.iter_mut().flatten()) {
            if pattern.status.as_deref().is_none_or(str::is_empty) {
                pattern.status = Some("True".to_string());
            }
        }
    }
    let replacement = if spec.pod_failure_policy.is_some() { "Failed" } else { "TerminatingOrFailed" };
    spec.pod_replacement_policy.get_or_insert_with(|| replacement.to_string());
    set_defaults_pod_template_spec(&mut spec.template);
}

/// SetDefaults_CronJob: runs may overlap (Allow), not suspended, three successful and one
/// failed Job kept. The job template's own fields are left to [`set_defaults_job`] when the
/// controller creates each Job; only its pod template is defaulted here.
pub fn set_defaults_cron_job(cj: &mut CronJob) {
    let spec = &mut cj.spec;
    if spec.concurrency_policy.as_deref().is_none_or(str::is_empty) {
        spec.concurrency_policy = Some("Allow".to_string());
    }
    spec.suspend.get_or_insert(false);
    spec.successful_jobs_history_limit.get_or_insert(3);
    spec.failed_jobs_history_limit.get_or_insert(1);
    if let Some(job_spec) = spec.job_template.spec.as_mut() {
        set_defaults_pod_template_spec(&mut job_spec.template);
    }
}


#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn job(spec: Value) -> Value {
        let mut j: Job = serde_json::from_value(json!({"metadata": {"name": "pi"}, "spec": spec})).expect("test job");
        set_defaults_job(&mut j);
        serde_json::to_value(&j).expect("serializes")
    }

    fn template() -> Value {
        json!({"metadata": {"labels": {"app": "pi"}}, "spec": {"restartPolicy": "Never", "containers": [{"name": "pi", "image": "perl:5.34"}]}})
    }

    #[test]
    fn job_defaults() {
        let j = job(json!({"template": template()}));
        let spec = &j["spec"];
        assert_eq!(spec["completions"], json!(1));
        assert_eq!(spec["parallelism"], json!(1));
        assert_eq!(spec["backoffLimit"], json!(6));
        assert_eq!(spec["completionMode"], json!("NonIndexed"));
        assert_eq!(spec["suspend"], json!(false));
        assert_eq!(spec["podReplacementPolicy"], json!("TerminatingOrFailed"));
        assert!(spec.get("manualSelector").is_none() && spec.get("selector").is_none());
        assert_eq!(spec["template"]["spec"]["restartPolicy"], json!("Never"));
        assert_eq!(spec["template"]["spec"]["dnsPolicy"], json!("ClusterFirst"));
        assert_eq!(j["metadata"]["labels"], json!({"app": "pi"}));
    }

    #[test]
    fn job_defaults_follow_what_is_set() {
        // Completions alone: one pod at a time, completions kept.
        let spec = job(json!({"completions": 5, "template": {}}))["spec"].clone();
        assert_eq!((spec["completions"].clone(), spec["parallelism"].clone()), (json!(5), json!(1)));
        // Parallelism alone: completions stay unset (a work queue).
        let spec = job(json!({"parallelism": 3, "template": {}}))["spec"].clone();
        assert_eq!((spec.get("completions"), spec["parallelism"].clone()), (None, json!(3)));

        let spec = job(json!({"backoffLimitPerIndex": 1, "completionMode": "Indexed", "completions": 3, "template": {}}))["spec"].clone();
        assert_eq!(spec["backoffLimit"], json!(i32::MAX));
        assert_eq!(spec["completionMode"], json!("Indexed"));

        let policy = json!({"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]});
        let spec = job(json!({"podFailurePolicy": policy, "template": {}}))["spec"].clone();
        assert_eq!(spec["podReplacementPolicy"], json!("Failed"));
        assert_eq!(spec["podFailurePolicy"]["rules"][0]["onPodConditions"][0]["status"], json!("True"));

        let spec = job(json!({"backoffLimit": 0, "suspend": true, "podReplacementPolicy": "Failed", "manualSelector": true, "template": {}}))["spec"].clone();
        assert_eq!(spec["backoffLimit"], json!(0));
        assert_eq!(spec["suspend"], json!(true));
        assert_eq!(spec["podReplacementPolicy"], json!("Failed"));
        assert_eq!(spec["manualSelector"], json!(true));

        // The Job's own labels win over its template's.
        let mut j: Job = serde_json::from_value(json!({"metadata": {"labels": {"team": "a"}}, "spec": {"template": template()}})).expect("test job");
        set_defaults_job(&mut j);
        assert_eq!(serde_json::to_value(&j.metadata.labels).expect("serializes"), json!({"team": "a"}));
    }

    #[test]
    fn cron_job_defaults() {
        let mut cj: CronJob = serde_json::from_value(json!({"metadata": {"name": "tick"}, "spec": {
            "schedule": "*/5 * * * *", "jobTemplate": {"spec": {"template": template()}}}}))
        .expect("test cronjob");
        set_defaults_cron_job(&mut cj);
        let spec = serde_json::to_value(&cj).expect("serializes")["spec"].clone();
        assert_eq!(spec["concurrencyPolicy"], json!("Allow"));
        assert_eq!(spec["suspend"], json!(false));
        assert_eq!(spec["successfulJobsHistoryLimit"], json!(3));
        assert_eq!(spec["failedJobsHistoryLimit"], json!(1));
        assert!(spec.get("startingDeadlineSeconds").is_none() && spec.get("timeZone").is_none());
        let job_spec = &spec["jobTemplate"]["spec"];
        assert_eq!(job_spec["template"]["spec"]["schedulerName"], json!("default-scheduler"));
        assert!(job_spec.get("backoffLimit").is_none(), "the Job's own defaults come when it is created");

        let mut set: CronJob = serde_json::from_value(json!({"metadata": {}, "spec": {
            "schedule": "@daily", "concurrencyPolicy": "Forbid", "suspend": true,
            "successfulJobsHistoryLimit": 0, "failedJobsHistoryLimit": 0, "jobTemplate": {}}}))
        .expect("test cronjob");
        set_defaults_cron_job(&mut set);
        let spec = serde_json::to_value(&set).expect("serializes")["spec"].clone();
        assert_eq!(spec["concurrencyPolicy"], json!("Forbid"));
        assert_eq!(spec["suspend"], json!(true));
        assert_eq!((spec["successfulJobsHistoryLimit"].clone(), spec["failedJobsHistoryLimit"].clone()), (json!(0), json!(0)));
    }
}
