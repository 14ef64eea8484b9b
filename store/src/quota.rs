//! Mirrors etcd's `etcdserver/quota.go`: the backend quota (`--quota-backend-bytes`) and what a
//! request costs against it.
//!
//! A request that would grow the database (a Put, a Txn that puts, a LeaseGrant) is refused once
//! the database's size on disk plus the request's estimated cost reaches the quota; the member
//! that refuses it raises the NOSPACE alarm through raft ([`crate::v3rpc::quota`]), after which
//! every member refuses such requests until the alarm is disarmed ([`crate::apply`]). Reads,
//! deletes, compaction and defragmentation, which do not grow it, are always allowed: they are how
//! an operator gets the space back.

use proto::etcd::{PbPutRequest, PbTxnOpRequest, PbTxnRequest, PbTxnRequestOp};

/// etcd's default quota (`DefaultQuotaBytes`): 2 GiB.
pub const DEFAULT_QUOTA_BYTES: i64 = 2 * 1024 * 1024 * 1024;
/// The largest quota etcd recommends (`MaxQuotaBytes`): 8 GiB; more only draws a warning.
pub const MAX_QUOTA_BYTES: i64 = 8 * 1024 * 1024 * 1024;
/// Estimated cost of storing a lease.
pub const LEASE_OVERHEAD: u64 = 64;
/// Estimated cost of a key's metadata.
pub const KV_OVERHEAD: u64 = 256;

/// The quota a member enforces, from `--quota-backend-bytes`: 0 means etcd's default, a negative
/// value no quota at all.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BackendQuota {
    /// None: no quota.
    pub max_backend_bytes: Option<u64>,
}

impl BackendQuota {
    pub fn new(quota_backend_bytes: i64) -> Self {
        let max = match quota_backend_bytes {
            q if q < 0 => {
                tracing::info!(target: "store::quota", "disabled backend quota");
                None
            }
            0 => Some(DEFAULT_QUOTA_BYTES as u64),
            q => {
                if q > MAX_QUOTA_BYTES {
                    tracing::warn!(target: "store::quota", quota_size_bytes = q, maximum_bytes = MAX_QUOTA_BYTES, "quota exceeds the maximum value");
                }
                Some(q as u64)
            }
        };
        Self { max_backend_bytes: max }
    }

    /// Whether a request of `cost` fits beside a database of `size` bytes. A request that grows
    /// nothing (cost 0) always passes.
    pub fn available(&self, size: u64, cost: u64) -> bool {
        match self.max_backend_bytes {
            None => true,
            Some(_) if cost == 0 => true,
            Some(max) => size + cost < max,
        }
    }
}

pub fn cost_put(p: &PbPutRequest) -> u64 {
    KV_OVERHEAD + p.key.len() as u64 + p.value.len() as u64
}

fn cost_txn_op(op: &PbTxnRequestOp) -> u64 {
    match &op.request {
        Some(PbTxnOpRequest::RequestPut(p)) => cost_put(p),
        Some(PbTxnOpRequest::RequestTxn(t)) => cost_txn(t),
        _ => 0,
    }
}

/// The cost of the costlier branch: only one of them runs.
pub fn cost_txn(t: &PbTxnRequest) -> u64 {
    let success: u64 = t.success.iter().map(cost_txn_op).sum();
    let failure: u64 = t.failure.iter().map(cost_txn_op).sum();
    success.max(failure)
}

pub fn cost_lease_grant() -> u64 {
    LEASE_OVERHEAD
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op_put(k: &str, v: &str) -> PbTxnRequestOp {
        PbTxnRequestOp { request: Some(PbTxnOpRequest::RequestPut(PbPutRequest { key: k.into(), value: v.into(), ..Default::default() })) }
    }

    #[test]
    fn costs_and_availability_follow_etcd() {
        assert_eq!(cost_put(&PbPutRequest { key: b"k".to_vec(), value: b"vv".to_vec(), ..Default::default() }), 259);
        let read = PbTxnOpRequest::RequestRange(Default::default());
        let t = PbTxnRequest {
            compare: vec![],
            success: vec![op_put("a", ""), op_put("b", "")],
            failure: vec![PbTxnRequestOp { request: Some(read) }, op_put("c", "123456")],
        };
        assert_eq!(cost_txn(&t), 514, "the costlier branch");
        assert_eq!(cost_txn(&PbTxnRequest { compare: vec![], success: vec![], failure: vec![] }), 0);

        let q = BackendQuota::new(1000);
        assert!(q.available(700, 299));
        assert!(!q.available(700, 300));
        assert!(q.available(5000, 0), "a request that grows nothing always passes");
        assert_eq!(BackendQuota::new(0).max_backend_bytes, Some(2 << 30), "0 is etcd's default, 2 GiB");
        assert!(BackendQuota::new(-1).available(u64::MAX / 2, 10), "negative: no quota");
    }
}
