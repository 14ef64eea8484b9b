//! Mirrors the PortForwardREST of pkg/registry/core/pod/rest/subresources.go and
//! `PortForwardLocation` in pkg/registry/core/pod/strategy.go: `pods/portforward` is checked here,
//! then the client's upgrade goes to `/portForward/<ns>/<pod>` on the node agent that runs the
//! pod ([`crate::proxy::upgradeaware`]), which carries it to the runtime's streaming server.
//!
//! What kubectl sends (captured from 1.27–1.33): 1.27–1.30 `POST …/pods/<name>/portforward` with
//! `Connection: Upgrade`, `Upgrade: SPDY/3.1`, `X-Stream-Protocol-Version: portforward.k8s.io`
//! and `Content-Length: 0`; 1.31–1.33 first `GET` the same path with `Upgrade: websocket`,
//! `Sec-WebSocket-Version: 13` and `Sec-WebSocket-Protocol: SPDY/3.1+portforward.k8s.io` (1.30
//! too with `KUBECTL_PORT_FORWARD_WEBSOCKETS=true`), and fall back to the SPDY POST when that
//! upgrade is refused. No query: the ports are named per stream inside. `kubectl port-forward svc/x` resolves the Service to
//! one of its pods on the client side and comes here too.
//!
//! One request, step by step:
//! 1. The pod (404), its `ports` parameters if any (each 1–65535, else 400), a node (400
//!    `does not have a host assigned`), and not completed (400).
//! 2. Find the node agent (the node's InternalIP and daemon port).
//! 3. Upgrade to `/portForward/<ns>/<pod>` there and splice.
//!
//! The websocket form is an ordinary connect ([`connect`], spliced by upgradeaware). The SPDY
//! form cannot pass actix-web (see upgradeaware's caveat), so the server takes such connections
//! off its listener first ([`spdy_target`], [`serve_spdy`]): the same checks, then
//! [`crate::proxy::streamtunnel`] carries kubectl's SPDY to the agent inside a websocket. Only a
//! connection's first request is looked at: client-go's SPDY round tripper dials a connection of
//! its own for every upgrade, so the POST is always first.
//!
//! Implementation caveats: a SPDY port-forward bypasses the filter chain but for its
//! authentication and authorization (no request metrics, no max-in-flight), as kube-apiserver's
//! would not; it is logged on its own.


use actix_web::{HttpResponse, web};
use bytes::BytesMut;
use futures::future::LocalBoxFuture;
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::strategy::PODS;
use crate::authentication::request::Connection;
use crate::config::Api;
use crate::endpoints::requestinfo::PathInfo;
use crate::filters::authentication::{authenticate_connection, bearer_token};
use crate::filters::authorization::authorize;
use crate::error::{Error, Result};
use crate::proxy::{streamtunnel, upgradeaware};
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
    upgradeaware::proxy(req, payload, &r.kubelet.dialer, &authority, &format!("/portForward/{namespace}/{name}"), name, &node_name).await
}

/// The websocket subprotocol the agent is asked for: SPDY's bytes in binary messages.
pub const TUNNEL_PROTOCOL: &str = "SPDY/3.1+portforward.k8s.io";
/// The protocol kubectl's SPDY upgrade names in `X-Stream-Protocol-Version`.
pub const PORT_FORWARD_PROTOCOL: &str = "portforward.k8s.io";
const MAX_REQUEST_HEAD: usize = 16 << 10;

/// (namespace, pod) when `head` starts with the request line of kubectl's SPDY port-forward,
/// `POST /api/v1/namespaces/<ns>/pods/<name>/portforward` (the websocket form is a GET).
pub fn spdy_target(head: &[u8]) -> Option<(String, String)> {
    let end = head.windows(2).position(|w| w == b"\r\n")?;
    let line = std::str::from_utf8(&head[..end]).ok()?;
    let mut parts = line.split(' ');
    if parts.next()? != "POST" {
        return None;
    }
    let path = parts.next()?.split('?').next()?;
    match path.split('/').collect::<Vec<_>>().as_slice() {
        ["", "api", "v1", "namespaces", ns, "pods", name, "portforward"] if !ns.is_empty() && !name.is_empty() => {
            Some((ns.to_string(), name.to_string()))
        }
        _ => None,
    }
}

/// kubectl's SPDY port-forward on a connection taken off the listener: the request head, its
/// user and whether it may (`create` on `pods/portforward`), the checks of [`connect`], a
/// websocket tunnel to the agent, our 101, then the relay.
pub async fn serve_spdy(mut io: impl AsyncRead + AsyncWrite + Unpin, connection: &Connection, api: web::Data<Api>, namespace: String, name: String) {
    let result = async {
        let (query, token, early) = read_spdy_request(&mut io).await?;
        let path = format!("/api/v1/namespaces/{namespace}/pods/{name}/portforward");
        let user = authenticate_connection(Some(connection), token.as_deref(), &api.authenticator, &path)?;
        authorize(api.authorizer.as_ref(), &user, &PathInfo::parse("POST", &path, ""))?;
        let pod = api.registries.of(&PODS).get(Some(&namespace), &name).await?;
        let node = check(&pod, &name, &query)?;
        let authority = node_agent_authority(&api.registries, &node).await?;
        let tunnel = streamtunnel::dial(&api.kubelet.dialer, &authority, &format!("/portForward/{namespace}/{name}"), TUNNEL_PROTOCOL, &name).await?;
        Ok::<_, Error>((early, tunnel, node))
    }
    .await;
    let pod = format!("{namespace}/{name}");
    match result {
        Ok((early, tunnel, node)) => {
            let ok = format!(
                "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\nX-Stream-Protocol-Version: {PORT_FORWARD_PROTOCOL}\r\n\r\n"
            );
            if io.write_all(ok.as_bytes()).await.is_err() {
                return;
            }
            tracing::info!(target: "apiserver::proxy", pod, node, "SPDY port-forward tunnelled");
            streamtunnel::relay(io, early.freeze(), tunnel).await;
            tracing::info!(target: "apiserver::proxy", pod, "SPDY port-forward ended");
        }
        Err(e) => {
            tracing::debug!(target: "apiserver::proxy", pod, error = %e, "SPDY port-forward refused");
            let body = e.to_status().to_string();
            let reason = actix_web::http::StatusCode::from_u16(e.code()).ok().and_then(|c| c.canonical_reason()).unwrap_or("Error");
            let head = format!(
                "HTTP/1.1 {} {reason}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                e.code(),
                body.len()
            );
            let _ = io.write_all(head.as_bytes()).await;
            let _ = io.write_all(body.as_bytes()).await;
            let _ = io.shutdown().await;
        }
    }
}

/// The request head: its query, after checking it asks for SPDY and `portforward.k8s.io`; and
/// the bytes after it.
async fn read_spdy_request(io: &mut (impl AsyncRead + Unpin)) -> Result<(Vec<(String, String)>, Option<String>, BytesMut)> {
    let mut buf = BytesMut::with_capacity(2048);
    loop {
        let n = io.read_buf(&mut buf).await.map_err(|e| Error::BadRequest(format!("reading the request: {e}")))?;
        if n == 0 {
            return Err(Error::BadRequest("the client closed the connection inside its request".into()));
        }
        let mut headers = [httparse::EMPTY_HEADER; 64];
        let mut req = httparse::Request::new(&mut headers);
        match req.parse(&buf) {
            Ok(httparse::Status::Complete(len)) => {
                let values = |name: &str| {
                    req.headers
                        .iter()
                        .filter(|h| h.name.eq_ignore_ascii_case(name))
                        .flat_map(|h| String::from_utf8_lossy(h.value).split(',').map(|v| v.trim().to_string()).collect::<Vec<_>>())
                        .collect::<Vec<_>>()
                };
                if !values("upgrade").iter().any(|v| v.eq_ignore_ascii_case("SPDY/3.1")) {
                    return Err(Error::BadRequest("port-forward needs a SPDY/3.1 or websocket upgrade".into()));
                }
                if !values("x-stream-protocol-version").iter().any(|v| v == PORT_FORWARD_PROTOCOL) {
                    return Err(Error::BadRequest(format!("port-forward speaks {PORT_FORWARD_PROTOCOL} only")));
                }
                let query = req.path.and_then(|p| p.split_once('?')).map(|(_, q)| q).unwrap_or("");
                let query = web::Query::<Vec<(String, String)>>::from_query(query).map(|q| q.into_inner()).unwrap_or_default();
                let authorization = req.headers.iter().find(|h| h.name.eq_ignore_ascii_case("authorization"));
                let token = authorization.and_then(|h| std::str::from_utf8(h.value).ok()).and_then(bearer_token).map(String::from);
                let _ = buf.split_to(len);
                return Ok((query, token, buf));
            }
            Ok(httparse::Status::Partial) if buf.len() < MAX_REQUEST_HEAD => {}
            _ => return Err(Error::BadRequest("malformed request head".into())),
        }
    }
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

    #[test]
    fn only_kubectls_spdy_request_line_is_taken_off_the_listener() {
        let t = |head: &str| spdy_target(head.as_bytes());
        assert_eq!(t("POST /api/v1/namespaces/default/pods/web/portforward HTTP/1.1\r\n"), Some(("default".into(), "web".into())));
        assert_eq!(t("POST /api/v1/namespaces/d/pods/w/portforward?ports=80 HTTP/1.1\r\nHost: x\r\n"), Some(("d".into(), "w".into())));
        assert_eq!(t("GET /api/v1/namespaces/d/pods/w/portforward HTTP/1.1\r\n"), None, "the websocket form is actix's");
        assert_eq!(t("POST /api/v1/namespaces/d/pods/w/exec HTTP/1.1\r\n"), None);
        assert_eq!(t("POST /api/v1/namespaces/d/pods/w/portforward/x HTTP/1.1\r\n"), None);
        assert_eq!(t("POST /api/v1/namespaces//pods/w/portforward HTTP/1.1\r\n"), None);
        assert_eq!(t("POST /api/v1/namespaces/d/pods/w/portforward HTTP/1.1"), None, "no end of line yet");
    }
}
