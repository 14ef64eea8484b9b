//! Mirrors pkg/registry/core/pod/strategy.go: defaulting (the `api` crate's SetDefaults_Pod),
//! PrepareForCreate (the status a new pod starts with), validation (the `api` crate's
//! ValidatePodCreate and ValidatePodUpdate), field selectors, and the grace period of a delete.
//! Pods are what `kubelab trace` follows.
//!
//! What `kubectl get pod -o yaml` shows that the user never wrote comes from three places, in
//! this order on create:
//!
//! 1. Defaulting ([`PodStrategy`]'s `set_defaults`: [`api::core::v1::defaults::set_defaults_pod`]):
//!    restartPolicy, dnsPolicy, probe timings, imagePullPolicy, volume modes…
//! 2. Mutating admission ([`crate::admission`]): ServiceAccount (`serviceAccountName: default`),
//!    Priority (`priority: 0`) and DefaultTolerationSeconds (the two 300-second NoExecute
//!    tolerations).
//! 3. PrepareForCreate ([`prepare_for_create`]): the client's status is replaced by
//!    `{phase: Pending, qosClass: …}` ([`api::core::v1::helper::qos::compute_pod_qos`]).
//!
//! Only the API server runs steps 2 and 3: the node agent defaults a static pod (step 1) and
//! leaves the rest to the API server, which does it to the mirror pod.

use api::core::v1::defaults::set_defaults_pod;
use api::core::v1::helper::qos::compute_pod_qos;
use k8s_openapi::api::core::v1::{Pod, PodCondition, PodStatus};
use serde_json::Value;

use super::printer::PodPrinter;
use crate::error::Cause;
use crate::registry::generic::strategy::{ResourceInfo, Strategy, Subresource, causes, meta_field};
use crate::registry::generic::typed::{Object, Typed};

pub static PODS: ResourceInfo = ResourceInfo {
    group: "",
    version: "v1",
    kind: "Pod",
    plural: "pods",
    singular: "pod",
    namespaced: true,
    short_names: &["po"],
    storage_name: "pods",
    subresources: &[
        Subresource { name: "status", group: "", version: "v1", kind: "Pod", verbs: &["get", "patch", "update"] },
        Subresource { name: "binding", group: "", version: "v1", kind: "Binding", verbs: &["create"] },
        Subresource { name: "eviction", group: "policy", version: "v1", kind: "Eviction", verbs: &["create"] },
        Subresource { name: "log", group: "", version: "v1", kind: "Pod", verbs: &["get"] },
        Subresource { name: "exec", group: "", version: "v1", kind: "PodExecOptions", verbs: &["create", "get"] },
        Subresource { name: "attach", group: "", version: "v1", kind: "PodAttachOptions", verbs: &["create", "get"] },
        Subresource { name: "portforward", group: "", version: "v1", kind: "PodPortForwardOptions", verbs: &["create", "get"] },
        Subresource { name: "proxy", group: "", version: "v1", kind: "PodProxyOptions", verbs: &PROXY_VERBS },
    ],
    categories: &["all"],
    codec: &Typed::<Pod>::NEW,
    printer: &PodPrinter,
};

/// The verbs of a proxy subresource (any method is passed on).
pub const PROXY_VERBS: [&str; 5] = ["create", "delete", "get", "patch", "update"];

pub struct PodStrategy;

impl Strategy for PodStrategy {
    fn info(&self) -> &'static ResourceInfo {
        &PODS
    }

    /// SetDefaults_Pod, SetDefaults_PodSpec and the per-type functions.
    fn set_defaults(&self, obj: &mut Object) {
        if let Some(pod) = obj.typed_mut::<Pod>() {
            set_defaults_pod(pod);
        }
    }

    fn prepare_for_create(&self, obj: &mut Object) {
        if let Some(pod) = obj.typed_mut::<Pod>() {
            prepare_for_create(pod);
        }
    }

    fn validate(&self, obj: &Value) -> Vec<Cause> {
        causes(api::core::validation::validate_pod_create(obj))
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<Cause> {
        causes(api::core::validation::validate_pod_update(new, old))
    }

    fn field(&self, obj: &Value, field: &str) -> Option<String> {
        let s = |p: &str| Some(obj.pointer(p).and_then(Value::as_str).unwrap_or("").to_string());
        match field {
            "spec.nodeName" => s("/spec/nodeName"),
            "spec.restartPolicy" => s("/spec/restartPolicy"),
            "spec.schedulerName" => s("/spec/schedulerName"),
            "spec.serviceAccountName" => s("/spec/serviceAccountName"),
            "spec.hostNetwork" => Some(obj.pointer("/spec/hostNetwork").and_then(Value::as_bool).unwrap_or(false).to_string()),
            "status.phase" => s("/status/phase"),
            "status.podIP" => s("/status/podIP"),
            "status.nominatedNodeName" => s("/status/nominatedNodeName"),
            f => meta_field(obj, f),
        }
    }

    fn supported_fields(&self) -> &'static [&'static str] {
        &[
            "metadata.name", "metadata.namespace", "spec.nodeName", "spec.restartPolicy", "spec.schedulerName",
            "spec.serviceAccountName", "spec.hostNetwork", "status.phase", "status.podIP", "status.nominatedNodeName",
        ]
    }

    /// Pods are what `kubelab trace` follows.
    fn traced(&self) -> bool {
        true
    }

    fn return_deleted_object(&self) -> bool {
        true
    }

    /// The grace period of a pod delete: as requested, else the pod's own, and 0 for a pod that
    /// never ran (unscheduled) or has finished.
    fn grace_period(&self, obj: &Value, requested: Option<i64>) -> Option<i64> {
        let unscheduled = obj.pointer("/spec/nodeName").and_then(Value::as_str).is_none_or(str::is_empty);
        let finished = api::pod::is_pod_phase_terminal(obj.pointer("/status/phase").and_then(Value::as_str));
        if unscheduled || finished {
            return Some(0);
        }
        let g = requested.or_else(|| obj.pointer("/spec/terminationGracePeriodSeconds").and_then(Value::as_i64)).unwrap_or(30);
        Some(if g < 0 { 1 } else { g })
    }
}

/// Every container of the pod by name — app, init and ephemeral containers — as the subresources
/// that name one (log, exec, attach) accept it (`podutil.VisitContainers`).
pub fn container_names(pod: &Value) -> Vec<String> {
    ["/spec/containers", "/spec/initContainers", "/spec/ephemeralContainers"]
        .iter()
        .flat_map(|p| pod.pointer(p).and_then(Value::as_array).cloned().unwrap_or_default())
        .filter_map(|c| c.get("name").and_then(Value::as_str).map(String::from))
        .collect()
}

/// PrepareForCreate: status is the kubelet's to write, so whatever the client sent is replaced by
/// `{phase: Pending, qosClass}`, and a pod with scheduling gates is marked SchedulingGated.
pub fn prepare_for_create(pod: &mut Pod) {
    let gated = pod.spec.as_ref().and_then(|s| s.scheduling_gates.as_ref()).is_some_and(|g| !g.is_empty());
    let mut status = PodStatus {
        phase: Some("Pending".to_string()),
        qos_class: Some(compute_pod_qos(pod).as_str().to_string()),
        ..PodStatus::default()
    };
    if gated {
        status.conditions = Some(vec![PodCondition {
            type_: "PodScheduled".to_string(),
            status: "False".to_string(),
            reason: Some("SchedulingGated".to_string()),
            message: Some("Scheduling is blocked due to non-empty scheduling gates".to_string()),
            ..PodCondition::default()
        }]);
    }
    pod.status = Some(status);
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn grace_period_follows_the_registry() {
        let mut p = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": "default"},
                           "spec": {"containers": [{"name": "c", "image": "busybox"}]}});
        assert_eq!(PodStrategy.grace_period(&p, None), Some(0), "unscheduled pods go at once");
        p["spec"]["nodeName"] = json!("n1");
        assert_eq!(PodStrategy.grace_period(&p, None), Some(30));
        p["spec"]["terminationGracePeriodSeconds"] = json!(5);
        assert_eq!(PodStrategy.grace_period(&p, None), Some(5));
        assert_eq!(PodStrategy.grace_period(&p, Some(0)), Some(0));
        p["status"] = json!({"phase": "Succeeded"});
        assert_eq!(PodStrategy.grace_period(&p, Some(10)), Some(0));
    }
}
