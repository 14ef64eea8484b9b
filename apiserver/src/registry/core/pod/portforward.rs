//! Mirrors the PortForwardREST of pkg/registry/core/pod/rest/subresources.go and
//! `PortForwardLocation` in pkg/registry/core/pod/strategy.go: `pods/portforward` is checked here,
//! then the client's upgrade goes to `/portForward/<ns>/<pod>` on the node agent that runs the
//! pod ([`crate::proxy::upgradeaware`]), which carries it to the runtime's streaming server.
//!
//! kubectl asks for it as `POST …/pods/<name>/portforward` upgraded to SPDY/3.1 (kubectl ≤ 1.30)
//! or as `GET` upgraded to a websocket with the subprotocol `SPDY/3.1+portforward.k8s.io`
//! (kubectl 1.31 and later, 1.30 with `KUBECTL_PORT_FORWARD_WEBSOCKETS=true`); the ports are
//! named per stream inside, not in the URL. `kubectl port-forward svc/x` resolves the Service to
//! one of its pods on the client side and comes here too.
//!
//! One request, step by step:
//! 1. The pod (404), its `ports` parameters if any (each 1–65535, else 400), a node (400
//!    `does not have a host assigned`), and not completed (400).
//! 2. Find the node agent (the node's InternalIP and daemon port).
//! 3. Upgrade to `/portForward/<ns>/<pod>` there and splice.
//!
//! Implementation caveats: only the websocket form crosses the API server (see upgradeaware), so
//! kubectl 1.27–1.29, which only speak SPDY for port-forward, get a 400 that says so.

use actix_web::{HttpResponse, web};
use futures::future::LocalBoxFuture;
use serde_json::Value;

use crate::error::{Error, Result};
use crate::proxy::upgradeaware;
use crate::registry::core::node::kubelet_client::node_agent_authority;
use crate::registry::generic::rest::RestRequest;

/// Step 1 as a pure function: the node to go to, or the error Kubernetes gives.
pub fn check(pod: &Value, name: &str, query: &[(String, String)]) -> Result<String> {
    for (_, port) in query.iter().filter(|(k, _)| k == "ports") {
        if !port.parse::<u16>().is_ok_and(|p| p > 0) {
            return Err(Error::BadRequest(format!("port {port:?} is not valid: a port must be in the range 1 to 65535")));
        }
    }
    let node = pod.pointer("/spec/nodeName").and_then(Value::as_str).unwrap_or("");
    if node.is_empty() {
        return Err(Error::BadRequest(format!("pod {name} does not have a host assigned")));
    }
    let phase = pod.pointer("/status/phase").and_then(Value::as_str).unwrap_or("");
    if api::pod::is_pod_phase_terminal(Some(phase)) {
        return Err(Error::BadRequest(format!("cannot forward ports of a completed pod; current phase is {phase}")));
    }
    Ok(node.to_string())
}

/// `pods/<name>/portforward` (rest.Connecter).
pub fn connect(r: RestRequest<'_>, payload: web::Payload) -> LocalBoxFuture<'_, Result<HttpResponse>> {
    Box::pin(serve(r, payload))
}

async fn serve(r: RestRequest<'_>, payload: web::Payload) -> Result<HttpResponse> {
    let (req, namespace, name) = (r.req, r.namespace, r.name);
    // Step 1.
    let pod = r.registry.get(Some(namespace), name).await?;
    let query: Vec<(String, String)> =
        web::Query::<Vec<(String, String)>>::from_query(req.query_string()).map(|q| q.into_inner()).unwrap_or_default();
    let node_name = check(&pod, name, &query)?;
    // Step 2.
    let authority = node_agent_authority(r.registries, &node_name).await?;
    // Step 3.
    upgradeaware::proxy(req, payload, &authority, &format!("/portForward/{namespace}/{name}"), name, &node_name).await
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod(node: &str, phase: &str) -> Value {
        json!({"metadata": {"name": "web"}, "spec": {"nodeName": node, "containers": [{"name": "app"}]}, "status": {"phase": phase}})
    }

    #[test]
    fn checks() {
        let q = |ports: &[&str]| ports.iter().map(|p| ("ports".to_string(), p.to_string())).collect::<Vec<_>>();
        assert_eq!(check(&pod("n1", "Running"), "web", &[]).expect("ok"), "n1");
        assert_eq!(check(&pod("n1", "Pending"), "web", &q(&["80", "65535"])).expect("the agent decides"), "n1");
        let msg = |r: Result<String>| r.expect_err("must fail").to_string();
        assert_eq!(msg(check(&pod("", "Pending"), "web", &[])), "pod web does not have a host assigned");
        assert_eq!(msg(check(&pod("n1", "Succeeded"), "web", &[])), "cannot forward ports of a completed pod; current phase is Succeeded");
        assert_eq!(msg(check(&pod("n1", "Running"), "web", &q(&["0"]))), "port \"0\" is not valid: a port must be in the range 1 to 65535");
        assert!(check(&pod("n1", "Running"), "web", &q(&["http"])).is_err());
        assert!(check(&pod("n1", "Running"), "web", &q(&["70000"])).is_err());
    }
}
