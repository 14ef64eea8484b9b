//! Mirrors etcd's raft `MemoryStorage` and the WAL it is rebuilt from (and TiKV's
//! `peer_storage.rs`): the raft log as raft-rs reads it, held in memory since the last compaction
//! and made durable in the [`Wal`].
//!
//! raft-rs calls the `Storage` methods from inside `RawNode`; the Ready loop (`raft_node`) calls
//! the mutating methods, which change the in-memory view at once (raft-rs reads a Ready's entries
//! back from `Storage` before they are durable) and stage the matching WAL records.
//! [`PeerStorage::persist`] hands what is staged to the WAL as one job — one `write`, and one
//! `fdatasync` when asked — together with the messages that must wait for it. The job runs at
//! once on the caller's thread, or on the [`WalWriter`]'s thread once
//! [`PeerStorage::start_writer`] has started it (the server does; tests stay synchronous).
//!
//! # Two stores, one order
//! The raft log lives in the WAL; the state machine (MVCC key space, leases, members, the applied
//! index) lives in the engine (sled), written in batches and *not* synced. After a crash,
//! sled may be behind the WAL: raft re-delivers the committed entries after sled's durable
//! applied index (`raft::Config::applied`), and applying them again to sled's state gives the
//! same result, since applying is deterministic. That needs the WAL to still hold every entry
//! after sled's applied index, and raft's commit index not to be below it. Three rules:
//! 1. Entries are durable in the WAL before they are applied (raft-rs hands out only committed
//!    entries whose Ready the WAL reported written), so sled's applied index never passes the
//!    WAL's last index.
//!    The commit index is not synced on its own (a member learns it again from the leader), so
//!    on open it is raised to sled's applied index if the WAL's is older
//!    ([`PeerStorage::restore_commit`]).
//! 2. Compaction: before the WAL forgets the entries up to X, sled is flushed durably (sled's
//!    flush plus `fdatasync`, [`Engine::flush`]), so its durable applied index is ≥ X.
//! 3. A leader's snapshot replaces both the state machine and the log. The restored state and
//!    a snapshot marker (index, term, ConfState) are written to sled in one batch and flushed
//!    durably, *then* the WAL is rewritten to the snapshot's position. A crash between the two
//!    leaves sled's marker beyond the WAL's truncation point: [`PeerStorage::open`] then treats
//!    the WAL as truncated at the marker (every entry it holds predates the snapshot, which
//!    replaced the whole log) and finishes the rewrite. The other order could leave a WAL that
//!    starts after entries that sled never applied.
//!
//! With the writer thread, the in-memory log runs ahead of the WAL, but the rules hold: the
//! engine is flushed on the raft thread before a rewrite is even queued, and the writer carries
//! out jobs in order, a rewrite superseding whatever queued before it.

use std::path::Path;
use std::sync::Arc;

use protobuf::Message as _;
use raft::eraftpb::{ConfState, Entry, HardState, Message, Snapshot, SnapshotMetadata};
use raft::{RaftState, StorageError};

use crate::engine::{Engine, WriteBatch, keys};
use crate::error::{Error, Result};
use crate::wal::{LogState, Wal, WalJob, WalWriter, Written};

/// Produces the state machine's snapshot: its applied index and the encoded data at that index.
pub trait SnapshotSource: Send + Sync {
    fn snapshot_data(&self) -> (u64, Vec<u8>);
}

pub struct PeerStorage {
    engine: Arc<dyn Engine>,
    /// The WAL, written on this thread until [`PeerStorage::start_writer`] hands it to `writer`.
    wal: Option<Wal>,
    writer: Option<WalWriter>,
    /// What the WAL holds once the staged job is written.
    log: LogState,
    /// Records (and a rewrite) staged since the last `persist`.
    job: WalJob,
    source: Arc<dyn SnapshotSource>,
}

fn corrupt(what: &'static str, e: impl std::fmt::Display) -> Error {
    Error::Corrupt { what, detail: e.to_string() }
}

/// Moves the log to a snapshot's position (in memory; the caller rewrites the WAL).
fn install_snapshot(log: &mut LogState, meta: &SnapshotMetadata) {
    log.restore(meta.index, meta.term);
    log.hard_state.term = log.hard_state.term.max(meta.term);
    log.hard_state.commit = meta.index;
    log.conf_state = meta.get_conf_state().clone();
}

impl PeerStorage {
    /// Replays the WAL in `wal_dir` (empty for a new member) and reconciles it with the snapshot
    /// marker in the engine (rule 3 of the module docs).
    pub fn open(wal_dir: &Path, engine: Arc<dyn Engine>, source: Arc<dyn SnapshotSource>) -> Result<Self> {
        if engine.scan_prefix(keys::LEGACY_RAFT).next().is_some() {
            return Err(Error::Config(format!(
                "{}: the database holds a raft log, as kubelab stores before the WAL kept it; start this member on an empty --data-dir",
                wal_dir.display()
            )));
        }
        let (mut wal, mut log) = Wal::open(wal_dir)?;
        if let Some(b) = engine.get(keys::SNAPSHOT)? {
            let meta = SnapshotMetadata::parse_from_bytes(&b).map_err(|e| corrupt("snapshot marker", e))?;
            if meta.index > log.snapshot.0 {
                tracing::warn!(target: "store::raft", index = meta.index, term = meta.term, wal_truncated = log.snapshot.0, "the leader's snapshot reached the state machine but not the WAL (a crash between the two); finishing its install");
                install_snapshot(&mut log, &meta);
                wal.run(WalJob { rewrite: Some(log.clone()), ..Default::default() })?;
            }
        }
        Ok(Self { engine, wal: Some(wal), writer: None, log, job: WalJob::default(), source })
    }

    /// Moves the WAL to a writer thread of its own; `done` is called there after each write
    /// (see [`WalWriter`]). From now on [`PeerStorage::persist`] only queues.
    pub fn start_writer(&mut self, done: impl FnMut(Result<Written>) + Send + 'static) -> Result<()> {
        let wal = self.wal.take().ok_or_else(|| Error::Config("the WAL writer is already started".into()))?;
        self.writer = Some(WalWriter::start(wal, done)?);
        Ok(())
    }

    /// Whether the storage holds any raft state at all (a member that never started has none).
    pub fn is_initialized(&self) -> bool {
        !self.log.conf_state.voters.is_empty() || self.log.last_index() > 0 || self.log.hard_state.term > 0
    }

    /// Bootstraps a new cluster: every founding member starts with the same voters and an empty
    /// log. Durable when it returns.
    pub fn bootstrap(&mut self, voters: Vec<u64>) -> Result<()> {
        self.set_conf_state(ConfState::from((voters, vec![])));
        self.persist(None, true, Vec::new())?;
        Ok(())
    }

    /// Reconciles the commit index with the state machine's durable applied index (rule 1 of the
    /// module docs): raft requires `applied ≤ commit ≤ last index` when it starts.
    pub fn restore_commit(&mut self, applied: u64) -> Result<()> {
        let (first, last) = (self.log.first_index(), self.log.last_index());
        if applied + 1 < first || applied > last {
            return Err(corrupt(
                "data dir",
                format!("the state machine has applied up to {applied}, but the WAL holds entries {first}..={last}"),
            ));
        }
        let hs = &mut self.log.hard_state;
        let commit = hs.commit.min(last).max(applied);
        if commit != hs.commit {
            tracing::info!(target: "store::raft", wal_commit = hs.commit, applied, last_index = last, commit, "commit index restored from the state machine and the log");
            hs.commit = commit;
        }
        Ok(())
    }

    pub fn hard_state(&self) -> &HardState {
        &self.log.hard_state
    }

    pub fn conf_state(&self) -> &ConfState {
        &self.log.conf_state
    }

    pub fn truncated_index(&self) -> u64 {
        self.log.snapshot.0
    }

    /// Appends entries from a Ready, truncating any conflicting suffix first.
    pub fn append(&mut self, ents: &[Entry]) -> Result<()> {
        self.log.append(ents)?;
        self.job.push_entries(ents);
        Ok(())
    }

    pub fn set_hard_state(&mut self, hs: &HardState) {
        self.log.hard_state = hs.clone();
        self.job.push_hard_state(hs);
    }

    /// Records an applied conf change. It is synced even if raft does not ask, because sled
    /// may record the conf change entry as applied before the next sync.
    pub fn set_conf_state(&mut self, cs: ConfState) {
        self.job.push_conf_state(&cs);
        self.job.sync = true;
        self.log.conf_state = cs;
    }

    /// Hands what is staged to the WAL, `fdatasync`ed if `sync`, with `messages` to send once
    /// it is written and the number of the Ready it persists. Without a writer thread the job
    /// runs here and its report is returned; with one, the writer reports (and sends the
    /// messages) on its thread, and `None` is returned.
    pub fn persist(&mut self, number: Option<u64>, sync: bool, messages: Vec<Message>) -> Result<Option<Written>> {
        let mut job = std::mem::take(&mut self.job);
        job.sync |= sync;
        if let Some(writer) = &self.writer {
            writer.submit(job, number, messages)?;
            return Ok(None);
        }
        let wal = self.wal.as_mut().expect("the WAL is here when no writer has it");
        let fsync = wal.run(job)?;
        Ok(Some(Written { number, messages, fsync }))
    }

    /// Installs a leader's snapshot: `batch` (the restored state machine) and the snapshot marker
    /// are made durable in the engine first, then the WAL's rewrite to the snapshot's position
    /// is staged (rule 3 of the module docs); the Ready's `persist` carries it out.
    pub fn apply_snapshot(&mut self, meta: &SnapshotMetadata, mut batch: WriteBatch) -> Result<()> {
        batch.put(keys::SNAPSHOT.to_vec(), meta.write_to_bytes().expect("encode snapshot metadata"));
        self.engine.write(batch)?;
        self.engine.flush()?;
        install_snapshot(&mut self.log, meta);
        self.job.set_rewrite(self.log.clone());
        Ok(())
    }

    /// Discards the log up to and including `index`, which the state machine must have applied
    /// and written to the engine: the engine is flushed durably before the WAL forgets anything
    /// (rule 2 of the module docs).
    pub fn compact(&mut self, index: u64) -> Result<()> {
        if index <= self.log.snapshot.0 {
            return Ok(());
        }
        if index > self.log.last_index() {
            return Err(corrupt("compact", format!("index {index} is past the last index {}", self.log.last_index())));
        }
        self.engine.flush()?;
        self.log.compact(index)?;
        self.job.set_rewrite(self.log.clone());
        self.persist(None, false, Vec::new())?;
        Ok(())
    }

    /// The engine, for the Ready loop's writes.
    pub fn engine(&self) -> &Arc<dyn Engine> {
        &self.engine
    }
}

impl raft::Storage for PeerStorage {
    fn initial_state(&self) -> raft::Result<RaftState> {
        Ok(RaftState::new(self.log.hard_state.clone(), self.log.conf_state.clone()))
    }

    fn entries(
        &self,
        low: u64,
        high: u64,
        max_size: impl Into<Option<u64>>,
        _context: raft::GetEntriesContext,
    ) -> raft::Result<Vec<Entry>> {
        if low <= self.log.snapshot.0 {
            return Err(raft::Error::Store(StorageError::Compacted));
        }
        if high > self.log.last_index() + 1 {
            return Err(raft::Error::Store(StorageError::Unavailable));
        }
        let offset = self.log.first_index();
        let mut ents: Vec<Entry> =
            self.log.entries.range((low - offset) as usize..(high - offset) as usize).cloned().collect();
        raft::util::limit_size(&mut ents, max_size.into());
        Ok(ents)
    }

    fn term(&self, idx: u64) -> raft::Result<u64> {
        self.log.term(idx)
    }

    fn first_index(&self) -> raft::Result<u64> {
        Ok(self.log.first_index())
    }

    fn last_index(&self) -> raft::Result<u64> {
        Ok(self.log.last_index())
    }

    fn snapshot(&self, request_index: u64, _to: u64) -> raft::Result<Snapshot> {
        let (index, data) = self.source.snapshot_data();
        if index < request_index {
            return Err(raft::Error::Store(StorageError::SnapshotTemporarilyUnavailable));
        }
        let mut snap = Snapshot::default();
        snap.data = data.into();
        let meta = snap.mut_metadata();
        meta.index = index;
        meta.term = self.log.term(index)?;
        meta.set_conf_state(self.log.conf_state.clone());
        Ok(snap)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::SledEngine;
    use raft::Storage as _;

    struct NoSnapshot;
    impl SnapshotSource for NoSnapshot {
        fn snapshot_data(&self) -> (u64, Vec<u8>) {
            (0, vec![])
        }
    }

    fn entry(index: u64, term: u64) -> Entry {
        let mut e = Entry::default();
        e.index = index;
        e.term = term;
        e.data = format!("e{index}").into_bytes().into();
        e
    }

    /// A member's two stores: a WAL directory and an engine.
    struct Disk {
        dir: tempfile::TempDir,
        engine: Arc<dyn Engine>,
    }

    impl Disk {
        fn new() -> Self {
            Self { dir: tempfile::tempdir().unwrap(), engine: Arc::new(SledEngine::temporary().unwrap()) }
        }
        fn open(&self) -> PeerStorage {
            PeerStorage::open(&self.dir.path().join("wal"), self.engine.clone(), Arc::new(NoSnapshot)).unwrap()
        }
    }

    #[test]
    fn append_truncates_conflicts_and_survives_reload() {
        let disk = Disk::new();
        let mut s = disk.open();
        s.append(&[entry(1, 1), entry(2, 1), entry(3, 1), entry(4, 1)]).unwrap();
        // A new leader overwrites 3..4 with a shorter suffix of a later term.
        s.append(&[entry(3, 2)]).unwrap();
        s.persist(None, true, vec![]).unwrap();
        assert_eq!(s.last_index().unwrap(), 3);
        assert_eq!(s.term(3).unwrap(), 2);
        drop(s);

        let s = disk.open();
        assert_eq!((s.first_index().unwrap(), s.last_index().unwrap()), (1, 3));
        assert_eq!(s.term(3).unwrap(), 2);
        let ents = s.entries(1, 4, None, raft::GetEntriesContext::empty(false)).unwrap();
        assert_eq!(ents.iter().map(|e| (e.index, e.term)).collect::<Vec<_>>(), vec![(1, 1), (2, 1), (3, 2)]);
    }

    #[test]
    fn compaction_keeps_the_term_before_the_first_index() {
        let disk = Disk::new();
        let mut s = disk.open();
        s.append(&(1..=10).map(|i| entry(i, 1 + i / 5)).collect::<Vec<_>>()).unwrap();
        s.persist(None, true, vec![]).unwrap();
        s.compact(6).unwrap();
        let check = |s: &PeerStorage| {
            assert_eq!(s.first_index().unwrap(), 7);
            assert_eq!(s.last_index().unwrap(), 10);
            assert_eq!(s.term(6).unwrap(), 2, "term of first_index - 1 must be kept");
            assert!(matches!(s.term(5), Err(raft::Error::Store(StorageError::Compacted))));
            assert!(matches!(
                s.entries(6, 8, None, raft::GetEntriesContext::empty(false)),
                Err(raft::Error::Store(StorageError::Compacted))
            ));
            assert!(matches!(s.term(11), Err(raft::Error::Store(StorageError::Unavailable))));
        };
        check(&s);
        drop(s);
        check(&disk.open());
    }

    fn snapshot_meta(index: u64, term: u64) -> SnapshotMetadata {
        let mut meta = SnapshotMetadata { index, term, ..Default::default() };
        meta.set_conf_state(ConfState::from((vec![1, 2, 3], vec![])));
        meta
    }

    #[test]
    fn applying_a_snapshot_replaces_the_log() {
        let disk = Disk::new();
        let mut s = disk.open();
        s.append(&[entry(1, 1), entry(2, 1)]).unwrap();
        s.persist(None, true, vec![]).unwrap();
        let mut restored = WriteBatch::default();
        restored.put(keys::APPLIED.to_vec(), 50u64.to_be_bytes().to_vec());
        s.apply_snapshot(&snapshot_meta(50, 3), restored).unwrap();
        s.persist(Some(1), true, vec![]).unwrap();
        assert_eq!(disk.engine.get(keys::APPLIED).unwrap(), Some(50u64.to_be_bytes().to_vec()), "the state machine's batch was written");
        drop(s);
        let mut s = disk.open();
        assert_eq!((s.first_index().unwrap(), s.last_index().unwrap()), (51, 50));
        assert_eq!(s.term(50).unwrap(), 3);
        assert_eq!(s.hard_state().commit, 50);
        assert_eq!(s.conf_state().voters, vec![1, 2, 3]);
        // The log continues after the snapshot.
        s.append(&[entry(51, 3)]).unwrap();
        s.persist(None, true, vec![]).unwrap();
        drop(s);
        assert_eq!(disk.open().last_index().unwrap(), 51);
    }

    #[test]
    fn a_snapshot_in_the_engine_but_not_in_the_wal_is_finished_on_open() {
        let disk = Disk::new();
        let mut s = disk.open();
        s.bootstrap(vec![1, 2, 3]).unwrap();
        s.append(&[entry(1, 1), entry(2, 1), entry(3, 1)]).unwrap();
        s.persist(None, true, vec![]).unwrap();
        drop(s);
        // A crash after step one of a snapshot install: the engine has the restored state and
        // the marker, the WAL still has the old log.
        let mut b = WriteBatch::default();
        b.put(keys::SNAPSHOT.to_vec(), snapshot_meta(40, 4).write_to_bytes().unwrap());
        b.put(keys::APPLIED.to_vec(), 40u64.to_be_bytes().to_vec());
        disk.engine.write(b).unwrap();
        disk.engine.flush().unwrap();

        let mut s = disk.open();
        assert_eq!((s.first_index().unwrap(), s.last_index().unwrap()), (41, 40), "the old entries predate the snapshot");
        assert_eq!(s.term(40).unwrap(), 4);
        assert_eq!((s.hard_state().term, s.hard_state().commit), (4, 40));
        s.restore_commit(40).unwrap();
        s.append(&[entry(41, 4)]).unwrap();
        s.persist(None, true, vec![]).unwrap();
        drop(s);
        // The WAL itself was rewritten: it no longer depends on the marker.
        let (_, log) = Wal::open(&disk.dir.path().join("wal")).unwrap();
        assert_eq!(log.snapshot, (40, 4));
        assert_eq!(log.entries.iter().map(|e| e.index).collect::<Vec<_>>(), vec![41]);
        // An older marker (the WAL compacted past it since) is ignored.
        let s = disk.open();
        assert_eq!(s.last_index().unwrap(), 41);
    }

    #[test]
    fn the_commit_index_is_restored_between_applied_and_the_last_index() {
        let disk = Disk::new();
        let mut s = disk.open();
        s.append(&(1..=5).map(|i| entry(i, 1)).collect::<Vec<_>>()).unwrap();
        let mut hs = HardState { term: 1, commit: 2, ..Default::default() };
        s.set_hard_state(&hs);
        s.persist(None, true, vec![]).unwrap();
        // sled applied further than the WAL's (unsynced) commit index says.
        s.restore_commit(4).unwrap();
        assert_eq!(s.hard_state().commit, 4);
        // A commit index beyond the log (its entries were torn off) comes down to the last index.
        hs.commit = 9;
        s.set_hard_state(&hs);
        s.restore_commit(0).unwrap();
        assert_eq!(s.hard_state().commit, 5);
        // A state machine ahead of the log is not something raft can start from.
        assert!(matches!(s.restore_commit(6), Err(Error::Corrupt { .. })));
    }

    #[test]
    fn entries_respect_max_size_but_return_at_least_one() {
        let disk = Disk::new();
        let mut s = disk.open();
        s.append(&(1..=5).map(|i| entry(i, 1)).collect::<Vec<_>>()).unwrap();
        let ents = s.entries(1, 6, Some(0), raft::GetEntriesContext::empty(false)).unwrap();
        assert_eq!(ents.len(), 1);
    }
}
