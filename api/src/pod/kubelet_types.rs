//! Mirrors pkg/kubelet/types/pod_update.go: where a pod came from (the API server, a manifest
//! file, a URL), which pods are static or mirrors of static pods, and which are critical.
//!
//! The node agent stamps every pod with its source; a static pod's mirror in the API server
//! carries the static pod's hash. The API server reads the mirror annotation too: the
//! ServiceAccount admission plugin leaves mirror pods alone.

use k8s_openapi::api::core::v1::Pod;

use super::util::pod_priority;
use crate::core::v1::well_known::MIRROR_POD_ANNOTATION_KEY;
use crate::scheduling::SYSTEM_CRITICAL_PRIORITY;

/// Where the pod came from: one of the sources below.
pub const CONFIG_SOURCE_ANNOTATION_KEY: &str = "kubernetes.io/config.source";
/// On a mirror pod: the hash of the static pod it mirrors.
pub const CONFIG_MIRROR_ANNOTATION_KEY: &str = MIRROR_POD_ANNOTATION_KEY;
/// When the node agent first saw the pod.
pub const CONFIG_FIRST_SEEN_ANNOTATION_KEY: &str = "kubernetes.io/config.seen";
/// The static pod's hash: its UID, which the pod sources derive from the manifest.
pub const CONFIG_HASH_ANNOTATION_KEY: &str = "kubernetes.io/config.hash";

/// The pod sources (`FileSource`, `HTTPSource`, `ApiserverSource`).
pub const FILE_SOURCE: &str = "file";
pub const HTTP_SOURCE: &str = "http";
pub const APISERVER_SOURCE: &str = "api";

fn annotation<'a>(pod: &'a Pod, key: &str) -> Option<&'a str> {
    pod.metadata.annotations.as_ref()?.get(key).map(String::as_str)
}

/// IsStaticPod: the pod came from a file or URL rather than the API server. A pod without a
/// `config.source` annotation has no known source and is not static.
pub fn is_static_pod(pod: &Pod) -> bool {
    annotation(pod, CONFIG_SOURCE_ANNOTATION_KEY).is_some_and(|s| s != APISERVER_SOURCE)
}

/// IsMirrorPod: the pod is the API server's copy of some node's static pod.
pub fn is_mirror_pod(pod: &Pod) -> bool {
    annotation(pod, CONFIG_MIRROR_ANNOTATION_KEY).is_some()
}

/// IsCriticalPodBasedOnPriority: at or above `system-cluster-critical`.
pub fn is_critical_pod_based_on_priority(priority: i32) -> bool {
    priority >= SYSTEM_CRITICAL_PRIORITY
}

/// IsCriticalPod: static, mirror, or of system-critical priority. The node agent always admits
/// such a pod and never evicts it.
pub fn is_critical_pod(pod: &Pod) -> bool {
    is_static_pod(pod) || is_mirror_pod(pod) || is_critical_pod_based_on_priority(pod_priority(pod))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod(annotations: serde_json::Value, priority: Option<i32>) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": "p", "annotations": annotations}, "spec": {"containers": [], "priority": priority}}))
            .expect("test pod is valid")
    }

    #[test]
    fn sources_mirrors_and_critical_pods() {
        // (case, annotations, priority, static, mirror, critical)
        let cases = [
            ("from a file", json!({"kubernetes.io/config.source": "file"}), None, true, false, true),
            ("from a URL", json!({"kubernetes.io/config.source": "http"}), None, true, false, true),
            ("from the API server", json!({"kubernetes.io/config.source": "api"}), None, false, false, false),
            ("no source", json!(null), None, false, false, false),
            ("a mirror", json!({"kubernetes.io/config.mirror": "abc"}), None, false, true, true),
            ("cluster-critical", json!(null), Some(2_000_000_000), false, false, true),
            ("node-critical", json!(null), Some(2_000_001_000), false, false, true),
            ("just below", json!(null), Some(1_999_999_999), false, false, false),
        ];
        for (case, annotations, priority, is_static, is_mirror, is_critical) in cases {
            let p = pod(annotations, priority);
            assert_eq!(is_static_pod(&p), is_static, "{case}");
            assert_eq!(is_mirror_pod(&p), is_mirror, "{case}");
            assert_eq!(is_critical_pod(&p), is_critical, "{case}");
        }
    }
}
