//! Mirrors etcd's `etcdserver/apply.go`: the state machine that committed raft entries are
//! applied to, and the etcd request semantics (Range, Put, DeleteRange, Txn, Compact, leases).
//!
//! Applying is deterministic: every member applies the same entries in the same order and ends in
//! the same state. What is not deterministic (an I/O error of the engine) is not handled here at
//! all: the Ready loop panics on it rather than letting replicas diverge.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Instant;

use prost::Message as _;
use proto::etcd::*;
use tokio::sync::broadcast;

use crate::alarms::{AlarmStore, alarm_action, alarm_type};
use crate::engine::{Engine, WriteBatch, keys};
use crate::error::{Error, Result};
use crate::membership::{ChangeKind, Member, validate_configuration_change};
use crate::mvcc::{KvStore, Lessor, Record, Revision, WriteTxn, in_range};

/// What one raft entry carries: a request, and who proposed it (so that member can answer it).
#[derive(Clone, PartialEq, prost::Message)]
pub struct InternalRaftRequest {
    /// The proposing member's id; 0 for requests nobody waits on (lease expiry).
    #[prost(uint64, tag = "1")]
    pub origin: u64,
    /// The proposer's sequence number, its key for the waiting client.
    #[prost(uint64, tag = "2")]
    pub seq: u64,
    #[prost(oneof = "Request", tags = "3, 4, 5, 6, 7, 8, 9, 10, 11, 12")]
    pub request: Option<Request>,
}

#[derive(Clone, PartialEq, prost::Oneof)]
pub enum Request {
    #[prost(message, tag = "3")]
    Put(PbPutRequest),
    #[prost(message, tag = "4")]
    DeleteRange(PbDeleteRequest),
    #[prost(message, tag = "5")]
    Txn(PbTxnRequest),
    #[prost(message, tag = "6")]
    Compaction(PbCompactionRequest),
    #[prost(message, tag = "7")]
    LeaseGrant(PbLeaseGrantRequest),
    #[prost(message, tag = "8")]
    LeaseRevoke(PbLeaseRevokeRequest),
    /// A keep-alive goes through the log so every member agrees on the lease's new deadline.
    #[prost(message, tag = "9")]
    LeaseRenew(PbLeaseKeepAliveRequest),
    #[prost(message, tag = "10")]
    MemberAttributes(MemberAttributes),
    /// Raises, clears or lists alarms (etcd's `InternalRaftRequest.Alarm`): through the log, so
    /// every member agrees on what is raised.
    #[prost(message, tag = "11")]
    Alarm(PbAlarmRequest),
    /// New peer URLs for a member (etcd's `ConfChangeUpdateNode`, which changes nothing in raft,
    /// so it travels as a plain entry here: raft-rs has no update change).
    #[prost(message, tag = "12")]
    MemberUpdate(Member),
}

/// What a member publishes about itself once it has joined (etcd's `publish`).
#[derive(Clone, PartialEq, prost::Message)]
pub struct MemberAttributes {
    #[prost(uint64, tag = "1")]
    pub id: u64,
    #[prost(string, tag = "2")]
    pub name: String,
    #[prost(string, repeated, tag = "3")]
    pub client_urls: Vec<String>,
}

/// The state machine's snapshot, sent to a follower behind the compacted log.
#[derive(Clone, PartialEq, prost::Message)]
pub struct SnapshotData {
    #[prost(message, repeated, tag = "1")]
    pub records: Vec<SnapshotRecord>,
    #[prost(message, repeated, tag = "2")]
    pub leases: Vec<PbLeaseStatus>,
    #[prost(int64, repeated, tag = "3")]
    pub lease_ttls: Vec<i64>,
    #[prost(int64, tag = "4")]
    pub revision: i64,
    #[prost(int64, tag = "5")]
    pub compacted: i64,
    #[prost(message, repeated, tag = "6")]
    pub members: Vec<Member>,
    #[prost(message, repeated, tag = "7")]
    pub alarms: Vec<PbAlarmMember>,
    /// IDs of removed members, which never come back.
    #[prost(uint64, repeated, tag = "8")]
    pub removed: Vec<u64>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct SnapshotRecord {
    #[prost(int64, tag = "1")]
    pub main: i64,
    #[prost(int64, tag = "2")]
    pub sub: i64,
    #[prost(bool, tag = "3")]
    pub tombstone: bool,
    #[prost(message, optional, tag = "4")]
    pub kv: Option<PbKeyValue>,
}

/// The result of applying one request; headers are filled in at the gRPC edge.
#[derive(Debug, Clone)]
pub enum Applied {
    Put(PbPutResponse),
    DeleteRange(PbDeleteResponse),
    Txn(PbTxnResponse),
    Compaction(PbCompactionResponse),
    LeaseGrant(PbLeaseGrantResponse),
    LeaseRevoke(PbLeaseRevokeResponse),
    LeaseRenew { id: i64, ttl: i64 },
    MemberAttributes,
    Alarm(PbAlarmResponse),
    /// A configuration change (or a member's new peer URLs) was applied.
    Membership,
}

/// The changes of one revision, as watchers receive them.
#[derive(Debug)]
pub struct WatchBatch {
    pub revision: i64,
    pub events: Vec<PbEvent>,
    /// Not one revision but a snapshot from the leader: the key space was replaced up to
    /// `revision`, and the revisions it brought were never broadcast. Every watcher catches
    /// up from history, as etcd's `watchableStore.Restore` moves every synced watcher to the
    /// unsynced group.
    pub restored: bool,
}

/// etcd's default limit on operations in one Txn branch (`--max-txn-ops`).
pub const MAX_TXN_OPS: usize = 128;

pub struct StateMachine {
    pub kv: KvStore,
    pub lessor: Lessor,
    /// The cluster's members (etcd's `RaftCluster`), changed only by applied conf changes, and
    /// the IDs removed from it ([`crate::membership`]).
    pub members: BTreeMap<u64, Member>,
    pub removed: BTreeSet<u64>,
    /// Bumped whenever `members` changes, so the raft thread knows to update the transport.
    pub membership_version: u64,
    /// Raised alarms; a NOSPACE alarm caps writes that grow the database.
    pub alarms: AlarmStore,
    pub applied_index: u64,
    /// The first key the last revision wrote (for the per-revision trace, [`crate::traceutil`]).
    pub last_key: Vec<u8>,
    engine: Arc<dyn Engine>,
    watch_tx: broadcast::Sender<Arc<WatchBatch>>,
}

fn header(revision: i64) -> Option<PbResponseHeader> {
    Some(PbResponseHeader { revision, ..Default::default() })
}

impl StateMachine {
    /// Loads the state machine from the engine. `watch_capacity` bounds how many revisions a slow
    /// watcher may fall behind before it catches up from history instead.
    pub fn load(engine: Arc<dyn Engine>, min_lease_ttl: i64, watch_capacity: usize) -> Result<Self> {
        let kv = KvStore::load(engine.as_ref())?;
        let attached = Self::attached_keys(&kv);
        let lessor = Lessor::load(min_lease_ttl, engine.as_ref(), attached.into_iter(), Instant::now())?;
        let mut members = BTreeMap::new();
        for item in engine.scan_prefix(keys::MEMBER_ATTRS) {
            let (_, v) = item?;
            let m = Member::decode(v.as_slice())
                .map_err(|e| Error::Corrupt { what: "member attributes", detail: e.to_string() })?;
            members.insert(m.id, m);
        }
        let mut removed = BTreeSet::new();
        for item in engine.scan_prefix(keys::MEMBER_REMOVED) {
            let (k, _) = item?;
            let id = k[keys::MEMBER_REMOVED.len()..]
                .try_into()
                .map_err(|_| Error::Corrupt { what: "removed member", detail: "key not 8 bytes".into() })?;
            removed.insert(u64::from_be_bytes(id));
        }
        let applied_index = match engine.get(keys::APPLIED)? {
            Some(b) => u64::from_be_bytes(
                b.as_slice().try_into().map_err(|_| Error::Corrupt { what: "applied index", detail: "not 8 bytes".into() })?,
            ),
            None => 0,
        };
        let alarms = AlarmStore::load(engine.as_ref())?;
        let (watch_tx, _) = broadcast::channel(watch_capacity.max(1));
        Ok(Self { kv, lessor, members, removed, membership_version: 1, alarms, applied_index, last_key: Vec::new(), engine, watch_tx })
    }

    fn attached_keys(kv: &KvStore) -> Vec<(i64, Vec<u8>)> {
        let mut out = Vec::new();
        kv.range_at(&[0], &[0], kv.current_revision(), |kv| {
            if kv.lease != 0 {
                out.push((kv.lease, kv.key.clone()));
            }
            true
        });
        out
    }

    pub fn subscribe(&self) -> broadcast::Receiver<Arc<WatchBatch>> {
        self.watch_tx.subscribe()
    }

    /// Applies one committed entry's data; returns who waits for it and the result.
    pub fn apply_entry(&mut self, index: u64, data: &[u8], now: Instant, batch: &mut WriteBatch) -> Option<(u64, u64, Result<Applied>)> {
        self.applied_index = index;
        batch.put(keys::APPLIED.to_vec(), index.to_be_bytes().to_vec());
        if data.is_empty() {
            return None; // a new leader's empty entry
        }
        let req = match InternalRaftRequest::decode(data) {
            Ok(r) => r,
            Err(e) => {
                // Every member sees the same bytes and skips them the same way.
                tracing::error!(target: "store::apply", index, error = %e, "undecodable entry skipped");
                return None;
            }
        };
        let result = match req.request {
            Some(r) => self.apply_request(r, now, batch),
            None => return None,
        };
        Some((req.origin, req.seq, result))
    }

    fn apply_request(&mut self, req: Request, now: Instant, batch: &mut WriteBatch) -> Result<Applied> {
        // etcd's capped applier: while a NOSPACE alarm is raised, what would grow the database
        // is refused on every member alike (the alarm is state-machine state).
        if self.alarms.no_space() {
            let grows = match &req {
                Request::Put(_) | Request::LeaseGrant(_) => true,
                Request::Txn(t) => crate::quota::cost_txn(t) > 0,
                _ => false,
            };
            if grows {
                return Err(Error::NoSpace);
            }
        }
        match req {
            Request::Put(p) => {
                let mut txn = self.kv.begin(batch);
                let r = self.put(&mut txn, &p);
                let events = self.kv.commit(txn);
                let rev = self.publish(events);
                r.map(|mut r| {
                    r.header = header(rev);
                    Applied::Put(r)
                })
            }
            Request::DeleteRange(d) => {
                let mut txn = self.kv.begin(batch);
                let r = self.delete_range(&mut txn, &d);
                let events = self.kv.commit(txn);
                let rev = self.publish(events);
                let mut r = r;
                r.header = header(rev);
                Ok(Applied::DeleteRange(r))
            }
            Request::Txn(t) => {
                let r = self.txn(&t, batch);
                r.map(Applied::Txn)
            }
            Request::Compaction(c) => {
                // etcd's failpoints around committing a scheduled compaction; ours is done in
                // one step, its deletions joining the pending batch.
                failpoint!("compactBeforeCommitScheduledCompact");
                self.kv.compact(c.revision, batch)?;
                failpoint!("compactAfterCommitScheduledCompact");
                Ok(Applied::Compaction(PbCompactionResponse { header: header(self.kv.current_revision()) }))
            }
            Request::LeaseGrant(g) => {
                let l = self.lessor.grant(g.id, g.ttl, now, batch)?;
                Ok(Applied::LeaseGrant(PbLeaseGrantResponse {
                    header: header(self.kv.current_revision()),
                    id: l.id,
                    ttl: l.ttl,
                    error: String::new(),
                }))
            }
            Request::LeaseRevoke(r) => {
                let keys = self.lessor.revoke(r.id, batch)?;
                let mut txn = self.kv.begin(batch);
                for k in keys {
                    self.kv.delete_range(&mut txn, &k, b"");
                }
                let events = self.kv.commit(txn);
                let rev = self.publish(events);
                Ok(Applied::LeaseRevoke(PbLeaseRevokeResponse { header: header(rev) }))
            }
            Request::LeaseRenew(r) => {
                let ttl = self.lessor.renew(r.id, now)?;
                Ok(Applied::LeaseRenew { id: r.id, ttl })
            }
            Request::MemberAttributes(a) => {
                // A removed member's late publish changes nothing (etcd ignores it too).
                if self.removed.contains(&a.id) {
                    return Ok(Applied::MemberAttributes);
                }
                let m = self.members.entry(a.id).or_insert_with(|| Member { id: a.id, ..Default::default() });
                m.name = a.name;
                m.client_urls = a.client_urls;
                let m = m.clone();
                self.save_member(&m, batch);
                Ok(Applied::MemberAttributes)
            }
            Request::MemberUpdate(u) => {
                self.apply_member_change(ChangeKind::Update, &u, batch)?;
                Ok(Applied::Membership)
            }
            Request::Alarm(a) => Ok(Applied::Alarm(self.alarm(&a, batch))),
        }
    }

    fn save_member(&mut self, m: &Member, batch: &mut WriteBatch) {
        batch.put(keys::with_u64(keys::MEMBER_ATTRS, m.id), m.encode_to_vec());
        self.membership_version += 1;
    }

    /// Applies a configuration change to the member records (etcd's `RaftCluster.AddMember`,
    /// `RemoveMember`, `UpdateRaftAttributes`, `PromoteMember`), after checking it as every
    /// member does ([`validate_configuration_change`]). On an error nothing changes: the raft
    /// thread then leaves raft's configuration alone too.
    pub fn apply_member_change(&mut self, kind: ChangeKind, m: &Member, batch: &mut WriteBatch) -> Result<()> {
        validate_configuration_change(&self.members, &self.removed, kind, m)?;
        match kind {
            ChangeKind::Add => {
                let m = Member { name: String::new(), client_urls: Vec::new(), ..m.clone() };
                self.members.insert(m.id, m.clone());
                self.save_member(&m, batch);
            }
            ChangeKind::Remove => {
                self.members.remove(&m.id);
                self.removed.insert(m.id);
                batch.delete(keys::with_u64(keys::MEMBER_ATTRS, m.id));
                batch.put(keys::with_u64(keys::MEMBER_REMOVED, m.id), Vec::new());
                self.membership_version += 1;
            }
            ChangeKind::Update | ChangeKind::Promote => {
                let r = self.members.get_mut(&m.id).expect("validated: the member exists");
                if kind == ChangeKind::Update {
                    r.peer_urls = m.peer_urls.clone();
                } else {
                    r.is_learner = false;
                }
                let r = r.clone();
                self.save_member(&r, batch);
            }
        }
        tracing::info!(target: "store::membership", change = ?kind, member = %format!("{:x}", m.id), peer_urls = ?m.peer_urls, learner = m.is_learner, "membership changed");
        Ok(())
    }

    /// Records the founding members of a new cluster (from `--initial-cluster`), as etcd's
    /// bootstrap adds them; each founding member does the same with the same flags. Kept
    /// records (a name already published) are completed, not replaced.
    pub fn seed_members(&mut self, peers: &[(u64, Vec<String>)], batch: &mut WriteBatch) {
        for (id, urls) in peers {
            if self.removed.contains(id) {
                continue;
            }
            let m = self.members.entry(*id).or_insert_with(|| Member { id: *id, ..Default::default() });
            m.peer_urls = urls.clone();
            let m = m.clone();
            self.save_member(&m, batch);
        }
    }

    /// Whether member `id` is a learner.
    pub fn is_learner(&self, id: u64) -> bool {
        self.members.get(&id).is_some_and(|m| m.is_learner)
    }

    /// etcd's `applierV3backend.Alarm`: GET lists the alarms of a type (every alarm for NONE),
    /// ACTIVATE raises one for a member, DEACTIVATE clears it; the response holds what changed.
    fn alarm(&mut self, a: &PbAlarmRequest, batch: &mut WriteBatch) -> PbAlarmResponse {
        let mut alarms = Vec::new();
        match a.action {
            alarm_action::GET => alarms = self.alarms.get(a.alarm),
            alarm_action::ACTIVATE if a.alarm != alarm_type::NONE => {
                if let Some(m) = self.alarms.activate(a.member_id, a.alarm, batch) {
                    tracing::warn!(target: "store::apply", alarm = crate::alarms::alarm_type::name(m.alarm), from = %format!("{:x}", m.member_id), "alarm raised");
                    alarms.push(m);
                }
            }
            alarm_action::DEACTIVATE => {
                if let Some(m) = self.alarms.deactivate(a.member_id, a.alarm, batch) {
                    tracing::warn!(target: "store::apply", alarm = crate::alarms::alarm_type::name(m.alarm), from = %format!("{:x}", m.member_id), "alarm disarmed");
                    alarms.push(m);
                }
            }
            _ => {}
        }
        PbAlarmResponse { header: header(self.kv.current_revision()), alarms }
    }

    /// Publishes a revision's events to watchers; returns the store's revision.
    fn publish(&mut self, events: Vec<PbEvent>) -> i64 {
        let revision = self.kv.current_revision();
        if let Some(kv) = events.first().and_then(|e| e.kv.as_ref()) {
            self.last_key.clone_from(&kv.key);
        }
        if !events.is_empty() {
            // No receivers is fine: nobody watches.
            let _ = self.watch_tx.send(Arc::new(WatchBatch { revision, events, restored: false }));
        }
        revision
    }

    fn put(&mut self, txn: &mut WriteTxn, p: &PbPutRequest) -> Result<PbPutResponse> {
        let prev = self.kv.get_at(&p.key, self.kv.txn_read_revision(txn)).cloned();
        let value = if p.ignore_value {
            prev.as_ref().ok_or(Error::KeyNotFound)?.value.clone()
        } else {
            p.value.clone()
        };
        let lease = if p.ignore_lease { prev.as_ref().ok_or(Error::KeyNotFound)?.lease } else { p.lease };
        if lease != 0 && !self.lessor.exists(lease) {
            return Err(Error::LeaseNotFound);
        }
        self.kv.put(txn, &p.key, value, lease);
        let prev_lease = prev.as_ref().map_or(0, |kv| kv.lease);
        if prev_lease != lease {
            self.lessor.detach(prev_lease, &p.key);
            self.lessor.attach(lease, &p.key);
        }
        Ok(PbPutResponse { header: None, prev_kv: if p.prev_kv { prev } else { None } })
    }

    fn delete_range(&mut self, txn: &mut WriteTxn, d: &PbDeleteRequest) -> PbDeleteResponse {
        let deleted = self.kv.delete_range(txn, &d.key, &d.range_end);
        for kv in &deleted {
            if kv.lease != 0 {
                self.lessor.detach(kv.lease, &kv.key);
            }
        }
        PbDeleteResponse {
            header: None,
            deleted: deleted.len() as i64,
            prev_kvs: if d.prev_kv { deleted } else { Vec::new() },
        }
    }

    /// A Txn: compares evaluated on the state before it, then one branch applied at one revision.
    /// Reads inside the branch see the branch's earlier writes.
    pub fn txn(&mut self, t: &PbTxnRequest, batch: &mut WriteBatch) -> Result<PbTxnResponse> {
        let rev = self.kv.current_revision();
        // Step 1: choose every branch (nested ones too) on the state before any write.
        let path = self.choose(t, rev);
        // Step 2: check the chosen puts, so a failing Txn changes nothing.
        self.check_puts(t, &path, &mut 0)?;
        // Step 3: execute.
        let mut txn = self.kv.begin(batch);
        let mut resp = self.exec_txn(&mut txn, t, &path, &mut 0)?;
        let events = self.kv.commit(txn);
        // The gRPC edge gives every nested response the member's full header at this revision.
        resp.header = header(self.publish(events));
        Ok(resp)
    }

    /// Which branch each Txn takes, depth first (the outer Txn first).
    fn choose(&self, t: &PbTxnRequest, rev: i64) -> Vec<bool> {
        let ok = t.compare.iter().all(|c| self.compare(c, rev));
        let mut path = vec![ok];
        for op in if ok { &t.success } else { &t.failure } {
            if let Some(PbTxnOpRequest::RequestTxn(inner)) = &op.request {
                path.extend(self.choose(inner, rev));
            }
        }
        path
    }

    fn check_puts(&self, t: &PbTxnRequest, path: &[bool], at: &mut usize) -> Result<()> {
        let ok = path[*at];
        *at += 1;
        for op in if ok { &t.success } else { &t.failure } {
            match &op.request {
                Some(PbTxnOpRequest::RequestPut(p)) => {
                    let prev = self.kv.get_at(&p.key, self.kv.current_revision());
                    if (p.ignore_value || p.ignore_lease) && prev.is_none() {
                        return Err(Error::KeyNotFound);
                    }
                    if !p.ignore_lease && p.lease != 0 && !self.lessor.exists(p.lease) {
                        return Err(Error::LeaseNotFound);
                    }
                }
                Some(PbTxnOpRequest::RequestTxn(inner)) => self.check_puts(inner, path, at)?,
                _ => {}
            }
        }
        Ok(())
    }

    fn exec_txn(&mut self, txn: &mut WriteTxn, t: &PbTxnRequest, path: &[bool], at: &mut usize) -> Result<PbTxnResponse> {
        let ok = path[*at];
        *at += 1;
        let mut responses = Vec::new();
        for op in if ok { &t.success } else { &t.failure } {
            let r = match &op.request {
                Some(PbTxnOpRequest::RequestRange(r)) => {
                    let rev = self.kv.txn_read_revision(txn);
                    PbTxnOpResponse::ResponseRange(self.range_at(r, rev))
                }
                Some(PbTxnOpRequest::RequestPut(p)) => PbTxnOpResponse::ResponsePut(self.put(txn, p)?),
                Some(PbTxnOpRequest::RequestDeleteRange(d)) => {
                    PbTxnOpResponse::ResponseDeleteRange(self.delete_range(txn, d))
                }
                Some(PbTxnOpRequest::RequestTxn(inner)) => {
                    PbTxnOpResponse::ResponseTxn(self.exec_txn(txn, inner, path, at)?)
                }
                None => continue,
            };
            responses.push(PbResponseOp { response: Some(r) });
        }
        Ok(PbTxnResponse { header: None, succeeded: ok, responses })
    }

    fn compare(&self, c: &PbCompare, rev: i64) -> bool {
        let mut kvs = Vec::new();
        self.kv.range_at(&c.key, &c.range_end, rev, |kv| {
            kvs.push(kv);
            true
        });
        if kvs.is_empty() {
            // A missing key compares as zero, except by value, which never matches.
            return c.target != compare_target::VALUE && compare_kv(c, &PbKeyValue::default());
        }
        kvs.into_iter().all(|kv| compare_kv(c, kv))
    }

    /// A Range as of revision `rev` (already checked against compaction and the current revision).
    pub fn range_at(&self, r: &PbRangeRequest, rev: i64) -> PbRangeResponse {
        let filtered = r.min_mod_revision > 0
            || r.max_mod_revision > 0
            || r.min_create_revision > 0
            || r.max_create_revision > 0;
        let natural_order = r.sort_target == sort_target::KEY && r.sort_order != sort_order::DESCEND;
        // Without sorting or filters only limit + 1 values are needed (the + 1 tells `more`).
        let keep = if r.limit > 0 && natural_order && !filtered { r.limit as usize + 1 } else { usize::MAX };
        let mut count = 0i64;
        let mut kvs: Vec<PbKeyValue> = Vec::new();
        self.kv.range_at(&r.key, &r.range_end, rev, |kv| {
            count += 1;
            if !r.count_only && kvs.len() < keep && passes_filters(r, kv) {
                let mut kv = kv.clone();
                if r.keys_only {
                    kv.value.clear();
                }
                kvs.push(kv);
            }
            true
        });
        if !natural_order {
            sort_kvs(&mut kvs, r.sort_target, r.sort_order);
        }
        let mut more = false;
        if r.limit > 0 && kvs.len() > r.limit as usize {
            kvs.truncate(r.limit as usize);
            more = true;
        }
        PbRangeResponse { header: header(self.kv.current_revision()), kvs, more, count }
    }

    /// A Range request served from this member's state (the caller has done any ReadIndex).
    pub fn range(&self, r: &PbRangeRequest) -> Result<PbRangeResponse> {
        let rev = self.kv.read_revision(r.revision)?;
        Ok(self.range_at(r, rev))
    }

    /// Encodes the whole state machine for a snapshot.
    pub fn snapshot_data(&self) -> Vec<u8> {
        let snap = SnapshotData {
            records: self
                .kv
                .records()
                .map(|(rev, rec)| SnapshotRecord { main: rev.main, sub: rev.sub, tombstone: rec.tombstone, kv: Some(rec.kv.clone()) })
                .collect(),
            ..self.snapshot_rest()
        };
        snap.encode_to_vec()
    }

    /// Everything of a snapshot but the key space's records (left empty): what
    /// [`crate::snapshot::SnapshotView`] sends after the records it streams.
    pub fn snapshot_rest(&self) -> SnapshotData {
        SnapshotData {
            records: Vec::new(),
            leases: self.lessor.all().map(|l| PbLeaseStatus { id: l.id }).collect(),
            lease_ttls: self.lessor.all().map(|l| l.ttl).collect(),
            revision: self.kv.current_revision(),
            compacted: self.kv.compacted_revision(),
            members: self.members.values().cloned().collect(),
            alarms: self.alarms.get(alarm_type::NONE),
            removed: self.removed.iter().copied().collect(),
        }
    }

    /// Replaces the whole state machine with a snapshot's, applied at raft index `index`.
    pub fn restore(&mut self, data: &[u8], index: u64, batch: &mut WriteBatch) -> Result<()> {
        let snap = SnapshotData::decode(data).map_err(|e| Error::Corrupt { what: "snapshot", detail: e.to_string() })?;
        let records = snap
            .records
            .into_iter()
            .map(|r| {
                (Revision { main: r.main, sub: r.sub }, Record { kv: r.kv.unwrap_or_default(), tombstone: r.tombstone })
            })
            .collect();
        self.kv.restore(records, snap.revision, snap.compacted, self.engine.as_ref(), batch)?;
        let leases = snap.leases.iter().map(|l| l.id).zip(snap.lease_ttls.iter().copied()).collect();
        let attached = Self::attached_keys(&self.kv);
        self.lessor.restore(leases, attached.into_iter(), Instant::now(), self.engine.as_ref(), batch)?;
        for item in self.engine.scan_prefix(keys::MEMBER_ATTRS) {
            batch.delete(item?.0);
        }
        for item in self.engine.scan_prefix(keys::MEMBER_REMOVED) {
            batch.delete(item?.0);
        }
        self.members.clear();
        for m in snap.members {
            batch.put(keys::with_u64(keys::MEMBER_ATTRS, m.id), m.encode_to_vec());
            self.members.insert(m.id, m);
        }
        self.removed = snap.removed.into_iter().collect();
        for id in &self.removed {
            batch.put(keys::with_u64(keys::MEMBER_REMOVED, *id), Vec::new());
        }
        self.membership_version += 1;
        self.alarms.restore(snap.alarms, self.engine.as_ref(), batch)?;
        self.applied_index = index;
        batch.put(keys::APPLIED.to_vec(), index.to_be_bytes().to_vec());
        let _ = self.watch_tx.send(Arc::new(WatchBatch { revision: snap.revision, events: Vec::new(), restored: true }));
        Ok(())
    }
}

fn passes_filters(r: &PbRangeRequest, kv: &PbKeyValue) -> bool {
    (r.min_mod_revision == 0 || kv.mod_revision >= r.min_mod_revision)
        && (r.max_mod_revision == 0 || kv.mod_revision <= r.max_mod_revision)
        && (r.min_create_revision == 0 || kv.create_revision >= r.min_create_revision)
        && (r.max_create_revision == 0 || kv.create_revision <= r.max_create_revision)
}

fn sort_kvs(kvs: &mut [PbKeyValue], target: i32, order: i32) {
    match target {
        sort_target::VERSION => kvs.sort_by_key(|kv| kv.version),
        sort_target::CREATE => kvs.sort_by_key(|kv| kv.create_revision),
        sort_target::MOD => kvs.sort_by_key(|kv| kv.mod_revision),
        sort_target::VALUE => kvs.sort_by(|a, b| a.value.cmp(&b.value)),
        _ => kvs.sort_by(|a, b| a.key.cmp(&b.key)),
    }
    if order == sort_order::DESCEND {
        kvs.reverse();
    }
}

fn compare_kv(c: &PbCompare, kv: &PbKeyValue) -> bool {
    use std::cmp::Ordering;
    let ord = match c.target {
        compare_target::VALUE => {
            let want = match &c.target_union {
                Some(PbTargetUnion::Value(v)) => v.as_slice(),
                _ => &[],
            };
            kv.value.as_slice().cmp(want)
        }
        t => {
            let (have, want) = match (t, &c.target_union) {
                (compare_target::VERSION, Some(PbTargetUnion::Version(v))) => (kv.version, *v),
                (compare_target::VERSION, _) => (kv.version, 0),
                (compare_target::CREATE, Some(PbTargetUnion::CreateRevision(v))) => (kv.create_revision, *v),
                (compare_target::CREATE, _) => (kv.create_revision, 0),
                (compare_target::MOD, Some(PbTargetUnion::ModRevision(v))) => (kv.mod_revision, *v),
                (compare_target::MOD, _) => (kv.mod_revision, 0),
                (compare_target::LEASE, Some(PbTargetUnion::Lease(v))) => (kv.lease, *v),
                (_, _) => (kv.lease, 0),
            };
            have.cmp(&want)
        }
    };
    match c.result {
        compare_result::EQUAL => ord == Ordering::Equal,
        compare_result::GREATER => ord == Ordering::Greater,
        compare_result::LESS => ord == Ordering::Less,
        compare_result::NOT_EQUAL => ord != Ordering::Equal,
        _ => false,
    }
}

/// etcd's checks on a Txn before it is proposed: at most [`MAX_TXN_OPS`] operations per branch,
/// no key put twice in one branch, and no key both put and deleted.
pub fn check_txn(t: &PbTxnRequest) -> Result<()> {
    if t.compare.len() > MAX_TXN_OPS || t.success.len() > MAX_TXN_OPS || t.failure.len() > MAX_TXN_OPS {
        return Err(Error::TooManyOps);
    }
    for c in &t.compare {
        if c.key.is_empty() {
            return Err(Error::EmptyKey);
        }
    }
    for branch in [&t.success, &t.failure] {
        let mut puts: Vec<&[u8]> = Vec::new();
        let mut dels: Vec<(&[u8], &[u8])> = Vec::new();
        for op in branch {
            match &op.request {
                Some(PbTxnOpRequest::RequestPut(p)) => {
                    if p.key.is_empty() {
                        return Err(Error::EmptyKey);
                    }
                    if puts.contains(&p.key.as_slice()) {
                        return Err(Error::DuplicateKey);
                    }
                    puts.push(&p.key);
                }
                Some(PbTxnOpRequest::RequestDeleteRange(d)) => {
                    if d.key.is_empty() {
                        return Err(Error::EmptyKey);
                    }
                    dels.push((&d.key, &d.range_end));
                }
                Some(PbTxnOpRequest::RequestRange(r)) if r.key.is_empty() => return Err(Error::EmptyKey),
                Some(PbTxnOpRequest::RequestTxn(inner)) => check_txn(inner)?,
                _ => {}
            }
        }
        if puts.iter().any(|k| dels.iter().any(|(s, e)| in_range(k, s, e))) {
            return Err(Error::DuplicateKey);
        }
    }
    Ok(())
}

/// Whether a Txn writes anything (a read-only one needs no raft round).
pub fn txn_is_read_only(t: &PbTxnRequest) -> bool {
    t.success.iter().chain(&t.failure).all(|op| match &op.request {
        Some(PbTxnOpRequest::RequestRange(_)) | None => true,
        Some(PbTxnOpRequest::RequestTxn(inner)) => txn_is_read_only(inner),
        _ => false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::SledEngine;

    fn sm() -> StateMachine {
        StateMachine::load(Arc::new(SledEngine::temporary().unwrap()), 1, 16).unwrap()
    }

    fn apply(sm: &mut StateMachine, r: Request) -> Result<Applied> {
        sm.apply_request(r, Instant::now(), &mut WriteBatch::default())
    }

    fn put(key: &str, value: &str) -> PbPutRequest {
        PbPutRequest { key: key.into(), value: value.into(), ..Default::default() }
    }

    fn op_put(key: &str, value: &str) -> PbTxnRequestOp {
        PbTxnRequestOp { request: Some(PbTxnOpRequest::RequestPut(put(key, value))) }
    }

    fn op_get(key: &str) -> PbTxnRequestOp {
        PbTxnRequestOp { request: Some(PbTxnOpRequest::RequestRange(PbRangeRequest { key: key.into(), ..Default::default() })) }
    }

    fn cmp_mod(key: &str, rev: i64) -> PbCompare {
        PbCompare {
            key: key.into(),
            target: compare_target::MOD,
            result: compare_result::EQUAL,
            target_union: Some(PbTargetUnion::ModRevision(rev)),
            ..Default::default()
        }
    }

    fn value(sm: &StateMachine, key: &str) -> Option<String> {
        let r = sm.range(&PbRangeRequest { key: key.into(), ..Default::default() }).unwrap();
        r.kvs.first().map(|kv| String::from_utf8_lossy(&kv.value).into_owned())
    }

    #[test]
    fn a_create_txn_wins_once_as_the_api_server_uses_it() {
        let mut s = sm();
        // Kubernetes' create: mod_revision(key) == 0, then put; else get.
        let create = |v: &str| PbTxnRequest {
            compare: vec![cmp_mod("/registry/pods/default/p", 0)],
            success: vec![op_put("/registry/pods/default/p", v)],
            failure: vec![op_get("/registry/pods/default/p")],
        };
        let Applied::Txn(first) = apply(&mut s, Request::Txn(create("a"))).unwrap() else { panic!() };
        assert!(first.succeeded);
        assert_eq!(first.header.unwrap().revision, 1);
        let Applied::Txn(second) = apply(&mut s, Request::Txn(create("b"))).unwrap() else { panic!() };
        assert!(!second.succeeded);
        let Some(PbTxnOpResponse::ResponseRange(r)) = &second.responses[0].response else { panic!() };
        assert_eq!(r.kvs[0].value, b"a", "the failure branch returns the current object");
        assert_eq!(s.kv.current_revision(), 1, "a failed txn with only reads writes nothing");
    }

    #[test]
    fn reads_in_a_txn_see_its_earlier_writes_and_all_share_one_revision() {
        let mut s = sm();
        let t = PbTxnRequest { compare: vec![], success: vec![op_put("a", "1"), op_get("a"), op_put("b", "2")], failure: vec![] };
        let Applied::Txn(r) = apply(&mut s, Request::Txn(t)).unwrap() else { panic!() };
        let Some(PbTxnOpResponse::ResponseRange(got)) = &r.responses[1].response else { panic!() };
        assert_eq!(got.kvs[0].value, b"1");
        assert_eq!(s.kv.current_revision(), 1);
        assert_eq!(s.kv.get_at(b"b", 1).unwrap().mod_revision, 1);
    }

    #[test]
    fn nested_txns_choose_on_the_state_before_any_write() {
        let mut s = sm();
        apply(&mut s, Request::Put(put("x", "0"))).unwrap();
        let inner = PbTxnRequest { compare: vec![cmp_mod("x", 1)], success: vec![op_put("y", "inner-ok")], failure: vec![op_put("y", "inner-failed")] };
        let outer = PbTxnRequest {
            compare: vec![cmp_mod("x", 1)],
            success: vec![op_put("x", "1"), PbTxnRequestOp { request: Some(PbTxnOpRequest::RequestTxn(inner)) }],
            failure: vec![],
        };
        apply(&mut s, Request::Txn(outer)).unwrap();
        assert_eq!(value(&s, "y").as_deref(), Some("inner-ok"));
    }

    #[test]
    fn a_txn_that_fails_a_check_changes_nothing() {
        let mut s = sm();
        let t = PbTxnRequest {
            compare: vec![],
            success: vec![op_put("a", "1"), PbTxnRequestOp { request: Some(PbTxnOpRequest::RequestPut(PbPutRequest { key: b"b".to_vec(), lease: 42, ..Default::default() })) }],
            failure: vec![],
        };
        assert!(matches!(apply(&mut s, Request::Txn(t)), Err(Error::LeaseNotFound)));
        assert_eq!(s.kv.current_revision(), 0);
        assert_eq!(value(&s, "a"), None);
    }

    #[test]
    fn txn_checks_are_etcds() {
        let dup = PbTxnRequest { compare: vec![], success: vec![op_put("a", "1"), op_put("a", "2")], failure: vec![] };
        assert!(matches!(check_txn(&dup), Err(Error::DuplicateKey)));
        let put_and_delete = PbTxnRequest {
            compare: vec![],
            success: vec![
                op_put("a/1", "1"),
                PbTxnRequestOp { request: Some(PbTxnOpRequest::RequestDeleteRange(PbDeleteRequest { key: b"a/".to_vec(), range_end: b"a0".to_vec(), ..Default::default() })) },
            ],
            failure: vec![],
        };
        assert!(matches!(check_txn(&put_and_delete), Err(Error::DuplicateKey)));
        let many = PbTxnRequest { compare: vec![], success: (0..129).map(|i| op_put(&format!("k{i}"), "v")).collect(), failure: vec![] };
        assert!(matches!(check_txn(&many), Err(Error::TooManyOps)));
        assert!(txn_is_read_only(&PbTxnRequest { compare: vec![], success: vec![op_get("a")], failure: vec![] }));
    }

    #[test]
    fn compares_on_missing_keys_and_values() {
        let mut s = sm();
        apply(&mut s, Request::Put(put("k", "b"))).unwrap();
        let rev = s.kv.current_revision();
        let c = |target, result, key: &str, u| PbCompare { key: key.into(), target, result, target_union: Some(u), ..Default::default() };
        assert!(s.compare(&c(compare_target::VERSION, compare_result::EQUAL, "missing", PbTargetUnion::Version(0)), rev));
        assert!(!s.compare(&c(compare_target::VALUE, compare_result::NOT_EQUAL, "missing", PbTargetUnion::Value(b"x".to_vec())), rev));
        assert!(s.compare(&c(compare_target::VALUE, compare_result::GREATER, "k", PbTargetUnion::Value(b"a".to_vec())), rev));
        assert!(s.compare(&c(compare_target::CREATE, compare_result::LESS, "k", PbTargetUnion::CreateRevision(2)), rev));
    }

    #[test]
    fn revoking_a_lease_deletes_its_keys_in_one_revision() {
        let mut s = sm();
        apply(&mut s, Request::LeaseGrant(PbLeaseGrantRequest { id: 9, ttl: 10 })).unwrap();
        for k in ["e1", "e2"] {
            apply(&mut s, Request::Put(PbPutRequest { key: k.into(), value: b"v".to_vec(), lease: 9, ..Default::default() })).unwrap();
        }
        // Re-putting without the lease detaches the key.
        apply(&mut s, Request::Put(put("e2", "kept"))).unwrap();
        let before = s.kv.current_revision();
        apply(&mut s, Request::LeaseRevoke(PbLeaseRevokeRequest { id: 9 })).unwrap();
        assert_eq!(s.kv.current_revision(), before + 1);
        assert_eq!(value(&s, "e1"), None);
        assert_eq!(value(&s, "e2").as_deref(), Some("kept"));
        assert!(matches!(apply(&mut s, Request::LeaseRenew(PbLeaseKeepAliveRequest { id: 9 })), Err(Error::LeaseNotFound)));
    }

    #[test]
    fn range_limit_count_sort_and_filters() {
        let mut s = sm();
        for (k, v) in [("p/a", "3"), ("p/b", "1"), ("p/c", "2")] {
            apply(&mut s, Request::Put(put(k, v))).unwrap();
        }
        let base = PbRangeRequest { key: b"p/".to_vec(), range_end: b"p0".to_vec(), ..Default::default() };
        let r = s.range(&PbRangeRequest { limit: 2, ..base.clone() }).unwrap();
        assert_eq!((r.kvs.len(), r.count, r.more), (2, 3, true));
        let r = s.range(&PbRangeRequest { sort_target: sort_target::VALUE, sort_order: sort_order::DESCEND, limit: 1, ..base.clone() }).unwrap();
        assert_eq!(r.kvs[0].key, b"p/a");
        let r = s.range(&PbRangeRequest { count_only: true, ..base.clone() }).unwrap();
        assert_eq!((r.kvs.len(), r.count), (0, 3));
        let r = s.range(&PbRangeRequest { keys_only: true, min_mod_revision: 2, ..base.clone() }).unwrap();
        assert_eq!(r.kvs.iter().map(|kv| (kv.key.clone(), kv.value.len())).collect::<Vec<_>>(), vec![(b"p/b".to_vec(), 0), (b"p/c".to_vec(), 0)]);
        assert!(matches!(s.range(&PbRangeRequest { revision: 9, ..base }), Err(Error::FutureRevision)));
    }

    #[test]
    fn a_snapshot_restores_an_identical_state_machine() {
        let mut a = sm();
        apply(&mut a, Request::LeaseGrant(PbLeaseGrantRequest { id: 5, ttl: 30 })).unwrap();
        apply(&mut a, Request::Put(PbPutRequest { key: b"l".to_vec(), value: b"v".to_vec(), lease: 5, ..Default::default() })).unwrap();
        apply(&mut a, Request::Put(put("k", "1"))).unwrap();
        apply(&mut a, Request::Put(put("k", "2"))).unwrap();
        apply(&mut a, Request::MemberAttributes(MemberAttributes { id: 1, name: "a".into(), client_urls: vec!["http://x".into()] })).unwrap();
        let added = Member { id: 2, peer_urls: vec!["http://p:1".into()], is_learner: true, ..Default::default() };
        a.apply_member_change(ChangeKind::Add, &added, &mut WriteBatch::default()).unwrap();
        let gone = Member { id: 1, ..Default::default() };
        a.apply_member_change(ChangeKind::Remove, &gone, &mut WriteBatch::default()).unwrap();
        assert!(a.apply_member_change(ChangeKind::Add, &Member { id: 1, peer_urls: vec!["http://q:1".into()], ..Default::default() }, &mut WriteBatch::default()).is_err(), "a removed ID never comes back");
        let data = a.snapshot_data();
        let mut b = sm();
        apply(&mut b, Request::Put(put("stale", "x"))).unwrap();
        let mut watchers = b.subscribe();
        b.restore(&data, 77, &mut WriteBatch::default()).unwrap();
        // Watchers are told the key space was replaced: the revisions it brought were never
        // broadcast one by one, so each watch must catch up from history.
        let marker = watchers.try_recv().expect("a restore marker");
        assert!(marker.restored && marker.events.is_empty() && marker.revision == a.kv.current_revision(), "{marker:?}");
        assert_eq!(b.snapshot_data(), data);
        assert_eq!(b.applied_index, 77);
        assert_eq!(b.lessor.get(5).unwrap().keys.len(), 1, "lease attachments are rebuilt");
        assert_eq!(value(&b, "stale"), None);
        assert_eq!(b.removed, [1].into());
        assert!(b.is_learner(2));
    }
}
