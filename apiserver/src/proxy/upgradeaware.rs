//! Mirrors k8s.io/apimachinery/pkg/util/proxy/upgradeaware.go: a client's upgrade request passed
//! to a node agent and, once it answers 101, bytes spliced both ways until either side closes.
//! pods/exec, pods/attach and pods/portforward all end here; the API server never looks inside
//! the stream.
//!
//! One upgrade, step by step:
//! 1. Dial the agent and write the upgrade request for the agent's path with the client's query
//!    and only the upgrade headers (credentials stop here).
//! 2. Read the agent's response head. Anything but 101 becomes a `metav1.Status` error with the
//!    agent's words, so kubectl prints `Error from server (BadRequest): …`.
//! 3. 101: answer the client with the agent's 101 headers, then the agent's bytes as the body,
//!    while a task copies the client's bytes (actix hands them over as the "payload" of an
//!    upgraded request) to the agent.
//!
//! A request that is not an upgrade (pods/proxy, services/proxy, nodes/proxy: [`proxy_http`]) is
//! passed on with its method, its headers but the hop-by-hop ones and credentials, and its body
//! streamed; the backend's status, headers and body stream back as they come. A backend that
//! cannot be reached is 503, in Kubernetes' words (`error trying to reach service: …`).
//!
//! Implementation caveats: only websocket upgrades can be spliced — actix-web streams the raw
//! bytes after the head only for `Upgrade: websocket` (a `SPDY/3.1` upgrade has no body as far
//! as actix-http is concerned, and what follows would be read as the next request). A SPDY client
//! still gets the checks and the agent's error, so a failure reads the same either way.

use std::convert::Infallible;
use std::time::Duration;

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use bytes::{Bytes, BytesMut};
use futures::StreamExt;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

use super::dial::{DIAL_TIMEOUT, Dialer};
use crate::error::{Error, Result};

/// Request headers that carry the upgrade to the node agent (nothing else is passed on:
/// credentials stop here).
const UPGRADE_HEADERS: &[&str] =
    &["upgrade", "sec-websocket-key", "sec-websocket-version", "sec-websocket-protocol", "x-stream-protocol-version"];
/// Response headers of the agent's 101 passed back to the client.
const UPGRADE_RESPONSE_HEADERS: &[&str] = &["sec-websocket-accept", "sec-websocket-protocol", "x-stream-protocol-version"];
/// The agent's answer, which includes the runtime's CRI call and stream setup.
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(60);
const MAX_RESPONSE_HEAD: usize = 16 << 10;
const MAX_ERROR_BODY: usize = 64 << 10;

/// Proxy the upgrade `req` to `path` on the agent at `authority` (`host:port`), reached with
/// `dialer` (the kubelet client's TLS). `pod` and `node` name the target in errors and logs.
pub async fn proxy(req: &HttpRequest, payload: web::Payload, dialer: &Dialer, authority: &str, path: &str, pod: &str, node: &str) -> Result<HttpResponse> {
    // Step 1.
    let dial_err = |e: std::io::Error| Error::Internal(format!("error dialing backend: {e}"));
    let (mut read, mut write) = tokio::io::split(dialer.dial(authority).await?);
    let head = request_head(req, authority, path);
    write.write_all(head.as_bytes()).await.map_err(dial_err)?;

    // Step 2.
    let (response, rest) = tokio::time::timeout(RESPONSE_TIMEOUT, read_response_head(&mut read))
        .await
        .map_err(|_| Error::Internal(format!("the node agent of node {node} did not answer the upgrade for {path}")))??;
    if response.status != 101 {
        let body = read_error_body(&mut read, rest, response.content_length).await;
        tracing::debug!(target: "apiserver::proxy", path, status = response.status, body, "node agent refused the upgrade");
        return Err(refusal(response.status, body, pod));
    }
    if !is_websocket(req) {
        return Err(Error::BadRequest(format!("upgrades other than websocket cannot be proxied (to {path})")));
    }

    // Step 3.
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
    tracing::info!(target: "apiserver::proxy", path, node, "upgraded");
    Ok(builder.streaming(body))
}

/// Headers that belong to one hop (RFC 9110 §7.6.1), plus the client's credentials and the
/// length (the body is re-framed): never passed on either way.
const HOP_HEADERS: &[&str] = &[
    "connection", "keep-alive", "proxy-connection", "proxy-authenticate", "proxy-authorization", "te", "trailer",
    "transfer-encoding", "upgrade", "host", "authorization", "content-length",
];
/// Request body chunks buffered between actix's payload and the backend's request.
const BODY_CHANNEL_CAPACITY: usize = 8;

/// The client for proxied requests to pods and services: redirects go back to the client as they
/// are (a proxy never follows them), and a backend's certificate is not checked — as
/// kube-apiserver's proxy transport to pods and services does not.
pub fn proxy_client() -> &'static reqwest::Client {
    static CLIENT: std::sync::OnceLock<reqwest::Client> = std::sync::OnceLock::new();
    CLIENT.get_or_init(|| {
        reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .tls_danger_accept_invalid_certs(true)
            .connect_timeout(DIAL_TIMEOUT)
            .build()
            .unwrap_or_default()
    })
}

/// Pass a plain request on to `url` (scheme, host, port and path; the client's query is added)
/// with `client` ([`proxy_client`], or the kubelet client's for a node agent). It must not follow
/// redirects.
pub async fn proxy_http(client: &reqwest::Client, req: &HttpRequest, payload: web::Payload, url: &str) -> Result<HttpResponse> {
    let query = req.query_string();
    let target = if query.is_empty() { url.to_string() } else { format!("{url}?{query}") };
    let method = reqwest::Method::from_bytes(req.method().as_str().as_bytes()).map_err(|e| Error::BadRequest(e.to_string()))?;
    let mut forward = client.request(method, &target);
    for (name, value) in req.headers() {
        if !HOP_HEADERS.contains(&name.as_str()) {
            forward = forward.header(name.as_str(), value.as_bytes());
        }
    }
    // actix's payload lives on this worker's thread; the backend request wants a `Send` body.
    let (tx, rx) = tokio::sync::mpsc::channel::<std::result::Result<Bytes, std::io::Error>>(BODY_CHANNEL_CAPACITY);
    actix_web::rt::spawn(async move {
        let mut payload = payload;
        while let Some(chunk) = payload.next().await {
            let chunk = chunk.map_err(|e| std::io::Error::other(e.to_string()));
            let failed = chunk.is_err();
            if tx.send(chunk).await.is_err() || failed {
                break;
            }
        }
    });
    if req.headers().contains_key("content-length") || req.headers().contains_key("transfer-encoding") {
        forward = forward.body(reqwest::Body::wrap_stream(tokio_stream::wrappers::ReceiverStream::new(rx)));
    }
    let response = forward.send().await.map_err(|e| Error::ServiceUnavailable(format!("error trying to reach service: {}", reach_error(&e))))?;
    let mut builder = HttpResponse::build(StatusCode::from_u16(response.status().as_u16()).unwrap_or(StatusCode::BAD_GATEWAY));
    for (name, value) in response.headers() {
        if !HOP_HEADERS.contains(&name.as_str()) {
            builder.append_header((name.as_str(), value.as_bytes()));
        }
    }
    let body = response.bytes_stream().map(|chunk| chunk.map_err(|e| actix_web::error::ErrorBadGateway(e.to_string())));
    Ok(builder.streaming(body))
}

/// The innermost cause of a failed backend request (reqwest's own words wrap it twice).
fn reach_error(e: &reqwest::Error) -> String {
    let mut cause: &dyn std::error::Error = e;
    while let Some(inner) = cause.source() {
        cause = inner;
    }
    cause.to_string()
}

/// The agent's refusal of an upgrade as the API server reports it.
pub(crate) fn refusal(status: u16, body: String, pod: &str) -> Error {
    match status {
        400 => Error::BadRequest(body),
        404 => Error::not_found("pods", pod),
        code => Error::Internal(format!("node agent answered {code}: {body}")),
    }
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

pub(crate) struct ResponseHead {
    pub(crate) status: u16,
    upgrade: Option<String>,
    /// The headers to pass back on a 101.
    headers: Vec<(String, String)>,
    pub(crate) content_length: Option<usize>,
}

/// Read up to the end of the response head; the bytes after it are returned too.
pub(crate) async fn read_response_head(read: &mut (impl AsyncRead + Unpin)) -> Result<(ResponseHead, Bytes)> {
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
pub(crate) async fn read_error_body(read: &mut (impl AsyncRead + Unpin), rest: Bytes, content_length: Option<usize>) -> String {
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
    use super::*;

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

    #[test]
    fn a_spdy_upgrade_is_passed_on_but_is_not_websocket() {
        let req = actix_web::test::TestRequest::post()
            .uri("/api/v1/namespaces/d/pods/web/portforward")
            .insert_header(("Upgrade", "SPDY/3.1"))
            .insert_header(("Connection", "Upgrade"))
            .insert_header(("X-Stream-Protocol-Version", "portforward.k8s.io"))
            .to_http_request();
        let head = request_head(&req, "10.0.0.1:10250", "/portForward/d/web");
        assert!(head.starts_with("POST /portForward/d/web HTTP/1.1\r\n"), "{head}");
        assert!(head.contains("x-stream-protocol-version: portforward.k8s.io\r\n") && head.contains("Content-Length: 0\r\n"), "{head}");
        assert!(!is_websocket(&req));
    }
}
