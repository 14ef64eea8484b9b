//! Mirrors the HostInterface of kubelet's server/server.go: what the node agent's HTTP handlers
//! need from the rest of the agent ([`Provider`]), and how they find a container — the pod among
//! the agent's pods, the container in its spec, its instances in the runtime. The log handler
//! ([`super::server`]), the exec/attach handlers ([`super::exec`]) and port-forward
//! ([`super::portforward`]) all stand on it; none imports another's helpers.

use std::collections::HashMap;

use actix_web::HttpResponse;
use actix_web::http::StatusCode;
use k8s_cri::v1 as api;
use k8s_openapi::api::core::v1::Pod;

use crate::container::{CONTAINER_NAME_LABEL, POD_NAME_LABEL, POD_NAMESPACE_LABEL, POD_UID_LABEL};
use crate::cri::RemoteRuntime;

/// What the server needs from the rest of the agent (kubelet's `HostInterface`, cut down).
pub(crate) trait Provider: Send + Sync + 'static {
    /// The pods the agent runs (static pods included).
    fn pods(&self) -> Vec<Pod>;
    fn runtime(&self) -> RemoteRuntime;
    /// `Err(reason)` makes `/healthz` answer 500 with the reason.
    fn healthz(&self) -> Result<(), String>;
}

/// A plain-text answer, as kubelet writes its errors.
pub(super) fn text(status: StatusCode, body: String) -> HttpResponse {
    HttpResponse::build(status).content_type("text/plain; charset=utf-8").body(body)
}

/// Steps 1 and 2 of every container request: the pod among the pods the agent runs (404 if it runs
/// no such pod), and the container among its spec's (400 otherwise, in the API server's words).
/// The error is the answer to send: built once, on a request that ends with it.
#[allow(clippy::result_large_err)]
pub(super) fn find_pod_container(provider: &dyn Provider, namespace: &str, pod_name: &str, container: &str) -> Result<Pod, HttpResponse> {
    let pod = find_pod(provider, namespace, pod_name)?;
    if !container_names(&pod).any(|n| n == container) {
        return Err(text(StatusCode::BAD_REQUEST, format!("container {container:?} is not valid for pod {pod_name:?}")));
    }
    Ok(pod)
}

/// Step 1 alone (port-forward names no container): the pod among the agent's pods, or 404.
#[allow(clippy::result_large_err)]
pub(super) fn find_pod(provider: &dyn Provider, namespace: &str, pod_name: &str) -> Result<Pod, HttpResponse> {
    provider
        .pods()
        .into_iter()
        .find(|p| p.metadata.name.as_deref() == Some(pod_name) && p.metadata.namespace.as_deref().unwrap_or("default") == namespace)
        .ok_or_else(|| text(StatusCode::NOT_FOUND, format!("pod {pod_name:?} not found")))
}

/// The agent's labels that find a container's instances in the runtime; with the pod's UID, so
/// that a deleted pod's leftovers under the same name never match.
pub(super) fn container_selector(pod: &Pod, namespace: &str, pod_name: &str, container: &str) -> HashMap<String, String> {
    let mut selector = HashMap::from([
        (POD_NAMESPACE_LABEL.to_string(), namespace.to_string()),
        (POD_NAME_LABEL.to_string(), pod_name.to_string()),
        (CONTAINER_NAME_LABEL.to_string(), container.to_string()),
    ]);
    if let Some(uid) = pod.metadata.uid.as_ref() {
        selector.insert(POD_UID_LABEL.to_string(), uid.clone());
    }
    selector
}

/// The names a pod's spec gives its containers (init and ephemeral ones have logs too).
pub(super) fn container_names(pod: &Pod) -> impl Iterator<Item = &str> {
    let spec = pod.spec.as_ref();
    let app = spec.into_iter().flat_map(|s| s.containers.iter().map(|c| c.name.as_str()));
    let init = spec.into_iter().flat_map(|s| s.init_containers.iter().flatten().map(|c| c.name.as_str()));
    let ephemeral = spec.into_iter().flat_map(|s| s.ephemeral_containers.iter().flatten().map(|c| c.name.as_str()));
    app.chain(init).chain(ephemeral)
}

/// Step 3's decision: the newest instance of a container (highest restart attempt, then latest
/// creation), or with `previous` the one before it.
pub(super) fn select_instance(mut instances: Vec<api::Container>, previous: bool) -> Option<api::Container> {
    let key = |c: &api::Container| (c.metadata.as_ref().map_or(0, |m| m.attempt), c.created_at);
    instances.sort_by_key(|c| std::cmp::Reverse(key(c)));
    instances.into_iter().nth(usize::from(previous))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_the_newest_instance_or_the_previous_one() {
        let c = |id: &str, attempt: u32, created_at: i64| api::Container {
            id: id.into(),
            metadata: Some(api::ContainerMetadata { name: "app".into(), attempt }),
            created_at,
            ..Default::default()
        };
        let ids = |v: Option<api::Container>| v.map(|c| c.id);
        let list = vec![c("a0", 0, 10), c("a2", 2, 30), c("a1", 1, 20)];
        assert_eq!(ids(select_instance(list.clone(), false)), Some("a2".into()));
        assert_eq!(ids(select_instance(list, true)), Some("a1".into()));
        assert_eq!(ids(select_instance(vec![c("a0", 0, 10)], true)), None);
        assert_eq!(ids(select_instance(vec![], false)), None);
        // Same attempt (a new sandbox restarts attempts' meaning): the later one wins.
        assert_eq!(ids(select_instance(vec![c("old", 0, 10), c("new", 0, 50)], false)), Some("new".into()));
    }
}
