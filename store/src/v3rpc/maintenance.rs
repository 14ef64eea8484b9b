//! Mirrors etcd's `v3rpc/maintenance.go`: Status (what `etcdctl endpoint status` shows), Alarm
//! (`etcdctl alarm list|disarm`), Defragment (`etcdctl defrag`) and Snapshot (`etcdctl snapshot
//! save`).

use std::io::Write;

use proto::etcd::*;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};

use super::unimplemented;
use crate::alarms;
use crate::apply::{self, Applied};
use crate::error::Error;
use crate::server::Node;
use crate::snapshot::SEND_BUFFER_SIZE;

/// The etcd API version kubelab's store speaks.
pub const ETCD_VERSION: &str = "3.5.0";

pub struct MaintenanceService {
    pub node: Node,
}

/// Cuts the snapshot file into `SnapshotResponse`s of [`SEND_BUFFER_SIZE`] bytes, each saying
/// how many bytes are still to come, and hands them to the gRPC stream.
struct Chunker {
    tx: mpsc::Sender<Result<PbSnapshotResponse, Status>>,
    buf: Vec<u8>,
    total: u64,
    sent: u64,
    header: Option<PbResponseHeader>,
}

impl Chunker {
    fn send(&mut self) -> std::io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let blob = std::mem::replace(&mut self.buf, Vec::with_capacity(SEND_BUFFER_SIZE));
        self.sent += blob.len() as u64;
        let resp = PbSnapshotResponse {
            // The first header tells the point in time of the snapshot.
            header: self.header.take(),
            remaining_bytes: self.total.saturating_sub(self.sent),
            blob,
            version: ETCD_VERSION.into(),
        };
        self.tx.blocking_send(Ok(resp)).map_err(|_| std::io::Error::other("the client went away"))
    }
}

impl Write for Chunker {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        let n = data.len().min(SEND_BUFFER_SIZE - self.buf.len());
        self.buf.extend_from_slice(&data[..n]);
        if self.buf.len() == SEND_BUFFER_SIZE {
            self.send()?;
        }
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.send()
    }
}

#[tonic::async_trait]
impl PbMaintenanceService for MaintenanceService {
    /// Every action goes through raft, as in etcd (`EtcdServer.Alarm`): a GET answers what the
    /// cluster agreed on, an ACTIVATE or DEACTIVATE changes it on every member.
    async fn alarm(&self, req: Request<PbAlarmRequest>) -> Result<Response<PbAlarmResponse>, Status> {
        super::refuse_learner(&self.node)?;
        match self.node.propose(apply::Request::Alarm(req.into_inner())).await? {
            Applied::Alarm(mut r) => {
                r.header = self.node.header(r.header.map_or(0, |h| h.revision));
                Ok(Response::new(r))
            }
            other => Err(Status::internal(format!("unexpected apply result {other:?}"))),
        }
    }

    async fn status(&self, _: Request<PbStatusRequest>) -> Result<Response<PbStatusResponse>, Status> {
        let st = self.node.status();
        let (rev, raised) = {
            let sm = self.node.state_machine().read().expect("state machine lock");
            (sm.kv.current_revision(), sm.alarms.get(alarms::alarm_type::NONE))
        };
        let size = self.node.db_size() as i64;
        let mut errors = Vec::new();
        if st.leader == 0 {
            errors.push("etcdserver: no leader".to_string());
        }
        errors.extend(raised.iter().map(alarms::describe));
        Ok(Response::new(PbStatusResponse {
            header: self.node.header(rev),
            version: ETCD_VERSION.into(),
            db_size: size,
            leader: st.leader,
            raft_index: st.last_index,
            raft_term: st.term,
            raft_applied_index: st.applied_index,
            errors,
            db_size_in_use: (self.node.db_size_in_use() as i64).min(size),
            is_learner: false,
            ..Default::default()
        }))
    }

    /// Defragments this member only (etcdctl asks each endpoint in turn), as etcd does.
    async fn defragment(&self, _: Request<PbDefragmentRequest>) -> Result<Response<PbDefragmentResponse>, Status> {
        super::refuse_learner(&self.node)?;
        let node = self.node.clone();
        let before = node.db_size();
        let start = std::time::Instant::now();
        tracing::info!(target: "store::maintenance", db_size = before, "starting defragmentation");
        node.defragment().await.map_err(|e| {
            tracing::warn!(target: "store::maintenance", error = %e, "failed to defragment");
            Status::from(e)
        })?;
        let after = self.node.db_size();
        tracing::info!(target: "store::maintenance", db_size_before = before, db_size_after = after, took = ?start.elapsed(), "finished defragmentation");
        let rev = self.node.state_machine().read().expect("state machine lock").kv.current_revision();
        Ok(Response::new(PbDefragmentResponse { header: self.node.header(rev) }))
    }

    async fn hash(&self, _: Request<PbHashRequest>) -> Result<Response<PbHashResponse>, Status> {
        Err(unimplemented("Maintenance.Hash"))
    }

    async fn hash_kv(&self, _: Request<PbHashKvRequest>) -> Result<Response<PbHashKvResponse>, Status> {
        Err(unimplemented("Maintenance.HashKV"))
    }

    type SnapshotStream = ReceiverStream<Result<PbSnapshotResponse, Status>>;

    /// Streams this member's state machine as of now ([`crate::snapshot`]), then its sha256. The
    /// view is taken under the state machine's lock (the records are shared, not copied) and
    /// encoded on a blocking thread as the client reads.
    async fn snapshot(&self, _: Request<PbSnapshotRequest>) -> Result<Response<Self::SnapshotStream>, Status> {
        super::refuse_learner(&self.node)?;
        let view = crate::snapshot::SnapshotView::of(&self.node.state_machine().read().expect("state machine lock"));
        let total = view.file_len();
        let header = self.node.header(view.revision());
        tracing::info!(target: "store::maintenance", revision = view.revision(), size = total, "sending database snapshot to client");
        let (tx, rx) = mpsc::channel(4);
        tokio::task::spawn_blocking(move || {
            let start = std::time::Instant::now();
            let mut out = Chunker { tx: tx.clone(), buf: Vec::with_capacity(SEND_BUFFER_SIZE), total, sent: 0, header };
            match view.write_file(&mut out).and_then(|_| out.flush()) {
                Ok(()) => tracing::info!(target: "store::maintenance", size = total, took = ?start.elapsed(), "sent database snapshot to client"),
                Err(e) => {
                    tracing::warn!(target: "store::maintenance", error = %e, "failed to send database snapshot");
                    let _ = tx.blocking_send(Err(Status::internal(Error::Io(e).to_string())));
                }
            }
        });
        Ok(Response::new(ReceiverStream::new(rx)))
    }

    async fn move_leader(&self, _: Request<PbMoveLeaderRequest>) -> Result<Response<PbMoveLeaderResponse>, Status> {
        Err(unimplemented("Maintenance.MoveLeader"))
    }

    async fn downgrade(&self, _: Request<PbDowngradeRequest>) -> Result<Response<PbDowngradeResponse>, Status> {
        Err(unimplemented("Maintenance.Downgrade"))
    }
}
