//! Mirrors k8s.io/apimachinery/pkg/util/httpstream/spdy (and the moby/spdystream framer under
//! it): the client half of SPDY/3.1, which is how kubelet talks to a runtime's streaming server.
//!
//! Why SPDY at all: containerd 1.6's CRI streaming server (kubelet's `cri/streaming` package)
//! speaks `remotecommand` over SPDY or over the old websocket protocols. Only SPDY can half-close
//! one stream — a DATA frame with FIN on stdin is how `echo hi | kubectl exec -i … cat` lets `cat`
//! see EOF — so the node agent translates kubectl's websocket to SPDY, as kube-apiserver's
//! StreamTranslator does.
//!
//! The subset here:
//! 1. The HTTP/1.1 upgrade ([`upgrade`]): `Connection: Upgrade`, `Upgrade: SPDY/3.1` and the
//!    `X-Stream-Protocol-Version`s we speak; the server answers 101 with the one it chose.
//!    Port-forward stops here and relays the connection as opaque bytes (kubectl's own SPDY
//!    client speaks to the runtime through it); exec and attach go on with [`dial`].
//! 2. Frames ([`Frame`], [`decode`]): SYN_STREAM, SYN_REPLY, RST_STREAM, PING, GOAWAY and DATA
//!    are understood; SETTINGS, HEADERS and WINDOW_UPDATE are read and ignored (spdystream does
//!    no flow control either).
//! 3. Header blocks. SPDY compresses them with zlib and a preset dictionary; the sender chooses
//!    how. We only ever send a handful of tiny header blocks, so [`HeaderWriter`] writes *stored*
//!    (uncompressed) deflate blocks inside one zlib stream per connection, each header block
//!    ended by a sync flush — valid zlib that any inflater reads, with no compressor needed. Since stored blocks never refer back, the zlib
//!    header does not announce the dictionary (FDICT unset), which Go's `zlib.NewReaderDict`
//!    accepts. Received header blocks are skipped: the stream id in the frame is all we need.
//!
//! Implementation caveats: client side only, no server push, no flow control, and received
//! header blocks are never inflated.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};

/// The only SPDY version spdystream speaks.
pub(crate) const VERSION: u16 = 3;

pub(crate) const TYPE_SYN_STREAM: u16 = 1;
pub(crate) const TYPE_SYN_REPLY: u16 = 2;
pub(crate) const TYPE_RST_STREAM: u16 = 3;
pub(crate) const TYPE_PING: u16 = 6;
pub(crate) const TYPE_GOAWAY: u16 = 7;
/// One of the frame types the agent reads past ([`Frame::Ignored`]); the tests send one.
#[cfg(test)]
pub(crate) const TYPE_WINDOW_UPDATE: u16 = 9;

/// Last frame the sender will write on this stream.
pub(crate) const FLAG_FIN: u8 = 0x01;

/// The HTTP header naming the sub-protocols offered (request) and chosen (101 response).
pub(crate) const PROTOCOL_HEADER: &str = "X-Stream-Protocol-Version";

/// Bound on the HTTP response head and on an error body read from a refusing server.
const MAX_HTTP_HEAD: usize = 16 << 10;
const MAX_ERROR_BODY: usize = 64 << 10;

#[derive(Debug, thiserror::Error)]
pub(crate) enum Error {
    #[error("streaming URL {0:?} is not an http:// URL")]
    Url(String),
    #[error("connecting to the streaming server at {addr}: {source}")]
    Connect {
        addr: String,
        #[source]
        source: std::io::Error,
    },
    #[error("streaming connection: {0}")]
    Io(#[from] std::io::Error),
    #[error("the streaming server refused the upgrade ({status}): {body}")]
    Refused { status: u16, body: String },
    #[error("the streaming server sent a malformed HTTP response")]
    BadResponse,
    #[error("the streaming server chose none of the protocols offered ({0})")]
    NoProtocol(String),
    #[error("SPDY: {0}")]
    Protocol(&'static str),
}

/// One frame, as received (or, in tests, as sent).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Frame {
    /// `header_block` is left compressed (see the module doc).
    SynStream { stream_id: u32, flags: u8, header_block: Bytes },
    SynReply { stream_id: u32, flags: u8 },
    RstStream { stream_id: u32, status: u32 },
    Ping { id: u32 },
    GoAway { last_good_stream_id: u32, status: u32 },
    Data { stream_id: u32, flags: u8, data: Bytes },
    /// A control frame we read past (SETTINGS, HEADERS, WINDOW_UPDATE, anything newer).
    Ignored { kind: u16 },
}

impl Frame {
    #[cfg(test)]
    pub(crate) fn fin(&self) -> bool {
        match self {
            Frame::SynStream { flags, .. } | Frame::SynReply { flags, .. } | Frame::Data { flags, .. } => flags & FLAG_FIN != 0,
            _ => false,
        }
    }
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// Take one whole frame off the front of `buf`; `None` when more bytes are needed.
pub(crate) fn decode(buf: &mut BytesMut) -> Result<Option<Frame>, Error> {
    if buf.len() < 8 {
        return Ok(None);
    }
    let len = (u32_at(buf, 4) & 0x00ff_ffff) as usize;
    if buf.len() < 8 + len {
        return Ok(None);
    }
    let head = buf.split_to(8);
    let body = buf.split_to(len).freeze();
    let flags = head[4];
    if head[0] & 0x80 == 0 {
        let stream_id = u32_at(&head, 0) & 0x7fff_ffff;
        return Ok(Some(Frame::Data { stream_id, flags, data: body }));
    }
    let version = u16::from_be_bytes([head[0], head[1]]) & 0x7fff;
    if version != VERSION {
        return Err(Error::Protocol("unsupported SPDY version"));
    }
    let kind = u16::from_be_bytes([head[2], head[3]]);
    let need = |n: usize| if body.len() < n { Err(Error::Protocol("control frame too short")) } else { Ok(()) };
    let id = |at: usize| u32_at(&body, at) & 0x7fff_ffff;
    Ok(Some(match kind {
        TYPE_SYN_STREAM => {
            need(10)?;
            Frame::SynStream { stream_id: id(0), flags, header_block: body.slice(10..) }
        }
        TYPE_SYN_REPLY => {
            need(4)?;
            Frame::SynReply { stream_id: id(0), flags }
        }
        TYPE_RST_STREAM => {
            need(8)?;
            Frame::RstStream { stream_id: id(0), status: u32_at(&body, 4) }
        }
        TYPE_PING => {
            need(4)?;
            Frame::Ping { id: u32_at(&body, 0) }
        }
        TYPE_GOAWAY => {
            need(8)?;
            Frame::GoAway { last_good_stream_id: id(0), status: u32_at(&body, 4) }
        }
        other => Frame::Ignored { kind: other },
    }))
}

fn control(kind: u16, flags: u8, body: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(8 + body.len());
    out.put_u16(0x8000 | VERSION);
    out.put_u16(kind);
    out.put_u32((u32::from(flags) << 24) | (body.len() as u32 & 0x00ff_ffff));
    out.extend_from_slice(body);
    out.freeze()
}

/// A DATA frame. SPDY's length field is 24 bits: callers keep `data` under 16 MiB (stdin comes
/// in websocket messages of at most [`super::websocket::MAX_MESSAGE_BYTES`]).
pub(crate) fn data_frame(stream_id: u32, fin: bool, data: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(8 + data.len());
    out.put_u32(stream_id & 0x7fff_ffff);
    out.put_u32((u32::from(if fin { FLAG_FIN } else { 0 }) << 24) | (data.len() as u32 & 0x00ff_ffff));
    out.extend_from_slice(data);
    out.freeze()
}

pub(crate) fn ping_frame(id: u32) -> Bytes {
    control(TYPE_PING, 0, &id.to_be_bytes())
}

#[cfg(test)]
pub(crate) fn rst_stream_frame(stream_id: u32, status: u32) -> Bytes {
    let mut body = [0u8; 8];
    body[..4].copy_from_slice(&stream_id.to_be_bytes());
    body[4..].copy_from_slice(&status.to_be_bytes());
    control(TYPE_RST_STREAM, 0, &body)
}

pub(crate) fn goaway_frame(last_good_stream_id: u32, status: u32) -> Bytes {
    let mut body = [0u8; 8];
    body[..4].copy_from_slice(&last_good_stream_id.to_be_bytes());
    body[4..].copy_from_slice(&status.to_be_bytes());
    control(TYPE_GOAWAY, 0, &body)
}

/// What zlib's `Z_SYNC_FLUSH` writes: an empty, non-final stored block.
const SYNC_FLUSH: [u8; 5] = [0x00, 0x00, 0x00, 0xff, 0xff];

/// Writes the header blocks of one connection: one zlib stream, each block a run of stored
/// deflate blocks, so each frame's bytes are complete on their own (the effect of a sync flush).
#[derive(Debug, Default)]
pub(crate) struct HeaderWriter {
    started: bool,
}

impl HeaderWriter {
    /// A SYN_STREAM frame opening `stream_id` with `headers` (names lower-case, as SPDY wants).
    pub(crate) fn syn_stream(&mut self, stream_id: u32, headers: &[(&str, &str)], fin: bool) -> Bytes {
        let mut body = BytesMut::new();
        body.put_u32(stream_id & 0x7fff_ffff);
        body.put_u32(0); // associated-to-stream-id: none
        body.put_u16(0); // priority 0 (highest), slot 0
        self.header_block(&mut body, headers);
        control(TYPE_SYN_STREAM, if fin { FLAG_FIN } else { 0 }, &body)
    }

    /// A SYN_REPLY accepting `stream_id` (what a server answers; our tests play the server).
    #[cfg(test)]
    pub(crate) fn syn_reply(&mut self, stream_id: u32, headers: &[(&str, &str)]) -> Bytes {
        let mut body = BytesMut::new();
        body.put_u32(stream_id & 0x7fff_ffff);
        self.header_block(&mut body, headers);
        control(TYPE_SYN_REPLY, 0, &body)
    }

    fn header_block(&mut self, out: &mut BytesMut, headers: &[(&str, &str)]) {
        let mut raw = BytesMut::new();
        raw.put_u32(headers.len() as u32);
        for (name, value) in headers {
            raw.put_u32(name.len() as u32);
            raw.extend_from_slice(name.to_ascii_lowercase().as_bytes());
            raw.put_u32(value.len() as u32);
            raw.extend_from_slice(value.as_bytes());
        }
        if !self.started {
            // CMF 0x78: deflate, 32 KiB window; FLG 0x01: no preset dictionary, and
            // (0x78 << 8 | 0x01) is a multiple of 31 as RFC 1950 requires.
            out.extend_from_slice(&[0x78, 0x01]);
            self.started = true;
        }
        for chunk in raw.chunks(u16::MAX as usize) {
            // BFINAL 0, BTYPE 00 (stored), padded to the byte; then LEN and its complement.
            out.put_u8(0);
            out.put_u16_le(chunk.len() as u16);
            out.put_u16_le(!(chunk.len() as u16));
            out.extend_from_slice(chunk);
        }
        // The sync flush: an empty stored block. Without it Go's inflater keeps a stored block's
        // bytes in its window until it has seen the *next* block header, which for the last
        // block of a frame is past the frame's end, and it fails the whole connection.
        out.extend_from_slice(&SYNC_FLUSH);
    }
}

/// The writing half of a client connection: opens streams, sends data, answers pings.
#[derive(Debug)]
pub(crate) struct ClientConn {
    write: OwnedWriteHalf,
    headers: HeaderWriter,
    next_stream_id: u32,
}

impl ClientConn {
    /// Send SYN_STREAM for a new stream (client streams have odd ids, in increasing order).
    pub(crate) async fn create_stream(&mut self, headers: &[(&str, &str)]) -> Result<u32, Error> {
        let id = self.next_stream_id;
        self.next_stream_id += 2;
        let frame = self.headers.syn_stream(id, headers, false);
        self.write.write_all(&frame).await?;
        Ok(id)
    }

    pub(crate) async fn send(&mut self, frame: &[u8]) -> Result<(), Error> {
        Ok(self.write.write_all(frame).await?)
    }

    /// Write `data` on `stream_id`; with `fin`, the stream's last frame (its half-close).
    pub(crate) async fn data(&mut self, stream_id: u32, data: &[u8], fin: bool) -> Result<(), Error> {
        self.send(&data_frame(stream_id, fin, data)).await
    }
}

/// The reading half: frames off the socket. [`Self::next`] is cancel-safe (only `read_buf`
/// awaits, and bytes read stay in the buffer), so it can sit in a `select!`.
#[derive(Debug)]
pub(crate) struct FrameReader {
    read: OwnedReadHalf,
    buf: BytesMut,
}

impl FrameReader {
    /// The next frame, `None` once the server closed the connection between frames.
    pub(crate) async fn next(&mut self) -> Result<Option<Frame>, Error> {
        loop {
            if let Some(frame) = decode(&mut self.buf)? {
                return Ok(Some(frame));
            }
            if self.read.read_buf(&mut self.buf).await? == 0 {
                return if self.buf.is_empty() { Ok(None) } else { Err(Error::Protocol("connection closed inside a frame")) };
            }
        }
    }
}

/// `http://host:port/path?query` → (`host:port`, `/path?query`).
fn split_url(url: &str) -> Result<(&str, &str), Error> {
    let rest = url.strip_prefix("http://").ok_or_else(|| Error::Url(url.to_string()))?;
    let (authority, path) = rest.find('/').map_or((rest, "/"), |i| (&rest[..i], &rest[i..]));
    if authority.is_empty() {
        return Err(Error::Url(url.to_string()));
    }
    Ok((authority, path))
}

/// A connection the streaming server upgraded to SPDY/3.1: both socket halves, the bytes that
/// came after the 101 (frames the server wrote at once), and the protocol it chose. The exec
/// relay frames it ([`dial`]); port-forward carries it as opaque bytes ([`super::portforward`]).
#[derive(Debug)]
pub(crate) struct Upgraded {
    pub(crate) read: OwnedReadHalf,
    pub(crate) write: OwnedWriteHalf,
    pub(crate) early: BytesMut,
    pub(crate) protocol: String,
}

/// Upgrade an HTTP connection to `url` to SPDY/3.1, offering `protocols`.
pub(crate) async fn upgrade(url: &str, protocols: &[&str]) -> Result<Upgraded, Error> {
    let (authority, path) = split_url(url)?;
    let stream = TcpStream::connect(authority).await.map_err(|source| Error::Connect { addr: authority.to_string(), source })?;
    stream.set_nodelay(true)?;
    let (mut read, mut write) = stream.into_split();
    let mut request = format!(
        "POST {path} HTTP/1.1\r\nHost: {authority}\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\nContent-Length: 0\r\n"
    );
    for p in protocols {
        request.push_str(&format!("{PROTOCOL_HEADER}: {p}\r\n"));
    }
    request.push_str("\r\n");
    write.write_all(request.as_bytes()).await?;

    let mut buf = BytesMut::with_capacity(1024);
    let (status, chosen, head_len, content_length) = loop {
        if read.read_buf(&mut buf).await? == 0 {
            return Err(Error::BadResponse);
        }
        let mut headers = [httparse::EMPTY_HEADER; 32];
        let mut response = httparse::Response::new(&mut headers);
        match response.parse(&buf) {
            Ok(httparse::Status::Complete(n)) => {
                let header = |name: &str| {
                    response.headers.iter().find(|h| h.name.eq_ignore_ascii_case(name)).map(|h| String::from_utf8_lossy(h.value).trim().to_string())
                };
                let length = header("content-length").and_then(|l| l.parse::<usize>().ok());
                break (response.code.unwrap_or(0), header(PROTOCOL_HEADER), n, length);
            }
            Ok(httparse::Status::Partial) if buf.len() < MAX_HTTP_HEAD => continue,
            _ => return Err(Error::BadResponse),
        }
    };
    buf.advance(head_len);
    if status != 101 {
        // Read the error body the server wrote (bounded), to pass its words on.
        let want = content_length.unwrap_or(MAX_ERROR_BODY).min(MAX_ERROR_BODY);
        while buf.len() < want && read.read_buf(&mut buf).await.unwrap_or(0) > 0 {}
        buf.truncate(want);
        return Err(Error::Refused { status, body: String::from_utf8_lossy(&buf).trim().to_string() });
    }
    let protocol = chosen.filter(|c| protocols.contains(&c.as_str())).ok_or_else(|| Error::NoProtocol(protocols.join(", ")))?;
    Ok(Upgraded { read, write, early: buf, protocol })
}

/// [`upgrade`], then framed: the client's writing half, a frame reader, and the chosen protocol.
pub(crate) async fn dial(url: &str, protocols: &[&str]) -> Result<(ClientConn, FrameReader, String), Error> {
    let Upgraded { read, write, early, protocol } = upgrade(url, protocols).await?;
    Ok((ClientConn { write, headers: HeaderWriter::default(), next_stream_id: 1 }, FrameReader { read, buf: early }, protocol))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Inflate a run of stored deflate blocks (what [`HeaderWriter`] writes) and parse the SPDY
    /// header pairs, as the peer's inflater would.
    fn read_header_block(mut block: &[u8], first: bool) -> Vec<(String, String)> {
        if first {
            assert_eq!(&block[..2], &[0x78, 0x01], "zlib header");
            block = &block[2..];
        }
        let raw_ends_with_flush = block.ends_with(&SYNC_FLUSH);
        let mut raw = Vec::new();
        while !block.is_empty() {
            assert_eq!(block[0], 0, "a non-final stored block");
            let len = u16::from_le_bytes([block[1], block[2]]);
            assert_eq!(!len, u16::from_le_bytes([block[3], block[4]]), "NLEN");
            raw.extend_from_slice(&block[5..5 + len as usize]);
            block = &block[5 + len as usize..];
        }
        assert!(raw_ends_with_flush, "a header block must end with a sync flush");
        let mut b = &raw[..];
        let mut next = |n: usize| {
            let (head, tail) = b.split_at(n);
            b = tail;
            head.to_vec()
        };
        let count = u32::from_be_bytes(next(4).try_into().expect("4 bytes"));
        (0..count)
            .map(|_| {
                let n = u32::from_be_bytes(next(4).try_into().expect("4 bytes")) as usize;
                let name = String::from_utf8(next(n)).expect("utf-8");
                let n = u32::from_be_bytes(next(4).try_into().expect("4 bytes")) as usize;
                (name, String::from_utf8(next(n)).expect("utf-8"))
            })
            .collect()
    }

    #[test]
    fn syn_stream_carries_stored_header_blocks_in_one_zlib_stream() {
        let mut w = HeaderWriter::default();
        let mut wire = BytesMut::new();
        wire.extend_from_slice(&w.syn_stream(1, &[("streamType", "error")], false));
        wire.extend_from_slice(&w.syn_stream(3, &[("streamType", "stdin")], true));
        assert_eq!(&wire[..8], &[0x80, 0x03, 0x00, 0x01, 0x00, 0x00, 0x00, 0x31], "control, v3, SYN_STREAM, length 49");

        let Some(Frame::SynStream { stream_id: 1, flags: 0, header_block }) = decode(&mut wire).expect("frame") else {
            panic!("first frame")
        };
        assert_eq!(read_header_block(&header_block, true), [("streamtype".to_string(), "error".to_string())]);
        let Some(second @ Frame::SynStream { stream_id: 3, .. }) = decode(&mut wire).expect("frame") else { panic!("second frame") };
        assert!(second.fin());
        let Frame::SynStream { header_block, .. } = second else { unreachable!() };
        // The zlib stream goes on: no second header.
        assert_eq!(read_header_block(&header_block, false), [("streamtype".to_string(), "stdin".to_string())]);
        assert!(wire.is_empty());
    }

    #[test]
    fn large_header_blocks_split_into_several_stored_blocks() {
        let long = "x".repeat(70_000);
        let mut w = HeaderWriter::default();
        let mut wire = BytesMut::from(&w.syn_stream(5, &[("big", long.as_str())], false)[..]);
        let Some(Frame::SynStream { header_block, .. }) = decode(&mut wire).expect("frame") else { panic!("frame") };
        assert_eq!(read_header_block(&header_block, true), [("big".to_string(), long)]);
    }

    #[test]
    fn frames_decode_from_their_wire_form() {
        let mut wire = BytesMut::new();
        wire.extend_from_slice(&data_frame(3, false, b"hello"));
        wire.extend_from_slice(&data_frame(3, true, b""));
        wire.extend_from_slice(&ping_frame(7));
        wire.extend_from_slice(&rst_stream_frame(5, 5));
        wire.extend_from_slice(&goaway_frame(9, 0));
        // A SYN_REPLY as spdystream writes it (its header block is opaque to us).
        wire.extend_from_slice(&control(TYPE_SYN_REPLY, 0, &[0, 0, 0, 1, 0x78, 0xbb, 1, 2, 3]));
        wire.extend_from_slice(&control(TYPE_WINDOW_UPDATE, 0, &[0, 0, 0, 1, 0, 0, 1, 0]));
        let mut frames = Vec::new();
        // Byte by byte: a frame only comes out once it is whole.
        let mut partial = BytesMut::new();
        for b in wire {
            partial.put_u8(b);
            while let Some(f) = decode(&mut partial).expect("valid") {
                frames.push(f);
            }
        }
        assert_eq!(
            frames,
            vec![
                Frame::Data { stream_id: 3, flags: 0, data: Bytes::from_static(b"hello") },
                Frame::Data { stream_id: 3, flags: FLAG_FIN, data: Bytes::new() },
                Frame::Ping { id: 7 },
                Frame::RstStream { stream_id: 5, status: 5 },
                Frame::GoAway { last_good_stream_id: 9, status: 0 },
                Frame::SynReply { stream_id: 1, flags: 0 },
                Frame::Ignored { kind: TYPE_WINDOW_UPDATE },
            ]
        );
        assert!(frames[1].fin() && !frames[0].fin());
    }

    #[test]
    fn rejects_other_versions_and_short_control_frames() {
        let mut v2 = BytesMut::from(&[0x80, 0x02, 0x00, 0x06, 0, 0, 0, 4, 0, 0, 0, 1][..]);
        assert!(matches!(decode(&mut v2), Err(Error::Protocol(_))));
        let mut short = BytesMut::from(&control(TYPE_RST_STREAM, 0, &[0, 0, 0, 1])[..]);
        assert!(matches!(decode(&mut short), Err(Error::Protocol(_))));
    }

    #[test]
    fn urls() {
        assert_eq!(split_url("http://127.0.0.1:10010/exec/AbC").expect("url"), ("127.0.0.1:10010", "/exec/AbC"));
        assert_eq!(split_url("http://[::1]:8/x?y=1").expect("url"), ("[::1]:8", "/x?y=1"));
        assert_eq!(split_url("http://h:1").expect("url"), ("h:1", "/"));
        assert!(split_url("https://h:1/x").is_err());
        assert!(split_url("http:///x").is_err());
    }

    /// The upgrade against a scripted server: the request it sees, then 101 and a first frame
    /// in the same packet (which must not be lost); and a refusal's body passed on.
    #[tokio::test]
    async fn dial_upgrades_and_keeps_early_frames() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let server = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.expect("accept");
            let mut req = Vec::new();
            while !req.ends_with(b"\r\n\r\n") {
                let mut b = [0u8; 1];
                s.read_exact(&mut b).await.expect("read");
                req.push(b[0]);
            }
            let mut reply = b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\nX-Stream-Protocol-Version: v4.channel.k8s.io\r\n\r\n".to_vec();
            reply.extend_from_slice(&ping_frame(2));
            s.write_all(&reply).await.expect("write");
            let mut frame = [0u8; 12];
            s.read_exact(&mut frame).await.expect("pong");
            (String::from_utf8(req).expect("utf-8"), frame)
        });
        let (mut conn, mut reader, chosen) =
            dial(&format!("http://{addr}/exec/tok"), &["v4.channel.k8s.io", "v3.channel.k8s.io"]).await.expect("dial");
        assert_eq!(chosen, "v4.channel.k8s.io");
        assert_eq!(reader.next().await.expect("frame"), Some(Frame::Ping { id: 2 }));
        conn.send(&ping_frame(2)).await.expect("pong");
        let (request, echoed) = server.await.expect("server");
        assert!(request.starts_with("POST /exec/tok HTTP/1.1\r\n"), "{request}");
        assert!(request.contains("Upgrade: SPDY/3.1\r\n") && request.contains("X-Stream-Protocol-Version: v3.channel.k8s.io\r\n"), "{request}");
        assert_eq!(&echoed[..], &ping_frame(2)[..]);
        assert_eq!(reader.next().await.expect("eof"), None);

        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.expect("accept");
            let mut b = [0u8; 256];
            let _ = s.read(&mut b).await;
            let _ = s.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 15\r\n\r\ninvalid token x").await;
        });
        match dial(&format!("http://{addr}/exec/x"), &["v4.channel.k8s.io"]).await {
            Err(Error::Refused { status: 404, body }) => assert_eq!(body, "invalid token x"),
            other => panic!("expected a refusal, got {other:?}"),
        }
    }
}
