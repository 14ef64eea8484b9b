//! Mirrors pkg/controller/deployment/progress.go and sync.go's calculateStatus: a Deployment's
//! status from its ReplicaSets, and its two conditions — Available (enough pods available) and
//! Progressing (the rollout moves, finished, or stalled past `progressDeadlineSeconds`).

use k8s_openapi::api::apps::v1::{Deployment, DeploymentCondition, DeploymentStatus, ReplicaSet};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

use super::util::{max_unavailable, replicas};

/// The Progressing condition's reasons (deployment_util.go).
pub const NEW_RS_AVAILABLE: &str = "NewReplicaSetAvailable";
pub const RS_UPDATED: &str = "ReplicaSetUpdated";
pub const TIMED_OUT: &str = "ProgressDeadlineExceeded";
pub const NEW_RS_CREATED: &str = "NewReplicaSetCreated";
pub const FOUND_NEW_RS: &str = "FoundNewReplicaSet";
pub const PAUSED: &str = "DeploymentPaused";
pub const RESUMED: &str = "DeploymentResumed";

fn rs_status(rs: &ReplicaSet) -> (i32, i32, i32) {
    let s = rs.status.clone().unwrap_or_default();
    (s.replicas, s.ready_replicas.unwrap_or(0), s.available_replicas.unwrap_or(0))
}

pub fn condition<'a>(status: &'a DeploymentStatus, type_: &str) -> Option<&'a DeploymentCondition> {
    status.conditions.iter().flatten().find(|c| c.type_.as_deref() == Some(type_))
}

/// SetDeploymentCondition: replaces the condition of that type; the transition time stays
/// when the status does not change, and so does everything when only the update time would.
pub fn set_condition(status: &mut DeploymentStatus, type_: &str, value: &str, reason: &str, message: String, now: Timestamp) {
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    let mut new = DeploymentCondition {
        type_: Some(type_.into()),
        status: Some(value.into()),
        reason: Some(reason.into()),
        message: Some(message),
        last_update_time: Some(Time(now)),
        last_transition_time: Some(Time(now)),
    };
    if let Some(i) = conditions.iter().position(|c| c.type_.as_deref() == Some(type_)) {
        let old = &conditions[i];
        if old.status == new.status && old.reason == new.reason && old.message == new.message {
            return;
        }
        if old.status == new.status {
            new.last_transition_time = old.last_transition_time.clone();
        }
        conditions[i] = new;
    } else {
        conditions.push(new);
    }
}

/// calculateStatus: counts over every ReplicaSet, the new one's pods as updated, and the
/// Available condition.
pub fn calculate_status(d: &Deployment, all: &[&ReplicaSet], new_rs: Option<&ReplicaSet>, now: Timestamp) -> DeploymentStatus {
    let mut status = d.status.clone().unwrap_or_default();
    let (total, ready, available) = all.iter().map(|rs| rs_status(rs)).fold((0, 0, 0), |a, b| (a.0 + b.0, a.1 + b.1, a.2 + b.2));
    status.observed_generation = d.metadata.generation;
    status.replicas = Some(total);
    status.updated_replicas = Some(new_rs.map_or(0, |rs| rs_status(rs).0));
    status.ready_replicas = Some(ready);
    status.available_replicas = Some(available);
    status.unavailable_replicas = Some((replicas(d) - available).max(0));
    if available >= replicas(d) - max_unavailable(d) {
        set_condition(&mut status, "Available", "True", "MinimumReplicasAvailable", "Deployment has minimum availability.".into(), now);
    } else {
        set_condition(&mut status, "Available", "False", "MinimumReplicasUnavailable", "Deployment does not have minimum availability.".into(), now);
    }
    status
}

/// DeploymentComplete: every replica updated and available, none of the old ones left.
pub fn deployment_complete(d: &Deployment, status: &DeploymentStatus) -> bool {
    let want = replicas(d);
    status.updated_replicas == Some(want)
        && status.replicas == Some(want)
        && status.available_replicas == Some(want)
        && status.observed_generation >= d.metadata.generation
}

/// DeploymentProgressing: the new pods grew or the old ones shrank since `old`.
pub fn deployment_progressing(old: &DeploymentStatus, new: &DeploymentStatus) -> bool {
    let old_old = old.replicas.unwrap_or(0) - old.updated_replicas.unwrap_or(0);
    let new_old = new.replicas.unwrap_or(0) - new.updated_replicas.unwrap_or(0);
    new.updated_replicas > old.updated_replicas || new_old < old_old || new.ready_replicas > old.ready_replicas || new.available_replicas > old.available_replicas
}

/// The progress deadline, when set (`progressDeadlineSeconds` ≠ MaxInt32).
pub fn progress_deadline(d: &Deployment) -> Option<i64> {
    d.spec.progress_deadline_seconds.filter(|s| *s != i32::MAX).map(i64::from)
}

/// DeploymentTimedOut: the last progress is older than the deadline.
pub fn timed_out(d: &Deployment, status: &DeploymentStatus, now: Timestamp) -> bool {
    let (Some(deadline), Some(c)) = (progress_deadline(d), condition(status, "Progressing")) else { return false };
    if c.reason.as_deref() == Some(TIMED_OUT) {
        return true;
    }
    c.last_update_time.as_ref().is_some_and(|t| t.0.checked_add(SignedDuration::from_secs(deadline)).is_ok_and(|at| at < now))
}

/// syncRolloutStatus's decision: the Progressing condition after this sync, given the status
/// before it (`old`) and the status computed now (`status`, changed in place).
pub fn update_progressing(d: &Deployment, old: &DeploymentStatus, status: &mut DeploymentStatus, new_rs: Option<&ReplicaSet>, now: Timestamp) {
    if progress_deadline(d).is_none() {
        return;
    }
    let cur = condition(status, "Progressing").cloned();
    let name = new_rs.and_then(|rs| rs.metadata.name.clone()).unwrap_or_default();
    let complete = deployment_complete(d, status);
    if cur.as_ref().is_some_and(|c| c.reason.as_deref() == Some(TIMED_OUT)) && !complete {
        return; // a timed-out rollout stays so until it progresses to the end or changes
    }
    if complete && new_rs.is_some() {
        set_condition(status, "Progressing", "True", NEW_RS_AVAILABLE, format!("ReplicaSet \"{name}\" has successfully progressed."), now);
    } else if deployment_progressing(old, status) {
        // Still progressing: a new update time, the transition time kept.
        let message = format!("ReplicaSet \"{name}\" is progressing.");
        let conditions = status.conditions.get_or_insert_with(Vec::new);
        let transition = cur.as_ref().filter(|c| c.status.as_deref() == Some("True")).and_then(|c| c.last_transition_time.clone()).unwrap_or(Time(now));
        conditions.retain(|c| c.type_.as_deref() != Some("Progressing"));
        conditions.push(DeploymentCondition {
            type_: Some("Progressing".into()),
            status: Some("True".into()),
            reason: Some(RS_UPDATED.into()),
            message: Some(message),
            last_update_time: Some(Time(now)),
            last_transition_time: Some(transition),
        });
    } else if timed_out(d, status, now) {
        set_condition(status, "Progressing", "False", TIMED_OUT, format!("ReplicaSet \"{name}\" has timed out progressing."), now);
    }
}

/// When to look again for a timeout: the time left until the deadline of a rollout that is
/// progressing and not complete.
pub fn requeue_for_deadline(d: &Deployment, status: &DeploymentStatus, now: Timestamp) -> Option<std::time::Duration> {
    let deadline = progress_deadline(d)?;
    if deployment_complete(d, status) {
        return None;
    }
    let c = condition(status, "Progressing")?;
    if c.reason.as_deref() == Some(TIMED_OUT) {
        return None;
    }
    let at = c.last_update_time.as_ref()?.0.checked_add(SignedDuration::from_secs(deadline)).ok()?;
    let left = std::time::Duration::try_from(at.duration_since(now)).unwrap_or_default();
    Some(left + std::time::Duration::from_secs(1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn d(replicas: i32, generation: i64, deadline: i32) -> Deployment {
        serde_json::from_value(json!({"metadata": {"name": "web", "generation": generation}, "spec": {"replicas": replicas, "progressDeadlineSeconds": deadline,
            "selector": {"matchLabels": {"app": "web"}}, "strategy": {"type": "RollingUpdate"}, "template": {"metadata": {"labels": {"app": "web"}}}}}))
        .expect("deployment")
    }

    fn rs(name: &str, status: Value) -> ReplicaSet {
        serde_json::from_value(json!({"metadata": {"name": name}, "spec": {"selector": {}}, "status": status})).expect("rs")
    }

    #[test]
    fn status_and_availability() {
        let now: Timestamp = "2026-12-03T00:00:00Z".parse().expect("time");
        let dep = d(4, 2, 600);
        let old = rs("old", json!({"replicas": 2, "readyReplicas": 2, "availableReplicas": 2}));
        let new = rs("new", json!({"replicas": 2, "readyReplicas": 1, "availableReplicas": 1}));
        let s = calculate_status(&dep, &[&old, &new], Some(&new), now);
        assert_eq!((s.replicas, s.updated_replicas, s.ready_replicas, s.available_replicas, s.unavailable_replicas, s.observed_generation), (Some(4), Some(2), Some(3), Some(3), Some(1), Some(2)));
        // 4 replicas, 25 %: one may be unavailable; 3 available is enough.
        assert_eq!(condition(&s, "Available").and_then(|c| c.reason.as_deref()), Some("MinimumReplicasAvailable"));
        let low = rs("new", json!({"replicas": 2, "readyReplicas": 0, "availableReplicas": 0}));
        let s = calculate_status(&dep, &[&old, &low], Some(&low), now);
        assert_eq!(condition(&s, "Available").and_then(|c| c.status.as_deref()), Some("False"));
        assert!(!deployment_complete(&dep, &s));
        let done = rs("new", json!({"replicas": 4, "readyReplicas": 4, "availableReplicas": 4}));
        assert!(deployment_complete(&dep, &calculate_status(&dep, &[&done], Some(&done), now)));
    }

    #[test]
    fn progressing_then_complete_or_timed_out() {
        let t0: Timestamp = "2026-12-03T00:00:00Z".parse().expect("time");
        let dep = d(2, 1, 10);
        let new = rs("web-abc", json!({"replicas": 1, "readyReplicas": 0, "availableReplicas": 0}));
        let before = DeploymentStatus::default();
        let mut s = calculate_status(&dep, &[&new], Some(&new), t0);
        update_progressing(&dep, &before, &mut s, Some(&new), t0);
        let c = condition(&s, "Progressing").expect("progressing");
        assert_eq!((c.reason.as_deref(), c.message.as_deref()), (Some(RS_UPDATED), Some("ReplicaSet \"web-abc\" is progressing.")));
        assert_eq!(requeue_for_deadline(&dep, &s, t0), Some(std::time::Duration::from_secs(11)));
        // Nothing moves for 11 s: timed out.
        let t1: Timestamp = "2026-12-03T00:00:11Z".parse().expect("time");
        let mut stalled = s.clone();
        update_progressing(&dep, &s, &mut stalled, Some(&new), t1);
        let c = condition(&stalled, "Progressing").expect("progressing");
        assert_eq!((c.status.as_deref(), c.reason.as_deref()), (Some("False"), Some(TIMED_OUT)));
        assert_eq!(c.message.as_deref(), Some("ReplicaSet \"web-abc\" has timed out progressing."));
        // Complete: NewReplicaSetAvailable.
        let done = rs("web-abc", json!({"replicas": 2, "readyReplicas": 2, "availableReplicas": 2}));
        let mut fin = calculate_status(&dep, &[&done], Some(&done), t1);
        update_progressing(&dep, &stalled, &mut fin, Some(&done), t1);
        let c = condition(&fin, "Progressing").expect("progressing");
        assert_eq!((c.status.as_deref(), c.reason.as_deref()), (Some("True"), Some(NEW_RS_AVAILABLE)));
        assert_eq!(requeue_for_deadline(&dep, &fin, t1), None);
    }
}
