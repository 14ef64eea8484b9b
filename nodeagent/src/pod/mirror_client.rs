//! Mirrors kubelet's pod/mirror_client.go: the mirror pods of static pods (which pods are static
//! or mirrors is the `api` crate's [`api::pod::kubelet_types`]).
//!
//! A static pod comes from a manifest file or URL, so the API server does not know it. To make it
//! visible (`kubectl get pods`) the node agent creates a *mirror pod*: a copy carrying the
//! `kubernetes.io/config.mirror` annotation with the static pod's hash and owned by the Node. The
//! mirror is for show: deleting it does not stop the static pod (the agent recreates it), and
//! when the manifest changes the static pod gets a new UID and hash, so the agent deletes the
//! stale mirror (by UID, so that it never deletes a newer one by mistake) and creates a new one.

use api::pod::kubelet_types::{CONFIG_HASH_ANNOTATION_KEY, CONFIG_MIRROR_ANNOTATION_KEY};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{Api, DeleteParams, PostParams, Preconditions};

use tracing::Instrument as _;

use crate::error::{Error, Result};

fn annotation<'a>(pod: &'a Pod, key: &str) -> Option<&'a str> {
    pod.metadata.annotations.as_ref()?.get(key).map(String::as_str)
}

/// The static pod's hash (`kubernetes.io/config.hash`, which the pod sources set to its UID).
pub(crate) fn static_pod_hash(pod: &Pod) -> Option<&str> {
    annotation(pod, CONFIG_HASH_ANNOTATION_KEY)
}

/// The hash of the static pod a mirror pod was made from (`kubernetes.io/config.mirror`).
pub(crate) fn mirror_pod_hash(pod: &Pod) -> Option<&str> {
    annotation(pod, CONFIG_MIRROR_ANNOTATION_KEY)
}

/// Whether `mirror_pod` is an up-to-date mirror of `static_pod` (kubelet's IsMirrorPodOf): same
/// name and namespace, and made from the same hash.
pub(crate) fn mirror_matches(static_pod: &Pod, mirror_pod: &Pod) -> bool {
    if static_pod.metadata.name != mirror_pod.metadata.name || static_pod.metadata.namespace != mirror_pod.metadata.namespace {
        return false;
    }
    match (static_pod_hash(static_pod), mirror_pod_hash(mirror_pod)) {
        (Some(s), Some(m)) => s == m,
        _ => false,
    }
}

/// The object a mirror of `static_pod` is created from: its metadata (name, namespace, labels,
/// annotations plus the mirror hash) and spec, owned by the node, without what the API server
/// assigns (uid, resourceVersion, creationTimestamp) and without status (the status manager
/// writes that through `pods/status`).
pub(crate) fn mirror_pod_for(static_pod: &Pod, node: &Node) -> Result<Pod> {
    let hash = static_pod_hash(static_pod)
        .ok_or_else(|| Error::Invalid(format!("static pod {} has no {CONFIG_HASH_ANNOTATION_KEY} annotation", key(static_pod))))?;
    let mut annotations = static_pod.metadata.annotations.clone().unwrap_or_default();
    annotations.insert(CONFIG_MIRROR_ANNOTATION_KEY.to_string(), hash.to_string());
    let owner = OwnerReference {
        api_version: "v1".to_string(),
        kind: "Node".to_string(),
        name: node.metadata.name.clone().unwrap_or_default(),
        uid: node.metadata.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: None,
    };
    Ok(Pod {
        metadata: ObjectMeta {
            name: static_pod.metadata.name.clone(),
            namespace: static_pod.metadata.namespace.clone(),
            labels: static_pod.metadata.labels.clone(),
            annotations: Some(annotations),
            owner_references: Some(vec![owner]),
            ..ObjectMeta::default()
        },
        spec: static_pod.spec.clone(),
        status: None,
    })
}

fn key(pod: &Pod) -> String {
    format!("{}/{}", pod.metadata.namespace.as_deref().unwrap_or(""), pod.metadata.name.as_deref().unwrap_or(""))
}

/// Creates the mirror of `static_pod` (mirror_client.go CreateMirrorPod) and returns it. If a pod
/// of that name already exists and is a mirror of the same hash, that one is returned: an
/// earlier attempt (or an earlier run of the agent) already made it. Any other pod of that name
/// is an error: the caller deletes a stale mirror first.
pub(crate) async fn create_mirror_pod(client: &kube::Client, static_pod: &Pod, node: &Node) -> Result<Pod> {
    let mirror = mirror_pod_for(static_pod, node)?;
    let namespace = mirror.metadata.namespace.as_deref().unwrap_or("default");
    let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    // A step of the static pod (`kubelab trace` follows a mirror pod to it by its hash).
    let span = tracing::info_span!(target: "kubelet::mirror", "create mirror pod", pod_uid = static_pod_hash(static_pod).unwrap_or_default());
    match api.create(&PostParams::default(), &mirror).instrument(span).await {
        Ok(created) => {
            tracing::info!(target: "kubelet::mirror", pod = %key(&mirror), uid = created.metadata.uid.as_deref().unwrap_or(""), "created mirror pod");
            Ok(created)
        }
        Err(kube::Error::Api(s)) if s.code == 409 => {
            let name = mirror.metadata.name.as_deref().unwrap_or("");
            let existing = api.get(name).await?;
            if mirror_pod_hash(&existing).is_some() && mirror_pod_hash(&existing) == static_pod_hash(static_pod) {
                Ok(existing)
            } else {
                Err(Error::Kube(kube::Error::Api(s)))
            }
        }
        Err(e) => Err(e.into()),
    }
}

/// Deletes a mirror pod at once (grace period 0: the static pod itself is what runs, so there is
/// nothing to wait for), only if it still has `uid` when one is given — the name may already
/// belong to a newer mirror. A mirror already gone, or replaced (the UID precondition failed),
/// is not an error.
pub(crate) async fn delete_mirror_pod(client: &kube::Client, namespace: &str, name: &str, uid: Option<&str>) -> Result<()> {
    let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let params = DeleteParams {
        grace_period_seconds: Some(0),
        preconditions: uid.map(|u| Preconditions { uid: Some(u.to_string()), resource_version: None }),
        ..DeleteParams::default()
    };
    match api.delete(name, &params).await {
        Ok(_) => {
            tracing::info!(target: "kubelet::mirror", pod = %format!("{namespace}/{name}"), uid = uid.unwrap_or(""), "deleted mirror pod");
            Ok(())
        }
        Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => {
            tracing::debug!(target: "kubelet::mirror", pod = %format!("{namespace}/{name}"), code = s.code, "mirror pod already gone or replaced");
            Ok(())
        }
        Err(e) => Err(e.into()),
    }
}

/// The annotations every static pod carries, for tests elsewhere in the crate.
#[cfg(test)]
pub(crate) fn static_annotations(source: &str, hash: &str) -> std::collections::BTreeMap<String, String> {
    std::collections::BTreeMap::from([
        (api::pod::kubelet_types::CONFIG_SOURCE_ANNOTATION_KEY.to_string(), source.to_string()),
        (CONFIG_HASH_ANNOTATION_KEY.to_string(), hash.to_string()),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use api::pod::{is_mirror_pod, is_static_pod};
    use serde_json::json;

    fn static_pod(hash: &str) -> Pod {
        let mut p: Pod = serde_json::from_value(json!({
            "metadata": {"name": "web-n1", "namespace": "default", "uid": hash, "resourceVersion": "7",
                "labels": {"app": "web"}},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "i"}]},
            "status": {"phase": "Running"},
        }))
        .expect("pod");
        p.metadata.annotations = Some(static_annotations("file", hash));
        p
    }

    fn node() -> Node {
        serde_json::from_value(json!({"metadata": {"name": "n1", "uid": "node-uid"}})).expect("node")
    }

    #[test]
    fn sources() {
        let p = static_pod("abc");
        assert!(is_static_pod(&p));
        assert!(!is_mirror_pod(&p));
        let mut api = p.clone();
        api.metadata.annotations = Some(static_annotations("api", "abc"));
        assert!(!is_static_pod(&api));
        let mut unknown = p.clone();
        unknown.metadata.annotations = None;
        assert!(!is_static_pod(&unknown));
        assert_eq!(static_pod_hash(&p), Some("abc"));
    }

    #[test]
    fn mirror_object() {
        let m = mirror_pod_for(&static_pod("abc"), &node()).expect("mirror");
        assert!(is_mirror_pod(&m));
        assert_eq!(mirror_pod_hash(&m), Some("abc"));
        assert_eq!(m.metadata.uid, None);
        assert_eq!(m.metadata.resource_version, None);
        assert!(m.status.is_none());
        assert_eq!(m.metadata.labels.as_ref().and_then(|l| l.get("app")).map(String::as_str), Some("web"));
        let owner = &m.metadata.owner_references.as_ref().expect("owner")[0];
        assert_eq!((owner.kind.as_str(), owner.name.as_str(), owner.uid.as_str(), owner.controller), ("Node", "n1", "node-uid", Some(true)));
        assert!(mirror_matches(&static_pod("abc"), &m));
        assert!(!mirror_matches(&static_pod("def"), &m), "an edited manifest makes the mirror stale");
        let mut renamed = m.clone();
        renamed.metadata.name = Some("other".into());
        assert!(!mirror_matches(&static_pod("abc"), &renamed));
        assert!(!mirror_matches(&static_pod("abc"), &static_pod("abc")), "a pod without the mirror annotation is no mirror");

        let mut no_hash = static_pod("abc");
        no_hash.metadata.annotations = None;
        assert!(mirror_pod_for(&no_hash, &node()).is_err());
    }
}
