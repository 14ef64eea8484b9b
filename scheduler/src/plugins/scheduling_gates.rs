//! Mirrors kube-scheduler's plugins/schedulinggates/scheduling_gates.go: a pod that still has
//! scheduling gates (`spec.schedulingGates`) stays out of activeQ. Whoever set a gate removes it
//! when the pod may be scheduled (the API server lets a gate be removed, never added); the update
//! brings the pod back to this check, and with no gate left it is queued.

use crate::framework::{Plugin, PodInfo, PreEnqueuePlugin, Status};

pub const NAME: &str = "SchedulingGates";

pub struct SchedulingGates;

impl Plugin for SchedulingGates {
    fn name(&self) -> &'static str {
        NAME
    }
}

impl PreEnqueuePlugin for SchedulingGates {
    fn pre_enqueue(&self, pod: &PodInfo) -> Status {
        let gates: Vec<&str> = pod.pod.spec.iter().flat_map(|s| s.scheduling_gates.iter().flatten()).map(|g| g.name.as_str()).collect();
        if gates.is_empty() {
            return Status::success();
        }
        // Kubernetes prints the list as Go prints a []string.
        Status::unresolvable(format!("waiting for scheduling gates: [{}]", gates.join(" ")))
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Pod;

    use super::*;

    fn pod(gates: &[&str]) -> PodInfo {
        let gates: Vec<String> = gates.iter().map(|g| format!("{{\"name\": \"{g}\"}}")).collect();
        let json = format!("{{\"metadata\": {{\"name\": \"p\", \"uid\": \"u\"}}, \"spec\": {{\"containers\": [], \"schedulingGates\": [{}]}}}}", gates.join(","));
        PodInfo::new(std::sync::Arc::new(serde_json::from_str::<Pod>(&json).expect("test pod")))
    }

    #[test]
    fn a_gated_pod_waits_and_names_its_gates() {
        let s = SchedulingGates.pre_enqueue(&pod(&["example.com/a", "b"]));
        assert!(s.is_rejected());
        assert_eq!(s.message(), "waiting for scheduling gates: [example.com/a b]");
        assert!(SchedulingGates.pre_enqueue(&pod(&[])).is_success());
    }
}
