//! Mirrors etcd's `v3rpc/quota.go`: the quota check in front of the requests that grow the
//! database (Put, Txn, LeaseGrant).
//!
//! A request that does not fit in `--quota-backend-bytes` ([`crate::quota`]) is refused with
//! etcd's `database space exceeded` (gRPC RESOURCE_EXHAUSTED), and this member raises the NOSPACE
//! alarm through raft, after which every member refuses such requests until `etcdctl alarm
//! disarm` ([`crate::apply`]'s capped apply).

use proto::etcd::PbAlarmRequest;
use tonic::Status;

use crate::alarms::{alarm_action, alarm_type};
use crate::apply::Request;
use crate::error::Error;
use crate::server::Node;

/// etcd's `quotaAlarmer.check`: passes a request of `cost` that fits; otherwise raises NOSPACE
/// for this member and refuses it.
pub(crate) async fn check(node: &Node, cost: u64) -> Result<(), Status> {
    if node.quota_available(cost) {
        return Ok(());
    }
    let req = PbAlarmRequest { action: alarm_action::ACTIVATE, member_id: node.id(), alarm: alarm_type::NOSPACE };
    // As etcd, the request is refused whether or not the alarm could be raised.
    if let Err(e) = node.propose(Request::Alarm(req)).await {
        tracing::warn!(target: "store::quota", error = %e, "could not raise the NOSPACE alarm");
    }
    Err(Error::NoSpace.into())
}
