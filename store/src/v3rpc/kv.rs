//! Mirrors etcd's `v3rpc/key.go`: Range, Put, DeleteRange, Txn, Compact.

use proto::etcd::*;
use tonic::{Request, Response, Status};

use super::{check_size, unimplemented};
use crate::apply::{self, Applied};
use crate::error::Error;
use crate::server::Node;

pub struct KvService {
    pub node: Node,
}

fn unexpected(a: Applied) -> Status {
    Status::internal(format!("unexpected apply result {a:?}"))
}

#[tonic::async_trait]
impl PbKvService for KvService {
    async fn range(&self, req: Request<PbRangeRequest>) -> Result<Response<PbRangeResponse>, Status> {
        let r = req.into_inner();
        if r.key.is_empty() {
            return Err(Error::EmptyKey.into());
        }
        // INJECTED BUG, for the robustness tests only (`failpoints` feature, set with
        // `bugStaleRead=return`): a linearizable read is served from this member's state as it
        // is, like a serializable one, without ReadIndex. A member cut off from the majority then
        // answers with what it had, missing writes the others acknowledged since.
        // A learner serves serializable reads only (etcd's `isRPCSupportedForLearner`).
        if !r.serializable {
            super::refuse_learner(&self.node)?;
        }
        if !r.serializable && !injected_bug!("bugStaleRead") {
            self.node.linearizable_read().await?;
        }
        let mut resp = self.node.state_machine().read().expect("state machine lock").range(&r)?;
        resp.header = self.node.header(resp.header.map_or(0, |h| h.revision));
        Ok(Response::new(resp))
    }

    type RangeStreamStream = futures::stream::Empty<Result<PbRangeStreamResponse, Status>>;

    async fn range_stream(&self, _: Request<PbRangeRequest>) -> Result<Response<Self::RangeStreamStream>, Status> {
        Err(unimplemented("KV.RangeStream"))
    }

    async fn put(&self, req: Request<PbPutRequest>) -> Result<Response<PbPutResponse>, Status> {
        super::refuse_learner(&self.node)?;
        let p = req.into_inner();
        if p.key.is_empty() {
            return Err(Error::EmptyKey.into());
        }
        check_size(&self.node, &p)?;
        super::quota::check(&self.node, crate::quota::cost_put(&p)).await?;
        match self.node.propose(apply::Request::Put(p)).await? {
            Applied::Put(mut r) => {
                r.header = self.node.header(r.header.map_or(0, |h| h.revision));
                Ok(Response::new(r))
            }
            other => Err(unexpected(other)),
        }
    }

    async fn delete_range(&self, req: Request<PbDeleteRequest>) -> Result<Response<PbDeleteResponse>, Status> {
        super::refuse_learner(&self.node)?;
        let d = req.into_inner();
        if d.key.is_empty() {
            return Err(Error::EmptyKey.into());
        }
        check_size(&self.node, &d)?;
        match self.node.propose(apply::Request::DeleteRange(d)).await? {
            Applied::DeleteRange(mut r) => {
                r.header = self.node.header(r.header.map_or(0, |h| h.revision));
                Ok(Response::new(r))
            }
            other => Err(unexpected(other)),
        }
    }

    async fn txn(&self, req: Request<PbTxnRequest>) -> Result<Response<PbTxnResponse>, Status> {
        super::refuse_learner(&self.node)?;
        let t = req.into_inner();
        apply::check_txn(&t)?;
        check_size(&self.node, &t)?;
        super::quota::check(&self.node, crate::quota::cost_txn(&t)).await?;
        let mut resp = if apply::txn_is_read_only(&t) {
            // Reads only: no raft round, but the same linearizability as a Range. Run under the
            // write lock so the txn code can be shared with writes; it changes nothing.
            // The same injected bug as Range's (tests only).
            if !txn_is_serializable(&t) && !injected_bug!("bugStaleRead") {
                self.node.linearizable_read().await?;
            }
            let mut scratch = crate::engine::WriteBatch::default();
            self.node.state_machine().write().expect("state machine lock").txn(&t, &mut scratch)?
        } else {
            match self.node.propose(apply::Request::Txn(t)).await? {
                Applied::Txn(r) => r,
                other => return Err(unexpected(other)),
            }
        };
        fill_headers(&self.node, &mut resp);
        Ok(Response::new(resp))
    }

    async fn compact(&self, req: Request<PbCompactionRequest>) -> Result<Response<PbCompactionResponse>, Status> {
        super::refuse_learner(&self.node)?;
        let c = req.into_inner();
        match self.node.propose(apply::Request::Compaction(c)).await? {
            Applied::Compaction(mut r) => {
                r.header = self.node.header(r.header.map_or(0, |h| h.revision));
                Ok(Response::new(r))
            }
            other => Err(unexpected(other)),
        }
    }
}

/// A read-only Txn is serializable when every Range in it asks to be (etcd's rule).
fn txn_is_serializable(t: &PbTxnRequest) -> bool {
    t.success.iter().chain(&t.failure).all(|op| match &op.request {
        Some(PbTxnOpRequest::RequestRange(r)) => r.serializable,
        Some(PbTxnOpRequest::RequestTxn(inner)) => txn_is_serializable(inner),
        _ => true,
    })
}

fn fill_headers(node: &Node, t: &mut PbTxnResponse) {
    let rev = t.header.as_ref().map_or(0, |h| h.revision);
    t.header = node.header(rev);
    for r in &mut t.responses {
        match &mut r.response {
            Some(PbTxnOpResponse::ResponseRange(x)) => x.header = node.header(rev),
            Some(PbTxnOpResponse::ResponsePut(x)) => x.header = node.header(rev),
            Some(PbTxnOpResponse::ResponseDeleteRange(x)) => x.header = node.header(rev),
            Some(PbTxnOpResponse::ResponseTxn(x)) => fill_headers(node, x),
            None => {}
        }
    }
}
