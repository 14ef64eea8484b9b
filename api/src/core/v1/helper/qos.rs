//! Mirrors pkg/apis/core/v1/helper/qos/qos.go: a pod's quality-of-service class.
//!
//! The API server writes it into `status.qosClass` on create; the node agent puts the pod's cgroup
//! where it says (`/kubepods`, `/kubepods/burstable`, `/kubepods/besteffort`), limits the cgroup
//! by it, and evicts BestEffort pods first. Only cpu and memory count; init containers count like
//! app containers.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Pod, ResourceRequirements};

use crate::resource::{effective_requests, limits};

/// The resources QoS is computed from (`isSupportedQoSComputeResource`).
const QOS_RESOURCES: [&str; 2] = ["cpu", "memory"];

/// `v1.PodQOSClass`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PodQOSClass {
    /// Every container has cpu and memory limits, and the pod's requests equal its limits.
    Guaranteed,
    /// Some request or limit, but not Guaranteed.
    Burstable,
    /// No cpu or memory request or limit anywhere.
    BestEffort,
}

impl PodQOSClass {
    /// As `status.qosClass` spells it.
    pub fn as_str(&self) -> &'static str {
        match self {
            PodQOSClass::Guaranteed => "Guaranteed",
            PodQOSClass::Burstable => "Burstable",
            PodQOSClass::BestEffort => "BestEffort",
        }
    }
}

/// The positive cpu and memory requests and limits of a pod, summed, and whether every set of
/// limits added had both.
#[derive(Default)]
struct Sums<'a> {
    requests: BTreeMap<&'a str, i128>,
    limits: BTreeMap<&'a str, i128>,
    every_limit_set: bool,
}

impl<'a> Sums<'a> {
    fn add(&mut self, resources: Option<&'a ResourceRequirements>) {
        for (name, value) in effective_requests(resources) {
            if QOS_RESOURCES.contains(&name) && value > 0 {
                *self.requests.entry(name).or_default() += value;
            }
        }
        let mut found = 0;
        for (name, value) in limits(resources) {
            if QOS_RESOURCES.contains(&name) && value > 0 {
                found += 1;
                *self.limits.entry(name).or_default() += value;
            }
        }
        if found < QOS_RESOURCES.len() {
            self.every_limit_set = false;
        }
    }
}

/// ComputePodQOS:
/// 1. Sum the positive cpu and memory requests and limits: of the pod-level `spec.resources` if
///    the pod sets them (PodLevelResources: they alone decide), else of every container, init
///    containers included. Requests missing beside a limit count as the limit, as defaulting
///    would have made them (see [`effective_requests`]).
/// 2. BestEffort if nothing was summed.
/// 3. Guaranteed if every set of resources summed had positive cpu and memory limits and the
///    summed requests equal the summed limits, resource by resource.
/// 4. Burstable otherwise.
///
/// A quantity that does not parse counts as absent: validation rejects it anyway.
pub fn compute_pod_qos(pod: &Pod) -> PodQOSClass {
    let Some(spec) = pod.spec.as_ref() else { return PodQOSClass::BestEffort };
    // Step 1: the sums.
    let mut sums = Sums { every_limit_set: true, ..Sums::default() };
    match spec.resources.as_ref() {
        Some(pod_level) => sums.add(Some(pod_level)),
        None => {
            for c in spec.containers.iter().chain(spec.init_containers.iter().flatten()) {
                sums.add(c.resources.as_ref());
            }
        }
    }
    // Step 2: nothing requested or limited.
    if sums.requests.is_empty() && sums.limits.is_empty() {
        return PodQOSClass::BestEffort;
    }
    // Step 3: everything limited, and requested exactly that.
    if sums.every_limit_set && sums.requests == sums.limits {
        return PodQOSClass::Guaranteed;
    }
    PodQOSClass::Burstable
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{Container, PodSpec};
    use serde_json::json;

    use super::*;

    fn pod_from(json: serde_json::Value) -> Pod {
        serde_json::from_value(json).expect("test pod is valid")
    }

    fn qos(
        containers: serde_json::Value,
        init: serde_json::Value,
        pod_level: serde_json::Value,
    ) -> &'static str {
        let mut spec = json!({"containers": containers});
        if !init.is_null() {
            spec["initContainers"] = init;
        }
        if !pod_level.is_null() {
            spec["resources"] = pod_level;
        }
        compute_pod_qos(&pod_from(json!({"spec": spec}))).as_str()
    }

    #[test]
    fn compute_pod_qos_table() {
        let c = |resources: serde_json::Value| json!({"name": "c", "resources": resources});
        let full = json!({"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}});
        let null = serde_json::Value::Null;
        // (case, containers, init containers, pod-level resources, class)
        let cases = vec![
            (
                "nothing",
                json!([c(json!({}))]),
                null.clone(),
                null.clone(),
                "BestEffort",
            ),
            (
                "no containers",
                json!([]),
                null.clone(),
                null.clone(),
                "BestEffort",
            ),
            (
                "only other resources",
                json!([c(
                    json!({"limits": {"nvidia.com/gpu": "1"}, "requests": {"nvidia.com/gpu": "1"}})
                )]),
                null.clone(),
                null.clone(),
                "BestEffort",
            ),
            (
                "zero quantities",
                json!([c(json!({"requests": {"cpu": "0", "memory": "0"}}))]),
                null.clone(),
                null.clone(),
                "BestEffort",
            ),
            (
                "requests equal limits",
                json!([c(full.clone())]),
                null.clone(),
                null.clone(),
                "Guaranteed",
            ),
            (
                "equal in different units",
                json!([c(
                    json!({"requests": {"cpu": "1000m", "memory": "1024Mi"}, "limits": {"cpu": "1", "memory": "1Gi"}})
                )]),
                null.clone(),
                null.clone(),
                "Guaranteed",
            ),
            (
                "limits only (requests defaulted from them)",
                json!([c(json!({"limits": {"cpu": "1", "memory": "1Gi"}}))]),
                null.clone(),
                null.clone(),
                "Guaranteed",
            ),
            (
                "requests below limits",
                json!([c(
                    json!({"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}})
                )]),
                null.clone(),
                null.clone(),
                "Burstable",
            ),
            (
                "cpu limit only",
                json!([c(json!({"requests": {"cpu": "1"}, "limits": {"cpu": "1"}}))]),
                null.clone(),
                null.clone(),
                "Burstable",
            ),
            (
                "requests only",
                json!([c(json!({"requests": {"memory": "64Mi"}}))]),
                null.clone(),
                null.clone(),
                "Burstable",
            ),
            (
                "one guaranteed, one empty",
                json!([c(full.clone()), c(json!({}))]),
                null.clone(),
                null.clone(),
                "Burstable",
            ),
            (
                "init container counts",
                json!([c(full.clone())]),
                json!([c(json!({"requests": {"cpu": "100m"}}))]),
                null.clone(),
                "Burstable",
            ),
            (
                "guaranteed init container",
                json!([c(full.clone())]),
                json!([c(full.clone())]),
                null.clone(),
                "Guaranteed",
            ),
            (
                "init makes a best-effort pod burstable",
                json!([c(json!({}))]),
                json!([c(json!({"requests": {"cpu": "1m"}}))]),
                null.clone(),
                "Burstable",
            ),
            (
                "pod level guaranteed",
                json!([c(json!({}))]),
                null.clone(),
                full.clone(),
                "Guaranteed",
            ),
            (
                "pod level requests only",
                json!([c(full.clone())]),
                null.clone(),
                json!({"requests": {"cpu": "1"}}),
                "Burstable",
            ),
            (
                "pod level cpu only",
                json!([c(json!({}))]),
                null.clone(),
                json!({"requests": {"cpu": "1"}, "limits": {"cpu": "1"}}),
                "Burstable",
            ),
            (
                "empty pod-level resources still decide",
                json!([c(full.clone())]),
                null.clone(),
                json!({}),
                "BestEffort",
            ),
            (
                "extended resources do not matter",
                json!([c(
                    json!({"requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"}, "limits": {"cpu": "1", "memory": "1Gi"}})
                )]),
                null.clone(),
                null.clone(),
                "Guaranteed",
            ),
            (
                "unparseable quantity counts as zero",
                json!([c(json!({"requests": {"cpu": "lots"}}))]),
                null.clone(),
                null.clone(),
                "BestEffort",
            ),
        ];
        for (case, containers, init, pod_level, want) in cases {
            assert_eq!(qos(containers, init, pod_level), want, "{case}");
        }
        assert_eq!(compute_pod_qos(&Pod::default()), PodQOSClass::BestEffort);
    }

    /// A container from `("cpu", "100m")`-style requests and limits.
    fn container(requests: &[(&str, &str)], limits: &[(&str, &str)]) -> Container {
        let list = |l: &[(&str, &str)]| l.iter().map(|(k, v)| (k.to_string(), json!(v))).collect::<serde_json::Map<_, _>>();
        let resources = json!({"requests": list(requests), "limits": list(limits)});
        serde_json::from_value(json!({"name": "c", "resources": resources})).expect("test container is valid")
    }

    fn pod(containers: Vec<Container>, init: Vec<Container>) -> Pod {
        let init_containers = (!init.is_empty()).then_some(init);
        Pod { spec: Some(PodSpec { containers, init_containers, ..PodSpec::default() }), ..Pod::default() }
    }

    #[test]
    fn qos_table() {
        use PodQOSClass::*;
        let full = [("cpu", "100m"), ("memory", "100Mi")];
        let cases: Vec<(&str, Pod, PodQOSClass)> = vec![
            ("no resources", pod(vec![container(&[], &[])], vec![]), BestEffort),
            (
                "only other resources",
                pod(vec![container(&[("ephemeral-storage", "1Gi")], &[("nvidia.com/gpu", "1")])], vec![]),
                BestEffort,
            ),
            ("zero requests", pod(vec![container(&[("cpu", "0")], &[])], vec![]), BestEffort),
            ("requests = limits", pod(vec![container(&full, &full)], vec![]), Guaranteed),
            ("limits only (requests defaulted)", pod(vec![container(&[], &full)], vec![]), Guaranteed),
            (
                "same value, other spelling",
                pod(vec![container(&[("cpu", "0.1"), ("memory", "100Mi")], &full)], vec![]),
                Guaranteed,
            ),
            (
                "request below limit",
                pod(vec![container(&[("cpu", "50m"), ("memory", "100Mi")], &full)], vec![]),
                Burstable,
            ),
            ("cpu limit only", pod(vec![container(&[], &[("cpu", "1")])], vec![]), Burstable),
            ("request only", pod(vec![container(&[("memory", "1Gi")], &[])], vec![]), Burstable),
            (
                "one container without limits",
                pod(vec![container(&full, &full), container(&[], &[])], vec![]),
                Burstable,
            ),
            ("init container without limits", pod(vec![container(&full, &full)], vec![container(&[], &[])]), Burstable),
            (
                "init container guaranteed too",
                pod(vec![container(&full, &full)], vec![container(&[], &full)]),
                Guaranteed,
            ),
            (
                "best-effort app, burstable init",
                pod(vec![container(&[], &[])], vec![container(&[("cpu", "1")], &[])]),
                Burstable,
            ),
            (
                "extra resources do not matter",
                pod(
                    vec![container(
                        &[("cpu", "1"), ("memory", "1Gi"), ("ephemeral-storage", "1Gi")],
                        &[("cpu", "1"), ("memory", "1Gi")],
                    )],
                    vec![],
                ),
                Guaranteed,
            ),
        ];
        for (name, pod, want) in cases {
            assert_eq!(compute_pod_qos(&pod), want, "{name}");
        }
        assert_eq!(PodQOSClass::Burstable.as_str(), "Burstable");
        assert_eq!(PodQOSClass::BestEffort.as_str(), "BestEffort");
        assert_eq!(PodQOSClass::Guaranteed.as_str(), "Guaranteed");
    }
}
