//! Mirrors etcd's `etcdserver/server.go` + `raft.go`: runs the raft node on its own thread and
//! gives the gRPC services a handle ([`Node`]) to propose requests and to read linearizably.
//!
//! The raft thread owns the [`RaftNode`] and everything that changes with it: the waiters of
//! proposals (by sequence number), the pending ReadIndex requests, and the leader's lease
//! expiry decisions. Others talk to it through one channel of [`Input`]s. It is a plain thread,
//! not a task, because its work (applying, writing sled) must not block an async executor; the
//! WAL's `fdatasync`s run on a thread of their own, the WAL writer, which reports to the raft
//! thread through the same channel.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc as std_mpsc;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use prost::Message as _;
use proto::etcd::*;
use raft::StateRole;
use raft::eraftpb::{ConfChange, ConfChangeType, Message};
use tokio::sync::oneshot;

use crate::apply::{Applied, InternalRaftRequest, MemberAttributes, Request, StateMachine};
use crate::cluster_util::Joined;
use crate::config::{Config, Peer};
use crate::engine::{BackgroundWrites, Engine, SledEngine, WriteBatch, keys};
use crate::error::{Error, Result};
use crate::membership::{ChangeKind, ConfChangeContext, Member};
use crate::metrics::Metrics;
use crate::raft_node::{RaftNode, RaftOptions, ReadySink, read_context, read_context_number};
use crate::raft_storage::PeerStorage;
use crate::traceutil::{self, Proposal, RevisionTrace};
use crate::transport::{self, Transport};

/// What the raft thread is told.
pub enum Input {
    Propose { seq: u64, data: Vec<u8>, tx: Option<oneshot::Sender<Result<Applied>>> },
    /// A membership change; answered once applied, like a proposal.
    ProposeConfChange { seq: u64, cc: ConfChange, tx: oneshot::Sender<Result<Applied>> },
    /// The leader's raft progress of a member and of itself (None on a follower).
    MatchIndexes { id: u64, tx: oneshot::Sender<Option<(u64, u64)>> },
    /// A peer refused this member as removed from the cluster.
    Removed,
    Read { tx: oneshot::Sender<Result<()>> },
    Step(Message),
    Unreachable(u64),
    SnapshotStatus(u64, bool),
    /// The WAL writer wrote up to this Ready (see [`RaftNode::on_persisted`]).
    Persisted { number: Option<u64>, fsync: Option<Duration> },
    /// The WAL writer failed: the member cannot go on.
    WalFailed(String),
    /// Hand the state machine's pending engine writes to the engine now, and answer once they
    /// are written (before a defragmentation copies the engine).
    CommitBackend { tx: oneshot::Sender<Result<()>> },
    Shutdown,
}

/// The transport reaches the raft thread through its input channel.
impl transport::Raft for std_mpsc::Sender<Input> {
    fn process(&self, m: Message) -> std::result::Result<(), transport::Stopping> {
        self.send(Input::Step(m)).map_err(|_| transport::Stopping)
    }

    fn report_unreachable(&self, id: u64) {
        let _ = self.send(Input::Unreachable(id));
    }

    fn report_snapshot(&self, id: u64, ok: bool) {
        let _ = self.send(Input::SnapshotStatus(id, ok));
    }

    fn report_removed(&self) {
        let _ = self.send(Input::Removed);
    }
}

/// A point-in-time view of the raft node, for Status and health.
#[derive(Debug, Clone, Copy, Default)]
pub struct NodeStatus {
    pub leader: u64,
    pub term: u64,
    pub last_index: u64,
    pub applied_index: u64,
    pub is_leader: bool,
}

#[derive(Default)]
struct SharedStatus {
    leader: AtomicU64,
    term: AtomicU64,
    last_index: AtomicU64,
    applied_index: AtomicU64,
    is_leader: AtomicU64,
}

struct NodeInner {
    cfg: Config,
    id: u64,
    cluster_id: u64,
    inputs: std_mpsc::Sender<Input>,
    sm: Arc<RwLock<StateMachine>>,
    engine: Arc<dyn Engine>,
    seq: AtomicU64,
    status: SharedStatus,
    metrics: Arc<Metrics>,
    request_timeout: Duration,
    revision_trace: RevisionTrace,
    /// `--quota-backend-bytes` ([`crate::quota`]).
    quota: crate::quota::BackendQuota,
    /// Turns true at shutdown, for the member's own tasks (the auto-compactor).
    stopped: tokio::sync::watch::Sender<bool>,
    /// Set when this member learned it was removed from the cluster (it then stops).
    removed: AtomicBool,
    /// Whether this member is a learner, as the raft thread last saw the records (every client
    /// request asks, so it does not take the state machine's lock).
    learner: AtomicBool,
    /// The transport's view of the peers, for the quorum checks of membership changes.
    activity: transport::Activity,
    peer_set: transport::PeerSet,
    /// How peers are dialed (a follower hands a promotion to the leader's peer URL).
    peer_tls: Option<Arc<rustls::ClientConfig>>,
}

/// A cheap, cloneable handle to the running member.
#[derive(Clone)]
pub struct Node(Arc<NodeInner>);

impl Node {
    /// Turns true when the member stops (for tasks that live as long as it, such as
    /// auto-compaction).
    pub(crate) fn stopped(&self) -> tokio::sync::watch::Receiver<bool> {
        self.0.stopped.subscribe()
    }

    pub fn id(&self) -> u64 {
        self.0.id
    }

    pub fn cluster_id(&self) -> u64 {
        self.0.cluster_id
    }

    pub fn config(&self) -> &Config {
        &self.0.cfg
    }

    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.0.metrics
    }

    pub fn state_machine(&self) -> &Arc<RwLock<StateMachine>> {
        &self.0.sm
    }

    /// What this member did for recent revisions (`kubelab trace`).
    pub fn revision_trace(&self) -> &RevisionTrace {
        &self.0.revision_trace
    }

    pub fn db_size(&self) -> u64 {
        self.0.engine.size_on_disk()
    }

    /// Bytes of the database that hold data (etcd's `dbSizeInUse`): the key space's records,
    /// leases, alarms and member attributes; the rest of [`Node::db_size`] is space a
    /// defragmentation gives back.
    pub fn db_size_in_use(&self) -> u64 {
        let sm = self.0.sm.read().expect("state machine lock");
        let leases = sm.lessor.all().count() as u64 * 17;
        let small = (sm.alarms.get(crate::alarms::alarm_type::NONE).len() + sm.members.len()) as u64 * 64;
        sm.kv.size_in_use() + leases + small
    }

    /// Whether a request of `cost` fits in `--quota-backend-bytes` (etcd's `backendQuota.Available`).
    pub fn quota_available(&self, cost: u64) -> bool {
        self.0.quota.available(self.db_size(), cost)
    }

    /// Rewrites the engine's files without the space deleted data took (etcd's `Defragment`).
    /// This member's engine writes wait until it is done (the Ready loop goes on, so raft does).
    pub async fn defragment(&self) -> Result<()> {
        // What was applied but still waits in the Ready loop's batch must be in the copy.
        let (tx, rx) = oneshot::channel();
        self.0.inputs.send(Input::CommitBackend { tx }).map_err(|_| Error::Stopped)?;
        rx.await.map_err(|_| Error::Stopped)??;
        let engine = self.0.engine.clone();
        tokio::task::spawn_blocking(move || engine.defragment()).await.map_err(|e| Error::EngineFailed(e.to_string()))?
    }

    pub fn status(&self) -> NodeStatus {
        let s = &self.0.status;
        NodeStatus {
            leader: s.leader.load(Ordering::Relaxed),
            term: s.term.load(Ordering::Relaxed),
            last_index: s.last_index.load(Ordering::Relaxed),
            applied_index: s.applied_index.load(Ordering::Relaxed),
            is_leader: s.is_leader.load(Ordering::Relaxed) == 1,
        }
    }

    /// The response header etcd puts on every answer.
    pub fn header(&self, revision: i64) -> Option<PbResponseHeader> {
        Some(PbResponseHeader {
            cluster_id: self.0.cluster_id,
            member_id: self.0.id,
            revision,
            raft_term: self.0.status.term.load(Ordering::Relaxed),
        })
    }

    /// Replicates a request through raft and waits until this member has applied it.
    pub async fn propose(&self, request: Request) -> Result<Applied> {
        let seq = self.0.seq.fetch_add(1, Ordering::Relaxed);
        let data = InternalRaftRequest { origin: self.0.id, seq, request: Some(request) }.encode_to_vec();
        let (tx, rx) = oneshot::channel();
        self.0.inputs.send(Input::Propose { seq, data, tx: Some(tx) }).map_err(|_| Error::Stopped)?;
        let r = self.answer(rx).await;
        if matches!(r, Err(Error::Timeout)) {
            self.0.metrics.proposals_failed.inc();
        }
        r
    }

    /// What the raft thread answers a proposal once it is applied, waited for at most the
    /// request timeout.
    async fn answer(&self, rx: oneshot::Receiver<Result<Applied>>) -> Result<Applied> {
        match tokio::time::timeout(self.0.request_timeout, rx).await {
            Ok(Ok(r)) => r,
            Ok(Err(_)) => Err(Error::Stopped),
            Err(_) => Err(Error::Timeout),
        }
    }

    /// Waits until this member has applied everything committed when the call was made
    /// (raft's ReadIndex): a read served after it is linearizable.
    pub async fn linearizable_read(&self) -> Result<()> {
        let (tx, rx) = oneshot::channel();
        self.0.inputs.send(Input::Read { tx }).map_err(|_| Error::Stopped)?;
        match tokio::time::timeout(self.0.request_timeout, rx).await {
            Ok(Ok(r)) => r,
            Ok(Err(_)) => Err(Error::Stopped),
            Err(_) => Err(if self.status().leader == 0 { Error::NoLeader } else { Error::Timeout }),
        }
    }

    /// The raft loop as the transport's peer service sees it.
    pub fn raft(&self) -> Arc<dyn transport::Raft> {
        Arc::new(self.0.inputs.clone())
    }

    /// Proposes a membership change and waits until this member has applied it: `Add` of a
    /// voter or learner, `Remove`, `Promote` through raft's ConfChange (the record in its
    /// context); `Update`, which raft-rs has no change for, as a plain entry.
    pub async fn propose_member_change(&self, kind: ChangeKind, member: Member) -> Result<()> {
        if kind == ChangeKind::Update {
            self.propose(Request::MemberUpdate(member)).await?;
            return Ok(());
        }
        let seq = self.0.seq.fetch_add(1, Ordering::Relaxed);
        let mut cc = ConfChange { node_id: member.id, ..Default::default() };
        cc.set_change_type(match kind {
            ChangeKind::Add if member.is_learner => ConfChangeType::AddLearnerNode,
            ChangeKind::Add | ChangeKind::Promote => ConfChangeType::AddNode,
            _ => ConfChangeType::RemoveNode,
        });
        cc.context = ConfChangeContext { origin: self.0.id, seq, member: Some(member) }.encode_to_vec().into();
        let (tx, rx) = oneshot::channel();
        self.0.inputs.send(Input::ProposeConfChange { seq, cc, tx }).map_err(|_| Error::Stopped)?;
        self.answer(rx).await.map(|_| ())
    }

    /// On the leader: the raft match index of `id` and of the leader. None on a follower.
    pub async fn match_indexes(&self, id: u64) -> Result<Option<(u64, u64)>> {
        let (tx, rx) = oneshot::channel();
        self.0.inputs.send(Input::MatchIndexes { id, tx }).map_err(|_| Error::Stopped)?;
        rx.await.map_err(|_| Error::Stopped)
    }

    /// A view of the membership for the quorum checks, as this member sees its peers.
    pub fn with_cluster_view<T>(&self, f: impl FnOnce(&crate::membership::ClusterView) -> T) -> T {
        let sm = self.0.sm.read().expect("state machine lock");
        let (me, activity) = (self.0.id, &self.0.activity);
        let since = Instant::now().checked_sub(crate::membership::HEALTH_INTERVAL).unwrap_or_else(Instant::now);
        let connected = |id: u64| id == me || activity.connected_since(id, since);
        let active = |id: u64| id == me || activity.is_active(id);
        f(&crate::membership::ClusterView { members: &sm.members, removed: &sm.removed, connected: &connected, active: &active })
    }

    /// Whether this member is a learner (it then serves only serializable reads and Status).
    pub fn is_learner(&self) -> bool {
        self.0.learner.load(Ordering::Relaxed)
    }

    /// Whether this member stopped because it was removed from the cluster.
    pub fn was_removed(&self) -> bool {
        self.0.removed.load(Ordering::Relaxed)
    }

    /// Who may send to this member's peer port.
    pub fn peer_set(&self) -> transport::PeerSet {
        self.0.peer_set.clone()
    }

    pub(crate) fn peer_tls(&self) -> Option<Arc<rustls::ClientConfig>> {
        self.0.peer_tls.clone()
    }

    pub fn shutdown(&self) {
        self.0.stopped.send_replace(true);
        let _ = self.0.inputs.send(Input::Shutdown);
    }
}

/// The identity record of member `name` (`member_id`) of cluster `cluster_id`, as its data
/// directory keeps it (`keys::IDENTITY`).
pub(crate) fn identity_record(name: &str, member_id: u64, cluster_id: u64) -> String {
    format!("member {member_id:x} ({name}) of cluster {cluster_id:x}")
}

/// What a member that joined through `member add` records: its ID and the cluster's came from
/// the cluster, not from the flags.
const JOINED: &str = " (joined)";

/// The member and cluster IDs of an identity record, if it is one.
fn parse_identity(record: &str) -> Option<(u64, String, u64)> {
    let rest = record.strip_prefix("member ")?;
    let (id, rest) = rest.split_once(" (")?;
    let (name, rest) = rest.split_once(") of cluster ")?;
    let cluster = rest.strip_suffix(JOINED).unwrap_or(rest);
    Some((u64::from_str_radix(id, 16).ok()?, name.to_string(), u64::from_str_radix(cluster, 16).ok()?))
}

/// Who this member is: its ID, its cluster's, and whether its data directory was empty.
struct Identity {
    id: u64,
    cluster_id: u64,
    fresh: bool,
}

/// The member's identity as recorded in its data directory, or, for an empty one, recorded now:
/// from the flags for a founding member, from the cluster for one that joins (`join`).
fn check_identity(engine: &dyn Engine, cfg: &Config, join: Option<&Joined>) -> Result<Identity> {
    let wanted = identity_record(&cfg.name, cfg.member_id(), cfg.cluster_id());
    match engine.get(keys::IDENTITY)? {
        Some(found) => {
            let found = String::from_utf8_lossy(&found).into_owned();
            // A founding member keeps its ID (its name and the token); a member that joined
            // keeps the one the cluster gave it. The cluster ID is the recorded one either
            // way: like etcd, a member with data ignores a changed `--initial-cluster`.
            match parse_identity(&found) {
                Some((id, name, cluster_id)) if name == cfg.name && (id == cfg.member_id() || found.ends_with(JOINED)) => {
                    Ok(Identity { id, cluster_id, fresh: false })
                }
                _ => Err(Error::ForeignDataDir { dir: cfg.data_dir.display().to_string(), found, wanted }),
            }
        }
        None => {
            if engine.scan_prefix(b"").next().is_some() {
                return Err(Error::Corrupt { what: "data dir", detail: "data without an identity record".into() });
            }
            let (identity, record) = match (cfg.new_cluster, join) {
                (true, _) => (Identity { id: cfg.member_id(), cluster_id: cfg.cluster_id(), fresh: true }, wanted),
                // `existing` on an empty data directory: the member `member add` added, under
                // the ID the add gave it (`crate::cluster_util::join` found it, and refused a
                // member that had started before and lost its data).
                (false, Some(j)) => {
                    let record = identity_record(&cfg.name, j.id, j.cluster_id) + JOINED;
                    (Identity { id: j.id, cluster_id: j.cluster_id, fresh: true }, record)
                }
                // Without the cluster's answer the member cannot know its ID; a member that
                // was one before and lost its data cannot come back under the same identity:
                // the leader still counts it as holding the entries it lost (its first heartbeat
                // commits past the empty log, a raft panic), and it could vote twice in one term.
                (false, None) => {
                    return Err(Error::Config(format!(
                        "member {:x} has already been bootstrapped: it cannot rejoin with an empty data directory under the identity it had (--initial-cluster-state existing); start it with the data directory it had",
                        cfg.member_id()
                    )));
                }
            };
            let mut b = WriteBatch::default();
            b.put(keys::IDENTITY.to_vec(), record.into_bytes());
            engine.write(b)?;
            engine.flush()?;
            Ok(identity)
        }
    }
}

/// Opens the data directory — `member/db` (sled: the state machine and the member's identity)
/// and `member/wal` (the raft log) — and starts the raft thread and the transport, which dials
/// `https://` peers with `peer_tls`. The gRPC services are started by the caller (see
/// `crate::run`) with the returned handle.
pub fn start(
    cfg: Config,
    rt: &tokio::runtime::Handle,
    peer_tls: Option<Arc<rustls::ClientConfig>>,
    join: Option<Joined>,
) -> Result<(Node, std::thread::JoinHandle<()>)> {
    cfg.validate()?;
    #[cfg(feature = "failpoints")]
    crate::failpoint::init()?;
    let dir = cfg.data_dir.join("member");
    std::fs::create_dir_all(&dir)?;
    let metrics = Metrics::new();
    let commit_duration = metrics.backend_commit_duration.clone();
    let sled: Arc<dyn Engine> = Arc::new(SledEngine::open(&dir.join("db"))?);
    let engine: Arc<dyn Engine> =
        Arc::new(BackgroundWrites::start(sled, move |d| commit_duration.observe(d.as_secs_f64()))?);
    let Identity { id, cluster_id, fresh } = check_identity(engine.as_ref(), &cfg, join.as_ref())?;
    let ticks = |d: Duration| (d.as_millis() / cfg.heartbeat_interval.as_millis().max(1)) as usize;
    let opts = RaftOptions {
        election_tick: ticks(cfg.election_timeout).max(2),
        heartbeat_tick: 1,
        snapshot_count: cfg.snapshot_count,
        ..Default::default()
    };
    // etcd's minimum lease TTL: 1.5 election timeouts, rounded up to a second.
    let min_ttl = (cfg.election_timeout.as_millis() as i64 * 3 + 1999) / 2000;
    let sm = Arc::new(RwLock::new(StateMachine::load(engine.clone(), min_ttl, 4096)?));
    // A new member of a new cluster bootstraps the voters and records the founding members; a
    // member that joins starts with neither and learns both from the leader's snapshot.
    let voters = if fresh && join.is_some() { Vec::new() } else { cfg.voters() };
    {
        let mut sm = sm.write().expect("state machine lock");
        // Data directories from before membership changes, and restored ones, hold no member
        // records with peer URLs: they are the founding members.
        let recorded = sm.members.values().any(|m| !m.peer_urls.is_empty()) || !sm.removed.is_empty();
        if join.is_none() && !recorded {
            let peers: Vec<(u64, Vec<String>)> = cfg.initial_cluster.iter().map(|p| (p.id, p.peer_urls.clone())).collect();
            let mut b = WriteBatch::default();
            sm.seed_members(&peers, &mut b);
            engine.write(b)?;
        }
    }
    // The peers to dial: the member records, or what the cluster told a joining member.
    let peers: Vec<Peer> = match &join {
        Some(j) if fresh => j.members.iter().filter(|p| p.id != id).cloned().collect(),
        _ => sm
            .read()
            .expect("state machine lock")
            .members
            .values()
            .filter(|m| m.id != id && !m.peer_urls.is_empty())
            .map(|m| Peer { name: m.name.clone(), id: m.id, peer_urls: m.peer_urls.clone() })
            .collect(),
    };
    let wal_dir = dir.join("wal");
    if fresh && wal_dir.exists() {
        // The database was lost or replaced but not the log: the two no longer belong together.
        return Err(Error::Corrupt {
            what: "data dir",
            detail: format!("{} has a WAL but {} has no identity record", wal_dir.display(), dir.join("db").display()),
        });
    }
    let storage = PeerStorage::open(&wal_dir, engine.clone(), sm.clone())?;
    let mut raft = RaftNode::open(id, voters, storage, sm.clone(), opts.clone(), metrics.clone(), &crate::raft_node::logger())?;
    let (inputs, rx) = std_mpsc::channel();
    let transport =
        Transport::start(peers, cluster_id, id, Arc::new(inputs.clone()), rt, metrics.clone(), peer_tls.clone());
    // The WAL writer sends what waited for a write itself (a follower's append responses leave
    // without a detour through the raft thread) and reports to the raft thread.
    let (wal_transport, wal_inputs) = (transport.clone(), inputs.clone());
    raft.persist_in_background(move |written| match written {
        Ok(w) => {
            if !w.messages.is_empty() {
                failpoint!("raftBeforeFollowerSend");
            }
            wal_transport.send(w.messages);
            let _ = wal_inputs.send(Input::Persisted { number: w.number, fsync: w.fsync });
        }
        Err(e) => {
            let _ = wal_inputs.send(Input::WalFailed(e.to_string()));
        }
    })?;
    let request_timeout = Duration::from_secs(5) + cfg.election_timeout * 2;
    let node = Node(Arc::new(NodeInner {
        id,
        cluster_id,
        inputs,
        sm,
        engine,
        seq: AtomicU64::new(first_seq()),
        status: SharedStatus::default(),
        metrics,
        request_timeout,
        revision_trace: RevisionTrace::new(&cfg.name, id),
        quota: crate::quota::BackendQuota::new(cfg.quota_backend_bytes),
        stopped: tokio::sync::watch::channel(false).0,
        removed: AtomicBool::new(false),
        learner: AtomicBool::new(false),
        activity: transport.activity(),
        peer_set: transport.peer_set(),
        peer_tls,
        cfg,
    }));
    let loop_node = node.clone();
    let handle = std::thread::Builder::new()
        .name("raft".into())
        .spawn(move || {
            // A panic of the raft thread ends the member, as a panic ends etcd: a process that
            // still holds its ports and answers Status while its raft is gone looks alive to
            // every supervisor and client, and is not.
            let run = std::panic::AssertUnwindSafe(move || RaftLoop::new(raft, transport, loop_node).run(rx));
            if std::panic::catch_unwind(run).is_err() {
                tracing::error!("the raft thread panicked (see above); the member exits");
                std::process::exit(2);
            }
        })?;
    Ok((node, handle))
}

/// The first sequence number of this run of the member: the wall clock in milliseconds above
/// a 22-bit counter, as etcd's `pkg/idutil` generator makes request IDs. A proposal the member
/// made before a crash can still be in the log and be applied after the restart; numbering from
/// 1 again, its result went to the new client that happened to get the same number (a put
/// answered with another request's revision, which the robustness checker caught). Starting from
/// the clock, a restarted member's numbers are past every number it used before, as long as it
/// did not make more than four million proposals a millisecond.
fn first_seq() -> u64 {
    let ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0);
    (ms & ((1 << 41) - 1)) << 22
}

/// Where the Ready loop's messages and results go: the peers' queues, the waiting clients.
struct Sink<'a> {
    transport: &'a Transport,
    waiters: &'a mut HashMap<u64, oneshot::Sender<Result<Applied>>>,
    proposals: &'a mut HashMap<u64, Proposal>,
    trace: &'a RevisionTrace,
}

impl ReadySink for Sink<'_> {
    fn send(&mut self, msgs: Vec<Message>) {
        self.transport.send(msgs);
    }

    fn applied(&mut self, seq: u64, result: Result<Applied>) {
        self.proposals.remove(&seq);
        if let Some(tx) = self.waiters.remove(&seq) {
            let _ = tx.send(result);
        }
    }

    fn traced(&mut self, entry: traceutil::Applied) {
        let proposal = self.proposals.get(&entry.seq).copied();
        self.trace.record(entry, proposal);
    }
}

/// The raft thread's state.
struct RaftLoop {
    raft: RaftNode,
    transport: Transport,
    node: Node,
    tick: Duration,
    election_timeout: Duration,
    waiters: HashMap<u64, oneshot::Sender<Result<Applied>>>,
    /// When this member's waiting proposals passed the raft thread, for the revision trace.
    proposals: HashMap<u64, Proposal>,
    /// Proposals waiting for a leader to be known.
    no_leader: VecDeque<(u64, Vec<u8>)>,
    /// Membership changes waiting for a leader to be known.
    conf_changes: VecDeque<ConfChange>,
    /// The state machine's membership version the transport was last brought in line with.
    membership_version: u64,
    /// When this member, having applied its own removal, stops: a few ticks later, so that a
    /// removed leader's heartbeats tell the others the removal is committed (etcd's
    /// `stopWithDelay`).
    stop_at: Option<Instant>,
    reads_waiting: Vec<oneshot::Sender<Result<()>>>,
    reads_inflight: HashMap<u64, (Instant, Vec<oneshot::Sender<Result<()>>>)>,
    reads_ready: Vec<(u64, Vec<oneshot::Sender<Result<()>>>)>,
    read_ctx: u64,
    revoking: HashMap<i64, Instant>,
    attrs_proposed: Option<Instant>,
}

/// Most inputs taken before a Ready is processed; more wait for the next pass.
const MAX_INPUTS_PER_READY: usize = 10_000;

impl RaftLoop {
    fn new(raft: RaftNode, transport: Transport, node: Node) -> Self {
        let cfg = node.config();
        Self {
            tick: cfg.heartbeat_interval,
            election_timeout: cfg.election_timeout,
            raft,
            transport,
            node,
            waiters: HashMap::new(),
            proposals: HashMap::new(),
            no_leader: VecDeque::new(),
            conf_changes: VecDeque::new(),
            membership_version: 0,
            stop_at: None,
            reads_waiting: Vec::new(),
            reads_inflight: HashMap::new(),
            reads_ready: Vec::new(),
            read_ctx: 0,
            revoking: HashMap::new(),
            attrs_proposed: None,
        }
    }

    fn run(mut self, rx: std_mpsc::Receiver<Input>) {
        let mut next_tick = Instant::now() + self.tick;
        let mut next_housekeeping = Instant::now();
        loop {
            // A Ready left over (one pass can enable another) is handled without waiting.
            let wait = if self.raft.has_ready() { Duration::ZERO } else { next_tick.saturating_duration_since(Instant::now()) };
            match rx.recv_timeout(wait) {
                Ok(Input::Shutdown) => break,
                Ok(Input::Removed) => {
                    self.on_removed();
                    break;
                }
                Ok(input) => {
                    self.handle(input);
                    // Group commit: take everything already queued into this Ready.
                    let mut n = 1;
                    while n < MAX_INPUTS_PER_READY {
                        match rx.try_recv() {
                            Ok(Input::Shutdown) => return self.stop(),
                            Ok(Input::Removed) => {
                                self.on_removed();
                                return self.stop();
                            }
                            Ok(input) => self.handle(input),
                            Err(_) => break,
                        }
                        n += 1;
                    }
                }
                Err(std_mpsc::RecvTimeoutError::Timeout) => {}
                Err(std_mpsc::RecvTimeoutError::Disconnected) => break,
            }
            let now = Instant::now();
            if now >= next_tick {
                self.raft.tick();
                next_tick += self.tick;
                if next_tick < now {
                    next_tick = now + self.tick;
                }
            }
            self.flush_pending();
            let mut sink = Sink { transport: &self.transport, waiters: &mut self.waiters, proposals: &mut self.proposals, trace: &self.node.0.revision_trace };
            let out = match self.raft.on_ready(now, &mut sink) {
                Ok(out) => out,
                // A WAL or engine error here means the disk failed us (full, or an I/O error).
                // A failed fsync cannot be retried (the kernel may have dropped the dirty pages),
                // and carrying on could make this member forget what it acknowledged or diverge
                // from the others.
                Err(e) => panic!("store: the Ready loop cannot continue: {e}"),
            };
            if let Some((leader, role)) = out.leader_change
                && (leader == 0 || role != StateRole::Leader)
            {
                self.revoking.clear();
            }
            for rs in out.read_states {
                let Some(ctx) = read_context_number(self.node.id(), &rs.request_ctx) else { continue };
                if let Some((_, waiters)) = self.reads_inflight.remove(&ctx) {
                    self.reads_ready.push((rs.index, waiters));
                }
            }
            self.complete_reads();
            self.publish_status();
            self.sync_membership();
            if self.stop_at.is_some_and(|at| now >= at) {
                self.on_removed();
                break;
            }
            if now >= next_housekeeping {
                self.housekeeping(now);
                next_housekeeping = now + Duration::from_millis(250);
            }
        }
        self.stop();
    }

    /// Brings the transport in line with the member records when an applied change (or a
    /// snapshot) altered them. A member that applied its own removal stops ten ticks later.
    fn sync_membership(&mut self) {
        let sm = self.node.0.sm.clone();
        let sm = sm.read().expect("state machine lock");
        if sm.membership_version == self.membership_version {
            return;
        }
        self.membership_version = sm.membership_version;
        self.node.0.learner.store(sm.is_learner(self.node.id()), Ordering::Relaxed);
        if sm.removed.contains(&self.node.id()) {
            self.stop_at.get_or_insert(Instant::now() + self.tick * 10);
            return;
        }
        let peers: Vec<Peer> = sm
            .members
            .values()
            .filter(|m| !m.peer_urls.is_empty())
            .map(|m| Peer { name: m.name.clone(), id: m.id, peer_urls: m.peer_urls.clone() })
            .collect();
        // A joining member's records are empty until the leader's snapshot arrives: it keeps
        // the peers the cluster told it about.
        if !peers.is_empty() {
            self.transport.sync(&peers, &sm.removed);
        }
    }

    /// etcd's reaction to its own removal: say so and stop; the process exits with an error.
    fn on_removed(&mut self) {
        tracing::error!(target: "store::membership", member = %format!("{:x}", self.node.id()), "the member has been permanently removed from the cluster");
        self.node.0.removed.store(true, Ordering::Relaxed);
        self.node.0.stopped.send_replace(true);
    }

    fn stop(mut self) {
        if let Err(e) = self.raft.close() {
            tracing::warn!(target: "store::raft", error = %e, "state machine not flushed; it is replayed from the WAL at the next start");
        }
        tracing::info!(target: "store::raft", "raft loop stopped");
        // Waiters are dropped: their clients see "server stopped".
    }

    fn handle(&mut self, input: Input) {
        match input {
            Input::Propose { seq, data, tx } => {
                if let Some(tx) = tx {
                    self.waiters.insert(seq, tx);
                    if podtrace::enabled() {
                        self.proposals.insert(seq, Proposal { received: traceutil::now_nanos(), proposed: None });
                    }
                }
                self.no_leader.push_back((seq, data));
            }
            Input::ProposeConfChange { seq, cc, tx } => {
                self.waiters.insert(seq, tx);
                self.conf_changes.push_back(cc);
            }
            Input::MatchIndexes { id, tx } => {
                let _ = tx.send(self.raft.match_indexes(id));
            }
            Input::Removed => {}
            Input::Read { tx } => self.reads_waiting.push(tx),
            Input::Step(m) => {
                if let Err(e) = self.raft.step(m) {
                    tracing::debug!(target: "store::raft", error = %e, "message not stepped");
                }
            }
            Input::Unreachable(id) => self.raft.report_unreachable(id),
            Input::SnapshotStatus(id, ok) => self.raft.report_snapshot(id, ok),
            Input::Persisted { number, fsync } => self.raft.on_persisted(number, fsync),
            // As etcd's `lg.Fatal` when the WAL cannot save: the process ends. A failed fsync
            // cannot be retried (see `run`), and a member whose raft thread merely stopped would
            // still hold its ports and look alive.
            Input::WalFailed(e) => {
                tracing::error!(target: "store::raft", error = %e, "the WAL writer failed, the member cannot continue; exiting");
                std::process::exit(1);
            }
            // `close` writes the pending batch and flushes the engine; the loop goes on.
            Input::CommitBackend { tx } => {
                let _ = tx.send(self.raft.close());
            }
            Input::Shutdown => {}
        }
    }

    /// Proposes what is queued, once a leader is known, and starts ReadIndex for waiting reads.
    fn flush_pending(&mut self) {
        if self.raft.leader() != 0 {
            while let Some(cc) = self.conf_changes.pop_front() {
                if let Err(e) = self.raft.propose_conf_change(cc.clone()) {
                    tracing::debug!(target: "store::raft", error = %e, "membership change dropped; waiting for a leader");
                    self.conf_changes.push_front(cc);
                    break;
                }
            }
            while let Some((seq, data)) = self.no_leader.pop_front() {
                if let Err(e) = self.raft.propose(data.clone()) {
                    tracing::debug!(target: "store::raft", seq, error = %e, "proposal dropped; waiting for a leader");
                    self.no_leader.push_front((seq, data));
                    break;
                }
                if let Some(p) = self.proposals.get_mut(&seq) {
                    p.proposed = Some(traceutil::now_nanos());
                }
            }
        }
        if !self.reads_waiting.is_empty() {
            self.read_ctx += 1;
            self.raft.read_index(read_context(self.node.id(), self.read_ctx));
            self.reads_inflight.insert(self.read_ctx, (Instant::now(), std::mem::take(&mut self.reads_waiting)));
        }
    }

    fn complete_reads(&mut self) {
        let applied = self.raft.applied_index();
        self.reads_ready.retain_mut(|(index, waiters)| {
            if *index > applied {
                return true;
            }
            for tx in waiters.drain(..) {
                let _ = tx.send(Ok(()));
            }
            false
        });
    }

    fn publish_status(&self) {
        let s = &self.node.0.status;
        s.leader.store(self.raft.leader(), Ordering::Relaxed);
        s.term.store(self.raft.term(), Ordering::Relaxed);
        s.last_index.store(self.raft.last_index(), Ordering::Relaxed);
        s.applied_index.store(self.raft.applied_index(), Ordering::Relaxed);
        s.is_leader.store(u64::from(self.raft.role() == StateRole::Leader), Ordering::Relaxed);
    }

    fn housekeeping(&mut self, now: Instant) {
        // Forget waiters whose clients gave up.
        self.waiters.retain(|_, tx| !tx.is_closed());
        self.proposals.retain(|seq, _| self.waiters.contains_key(seq));
        self.node.0.metrics.proposals_pending.set(self.waiters.len() as i64);
        // ReadIndex requests lost with a leader change are asked again.
        let stale: Vec<u64> = self
            .reads_inflight
            .iter()
            .filter(|(_, (at, _))| now.duration_since(*at) > self.election_timeout)
            .map(|(ctx, _)| *ctx)
            .collect();
        for ctx in stale {
            if let Some((_, waiters)) = self.reads_inflight.get_mut(&ctx) {
                waiters.retain(|tx| !tx.is_closed());
            }
            self.reads_inflight.get_mut(&ctx).expect("present").0 = now;
            self.raft.read_index(read_context(self.node.id(), ctx));
        }
        self.reads_inflight.retain(|_, (_, w)| !w.is_empty());
        // The leader revokes expired leases through the log. It proposes them itself, now, and
        // never queues them: a queued revocation would be forwarded to whoever leads by the
        // time the queue is flushed, so a paused leader waking up after it was replaced would
        // have the new leader revoke leases the new leader had been renewing all along (etcd
        // issue 15247). Proposed here, a stale leader's revocations go to its own log at its
        // old term, where they can never commit.
        if self.raft.role() == StateRole::Leader {
            let expired = self.raft.state_machine().read().expect("state machine lock").lessor.expired(now);
            for id in expired {
                let due = self.revoking.get(&id).is_none_or(|at| now.duration_since(*at) > Duration::from_secs(3));
                if due {
                    self.revoking.insert(id, now);
                    let data = InternalRaftRequest {
                        origin: 0,
                        seq: 0,
                        request: Some(Request::LeaseRevoke(PbLeaseRevokeRequest { id })),
                    }
                    .encode_to_vec();
                    // Refused (a leadership transfer under way): asked again in 3 s if still leader.
                    if let Err(e) = self.raft.propose(data) {
                        tracing::debug!(target: "store::raft", lease = id, error = %e, "lease revocation not proposed");
                    }
                }
            }
            self.revoking.retain(|id, _| self.raft.state_machine().read().expect("state machine lock").lessor.exists(*id));
        }
        // Publish this member's name and client URLs once (etcd's `publish`).
        let cfg = self.node.config();
        let attrs = MemberAttributes { id: self.node.id(), name: cfg.name.clone(), client_urls: cfg.advertise_client_urls.clone() };
        let published = self
            .raft
            .state_machine()
            .read()
            .expect("state machine lock")
            .members
            .get(&attrs.id)
            .is_some_and(|m| m.name == attrs.name && m.client_urls == attrs.client_urls);
        if !published
            && self.raft.leader() != 0
            && self.attrs_proposed.is_none_or(|at| now.duration_since(at) > Duration::from_secs(2))
        {
            self.attrs_proposed = Some(now);
            let data = InternalRaftRequest { origin: 0, seq: 0, request: Some(Request::MemberAttributes(attrs)) }.encode_to_vec();
            self.no_leader.push_back((0, data));
        }
    }
}
