//! Mirrors k8s.io/apiserver/pkg/util/proxy/streamtunnel.go, run the other way round: there the
//! API server takes kubectl's websocket (`SPDY/3.1+portforward.k8s.io`) and speaks SPDY to the
//! kubelet; here the API server takes kubectl's plain SPDY upgrade (kubectl ≤ 1.30 port-forward)
//! and carries its bytes to the node agent inside a websocket with that same subprotocol, since
//! the agent (actix-web too) can be handed a raw connection only for a websocket upgrade.
//!
//! Nothing here reads SPDY: kubectl's bytes go out as masked binary messages (RFC 6455 §5.3: a
//! client masks every frame), the agent's binary messages come back as bytes.
//!
//! One tunnel, step by step:
//! 1. [`dial`]: `GET <path>` to the agent with `Upgrade: websocket` and the subprotocol; anything
//!    but 101 becomes the agent's error ([`super::upgradeaware::refusal`]).
//! 2. [`relay`]: until either side closes — kubectl's bytes → binary frames; the agent's data
//!    frames → bytes, its pings answered, its close the end.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use rand::Rng;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadHalf, WriteHalf};

use super::dial::{Dialer, Stream};
use super::upgradeaware::{read_error_body, read_response_head, refusal};
use crate::error::{Error, Result};

const OP_CONTINUATION: u8 = 0x0;
const OP_TEXT: u8 = 0x1;
const OP_BINARY: u8 = 0x2;
const OP_CLOSE: u8 = 0x8;
const OP_PING: u8 = 0x9;
const OP_PONG: u8 = 0xA;
/// kubectl's bytes are sent on as they are read, up to this much per frame.
const READ_CHUNK: usize = 32 << 10;
/// A bigger frame from the agent is refused (it writes at most 32 KiB).
const MAX_FRAME: usize = 16 << 20;

/// The agent's end of an open tunnel.
pub struct Tunnel {
    read: ReadHalf<Stream>,
    write: WriteHalf<Stream>,
    /// Bytes the agent sent right after its 101.
    early: BytesMut,
}

/// Step 1: upgrade a connection to the agent at `authority` (reached with `dialer`) to a
/// websocket on `path`.
pub async fn dial(dialer: &Dialer, authority: &str, path: &str, protocol: &str, pod: &str) -> Result<Tunnel> {
    let dial_err = |e: std::io::Error| Error::Internal(format!("error dialing backend: {e}"));
    let (mut read, mut write) = tokio::io::split(dialer.dial(authority).await?);
    let head = format!(
        "GET {path} HTTP/1.1\r\nHost: {authority}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: {}\r\nSec-WebSocket-Protocol: {protocol}\r\n\r\n",
        websocket_key()
    );
    write.write_all(head.as_bytes()).await.map_err(dial_err)?;
    let (response, rest) = read_response_head(&mut read).await?;
    if response.status != 101 {
        let body = read_error_body(&mut read, rest, response.content_length).await;
        return Err(refusal(response.status, body, pod));
    }
    Ok(Tunnel { read, write, early: BytesMut::from(&rest[..]) })
}

/// A `Sec-WebSocket-Key`: 16 random bytes in base64.
fn websocket_key() -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut rng = rand::rng();
    let mut key: String = (0..21).map(|_| ALPHABET[rng.random_range(0..64)] as char).collect();
    // The 22nd character holds the last 2 bits of the 16th byte: its low 4 bits are zero.
    key.push(['A', 'Q', 'g', 'w'][rng.random_range(0..4)]);
    key.push_str("==");
    key
}

/// A frame as a client writes it: FIN set, masked with `mask`.
pub fn client_frame(opcode: u8, payload: &[u8], mask: [u8; 4]) -> Bytes {
    let mut out = BytesMut::with_capacity(payload.len() + 14);
    out.put_u8(0x80 | opcode);
    if payload.len() < 126 {
        out.put_u8(0x80 | payload.len() as u8);
    } else if let Ok(len) = u16::try_from(payload.len()) {
        out.put_u8(0x80 | 126);
        out.put_u16(len);
    } else {
        out.put_u8(0x80 | 127);
        out.put_u64(payload.len() as u64);
    }
    out.extend_from_slice(&mask);
    out.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
    out.freeze()
}

/// One frame off the front of `buf` as a server writes it (unmasked): (opcode, payload);
/// `None` when more bytes are needed.
pub fn server_frame(buf: &mut BytesMut) -> Result<Option<(u8, Bytes)>> {
    if buf.len() < 2 {
        return Ok(None);
    }
    let bad = |what: &str| Error::Internal(format!("the node agent broke the websocket protocol: {what}"));
    if buf[1] & 0x80 != 0 {
        return Err(bad("a masked server frame"));
    }
    let (len, at) = match buf[1] & 0x7f {
        126 if buf.len() >= 4 => (u64::from(u16::from_be_bytes([buf[2], buf[3]])), 4),
        127 if buf.len() >= 10 => (u64::from_be_bytes([buf[2], buf[3], buf[4], buf[5], buf[6], buf[7], buf[8], buf[9]]), 10),
        126 | 127 => return Ok(None),
        n => (u64::from(n), 2),
    };
    if len > MAX_FRAME as u64 {
        return Err(bad("a frame over 16 MiB"));
    }
    let len = len as usize;
    if buf.len() < at + len {
        return Ok(None);
    }
    let opcode = buf[0] & 0x0f;
    buf.advance(at);
    Ok(Some((opcode, buf.split_to(len).freeze())))
}

fn mask() -> [u8; 4] {
    rand::rng().random()
}

/// Step 2: relay between kubectl's connection and the agent's websocket until either closes.
/// `client_early` is what kubectl sent after its request head, before our 101.
pub async fn relay(client: impl AsyncRead + AsyncWrite + Unpin, client_early: Bytes, tunnel: Tunnel) {
    let Tunnel { mut read, mut write, early } = tunnel;
    let (mut client_read, mut client_write) = tokio::io::split(client);
    let mut from_agent = early;
    let mut from_client = BytesMut::with_capacity(READ_CHUNK);
    if !client_early.is_empty() && write.write_all(&client_frame(OP_BINARY, &client_early, mask())).await.is_err() {
        return;
    }
    'relay: loop {
        // Whole frames already buffered first (the agent's 101 may have come with some).
        loop {
            match server_frame(&mut from_agent) {
                Ok(Some((OP_BINARY | OP_TEXT | OP_CONTINUATION, data))) => {
                    if client_write.write_all(&data).await.is_err() {
                        break 'relay;
                    }
                }
                Ok(Some((OP_PING, data))) => {
                    if write.write_all(&client_frame(OP_PONG, &data, mask())).await.is_err() {
                        break 'relay;
                    }
                }
                Ok(Some((OP_CLOSE, _))) | Err(_) => break 'relay,
                Ok(Some(_)) => {}
                Ok(None) => break,
            }
        }
        tokio::select! {
            n = client_read.read_buf(&mut from_client) => match n {
                Ok(n) if n > 0 => {
                    let frame = client_frame(OP_BINARY, &from_client.split(), mask());
                    from_client.reserve(READ_CHUNK);
                    if write.write_all(&frame).await.is_err() {
                        break;
                    }
                }
                _ => {
                    let _ = write.write_all(&client_frame(OP_CLOSE, &1000u16.to_be_bytes(), mask())).await;
                    break;
                }
            },
            n = read.read_buf(&mut from_agent) => match n {
                Ok(n) if n > 0 => {}
                _ => break,
            },
        }
    }
    let _ = write.shutdown().await;
    let _ = client_write.shutdown().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_frames_are_masked_and_server_frames_parse_in_pieces() {
        let f = client_frame(OP_BINARY, b"abc", [1, 2, 3, 4]);
        assert_eq!(&f[..], &[0x82, 0x83, 1, 2, 3, 4, b'a' ^ 1, b'b' ^ 2, b'c' ^ 3]);
        let f = client_frame(OP_BINARY, &[0u8; 300], [0; 4]);
        assert_eq!(&f[..4], &[0x82, 0x80 | 126, 1, 44]);
        let f = client_frame(OP_BINARY, &vec![0u8; 70_000], [0; 4]);
        assert_eq!(&f[..10], &[0x82, 0x80 | 127, 0, 0, 0, 0, 0, 1, 0x11, 0x70]);

        let mut wire = BytesMut::new();
        wire.extend_from_slice(&[0x82, 3, b'x', b'y', b'z']);
        wire.extend_from_slice(&[0x89, 0]);
        wire.extend_from_slice(&[0x82, 126, 1, 0]);
        wire.extend_from_slice(&[7u8; 256]);
        wire.extend_from_slice(&[0x88, 2, 0x03, 0xe8]);
        let mut got = Vec::new();
        let mut partial = BytesMut::new();
        for b in wire {
            partial.put_u8(b);
            while let Some(f) = server_frame(&mut partial).expect("valid") {
                got.push(f);
            }
        }
        assert_eq!(
            got,
            vec![
                (OP_BINARY, Bytes::from_static(b"xyz")),
                (OP_PING, Bytes::new()),
                (OP_BINARY, Bytes::from(vec![7u8; 256])),
                (OP_CLOSE, Bytes::from_static(&[0x03, 0xe8])),
            ]
        );
        assert!(server_frame(&mut BytesMut::from(&[0x82, 0x81, 0, 0, 0, 0, 1][..])).is_err(), "a masked server frame");
    }

    #[test]
    fn keys_are_base64_of_sixteen_bytes() {
        let key = websocket_key();
        assert_eq!(key.len(), 24);
        assert!(key.ends_with("==") && ['A', 'Q', 'g', 'w'].contains(&key.chars().nth(21).expect("22 chars")), "{key}");
    }

    /// Through a pair of sockets: kubectl's bytes reach the agent as masked frames, the agent's
    /// frames (and a ping) come back as bytes and a pong, and the agent's close ends it.
    #[tokio::test]
    async fn relays_bytes_as_frames_and_back() {
        let agent = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = agent.local_addr().expect("addr");
        let agent = tokio::spawn(async move {
            let (mut s, _) = agent.accept().await.expect("accept");
            let mut buf = BytesMut::new();
            while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                assert!(s.read_buf(&mut buf).await.expect("read") > 0);
            }
            let head = String::from_utf8_lossy(&buf).to_string();
            assert!(head.starts_with("GET /portForward/ns/web HTTP/1.1\r\n") && head.contains("Sec-WebSocket-Protocol: SPDY/3.1+portforward.k8s.io\r\n"), "{head}");
            let mut reply = b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n".to_vec();
            reply.extend_from_slice(&[0x82, 5]);
            reply.extend_from_slice(b"early");
            s.write_all(&reply).await.expect("101");
            // A frame of kubectl's bytes, unmasked.
            let mut frame = [0u8; 2 + 4 + 5];
            s.read_exact(&mut frame).await.expect("frame");
            assert_eq!(frame[0..2], [0x82, 0x85]);
            let payload: Vec<u8> = frame[6..].iter().enumerate().map(|(i, b)| b ^ frame[2 + i % 4]).collect();
            s.write_all(&[0x89, 2, b'h', b'b']).await.expect("ping");
            let mut pong = [0u8; 2 + 4 + 2];
            s.read_exact(&mut pong).await.expect("pong");
            assert_eq!(pong[0..2], [0x8A, 0x82]);
            s.write_all(&[0x82, 5]).await.expect("frame head");
            s.write_all(&payload.iter().rev().copied().collect::<Vec<_>>()).await.expect("frame body");
            s.write_all(&[0x88, 2, 0x03, 0xe8]).await.expect("close");
            payload
        });
        let tunnel = dial(&crate::proxy::dial::Dialer::plain(), &addr.to_string(), "/portForward/ns/web", "SPDY/3.1+portforward.k8s.io", "web").await.expect("dial");
        let (client, mut kubectl) = tokio::io::duplex(1 << 16);
        let relay = tokio::spawn(relay(client, Bytes::new(), tunnel));
        kubectl.write_all(b"hello").await.expect("write");
        let mut got = Vec::new();
        kubectl.read_to_end(&mut got).await.expect("read");
        assert_eq!(got, b"earlyolleh");
        assert_eq!(agent.await.expect("agent"), b"hello");
        relay.await.expect("relay");
    }

    #[tokio::test]
    async fn a_refusal_is_the_agents_error() {
        let agent = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = agent.local_addr().expect("addr");
        tokio::spawn(async move {
            let (mut s, _) = agent.accept().await.expect("accept");
            let mut b = [0u8; 1024];
            let _ = s.read(&mut b).await;
            let _ = s.write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 19\r\n\r\npod \"web\" not there").await;
        });
        match dial(&crate::proxy::dial::Dialer::plain(), &addr.to_string(), "/portForward/ns/web", "x", "web").await {
            Err(Error::BadRequest(msg)) => assert_eq!(msg, "pod \"web\" not there"),
            Err(e) => panic!("unexpected error {e}"),
            Ok(_) => panic!("a refusal must fail"),
        }
    }
}
