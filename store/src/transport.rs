//! Mirrors etcd's `rafthttp` (and TiKV's `transport`): carries raft messages between members.
//!
//! Sending: one task per peer owns a bounded queue and one long-lived client stream to that
//! peer, whose body reads the queue: whatever is queued when the connection can take more goes
//! as one batch, so a busy leader sends few large frames. When the peer is gone the task
//! reconnects with backoff; raft itself re-sends what was lost, and is told the peer is
//! unreachable so it stops pipelining to it. A snapshot goes in a call of its own, and its
//! outcome is reported back to raft.
//!
//! A peer at an `https://` URL is dialed over TLS with this member's peer certificate, and its
//! own is verified against the peer CA (`netutil::dial`); the peer port's TLS and client
//! certificate check are the listener's (`netutil::accept`).
//!
//! Receiving: the `RaftPeer` service checks every batch (our cluster, addressed to us, from a
//! member, every message decodable) before any message of it reaches the raft loop.
//!
//! The transport knows the raft loop only as [`Raft`] (rafthttp's `Raft` interface): where
//! received messages go, and where an unreachable peer and a snapshot's outcome are reported.
//!
//! Membership changes reach it through [`Transport::sync`] (rafthttp's `AddPeer`, `RemovePeer`,
//! `UpdatePeer`): the raft thread calls it when an applied change altered the member records.
//! A removed member's batches are refused with [`REMOVED_MESSAGE`]; a sender that hears it
//! tells its raft loop, and the member stops (etcd answers such a member `410 Gone`).
//! The transport also keeps when each peer's connection came up (rafthttp's `ActiveSince`),
//! for the quorum checks of a membership change.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use protobuf::Message as _;
use proto::raftpb::raft_peer_client::RaftPeerClient;
use proto::raftpb::raft_peer_server::RaftPeer;
use proto::raftpb::{Ack, MessageBatch};
use raft::eraftpb::{Message, MessageType};
use tokio::sync::mpsc;
use tonic::{Request, Response, Status, Streaming};

use crate::config::Peer;
use crate::metrics::Metrics;

/// Queued messages per peer before new ones are dropped (raft re-sends).
const PEER_QUEUE: usize = 4096;
/// Most messages in one batch.
const MAX_BATCH: usize = 512;
/// How long a snapshot may take to reach a follower before raft is told it failed.
const SNAPSHOT_TIMEOUT: Duration = Duration::from_secs(60);
/// Largest frame a peer accepts: snapshots carry the whole key space.
pub const MAX_PEER_MESSAGE: usize = 1 << 30;

/// What the transport needs of the raft loop (etcd's `rafthttp.Raft`). Every method must return
/// at once: they are called from the raft thread, the WAL writer and async tasks.
pub trait Raft: Send + Sync + 'static {
    /// Hands a received message to the raft loop; an error means the member is stopping.
    fn process(&self, m: Message) -> Result<(), Stopping>;
    /// The peer cannot be reached: raft stops pipelining to it until it answers again.
    fn report_unreachable(&self, id: u64);
    /// Whether a snapshot reached the peer.
    fn report_snapshot(&self, id: u64, ok: bool);
    /// A peer refused this member as removed from the cluster.
    fn report_removed(&self);
}

/// What a removed member's batches are refused with (etcd's words for its `410 Gone`).
pub const REMOVED_MESSAGE: &str = "the member has been permanently removed from the cluster";

/// Which members may send to this one and which were removed, shared by the transport (which
/// updates it) and the peer service (which checks every batch against it).
#[derive(Clone, Default)]
pub struct PeerSet {
    members: Arc<RwLock<HashSet<u64>>>,
    removed: Arc<RwLock<HashSet<u64>>>,
}

impl PeerSet {
    pub fn new(members: impl IntoIterator<Item = u64>) -> Self {
        Self { members: Arc::new(RwLock::new(members.into_iter().collect())), removed: Default::default() }
    }

    fn contains(&self, id: u64) -> bool {
        self.members.read().expect("peer set lock").contains(&id)
    }

    fn is_removed(&self, id: u64) -> bool {
        self.removed.read().expect("peer set lock").contains(&id)
    }
}

/// When each peer's current connection came up (rafthttp's `ActiveSince`).
#[derive(Clone, Default)]
pub struct Activity(Arc<Mutex<HashMap<u64, Option<Instant>>>>);

impl Activity {
    /// Connected since at least `since`.
    pub fn connected_since(&self, id: u64, since: Instant) -> bool {
        matches!(self.0.lock().expect("activity lock").get(&id), Some(Some(t)) if *t <= since)
    }

    /// Connected now.
    pub fn is_active(&self, id: u64) -> bool {
        matches!(self.0.lock().expect("activity lock").get(&id), Some(Some(_)))
    }

    fn set(&self, id: u64, up: bool) {
        let mut a = self.0.lock().expect("activity lock");
        match (up, a.get(&id)) {
            (true, Some(Some(_))) => {}
            (true, _) => {
                a.insert(id, Some(Instant::now()));
            }
            (false, _) => {
                a.insert(id, None);
            }
        }
    }
}

/// One peer's sending side: its queue and the URLs its task dials.
struct PeerQueue {
    tx: mpsc::Sender<Message>,
    urls: Vec<String>,
}

/// What starting a peer's sender takes.
struct Shared {
    cluster_id: u64,
    my_id: u64,
    rt: tokio::runtime::Handle,
    metrics: Arc<Metrics>,
    tls: Option<Arc<rustls::ClientConfig>>,
    activity: Activity,
    set: PeerSet,
}

/// The raft loop is gone: the member is stopping.
#[derive(Debug)]
pub struct Stopping;

/// The raft thread's handle on the peers' queues; the WAL writer holds a clone.
#[derive(Clone)]
pub struct Transport {
    peers: Arc<Mutex<HashMap<u64, PeerQueue>>>,
    raft: Arc<dyn Raft>,
    shared: Arc<Shared>,
}

impl Transport {
    pub fn start(
        peers: Vec<Peer>,
        cluster_id: u64,
        my_id: u64,
        raft: Arc<dyn Raft>,
        rt: &tokio::runtime::Handle,
        metrics: Arc<Metrics>,
        tls: Option<Arc<rustls::ClientConfig>>,
    ) -> Self {
        let set = PeerSet::new(peers.iter().map(|p| p.id).chain([my_id]));
        let shared = Arc::new(Shared { cluster_id, my_id, rt: rt.clone(), metrics, tls, activity: Activity::default(), set });
        let t = Self { peers: Arc::new(Mutex::new(HashMap::new())), raft, shared };
        for peer in peers {
            t.add_peer(peer);
        }
        t
    }

    /// Who may send to this member (for its [`PeerService`]).
    pub fn peer_set(&self) -> PeerSet {
        self.shared.set.clone()
    }

    /// When the peers' connections came up, for the quorum checks of membership changes.
    pub fn activity(&self) -> Activity {
        self.shared.activity.clone()
    }

    fn add_peer(&self, peer: Peer) {
        let (tx, rx) = mpsc::channel(PEER_QUEUE);
        let s = &self.shared;
        self.peers.lock().expect("peers lock").insert(peer.id, PeerQueue { tx, urls: peer.peer_urls.clone() });
        s.set.members.write().expect("peer set lock").insert(peer.id);
        tracing::info!(target: "store::transport", peer = %format!("{:x}", peer.id), urls = ?peer.peer_urls, "added peer");
        s.rt.spawn(peer_sender(peer, rx, self.raft.clone(), s.clone()));
    }

    /// Brings the peers in line with the member records: new members are dialed, removed ones
    /// dropped (their sender ends with its queue) and refused from now on, and a member whose
    /// peer URLs changed is dialed at the new ones.
    pub fn sync(&self, members: &[Peer], removed: &BTreeSet<u64>) {
        let s = &self.shared;
        s.set.removed.write().expect("peer set lock").extend(removed.iter().copied());
        let mut stale = Vec::new();
        {
            let peers = self.peers.lock().expect("peers lock");
            for (id, q) in peers.iter() {
                if !members.iter().any(|m| m.id == *id && m.peer_urls == q.urls) {
                    stale.push(*id);
                }
            }
        }
        for id in stale {
            self.peers.lock().expect("peers lock").remove(&id);
            if !members.iter().any(|m| m.id == id) {
                s.set.members.write().expect("peer set lock").remove(&id);
                tracing::info!(target: "store::transport", peer = %format!("{id:x}"), "removed peer");
            }
        }
        for m in members {
            if m.id != s.my_id && !m.peer_urls.is_empty() && !self.peers.lock().expect("peers lock").contains_key(&m.id) {
                self.add_peer(m.clone());
            }
        }
    }

    /// Queues messages for their peers; never blocks (called from the raft thread).
    pub fn send(&self, msgs: Vec<Message>) {
        let peers = self.peers.lock().expect("peers lock");
        for m in msgs {
            let to = m.to;
            match peers.get(&to) {
                Some(q) => {
                    if q.tx.try_send(m).is_err() {
                        self.raft.report_unreachable(to);
                    }
                }
                None => tracing::debug!(target: "store::transport", to = %format!("{to:x}"), "message to an unknown member dropped"),
            }
        }
    }
}

async fn peer_sender(peer: Peer, rx: mpsc::Receiver<Message>, raft: Arc<dyn Raft>, shared: Arc<Shared>) {
    let (cluster_id, my_id, metrics, tls, activity) =
        (shared.cluster_id, shared.my_id, shared.metrics.clone(), shared.tls.clone(), shared.activity.clone());
    let mut backoff = MIN_BACKOFF;
    // TLS is the connector's (netutil::dial), so tonic is given the URL as http://: it would
    // refuse an https:// one without a TLS configuration of its own.
    let (url, tls) = match peer.peer_urls[0].strip_prefix("https://") {
        Some(rest) => (format!("http://{rest}"), tls),
        None => (peer.peer_urls[0].clone(), None),
    };
    // The queue outlives each connection: the stream of the current call reads it.
    let rx = Arc::new(Mutex::new(rx));
    loop {
        let endpoint = match tonic::transport::Endpoint::from_shared(url.clone()) {
            // HTTP/2 keepalive finds a connection whose other end vanished or stopped answering
            // (a killed member, a cut network): the call then fails and the sender reconnects,
            // instead of writing into a connection nobody reads.
            Ok(e) => e
                .connect_timeout(Duration::from_secs(1))
                .http2_keep_alive_interval(Duration::from_secs(1))
                .keep_alive_timeout(Duration::from_secs(2))
                .keep_alive_while_idle(true),
            Err(e) => {
                tracing::error!(target: "store::transport", peer = %peer.name, url = %url, error = %e, "bad peer URL; not sending to it");
                return;
            }
        };
        let started = tokio::time::Instant::now();
        // Dialed by `netutil::dial`, which sets the socket options accepted connections get.
        let tls = tls.clone();
        let connector = tower::service_fn(move |uri| crate::netutil::dial(uri, tls.clone()));
        if let Ok(channel) = endpoint.connect_with_connector(connector).await {
            tracing::debug!(target: "store::transport", peer = %peer.name, "connected");
            let mut client = RaftPeerClient::new(channel)
                .max_decoding_message_size(MAX_PEER_MESSAGE)
                .max_encoding_message_size(MAX_PEER_MESSAGE);
            let batches = Batches {
                rx: rx.clone(),
                head: MessageBatch { cluster_id, from: my_id, to: peer.id, messages: Vec::new() },
                snapshots: client.clone(),
                raft: raft.clone(),
                metrics: metrics.clone(),
            };
            activity.set(peer.id, true);
            let r = client.stream(batches).await;
            activity.set(peer.id, false);
            if let Err(s) = r
                && s.message() == REMOVED_MESSAGE
            {
                tracing::error!(target: "store::transport", peer = %peer.name, "{REMOVED_MESSAGE}");
                raft.report_removed();
                return;
            }
        }
        if rx.lock().expect("peer queue lock").is_closed() {
            return; // the raft loop is gone
        }
        // Drop what is queued: it is stale by the time the peer is back, and raft resends.
        while rx.lock().expect("peer queue lock").try_recv().is_ok() {}
        raft.report_unreachable(peer.id);
        // A connection that ends at once (a peer that accepts and closes) is retried with backoff
        // like one that cannot be made at all.
        if started.elapsed() < Duration::from_secs(1) {
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(MAX_BACKOFF);
        } else {
            backoff = MIN_BACKOFF;
        }
        tracing::debug!(target: "store::transport", peer = %peer.name, "reconnecting");
    }
}

const MIN_BACKOFF: Duration = Duration::from_millis(50);
const MAX_BACKOFF: Duration = Duration::from_secs(1);

/// The body of one streaming call to a peer: whatever is queued for the peer when the call can
/// take more, as one batch. The call's own connection task polls it, so a message goes from the
/// raft thread's queue to the socket without a task of ours in between. When the peer does not
/// read, the stream is not polled, the queue fills, and [`Transport::send`] reports the peer
/// unreachable; a peer gone silent is found by HTTP/2 keepalive, which ends the call.
struct Batches {
    rx: Arc<Mutex<mpsc::Receiver<Message>>>,
    /// The batch's addressing; `messages` stays empty.
    head: MessageBatch,
    /// For snapshots, which go in calls of their own.
    snapshots: RaftPeerClient<tonic::transport::Channel>,
    raft: Arc<dyn Raft>,
    metrics: Arc<Metrics>,
}

impl futures::Stream for Batches {
    type Item = MessageBatch;

    fn poll_next(mut self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<Option<MessageBatch>> {
        use std::task::Poll;
        let this = &mut *self;
        let mut rx = this.rx.lock().expect("peer queue lock");
        let mut items = Vec::new();
        while items.len() < MAX_BATCH {
            let m = if items.is_empty() {
                match rx.poll_recv(cx) {
                    Poll::Ready(Some(m)) => m,
                    // The raft loop is gone: the call ends, and with it the sender.
                    Poll::Ready(None) => return Poll::Ready(None),
                    Poll::Pending => return Poll::Pending,
                }
            } else {
                match rx.try_recv() {
                    Ok(m) => m,
                    Err(_) => break,
                }
            };
            if m.get_msg_type() == MessageType::MsgSnapshot {
                let batch = MessageBatch { messages: vec![encode(&m)], ..this.head.clone() };
                send_snapshot(this.snapshots.clone(), batch, this.head.to, this.raft.clone(), this.metrics.clone());
            } else {
                items.push(encode(&m));
            }
        }
        // The loop waits (Pending) while it has nothing, so `items` holds a message here.
        Poll::Ready(Some(MessageBatch { messages: items, ..this.head.clone() }))
    }
}

fn encode(m: &Message) -> Vec<u8> {
    m.write_to_bytes().expect("encoding a raft message cannot fail")
}

fn send_snapshot(
    mut client: RaftPeerClient<tonic::transport::Channel>,
    batch: MessageBatch,
    to: u64,
    raft: Arc<dyn Raft>,
    metrics: Arc<Metrics>,
) {
    tokio::spawn(async move {
        let ok = matches!(tokio::time::timeout(SNAPSHOT_TIMEOUT, client.snapshot(batch)).await, Ok(Ok(_)));
        if ok {
            metrics.snapshots_sent.inc();
        }
        tracing::info!(target: "store::transport", to = %format!("{to:x}"), ok, "snapshot sent");
        raft.report_snapshot(to, ok);
    });
}

/// The receiving side: the `RaftPeer` gRPC service.
pub struct PeerService {
    pub cluster_id: u64,
    pub my_id: u64,
    pub members: PeerSet,
    pub raft: Arc<dyn Raft>,
    pub metrics: Arc<Metrics>,
}

impl PeerService {
    /// Checks a whole batch, then hands its messages to the raft loop; a bad batch delivers none.
    fn deliver(&self, b: MessageBatch) -> Result<(), Status> {
        let reject = |s: Status| {
            self.metrics.peer_messages_rejected.inc();
            tracing::warn!(target: "store::transport", from = %format!("{:x}", b.from), error = %s.message(), "peer batch rejected");
            s
        };
        if b.cluster_id != self.cluster_id {
            return Err(reject(Status::failed_precondition(format!(
                "cluster ID mismatch: this member is in cluster {:x}, the sender in {:x}",
                self.cluster_id, b.cluster_id
            ))));
        }
        if self.members.is_removed(b.from) {
            return Err(reject(Status::failed_precondition(REMOVED_MESSAGE)));
        }
        if b.to != self.my_id || !self.members.contains(b.from) {
            return Err(reject(Status::permission_denied(format!(
                "batch from {:x} to {:x} is not for member {:x} of this cluster",
                b.from, b.to, self.my_id
            ))));
        }
        let mut msgs = Vec::with_capacity(b.messages.len());
        for raw in &b.messages {
            let m = Message::parse_from_bytes(raw)
                .map_err(|e| reject(Status::invalid_argument(format!("malformed raft message: {e}"))))?;
            if m.from != b.from || m.to != self.my_id {
                return Err(reject(Status::invalid_argument("raft message addressed differently from its batch")));
            }
            msgs.push(m);
        }
        for m in msgs {
            self.raft.process(m).map_err(|Stopping| Status::unavailable("member is stopping"))?;
        }
        Ok(())
    }
}

#[tonic::async_trait]
impl RaftPeer for PeerService {
    async fn stream(&self, req: Request<Streaming<MessageBatch>>) -> Result<Response<Ack>, Status> {
        let mut s = req.into_inner();
        while let Some(b) = s.message().await? {
            self.deliver(b)?;
        }
        Ok(Response::new(Ack {}))
    }

    async fn snapshot(&self, req: Request<MessageBatch>) -> Result<Response<Ack>, Status> {
        self.deliver(req.into_inner())?;
        Ok(Response::new(Ack {}))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The messages handed to raft, in order.
    #[derive(Default)]
    struct Delivered(Mutex<Vec<Message>>);

    impl Raft for Delivered {
        fn process(&self, m: Message) -> Result<(), Stopping> {
            self.0.lock().expect("test lock").push(m);
            Ok(())
        }
        fn report_unreachable(&self, _: u64) {}
        fn report_snapshot(&self, _: u64, _: bool) {}
        fn report_removed(&self) {}
    }

    fn service() -> (PeerService, Arc<Delivered>) {
        let delivered = Arc::new(Delivered::default());
        let svc = PeerService { cluster_id: 7, my_id: 1, members: PeerSet::new([1, 2, 3]), raft: delivered.clone(), metrics: Metrics::new() };
        (svc, delivered)
    }

    fn msg(from: u64, to: u64) -> Vec<u8> {
        let mut m = Message::default();
        m.from = from;
        m.to = to;
        m.set_msg_type(MessageType::MsgHeartbeat);
        encode(&m)
    }

    #[test]
    fn a_bad_batch_is_rejected_whole_and_nothing_reaches_raft() {
        let (svc, delivered) = service();
        let garbage = vec![0xff, 0xff, 0xff, 0x01];
        let batch = |cluster_id, from, messages| MessageBatch { cluster_id, from, to: 1, messages };
        let err = svc.deliver(batch(7, 2, vec![msg(2, 1), garbage])).unwrap_err();
        assert_eq!(err.code(), tonic::Code::InvalidArgument);
        assert!(err.message().contains("malformed raft message"));
        assert_eq!(svc.deliver(batch(8, 2, vec![msg(2, 1)])).unwrap_err().code(), tonic::Code::FailedPrecondition);
        assert_eq!(svc.deliver(batch(7, 9, vec![msg(9, 1)])).unwrap_err().code(), tonic::Code::PermissionDenied);
        assert_eq!(svc.deliver(batch(7, 2, vec![msg(3, 1)])).unwrap_err().code(), tonic::Code::InvalidArgument);
        assert!(delivered.0.lock().unwrap().is_empty(), "nothing of a rejected batch was delivered");
        assert_eq!(svc.metrics.peer_messages_rejected.get(), 4);
        svc.deliver(batch(7, 2, vec![msg(2, 1), msg(2, 1)])).unwrap();
        assert_eq!(delivered.0.lock().unwrap().len(), 2);
        svc.members.removed.write().unwrap().insert(2);
        assert_eq!(svc.deliver(batch(7, 2, vec![msg(2, 1)])).unwrap_err().message(), REMOVED_MESSAGE, "a removed member is told so");
    }
}
