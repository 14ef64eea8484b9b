//! Mirrors etcd's `etcdserver/api/membership/cluster.go` and `member.go`: the member records the
//! cluster agrees on, and the rules a configuration change must pass.
//!
//! The records live in the replicated state machine ([`crate::apply`]) and change only when a
//! raft ConfChange entry is applied, whose context carries the record ([`ConfChangeContext`], as
//! etcd puts the Member JSON there), so every member and every snapshot agrees on them. A member
//! is *started* once it has published its name (etcd's `IsStarted`); until then it is listed
//! with an empty name and no client URLs.
//!
//! Two kinds of checks, as in etcd:
//! - [`validate_configuration_change`] runs when an entry is applied, on every member alike: an
//!   ID that was removed, an ID added twice, a peer URL used twice, a member that is not there.
//! - The `may_*` checks (etcd's `mayAddMember`, `mayRemoveMember`, `mayPromoteMember`) run once,
//!   on the member a client asked, before anything is proposed: they protect the quorum
//!   (`--strict-reconfig-check`, always on here), using the member's view of which peers it is
//!   connected to.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::error::{Error, Result};

/// How long a peer must have been connected to count as healthy (etcd's `HealthInterval`).
pub const HEALTH_INTERVAL: Duration = Duration::from_secs(5);

/// etcd's `maxLearners`: at most one learner at a time.
pub const MAX_LEARNERS: usize = 1;

/// A member record (etcd's `membership.Member`). Its wire form keeps the tags of the attributes
/// record older data directories and snapshots hold (id, name, client URLs), so they still decode.
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct Member {
    #[prost(uint64, tag = "1")]
    pub id: u64,
    /// Empty until the member has started and published it.
    #[prost(string, tag = "2")]
    pub name: String,
    #[prost(string, repeated, tag = "3")]
    pub client_urls: Vec<String>,
    #[prost(string, repeated, tag = "4")]
    pub peer_urls: Vec<String>,
    #[prost(bool, tag = "5")]
    pub is_learner: bool,
}

impl Member {
    /// Whether the member has published its name (etcd's `IsStarted`).
    pub fn is_started(&self) -> bool {
        !self.name.is_empty()
    }
}

/// What a ConfChange entry's context carries: the member record, and who proposed it (so that
/// member can answer its client).
#[derive(Clone, PartialEq, prost::Message)]
pub struct ConfChangeContext {
    #[prost(uint64, tag = "1")]
    pub origin: u64,
    #[prost(uint64, tag = "2")]
    pub seq: u64,
    #[prost(message, optional, tag = "3")]
    pub member: Option<Member>,
}

/// The kinds of configuration change (etcd's `raftpb.ConfChangeType` plus promotion, which raft
/// sees as adding a node that is a learner now).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChangeKind {
    Add,
    Remove,
    Update,
    Promote,
}

/// A new member's ID (etcd's `NewMember`): the first eight bytes of the SHA-1 of its sorted peer
/// URLs, the cluster token and the time, so that two adds of the same URLs get different IDs.
pub fn new_member_id(peer_urls: &[String], cluster_token: &str, unix_secs: u64) -> u64 {
    let mut urls = peer_urls.to_vec();
    urls.sort();
    let mut b = urls.concat().into_bytes();
    b.extend_from_slice(cluster_token.as_bytes());
    b.extend_from_slice(unix_secs.to_string().as_bytes());
    let d = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA1_FOR_LEGACY_USE_ONLY, &b);
    let mut id = [0u8; 8];
    id.copy_from_slice(&d.as_ref()[..8]);
    u64::from_be_bytes(id).max(1) // raft reserves 0
}

/// etcd's URL check of a member's peer URLs (`types.NewURLs`): a scheme of http or https and a
/// host:port, nothing else.
pub fn validate_peer_urls(urls: &[String]) -> Result<()> {
    if urls.is_empty() {
        return Err(Error::MemberBadUrls);
    }
    for u in urls {
        let rest = u.strip_prefix("http://").or_else(|| u.strip_prefix("https://")).ok_or(Error::MemberBadUrls)?;
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        let (host, port) = rest.rsplit_once(':').ok_or(Error::MemberBadUrls)?;
        if host.is_empty() || rest.contains('/') || port.parse::<u16>().is_err() {
            return Err(Error::MemberBadUrls);
        }
    }
    Ok(())
}

/// The apply-time check (etcd's `ValidateConfigurationChange`): deterministic, on every member
/// alike, against the records as they are when the entry is applied.
pub fn validate_configuration_change(
    members: &BTreeMap<u64, Member>,
    removed: &BTreeSet<u64>,
    kind: ChangeKind,
    m: &Member,
) -> Result<()> {
    if removed.contains(&m.id) {
        return Err(Error::IdRemoved);
    }
    let urls_taken = |skip: u64| members.values().any(|o| o.id != skip && o.peer_urls.iter().any(|u| m.peer_urls.contains(u)));
    match kind {
        ChangeKind::Add => {
            if members.contains_key(&m.id) {
                return Err(Error::IdExists);
            }
            if urls_taken(0) {
                return Err(Error::PeerUrlExists);
            }
            if m.is_learner && members.values().filter(|o| o.is_learner).count() >= MAX_LEARNERS {
                return Err(Error::TooManyLearners);
            }
        }
        ChangeKind::Remove => {
            if !members.contains_key(&m.id) {
                return Err(Error::MemberNotFound);
            }
        }
        ChangeKind::Update => {
            if !members.contains_key(&m.id) {
                return Err(Error::MemberNotFound);
            }
            if urls_taken(m.id) {
                return Err(Error::PeerUrlExists);
            }
        }
        ChangeKind::Promote => match members.get(&m.id) {
            None => return Err(Error::MemberNotFound),
            Some(o) if !o.is_learner => return Err(Error::MemberNotLearner),
            Some(_) => {}
        },
    }
    Ok(())
}

/// The asking member's view of the cluster for the quorum checks: the records, and which peers
/// it has been connected to for [`HEALTH_INTERVAL`] (itself always).
pub struct ClusterView<'a> {
    pub members: &'a BTreeMap<u64, Member>,
    pub removed: &'a BTreeSet<u64>,
    pub connected: &'a dyn Fn(u64) -> bool,
    /// Whether the peer is connected now (etcd's `ActiveSince` is not zero).
    pub active: &'a dyn Fn(u64) -> bool,
}

fn quorum(n: usize) -> usize {
    n / 2 + 1
}

impl ClusterView<'_> {
    fn voters(&self) -> impl Iterator<Item = &Member> {
        self.members.values().filter(|m| !m.is_learner)
    }

    /// etcd's `IsReadyToAddVotingMember`: counting the new member as not started, a quorum of
    /// the voters must still be started.
    fn ready_to_add_voter(&self) -> bool {
        let started = self.voters().filter(|m| m.is_started()).count();
        let after = self.voters().count() + 1;
        // A one-member cluster may grow to two (how a cluster restored from a snapshot grows).
        (started == 1 && after == 2) || started >= quorum(after)
    }

    /// etcd's `IsReadyToRemoveVotingMember`: without `id`, a quorum of the voters left must be
    /// started.
    fn ready_to_remove_voter(&self, id: u64) -> bool {
        let left: Vec<&Member> = self.voters().filter(|m| m.id != id).collect();
        left.iter().filter(|m| m.is_started()).count() >= quorum(left.len())
    }

    /// etcd's `IsReadyToPromoteMember`: with the learner counted as a started voter, a quorum of
    /// the voters must be started.
    fn ready_to_promote(&self) -> bool {
        let started = self.voters().filter(|m| m.is_started()).count() + 1;
        started >= quorum(self.voters().count() + 1)
    }

    /// etcd's `mayAddMember`: a voter only if the started members stay a quorum; either kind
    /// only if this member has been connected to every voter for [`HEALTH_INTERVAL`] (etcd
    /// 3.4 checks that for learners too).
    pub fn may_add_member(&self, m: &Member) -> Result<()> {
        if !m.is_learner && !self.ready_to_add_voter() {
            return Err(Error::NotEnoughStartedMembers);
        }
        if !self.voters().all(|v| (self.connected)(v.id)) {
            return Err(Error::Unhealthy);
        }
        Ok(())
    }

    /// etcd's `mayRemoveMember`: the started members left must be a quorum, and the connected
    /// ones too, unless the member removed is not connected now (a member down is safe to remove).
    pub fn may_remove_member(&self, id: u64, self_id: u64) -> Result<()> {
        if self.removed.contains(&id) || !self.members.contains_key(&id) {
            return Err(Error::MemberNotFound);
        }
        if !self.ready_to_remove_voter(id) {
            return Err(Error::NotEnoughStartedMembers);
        }
        if self.members[&id].is_learner || (id != self_id && !(self.active)(id)) {
            return Ok(());
        }
        let voters: Vec<&Member> = self.voters().collect();
        let active = voters.iter().filter(|m| (self.connected)(m.id)).count();
        if active.saturating_sub(1) < quorum(voters.len() - 1) {
            return Err(Error::Unhealthy);
        }
        Ok(())
    }

    /// etcd's `mayPromoteMember` without the leader's progress check (the raft thread makes it):
    /// a learner, and the started members stay a quorum.
    pub fn may_promote_member(&self, id: u64) -> Result<()> {
        match self.members.get(&id) {
            None => return Err(Error::MemberNotFound),
            Some(m) if !m.is_learner => return Err(Error::MemberNotLearner),
            Some(_) => {}
        }
        if !self.ready_to_promote() {
            return Err(Error::NotEnoughStartedMembers);
        }
        Ok(())
    }
}

/// etcd's `isLearnerReady`: the learner's match index is within 90% of the leader's.
pub fn learner_in_sync(learner_match: u64, leader_match: u64) -> bool {
    learner_match as f64 >= leader_match as f64 * 0.9
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(id: u64, name: &str, url: &str, is_learner: bool) -> Member {
        Member { id, name: name.into(), peer_urls: vec![url.into()], client_urls: vec![], is_learner }
    }

    fn three() -> BTreeMap<u64, Member> {
        [member(1, "a", "http://a:1", false), member(2, "b", "http://b:1", false), member(3, "c", "http://c:1", false)]
            .into_iter()
            .map(|m| (m.id, m))
            .collect()
    }

    #[test]
    fn member_ids_depend_on_sorted_urls_token_and_time() {
        let urls = vec!["http://b:1".to_string(), "http://a:1".to_string()];
        let sorted = vec!["http://a:1".to_string(), "http://b:1".to_string()];
        assert_eq!(new_member_id(&urls, "t", 10), new_member_id(&sorted, "t", 10));
        assert_ne!(new_member_id(&urls, "t", 10), new_member_id(&urls, "t", 11));
        assert_ne!(new_member_id(&urls, "t", 10), new_member_id(&urls, "u", 10));
    }

    #[test]
    fn peer_urls_must_be_http_host_port() {
        assert!(validate_peer_urls(&["http://127.0.0.1:2380".into()]).is_ok());
        assert!(validate_peer_urls(&["https://h:2380/".into()]).is_ok());
        for bad in ["127.0.0.1:2380", "http://h", "http://h:x", "unix://h:1", "http://h:1/path", "http://:1"] {
            assert!(matches!(validate_peer_urls(&[bad.into()]), Err(Error::MemberBadUrls)), "{bad}");
        }
        assert!(validate_peer_urls(&[]).is_err());
    }

    #[test]
    fn apply_time_validation_table() {
        let ms = three();
        let removed: BTreeSet<u64> = [9].into();
        let v = |kind, m: Member| validate_configuration_change(&ms, &removed, kind, &m).err().map(|e| e.to_string());
        assert_eq!(v(ChangeKind::Add, member(4, "", "http://d:1", false)), None);
        assert_eq!(v(ChangeKind::Add, member(9, "", "http://d:1", false)).as_deref(), Some("etcdserver: member not found"));
        assert_eq!(v(ChangeKind::Add, member(1, "", "http://d:1", false)).as_deref(), Some("etcdserver: member ID already exist"));
        assert_eq!(v(ChangeKind::Add, member(4, "", "http://b:1", false)).as_deref(), Some("etcdserver: Peer URLs already exists"));
        assert_eq!(v(ChangeKind::Remove, member(4, "", "", false)).as_deref(), Some("etcdserver: member not found"));
        assert_eq!(v(ChangeKind::Remove, member(2, "", "", false)), None);
        assert_eq!(v(ChangeKind::Update, member(2, "", "http://b:1", false)), None, "a member keeps its own URL");
        assert_eq!(v(ChangeKind::Update, member(2, "", "http://c:1", false)).as_deref(), Some("etcdserver: Peer URLs already exists"));
        assert_eq!(v(ChangeKind::Promote, member(2, "", "", false)).as_deref(), Some("etcdserver: can only promote a learner member"));
        let mut with_learner = ms.clone();
        with_learner.insert(5, member(5, "", "http://e:1", true));
        let l = validate_configuration_change(&with_learner, &removed, ChangeKind::Add, &member(6, "", "http://f:1", true));
        assert_eq!(l.unwrap_err().to_string(), "etcdserver: too many learner members in cluster");
        assert!(validate_configuration_change(&with_learner, &removed, ChangeKind::Promote, &member(5, "", "", false)).is_ok());
    }

    #[test]
    fn quorum_checks_table() {
        let ms = three();
        let removed = BTreeSet::new();
        let all = |_: u64| true;
        let not3 = |id: u64| id != 3;
        let view = |connected: &dyn Fn(u64) -> bool, ms: &BTreeMap<u64, Member>| {
            let r = ClusterView { members: ms, removed: &removed, connected, active: connected };
            (r.may_add_member(&member(4, "", "http://d:1", false)).err().map(|e| e.to_string()), r.may_remove_member(2, 1).err().map(|e| e.to_string()))
        };
        assert_eq!(view(&all, &ms), (None, None));
        // One voter down: neither a voter nor a learner can be added.
        let (add, remove) = view(&not3, &ms);
        assert_eq!(add.as_deref(), Some("etcdserver: unhealthy cluster"));
        assert_eq!(remove.as_deref(), Some("etcdserver: unhealthy cluster"), "removing 2 leaves only 1 of 2 connected");
        let r = ClusterView { members: &ms, removed: &removed, connected: &not3, active: &not3 };
        assert_eq!(r.may_add_member(&member(4, "", "http://d:1", true)).unwrap_err().to_string(), "etcdserver: unhealthy cluster");
        assert!(r.may_remove_member(3, 1).is_ok(), "the member that is down may go");
        // Unstarted voters: removing a started one would leave too few started.
        let mut unstarted = ms.clone();
        unstarted.get_mut(&3).unwrap().name.clear();
        let r = ClusterView { members: &unstarted, removed: &removed, connected: &all, active: &all };
        assert_eq!(r.may_remove_member(2, 1).unwrap_err().to_string(), "etcdserver: re-configuration failed due to not enough started members");
        assert_eq!(r.may_add_member(&member(4, "", "http://d:1", false)).unwrap_err().to_string(), "etcdserver: re-configuration failed due to not enough started members");
        assert_eq!(r.may_remove_member(7, 1).unwrap_err().to_string(), "etcdserver: member not found");
        assert_eq!(r.may_promote_member(2).unwrap_err().to_string(), "etcdserver: can only promote a learner member");
    }

    #[test]
    fn a_learner_is_in_sync_within_ninety_percent_of_the_leader() {
        assert!(learner_in_sync(90, 100));
        assert!(!learner_in_sync(89, 100));
        assert!(learner_in_sync(0, 0));
    }
}
