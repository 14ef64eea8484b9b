//! Mirrors pkg/registry/core/pod/rest/subresources.go (ExecREST, AttachREST), the exec/attach
//! half of pkg/registry/core/pod/strategy.go (`streamLocation`), and
//! k8s.io/apimachinery/pkg/util/proxy/upgradeaware.go: `pods/exec` and `pods/attach` are checked
//! here, then the client's upgrade request is passed to the node agent that runs the pod and,
//! once it answers 101, bytes are spliced both ways until either side closes.
//!
//! The API server never looks inside the stream: kubectl's websocket (`v5.channel.k8s.io`) is
//! understood by the node agent, which translates it to the runtime's SPDY.
//!
//! One request, step by step:
//! 1. The pod (404), the container (the `container` parameter, else the
//!    `kubectl.kubernetes.io/default-container` annotation, else the first container; 400 if it
//!    is not one of the pod's), a node (400 `does not have a host assigned`), and not completed.
//! 2. Dial the node agent (the node's InternalIP and daemon port, as for logs) and write the
//!    upgrade request for `/exec|attach/<ns>/<pod>/<container>?<query>` with the upgrade headers.
//! 3. Read the agent's response head. Anything but 101 becomes a `metav1.Status` error with the
//!    agent's words, so kubectl prints `Error from server (BadRequest): …`.
//! 4. 101: answer the client with the agent's 101 headers, then the agent's bytes as the body,
//!    while a task copies the client's bytes (actix hands them over as the "payload" of an
//!    upgraded request) to the agent.
//!
//! Implementation caveats: only websocket upgrades can be spliced — actix-web streams the raw
//! bytes after the head only for `Upgrade: websocket`. kubectl's SPDY fallback still gets the
//! checks and the agent's error, so a failing exec reads the same either way.

use std::convert::Infallible;
use std::time::Duration;

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use bytes::{Bytes, BytesMut};
use futures::StreamExt;
use futures::future::LocalBoxFuture;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::strategy::container_names;
use crate::error::{Error, Result};
use crate::registry::core::node::kubelet_client::node_agent_url;
use crate::registry::core::node::strategy::NODES;
use crate::registry::generic::rest::RestRequest;

/// The annotation kubectl (and we) read for the container to use when none is named.
pub const DEFAULT_CONTAINER_ANNOTATION: &str = "kubectl.kubernetes.io/default-container";
/// Request headers that carry the upgrade to the node agent (nothing else is passed on:
/// credentials stop here).
const UPGRADE_HEADERS: &[&str] =
    &["upgrade", "sec-websocket-key", "sec-websocket-version", "sec-websocket-protocol", "x-stream-protocol-version"];
/// Response headers of the agent's 101 passed back to the client.
const UPGRADE_RESPONSE_HEADERS: &[&str] = &["sec-websocket-accept", "sec-websocket-protocol", "x-stream-protocol-version"];
/// Dialling the agent; then its answer, which includes the runtime's CRI call and stream setup.
const DIAL_TIMEOUT: Duration = Duration::from_secs(10);
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(60);
const MAX_RESPONSE_HEAD: usize = 16 << 10;
const MAX_ERROR_BODY: usize = 64 << 10;

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
    let node = r.registries.of(&NODES).get(None, node_name).await?;
    let base = node_agent_url(&node)
        .ok_or_else(|| Error::Internal(format!("node {node_name} has no address yet: its node agent has not reported")))?;
    let authority = base.trim_start_matches("http://").to_string();

    // Step 2.
    let dial_err = |e: std::io::Error| Error::Internal(format!("error dialing backend: {e}"));
    let stream = tokio::time::timeout(DIAL_TIMEOUT, TcpStream::connect(&authority))
        .await
        .map_err(|_| Error::Internal(format!("error dialing backend: timed out connecting to {authority}")))?
        .map_err(dial_err)?;
    stream.set_nodelay(true).map_err(dial_err)?;
    let (mut read, mut write) = stream.into_split();
    let path = format!("/{subresource}/{namespace}/{name}/{container}");
    let head = request_head(req, &authority, &path);
    write.write_all(head.as_bytes()).await.map_err(dial_err)?;

    // Step 3.
    let (response, rest) = tokio::time::timeout(RESPONSE_TIMEOUT, read_response_head(&mut read))
        .await
        .map_err(|_| Error::Internal(format!("the node agent of node {node_name} did not answer the {subresource} request")))??;
    if response.status != 101 {
        let body = read_error_body(&mut read, rest, response.content_length).await;
        tracing::debug!(target: "apiserver::exec", pod = %format!("{namespace}/{name}"), status = response.status, body, "node agent refused the upgrade");
        return Err(match response.status {
            400 => Error::BadRequest(body),
            404 => Error::not_found("pods", name),
            code => Error::Internal(format!("node agent answered {code}: {body}")),
        });
    }
    if !is_websocket(req) {
        return Err(Error::BadRequest(format!("{subresource} upgrades other than websocket cannot be proxied")));
    }

    // Step 4.
    let mut builder = HttpResponse::build(StatusCode::SWITCHING_PROTOCOLS);
    builder.upgrade(response.upgrade.unwrap_or_else(|| "websocket".into()));
    for (name, value) in response.headers {
        builder.insert_header((name, value));
    }
    actix_web::rt::spawn(async move {
        let mut payload = payload;
        while let Some(Ok(chunk)) = payload.next().await {
            if write.write_all(&chunk).await.is_err() {
                break;
            }
        }
        // The client is done: half-close, so the agent sees it too.
        let _ = write.shutdown().await;
    });
    let first = (!rest.is_empty()).then_some(rest);
    let body = futures::stream::unfold((read, first), |(mut read, first)| async move {
        if let Some(bytes) = first {
            return Some((Ok::<_, Infallible>(bytes), (read, None)));
        }
        let mut buf = BytesMut::with_capacity(16 << 10);
        match read.read_buf(&mut buf).await {
            Ok(n) if n > 0 => Some((Ok(buf.freeze()), (read, None))),
            _ => None,
        }
    });
    tracing::info!(target: "apiserver::exec", pod = %format!("{namespace}/{name}"), container, subresource, node = node_name, "upgraded");
    Ok(builder.streaming(body))
}

fn is_websocket(req: &HttpRequest) -> bool {
    req.headers().get_all("upgrade").filter_map(|v| v.to_str().ok()).any(|v| v.eq_ignore_ascii_case("websocket"))
}

/// The request the node agent gets: the client's method, our path with the client's query,
/// and only the upgrade headers.
fn request_head(req: &HttpRequest, authority: &str, path: &str) -> String {
    let method = req.method().as_str();
    let query = req.query_string();
    let mut head = format!("{method} {path}{}{query} HTTP/1.1\r\nHost: {authority}\r\n", if query.is_empty() { "" } else { "?" });
    if req.headers().contains_key("upgrade") {
        head.push_str("Connection: Upgrade\r\n");
    }
    for name in UPGRADE_HEADERS {
        for value in req.headers().get_all(*name).filter_map(|v| v.to_str().ok()) {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
    }
    if method != "GET" {
        // The body, if any, is never forwarded.
        head.push_str("Content-Length: 0\r\n");
    }
    head.push_str("\r\n");
    head
}

struct ResponseHead {
    status: u16,
    upgrade: Option<String>,
    /// The headers to pass back on a 101.
    headers: Vec<(String, String)>,
    content_length: Option<usize>,
}

/// Read up to the end of the response head; the bytes after it are returned too.
async fn read_response_head(read: &mut tokio::net::tcp::OwnedReadHalf) -> Result<(ResponseHead, Bytes)> {
    let bad = || Error::Internal("the node agent sent a malformed HTTP response".into());
    let mut buf = BytesMut::with_capacity(1024);
    loop {
        let n = read.read_buf(&mut buf).await.map_err(|e| Error::Internal(format!("reading the node agent's answer: {e}")))?;
        if n == 0 {
            return Err(Error::Internal("the node agent closed the connection without answering".into()));
        }
        let mut headers = [httparse::EMPTY_HEADER; 32];
        let mut response = httparse::Response::new(&mut headers);
        match response.parse(&buf) {
            Ok(httparse::Status::Complete(len)) => {
                let value = |h: &httparse::Header| String::from_utf8_lossy(h.value).trim().to_string();
                let find = |name: &str| response.headers.iter().find(|h| h.name.eq_ignore_ascii_case(name)).map(value);
                let head = ResponseHead {
                    status: response.code.unwrap_or(0),
                    upgrade: find("upgrade"),
                    headers: response
                        .headers
                        .iter()
                        .filter(|h| UPGRADE_RESPONSE_HEADERS.iter().any(|n| h.name.eq_ignore_ascii_case(n)))
                        .map(|h| (h.name.to_string(), value(h)))
                        .collect(),
                    content_length: find("content-length").and_then(|l| l.parse().ok()),
                };
                let _ = buf.split_to(len);
                return Ok((head, buf.freeze()));
            }
            Ok(httparse::Status::Partial) if buf.len() < MAX_RESPONSE_HEAD => {}
            _ => return Err(bad()),
        }
    }
}

/// The agent's error text (bounded; a body without a length is read until the agent closes).
async fn read_error_body(read: &mut tokio::net::tcp::OwnedReadHalf, rest: Bytes, content_length: Option<usize>) -> String {
    let want = content_length.unwrap_or(MAX_ERROR_BODY).min(MAX_ERROR_BODY);
    let mut buf = BytesMut::from(&rest[..]);
    while buf.len() < want {
        match tokio::time::timeout(Duration::from_secs(5), read.read_buf(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => {}
            _ => break,
        }
    }
    buf.truncate(want);
    String::from_utf8_lossy(&buf).trim().to_string()
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

    #[test]
    fn only_upgrade_headers_reach_the_agent() {
        let req = actix_web::test::TestRequest::get()
            .uri("/api/v1/namespaces/d/pods/web/exec?command=ls&command=-l&stdout=true")
            .insert_header(("Upgrade", "websocket"))
            .insert_header(("Connection", "Upgrade"))
            .insert_header(("Sec-WebSocket-Key", "abc=="))
            .insert_header(("Sec-WebSocket-Version", "13"))
            .insert_header(("Sec-WebSocket-Protocol", "v5.channel.k8s.io"))
            .insert_header(("Authorization", "Bearer secret"))
            .to_http_request();
        let head = request_head(&req, "10.0.0.1:10250", "/exec/d/web/app");
        assert!(head.starts_with("GET /exec/d/web/app?command=ls&command=-l&stdout=true HTTP/1.1\r\nHost: 10.0.0.1:10250\r\n"), "{head}");
        for line in ["Connection: Upgrade\r\n", "upgrade: websocket\r\n", "sec-websocket-key: abc==\r\n", "sec-websocket-protocol: v5.channel.k8s.io\r\n"] {
            assert!(head.contains(line), "{line:?} missing from {head}");
        }
        assert!(!head.contains("secret") && !head.contains("Content-Length"), "{head}");
        assert!(head.ends_with("\r\n\r\n"));
        assert!(is_websocket(&req));
    }
}
