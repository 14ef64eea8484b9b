//! Mirrors etcd's `v3rpc/maintenance.go`: Status (what `etcdctl endpoint status` shows).

use proto::etcd::*;
use tonic::{Request, Response, Status};

use super::unimplemented;
use crate::server::Node;

/// The etcd API version kubelab's store speaks.
pub const ETCD_VERSION: &str = "3.5.0";

pub struct MaintenanceService {
    pub node: Node,
}

#[tonic::async_trait]
impl PbMaintenanceService for MaintenanceService {
    async fn alarm(&self, _: Request<PbAlarmRequest>) -> Result<Response<PbAlarmResponse>, Status> {
        // No alarms are ever raised; answering (rather than UNIMPLEMENTED) keeps `etcdctl alarm list`
        // and health checks that look at alarms working.
        let rev = self.node.state_machine().read().expect("state machine lock").kv.current_revision();
        Ok(Response::new(PbAlarmResponse { header: self.node.header(rev), alarms: Vec::new() }))
    }

    async fn status(&self, _: Request<PbStatusRequest>) -> Result<Response<PbStatusResponse>, Status> {
        let st = self.node.status();
        let rev = self.node.state_machine().read().expect("state machine lock").kv.current_revision();
        let size = self.node.db_size() as i64;
        let mut errors = Vec::new();
        if st.leader == 0 {
            errors.push("etcdserver: no leader".to_string());
        }
        Ok(Response::new(PbStatusResponse {
            header: self.node.header(rev),
            version: ETCD_VERSION.into(),
            db_size: size,
            leader: st.leader,
            raft_index: st.last_index,
            raft_term: st.term,
            raft_applied_index: st.applied_index,
            errors,
            db_size_in_use: size,
            is_learner: false,
            ..Default::default()
        }))
    }

    async fn defragment(&self, _: Request<PbDefragmentRequest>) -> Result<Response<PbDefragmentResponse>, Status> {
        Err(unimplemented("Maintenance.Defragment"))
    }

    async fn hash(&self, _: Request<PbHashRequest>) -> Result<Response<PbHashResponse>, Status> {
        Err(unimplemented("Maintenance.Hash"))
    }

    async fn hash_kv(&self, _: Request<PbHashKvRequest>) -> Result<Response<PbHashKvResponse>, Status> {
        Err(unimplemented("Maintenance.HashKV"))
    }

    type SnapshotStream = futures::stream::Empty<Result<PbSnapshotResponse, Status>>;

    async fn snapshot(&self, _: Request<PbSnapshotRequest>) -> Result<Response<Self::SnapshotStream>, Status> {
        Err(unimplemented("Maintenance.Snapshot"))
    }

    async fn move_leader(&self, _: Request<PbMoveLeaderRequest>) -> Result<Response<PbMoveLeaderResponse>, Status> {
        Err(unimplemented("Maintenance.MoveLeader"))
    }

    async fn downgrade(&self, _: Request<PbDowngradeRequest>) -> Result<Response<PbDowngradeResponse>, Status> {
        Err(unimplemented("Maintenance.Downgrade"))
    }
}
