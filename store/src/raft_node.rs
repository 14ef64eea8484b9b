//! The raft node: raft-rs's `RawNode` over our storage and state machine, and the Ready loop.
//!
//! This type does no I/O but the engine's: it takes ticks, messages and proposals, and hands back
//! the messages to send and the results to answer. `server` runs it on a thread against the real
//! transport; the cluster tests run three of them against an in-process network that drops,
//! delays and partitions.
//!
//! # The Ready loop ([`RaftNode::on_ready`]), in order
//! 1. Take the Ready. Its `messages` may go out at once: a leader may send appends to followers
//!    while it writes the same entries itself (raft thesis §10.2.1).
//! 2. If it carries a snapshot (we are a follower far behind), restore the state machine from it
//!    and replace the log with the snapshot's position.
//! 3. Apply `committed_entries` to the state machine. raft-rs only hands out entries that are
//!    both committed and persisted here. Their writes join this Ready's batch.
//! 4. Persist the new `entries` and the `HardState` (with its commit index): one atomic batch,
//!    together with step 2 and 3's writes, then one `flush()`. This is the only fsync of a Ready,
//!    shared by every proposal in it (group commit).
//! 5. Only now send the `persisted_messages` (votes and append responses promise durability),
//!    and hand back the ReadIndex results.
//! 6. `advance` gives a `LightReady`: persist its commit index, send its messages, apply its
//!    committed entries (their log entries are durable already, so no flush is needed before
//!    answering), then `advance_apply`.
//! 7. Compact the log when enough has been applied since the last compaction.
//!
//! Clients are answered by the caller after `on_ready` returns, so always after step 4's flush.

use std::sync::{Arc, RwLock};
use std::time::Instant;

use protobuf::Message as _;
use slog::KV as _;
use raft::eraftpb::{ConfChange, ConfChangeV2, Entry, EntryType, Message};
use raft::{RawNode, ReadState, StateRole};

use crate::apply::{Applied, StateMachine};
use crate::engine::{Engine, WriteBatch};
use crate::error::{Error, Result};
use crate::metrics::Metrics;
use crate::raft_storage::{PeerStorage, SnapshotSource};

/// What one pass of the Ready loop produced.
#[derive(Default)]
pub struct ReadyOutput {
    /// Messages to send to peers, in order.
    pub messages: Vec<Message>,
    /// Results for this member's own proposals, by sequence number.
    pub applied: Vec<(u64, Result<Applied>)>,
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
        }
    }
}

struct StateMachineSnapshots(Arc<RwLock<StateMachine>>);

impl SnapshotSource for StateMachineSnapshots {
    fn snapshot_data(&self) -> (u64, Vec<u8>) {
        let sm = self.0.read().expect("state machine lock");
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
}

impl RaftNode {
    /// Opens the node over an engine. `voters` bootstraps a new cluster when the engine is empty;
    /// pass an empty list to join one whose leader will send a snapshot.
    pub fn open(
        id: u64,
        voters: Vec<u64>,
        engine: Arc<dyn Engine>,
        sm: Arc<RwLock<StateMachine>>,
        opts: RaftOptions,
        metrics: Arc<Metrics>,
        logger: &slog::Logger,
    ) -> Result<Self> {
        let mut storage = PeerStorage::load(engine.clone(), Arc::new(StateMachineSnapshots(sm.clone())))?;
        if !storage.is_initialized() && !voters.is_empty() {
            let mut b = WriteBatch::default();
            storage.bootstrap(voters, &mut b);
            engine.write(b)?;
            engine.flush()?;
        }
        let applied = sm.read().expect("state machine lock").applied_index;
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
        Ok(Self { id, raw, sm, engine, opts, metrics, leader: 0, role: StateRole::Follower })
    }

    pub fn tick(&mut self) -> bool {
        self.raw.tick()
    }

    pub fn step(&mut self, m: Message) -> Result<()> {
        Ok(self.raw.step(m)?)
    }

    /// Proposes an encoded request. Fails with `ProposalDropped` while there is no leader.
    pub fn propose(&mut self, data: Vec<u8>) -> Result<()> {
        Ok(self.raw.propose(vec![], data)?)
    }

    /// Asks for a ReadIndex; the answer comes back in a later `ReadyOutput::read_states`.
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

    /// One pass of the Ready loop (see the module docs for the steps).
    pub fn on_ready(&mut self, now: Instant) -> Result<ReadyOutput> {
        let mut out = ReadyOutput::default();
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

        // Step 1: messages that need no local persistence.
        out.messages.extend(rd.take_messages());
        let mut batch = WriteBatch::default();

        // Step 2: a snapshot from the leader replaces the state machine and the log.
        if !rd.snapshot().is_empty() {
            let snap = rd.snapshot().clone();
            let meta = snap.get_metadata();
            tracing::info!(target: "store::raft", index = meta.index, term = meta.term, "applying snapshot from leader");
            self.sm.write().expect("state machine lock").restore(&snap.data, meta.index, &mut batch)?;
            self.raw.mut_store().apply_snapshot(meta, &mut batch);
            self.metrics.snapshots_applied.inc();
        }

        // Step 3: apply committed entries.
        self.apply(rd.take_committed_entries(), now, &mut batch, &mut out)?;

        // Step 4: persist entries and HardState with everything above, atomically, then fsync.
        self.raw.mut_store().append(rd.entries(), &mut batch)?;
        if let Some(hs) = rd.hs() {
            self.raw.mut_store().set_hard_state(hs, &mut batch);
        }
        // Only new entries, a new term or vote, and a snapshot must be durable before anything
        // else happens; a commit index alone may be lost and is learned again from the leader.
        let must_sync = rd.must_sync() || !rd.snapshot().is_empty();
        self.engine.write(batch)?;
        if must_sync {
            let t = Instant::now();
            self.engine.flush()?;
            self.metrics.fsync_duration.observe(t.elapsed().as_secs_f64());
        }

        // Step 5: what may only leave after persistence.
        out.messages.extend(rd.take_persisted_messages());
        out.read_states.extend(rd.take_read_states());

        // Step 6: the LightReady.
        let mut light = self.raw.advance(rd);
        let mut batch = WriteBatch::default();
        if let Some(commit) = light.commit_index() {
            self.raw.mut_store().set_commit(commit, &mut batch);
        }
        out.messages.extend(light.take_messages());
        self.apply(light.take_committed_entries(), now, &mut batch, &mut out)?;
        if !batch.is_empty() {
            self.engine.write(batch)?;
        }
        self.raw.advance_apply();

        // Step 7: log compaction.
        self.maybe_compact_log()?;

        self.metrics.term.set(self.term() as i64);
        self.metrics.proposals_committed.set(self.commit_index() as i64);
        self.metrics.proposals_applied.set(self.applied_index() as i64);
        Ok(out)
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

    fn apply(&mut self, entries: Vec<Entry>, now: Instant, batch: &mut WriteBatch, out: &mut ReadyOutput) -> Result<()> {
        if entries.is_empty() {
            return Ok(());
        }
        let t = Instant::now();
        let mut sm = self.sm.write().expect("state machine lock");
        for e in entries {
            match e.get_entry_type() {
                EntryType::EntryNormal => {
                    if let Some((origin, seq, result)) = sm.apply_entry(e.index, &e.data, now, batch)
                        && origin == self.id
                    {
                        out.applied.push((seq, result));
                    }
                }
                EntryType::EntryConfChange | EntryType::EntryConfChangeV2 => {
                    // Membership is fixed at bootstrap today; a conf change is still applied
                    // correctly if one ever arrives, so that the log stays replayable.
                    let cs = if e.get_entry_type() == EntryType::EntryConfChange {
                        let cc = ConfChange::parse_from_bytes(&e.data)
                            .map_err(|err| Error::Corrupt { what: "conf change", detail: err.to_string() })?;
                        self.raw.apply_conf_change(&cc)?
                    } else {
                        let cc = ConfChangeV2::parse_from_bytes(&e.data)
                            .map_err(|err| Error::Corrupt { what: "conf change", detail: err.to_string() })?;
                        self.raw.apply_conf_change(&cc)?
                    };
                    self.raw.mut_store().set_conf_state(cs, batch);
                    sm.apply_entry(e.index, &[], now, batch);
                }
            }
        }
        self.metrics.apply_duration.observe(t.elapsed().as_secs_f64());
        Ok(())
    }

    fn maybe_compact_log(&mut self) -> Result<()> {
        let applied = self.applied_index();
        let keep = self.opts.catchup_entries.min(self.opts.snapshot_count / 2);
        let truncated = self.raw.store().truncated_index();
        if applied.saturating_sub(truncated) < self.opts.snapshot_count + keep {
            return Ok(());
        }
        let to = applied - keep;
        let mut batch = WriteBatch::default();
        self.raw.mut_store().compact(to, &mut batch)?;
        self.engine.write(batch)?;
        tracing::info!(target: "store::raft", compacted_to = to, applied, "compacted the raft log");
        Ok(())
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
