//! Mirrors kubelet's pkg/kubelet/server (getPortForward) together with
//! pkg/kubelet/cri/streaming/portforward (httpstream.go, websocket.go) and the websocket tunnel of
//! k8s.io/apiserver's StreamTunnelingHandler (client-go's tunneling_connection.go is its other
//! end): `/portForward/{namespace}/{pod}` takes kubectl's port-forward connection and carries it
//! to the runtime's streaming server.
//!
//! What kubectl speaks: the `portforward.k8s.io` protocol over SPDY/3.1 — per forwarded
//! connection a pair of streams (`streamType: error` then `streamType: data`, both with the
//! `port` and a shared `requestID` header). kubectl 1.31 and later (1.30 with
//! `KUBECTL_PORT_FORWARD_WEBSOCKETS=true`) carry those same SPDY bytes inside websocket binary
//! messages, asking for the subprotocol `SPDY/3.1+portforward.k8s.io`. That is the only form the
//! agent takes (actix-web hands over a raw connection only for a websocket upgrade): the API
//! server splices kubectl's websocket here, and wraps kubectl's plain SPDY into one (its
//! `proxy::streamtunnel`).
//!
//! Where the port is reached — the decision: we ask CRI `PortForward` for a URL on containerd's
//! streaming server, as kubelet does, rather than entering the sandbox's network namespace
//! ourselves. containerd dials `localhost:<port>` from inside the pod's namespace, so a server
//! bound only to 127.0.0.1 is reached; the agent needs no `setns` (which would move a whole
//! tokio worker thread, and every task on it, into the pod's network); and containerd's server is
//! Kubernetes' own portforward code, so the stream pairing and the error stream's words
//! ("error forwarding port 9 to pod …: connection refused") are exactly what kubectl expects.
//! The agent therefore never parses the forwarded SPDY: after both upgrades it relays opaque
//! bytes, unwrapping kubectl's websocket messages one way and wrapping the runtime's bytes the other.
//!
//! One session, step by step:
//! 1. Find the pod among the agent's pods (404).
//! 2. Find its ready sandbox in the runtime (400 `pod … is not running` otherwise).
//! 3. Check the request is a websocket upgrade offering `SPDY/3.1+portforward.k8s.io` (400).
//! 4. Ask CRI `PortForward` for a streaming URL.
//! 5. Upgrade a connection to it to SPDY/3.1 with `X-Stream-Protocol-Version: portforward.k8s.io`
//!    ([`super::spdy::upgrade`]).
//! 6. Only now answer kubectl with 101, so a failure so far is an HTTP error kubectl prints.
//! 7. Relay until either side closes: websocket binary messages → runtime; runtime bytes →
//!    binary messages; pings answered; a close answered and passed on as a half-close.
//!
//! Implementation caveats: a plain SPDY upgrade straight to the agent is refused with 400 (the
//! API server never sends one); and kubelet's own websocket protocol for port-forward
//! (`v4.channel.k8s.io` with a channel pair per port in the query) is not offered — kubectl
//! never uses it.

use std::convert::Infallible;
use std::ops::ControlFlow;
use std::time::Duration;

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use bytes::{Bytes, BytesMut};
use futures::StreamExt;
use k8s_cri::v1 as api;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

use super::host_interface::{Provider, find_pod, text};
use super::spdy;
use super::websocket::{self as ws, Message};
use crate::container::POD_UID_LABEL;

/// The protocol the runtime's streaming server speaks over SPDY (kubelet's `portforward.ProtocolV1Name`).
pub(crate) const PORT_FORWARD_PROTOCOL: &str = "portforward.k8s.io";
/// The websocket subprotocol of kubectl's tunnel: SPDY's bytes in binary messages.
pub(crate) const TUNNEL_PROTOCOL: &str = "SPDY/3.1+portforward.k8s.io";
/// How long the runtime may take to answer the upgrade (kubelet's `StreamCreationTimeout`).
const STREAM_CREATION_TIMEOUT: Duration = Duration::from_secs(30);
/// Websocket frames queued for kubectl: a slow reader slows the runtime's side down.
const OUTPUT_CHANNEL_CAPACITY: usize = 32;
/// One read from the runtime becomes one binary message of at most this size.
const READ_CHUNK: usize = 32 << 10;

pub(crate) async fn port_forward(
    req: HttpRequest,
    payload: web::Payload,
    provider: web::Data<dyn Provider>,
    path: web::Path<(String, String)>,
) -> HttpResponse {
    let (namespace, pod_name) = path.into_inner();
    let pod_key = format!("{namespace}/{pod_name}");
    let bad_request = |msg: String| text(StatusCode::BAD_REQUEST, msg);

    // Step 1: the pod.
    let pod = match find_pod(provider.get_ref(), &namespace, &pod_name) {
        Ok(p) => p,
        Err(resp) => return resp,
    };

    // Step 2: its ready sandbox.
    let runtime = provider.runtime();
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    let filter = api::PodSandboxFilter {
        state: Some(api::PodSandboxStateValue { state: api::PodSandboxState::SandboxReady as i32 }),
        label_selector: [(POD_UID_LABEL.to_string(), uid)].into(),
        ..Default::default()
    };
    let sandbox = match runtime.list_pod_sandbox(Some(filter)).await {
        Ok(list) => list.into_iter().max_by_key(|s| s.created_at),
        Err(e) => return text(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    };
    let Some(sandbox) = sandbox else {
        return bad_request(format!("pod {pod_name:?} is not running: it has no ready sandbox"));
    };

    // Step 3: a websocket upgrade for the tunnel.
    let header = |name: &str| req.headers().get_all(name).filter_map(|v| v.to_str().ok()).collect::<Vec<_>>();
    let is_websocket = header("upgrade").iter().any(|v| v.eq_ignore_ascii_case("websocket"));
    let key = header("sec-websocket-key").first().map(|k| k.to_string());
    let (Some(key), true) = (key, is_websocket) else {
        return bad_request(format!(
            "port-forward is served over websocket ({TUNNEL_PROTOCOL}) only: this client asked for {:?}",
            header("upgrade").join(", ")
        ));
    };
    if !offers(header("sec-websocket-protocol"), TUNNEL_PROTOCOL) {
        return bad_request(format!("none of the offered websocket protocols is supported; use {TUNNEL_PROTOCOL:?}"));
    }

    // Steps 4 and 5: the runtime's URL, upgraded.
    let url = match runtime.port_forward(&sandbox.id, Vec::new()).await {
        Ok(u) => u,
        Err(e) => return text(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    };
    let upgraded = match tokio::time::timeout(STREAM_CREATION_TIMEOUT, spdy::upgrade(&url, &[PORT_FORWARD_PROTOCOL])).await {
        Ok(Ok(u)) => u,
        Ok(Err(e)) => return text(StatusCode::INTERNAL_SERVER_ERROR, format!("error starting port-forward in the runtime: {e}")),
        Err(_) => return text(StatusCode::GATEWAY_TIMEOUT, "timed out connecting to the runtime's streaming server".into()),
    };
    tracing::info!(target: "kubelet::server", pod = %pod_key, sandbox = %sandbox.id, "port-forward session started");

    // Steps 6 and 7.
    let (tx, rx) = mpsc::channel(OUTPUT_CHANNEL_CAPACITY);
    actix_web::rt::spawn(async move {
        let spdy::Upgraded { read, write, early, .. } = upgraded;
        let end = relay(payload, read, write, early, tx).await;
        tracing::info!(target: "kubelet::server", pod = %pod_key, end = ?end, "port-forward session ended");
    });
    HttpResponse::build(StatusCode::SWITCHING_PROTOCOLS)
        .upgrade("websocket")
        .insert_header(("Sec-WebSocket-Accept", ws::accept_key(&key)))
        .insert_header(("Sec-WebSocket-Protocol", TUNNEL_PROTOCOL))
        .streaming(ReceiverStream::new(rx).map(Ok::<_, Infallible>))
}

/// Whether `Sec-WebSocket-Protocol` (repeated, each a comma-separated list) offers `protocol`.
fn offers<'a>(offered: impl IntoIterator<Item = &'a str>, protocol: &str) -> bool {
    offered.into_iter().flat_map(|v| v.split(',')).any(|p| p.trim() == protocol)
}

/// Why a session ended (logged).
#[derive(Debug)]
pub(crate) enum End {
    /// The runtime closed its side.
    RuntimeClosed,
    /// kubectl closed the websocket or went away.
    ClientGone,
    ClientProtocol(ws::Error),
    Runtime(std::io::Error),
}

/// Step 7: relay between kubectl's websocket (`payload` in, `out` for frames back) and the
/// runtime's upgraded connection (`early` holds the bytes it sent with its 101).
pub(crate) async fn relay<E>(
    mut payload: impl futures::Stream<Item = Result<Bytes, E>> + Unpin,
    mut read: impl AsyncRead + Unpin,
    mut write: impl AsyncWrite + Unpin,
    early: BytesMut,
    out: mpsc::Sender<Bytes>,
) -> End {
    if !early.is_empty() && out.send(ws::frame(ws::OP_BINARY, &early)).await.is_err() {
        return End::ClientGone;
    }
    let mut messages = ws::MessageReader::new();
    let mut buf = BytesMut::with_capacity(READ_CHUNK);
    let end = loop {
        let step = tokio::select! {
            chunk = payload.next() => match chunk {
                Some(Ok(bytes)) => {
                    messages.extend(&bytes);
                    from_client(&mut messages, &mut write, &out).await
                }
                Some(Err(_)) | None => ControlFlow::Break(End::ClientGone),
            },
            n = read.read_buf(&mut buf) => match n {
                Ok(0) => ControlFlow::Break(End::RuntimeClosed),
                Ok(_) => {
                    let frame = ws::frame(ws::OP_BINARY, &buf.split());
                    buf.reserve(READ_CHUNK);
                    if out.send(frame).await.is_err() { ControlFlow::Break(End::ClientGone) } else { ControlFlow::Continue(()) }
                }
                Err(e) => ControlFlow::Break(End::Runtime(e)),
            },
        };
        if let ControlFlow::Break(end) = step {
            break end;
        }
    };
    match &end {
        End::RuntimeClosed => {
            let _ = out.send(ws::close_frame(ws::CLOSE_NORMAL)).await;
        }
        End::Runtime(e) => {
            tracing::warn!(target: "kubelet::server", error = %e, "the runtime's port-forward connection failed: closing");
            let _ = out.send(ws::close_frame(ws::CLOSE_NORMAL)).await;
        }
        End::ClientProtocol(e) => {
            tracing::warn!(target: "kubelet::server", error = %e, "kubectl broke the websocket protocol: closing");
            let _ = out.send(ws::close_frame(1002)).await;
        }
        End::ClientGone => {}
    }
    // The runtime sees kubectl is gone and drops every forwarded connection.
    let _ = write.shutdown().await;
    end
}

/// Websocket messages from kubectl → the runtime's connection (or pongs back).
async fn from_client(messages: &mut ws::MessageReader, write: &mut (impl AsyncWrite + Unpin), out: &mpsc::Sender<Bytes>) -> ControlFlow<End> {
    loop {
        let message = match messages.next_message() {
            Ok(Some(m)) => m,
            Ok(None) => return ControlFlow::Continue(()),
            Err(e) => return ControlFlow::Break(End::ClientProtocol(e)),
        };
        match message {
            Message::Binary(data) | Message::Text(data) => {
                if let Err(e) = write.write_all(&data).await {
                    return ControlFlow::Break(End::Runtime(e));
                }
            }
            Message::Ping(p) => {
                if out.send(ws::frame(ws::OP_PONG, &p)).await.is_err() {
                    return ControlFlow::Break(End::ClientGone);
                }
            }
            Message::Close(_) => {
                let _ = out.send(ws::close_frame(ws::CLOSE_NORMAL)).await;
                return ControlFlow::Break(End::ClientGone);
            }
            Message::Pong(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (opcode, payload) of one server frame (one frame per queued item).
    fn parse_server_frame(f: &[u8]) -> (u8, Vec<u8>) {
        let (len, at) = match f[1] {
            126 => (usize::from(u16::from_be_bytes([f[2], f[3]])), 4),
            127 => (u64::from_be_bytes(f[2..10].try_into().expect("8 bytes")) as usize, 10),
            n => (usize::from(n), 2),
        };
        assert_eq!(f.len(), at + len, "one whole frame per item");
        (f[0] & 0x0f, f[at..].to_vec())
    }

    #[test]
    fn the_tunnel_protocol_is_found_among_those_offered() {
        assert!(offers(["SPDY/3.1+portforward.k8s.io"], TUNNEL_PROTOCOL));
        assert!(offers(["v4.channel.k8s.io, SPDY/3.1+portforward.k8s.io"], TUNNEL_PROTOCOL));
        assert!(offers(["x", "SPDY/3.1+portforward.k8s.io"], TUNNEL_PROTOCOL));
        assert!(!offers(["portforward.k8s.io"], TUNNEL_PROTOCOL));
        assert!(!offers([], TUNNEL_PROTOCOL));
    }

    /// The relay against a duplex pipe standing for the runtime: kubectl's messages (split,
    /// fragmented, with a ping) reach it as plain bytes in order; its bytes, early ones first,
    /// come back as binary messages; its close ends the session with a normal close.
    #[tokio::test]
    async fn relays_websocket_messages_as_bytes_and_back() {
        let (ours, mut runtime) = tokio::io::duplex(1 << 16);
        let (read, write) = tokio::io::split(ours);
        let (client_tx, client_rx) = mpsc::channel::<Result<Bytes, Infallible>>(8);
        let (out_tx, mut out_rx) = mpsc::channel(8);
        let relay = tokio::spawn(relay(ReceiverStream::new(client_rx), read, write, BytesMut::from(&b"early"[..]), out_tx));

        let mask = [1, 2, 3, 4];
        let first = ws::masked_frame(true, ws::OP_BINARY, b"\x80\x03\x00\x01syn", mask);
        client_tx.send(Ok(first.slice(..4))).await.expect("send");
        client_tx.send(Ok(first.slice(4..))).await.expect("send");
        client_tx.send(Ok(ws::masked_frame(false, ws::OP_BINARY, b"da", mask))).await.expect("send");
        client_tx.send(Ok(ws::masked_frame(true, ws::OP_PING, b"hb", mask))).await.expect("send");
        client_tx.send(Ok(ws::masked_frame(true, ws::OP_CONTINUATION, b"ta", mask))).await.expect("send");
        let mut got = vec![0u8; 11];
        runtime.read_exact(&mut got).await.expect("bytes reach the runtime");
        assert_eq!(&got, b"\x80\x03\x00\x01syndata", "a fragmented message is written once whole");

        runtime.write_all(b"reply").await.expect("write");
        runtime.shutdown().await.expect("close");
        drop(runtime);

        let mut frames = Vec::new();
        while let Some(f) = tokio::time::timeout(Duration::from_secs(5), out_rx.recv()).await.expect("in time") {
            frames.push(parse_server_frame(&f));
        }
        assert!(matches!(relay.await.expect("relay"), End::RuntimeClosed));
        assert_eq!(
            frames,
            vec![
                (ws::OP_BINARY, b"early".to_vec()),
                (ws::OP_PONG, b"hb".to_vec()),
                (ws::OP_BINARY, b"reply".to_vec()),
                (ws::OP_CLOSE, ws::CLOSE_NORMAL.to_be_bytes().to_vec()),
            ]
        );
    }

    /// kubectl's close: answered, and the runtime sees the end of its input.
    #[tokio::test]
    async fn a_client_close_half_closes_the_runtime() {
        let (ours, mut runtime) = tokio::io::duplex(1 << 16);
        let (read, write) = tokio::io::split(ours);
        let (client_tx, client_rx) = mpsc::channel::<Result<Bytes, Infallible>>(8);
        let (out_tx, mut out_rx) = mpsc::channel(8);
        let relay = tokio::spawn(relay(ReceiverStream::new(client_rx), read, write, BytesMut::new(), out_tx));
        client_tx.send(Ok(ws::masked_frame(true, ws::OP_CLOSE, &1000u16.to_be_bytes(), [9; 4]))).await.expect("send");
        assert!(matches!(relay.await.expect("relay"), End::ClientGone));
        let f = out_rx.recv().await.expect("close answered");
        assert_eq!(parse_server_frame(&f), (ws::OP_CLOSE, ws::CLOSE_NORMAL.to_be_bytes().to_vec()));
        let mut rest = Vec::new();
        runtime.read_to_end(&mut rest).await.expect("eof");
        assert!(rest.is_empty());
    }
}
