//! Mirrors etcd's `etcdserver/api/v3rpc`: the etcd v3 gRPC services on the client URLs.
//!
//! Each service checks the request the way etcd does before anything is proposed, converts the
//! store's errors to etcd's gRPC statuses, and fills the response header. Methods of the etcd API
//! that kubelab does not implement answer UNIMPLEMENTED and name themselves.

pub mod cluster;
pub mod kv;
pub mod lease;
pub mod maintenance;
pub(crate) mod quota;
pub mod trace;
pub mod watch;

use tonic::Status;

use crate::error::Error;
use crate::server::Node;

/// etcd's default `--max-request-bytes`.
pub const DEFAULT_MAX_REQUEST_BYTES: usize = 1536 * 1024;
/// Slack etcd gives gRPC over the request limit, so that the limit is reported as etcd's error.
pub const GRPC_OVERHEAD_BYTES: usize = 512 * 1024;

pub(crate) fn unimplemented(method: &str) -> Status {
    Status::unimplemented(format!("kubelab store does not implement {method}"))
}

/// etcd's learner guard (`isRPCSupportedForLearner`): a learner serves serializable reads and
/// Status only, and refuses everything else with `rpc not supported for learner`.
pub(crate) fn refuse_learner(node: &Node) -> Result<(), Status> {
    if node.is_learner() {
        return Err(Error::NotSupportedForLearner.into());
    }
    Ok(())
}

/// etcd's request size check.
pub(crate) fn check_size(node: &Node, req: &impl prost::Message) -> Result<(), Status> {
    if req.encoded_len() > node.config().max_request_bytes {
        return Err(Error::RequestTooLarge.into());
    }
    Ok(())
}


/// All the client-facing services, ready to add to a tonic server.
pub fn services(
    node: Node,
) -> (
    proto::etcd::PbKvServer<kv::KvService>,
    proto::etcd::PbWatchServer<watch::WatchService>,
    proto::etcd::PbLeaseServer<lease::LeaseService>,
    proto::etcd::PbMaintenanceServer<maintenance::MaintenanceService>,
    proto::etcd::PbClusterServer<cluster::ClusterService>,
) {
    let limit = node.config().max_request_bytes + GRPC_OVERHEAD_BYTES;
    (
        proto::etcd::PbKvServer::new(kv::KvService { node: node.clone() }).max_decoding_message_size(limit).max_encoding_message_size(usize::MAX),
        proto::etcd::PbWatchServer::new(watch::WatchService { node: node.clone() }).max_decoding_message_size(limit).max_encoding_message_size(usize::MAX),
        proto::etcd::PbLeaseServer::new(lease::LeaseService { node: node.clone() }).max_decoding_message_size(limit),
        proto::etcd::PbMaintenanceServer::new(maintenance::MaintenanceService { node: node.clone() }),
        proto::etcd::PbClusterServer::new(cluster::ClusterService { node, peer_port: false }),
    )
}
