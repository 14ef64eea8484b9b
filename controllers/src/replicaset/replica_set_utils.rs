//! Mirrors pkg/controller/replicaset/replica_set_utils.go: a ReplicaSet's status from the pods it
//! owns, and its `ReplicaFailure` condition.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{ReplicaSet, ReplicaSetCondition, ReplicaSetStatus};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

use crate::controller_utils::has_all_labels;

/// A sync's failure to create or delete pods, as the condition reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ManageFailure {
    Create(String),
    Delete(String),
}

/// IsPodAvailable: Ready for at least `min_ready_seconds` (by the Ready condition's transition
/// time) at `now`.
pub fn is_pod_available(pod: &Pod, min_ready_seconds: i32, now: Timestamp) -> bool {
    if !api::pod::is_pod_ready(pod) {
        return false;
    }
    if min_ready_seconds <= 0 {
        return true;
    }
    let since = pod
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
        .and_then(|c| c.last_transition_time.as_ref())
        .map(|t| t.0);
    since.is_some_and(|t| t.checked_add(SignedDuration::from_secs(i64::from(min_ready_seconds))).is_ok_and(|at| at <= now))
}

/// How long until the first Ready-but-not-yet-available pod becomes available (the sync is
/// queued again then).
pub fn next_available_in(pods: &[std::sync::Arc<Pod>], min_ready_seconds: i32, now: Timestamp) -> Option<Duration> {
    if min_ready_seconds <= 0 {
        return None;
    }
    pods.iter()
        .filter(|p| api::pod::is_pod_ready(p) && !is_pod_available(p, min_ready_seconds, now))
        .filter_map(|p| {
            let since = p.status.as_ref()?.conditions.as_ref()?.iter().find(|c| c.type_ == "Ready")?.last_transition_time.as_ref()?.0;
            let at = since.checked_add(SignedDuration::from_secs(i64::from(min_ready_seconds))).ok()?;
            Duration::try_from(at.duration_since(now)).ok()
        })
        .min()
}

/// calculateStatus: counts of the ReplicaSet's active pods, the generation seen, and the
/// `ReplicaFailure` condition set while creating or deleting fails, removed once it works.
pub fn calculate_status(rs: &ReplicaSet, pods: &[std::sync::Arc<Pod>], failure: Option<&ManageFailure>, now: Timestamp) -> ReplicaSetStatus {
    let spec = rs.spec.clone();
    let min_ready = spec.min_ready_seconds.unwrap_or(0);
    let template_labels: BTreeMap<String, String> = spec.template.as_ref().and_then(|t| t.metadata.as_ref()).and_then(|m| m.labels.clone()).unwrap_or_default();
    let count = |f: &dyn Fn(&Pod) -> bool| pods.iter().filter(|p| f(p)).count() as i32;
    let mut status = rs.status.clone().unwrap_or_default();
    status.replicas = pods.len() as i32;
    status.fully_labeled_replicas = Some(count(&|p| has_all_labels(p, &template_labels)));
    status.ready_replicas = Some(count(&|p| api::pod::is_pod_ready(p)));
    status.available_replicas = Some(count(&|p| is_pod_available(p, min_ready, now)));
    status.observed_generation = rs.metadata.generation;
    let mut conditions: Vec<ReplicaSetCondition> = status.conditions.take().unwrap_or_default();
    match failure {
        Some(f) => {
            let (reason, message) = match f {
                ManageFailure::Create(m) => ("FailedCreate", m),
                ManageFailure::Delete(m) => ("FailedDelete", m),
            };
            if !conditions.iter().any(|c| c.type_.as_deref() == Some("ReplicaFailure")) {
                conditions.push(ReplicaSetCondition {
                    type_: Some("ReplicaFailure".into()),
                    status: Some("True".into()),
                    reason: Some(reason.into()),
                    message: Some(message.clone()),
                    last_transition_time: Some(Time(now)),
                });
            }
        }
        None => conditions.retain(|c| c.type_.as_deref() != Some("ReplicaFailure")),
    }
    status.conditions = if conditions.is_empty() { None } else { Some(conditions) };
    status
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};
    use std::sync::Arc;

    fn pod(labels: Value, ready_since: Option<&str>) -> Arc<Pod> {
        let mut v = json!({"metadata": {"name": "p", "labels": labels}, "status": {"phase": "Running"}});
        if let Some(t) = ready_since {
            v["status"]["conditions"] = json!([{"type": "Ready", "status": "True", "lastTransitionTime": t}]);
        }
        Arc::new(serde_json::from_value(v).expect("pod"))
    }

    fn rs(min_ready: i32) -> ReplicaSet {
        serde_json::from_value(json!({"metadata": {"name": "web", "generation": 3},
            "spec": {"replicas": 3, "minReadySeconds": min_ready, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web", "tier": "front"}}}}})).expect("rs")
    }

    #[test]
    fn status_counts_labeled_ready_and_available_pods() {
        let now: Timestamp = "2026-12-03T00:01:00Z".parse().expect("time");
        let pods = vec![
            pod(json!({"app": "web", "tier": "front"}), Some("2026-12-03T00:00:00Z")), // ready 60 s
            pod(json!({"app": "web", "tier": "front"}), Some("2026-12-03T00:00:50Z")), // ready 10 s
            pod(json!({"app": "web"}), None),                                          // not fully labeled, not ready
        ];
        let s = calculate_status(&rs(30), &pods, None, now);
        assert_eq!((s.replicas, s.fully_labeled_replicas, s.ready_replicas, s.available_replicas, s.observed_generation), (3, Some(2), Some(2), Some(1), Some(3)));
        assert_eq!(next_available_in(&pods, 30, now), Some(Duration::from_secs(20)));
        let s0 = calculate_status(&rs(0), &pods, None, now);
        assert_eq!(s0.available_replicas, Some(2));
        assert_eq!(next_available_in(&pods, 0, now), None);
    }

    #[test]
    fn replica_failure_comes_and_goes() {
        let now: Timestamp = "2026-12-03T00:01:00Z".parse().expect("time");
        let mut r = rs(0);
        let failed = calculate_status(&r, &[], Some(&ManageFailure::Create("pods \"web-\" is forbidden".into())), now);
        let c = &failed.conditions.as_ref().expect("conditions")[0];
        assert_eq!((c.type_.as_deref(), c.status.as_deref(), c.reason.as_deref()), (Some("ReplicaFailure"), Some("True"), Some("FailedCreate")));
        r.status = Some(failed);
        let later: Timestamp = "2026-12-03T00:02:00Z".parse().expect("time");
        let still = calculate_status(&r, &[], Some(&ManageFailure::Create("again".into())), later);
        assert_eq!(still.conditions.as_ref().expect("c")[0].last_transition_time, Some(Time(now)), "kept, not re-stamped");
        r.status = Some(still);
        assert_eq!(calculate_status(&r, &[], None, later).conditions, None);
    }
}
