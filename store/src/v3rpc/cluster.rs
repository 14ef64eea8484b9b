//! Mirrors etcd's `v3rpc/member.go` and the membership half of `etcdserver/server.go`
//! (`AddMember`, `RemoveMember`, `UpdateMember`, `PromoteMember`): the Cluster service.
//!
//! Each change is checked twice, as etcd checks it: here, once, against the quorum
//! ([`crate::membership::ClusterView`]'s `may_*`, with this member's view of its peers), then by
//! every member when the ConfChange entry is applied. The answer comes once this member has
//! applied it. A promotion is decided on the leader, which alone knows how far the learner's log
//! is: a follower hands it to the leader's peer port ([`crate::cluster_util::member_promote`]).
//! The peer port serves this service too, for MemberList and that hand-over only.

use proto::etcd::*;
use tonic::{Request, Response, Status};

use super::{refuse_learner, unimplemented};
use crate::error::Error;
use crate::membership::{ChangeKind, Member, learner_in_sync, new_member_id, validate_peer_urls};
use crate::server::Node;

pub struct ClusterService {
    pub node: Node,
    /// Served on the peer port: MemberList and a follower's MemberPromote only.
    pub peer_port: bool,
}

fn to_pb(m: &Member) -> PbMember {
    PbMember {
        id: m.id,
        name: m.name.clone(),
        peer_ur_ls: m.peer_urls.clone(),
        client_ur_ls: m.client_urls.clone(),
        is_learner: m.is_learner,
    }
}

impl ClusterService {
    fn client_only(&self, method: &str) -> Result<(), Status> {
        if self.peer_port {
            return Err(unimplemented(method));
        }
        refuse_learner(&self.node)
    }

    /// The header and the member list as this member has applied them.
    fn members(&self) -> (Option<PbResponseHeader>, Vec<PbMember>) {
        let sm = self.node.state_machine().read().expect("state machine lock");
        (self.node.header(sm.kv.current_revision()), sm.members.values().map(to_pb).collect())
    }

    /// etcd's `PromoteMember` on the leader: the learner must be in sync, and the quorum safe.
    async fn promote_here(&self, id: u64) -> Result<Option<Response<PbMemberPromoteResponse>>, Status> {
        let Some((learner, leader)) = self.node.match_indexes(id).await? else {
            // A follower, or the member is gone from raft's progress.
            if self.node.status().is_leader {
                self.node.with_cluster_view(|v| v.may_promote_member(id))?;
                return Err(Error::MemberNotFound.into());
            }
            return Ok(None);
        };
        self.node.with_cluster_view(|v| v.may_promote_member(id))?;
        if !learner_in_sync(learner, leader) {
            return Err(Error::LearnerNotReady.into());
        }
        let member = self.node.with_cluster_view(|v| v.members.get(&id).cloned()).ok_or(Error::MemberNotFound)?;
        self.node.propose_member_change(ChangeKind::Promote, member).await?;
        let (header, members) = self.members();
        Ok(Some(Response::new(PbMemberPromoteResponse { header, members })))
    }
}

#[tonic::async_trait]
impl PbClusterService for ClusterService {
    async fn member_add(&self, req: Request<PbMemberAddRequest>) -> Result<Response<PbMemberAddResponse>, Status> {
        self.client_only("Cluster.MemberAdd")?;
        let r = req.into_inner();
        validate_peer_urls(&r.peer_ur_ls)?;
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
        let member = Member {
            id: new_member_id(&r.peer_ur_ls, &self.node.config().cluster_token, now),
            peer_urls: r.peer_ur_ls,
            is_learner: r.is_learner,
            ..Default::default()
        };
        // What the apply would refuse is refused before proposing, with the same error.
        self.node.with_cluster_view(|v| {
            crate::membership::validate_configuration_change(v.members, v.removed, ChangeKind::Add, &member)?;
            v.may_add_member(&member)
        })?;
        self.node.propose_member_change(ChangeKind::Add, member.clone()).await?;
        let (header, members) = self.members();
        Ok(Response::new(PbMemberAddResponse { header, member: Some(to_pb(&member)), members }))
    }

    async fn member_remove(&self, req: Request<PbMemberRemoveRequest>) -> Result<Response<PbMemberRemoveResponse>, Status> {
        self.client_only("Cluster.MemberRemove")?;
        let id = req.into_inner().id;
        let me = self.node.id();
        self.node.with_cluster_view(|v| v.may_remove_member(id, me))?;
        self.node.propose_member_change(ChangeKind::Remove, Member { id, ..Default::default() }).await?;
        let (header, members) = self.members();
        Ok(Response::new(PbMemberRemoveResponse { header, members }))
    }

    async fn member_update(&self, req: Request<PbMemberUpdateRequest>) -> Result<Response<PbMemberUpdateResponse>, Status> {
        self.client_only("Cluster.MemberUpdate")?;
        let r = req.into_inner();
        validate_peer_urls(&r.peer_ur_ls)?;
        let member = Member { id: r.id, peer_urls: r.peer_ur_ls, ..Default::default() };
        self.node.with_cluster_view(|v| {
            crate::membership::validate_configuration_change(v.members, v.removed, ChangeKind::Update, &member)
        })?;
        self.node.propose_member_change(ChangeKind::Update, member).await?;
        let (header, members) = self.members();
        Ok(Response::new(PbMemberUpdateResponse { header, members }))
    }

    async fn member_list(&self, req: Request<PbMemberListRequest>) -> Result<Response<PbMemberListResponse>, Status> {
        // etcd 3.4 lists the members this member has applied; a learner refuses it on the
        // client port like any request but a serializable read and Status.
        let _ = req;
        if !self.peer_port {
            refuse_learner(&self.node)?;
        }
        let (header, members) = self.members();
        Ok(Response::new(PbMemberListResponse { header, members }))
    }

    async fn member_promote(&self, req: Request<PbMemberPromoteRequest>) -> Result<Response<PbMemberPromoteResponse>, Status> {
        let id = req.into_inner().id;
        if !self.peer_port {
            refuse_learner(&self.node)?;
        }
        if let Some(r) = self.promote_here(id).await? {
            return Ok(r);
        }
        if self.peer_port {
            // Only the leader takes a promotion handed over; the sender retries elsewhere.
            return Err(Error::NoLeader.into());
        }
        // A follower: the leader decides (etcd's `promoteMemberHTTP`).
        let leader = self.node.status().leader;
        let url = self
            .node
            .with_cluster_view(|v| v.members.get(&leader).and_then(|m| m.peer_urls.first().cloned()))
            .ok_or(Error::NoLeader)?;
        crate::cluster_util::member_promote(&url, self.node.peer_tls(), id).await?;
        // Answer with this member's view once it has applied what the leader committed.
        self.node.linearizable_read().await?;
        let (header, members) = self.members();
        Ok(Response::new(PbMemberPromoteResponse { header, members }))
    }
}
