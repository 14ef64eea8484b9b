//! The raft node: raft-rs's `RawNode` over our storage and state machine, and the Ready loop.
//!
//! This type does no I/O but the storage's: it takes ticks, messages and proposals, and hands the
//! messages to send and the results to answer to a [`ReadySink`] as soon as they may leave.
//! `server` runs it on a thread against the real transport; the cluster tests run three of them
//! against an in-process network that drops, delays and partitions.
//!
//! # The Ready loop ([`RaftNode::on_ready`]), in order
//! raft-rs's asynchronous flavour of the loop (`advance_append_async` + `on_persist_ready`, as
//! TiKV uses it): a Ready is handed to the WAL and the loop goes on at once; the WAL reports
//! later that it is written, and only then does raft count its entries as persisted.
//! 1. Take the Ready. Its `messages` go out at once: a leader sends appends to followers before it
//!    writes the same entries itself, so that its fsync and theirs overlap (raft thesis §10.2.1).
//!    So do the proposals and ReadIndex requests a follower forwards to the leader.
//! 2. If it carries a snapshot (we are a follower far behind), restore the state machine from it
//!    and replace the log with the snapshot's position: the restored state machine and a
//!    snapshot marker are made durable in sled here (sled flush + `fdatasync`); the WAL's rewrite
//!    to the snapshot's position is staged for step 4 (`fsync`, rename, directory `fsync`).
//! 3. Apply `committed_entries` to the state machine and answer their clients. raft-rs only hands
//!    out entries that are both committed and persisted here, so nothing waits for this Ready's
//!    own fsync, which is about newer entries (etcd applies in a goroutine of its own for the
//!    same reason). Their sled writes join the pending backend batch (step 6).
//! 4. Stage the `HardState` (with its commit index) and the new `entries` — in memory at once,
//!    where raft reads them back, and as WAL records — and hand them to the WAL as one job: one
//!    `write`, then one `fdatasync` if raft says the Ready must be durable (new entries, a new
//!    term or vote, a snapshot). A commit index alone is written but not synced: it is learned
//!    again from the leader after a crash. `advance_append_async` tells raft the Ready is handled.
//! 5. The `persisted_messages` (a follower's append responses and votes promise durability) go
//!    with the job, and leave once it is written. The server runs jobs on the WAL writer's
//!    thread ([`crate::wal::WalWriter`]): it sends them itself and reports back, and
//!    [`RaftNode::on_persisted`] tells raft (`on_persist_ready`), which then commits and hands
//!    out the entries in a later Ready. Jobs that queue during one `fdatasync` share the next
//!    (group commit across Readies). Tests run jobs inline, before `on_ready` returns.
//! 6. The state machine's sled writes wait in the pending backend batch, written with one atomic
//!    `apply_batch` and no sync every `backend_batch_interval` (1 s) or `backend_batch_limit`
//!    keys, as etcd commits its bbolt backend (every 100 ms): sled's `apply_batch` costs two log
//!    buffer writes and a wake-up of its whole I/O thread pool, too much to pay per Ready, and
//!    even ten times a second it showed in a single client's p99 (BENCHMARKS.md). A batch of
//!    1,000 keys or more goes once 50 ms pass without a new write (`backend_lull`), so that
//!    what a burst leaves is written in the pause after it. The server's engine applies
//!    the batch on a thread of its own ([`crate::engine::BackgroundWrites`]), so the loop hands
//!    it over and goes on. After a crash, raft replays from the WAL what sled lost. Raft learns
//!    how far the state machine has applied.
//! 7. Compact the log when enough has been applied since the last compaction: the pending batch
//!    is written and sled flushed durably first (its applied index must not fall below the WAL's
//!    first index), then the WAL's rewrite without the compacted entries is queued.
//!
//! A client is answered only once its entry is committed and applied, so after a quorum,
//! this member included, made it durable.

use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use protobuf::Message as _;
use slog::KV as _;
use prost::Message as _;
use raft::eraftpb::{ConfChange, ConfChangeType, ConfChangeV2, Entry, EntryType, Message, MessageType};
use raft::{RawNode, ReadState, StateRole};

use crate::apply::{Applied, StateMachine};
use crate::engine::{Engine, WriteBatch};
use crate::error::{Error, Result};
use crate::membership::{ChangeKind, ConfChangeContext, Member};
use crate::metrics::Metrics;
use crate::raft_storage::{PeerStorage, SnapshotSource};
use crate::traceutil;
use crate::wal::Written;

/// Where a pass of the Ready loop delivers what may leave before the pass ends: the raft thread
/// (to the transport and the waiting clients) or a test's fake network.
pub trait ReadySink {
    /// Messages to peers, in order.
    fn send(&mut self, msgs: Vec<Message>);
    /// The result of one of this member's own proposals, by its sequence number.
    fn applied(&mut self, seq: u64, result: Result<Applied>);
    /// An entry that made a new revision was applied, with its times ([`crate::traceutil`]).
    fn traced(&mut self, _entry: crate::traceutil::Applied) {}
}

/// What one pass of the Ready loop produced, besides what it gave its [`ReadySink`].
#[derive(Default)]
pub struct ReadyOutput {
    pub read_states: Vec<ReadState>,
    /// Set when the leader changed: (new leader id or 0, our role).
    pub leader_change: Option<(u64, StateRole)>,
}

/// Tuning of the raft node; `Default` gives etcd's defaults in ticks of 100 ms.
#[derive(Clone, Debug)]
pub struct RaftOptions {
    pub election_tick: usize,
    pub heartbeat_tick: usize,
    /// Applied entries between log compactions (etcd's `--snapshot-count`).
    pub snapshot_count: u64,
    /// Entries kept behind a compaction for slow followers (etcd's `SnapshotCatchUpEntries`).
    pub catchup_entries: u64,
    pub max_size_per_msg: u64,
    pub max_inflight_msgs: usize,
    /// Longest the state machine's engine writes wait in memory before they are written to the
    /// engine in one batch (etcd's backend `batchInterval`, 100 ms there; see step 6 of the
    /// module docs for why ours is longer). Zero writes every Ready's.
    pub backend_batch_interval: Duration,
    /// Most keys that wait so (etcd's backend `batchLimit`, 10,000 there; ours is half that). What
    /// a burst of writes leaves behind is written in the quiet after it, during the writes that
    /// follow: the smaller the leftover, the less it delays them, while much smaller batches cost
    /// throughput under load. BENCHMARKS.md (store, "engine batches of at most 5,000 keys") has
    /// the figures for 1,000, 5,000 and 10,000.
    pub backend_batch_limit: usize,
    /// A pending batch of at least `backend_lull_keys` is written once no write has joined it
    /// for this long (at the Ready loop's next pass: within a tick), without waiting for the
    /// interval: after a burst, the leftover is written in the first pause of the writes rather
    /// than in the middle of the next ones.
    pub backend_lull: Duration,
    /// The fewest keys a batch needs to be written on a pause (smaller ones wait for the
    /// interval, so that a trickle of writes still shares batches).
    pub backend_lull_keys: usize,
}

impl Default for RaftOptions {
    fn default() -> Self {
        Self {
            election_tick: 10,
            heartbeat_tick: 1,
            snapshot_count: 100_000,
            catchup_entries: 5_000,
            max_size_per_msg: 1 << 20,
            max_inflight_msgs: 256,
            backend_batch_interval: Duration::from_secs(1),
            backend_batch_limit: 5_000,
            backend_lull: Duration::from_millis(50),
            backend_lull_keys: 1_000,
        }
    }
}

/// A leader's snapshots come from its state machine as it is (`Arc<RwLock<StateMachine>>` is
/// what [`PeerStorage::open`] takes as the source).
impl SnapshotSource for RwLock<StateMachine> {
    fn snapshot_data(&self) -> (u64, Vec<u8>) {
        let sm = self.read().expect("state machine lock");
        (sm.applied_index, sm.snapshot_data())
    }
}

pub struct RaftNode {
    pub id: u64,
    raw: RawNode<PeerStorage>,
    sm: Arc<RwLock<StateMachine>>,
    engine: Arc<dyn Engine>,
    opts: RaftOptions,
    metrics: Arc<Metrics>,
    leader: u64,
    role: StateRole,
    /// State machine writes not yet written to the engine, and since when they wait.
    backend: WriteBatch,
    backend_since: Option<Instant>,
    /// When a write last joined the pending batch.
    backend_grew: Instant,
    /// The last Ready handed to the WAL, and the last one it reported written.
    submitted: u64,
    persisted: u64,
    /// A member was added in this pass: the log is compacted to what is applied, so the new
    /// member is sent a snapshot (it must never replay the log from index 1, which does not
    /// hold the founding configuration).
    member_added: bool,
}

impl RaftNode {
    /// Opens the node over its storage (the WAL replayed, see [`PeerStorage::open`]) and its
    /// state machine. `voters` bootstraps a new cluster when the storage is empty; pass an empty
    /// list to join one whose leader will send a snapshot.
    pub fn open(
        id: u64,
        voters: Vec<u64>,
        mut storage: PeerStorage,
        sm: Arc<RwLock<StateMachine>>,
        opts: RaftOptions,
        metrics: Arc<Metrics>,
        logger: &slog::Logger,
    ) -> Result<Self> {
        if !storage.is_initialized() && !voters.is_empty() {
            storage.bootstrap(voters)?;
        }
        // raft starts from the state machine's durable applied index and re-delivers the
        // committed entries after it.
        let applied = sm.read().expect("state machine lock").applied_index;
        storage.restore_commit(applied)?;
        let engine = storage.engine().clone();
        let cfg = raft::Config {
            id,
            election_tick: opts.election_tick,
            heartbeat_tick: opts.heartbeat_tick,
            applied,
            max_size_per_msg: opts.max_size_per_msg,
            max_inflight_msgs: opts.max_inflight_msgs,
            check_quorum: true,
            pre_vote: true,
            max_committed_size_per_ready: 16 << 20,
            ..Default::default()
        };
        let raw = RawNode::new(&cfg, storage, logger)?;
        Ok(Self {
            id,
            raw,
            sm,
            engine,
            opts,
            metrics,
            leader: 0,
            role: StateRole::Follower,
            backend: WriteBatch::default(),
            backend_since: None,
            backend_grew: Instant::now(),
            submitted: 0,
            persisted: 0,
            member_added: false,
        })
    }

    /// Whether raft has something for the Ready loop.
    pub fn has_ready(&self) -> bool {
        self.raw.has_ready()
    }

    pub fn tick(&mut self) -> bool {
        self.raw.tick()
    }

    pub fn step(&mut self, m: Message) -> Result<()> {
        Ok(self.raw.step(m)?)
    }

    /// Proposes a membership change (its context is a [`ConfChangeContext`]). Fails with
    /// `ProposalDropped` while there is no leader or another change is pending.
    pub fn propose_conf_change(&mut self, cc: ConfChange) -> Result<()> {
        Ok(self.raw.propose_conf_change(vec![], cc)?)
    }

    /// On the leader, the match indexes of `id` and of the leader itself (raft's progress), for
    /// etcd's check that a learner is in sync before it is promoted.
    pub fn match_indexes(&self, id: u64) -> Option<(u64, u64)> {
        if self.role != StateRole::Leader {
            return None;
        }
        let prs = self.raw.raft.prs();
        Some((prs.get(id)?.matched, prs.get(self.id)?.matched))
    }

    /// Proposes an encoded request. Fails with `ProposalDropped` while there is no leader.
    pub fn propose(&mut self, data: Vec<u8>) -> Result<()> {
        Ok(self.raw.propose(vec![], data)?)
    }

    /// Asks for a ReadIndex; the answer comes back in a later `ReadyOutput::read_states`.
    /// `ctx` names the request: make it with `read_context`.
    pub fn read_index(&mut self, ctx: Vec<u8>) {
        self.raw.read_index(ctx)
    }

    pub fn campaign(&mut self) -> Result<()> {
        Ok(self.raw.campaign()?)
    }

    pub fn report_unreachable(&mut self, id: u64) {
        self.raw.report_unreachable(id)
    }

    pub fn report_snapshot(&mut self, id: u64, ok: bool) {
        let status = if ok { raft::SnapshotStatus::Finish } else { raft::SnapshotStatus::Failure };
        self.raw.report_snapshot(id, status)
    }

    pub fn leader(&self) -> u64 {
        self.leader
    }

    pub fn role(&self) -> StateRole {
        self.role
    }

    pub fn term(&self) -> u64 {
        self.raw.raft.term
    }

    pub fn commit_index(&self) -> u64 {
        self.raw.raft.raft_log.committed
    }

    pub fn last_index(&self) -> u64 {
        self.raw.raft.raft_log.last_index()
    }

    pub fn applied_index(&self) -> u64 {
        self.raw.raft.raft_log.applied
    }

    pub fn first_index(&self) -> u64 {
        self.raw.store().truncated_index() + 1
    }

    pub fn voters(&self) -> Vec<u64> {
        self.raw.store().conf_state().voters.clone()
    }

    pub fn state_machine(&self) -> &Arc<RwLock<StateMachine>> {
        &self.sm
    }

    /// One pass of the Ready loop (see the module docs for the steps). Messages and results go
    /// to `sink` as soon as they may leave.
    pub fn on_ready(&mut self, now: Instant, sink: &mut dyn ReadySink) -> Result<ReadyOutput> {
        let mut out = ReadyOutput::default();
        self.commit_backend(now, false)?;
        if !self.raw.has_ready() {
            return Ok(out);
        }
        let mut rd = self.raw.ready();
        if let Some(ss) = rd.ss() {
            if ss.leader_id != self.leader || ss.raft_state != self.role {
                if ss.leader_id != self.leader {
                    self.metrics.leader_changes.inc();
                }
                self.leader = ss.leader_id;
                self.role = ss.raft_state;
                out.leader_change = Some((ss.leader_id, ss.raft_state));
                self.on_leader_change(now);
            }
        }

        // Step 1: messages that need no local persistence: a leader's, and the requests a
        // follower forwards to the leader.
        let msgs = rd.take_messages();
        if self.role == StateRole::Leader && !msgs.is_empty() {
            failpoint!("raftBeforeLeaderSend");
        }
        send_now(sink, msgs);
        let (forwarded, persisted): (Vec<Message>, Vec<Message>) =
            rd.take_persisted_messages().into_iter().partition(is_forwarded_request);
        send_now(sink, forwarded);

        // Step 2: a snapshot from the leader replaces the state machine (made durable in sled
        // here) and the log (the WAL's rewrite is staged for step 4).
        if !rd.snapshot().is_empty() {
            // Restoring reads the engine to find what to delete: it must hold every write.
            self.commit_backend(now, true)?;
            let snap = rd.snapshot().clone();
            let meta = snap.get_metadata();
            tracing::info!(target: "store::raft", index = meta.index, term = meta.term, "applying snapshot from leader");
            // etcd's snapshot failpoints, in our order: the state machine is restored first,
            // because the durable write is what the restore produces.
            failpoint!("raftBeforeApplySnap");
            let mut restored = WriteBatch::default();
            self.sm.write().expect("state machine lock").restore(&snap.data, meta.index, &mut restored)?;
            failpoint!("raftAfterApplySnap");
            failpoint!("raftBeforeSaveSnap");
            self.raw.mut_store().apply_snapshot(meta, restored)?;
            // A crash here leaves the snapshot in sled but not in the WAL: `PeerStorage::open`
            // finishes the install.
            failpoint!("raftAfterSaveSnap");
            self.metrics.snapshots_applied.inc();
        }

        // Step 3: apply committed entries and answer their clients; their sled writes join the
        // pending batch.
        let mut batch = std::mem::take(&mut self.backend);
        let pending = batch.len();
        self.apply(rd.take_committed_entries(), now, &mut batch, sink)?;
        if batch.len() != pending {
            self.backend_grew = now;
        }
        if !batch.is_empty() && self.backend_since.is_none() {
            self.backend_since = Some(now);
        }
        self.backend = batch;
        out.read_states = rd.take_read_states();

        // Step 4: the HardState, then the entries, to the WAL as one job: one write, and one
        // fdatasync when raft says the Ready must be durable (new entries, a new term or vote, a
        // snapshot); a commit index alone may be lost and is learned again from the leader. The
        // entries are in memory now, which is all raft needs to go on (`advance_append_async`).
        if let Some(hs) = rd.hs() {
            self.raw.mut_store().set_hard_state(hs);
        }
        self.raw.mut_store().append(rd.entries())?;
        let (number, must_sync) = (rd.number(), rd.must_sync());
        self.raw.advance_append_async(rd);
        self.submitted = number;
        // Step 5: the messages that wait for the job go with it.
        if let Some(written) = self.raw.mut_store().persist(Some(number), must_sync, persisted)? {
            send_now(sink, written.messages);
            self.on_persisted(written.number, written.fsync);
        }

        // Step 6: the state machine's writes to sled, and raft learns what was applied.
        self.commit_backend(now, false)?;
        self.advance_applied();

        // Step 7: log compaction.
        self.maybe_compact_log()?;

        self.metrics.term.set(self.term() as i64);
        self.metrics.proposals_committed.set(self.commit_index() as i64);
        self.metrics.proposals_applied.set(self.applied_index() as i64);
        Ok(out)
    }

    /// The WAL wrote (and synced, if asked) everything up to Ready `number`: raft may count
    /// those entries as persisted, and apply them once committed. The WAL writer's thread
    /// reports here through the server's input channel; without it, `on_ready` calls it.
    pub fn on_persisted(&mut self, number: Option<u64>, fsync: Option<Duration>) {
        if let Some(d) = fsync {
            self.metrics.fsync_duration.observe(d.as_secs_f64());
        }
        if let Some(n) = number {
            self.raw.on_persist_ready(n);
            self.persisted = self.persisted.max(n);
            // INJECTED BUG, for the robustness tests only (`failpoints` feature, set with
            // `bugEarlyAck=return`): a leader commits every entry its own WAL holds, without
            // waiting for a quorum, so it applies them and answers their clients early. A leader
            // cut off from the majority acknowledges writes the new leader's log later replaces.
            if self.role == StateRole::Leader && injected_bug!("bugEarlyAck") {
                let persisted = self.raw.raft.raft_log.persisted;
                self.raw.raft.raft_log.commit_to(persisted);
            }
        }
        self.advance_applied();
    }

    /// Whether a Ready handed to the WAL writer is not written yet.
    pub fn persisting(&self) -> bool {
        self.submitted > self.persisted
    }

    /// Tells raft how far the state machine has applied. Entries are applied only once
    /// persisted, but a leader's snapshot is restored into the state machine (step 2) before its
    /// WAL rewrite is written: raft hears of it once it is.
    fn advance_applied(&mut self) {
        let applied = self.sm.read().expect("state machine lock").applied_index;
        let log = &self.raw.raft.raft_log;
        if applied > log.applied && applied <= log.persisted {
            self.raw.advance_apply_to(applied);
        }
    }

    /// Writes the pending state machine writes to the engine in one atomic batch (not synced)
    /// when they have waited long enough, are many enough, are many and the writes paused, or
    /// `force`. The batch carries the applied index with the writes, so the engine is always at
    /// one applied index.
    fn commit_backend(&mut self, now: Instant, force: bool) -> Result<()> {
        let Some(since) = self.backend_since else { return Ok(()) };
        if force || batch_due(&self.opts, self.backend.len(), since, self.backend_grew, now) {
            // etcd's failpoints around its backend's batch commit. `afterCommit` fires once the
            // batch is handed to the engine's writer thread, not once sled has applied it.
            failpoint!("beforeCommit");
            self.engine.write(std::mem::take(&mut self.backend))?;
            failpoint!("afterCommit");
            self.backend_since = None;
        }
        Ok(())
    }

    /// Moves the WAL to a thread of its own (see [`crate::wal::WalWriter`]): `done` is called
    /// there after each write, and must send the messages it carries and report back through
    /// [`RaftNode::on_persisted`].
    pub fn persist_in_background(&mut self, done: impl FnMut(Result<Written>) + Send + 'static) -> Result<()> {
        self.raw.mut_store().start_writer(done)
    }

    /// Writes what the state machine holds in memory to the engine and flushes it, so that a
    /// clean stop leaves nothing to replay from the WAL.
    pub fn close(&mut self) -> Result<()> {
        self.commit_backend(Instant::now(), true)?;
        self.engine.flush()?;
        Ok(())
    }

    fn on_leader_change(&mut self, now: Instant) {
        self.metrics.has_leader.set(i64::from(self.leader != 0));
        self.metrics.is_leader.set(i64::from(self.role == StateRole::Leader));
        let mut sm = self.sm.write().expect("state machine lock");
        if self.role == StateRole::Leader {
            sm.lessor.promote(now);
        } else {
            sm.lessor.demote();
        }
        tracing::info!(target: "store::raft", member = %format!("{:x}", self.id), leader = %format!("{:x}", self.leader), role = ?self.role, term = self.term(), "leader changed");
    }

    /// Applies committed entries and hands this member's results to `sink`.
    fn apply(&mut self, entries: Vec<Entry>, now: Instant, batch: &mut WriteBatch, sink: &mut dyn ReadySink) -> Result<()> {
        if entries.is_empty() {
            return Ok(());
        }
        let t = Instant::now();
        let tracing = podtrace::enabled();
        let committed = if tracing { traceutil::now_nanos() } else { 0 };
        let mut results = Vec::new();
        let mut traced = Vec::new();
        let mut sm = self.sm.write().expect("state machine lock");
        for e in entries {
            match e.get_entry_type() {
                EntryType::EntryNormal => {
                    let (before, apply_start) = if tracing { (sm.kv.current_revision(), traceutil::now_nanos()) } else { (0, 0) };
                    let Some((origin, seq, result)) = sm.apply_entry(e.index, &e.data, now, batch) else { continue };
                    let revision = sm.kv.current_revision();
                    if tracing && revision > before {
                        traced.push(traceutil::Applied {
                            index: e.index,
                            revision,
                            origin,
                            seq,
                            key: String::from_utf8_lossy(&sm.last_key).into_owned(),
                            committed,
                            apply_start,
                            apply_end: traceutil::now_nanos(),
                        });
                    }
                    if origin == self.id {
                        results.push((seq, result));
                    }
                }
                EntryType::EntryConfChange => {
                    // A membership change (etcd's `applyConfChange`): the member records first,
                    // checked as every member checks them; raft's configuration only if they
                    // took it, so the two never disagree.
                    let cc = ConfChange::parse_from_bytes(&e.data)
                        .map_err(|err| Error::Corrupt { what: "conf change", detail: err.to_string() })?;
                    let ctx = ConfChangeContext::decode(cc.get_context()).unwrap_or_default();
                    let member = ctx.member.clone().unwrap_or_else(|| Member { id: cc.node_id, ..Default::default() });
                    let kind = match cc.get_change_type() {
                        ConfChangeType::AddNode if sm.is_learner(cc.node_id) => ChangeKind::Promote,
                        ConfChangeType::AddNode | ConfChangeType::AddLearnerNode => ChangeKind::Add,
                        ConfChangeType::RemoveNode => ChangeKind::Remove,
                    };
                    let result = sm.apply_member_change(kind, &member, batch);
                    if result.is_ok() {
                        let cs = self.raw.apply_conf_change(&cc)?;
                        self.raw.mut_store().set_conf_state(cs);
                        if kind == ChangeKind::Add {
                            self.member_added = true;
                        }
                    }
                    sm.apply_entry(e.index, &[], now, batch);
                    if ctx.origin == self.id && ctx.seq != 0 {
                        results.push((ctx.seq, result.map(|()| Applied::Membership)));
                    }
                }
                EntryType::EntryConfChangeV2 => {
                    // Never proposed by this store; applied to raft alone if one ever arrives,
                    // so that the log stays replayable.
                    let cc = ConfChangeV2::parse_from_bytes(&e.data)
                        .map_err(|err| Error::Corrupt { what: "conf change", detail: err.to_string() })?;
                    let cs = self.raw.apply_conf_change(&cc)?;
                    self.raw.mut_store().set_conf_state(cs);
                    sm.apply_entry(e.index, &[], now, batch);
                }
            }
        }
        drop(sm);
        self.metrics.apply_duration.observe(t.elapsed().as_secs_f64());
        for entry in traced {
            sink.traced(entry);
        }
        for (seq, result) in results {
            sink.applied(seq, result);
        }
        Ok(())
    }

    fn maybe_compact_log(&mut self) -> Result<()> {
        let applied = self.applied_index();
        if std::mem::take(&mut self.member_added) && applied > self.raw.store().truncated_index() {
            self.commit_backend(Instant::now(), true)?;
            self.raw.mut_store().compact(applied)?;
            tracing::info!(target: "store::raft", compacted_to = applied, "compacted the raft log for a new member, which is sent a snapshot");
            return Ok(());
        }
        let keep = self.opts.catchup_entries.min(self.opts.snapshot_count / 2);
        let truncated = self.raw.store().truncated_index();
        if applied.saturating_sub(truncated) < self.opts.snapshot_count + keep {
            return Ok(());
        }
        let to = applied - keep;
        // The engine must hold everything applied before it is flushed and the WAL forgets.
        self.commit_backend(Instant::now(), true)?;
        self.raw.mut_store().compact(to)?;
        tracing::info!(target: "store::raft", compacted_to = to, applied, "compacted the raft log");
        Ok(())
    }
}

/// The context of `member`'s ReadIndex request number `number`: the member's ID, then the
/// number. The leader keeps one pending read per context and silently ignores a second with the
/// same bytes, so contexts must be unique across the members that forward reads to it (etcd
/// makes its request IDs from the member ID the same way). Numbers alone collide: two members'
/// reads numbered alike, and the second is answered only when retried.
pub fn read_context(member: u64, number: u64) -> Vec<u8> {
    let mut ctx = member.to_be_bytes().to_vec();
    ctx.extend_from_slice(&number.to_be_bytes());
    ctx
}

/// The number in `member`'s ReadIndex context `ctx` (None for another member's).
pub fn read_context_number(member: u64, ctx: &[u8]) -> Option<u64> {
    let (id, number) = ctx.split_at_checked(8)?;
    if id != member.to_be_bytes() {
        return None;
    }
    Some(u64::from_be_bytes(number.try_into().ok()?))
}

/// A proposal or a ReadIndex request a follower forwards to the leader. raft-rs puts a
/// follower's every message among those to send after persistence, but these promise nothing
/// about the follower's log or vote: sending them at once saves the leader a wait of one fsync of
/// the follower's (etcd waits; ours need not).
fn is_forwarded_request(m: &Message) -> bool {
    matches!(m.get_msg_type(), MessageType::MsgPropose | MessageType::MsgReadIndex)
}

fn send_now(sink: &mut dyn ReadySink, msgs: Vec<Message>) {
    if !msgs.is_empty() {
        sink.send(msgs);
    }
}

/// A slog drain that forwards raft-rs's logs to `tracing` under the `store::raft` target.
pub struct TracingDrain;

impl slog::Drain for TracingDrain {
    type Ok = ();
    type Err = slog::Never;

    fn log(&self, record: &slog::Record, values: &slog::OwnedKVList) -> Result<(), slog::Never> {
        struct Fields(String);
        impl slog::Serializer for Fields {
            fn emit_arguments(&mut self, key: slog::Key, val: &std::fmt::Arguments) -> slog::Result {
                use std::fmt::Write;
                let _ = write!(self.0, " {key}={val}");
                Ok(())
            }
        }
        let mut f = Fields(String::new());
        let _ = record.kv().serialize(record, &mut f);
        let _ = slog::KV::serialize(values, record, &mut f);
        let msg = record.msg();
        match record.level() {
            slog::Level::Critical | slog::Level::Error => tracing::error!(target: "store::raft", fields = %f.0, "{msg}"),
            slog::Level::Warning => tracing::warn!(target: "store::raft", fields = %f.0, "{msg}"),
            slog::Level::Info => tracing::info!(target: "store::raft", fields = %f.0, "{msg}"),
            _ => tracing::debug!(target: "store::raft", fields = %f.0, "{msg}"),
        }
        Ok(())
    }
}

pub fn logger() -> slog::Logger {
    slog::Logger::root(slog::Fuse(TracingDrain), slog::o!())
}

/// Whether a pending engine batch of `keys` keys, pending since `since`, last grown at `grew`,
/// is to be written at `now` (see [`RaftOptions::backend_batch_interval`] and the two after it).
fn batch_due(opts: &RaftOptions, keys: usize, since: Instant, grew: Instant, now: Instant) -> bool {
    keys >= opts.backend_batch_limit
        || now.saturating_duration_since(since) >= opts.backend_batch_interval
        || (keys >= opts.backend_lull_keys && now.saturating_duration_since(grew) >= opts.backend_lull)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_is_written_when_old_enough_big_enough_or_big_and_the_writes_paused() {
        let o = RaftOptions::default();
        let t0 = Instant::now();
        let ms = |n: u64| t0 + Duration::from_millis(n);
        assert!(!batch_due(&o, 10, t0, ms(990), ms(999)), "small and young: waits");
        assert!(batch_due(&o, 10, t0, ms(990), ms(1000)), "the interval");
        assert!(batch_due(&o, o.backend_batch_limit, t0, ms(10), ms(10)), "the limit");
        let big = o.backend_lull_keys;
        assert!(!batch_due(&o, big, t0, ms(100), ms(149)), "big, but writes still coming");
        assert!(batch_due(&o, big, t0, ms(100), ms(150)), "big, and the writes paused");
        assert!(!batch_due(&o, big - 1, t0, ms(100), ms(500)), "a pause alone does not write a small batch");
    }
}
