//! Mirrors etcd's `rafthttp` (and TiKV's `transport`): carries raft messages between members.
//!
//! Sending: one task per peer owns a bounded queue and one long-lived client stream to that
//! peer. It drains whatever is queued into one batch per write, so a busy leader sends few large
//! frames. When the peer is gone it reconnects with backoff; raft itself re-sends what was lost,
//! and is told the peer is unreachable so it stops pipelining to it. A snapshot goes in a call of
//! its own, and its outcome is reported back to raft.
//!
//! Receiving: the `RaftPeer` service checks every batch (our cluster, addressed to us, from a
//! member, every message decodable) before any message of it reaches the raft loop.

use std::collections::{HashMap, HashSet};
use std::sync::mpsc as std_mpsc;
use std::sync::Arc;
use std::time::Duration;

use protobuf::Message as _;
use proto::raftpb::raft_peer_client::RaftPeerClient;
use proto::raftpb::raft_peer_server::RaftPeer;
use proto::raftpb::{Ack, MessageBatch};
use raft::eraftpb::{Message, MessageType};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status, Streaming};

use crate::config::Peer;
use crate::metrics::Metrics;
use crate::server::Input;

/// Queued messages per peer before new ones are dropped (raft re-sends).
const PEER_QUEUE: usize = 4096;
/// Most messages in one batch.
const MAX_BATCH: usize = 512;
/// How long a snapshot may take to reach a follower before raft is told it failed.
const SNAPSHOT_TIMEOUT: Duration = Duration::from_secs(60);
/// Largest frame a peer accepts: snapshots carry the whole key space.
pub const MAX_PEER_MESSAGE: usize = 1 << 30;

/// The raft thread's handle on the peers' queues; the WAL writer holds a clone.
#[derive(Clone)]
pub struct Transport {
    peers: HashMap<u64, mpsc::Sender<Message>>,
    inputs: std_mpsc::Sender<Input>,
}

impl Transport {
    pub fn start(
        peers: Vec<Peer>,
        cluster_id: u64,
        my_id: u64,
        inputs: std_mpsc::Sender<Input>,
        rt: &tokio::runtime::Handle,
        metrics: Arc<Metrics>,
    ) -> Self {
        let mut queues = HashMap::new();
        for peer in peers {
            let (tx, rx) = mpsc::channel(PEER_QUEUE);
            queues.insert(peer.id, tx);
            rt.spawn(peer_sender(peer, cluster_id, my_id, rx, inputs.clone(), metrics.clone()));
        }
        Self { peers: queues, inputs }
    }

    /// Queues messages for their peers; never blocks (called from the raft thread).
    pub fn send(&self, msgs: Vec<Message>) {
        for m in msgs {
            let to = m.to;
            match self.peers.get(&to) {
                Some(q) => {
                    if q.try_send(m).is_err() {
                        let _ = self.inputs.send(Input::Unreachable(to));
                    }
                }
                None => tracing::warn!(target: "store::transport", to = %format!("{to:x}"), "message to an unknown member dropped"),
            }
        }
    }
}

async fn peer_sender(
    peer: Peer,
    cluster_id: u64,
    my_id: u64,
    mut rx: mpsc::Receiver<Message>,
    inputs: std_mpsc::Sender<Input>,
    metrics: Arc<Metrics>,
) {
    let mut backoff = MIN_BACKOFF;
    let url = peer.peer_urls[0].clone();
    loop {
        let endpoint = match tonic::transport::Endpoint::from_shared(url.clone()) {
            // HTTP/2 keepalive finds a connection whose other end vanished (a killed member, a
            // cut network): the call then fails and the sender reconnects, instead of writing
            // into a connection nobody reads.
            Ok(e) => e
                .connect_timeout(Duration::from_secs(1))
                .tcp_nodelay(true)
                .http2_keep_alive_interval(Duration::from_secs(1))
                .keep_alive_timeout(Duration::from_secs(2))
                .keep_alive_while_idle(true),
            Err(e) => {
                tracing::error!(target: "store::transport", peer = %peer.name, url = %url, error = %e, "bad peer URL; not sending to it");
                return;
            }
        };
        let started = tokio::time::Instant::now();
        if let Ok(channel) = endpoint.connect().await {
            tracing::debug!(target: "store::transport", peer = %peer.name, "connected");
            let client = RaftPeerClient::new(channel)
                .max_decoding_message_size(MAX_PEER_MESSAGE)
                .max_encoding_message_size(MAX_PEER_MESSAGE);
            if stream_to(&peer, cluster_id, my_id, client, &mut rx, &inputs, &metrics).await.is_err() {
                return; // the raft loop is gone
            }
        }
        // Drop what is queued: it is stale by the time the peer is back, and raft resends.
        while rx.try_recv().is_ok() {}
        let _ = inputs.send(Input::Unreachable(peer.id));
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
/// A stream that accepts nothing for this long is given up and reconnected.
const STALL_LIMIT: Duration = Duration::from_secs(3);

/// Feeds one stream until it ends or stalls. Never blocks on the stream: a full stream drops the
/// batch (raft resends) and reports the peer unreachable. Err when the raft loop has gone away.
async fn stream_to(
    peer: &Peer,
    cluster_id: u64,
    my_id: u64,
    client: RaftPeerClient<tonic::transport::Channel>,
    rx: &mut mpsc::Receiver<Message>,
    inputs: &std_mpsc::Sender<Input>,
    metrics: &Arc<Metrics>,
) -> Result<(), ()> {
    let (stx, srx) = mpsc::channel::<MessageBatch>(64);
    let mut call = tokio::spawn({
        let mut client = client.clone();
        async move { client.stream(ReceiverStream::new(srx)).await }
    });
    let batch = |messages| MessageBatch { cluster_id, from: my_id, to: peer.id, messages };
    let mut stalled_since: Option<tokio::time::Instant> = None;
    let result = loop {
        tokio::select! {
            m = rx.recv() => {
                let Some(m) = m else { break Err(()) };
                let mut items = Vec::new();
                let mut next = Some(m);
                while let Some(m) = next.take() {
                    if m.get_msg_type() == MessageType::MsgSnapshot {
                        send_snapshot(client.clone(), batch(vec![encode(&m)]), peer.id, inputs.clone(), metrics.clone());
                    } else {
                        items.push(encode(&m));
                    }
                    if items.len() < MAX_BATCH {
                        next = rx.try_recv().ok();
                    }
                }
                if items.is_empty() {
                    continue;
                }
                match stx.try_send(batch(items)) {
                    Ok(()) => stalled_since = None,
                    Err(mpsc::error::TrySendError::Full(_)) => {
                        let _ = inputs.send(Input::Unreachable(peer.id));
                        let since = *stalled_since.get_or_insert_with(tokio::time::Instant::now);
                        if since.elapsed() > STALL_LIMIT {
                            tracing::debug!(target: "store::transport", peer = %peer.name, "stream stalled; reconnecting");
                            break Ok(());
                        }
                    }
                    Err(mpsc::error::TrySendError::Closed(_)) => break Ok(()),
                }
            }
            _ = &mut call => break Ok(()),
        }
    };
    call.abort();
    result
}

fn encode(m: &Message) -> Vec<u8> {
    m.write_to_bytes().expect("encoding a raft message cannot fail")
}

fn send_snapshot(
    mut client: RaftPeerClient<tonic::transport::Channel>,
    batch: MessageBatch,
    to: u64,
    inputs: std_mpsc::Sender<Input>,
    metrics: Arc<Metrics>,
) {
    tokio::spawn(async move {
        let ok = matches!(tokio::time::timeout(SNAPSHOT_TIMEOUT, client.snapshot(batch)).await, Ok(Ok(_)));
        if ok {
            metrics.snapshots_sent.inc();
        }
        tracing::info!(target: "store::transport", to = %format!("{to:x}"), ok, "snapshot sent");
        let _ = inputs.send(Input::SnapshotStatus(to, ok));
    });
}

/// The receiving side: the `RaftPeer` gRPC service.
pub struct PeerService {
    pub cluster_id: u64,
    pub my_id: u64,
    pub members: HashSet<u64>,
    pub inputs: std_mpsc::Sender<Input>,
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
        if b.to != self.my_id || !self.members.contains(&b.from) {
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
            self.inputs.send(Input::Step(m)).map_err(|_| Status::unavailable("member is stopping"))?;
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

    fn service() -> (PeerService, std_mpsc::Receiver<Input>) {
        let (tx, rx) = std_mpsc::channel();
        let svc = PeerService { cluster_id: 7, my_id: 1, members: [1, 2, 3].into(), inputs: tx, metrics: Metrics::new() };
        (svc, rx)
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
        let (svc, rx) = service();
        let garbage = vec![0xff, 0xff, 0xff, 0x01];
        let batch = |cluster_id, from, messages| MessageBatch { cluster_id, from, to: 1, messages };
        let err = svc.deliver(batch(7, 2, vec![msg(2, 1), garbage])).unwrap_err();
        assert_eq!(err.code(), tonic::Code::InvalidArgument);
        assert!(err.message().contains("malformed raft message"));
        assert_eq!(svc.deliver(batch(8, 2, vec![msg(2, 1)])).unwrap_err().code(), tonic::Code::FailedPrecondition);
        assert_eq!(svc.deliver(batch(7, 9, vec![msg(9, 1)])).unwrap_err().code(), tonic::Code::PermissionDenied);
        assert_eq!(svc.deliver(batch(7, 2, vec![msg(3, 1)])).unwrap_err().code(), tonic::Code::InvalidArgument);
        assert!(rx.try_recv().is_err(), "nothing of a rejected batch was delivered");
        assert_eq!(svc.metrics.peer_messages_rejected.get(), 4);
        svc.deliver(batch(7, 2, vec![msg(2, 1), msg(2, 1)])).unwrap();
        assert_eq!(rx.try_iter().count(), 2);
    }
}
