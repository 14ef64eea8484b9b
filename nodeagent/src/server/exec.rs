//! Mirrors kubelet's pkg/kubelet/server (getExec, getAttach) together with the stream
//! translation kube-apiserver does in pkg/kubelet/cri/streaming/remotecommand and
//! k8s.io/apiserver's StreamTranslatorHandler: `/exec/{namespace}/{pod}/{container}` and
//! `/attach/{namespace}/{pod}/{container}` accept kubectl's websocket (`v5.channel.k8s.io`, or
//! v4), and carry it to containerd's streaming server over SPDY.
//!
//! One exec or attach, step by step:
//! 1. Read the options from the query (`command`, `stdin`, `stdout`, `stderr`, `tty`).
//! 2. Find the pod among the agent's pods (404), the container in its spec (400), and the
//!    container's running instance in the runtime (400 `container not found`, kubelet's words).
//! 3. Check the request is a websocket upgrade offering a protocol we speak.
//! 4. Ask CRI for a streaming URL (`Exec` or `Attach`): containerd answers with a one-time URL on
//!    its own streaming server.
//! 5. Dial it with SPDY ([`super::spdy`]) and open the remotecommand streams in kubelet's order —
//!    error, stdin, stdout, stderr (not with a tty), resize (only with a tty) — each announced by
//!    a `streamType` header and confirmed by the server's SYN_REPLY before the next.
//! 6. Only now answer kubectl's upgrade with 101, so that any failure so far is an HTTP error
//!    kubectl prints, not a broken stream.
//! 7. Relay until the runtime ends the session: websocket stream 0 → SPDY stdin (and `[255, 0]`
//!    → stdin's FIN, which is what lets `cat` see EOF), 4 → resize; SPDY stdout/stderr → 1/2;
//!    the SPDY error stream's `metav1.Status` (with the exit code) → 3, then a websocket close.
//!
//! Implementation caveats: SPDY from kubectl (its fallback when websocket fails) is not served,
//! and there is no idle timeout of our own (containerd's `stream_idle_timeout` applies).

use std::collections::HashMap;
use std::convert::Infallible;
use std::ops::ControlFlow;
use std::time::Duration;

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use bytes::{Bytes, BytesMut};
use futures::StreamExt;
use k8s_cri::v1 as api;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

use super::host_interface::{Provider, container_selector, find_pod_container, select_instance, text};
use super::spdy::{self, Frame};
use super::websocket::{self as ws, ChannelMessage, Message};

/// remotecommand's protocol over SPDY: v4 puts the exit code into the error stream's Status.
pub(crate) const SPDY_PROTOCOL: &str = "v4.channel.k8s.io";
/// How long opening the SPDY streams may take (kubelet's `StreamCreationTimeout`).
const STREAM_CREATION_TIMEOUT: Duration = Duration::from_secs(30);
/// Websocket frames queued for kubectl: a slow reader slows the command's output down.
const OUTPUT_CHANNEL_CAPACITY: usize = 32;

/// The options of one exec or attach (kubelet's remotecommand `Options`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct StreamOptions {
    pub(crate) command: Vec<String>,
    pub(crate) stdin: bool,
    pub(crate) stdout: bool,
    pub(crate) stderr: bool,
    pub(crate) tty: bool,
}

impl StreamOptions {
    /// Step 1. `command` repeats, one argument each; a tty merges stderr into stdout.
    pub(crate) fn from_query(query: &str) -> Result<StreamOptions, String> {
        let pairs = web::Query::<Vec<(String, String)>>::from_query(query).map_err(|e| e.to_string())?.into_inner();
        // The API server passes the client's query on as it came, so a flag is read as its
        // parameter codec reads one (strconv.ParseBool): the Python client writes `True`.
        let flag = |k: &str| pairs.iter().any(|(key, v)| key == k && matches!(v.as_str(), "1" | "t" | "T" | "true" | "TRUE" | "True"));
        let mut opts = StreamOptions {
            command: pairs.iter().filter(|(k, _)| k == "command").map(|(_, v)| v.clone()).collect(),
            stdin: flag("stdin"),
            stdout: flag("stdout"),
            stderr: flag("stderr"),
            tty: flag("tty"),
        };
        if opts.tty {
            opts.stderr = false;
        }
        if !opts.stdin && !opts.stdout && !opts.stderr {
            return Err("you must specify at least 1 of stdin, stdout, stderr".into());
        }
        Ok(opts)
    }

    /// The remotecommand streams to open, in order, by their `streamType`.
    pub(crate) fn stream_types(&self) -> Vec<&'static str> {
        let mut types = vec!["error"];
        for (on, kind) in [(self.stdin, "stdin"), (self.stdout, "stdout"), (self.stderr, "stderr"), (self.tty, "resize")] {
            if on {
                types.push(kind);
            }
        }
        types
    }
}

/// Exec runs a new process; attach joins the container's main one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Exec,
    Attach,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Exec => "exec",
            Kind::Attach => "attach",
        }
    }
}

pub(crate) async fn exec(
    req: HttpRequest,
    payload: web::Payload,
    provider: web::Data<dyn Provider>,
    path: web::Path<(String, String, String)>,
) -> HttpResponse {
    serve(Kind::Exec, req, payload, provider, path.into_inner()).await
}

pub(crate) async fn attach(
    req: HttpRequest,
    payload: web::Payload,
    provider: web::Data<dyn Provider>,
    path: web::Path<(String, String, String)>,
) -> HttpResponse {
    serve(Kind::Attach, req, payload, provider, path.into_inner()).await
}

async fn serve(
    kind: Kind,
    req: HttpRequest,
    payload: web::Payload,
    provider: web::Data<dyn Provider>,
    (namespace, pod_name, container): (String, String, String),
) -> HttpResponse {
    let bad_request = |msg: String| text(StatusCode::BAD_REQUEST, msg);
    let pod_key = format!("{namespace}/{pod_name}");

    // Step 1: the options.
    let opts = match StreamOptions::from_query(req.query_string()) {
        Ok(o) if kind == Kind::Exec && o.command.is_empty() => return bad_request("you must specify at least one command for the container".into()),
        Ok(o) => o,
        Err(msg) => return bad_request(msg),
    };

    // Step 2: pod, container, running instance.
    let container_id = match running_container(provider.get_ref(), &namespace, &pod_name, &container).await {
        Ok(id) => id,
        Err(resp) => return resp,
    };

    // Step 3: a websocket upgrade we can answer.
    let header = |name: &str| req.headers().get_all(name).filter_map(|v| v.to_str().ok()).collect::<Vec<_>>();
    let is_websocket = header("upgrade").iter().any(|v| v.eq_ignore_ascii_case("websocket"));
    let key = header("sec-websocket-key").first().map(|k| k.to_string());
    let (Some(key), true) = (key, is_websocket) else {
        return bad_request(format!(
            "{} is served over websocket ({}) only: this client asked for {:?}",
            kind.name(),
            ws::V5_PROTOCOL,
            header("upgrade").join(", ")
        ));
    };
    let Some(protocol) = ws::select_protocol(header("sec-websocket-protocol")) else {
        return bad_request(format!("none of the offered websocket protocols is supported; use one of {:?}", ws::PROTOCOLS));
    };

    // Step 4: a streaming URL from the runtime.
    let runtime = provider.runtime();
    let url = match kind {
        Kind::Exec => {
            let r = api::ExecRequest {
                container_id: container_id.clone(),
                cmd: opts.command.clone(),
                tty: opts.tty,
                stdin: opts.stdin,
                stdout: opts.stdout,
                stderr: opts.stderr,
            };
            runtime.exec(r).await
        }
        Kind::Attach => {
            let r = api::AttachRequest {
                container_id: container_id.clone(),
                stdin: opts.stdin,
                tty: opts.tty,
                stdout: opts.stdout,
                stderr: opts.stderr,
            };
            runtime.attach(r).await
        }
    };
    let url = match url {
        Ok(u) => u,
        Err(e) => return text(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    };

    // Step 5: SPDY to the streaming server, streams open.
    let session = match tokio::time::timeout(STREAM_CREATION_TIMEOUT, open(&url, &opts)).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => return text(StatusCode::INTERNAL_SERVER_ERROR, format!("error starting {} in the runtime: {e}", kind.name())),
        Err(_) => return text(StatusCode::GATEWAY_TIMEOUT, "timed out opening the runtime's streams".into()),
    };
    tracing::info!(target: "kubelet::server", pod = %pod_key, container, kind = kind.name(), protocol, tty = opts.tty, stdin = opts.stdin, "streaming session started");

    // Steps 6 and 7: 101, then the relay in its own task.
    let (tx, rx) = mpsc::channel(OUTPUT_CHANNEL_CAPACITY);
    actix_web::rt::spawn(async move {
        let end = relay(payload, session, protocol, tx).await;
        tracing::info!(target: "kubelet::server", pod = %pod_key, container, kind = kind.name(), end = ?end, "streaming session ended");
    });
    HttpResponse::build(StatusCode::SWITCHING_PROTOCOLS)
        .upgrade("websocket")
        .insert_header(("Sec-WebSocket-Accept", ws::accept_key(&key)))
        .insert_header(("Sec-WebSocket-Protocol", protocol))
        .streaming(ReceiverStream::new(rx).map(Ok::<_, Infallible>))
}

/// Step 2: the id of the newest running instance of `container`, or the HTTP error to answer.
async fn running_container(provider: &dyn Provider, namespace: &str, pod_name: &str, container: &str) -> Result<String, HttpResponse> {
    let pod = find_pod_container(provider, namespace, pod_name, container)?;
    let selector = container_selector(&pod, namespace, pod_name, container);
    let filter = api::ContainerFilter {
        state: Some(api::ContainerStateValue { state: api::ContainerState::ContainerRunning as i32 }),
        label_selector: selector,
        ..Default::default()
    };
    let instances = provider.runtime().list_containers(Some(filter)).await.map_err(|e| text(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
    select_instance(instances, false)
        .map(|c| c.id)
        .ok_or_else(|| text(StatusCode::BAD_REQUEST, format!("container not found ({container:?})")))
}

/// The SPDY side of one session, streams open.
struct Session {
    conn: spdy::ClientConn,
    reader: spdy::FrameReader,
    error: u32,
    stdin: Option<u32>,
    stdout: Option<u32>,
    stderr: Option<u32>,
    resize: Option<u32>,
}

/// Step 5.
async fn open(url: &str, opts: &StreamOptions) -> Result<Session, spdy::Error> {
    let (mut conn, mut reader, _protocol) = spdy::dial(url, &[SPDY_PROTOCOL]).await?;
    let mut ids = HashMap::new();
    for kind in opts.stream_types() {
        let id = conn.create_stream(&[("streamType", kind)]).await?;
        loop {
            match reader.next().await? {
                Some(Frame::SynReply { stream_id, .. }) if stream_id == id => break,
                Some(Frame::RstStream { stream_id, .. }) if stream_id == id => return Err(spdy::Error::Protocol("the runtime refused a stream")),
                Some(Frame::Ping { id }) => conn.send(&spdy::ping_frame(id)).await?,
                Some(Frame::GoAway { .. }) | None => return Err(spdy::Error::Protocol("the runtime closed the connection while streams were opening")),
                Some(_) => {}
            }
        }
        ids.insert(kind, id);
    }
    Ok(Session {
        conn,
        reader,
        error: ids.get("error").copied().unwrap_or(1),
        stdin: ids.get("stdin").copied(),
        stdout: ids.get("stdout").copied(),
        stderr: ids.get("stderr").copied(),
        resize: ids.get("resize").copied(),
    })
}

/// Why a session ended (logged).
#[derive(Debug)]
enum End {
    /// The runtime finished: its Status went to kubectl.
    Completed,
    /// kubectl went away or closed the websocket.
    ClientGone,
    ClientProtocol(ws::Error),
    Runtime(spdy::Error),
}

/// The Status of a command that ended without writing one (v4 always writes one; this is for
/// a runtime that closed without it).
const SUCCESS_STATUS: &[u8] = br#"{"metadata":{},"status":"Success"}"#;

/// Step 7: relay until one side ends, then finish the websocket properly.
async fn relay<E>(
    mut payload: impl futures::Stream<Item = Result<Bytes, E>> + Unpin,
    mut s: Session,
    protocol: &'static str,
    out: mpsc::Sender<Bytes>,
) -> End {
    let mut messages = ws::MessageReader::new();
    let mut status = BytesMut::new();
    let mut stdin_closed = false;
    let end = loop {
        let step = tokio::select! {
            chunk = payload.next() => match chunk {
                Some(Ok(bytes)) => {
                    messages.extend(&bytes);
                    from_client(&mut messages, &mut s, protocol, &out, &mut stdin_closed).await
                }
                Some(Err(_)) | None => ControlFlow::Break(End::ClientGone),
            },
            frame = s.reader.next() => match frame {
                Ok(Some(frame)) => from_runtime(frame, &mut s, &out, &mut status).await,
                Ok(None) => ControlFlow::Break(End::Completed),
                Err(e) => ControlFlow::Break(End::Runtime(e)),
            },
        };
        if let ControlFlow::Break(end) = step {
            break end;
        }
    };
    match &end {
        End::Completed => {
            let status = if status.is_empty() { Bytes::from_static(SUCCESS_STATUS) } else { status.freeze() };
            let _ = out.send(ws::channel_frame(ws::ERROR, &status)).await;
            let _ = out.send(ws::close_frame(ws::CLOSE_NORMAL)).await;
        }
        End::Runtime(e) => {
            let failure = serde_json::json!({
                "metadata": {}, "status": "Failure", "reason": "InternalError", "code": 500,
                "message": format!("error executing command in container: {e}"),
            });
            let _ = out.send(ws::channel_frame(ws::ERROR, failure.to_string().as_bytes())).await;
            let _ = out.send(ws::close_frame(ws::CLOSE_NORMAL)).await;
        }
        End::ClientProtocol(e) => {
            tracing::warn!(target: "kubelet::server", error = %e, "kubectl broke the websocket protocol: closing");
            let _ = out.send(ws::close_frame(1002)).await;
        }
        End::ClientGone => {}
    }
    if !matches!(end, End::Completed) {
        // Tell the runtime we are gone rather than only dropping the socket.
        let _ = s.conn.send(&spdy::goaway_frame(0, 0)).await;
    }
    end
}

/// Websocket messages from kubectl → SPDY frames (or pongs).
async fn from_client(
    messages: &mut ws::MessageReader,
    s: &mut Session,
    protocol: &'static str,
    out: &mpsc::Sender<Bytes>,
    stdin_closed: &mut bool,
) -> ControlFlow<End> {
    loop {
        let message = match messages.next_message() {
            Ok(Some(m)) => m,
            Ok(None) => return ControlFlow::Continue(()),
            Err(e) => return ControlFlow::Break(End::ClientProtocol(e)),
        };
        let sent = match message {
            // A text frame carries a channel message as a binary one does (wsstream reads either
            // into bytes): the Python client writes stdin given as a str in text frames.
            Message::Binary(data) | Message::Text(data) => match ws::parse_channel(protocol, data) {
                Some(ChannelMessage::Data { stream: ws::STDIN, data }) => match s.stdin {
                    Some(id) if !*stdin_closed => s.conn.data(id, &data, false).await,
                    _ => Ok(()),
                },
                Some(ChannelMessage::Data { stream: ws::RESIZE, data }) => match s.resize {
                    Some(id) => s.conn.data(id, &data, false).await,
                    None => Ok(()),
                },
                Some(ChannelMessage::Close { stream: ws::STDIN }) => match s.stdin {
                    Some(id) if !*stdin_closed => {
                        *stdin_closed = true;
                        s.conn.data(id, &[], true).await
                    }
                    _ => Ok(()),
                },
                // Streams kubectl does not write to, and the empty message.
                _ => Ok(()),
            },
            Message::Ping(p) => {
                if out.send(ws::frame(ws::OP_PONG, &p)).await.is_err() {
                    return ControlFlow::Break(End::ClientGone);
                }
                Ok(())
            }
            Message::Close(_) => {
                let _ = out.send(ws::close_frame(ws::CLOSE_NORMAL)).await;
                return ControlFlow::Break(End::ClientGone);
            }
            Message::Pong(_) => Ok(()),
        };
        if let Err(e) = sent {
            return ControlFlow::Break(End::Runtime(e));
        }
    }
}

/// One SPDY frame from the runtime → websocket frames to kubectl.
async fn from_runtime(frame: Frame, s: &mut Session, out: &mpsc::Sender<Bytes>, status: &mut BytesMut) -> ControlFlow<End> {
    let forward = |stream| async move {
        match out.send(stream).await {
            Ok(()) => ControlFlow::Continue(()),
            Err(_) => ControlFlow::Break(End::ClientGone),
        }
    };
    match frame {
        Frame::Data { data, .. } if data.is_empty() => ControlFlow::Continue(()),
        Frame::Data { stream_id, data, .. } if Some(stream_id) == s.stdout => forward(ws::channel_frame(ws::STDOUT, &data)).await,
        Frame::Data { stream_id, data, .. } if Some(stream_id) == s.stderr => forward(ws::channel_frame(ws::STDERR, &data)).await,
        Frame::Data { stream_id, data, .. } if stream_id == s.error => {
            status.extend_from_slice(&data);
            ControlFlow::Continue(())
        }
        Frame::Ping { id } => match s.conn.send(&spdy::ping_frame(id)).await {
            Ok(()) => ControlFlow::Continue(()),
            Err(e) => ControlFlow::Break(End::Runtime(e)),
        },
        // kubelet's server resets every stream and says GOAWAY once the command is done and its
        // Status written: everything for kubectl has arrived by then.
        Frame::GoAway { .. } => ControlFlow::Break(End::Completed),
        Frame::Data { .. } | Frame::SynStream { .. } | Frame::SynReply { .. } | Frame::RstStream { .. } | Frame::Ignored { .. } => {
            ControlFlow::Continue(())
        }
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    /// A scripted streaming server: the upgrade, a SYN_REPLY per stream, some output, then stdin
    /// echoed back once its FIN arrives (it goes on reading until then), a failure Status,
    /// GOAWAY. Returns what it saw: (stream types in order, stdin bytes, resize bytes).
    async fn fake_streaming_server(listener: tokio::net::TcpListener) -> (Vec<String>, Vec<u8>, Vec<u8>) {
        let (mut sock, _) = listener.accept().await.expect("accept");
        let mut buf = BytesMut::new();
        while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
            assert!(sock.read_buf(&mut buf).await.expect("read") > 0, "closed during the request");
        }
        let head = String::from_utf8_lossy(&buf).to_string();
        assert!(head.contains("Upgrade: SPDY/3.1") && head.contains("X-Stream-Protocol-Version: v4.channel.k8s.io"), "{head}");
        let end = head.find("\r\n\r\n").expect("end of head") + 4;
        let _ = buf.split_to(end);
        sock.write_all(b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\nX-Stream-Protocol-Version: v4.channel.k8s.io\r\n\r\n")
            .await
            .expect("101");
        let mut replies = spdy::HeaderWriter::default();
        let (mut types, mut ids) = (Vec::new(), HashMap::new());
        let (mut stdin, mut resize) = (Vec::new(), Vec::new());
        loop {
            let frame = loop {
                if let Some(f) = spdy::decode(&mut buf).expect("valid frames") {
                    break f;
                }
                assert!(sock.read_buf(&mut buf).await.expect("read") > 0, "client closed early");
            };
            match frame {
                Frame::SynStream { stream_id, header_block, .. } => {
                    // The header block is stored deflate: the stream type is readable in it.
                    let kind = ["error", "stdin", "stdout", "stderr", "resize"]
                        .into_iter()
                        .find(|k| header_block.ends_with(&[k.as_bytes(), &[0, 0, 0, 0xff, 0xff]].concat()))
                        .expect("a known stream type");
                    types.push(kind.to_string());
                    ids.insert(kind, stream_id);
                    sock.write_all(&replies.syn_reply(stream_id, &[])).await.expect("reply");
                    if kind == "stderr" {
                        sock.write_all(&spdy::data_frame(ids["stdout"], false, b"hello ")).await.expect("stdout");
                        sock.write_all(&spdy::data_frame(stream_id, false, b"oops")).await.expect("stderr");
                        sock.write_all(&spdy::ping_frame(2)).await.expect("ping");
                    }
                }
                Frame::Data { stream_id, data, flags } if stream_id == ids["stdin"] => {
                    stdin.extend_from_slice(&data);
                    if flags & spdy::FLAG_FIN != 0 {
                        break;
                    }
                }
                Frame::Data { stream_id, data, .. } if Some(&stream_id) == ids.get("resize") => resize.extend_from_slice(&data),
                _ => {}
            }
        }
        sock.write_all(&spdy::data_frame(ids["stdout"], false, &stdin)).await.expect("echo");
        let status = br#"{"metadata":{},"status":"Failure","reason":"NonZeroExitCode","details":{"causes":[{"reason":"ExitCode","message":"2"}]}}"#;
        sock.write_all(&spdy::data_frame(ids["error"], false, status)).await.expect("status");
        sock.write_all(&spdy::goaway_frame(0, 0)).await.expect("goaway");
        (types, stdin, resize)
    }

    /// (opcode, payload) of one server frame as [`relay`] queues it (one frame per item).
    fn parse_server_frame(f: &[u8]) -> (u8, Vec<u8>) {
        let (len, at) = match f[1] {
            126 => (usize::from(u16::from_be_bytes([f[2], f[3]])), 4),
            n => (usize::from(n), 2),
        };
        assert_eq!(f.len(), at + len, "one whole frame per item");
        (f[0] & 0x0f, f[at..].to_vec())
    }

    #[tokio::test]
    async fn relays_websocket_channels_to_spdy_streams_and_back() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}/exec/token", listener.local_addr().expect("addr"));
        let server = tokio::spawn(fake_streaming_server(listener));

        let opts = StreamOptions::from_query("command=cat&stdin=true&stdout=true&stderr=true").expect("options");
        let session = open(&url, &opts).await.expect("streams open");
        let (client_tx, client_rx) = mpsc::channel::<Result<Bytes, Infallible>>(8);
        let (out_tx, mut out_rx) = mpsc::channel(8);
        let relay = tokio::spawn(relay(ReceiverStream::new(client_rx), session, ws::V5_PROTOCOL, out_tx));

        // kubectl: stdin in two messages (one split across writes, one in a text frame as the Python
        // client sends it), a ping, then stdin's close.
        let mask = [9, 8, 7, 6];
        let first = ws::masked_frame(true, ws::OP_BINARY, b"\x00abc", mask);
        client_tx.send(Ok(first.slice(..3))).await.expect("send");
        client_tx.send(Ok(first.slice(3..))).await.expect("send");
        client_tx.send(Ok(ws::masked_frame(true, ws::OP_PING, b"hb", mask))).await.expect("send");
        client_tx.send(Ok(ws::masked_frame(true, ws::OP_TEXT, b"\x00def", mask))).await.expect("send");
        client_tx.send(Ok(ws::masked_frame(true, ws::OP_BINARY, &[ws::CLOSE_STREAM, ws::STDIN], mask))).await.expect("send");

        let mut got = Vec::new();
        while let Some(frame) = tokio::time::timeout(Duration::from_secs(5), out_rx.recv()).await.expect("output in time") {
            got.push(parse_server_frame(&frame));
        }
        let end = relay.await.expect("relay");
        assert!(matches!(end, End::Completed), "{end:?}");
        // The server only finishes once stdin's FIN came.
        let (types, stdin, resize) = server.await.expect("server");
        assert_eq!(types, ["error", "stdin", "stdout", "stderr"]);
        assert_eq!((stdin.as_slice(), resize.as_slice()), (&b"abcdef"[..], &b""[..]));

        let data: Vec<(u8, Vec<u8>)> = got.iter().filter(|(op, _)| *op == ws::OP_BINARY).map(|(_, p)| (p[0], p[1..].to_vec())).collect();
        assert_eq!(
            data,
            vec![
                (ws::STDOUT, b"hello ".to_vec()),
                (ws::STDERR, b"oops".to_vec()),
                (ws::STDOUT, b"abcdef".to_vec()),
                (ws::ERROR, br#"{"metadata":{},"status":"Failure","reason":"NonZeroExitCode","details":{"causes":[{"reason":"ExitCode","message":"2"}]}}"#.to_vec()),
            ]
        );
        assert!(got.contains(&(ws::OP_PONG, b"hb".to_vec())), "the ping is answered: {got:?}");
        assert_eq!(got.last(), Some(&(ws::OP_CLOSE, ws::CLOSE_NORMAL.to_be_bytes().to_vec())), "a normal close ends it");
    }

    #[test]
    fn options_from_kubectl_queries() {
        let o = StreamOptions::from_query("command=sh&command=-c&command=echo%20hi&container=app&stdout=true&stderr=true").expect("valid");
        assert_eq!(o.command, ["sh", "-c", "echo hi"]);
        assert_eq!((o.stdin, o.stdout, o.stderr, o.tty), (false, true, true, false));
        assert_eq!(o.stream_types(), ["error", "stdout", "stderr"]);

        // -it: a tty folds stderr into stdout, and brings the resize stream.
        let o = StreamOptions::from_query("command=sh&stdin=true&stdout=true&stderr=true&tty=true").expect("valid");
        assert!(!o.stderr);
        assert_eq!(o.stream_types(), ["error", "stdin", "stdout", "resize"]);

        assert_eq!(
            StreamOptions::from_query("command=true").expect_err("no streams"),
            "you must specify at least 1 of stdin, stdout, stderr"
        );
        let attach = StreamOptions::from_query("stdin=1&stdout=1").expect("valid");
        assert!(attach.command.is_empty() && attach.stdin && attach.stdout);
        // The Python client's spelling; anything else is off.
        let o = StreamOptions::from_query("command=ls&stdin=False&stdout=True&stderr=T&tty=yes").expect("valid");
        assert_eq!((o.stdin, o.stdout, o.stderr, o.tty), (false, true, true, false));
    }
}
