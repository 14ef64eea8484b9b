//! Mirrors CoreDNS's core/dnsserver (ServeDNS) with the default Corefile's plugin chain:
//! `kubernetes cluster.local in-addr.arpa ip6.arpa { pods insecure; fallthrough in-addr.arpa
//! ip6.arpa }` then `forward . /etc/resolv.conf`. hickory-server reads TCP and calls [`Handler::handle_request`]
//! once per message; kubelab's UDP reader ([`crate::udp`]) calls its two halves, [`Handler::step`]
//! (no I/O) and [`Handler::respond`], itself.
//!
//! 1. A name in the cluster domain is answered from the index ([`crate::kubernetes`]),
//!    authoritatively, whatever the answer (NXDOMAIN included: it never leaves the cluster).
//! 2. A PTR question for a ClusterIP is answered from the index; other reverse names fall through.
//! 3. Everything else goes to the upstream resolvers ([`crate::forward`]); SERVFAIL if none answers.

use std::sync::Arc;
use std::time::Instant;

use hickory_proto::op::{Edns, MessageType, Metadata, OpCode, ResponseCode};
use hickory_proto::rr::{Name, Record, RecordType};
use hickory_server::net::runtime::Time;
use hickory_server::net::xfer::Protocol;
use hickory_server::server::{Request, RequestHandler, ResponseHandler, ResponseInfo};
use hickory_server::zone_handler::MessageResponseBuilder;

use crate::forward::Forwarder;
use crate::index::SharedIndex;
use crate::kubernetes::{Answer, Zone};
use crate::metrics::Metrics;

/// The plugin chain: the kubernetes plugin, then forward. Cheap to clone (the index and the
/// metrics are shared), so each socket's reader holds its own.
#[derive(Clone)]
pub struct Handler {
    pub zone: Zone,
    pub index: SharedIndex,
    pub forwarder: Forwarder,
    pub metrics: Arc<Metrics>,
}

/// What steps 1 and 2 make of a request, before any I/O.
pub enum Step {
    /// The kubernetes plugin's answer.
    Answered(Answer),
    /// The server's own error: NOTIMP for a message that is no query, FORMERR for one whose
    /// question does not read.
    Error(ResponseCode),
    /// Not ours: step 3 asks the upstream resolvers.
    Forward,
}

#[async_trait::async_trait]
impl RequestHandler for Handler {
    async fn handle_request<R: ResponseHandler, T: Time>(&self, request: &Request, response_handle: R) -> ResponseInfo {
        let start = Instant::now();
        let step = self.step(request);
        self.respond(request, step, start, response_handle).await
    }
}

impl Handler {
    /// Steps 1 and 2: the kubernetes plugin's answer, under a read lock held only while it copies
    /// out; `Forward` for a name it does not serve. No I/O: the UDP reader ([`crate::udp`])
    /// answers in line when this answers, and only a forward waits on anything.
    pub fn step(&self, request: &Request) -> Step {
        let query = match request.request_info() {
            Ok(info) if request.metadata.message_type == MessageType::Query && request.metadata.op_code == OpCode::Query => info.query.original(),
            Ok(_) => return Step::Error(ResponseCode::NotImp),
            Err(_) => return Step::Error(ResponseCode::FormErr),
        };
        let qname: &Name = query.name();
        let index = self.index.read().unwrap_or_else(|e| e.into_inner());
        if self.zone.contains(qname) {
            Step::Answered(self.zone.lookup(&index, qname, query.query_type()))
        } else {
            self.zone.reverse(&index, qname, query.query_type()).map_or(Step::Forward, Step::Answered)
        }
    }

    /// Sends what `step` decided (step 3, the forward, first when it is one) and counts it.
    pub async fn respond<R: ResponseHandler>(&self, request: &Request, step: Step, start: Instant, mut response_handle: R) -> ResponseInfo {
        let proto = if request.protocol() == Protocol::Tcp { "tcp" } else { "udp" };
        let edns = request.edns.as_ref().map(|req| {
            let mut e = Edns::new();
            e.set_max_payload(req.max_payload().max(512));
            e
        });
        let qtype = request.queries.queries().first().map(|q| q.query_type());
        let qtype_label = qtype.map_or("other", type_label);
        let (plugin, sent) = match step {
            Step::Error(rcode) => return self.error(request, edns.as_ref(), rcode, proto, "other", start, response_handle).await,
            Step::Answered(a) => {
                let mut meta = Metadata::response_from_request(&request.metadata);
                meta.authoritative = true;
                meta.recursion_available = true;
                meta.response_code = a.rcode;
                let response = MessageResponseBuilder::new(&request.queries, edns.as_ref()).build(
                    meta,
                    a.answers.iter(),
                    a.authorities.iter(),
                    std::iter::empty::<&Record>(),
                    a.additionals.iter(),
                );
                ("kubernetes", response_handle.send_response(response).await)
            }
            // Step 3: forward.
            Step::Forward => match self.forwarder.forward(request.as_slice(), proto == "tcp").await {
                Ok(m) => {
                    let mut meta = m.metadata;
                    meta.id = request.metadata.id;
                    let response = MessageResponseBuilder::new(&request.queries, edns.as_ref()).build(
                        meta,
                        m.answers.iter(),
                        m.authorities.iter(),
                        std::iter::empty::<&Record>(),
                        m.additionals.iter(),
                    );
                    ("forward", response_handle.send_response(response).await)
                }
                Err(e) => {
                    let name = request.queries.queries().first().map(|q| q.name().to_string()).unwrap_or_default();
                    tracing::warn!(target: "dns::forward", %name, qtype = qtype_label, error = %e, "SERVFAIL");
                    return self.error(request, edns.as_ref(), ResponseCode::ServFail, proto, qtype_label, start, response_handle).await;
                }
            },
        };
        self.observe(proto, qtype_label, start, plugin, sent, request)
    }

    #[allow(clippy::too_many_arguments)]
    async fn error<R: ResponseHandler>(
        &self,
        request: &Request,
        edns: Option<&Edns>,
        rcode: ResponseCode,
        proto: &str,
        qtype: &str,
        start: Instant,
        mut response_handle: R,
    ) -> ResponseInfo {
        let response = MessageResponseBuilder::new(&request.queries, edns).error_msg(&request.metadata, rcode);
        let sent = response_handle.send_response(response).await;
        // SERVFAIL is the forward plugin's; a malformed or non-query message, the server's.
        let plugin = if rcode == ResponseCode::ServFail { "forward" } else { "" };
        self.observe(proto, qtype, start, plugin, sent, request)
    }

    fn observe(
        &self,
        proto: &str,
        qtype: &str,
        start: Instant,
        plugin: &str,
        sent: Result<ResponseInfo, hickory_server::net::NetError>,
        request: &Request,
    ) -> ResponseInfo {
        self.metrics.requests.with_label_values(&[proto, qtype]).inc();
        self.metrics.request_duration.with_label_values(&[qtype]).observe(start.elapsed().as_secs_f64());
        match sent {
            Ok(info) => {
                self.metrics.responses.with_label_values(&[rcode_label(info.response_code), plugin]).inc();
                info
            }
            Err(e) => {
                tracing::debug!(target: "dns::server", error = %e, "could not send the response");
                let mut meta = Metadata::response_from_request(&request.metadata);
                meta.response_code = ResponseCode::ServFail;
                ResponseInfo::from(hickory_proto::op::Header { metadata: meta, counts: Default::default() })
            }
        }
    }
}

/// The metric label of a response code, as dig and CoreDNS print them.
fn rcode_label(r: ResponseCode) -> &'static str {
    match r {
        ResponseCode::NoError => "NOERROR",
        ResponseCode::FormErr => "FORMERR",
        ResponseCode::ServFail => "SERVFAIL",
        ResponseCode::NXDomain => "NXDOMAIN",
        ResponseCode::NotImp => "NOTIMP",
        ResponseCode::Refused => "REFUSED",
        _ => "other",
    }
}

/// The metric label of a question type: the common ones by name, the rest as `other`, so a
/// client cannot grow the label set without bound.
fn type_label(t: RecordType) -> &'static str {
    match t {
        RecordType::A => "A",
        RecordType::AAAA => "AAAA",
        RecordType::SRV => "SRV",
        RecordType::PTR => "PTR",
        RecordType::CNAME => "CNAME",
        RecordType::TXT => "TXT",
        RecordType::MX => "MX",
        RecordType::NS => "NS",
        RecordType::SOA => "SOA",
        RecordType::ANY => "ANY",
        _ => "other",
    }
}
