//! Mirrors etcd's `v3rpc/lease.go`: Grant, Revoke, KeepAlive, TimeToLive, Leases.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Instant, SystemTime};

use futures::StreamExt;
use proto::etcd::*;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status, Streaming};

use crate::apply::{self, Applied};
use crate::error::Error;
use crate::mvcc::lease::MAX_LEASE_TTL;
use crate::server::Node;

pub struct LeaseService {
    pub node: Node,
}

/// A new lease id, unique in practice: etcd derives one from the member id, time and a counter.
fn new_lease_id(member: u64) -> i64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
    let c = COUNTER.fetch_add(1, Ordering::Relaxed);
    let id = (member.rotate_left(48) ^ nanos.wrapping_mul(0x9e3779b97f4a7c15) ^ c) & (i64::MAX as u64);
    id.max(1) as i64
}

fn unexpected(a: Applied) -> Status {
    Status::internal(format!("unexpected apply result {a:?}"))
}

#[tonic::async_trait]
impl PbLeaseService for LeaseService {
    async fn lease_grant(&self, req: Request<PbLeaseGrantRequest>) -> Result<Response<PbLeaseGrantResponse>, Status> {
        super::refuse_learner(&self.node)?;
        let mut g = req.into_inner();
        if g.ttl > MAX_LEASE_TTL {
            return Err(Error::LeaseTtlTooLarge.into());
        }
        super::quota::check(&self.node, crate::quota::cost_lease_grant()).await?;
        if g.id == 0 {
            g.id = new_lease_id(self.node.id());
        }
        match self.node.propose(apply::Request::LeaseGrant(g)).await? {
            Applied::LeaseGrant(mut r) => {
                r.header = self.node.header(r.header.map_or(0, |h| h.revision));
                Ok(Response::new(r))
            }
            other => Err(unexpected(other)),
        }
    }

    async fn lease_revoke(&self, req: Request<PbLeaseRevokeRequest>) -> Result<Response<PbLeaseRevokeResponse>, Status> {
        super::refuse_learner(&self.node)?;
        match self.node.propose(apply::Request::LeaseRevoke(req.into_inner())).await? {
            Applied::LeaseRevoke(mut r) => {
                r.header = self.node.header(r.header.map_or(0, |h| h.revision));
                Ok(Response::new(r))
            }
            other => Err(unexpected(other)),
        }
    }

    type LeaseKeepAliveStream = ReceiverStream<Result<PbLeaseKeepAliveResponse, Status>>;

    async fn lease_keep_alive(
        &self,
        req: Request<Streaming<PbLeaseKeepAliveRequest>>,
    ) -> Result<Response<Self::LeaseKeepAliveStream>, Status> {
        super::refuse_learner(&self.node)?;
        let mut input = req.into_inner();
        let (tx, rx) = mpsc::channel(16);
        let node = self.node.clone();
        tokio::spawn(async move {
            while let Some(Ok(k)) = input.next().await {
                let id = k.id;
                let resp = match node.propose(apply::Request::LeaseRenew(k)).await {
                    Ok(Applied::LeaseRenew { id, ttl }) => Ok(PbLeaseKeepAliveResponse { header: None, id, ttl }),
                    // etcd answers an unknown lease with TTL 0, not an error.
                    Err(Error::LeaseNotFound) => Ok(PbLeaseKeepAliveResponse { header: None, id, ttl: 0 }),
                    Err(e) => Err(Status::from(e)),
                    Ok(other) => Err(unexpected(other)),
                };
                let resp = resp.map(|mut r| {
                    let rev = node.state_machine().read().expect("state machine lock").kv.current_revision();
                    r.header = node.header(rev);
                    r
                });
                let stop = resp.is_err();
                if tx.send(resp).await.is_err() || stop {
                    return;
                }
            }
        });
        Ok(Response::new(ReceiverStream::new(rx)))
    }

    async fn lease_time_to_live(
        &self,
        req: Request<PbLeaseTimeToLiveRequest>,
    ) -> Result<Response<PbLeaseTimeToLiveResponse>, Status> {
        super::refuse_learner(&self.node)?;
        let r = req.into_inner();
        self.node.linearizable_read().await?;
        let sm = self.node.state_machine().read().expect("state machine lock");
        let header = self.node.header(sm.kv.current_revision());
        // etcd answers an unknown lease with TTL -1, not an error.
        let resp = match sm.lessor.get(r.id) {
            Some(l) => PbLeaseTimeToLiveResponse {
                header,
                id: l.id,
                ttl: l.remaining(Instant::now()),
                granted_ttl: l.ttl,
                keys: if r.keys { l.keys.iter().cloned().collect() } else { Vec::new() },
            },
            None => PbLeaseTimeToLiveResponse { header, id: r.id, ttl: -1, granted_ttl: 0, keys: Vec::new() },
        };
        Ok(Response::new(resp))
    }

    async fn lease_leases(&self, _: Request<PbLeaseLeasesRequest>) -> Result<Response<PbLeaseLeasesResponse>, Status> {
        super::refuse_learner(&self.node)?;
        self.node.linearizable_read().await?;
        let sm = self.node.state_machine().read().expect("state machine lock");
        Ok(Response::new(PbLeaseLeasesResponse {
            header: self.node.header(sm.kv.current_revision()),
            leases: sm.lessor.ids().map(|id| PbLeaseStatus { id }).collect(),
        }))
    }
}
