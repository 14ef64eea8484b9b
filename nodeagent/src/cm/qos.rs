//! Mirrors pkg/apis/core/v1/helper/qos/qos.go: a pod's quality-of-service class.
//!
//! The class decides where the pod's cgroup goes (`/kubepods`, `/kubepods/burstable`,
//! `/kubepods/besteffort`), how its cgroup is limited, and which pods the kubelet evicts first.
//! Only cpu and memory count; init containers count like app containers.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

/// The resources QoS is computed from (`isSupportedQoSComputeResource`).
const QOS_RESOURCES: [&str; 2] = ["cpu", "memory"];

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QosClass {
    /// Every container has cpu and memory limits, and the pod's requests equal its limits.
    Guaranteed,
    /// Some request or limit, but not Guaranteed.
    Burstable,
    /// No cpu or memory request or limit anywhere.
    BestEffort,
}

impl QosClass {
    /// As `status.qosClass` spells it.
    pub fn as_str(&self) -> &'static str {
        match self {
            QosClass::Guaranteed => "Guaranteed",
            QosClass::Burstable => "Burstable",
            QosClass::BestEffort => "BestEffort",
        }
    }
}

/// A container's requests as the API server stores them after defaulting: a resource with a limit
/// but no request gets the limit as its request. Applied here too, because a pod from a manifest
/// file or a test may not have been defaulted. Quantities that do not parse are left out (the API
/// server validates them).
pub(crate) fn effective_requests(c: &Container) -> BTreeMap<&str, i128> {
    let resources = c.resources.as_ref();
    let mut out = parsed(resources.and_then(|r| r.limits.as_ref()));
    out.extend(parsed(resources.and_then(|r| r.requests.as_ref())));
    out
}

/// A container's limits, parsed (nano-units).
pub(crate) fn limits(c: &Container) -> BTreeMap<&str, i128> {
    parsed(c.resources.as_ref().and_then(|r| r.limits.as_ref()))
}

/// A resource list, parsed (nano-units); unparseable quantities left out.
pub(crate) fn parsed(list: Option<&BTreeMap<String, Quantity>>) -> BTreeMap<&str, i128> {
    list.into_iter()
        .flatten()
        .filter_map(|(name, q)| Some((name.as_str(), apimachinery::resource::parse_quantity_nanos(&q.0)?)))
        .collect()
}

/// ComputePodQOS: sums the positive cpu and memory requests and limits over all containers (init
/// containers included). BestEffort if there are none; Guaranteed if every container has positive
/// cpu and memory limits and the summed requests equal the summed limits, resource by resource;
/// Burstable otherwise. (Pod-level `spec.resources` is not considered.)
pub fn pod_qos(pod: &Pod) -> QosClass {
    let Some(spec) = pod.spec.as_ref() else { return QosClass::BestEffort };
    let mut requests: BTreeMap<&str, i128> = BTreeMap::new();
    let mut limit_sums: BTreeMap<&str, i128> = BTreeMap::new();
    let mut guaranteed = true;
    for c in spec.containers.iter().chain(spec.init_containers.iter().flatten()) {
        for (name, value) in effective_requests(c) {
            if QOS_RESOURCES.contains(&name) && value > 0 {
                *requests.entry(name).or_default() += value;
            }
        }
        let mut found = 0;
        for (name, value) in limits(c) {
            if QOS_RESOURCES.contains(&name) && value > 0 {
                found += 1;
                *limit_sums.entry(name).or_default() += value;
            }
        }
        if found < QOS_RESOURCES.len() {
            guaranteed = false;
        }
    }
    if requests.is_empty() && limit_sums.is_empty() {
        return QosClass::BestEffort;
    }
    if guaranteed && requests == limit_sums {
        return QosClass::Guaranteed;
    }
    QosClass::Burstable
}

#[cfg(test)]
pub(crate) mod tests {
    use k8s_openapi::api::core::v1::{PodSpec, ResourceRequirements};

    use super::*;

    /// A container from `("cpu", "100m")`-style requests and limits.
    pub(crate) fn container(requests: &[(&str, &str)], limits: &[(&str, &str)]) -> Container {
        let list = |l: &[(&str, &str)]| {
            (!l.is_empty()).then(|| l.iter().map(|(k, v)| (k.to_string(), Quantity(v.to_string()))).collect())
        };
        Container {
            name: "c".into(),
            resources: Some(ResourceRequirements {
                requests: list(requests),
                limits: list(limits),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    pub(crate) fn pod(containers: Vec<Container>, init: Vec<Container>) -> Pod {
        Pod {
            spec: Some(PodSpec {
                containers,
                init_containers: (!init.is_empty()).then_some(init),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn qos_table() {
        use QosClass::*;
        let full = [("cpu", "100m"), ("memory", "100Mi")];
        let cases: Vec<(&str, Pod, QosClass)> = vec![
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
            assert_eq!(pod_qos(&pod), want, "{name}");
        }
        assert_eq!(QosClass::Burstable.as_str(), "Burstable");
        assert_eq!(QosClass::BestEffort.as_str(), "BestEffort");
        assert_eq!(QosClass::Guaranteed.as_str(), "Guaranteed");
    }
}
