//! Mirrors pkg/registry/core/pod/rest/subresources.go (ExecREST, AttachREST) and the exec/attach
//! half of pkg/registry/core/pod/strategy.go (`streamLocation`): `pods/exec` and `pods/attach`
//! are checked here, then the client's upgrade request is passed to the node agent that runs the
//! pod by [`crate::proxy::upgradeaware`].
//!
//! The API server never looks inside the stream: kubectl's websocket (`v5.channel.k8s.io`) is
//! understood by the node agent, which translates it to the runtime's SPDY.
//!
//! One request, step by step:
//! 1. The pod (404), the container (the `container` parameter, else the
//!    `kubectl.kubernetes.io/default-container` annotation, else the first container; 400 if it
//!    is not one of the pod's), a node (400 `does not have a host assigned`), and not completed.
//! 2. Find the node agent (the node's InternalIP and daemon port, as for logs).
//! 3. Upgrade to `/exec|attach/<ns>/<pod>/<container>?<query>` there and splice
//!    ([`crate::proxy::upgradeaware::proxy`]: the agent's refusal becomes a Status).
//!
//! Implementation caveats: only websocket upgrades can be spliced (see upgradeaware). kubectl's
//! SPDY fallback still gets the checks and the agent's error, so a failing exec reads the same
//! either way.

use actix_web::{HttpResponse, web};
use futures::future::LocalBoxFuture;
use serde_json::Value;

use super::strategy::container_names;
use crate::error::{Error, Result};
use crate::proxy::upgradeaware;
use crate::registry::core::node::kubelet_client::node_agent_authority;
use crate::registry::generic::rest::RestRequest;

/// The annotation kubectl (and we) read for the container to use when none is named.
pub const DEFAULT_CONTAINER_ANNOTATION: &str = "kubectl.kubernetes.io/default-container";
/// Step 1's container choice: the one asked for, else the annotated default, else the first.
fn choose_container(pod: &Value, asked: Option<&str>) -> Option<String> {
    if let Some(c) = asked.filter(|c| !c.is_empty()) {
        return Some(c.to_string());
    }
    let first = pod.pointer("/spec/containers/0/name").and_then(Value::as_str);
    let annotated = pod.pointer("/metadata/annotations").and_then(|a| a.get(DEFAULT_CONTAINER_ANNOTATION)).and_then(Value::as_str);
    annotated.filter(|a| container_names(pod).iter().any(|n| n == a)).or(first).map(String::from)
}

/// Step 1 as a pure function: the container to use, or the error Kubernetes gives.
pub fn check(pod: &Value, name: &str, subresource: &str, asked: Option<&str>) -> Result<String> {
    let container = choose_container(pod, asked)
        .ok_or_else(|| Error::BadRequest(format!("a container name must be specified for pod {name}")))?;
    if !container_names(pod).contains(&container) {
        return Err(Error::BadRequest(format!("container {container} is not valid for pod {name}")));
    }
    if pod.pointer("/spec/nodeName").and_then(Value::as_str).unwrap_or("").is_empty() {
        return Err(Error::BadRequest(format!("pod {name} does not have a host assigned")));
    }
    let phase = pod.pointer("/status/phase").and_then(Value::as_str).unwrap_or("");
    if api::pod::is_pod_phase_terminal(Some(phase)) {
        let what = if subresource == "attach" { "cannot attach a container" } else { "cannot exec into a container" };
        return Err(Error::BadRequest(format!("{what} in a completed pod; current phase is {phase}")));
    }
    Ok(container)
}

/// `pods/<name>/exec` and `pods/<name>/attach` (rest.Connecter).
pub fn connect(r: RestRequest<'_>, payload: web::Payload) -> LocalBoxFuture<'_, Result<HttpResponse>> {
    Box::pin(serve(r, payload))
}

async fn serve(r: RestRequest<'_>, payload: web::Payload) -> Result<HttpResponse> {
    let (req, namespace, name, subresource) = (r.req, r.namespace, r.name, r.subresource);
    // Step 1.
    let pod = r.registry.get(Some(namespace), name).await?;
    let query: Vec<(String, String)> =
        web::Query::<Vec<(String, String)>>::from_query(req.query_string()).map(|q| q.into_inner()).unwrap_or_default();
    let asked = query.iter().find(|(k, _)| k == "container").map(|(_, v)| v.as_str());
    let container = check(&pod, name, subresource, asked)?;
    let node_name = pod.pointer("/spec/nodeName").and_then(Value::as_str).unwrap_or("");
    // Step 2.
    let authority = node_agent_authority(r.registries, node_name).await?;

    // Step 3.
    upgradeaware::proxy(req, payload, &r.kubelet.dialer, &authority, &format!("/{subresource}/{namespace}/{name}/{container}"), name, node_name).await
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod(annotation: Option<&str>, node: &str, phase: &str) -> Value {
        let mut p = json!({
            "metadata": {"name": "web", "annotations": {}},
            "spec": {"nodeName": node, "containers": [{"name": "app"}, {"name": "sidecar"}], "initContainers": [{"name": "init"}]},
            "status": {"phase": phase}
        });
        if let Some(a) = annotation {
            p["metadata"]["annotations"][DEFAULT_CONTAINER_ANNOTATION] = json!(a);
        }
        p
    }

    #[test]
    fn container_choice_and_checks() {
        let running = pod(None, "n1", "Running");
        assert_eq!(check(&running, "web", "exec", None).expect("default"), "app");
        assert_eq!(check(&running, "web", "exec", Some("")).expect("default"), "app");
        assert_eq!(check(&running, "web", "exec", Some("sidecar")).expect("named"), "sidecar");
        assert_eq!(check(&running, "web", "exec", Some("init")).expect("init containers count"), "init");
        assert_eq!(check(&pod(Some("sidecar"), "n1", "Running"), "web", "exec", None).expect("annotated"), "sidecar");
        assert_eq!(check(&pod(Some("gone"), "n1", "Running"), "web", "exec", None).expect("bad annotation"), "app");

        let msg = |r: Result<String>| r.expect_err("must fail").to_string();
        assert_eq!(msg(check(&running, "web", "exec", Some("nope"))), "container nope is not valid for pod web");
        assert_eq!(msg(check(&pod(None, "", "Pending"), "web", "exec", None)), "pod web does not have a host assigned");
        assert_eq!(
            msg(check(&pod(None, "n1", "Succeeded"), "web", "exec", None)),
            "cannot exec into a container in a completed pod; current phase is Succeeded"
        );
        assert_eq!(
            msg(check(&pod(None, "n1", "Failed"), "web", "attach", None)),
            "cannot attach a container in a completed pod; current phase is Failed"
        );
        assert_eq!(check(&pod(None, "n1", "Pending"), "web", "exec", None).expect("the agent decides"), "app");
    }
}
