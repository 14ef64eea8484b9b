//! Mirrors pkg/controller/util/endpoint/trigger_time_tracker.go: the time of the earliest change
//! an Endpoints write carries, for the `endpoints.kubernetes.io/last-change-trigger-time`
//! annotation (from which the network programming latency is measured).
//!
//! A pod's trigger time is its Ready condition's last transition; a Service's is its creation.
//! For each Service the tracker remembers the trigger times it last returned for; a sync gets
//! the earliest of those that moved since ([`TriggerTimeTracker::compute`]), the Service's
//! creation on its first sync, or nothing when no trigger time moved.
//!
//! A std `Mutex`: held for a map operation, never across an `.await`; one Service is synced by
//! one worker at a time (the work queue's promise), so its state is never computed twice at once.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::jiff::Timestamp;

use super::controller_utils::pod_ready_transition;

#[derive(Clone, Default)]
struct ServiceState {
    last_pod_trigger_times: BTreeMap<String, Timestamp>,
    last_service_trigger_time: Option<Timestamp>,
}

#[derive(Default)]
pub struct TriggerTimeTracker {
    states: Mutex<HashMap<String, ServiceState>>,
}

impl TriggerTimeTracker {
    /// ComputeEndpointLastChangeTriggerTime for the Service `key` and the pods it selects.
    pub fn compute(&self, key: &str, svc: &Service, pods: &[&Pod]) -> Option<Timestamp> {
        let known = self.states.lock().unwrap_or_else(|e| e.into_inner()).get(key).cloned();
        let state = known.clone().unwrap_or_default();
        let mut min_changed: Option<Timestamp> = None;
        let mut pod_times = BTreeMap::new();
        for pod in pods {
            let Some(t) = pod_ready_transition(pod) else { continue };
            let name = pod.metadata.name.clone().unwrap_or_default();
            if state.last_pod_trigger_times.get(&name).is_none_or(|last| t > *last) {
                min_changed = Some(min_changed.map_or(t, |m| m.min(t)));
            }
            pod_times.insert(name, t);
        }
        let service_time = svc.metadata.creation_timestamp.as_ref().map(|t| t.0);
        if let Some(t) = service_time
            && state.last_service_trigger_time.is_none_or(|last| t > last)
        {
            min_changed = Some(min_changed.map_or(t, |m| m.min(t)));
        }
        let new_state = ServiceState { last_pod_trigger_times: pod_times, last_service_trigger_time: service_time };
        self.states.lock().unwrap_or_else(|e| e.into_inner()).insert(key.into(), new_state);
        if known.is_none() {
            return service_time;
        }
        min_changed
    }

    /// DeleteService.
    pub fn delete_service(&self, key: &str) {
        self.states.lock().unwrap_or_else(|e| e.into_inner()).remove(key);
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

    use super::*;
    use crate::endpoint::controller_utils::testing::{pod, service};

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_second(secs).unwrap()
    }

    fn ready_at(name: &str, secs: i64) -> Pod {
        let mut p = pod(name, "10.1.0.1", 80, true);
        p.status.as_mut().unwrap().conditions.as_mut().unwrap()[0].last_transition_time = Some(Time(at(secs)));
        p
    }

    #[test]
    fn earliest_change_since_the_last_sync() {
        let t = TriggerTimeTracker::default();
        let mut svc = service(IntOrString::Int(80));
        svc.metadata.creation_timestamp = Some(Time(at(100)));
        let (a, b) = (ready_at("a", 90), ready_at("b", 95));
        // First sync: the Service's creation.
        assert_eq!(t.compute("default/web", &svc, &[&a, &b]), Some(at(100)));
        // Nothing moved.
        assert_eq!(t.compute("default/web", &svc, &[&a, &b]), None);
        // Two pods changed: the earlier one.
        let (a2, b2) = (ready_at("a", 120), ready_at("b", 110));
        assert_eq!(t.compute("default/web", &svc, &[&a2, &b2]), Some(at(110)));
        // A new pod counts as a change.
        let c = ready_at("c", 130);
        assert_eq!(t.compute("default/web", &svc, &[&a2, &b2, &c]), Some(at(130)));
    }
}
