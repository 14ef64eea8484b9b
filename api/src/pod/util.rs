//! Mirrors pkg/api/v1/pod/util.go (with kubecontainer's GetPodFullName and component-helpers'
//! PodPriority): the questions every component asks of a pod, answered once.
//!
//! Each reads a field the API may leave unset and answers as an unset field means: no UID is
//! `""`, no restart policy is `Always`, no phase is not terminal, no priority is 0.

use k8s_openapi::api::core::v1::{Container, Pod};

/// The pod's UID, `""` if it has none yet. The UID is the key every component files a pod under
/// and the correlation key of its logs.
pub fn uid(pod: &Pod) -> &str {
    pod.metadata.uid.as_deref().unwrap_or_default()
}

/// `<namespace>/<name>`, as kubelet's logs name a pod (`klog.KObj`); kubelet's GetPodFullName
/// keys its own maps by `<name>_<namespace>`, the same pair in another spelling.
pub fn full_name(pod: &Pod) -> String {
    format!("{}/{}", pod.metadata.namespace.as_deref().unwrap_or_default(), pod.metadata.name.as_deref().unwrap_or_default())
}

/// IsPodReady: the pod's `Ready` condition is `True` (what the endpoints, the workload
/// controllers and disruption budgets count).
pub fn is_pod_ready(pod: &Pod) -> bool {
    pod.status.as_ref().and_then(|s| s.conditions.as_ref()).is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// `spec.restartPolicy`, `Always` when unset (the default).
pub fn restart_policy(pod: &Pod) -> &str {
    pod.spec.as_ref().and_then(|s| s.restart_policy.as_deref()).unwrap_or("Always")
}

/// `spec.initContainers`, in the order they run.
pub fn init_containers(pod: &Pod) -> &[Container] {
    pod.spec.as_ref().and_then(|s| s.init_containers.as_deref()).unwrap_or_default()
}

/// `spec.containers`.
pub fn app_containers(pod: &Pod) -> &[Container] {
    pod.spec.as_ref().map(|s| s.containers.as_slice()).unwrap_or_default()
}

/// IsRestartableInitContainer: an init container with `restartPolicy: Always` is a sidecar — it
/// keeps running beside the app containers instead of finishing before them.
pub fn is_restartable_init_container(c: &Container) -> bool {
    c.restart_policy.as_deref() == Some("Always")
}

/// IsPodPhaseTerminal: Succeeded and Failed are final; a pod never leaves them.
pub fn is_pod_phase_terminal(phase: Option<&str>) -> bool {
    matches!(phase, Some("Succeeded" | "Failed"))
}

/// IsPodTerminal: the pod's phase is Succeeded or Failed.
pub fn is_pod_terminal(pod: &Pod) -> bool {
    is_pod_phase_terminal(pod.status.as_ref().and_then(|s| s.phase.as_deref()))
}

/// PodPriority: `spec.priority`, 0 when unset (a pod the Priority admission has not seen).
pub fn pod_priority(pod: &Pod) -> i32 {
    pod.spec.as_ref().and_then(|s| s.priority).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod(json: serde_json::Value) -> Pod {
        serde_json::from_value(json).expect("test pod is valid")
    }

    #[test]
    fn unset_fields_read_as_their_defaults() {
        let bare = Pod::default();
        assert_eq!(uid(&bare), "");
        assert_eq!(full_name(&bare), "/");
        assert_eq!(restart_policy(&bare), "Always");
        assert!(init_containers(&bare).is_empty());
        assert!(app_containers(&bare).is_empty());
        assert!(!is_pod_terminal(&bare));
        assert_eq!(pod_priority(&bare), 0);
    }

    #[test]
    fn set_fields_are_read() {
        let p = pod(json!({
            "metadata": {"name": "web", "namespace": "team", "uid": "u1"},
            "spec": {"restartPolicy": "OnFailure", "priority": 7,
                     "initContainers": [{"name": "i1"}, {"name": "i2"}], "containers": [{"name": "app"}]},
            "status": {"phase": "Running"}}));
        assert_eq!(uid(&p), "u1");
        assert_eq!(full_name(&p), "team/web");
        assert_eq!(restart_policy(&p), "OnFailure");
        let names = |cs: &[Container]| cs.iter().map(|c| c.name.clone()).collect::<Vec<_>>();
        assert_eq!(names(init_containers(&p)), ["i1", "i2"]);
        assert_eq!(names(app_containers(&p)), ["app"]);
        assert!(!is_restartable_init_container(&init_containers(&p)[0]));
        assert!(!is_pod_terminal(&p));
        assert_eq!(pod_priority(&p), 7);
    }

    #[test]
    fn sidecars_are_init_containers_that_restart_always() {
        let p = pod(json!({"spec": {"initContainers": [
            {"name": "sidecar", "restartPolicy": "Always"}, {"name": "plain"}], "containers": [{"name": "app"}]}}));
        let sidecar: Vec<bool> = init_containers(&p).iter().map(is_restartable_init_container).collect();
        assert_eq!(sidecar, [true, false]);
    }

    #[test]
    fn terminal_phases() {
        for (phase, terminal) in
            [(None, false), (Some(""), false), (Some("Pending"), false), (Some("Running"), false), (Some("Unknown"), false), (Some("Succeeded"), true), (Some("Failed"), true)]
        {
            assert_eq!(is_pod_phase_terminal(phase), terminal, "{phase:?}");
            assert_eq!(is_pod_terminal(&pod(json!({"status": {"phase": phase}}))), terminal, "{phase:?}");
        }
    }
}
