//! Mirrors etcd's `v3rpc/member.go`: MemberList. Membership is fixed by `--initial-cluster`.

use proto::etcd::*;
use tonic::{Request, Response, Status};

use super::unimplemented;
use crate::server::Node;

pub struct ClusterService {
    pub node: Node,
}

#[tonic::async_trait]
impl PbClusterService for ClusterService {
    async fn member_add(&self, _: Request<PbMemberAddRequest>) -> Result<Response<PbMemberAddResponse>, Status> {
        Err(unimplemented("Cluster.MemberAdd"))
    }

    async fn member_remove(&self, _: Request<PbMemberRemoveRequest>) -> Result<Response<PbMemberRemoveResponse>, Status> {
        Err(unimplemented("Cluster.MemberRemove"))
    }

    async fn member_update(&self, _: Request<PbMemberUpdateRequest>) -> Result<Response<PbMemberUpdateResponse>, Status> {
        Err(unimplemented("Cluster.MemberUpdate"))
    }

    async fn member_list(&self, _: Request<PbMemberListRequest>) -> Result<Response<PbMemberListResponse>, Status> {
        let sm = self.node.state_machine().read().expect("state machine lock");
        let members = self
            .node
            .config()
            .initial_cluster
            .iter()
            .map(|p| {
                // Name and client URLs are what the member published through the log; until it
                // has, etcd lists it with an empty name ("unstarted").
                let attrs = sm.members.get(&p.id);
                PbMember {
                    id: p.id,
                    name: attrs.map(|a| a.name.clone()).unwrap_or_default(),
                    peer_ur_ls: p.peer_urls.clone(),
                    client_ur_ls: attrs.map(|a| a.client_urls.clone()).unwrap_or_default(),
                    is_learner: false,
                }
            })
            .collect();
        Ok(Response::new(PbMemberListResponse { header: self.node.header(sm.kv.current_revision()), members }))
    }

    async fn member_promote(&self, _: Request<PbMemberPromoteRequest>) -> Result<Response<PbMemberPromoteResponse>, Status> {
        Err(unimplemented("Cluster.MemberPromote"))
    }
}
