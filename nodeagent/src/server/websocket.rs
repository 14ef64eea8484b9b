//! Mirrors k8s.io/apimachinery/pkg/util/httpstream/wsstream (conn.go): the server side of the
//! websocket that `kubectl exec` and `kubectl attach` speak, and the `channel.k8s.io` framing on
//! top of it.
//!
//! Two layers, both pure (bytes in, bytes out), so they are tested without a socket:
//! 1. RFC 6455 itself: the opening handshake's `Sec-WebSocket-Accept` ([`accept_key`], which
//!    needs SHA-1 and base64 — twenty lines each, written here rather than pulling two crates in
//!    for one hash of a 60-byte string), frames read from the client ([`MessageReader`]: masked,
//!    possibly fragmented, with pings between fragments) and frames written to it ([`frame`]:
//!    never masked, never fragmented).
//! 2. The channel protocol: every binary message starts with a stream id — 0 stdin, 1 stdout,
//!    2 stderr, 3 error (a `metav1.Status` in JSON), 4 resize (`{"Width":…,"Height":…}`). From
//!    `v5.channel.k8s.io` on, the message `[255, id]` closes stream `id` (kubectl sends `[255, 0]`
//!    when its stdin reaches EOF); `v4.channel.k8s.io` has no such message, so under v4 a
//!    command reading stdin to its end never sees the end.
//!
//! Implementation caveats: no extensions (permessage-deflate is refused by not answering it),
//! and the `base64.channel.k8s.io` text variants are not offered.

use bytes::{Buf, BufMut, Bytes, BytesMut};

/// The protocol kubectl 1.30+ asks for first; it adds the close-stream message to v4.
pub(crate) const V5_PROTOCOL: &str = "v5.channel.k8s.io";
/// What older kubectl versions ask for: v5 without close-stream.
pub(crate) const V4_PROTOCOL: &str = "v4.channel.k8s.io";
/// Subprotocols we accept, in order of preference.
pub(crate) const PROTOCOLS: &[&str] = &[V5_PROTOCOL, V4_PROTOCOL];

/// The stream ids of the channel protocol (remotecommand's order).
pub(crate) const STDIN: u8 = 0;
pub(crate) const STDOUT: u8 = 1;
pub(crate) const STDERR: u8 = 2;
pub(crate) const ERROR: u8 = 3;
pub(crate) const RESIZE: u8 = 4;
/// The first byte of a v5 close-stream message; the second names the stream.
pub(crate) const CLOSE_STREAM: u8 = 255;

/// A larger message is a protocol violation: kubectl writes stdin in chunks of at most 32 KiB,
/// so this bounds what one misbehaving client can make the agent buffer.
pub(crate) const MAX_MESSAGE_BYTES: usize = 1 << 20;

/// RFC 6455 §1.3: the GUID appended to the client's key before hashing.
const ACCEPT_GUID: &str = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

pub(crate) const OP_CONTINUATION: u8 = 0x0;
pub(crate) const OP_TEXT: u8 = 0x1;
pub(crate) const OP_BINARY: u8 = 0x2;
pub(crate) const OP_CLOSE: u8 = 0x8;
pub(crate) const OP_PING: u8 = 0x9;
pub(crate) const OP_PONG: u8 = 0xA;

/// Close status 1000: a normal end (the command finished).
pub(crate) const CLOSE_NORMAL: u16 = 1000;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum Error {
    #[error("websocket: reserved bits set without a negotiated extension")]
    ReservedBits,
    #[error("websocket: a client frame must be masked")]
    Unmasked,
    #[error("websocket: unknown opcode {0:#x}")]
    Opcode(u8),
    #[error("websocket: control frame fragmented or longer than 125 bytes")]
    BadControlFrame,
    #[error("websocket: continuation without a message to continue, or a new message inside one")]
    BadContinuation,
    #[error("websocket: message over {MAX_MESSAGE_BYTES} bytes")]
    TooLarge,
}

/// One whole message from the client (fragments already joined, masks already removed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Message {
    Text(Bytes),
    Binary(Bytes),
    Ping(Bytes),
    Pong(Bytes),
    /// The close status, when the client gave one.
    Close(Option<u16>),
}

/// The `Sec-WebSocket-Accept` answer to a client's `Sec-WebSocket-Key`.
pub(crate) fn accept_key(key: &str) -> String {
    base64(&sha1(format!("{}{ACCEPT_GUID}", key.trim()).as_bytes()))
}

/// The first of our [`PROTOCOLS`] the client offered in `Sec-WebSocket-Protocol` (the header
/// may repeat; each value is a comma-separated list).
pub(crate) fn select_protocol<'a>(offered: impl IntoIterator<Item = &'a str>) -> Option<&'static str> {
    let offered: Vec<&str> = offered.into_iter().flat_map(|v| v.split(',')).map(str::trim).collect();
    PROTOCOLS.iter().copied().find(|p| offered.contains(p))
}

/// Reassembles client frames into messages. Feed it bytes as they arrive with [`Self::extend`],
/// then take messages with [`Self::next_message`] until it returns `None`.
#[derive(Debug, Default)]
pub(crate) struct MessageReader {
    buf: BytesMut,
    /// A fragmented data message in progress: its opcode and the payload so far.
    partial: Option<(u8, BytesMut)>,
}

impl MessageReader {
    pub(crate) fn new() -> MessageReader {
        MessageReader::default()
    }

    pub(crate) fn extend(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// The next complete message, `None` when more bytes are needed.
    pub(crate) fn next_message(&mut self) -> Result<Option<Message>, Error> {
        loop {
            let Some((fin, opcode, payload)) = self.next_frame()? else { return Ok(None) };
            match opcode {
                OP_CLOSE | OP_PING | OP_PONG => {
                    if !fin || payload.len() > 125 {
                        return Err(Error::BadControlFrame);
                    }
                    return Ok(Some(match opcode {
                        OP_PING => Message::Ping(payload),
                        OP_PONG => Message::Pong(payload),
                        _ => Message::Close((payload.len() >= 2).then(|| u16::from_be_bytes([payload[0], payload[1]]))),
                    }));
                }
                OP_TEXT | OP_BINARY if self.partial.is_some() => return Err(Error::BadContinuation),
                OP_TEXT | OP_BINARY if fin => return Ok(Some(data_message(opcode, payload))),
                OP_TEXT | OP_BINARY => self.partial = Some((opcode, BytesMut::from(&payload[..]))),
                OP_CONTINUATION => {
                    let Some((first, mut so_far)) = self.partial.take() else { return Err(Error::BadContinuation) };
                    if so_far.len() + payload.len() > MAX_MESSAGE_BYTES {
                        return Err(Error::TooLarge);
                    }
                    so_far.extend_from_slice(&payload);
                    if fin {
                        return Ok(Some(data_message(first, so_far.freeze())));
                    }
                    self.partial = Some((first, so_far));
                }
                other => return Err(Error::Opcode(other)),
            }
        }
    }

    /// One frame off the buffer: (FIN, opcode, unmasked payload).
    fn next_frame(&mut self) -> Result<Option<(bool, u8, Bytes)>, Error> {
        let b = &self.buf[..];
        if b.len() < 2 {
            return Ok(None);
        }
        if b[0] & 0x70 != 0 {
            return Err(Error::ReservedBits);
        }
        if b[1] & 0x80 == 0 {
            return Err(Error::Unmasked);
        }
        let (len, mut at) = match b[1] & 0x7f {
            126 if b.len() >= 4 => (u64::from(u16::from_be_bytes([b[2], b[3]])), 4),
            127 if b.len() >= 10 => (u64::from_be_bytes([b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9]]), 10),
            126 | 127 => return Ok(None),
            n => (u64::from(n), 2),
        };
        if len > MAX_MESSAGE_BYTES as u64 {
            return Err(Error::TooLarge);
        }
        let len = len as usize;
        if b.len() < at + 4 + len {
            return Ok(None);
        }
        let (fin, opcode) = (b[0] & 0x80 != 0, b[0] & 0x0f);
        let mask = [b[at], b[at + 1], b[at + 2], b[at + 3]];
        at += 4;
        self.buf.advance(at);
        let mut payload = self.buf.split_to(len);
        for (i, byte) in payload.iter_mut().enumerate() {
            *byte ^= mask[i % 4];
        }
        Ok(Some((fin, opcode, payload.freeze())))
    }
}

fn data_message(opcode: u8, payload: Bytes) -> Message {
    if opcode == OP_TEXT { Message::Text(payload) } else { Message::Binary(payload) }
}

/// A frame from the server: FIN set, unmasked (RFC 6455 §5.1: servers never mask).
pub(crate) fn frame(opcode: u8, payload: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(payload.len() + 10);
    out.put_u8(0x80 | opcode);
    put_length(&mut out, 0, payload.len());
    out.extend_from_slice(payload);
    out.freeze()
}

/// A frame as a client writes it, masked with `mask` (for test clients).
#[cfg(test)]
pub(crate) fn masked_frame(fin: bool, opcode: u8, payload: &[u8], mask: [u8; 4]) -> Bytes {
    let mut out = BytesMut::with_capacity(payload.len() + 14);
    out.put_u8(if fin { 0x80 } else { 0 } | opcode);
    put_length(&mut out, 0x80, payload.len());
    out.extend_from_slice(&mask);
    out.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
    out.freeze()
}

fn put_length(out: &mut BytesMut, mask_bit: u8, len: usize) {
    if len < 126 {
        out.put_u8(mask_bit | len as u8);
    } else if let Ok(len) = u16::try_from(len) {
        out.put_u8(mask_bit | 126);
        out.put_u16(len);
    } else {
        out.put_u8(mask_bit | 127);
        out.put_u64(len as u64);
    }
}

/// A close frame with a status code.
pub(crate) fn close_frame(code: u16) -> Bytes {
    frame(OP_CLOSE, &code.to_be_bytes())
}

/// A binary message for channel `stream`.
pub(crate) fn channel_frame(stream: u8, data: &[u8]) -> Bytes {
    let mut payload = Vec::with_capacity(data.len() + 1);
    payload.push(stream);
    payload.extend_from_slice(data);
    frame(OP_BINARY, &payload)
}

/// What one binary message of the channel protocol means.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ChannelMessage {
    Data { stream: u8, data: Bytes },
    /// v5 only: the client will write no more to `stream`.
    Close { stream: u8 },
}

/// Parse a binary message under `protocol` (v4 has no close message: there a leading 255 is a
/// stream id like any other, and the caller ignores it as unknown). `None` for an empty message.
pub(crate) fn parse_channel(protocol: &str, mut message: Bytes) -> Option<ChannelMessage> {
    let stream = *message.first()?;
    message.advance(1);
    if stream == CLOSE_STREAM && protocol == V5_PROTOCOL {
        return message.first().map(|&stream| ChannelMessage::Close { stream });
    }
    Some(ChannelMessage::Data { stream, data: message })
}

/// SHA-1 (FIPS 180-4). Broken for signatures, but RFC 6455 fixes it for the handshake.
fn sha1(data: &[u8]) -> [u8; 20] {
    let mut h: [u32; 5] = [0x6745_2301, 0xEFCD_AB89, 0x98BA_DCFE, 0x1032_5476, 0xC3D2_E1F0];
    let mut msg = data.to_vec();
    msg.push(0x80);
    while msg.len() % 64 != 56 {
        msg.push(0);
    }
    msg.extend_from_slice(&((data.len() as u64).wrapping_mul(8)).to_be_bytes());
    for block in msg.chunks_exact(64) {
        let mut w = [0u32; 80];
        for (i, word) in block.chunks_exact(4).enumerate() {
            w[i] = u32::from_be_bytes([word[0], word[1], word[2], word[3]]);
        }
        for i in 16..80 {
            w[i] = (w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16]).rotate_left(1);
        }
        let [mut a, mut b, mut c, mut d, mut e] = h;
        for (i, wi) in w.iter().enumerate() {
            let (f, k) = match i {
                0..=19 => ((b & c) | (!b & d), 0x5A82_7999),
                20..=39 => (b ^ c ^ d, 0x6ED9_EBA1),
                40..=59 => ((b & c) | (b & d) | (c & d), 0x8F1B_BCDC),
                _ => (b ^ c ^ d, 0xCA62_C1D6),
            };
            let t = a.rotate_left(5).wrapping_add(f).wrapping_add(e).wrapping_add(k).wrapping_add(*wi);
            (e, d, c, b, a) = (d, c, b.rotate_left(30), a, t);
        }
        for (hi, v) in h.iter_mut().zip([a, b, c, d, e]) {
            *hi = hi.wrapping_add(v);
        }
    }
    let mut out = [0u8; 20];
    for (chunk, word) in out.chunks_exact_mut(4).zip(h) {
        chunk.copy_from_slice(&word.to_be_bytes());
    }
    out
}

/// Standard base64 with padding (RFC 4648 §4).
fn base64(data: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let n = (u32::from(chunk[0]) << 16) | (u32::from(*chunk.get(1).unwrap_or(&0)) << 8) | u32::from(*chunk.get(2).unwrap_or(&0));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    #[test]
    fn sha1_and_base64_match_known_vectors() {
        assert_eq!(hex(&sha1(b"")), "da39a3ee5e6b4b0d3255bfef95601890afd80709");
        assert_eq!(hex(&sha1(b"abc")), "a9993e364706816aba3e25717850c26c9cd0d89d");
        // Two blocks: the padding spills over.
        assert_eq!(
            hex(&sha1(b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")),
            "84983e441c3bd26ebaae4aa1f95129e5e54670f1"
        );
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
    }

    #[test]
    fn accept_key_is_the_rfc_example() {
        // RFC 6455 §1.3.
        assert_eq!(accept_key("dGhlIHNhbXBsZSBub25jZQ=="), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
    }

    #[test]
    fn protocol_selection_prefers_v5() {
        assert_eq!(select_protocol(["v5.channel.k8s.io"]), Some(V5_PROTOCOL));
        assert_eq!(select_protocol(["v4.channel.k8s.io, v5.channel.k8s.io"]), Some(V5_PROTOCOL));
        assert_eq!(select_protocol(["channel.k8s.io", "v4.channel.k8s.io"]), Some(V4_PROTOCOL));
        assert_eq!(select_protocol(["base64.channel.k8s.io"]), None);
        assert_eq!(select_protocol([]), None);
    }

    #[test]
    fn reads_masked_frames_split_anywhere() {
        let mask = [1, 2, 3, 4];
        let mut wire = Vec::new();
        wire.extend_from_slice(&masked_frame(true, OP_BINARY, b"\x00hello", mask));
        wire.extend_from_slice(&masked_frame(true, OP_PING, b"p", mask));
        let big = vec![7u8; 70_000]; // a 64-bit length
        wire.extend_from_slice(&masked_frame(true, OP_BINARY, &big, mask));
        let mid = vec![9u8; 300]; // a 16-bit length
        wire.extend_from_slice(&masked_frame(true, OP_TEXT, &mid, mask));
        wire.extend_from_slice(&masked_frame(true, OP_CLOSE, &1000u16.to_be_bytes(), mask));

        // Fed one byte at a time, the messages still come out whole and in order.
        let mut reader = MessageReader::new();
        let mut got = Vec::new();
        for byte in &wire {
            reader.extend(std::slice::from_ref(byte));
            while let Some(m) = reader.next_message().expect("valid frames") {
                got.push(m);
            }
        }
        assert_eq!(
            got,
            vec![
                Message::Binary(Bytes::from_static(b"\x00hello")),
                Message::Ping(Bytes::from_static(b"p")),
                Message::Binary(Bytes::from(big)),
                Message::Text(Bytes::from(mid)),
                Message::Close(Some(1000)),
            ]
        );
    }

    #[test]
    fn joins_fragments_with_a_ping_in_between() {
        let mask = [0xde, 0xad, 0xbe, 0xef];
        let mut reader = MessageReader::new();
        reader.extend(&masked_frame(false, OP_BINARY, b"\x00ab", mask));
        reader.extend(&masked_frame(true, OP_PING, b"", mask));
        reader.extend(&masked_frame(false, OP_CONTINUATION, b"cd", mask));
        reader.extend(&masked_frame(true, OP_CONTINUATION, b"ef", mask));
        assert_eq!(reader.next_message(), Ok(Some(Message::Ping(Bytes::new()))));
        assert_eq!(reader.next_message(), Ok(Some(Message::Binary(Bytes::from_static(b"\x00abcdef")))));
        assert_eq!(reader.next_message(), Ok(None));
    }

    #[test]
    fn rejects_protocol_violations() {
        let bad = |wire: &[u8]| {
            let mut r = MessageReader::new();
            r.extend(wire);
            r.next_message().expect_err("must be rejected")
        };
        assert_eq!(bad(&frame(OP_BINARY, b"x")), Error::Unmasked);
        assert_eq!(bad(&masked_frame(true, OP_CONTINUATION, b"x", [0; 4])), Error::BadContinuation);
        assert_eq!(bad(&masked_frame(false, OP_PING, b"", [0; 4])), Error::BadControlFrame);
        assert_eq!(bad(&masked_frame(true, 0x3, b"", [0; 4])), Error::Opcode(3));
        let mut rsv = masked_frame(true, OP_BINARY, b"", [0; 4]).to_vec();
        rsv[0] |= 0x40;
        assert_eq!(bad(&rsv), Error::ReservedBits);
        // The length alone is enough to refuse: nothing is buffered first.
        assert_eq!(bad(&[0x82, 0xff, 0, 0, 0, 0, 1, 0, 0, 0]), Error::TooLarge);
        let mut r = MessageReader::new();
        r.extend(&masked_frame(false, OP_BINARY, b"a", [0; 4]));
        r.extend(&masked_frame(true, OP_TEXT, b"b", [0; 4]));
        assert_eq!(r.next_message(), Err(Error::BadContinuation));
    }

    #[test]
    fn server_frames_are_unmasked_with_the_shortest_length() {
        assert_eq!(&frame(OP_BINARY, b"\x01hi")[..], b"\x82\x03\x01hi");
        let f = frame(OP_BINARY, &[0u8; 200]);
        assert_eq!(&f[..4], &[0x82, 126, 0, 200]);
        let f = frame(OP_BINARY, &vec![0u8; 70_000]);
        assert_eq!(&f[..10], &[0x82, 127, 0, 0, 0, 0, 0, 1, 0x11, 0x70]);
        assert_eq!(&close_frame(CLOSE_NORMAL)[..], &[0x88, 2, 0x03, 0xe8]);
        assert_eq!(&channel_frame(STDOUT, b"ok")[..], b"\x82\x03\x01ok");
    }

    #[test]
    fn channel_messages_under_v5_and_v4() {
        let b = |s: &'static [u8]| Bytes::from_static(s);
        assert_eq!(parse_channel(V5_PROTOCOL, b(b"\x00hi")), Some(ChannelMessage::Data { stream: STDIN, data: b(b"hi") }));
        assert_eq!(parse_channel(V5_PROTOCOL, b(b"\xff\x00")), Some(ChannelMessage::Close { stream: STDIN }));
        assert_eq!(parse_channel(V4_PROTOCOL, b(b"\xff\x00")), Some(ChannelMessage::Data { stream: 255, data: b(b"\x00") }));
        assert_eq!(parse_channel(V5_PROTOCOL, Bytes::new()), None, "an empty message carries nothing");
        assert_eq!(parse_channel(V5_PROTOCOL, b(b"\xff")), None);
    }
}
