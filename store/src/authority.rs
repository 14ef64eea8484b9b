//! The HTTP/2 `:authority` that etcd's clients send and Rust's h2 refuses. Stands in for the
//! leniency of grpc-go's server (etcd's), which takes `:authority` as it comes and never parses
//! it; kubelab's own, since h2 has no such setting.
//!
//! Two etcd clients send an `:authority` that is not an authority at all:
//! - etcd 3.4's `etcdctl` (Debian's) dials `passthrough:///<endpoint>` for `endpoint status` and
//!   `endpoint health`, so an endpoint written as a URL (`--endpoints=http://127.0.0.1:2379`, as
//!   etcd's own documentation writes them) goes out as `:authority: http://127.0.0.1:2379`;
//! - etcd 3.5's client library sends `#initially=[http://127.0.0.1:2379]` on every call.
//!
//! h2 answers both with `RST_STREAM(PROTOCOL_ERROR)` before tonic sees the request. So a client
//! connection is read through [`AuthorityFix`], which watches the first request's header block:
//! 1. The connection preface is passed on.
//! 2. Frames before the first HEADERS (SETTINGS, WINDOW_UPDATE, …) are passed on as they come.
//! 3. The first header block (a HEADERS frame and its CONTINUATION frames) is decoded with an
//!    HPACK decoder. An `:authority` that parses, or none, and the connection is passed on
//!    untouched from then on: every well-behaved client costs one header decode per connection.
//! 4. Otherwise the connection is rewritten for good: every header block the client sends is
//!    decoded (the decoder keeps the client's dynamic table), its `:authority` repaired
//!    ([`repair`]: the host and port of the first URL in it, or dropped), and encoded again by an
//!    encoder of our own whose dynamic table h2's decoder follows, as one HEADERS frame (plus
//!    CONTINUATIONs past the 16 KiB frame limit) without padding.
//!
//! Only what the client sends is read; what the server writes is passed through. A client whose
//! `:authority` turns invalid after a valid first request is not repaired (no etcd client does
//! that): h2 refuses that request, as before.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::{Buf, BufMut, BytesMut};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// What a client sends first on a cleartext HTTP/2 connection (RFC 9113, 3.4).
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const FRAME_HEADER: usize = 9;
const TYPE_HEADERS: u8 = 0x1;
const TYPE_CONTINUATION: u8 = 0x9;
const FLAG_END_HEADERS: u8 = 0x4;
const FLAG_PADDED: u8 = 0x8;
const FLAG_PRIORITY: u8 = 0x20;
/// h2's SETTINGS_MAX_FRAME_SIZE (the protocol's default; tonic's servers keep it): frames we
/// write stay within it.
const MAX_FRAME: usize = 16_384;
/// A header block is collected whole before it is decoded; past this a client is not repaired
/// (h2's own header list limit is 16 KiB).
const MAX_BLOCK: usize = 1 << 20;
/// Largest dynamic table size update accepted from the client (h2 advertises 4,096).
const MAX_TABLE_SIZE: usize = 65_536;

enum Mode {
    /// Waiting for the 24-byte connection preface.
    Preface,
    /// Before the first header block: frames are passed on.
    Watching(loona_hpack::Decoder<'static>),
    /// The client's header blocks are re-encoded (steps 4).
    Rewriting(Box<Rewriter>),
    /// Nothing more to look at.
    Passthrough,
}

struct Rewriter {
    decoder: loona_hpack::Decoder<'static>,
    encoder: loona_hpack::Encoder<'static>,
}

/// A client connection read as step 1–4 of the module docs say.
pub struct AuthorityFix<S> {
    inner: S,
    mode: Mode,
    /// Read from the client, not yet looked at.
    input: BytesMut,
    /// Ready for the server.
    output: BytesMut,
    /// Bytes of the current non-header frame still to pass on as they arrive.
    passing: usize,
    eof: bool,
}

impl<S> AuthorityFix<S> {
    pub fn new(inner: S) -> AuthorityFix<S> {
        AuthorityFix { inner, mode: Mode::Preface, input: BytesMut::new(), output: BytesMut::new(), passing: 0, eof: false }
    }

    /// Moves what can be decided from `input` to `output`. Returns false when more input is
    /// needed first.
    fn step(&mut self) -> bool {
        if self.passing > 0 {
            let n = self.passing.min(self.input.len());
            if n == 0 {
                return false;
            }
            self.output.extend_from_slice(&self.input.split_to(n));
            self.passing -= n;
            return true;
        }
        match &mut self.mode {
            Mode::Passthrough => {
                if self.input.is_empty() {
                    return false;
                }
                let all = self.input.split();
                self.output.extend_from_slice(&all);
                true
            }
            Mode::Preface => {
                if self.input.len() < PREFACE.len() {
                    // A prefix of something else is already not HTTP/2 with prior knowledge.
                    if !PREFACE.starts_with(&self.input) {
                        self.mode = Mode::Passthrough;
                        return true;
                    }
                    return false;
                }
                let preface = self.input.split_to(PREFACE.len());
                self.mode = if &preface[..] == PREFACE {
                    let mut decoder = loona_hpack::Decoder::new();
                    decoder.set_max_allowed_table_size(MAX_TABLE_SIZE);
                    Mode::Watching(decoder)
                } else {
                    Mode::Passthrough
                };
                self.output.extend_from_slice(&preface);
                true
            }
            Mode::Watching(_) | Mode::Rewriting(_) => {
                let Some(head) = FrameHead::parse(&self.input) else { return false };
                if head.kind != TYPE_HEADERS {
                    // Passed on as it arrives: a DATA frame is not held back until it is whole.
                    self.passing = FRAME_HEADER + head.len;
                    return true;
                }
                let Some(block) = HeaderBlock::collect(&self.input) else {
                    if self.input.len() > MAX_BLOCK {
                        // Beyond what we decode: h2 decides about it.
                        self.mode = Mode::Passthrough;
                        return true;
                    }
                    return false;
                };
                let raw = self.input.split_to(block.wire_len);
                match std::mem::replace(&mut self.mode, Mode::Passthrough) {
                    Mode::Watching(mut decoder) => match decode(&mut decoder, &block.fragment(&raw)) {
                        Some(headers) if needs_repair(&headers) => {
                            let mut encoder = loona_hpack::Encoder::new();
                            block.write(&mut self.output, &rewrite(&mut encoder, headers), &raw);
                            self.mode = Mode::Rewriting(Box::new(Rewriter { decoder, encoder }));
                        }
                        // Valid, absent or undecodable: h2 sees the client's own bytes from now on.
                        _ => self.output.extend_from_slice(&raw),
                    },
                    Mode::Rewriting(mut r) => {
                        match decode(&mut r.decoder, &block.fragment(&raw)) {
                            Some(headers) => block.write(&mut self.output, &rewrite(&mut r.encoder, headers), &raw),
                            // The tables no longer agree; h2 ends the connection on this block.
                            None => self.output.extend_from_slice(&raw),
                        }
                        self.mode = Mode::Rewriting(r);
                    }
                    Mode::Preface | Mode::Passthrough => unreachable!("handled above"),
                }
                true
            }
        }
    }
}

/// A frame's 9-byte header (RFC 9113, 4.1).
struct FrameHead {
    len: usize,
    kind: u8,
    flags: u8,
}

impl FrameHead {
    fn parse(b: &[u8]) -> Option<FrameHead> {
        (b.len() >= FRAME_HEADER)
            .then(|| FrameHead { len: (usize::from(b[0]) << 16) | (usize::from(b[1]) << 8) | usize::from(b[2]), kind: b[3], flags: b[4] })
    }
}

/// A HEADERS frame and the CONTINUATION frames that complete its block, all in the buffer.
struct HeaderBlock {
    /// Bytes of the frames on the wire.
    wire_len: usize,
    flags: u8,
    stream: [u8; 4],
    /// The HEADERS frame's priority fields, if it has them.
    priority: Option<[u8; 5]>,
    /// Where each frame's share of the block lies in the buffer.
    pieces: Vec<(usize, usize)>,
}

impl HeaderBlock {
    fn collect(b: &[u8]) -> Option<HeaderBlock> {
        let head = FrameHead::parse(b)?;
        let end = FRAME_HEADER + head.len;
        if b.len() < end {
            return None;
        }
        let mut start = FRAME_HEADER;
        let mut stop = end;
        if head.flags & FLAG_PADDED != 0 {
            let pad = usize::from(*b.get(start)?);
            start += 1;
            stop = stop.checked_sub(pad)?;
        }
        let mut priority = None;
        if head.flags & FLAG_PRIORITY != 0 {
            priority = Some(b.get(start..start + 5)?.try_into().ok()?);
            start += 5;
        }
        if start > stop {
            return None;
        }
        let mut block = HeaderBlock { wire_len: end, flags: head.flags, stream: b[5..9].try_into().ok()?, priority, pieces: vec![(start, stop)] };
        let mut last_flags = head.flags;
        while last_flags & FLAG_END_HEADERS == 0 {
            let at = block.wire_len;
            let next = FrameHead::parse(&b[at..])?;
            if next.kind != TYPE_CONTINUATION {
                // A protocol error of the client's: handing it on unchanged lets h2 say so.
                return Some(HeaderBlock { pieces: Vec::new(), ..block });
            }
            let next_end = at + FRAME_HEADER + next.len;
            if b.len() < next_end {
                return None;
            }
            block.pieces.push((at + FRAME_HEADER, next_end));
            block.wire_len = next_end;
            last_flags = next.flags;
        }
        Some(block)
    }

    fn fragment(&self, raw: &[u8]) -> Vec<u8> {
        self.pieces.iter().flat_map(|&(a, b)| raw[a..b].iter().copied()).collect()
    }

    /// Writes the re-encoded block as a HEADERS frame with the original stream, END_STREAM and
    /// priority, followed by CONTINUATION frames when it is longer than a frame. A block that
    /// could not be collected whole is written as it came.
    fn write(&self, out: &mut BytesMut, encoded: &[u8], raw: &[u8]) {
        if self.pieces.is_empty() {
            out.extend_from_slice(raw);
            return;
        }
        let priority = self.priority.map(|p| p.to_vec()).unwrap_or_default();
        let first_room = MAX_FRAME - priority.len();
        let (first, mut rest) = encoded.split_at(encoded.len().min(first_room));
        let mut flags = self.flags & !(FLAG_PADDED | FLAG_END_HEADERS);
        if rest.is_empty() {
            flags |= FLAG_END_HEADERS;
        }
        put_frame(out, TYPE_HEADERS, flags, self.stream, &[&priority, first]);
        while !rest.is_empty() {
            let (piece, tail) = rest.split_at(rest.len().min(MAX_FRAME));
            rest = tail;
            put_frame(out, TYPE_CONTINUATION, if rest.is_empty() { FLAG_END_HEADERS } else { 0 }, self.stream, &[piece]);
        }
    }
}

fn put_frame(out: &mut BytesMut, kind: u8, flags: u8, stream: [u8; 4], parts: &[&[u8]]) {
    let len: usize = parts.iter().map(|p| p.len()).sum();
    out.put_uint(len as u64, 3);
    out.put_u8(kind);
    out.put_u8(flags);
    out.put_slice(&stream);
    for p in parts {
        out.put_slice(p);
    }
}

fn decode(decoder: &mut loona_hpack::Decoder<'static>, fragment: &[u8]) -> Option<Vec<(Vec<u8>, Vec<u8>)>> {
    decoder.decode(fragment).ok()
}

fn needs_repair(headers: &[(Vec<u8>, Vec<u8>)]) -> bool {
    headers.iter().any(|(n, v)| n == b":authority" && http::uri::Authority::try_from(v.as_slice()).is_err())
}

/// The headers again, with `:authority` repaired or left out.
fn rewrite(encoder: &mut loona_hpack::Encoder<'static>, headers: Vec<(Vec<u8>, Vec<u8>)>) -> Vec<u8> {
    let fixed: Vec<(Vec<u8>, Vec<u8>)> = headers
        .into_iter()
        .filter_map(|(n, v)| {
            if n != b":authority" || http::uri::Authority::try_from(v.as_slice()).is_ok() {
                return Some((n, v));
            }
            repair(&v).map(|a| (n, a.into_bytes()))
        })
        .collect();
    encoder.encode(fixed.iter().map(|(n, v)| (n.as_slice(), v.as_slice())))
}

/// The authority a lenient reader finds in what etcd's clients send: the host and port of the
/// first URL in `#initially=[url;url…]` or in a bare URL. `None` when there is none.
pub fn repair(value: &[u8]) -> Option<String> {
    let s = std::str::from_utf8(value).ok()?.trim();
    let s = s.strip_prefix("#initially=[").and_then(|r| r.strip_suffix(']')).unwrap_or(s);
    let first = s.split([';', ',', ' ']).next()?;
    let after_scheme = first.split_once("://").map_or(first, |(_, rest)| rest);
    let host_port = after_scheme.split(['/', '?', '#']).next()?;
    http::uri::Authority::try_from(host_port).ok().map(|a| a.as_str().to_string())
}

impl<S: AsyncRead + Unpin> AsyncRead for AuthorityFix<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        loop {
            if !this.output.is_empty() {
                let n = this.output.len().min(buf.remaining());
                buf.put_slice(&this.output[..n]);
                this.output.advance(n);
                return Poll::Ready(Ok(()));
            }
            if matches!(this.mode, Mode::Passthrough) && this.input.is_empty() && this.passing == 0 {
                return Pin::new(&mut this.inner).poll_read(cx, buf);
            }
            if this.step() {
                continue;
            }
            if this.eof {
                // A truncated frame: the server sees what there was, then the end.
                let rest = this.input.split();
                if rest.is_empty() {
                    return Poll::Ready(Ok(()));
                }
                this.output.extend_from_slice(&rest);
                continue;
            }
            this.input.reserve(8192);
            let mut read = ReadBuf::uninit(this.input.spare_capacity_mut());
            ready!(Pin::new(&mut this.inner).poll_read(cx, &mut read))?;
            let n = read.filled().len();
            // SAFETY: `poll_read` initialised the first `n` bytes of the spare capacity.
            unsafe { this.input.set_len(this.input.len() + n) };
            if n == 0 {
                this.eof = true;
            }
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for AuthorityFix<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(mut self: Pin<&mut Self>, cx: &mut Context<'_>, bufs: &[io::IoSlice<'_>]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

impl<S: tonic::transport::server::Connected> tonic::transport::server::Connected for AuthorityFix<S> {
    type ConnectInfo = S::ConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.inner.connect_info()
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::AsyncReadExt;

    use super::*;

    fn request(authority: &str) -> Vec<(Vec<u8>, Vec<u8>)> {
        vec![
            (b":method".to_vec(), b"POST".to_vec()),
            (b":scheme".to_vec(), b"http".to_vec()),
            (b":path".to_vec(), b"/etcdserverpb.Maintenance/Status".to_vec()),
            (b":authority".to_vec(), authority.as_bytes().to_vec()),
            (b"content-type".to_vec(), b"application/grpc".to_vec()),
        ]
    }

    fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
        let mut out = BytesMut::new();
        put_frame(&mut out, kind, flags, stream.to_be_bytes(), &[payload]);
        out.to_vec()
    }

    /// What the server reads from a connection that sent `wire`, in chunks of `chunk` bytes.
    async fn server_reads(wire: Vec<u8>, chunk: usize) -> Vec<u8> {
        let (mut client, server) = tokio::io::duplex(1 << 20);
        tokio::spawn(async move {
            use tokio::io::AsyncWriteExt;
            for piece in wire.chunks(chunk) {
                client.write_all(piece).await.unwrap();
            }
        });
        let mut fixed = AuthorityFix::new(server);
        let mut out = Vec::new();
        fixed.read_to_end(&mut out).await.unwrap();
        out
    }

    /// The header blocks the server decodes from what it read, with a decoder of its own (as h2's).
    fn blocks_seen(read: &[u8]) -> Vec<Vec<(Vec<u8>, Vec<u8>)>> {
        assert_eq!(&read[..PREFACE.len()], PREFACE);
        let mut decoder = loona_hpack::Decoder::new();
        let mut at = PREFACE.len();
        let mut out = Vec::new();
        let mut pending = Vec::new();
        while at < read.len() {
            let head = FrameHead::parse(&read[at..]).unwrap();
            assert!(head.len <= MAX_FRAME, "frames stay within the frame limit");
            let payload = &read[at + FRAME_HEADER..at + FRAME_HEADER + head.len];
            match head.kind {
                TYPE_HEADERS => {
                    let mut p = payload;
                    if head.flags & FLAG_PADDED != 0 {
                        let pad = p[0] as usize;
                        p = &p[1..p.len() - pad];
                    }
                    if head.flags & FLAG_PRIORITY != 0 {
                        p = &p[5..];
                    }
                    pending.extend_from_slice(p);
                }
                TYPE_CONTINUATION => pending.extend_from_slice(payload),
                _ => {}
            }
            if matches!(head.kind, TYPE_HEADERS | TYPE_CONTINUATION) && head.flags & FLAG_END_HEADERS != 0 {
                out.push(decoder.decode(&pending).unwrap());
                pending.clear();
            }
            at += FRAME_HEADER + head.len;
        }
        out
    }

    fn authority(block: &[(Vec<u8>, Vec<u8>)]) -> Option<String> {
        block.iter().find(|(n, _)| n == b":authority").map(|(_, v)| String::from_utf8(v.clone()).unwrap())
    }

    #[test]
    fn repair_finds_the_host_and_port_etcd_clients_meant() {
        assert_eq!(repair(b"http://127.0.0.1:2379").as_deref(), Some("127.0.0.1:2379"));
        assert_eq!(repair(b"https://example.com:2379/").as_deref(), Some("example.com:2379"));
        assert_eq!(repair(b"#initially=[http://127.0.0.1:2379]").as_deref(), Some("127.0.0.1:2379"));
        assert_eq!(repair(b"#initially=[http://a:1;http://b:2]").as_deref(), Some("a:1"));
        assert_eq!(repair(b"[not valid").as_deref(), None);
    }

    #[tokio::test]
    async fn a_valid_authority_leaves_the_connection_untouched() {
        let mut enc = loona_hpack::Encoder::new();
        let mut wire = PREFACE.to_vec();
        wire.extend(frame(0x4, 0, 0, &[0, 3, 0, 0, 0, 100])); // SETTINGS
        for _ in 0..3 {
            let h = request("127.0.0.1:2379");
            let block = enc.encode(h.iter().map(|(n, v)| (n.as_slice(), v.as_slice())));
            wire.extend(frame(TYPE_HEADERS, FLAG_END_HEADERS, 1, &block));
            wire.extend(frame(0x0, 0x1, 1, &[0u8; 40_000][..16_000])); // DATA
        }
        assert_eq!(server_reads(wire.clone(), 7).await, wire);
    }

    #[tokio::test]
    async fn an_etcdctl_url_authority_is_repaired_on_every_request_and_the_tables_stay_in_step() {
        let mut enc = loona_hpack::Encoder::new();
        let mut wire = PREFACE.to_vec();
        wire.extend(frame(0x4, 0, 0, &[]));
        let mut sent = Vec::new();
        for (i, auth) in ["http://127.0.0.1:2379", "http://127.0.0.1:2379", "#initially=[http://127.0.0.1:2379]"].iter().enumerate() {
            let stream = 1 + 2 * i as u32;
            let h = request(auth);
            let block = enc.encode(h.iter().map(|(n, v)| (n.as_slice(), v.as_slice())));
            sent.push(h);
            if i == 1 {
                // Split across a CONTINUATION frame, with padding and priority on the HEADERS.
                let (a, b) = block.split_at(block.len() / 2);
                let mut payload = vec![3u8];
                payload.extend_from_slice(&[0, 0, 0, 0, 16]);
                payload.extend_from_slice(a);
                payload.extend_from_slice(&[0, 0, 0]);
                wire.extend(frame(TYPE_HEADERS, FLAG_PADDED | FLAG_PRIORITY | 0x1, stream, &payload));
                wire.extend(frame(TYPE_CONTINUATION, FLAG_END_HEADERS, stream, b));
            } else {
                wire.extend(frame(TYPE_HEADERS, FLAG_END_HEADERS, stream, &block));
            }
            wire.extend(frame(0x0, 0x1, stream, b"\0\0\0\0\x05hello"));
        }
        let read = server_reads(wire, 5).await;
        let seen = blocks_seen(&read);
        assert_eq!(seen.len(), 3);
        for (got, want) in seen.iter().zip(&sent) {
            assert_eq!(authority(got).as_deref(), Some("127.0.0.1:2379"));
            let others = |b: &[(Vec<u8>, Vec<u8>)]| b.iter().filter(|(n, _)| n != b":authority").cloned().collect::<Vec<_>>();
            assert_eq!(others(got), others(want), "every other header arrives as sent");
        }
        // The DATA frames and the second request's END_STREAM and priority survive.
        assert_eq!(read.windows(5).filter(|w| w == b"hello").count(), 3);
    }

    #[tokio::test]
    async fn an_authority_with_nothing_to_repair_is_left_out() {
        let mut enc = loona_hpack::Encoder::new();
        let h = request("[broken");
        let block = enc.encode(h.iter().map(|(n, v)| (n.as_slice(), v.as_slice())));
        let mut wire = PREFACE.to_vec();
        wire.extend(frame(TYPE_HEADERS, FLAG_END_HEADERS, 1, &block));
        let seen = blocks_seen(&server_reads(wire, 64).await);
        assert_eq!(authority(&seen[0]), None);
        assert_eq!(seen[0].len(), 4);
    }

    #[tokio::test]
    async fn something_that_is_not_http2_is_passed_on_as_it_is() {
        let wire = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec();
        assert_eq!(server_reads(wire.clone(), 3).await, wire);
    }
}
