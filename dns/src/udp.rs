//! Mirrors miekg/dns's server.go (`serveUDP`, the loop CoreDNS reads UDP with): kubelab's own
//! reader of the UDP socket, in place of hickory-server's.
//!
//! Why not hickory-server's: it spawns a task per message and hands each response to a writer
//! task over a channel; those tasks and the wake-ups between threads held it to 61–69% of
//! dnsmasq's throughput (BENCHMARKS.md, "The cluster DNS"). miekg/dns starts a goroutine per
//! message too. Here a reader task does it all for the names the server answers itself:
//!
//! 1. **Reads** a datagram. Shorter than a header: dropped (it is no DNS message). A response
//!    (the QR bit set): dropped, so no one can bounce answers off the server. A source on port 0
//!    or an unspecified or broadcast address: dropped (no answer could reach it).
//! 2. **Parses** it with hickory-server's `Request`; a message whose header reads but whose body
//!    does not gets FORMERR.
//! 3. **Decides** ([`Handler::step`], no I/O): the kubernetes plugin's answer is sent in line, by
//!    this task, before it reads the next datagram; a forward gets a task of its own, since it
//!    waits on an upstream.
//! 4. **Sends** the response, truncated (TC set) to the client's EDNS buffer size, or 512 bytes
//!    without EDNS, as hickory-server's encoder does for UDP.
//!
//! There are as many reader tasks as CPUs, all on the one socket: whichever is free takes the
//! next datagram. (One socket per CPU with `SO_REUSEPORT`, as CoreDNS's `multisocket` does,
//! measured slower on two cores: the kernel spreads clients by address and port, and a few
//! busy clients can land on one socket.)

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Instant;

use hickory_proto::op::{Header, Message, MessageType, Metadata, OpCode, ResponseCode};
use hickory_proto::rr::Record;
use hickory_proto::serialize::binary::{BinDecodable, BinDecoder, BinEncodable, BinEncoder};
use hickory_server::net::NetError;
use hickory_server::net::xfer::Protocol;
use hickory_server::server::{Request, ResponseHandler, ResponseInfo};
use hickory_server::zone_handler::MessageResponse;
use tokio::net::UdpSocket;

use crate::server::{Handler, Step};

/// The largest datagram read (EDNS allows up to 65,535; CoreDNS reads 64 KiB as well).
const MAX_DATAGRAM: usize = 65_535;

/// The readers of the UDP socket: tasks, until [`Readers::stop`].
pub(crate) struct Readers(Vec<tokio::task::JoinHandle<()>>);

impl Readers {
    /// Starts `count` reader tasks of `socket` on the current tokio runtime.
    pub fn start(socket: UdpSocket, count: usize, handler: &Handler) -> Readers {
        let socket = Arc::new(socket);
        Readers((0..count.max(1)).map(|_| tokio::spawn(serve(Arc::clone(&socket), handler.clone()))).collect())
    }

    /// Stops the readers (a forward under way still sends its answer).
    pub fn stop(self) {
        self.0.iter().for_each(|t| t.abort());
    }
}

/// Serves `socket` until aborted.
async fn serve(socket: Arc<UdpSocket>, handler: Handler) {
    let mut buf = vec![0u8; MAX_DATAGRAM];
    loop {
        // Step 1: read.
        let (len, src) = match socket.recv_from(&mut buf).await {
            Ok(r) => r,
            Err(e) => {
                tracing::debug!(target: "dns::server", error = %e, "udp receive");
                continue;
            }
        };
        let start = Instant::now();
        let bytes = &buf[..len];
        let Ok(header) = Header::read(&mut BinDecoder::new(bytes)) else { continue };
        if header.metadata.message_type == MessageType::Response || !answerable(src) {
            continue;
        }
        let handle = UdpResponse { socket: Arc::clone(&socket), dst: src };
        // Step 2: parse.
        let request = match Request::from_bytes(bytes.to_vec(), src, Protocol::Udp) {
            Ok(r) => r,
            Err(e) => {
                tracing::debug!(target: "dns::server", %src, error = %e, "FORMERR");
                form_error(&handler, header, &handle).await;
                continue;
            }
        };
        // Steps 3 and 4: answer in line (only the send awaits), or forward in a task of its own.
        match handler.step(&request) {
            Step::Forward => {
                let handler = handler.clone();
                tokio::spawn(async move { handler.respond(&request, Step::Forward, start, handle).await });
            }
            step => {
                handler.respond(&request, step, start, handle).await;
            }
        }
    }
}

/// Whether a response to `src` could reach anyone (hickory-server's `sanitize_src_address`).
fn answerable(src: SocketAddr) -> bool {
    src.port() != 0
        && match src.ip() {
            IpAddr::V4(a) => !a.is_unspecified() && !a.is_broadcast(),
            IpAddr::V6(a) => !a.is_unspecified(),
        }
}

/// FORMERR for a message whose header read but whose body did not: the header's ID and opcode,
/// no question (it could not be read), counted as the server's.
async fn form_error(handler: &Handler, header: Header, handle: &UdpResponse) {
    let mut meta = Metadata::response_from_request(&header.metadata);
    meta.response_code = ResponseCode::FormErr;
    let mut m = Message::new(meta.id, MessageType::Response, header.metadata.op_code);
    m.metadata = meta;
    if let Ok(bytes) = m.to_vec() {
        let _ = handle.socket.send_to(&bytes, handle.dst).await;
    }
    handler.metrics.requests.with_label_values(&["udp", "other"]).inc();
    handler.metrics.responses.with_label_values(&["FORMERR", ""]).inc();
}

/// Sends one response on the socket its request came in on.
#[derive(Clone)]
struct UdpResponse {
    socket: Arc<UdpSocket>,
    dst: SocketAddr,
}

#[async_trait::async_trait]
impl ResponseHandler for UdpResponse {
    async fn send_response<'a>(
        &mut self,
        response: MessageResponse<
            '_,
            'a,
            impl Iterator<Item = &'a Record> + Send + 'a,
            impl Iterator<Item = &'a Record> + Send + 'a,
            impl Iterator<Item = &'a Record> + Send + 'a,
            impl Iterator<Item = &'a Record> + Send + 'a,
        >,
    ) -> Result<ResponseInfo, NetError> {
        // Step 4: at most the client's buffer; the encoder drops what does not fit and sets TC.
        let max = response.edns().map_or(512, |e| e.max_payload());
        let id = response.metadata().id;
        let mut bytes = Vec::with_capacity(512);
        let mut encoder = BinEncoder::new(&mut bytes);
        encoder.set_max_size(max);
        let info = match response.destructive_emit(&mut encoder) {
            Ok(info) => info,
            Err(e) => {
                tracing::error!(target: "dns::server", error = %e, "could not encode a response: SERVFAIL");
                let mut metadata = Metadata::new(id, MessageType::Response, OpCode::Query);
                metadata.response_code = ResponseCode::ServFail;
                let header = Header { metadata, counts: Default::default() };
                bytes.clear();
                header.emit(&mut BinEncoder::new(&mut bytes)).map_err(NetError::from)?;
                ResponseInfo::from(header)
            }
        };
        self.socket.send_to(&bytes, self.dst).await?;
        Ok(info)
    }
}
