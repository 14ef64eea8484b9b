//! Mirrors kubelet's kuberuntime/labels.go: what the agent writes on every sandbox and container
//! so that it can rebuild the pod from the runtime alone — after its own restart, for instance.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::{Container, Pod};

use crate::container::*;

/// Labels of a pod's sandbox: who the pod is, plus the pod's own labels.
pub(crate) fn new_pod_labels(pod: &Pod) -> HashMap<String, String> {
    let mut labels: HashMap<String, String> =
        pod.metadata.labels.clone().unwrap_or_default().into_iter().collect();
    labels.insert(POD_NAME_LABEL.into(), pod.metadata.name.clone().unwrap_or_default());
    labels.insert(POD_NAMESPACE_LABEL.into(), pod.metadata.namespace.clone().unwrap_or_default());
    labels.insert(POD_UID_LABEL.into(), pod.metadata.uid.clone().unwrap_or_default());
    labels
}

/// Labels of a container: its pod and its name in the spec.
pub(crate) fn new_container_labels(container: &Container, pod: &Pod) -> HashMap<String, String> {
    HashMap::from([
        (POD_NAME_LABEL.into(), pod.metadata.name.clone().unwrap_or_default()),
        (POD_NAMESPACE_LABEL.into(), pod.metadata.namespace.clone().unwrap_or_default()),
        (POD_UID_LABEL.into(), pod.metadata.uid.clone().unwrap_or_default()),
        (CONTAINER_NAME_LABEL.into(), container.name.clone()),
    ])
}

/// Annotations of a container: the spec hash (a changed spec restarts the container), the
/// restart count, and the pod's grace period (so a restarted agent can stop it correctly).
pub(crate) fn new_container_annotations(container: &Container, pod: &Pod, restart_count: u32) -> HashMap<String, String> {
    let mut a = HashMap::from([
        (CONTAINER_HASH_ANNOTATION.into(), format!("{:x}", hash_container(container))),
        (CONTAINER_RESTART_COUNT_ANNOTATION.into(), restart_count.to_string()),
    ]);
    if let Some(g) = pod.spec.as_ref().and_then(|s| s.termination_grace_period_seconds) {
        a.insert(POD_DELETION_GRACE_PERIOD_ANNOTATION.into(), g.to_string());
    }
    a
}

/// A stable hash of a container's spec (kubelet's HashContainer). FNV-1a over the JSON form:
/// stable across agent builds and restarts, unlike std's randomly seeded hasher.
pub(crate) fn hash_container(container: &Container) -> u64 {
    let bytes = serde_json::to_vec(container).unwrap_or_default();
    fnv1a(&bytes)
}

pub(crate) fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// The spec hash a container was created with, from its annotations.
pub(crate) fn container_hash(annotations: &HashMap<String, String>) -> u64 {
    annotations.get(CONTAINER_HASH_ANNOTATION).and_then(|h| u64::from_str_radix(h, 16).ok()).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_is_stable_and_follows_the_spec() {
        let mut c = Container { name: "app".into(), image: Some("busybox".into()), ..Default::default() };
        let h = hash_container(&c);
        assert_eq!(h, hash_container(&c.clone()));
        let ann = new_container_annotations(&c, &Pod::default(), 0);
        assert_eq!(container_hash(&ann), h);
        c.image = Some("busybox:1.36".into());
        assert_ne!(h, hash_container(&c));
    }
}
