//! Mirrors etcd's raft `MemoryStorage` + WAL (and TiKV's `peer_storage.rs`): the raft log as raft-rs
//! reads it, kept in memory since the last compaction and made durable in the engine.
//!
//! raft-rs calls the `Storage` methods from inside `RawNode`; the Ready loop (`raft_node`) calls the
//! mutating methods, which change the in-memory view at once and stage the matching engine writes
//! in the caller's `WriteBatch`. Nothing is durable until the loop writes the batch and flushes it,
//! which it does before sending persisted messages or answering any client.

use std::collections::VecDeque;
use std::sync::Arc;

use protobuf::Message as _;
use raft::eraftpb::{ConfState, Entry, HardState, Snapshot, SnapshotMetadata};
use raft::{RaftState, StorageError};

use crate::engine::{Engine, WriteBatch, keys};
use crate::error::{Error, Result};

/// Produces the state machine's snapshot: its applied index and the encoded data at that index.
pub trait SnapshotSource: Send + Sync {
    fn snapshot_data(&self) -> (u64, Vec<u8>);
}

pub struct PeerStorage {
    engine: Arc<dyn Engine>,
    hard_state: HardState,
    conf_state: ConfState,
    /// Index and term of the last entry discarded by compaction (or of the applied snapshot).
    truncated: (u64, u64),
    /// Entries `truncated.0 + 1 ..= last_index`.
    entries: VecDeque<Entry>,
    source: Arc<dyn SnapshotSource>,
}

fn corrupt(what: &'static str, e: impl std::fmt::Display) -> Error {
    Error::Corrupt { what, detail: e.to_string() }
}

fn encode_pair(a: u64, b: u64) -> Vec<u8> {
    let mut v = a.to_be_bytes().to_vec();
    v.extend_from_slice(&b.to_be_bytes());
    v
}

fn decode_u64(b: &[u8], what: &'static str) -> Result<u64> {
    Ok(u64::from_be_bytes(b.try_into().map_err(|_| corrupt(what, "not 8 bytes"))?))
}

impl PeerStorage {
    /// Loads the raft state the engine holds (all empty for a new member).
    pub fn load(engine: Arc<dyn Engine>, source: Arc<dyn SnapshotSource>) -> Result<Self> {
        let hard_state = match engine.get(keys::RAFT_HARD_STATE)? {
            Some(b) => HardState::parse_from_bytes(&b).map_err(|e| corrupt("hard state", e))?,
            None => HardState::default(),
        };
        let conf_state = match engine.get(keys::RAFT_CONF_STATE)? {
            Some(b) => ConfState::parse_from_bytes(&b).map_err(|e| corrupt("conf state", e))?,
            None => ConfState::default(),
        };
        let truncated = match engine.get(keys::RAFT_TRUNCATED)? {
            Some(b) if b.len() == 16 => (decode_u64(&b[..8], "truncated")?, decode_u64(&b[8..], "truncated")?),
            Some(_) => return Err(corrupt("truncated", "not 16 bytes")),
            None => (0, 0),
        };
        let mut entries = VecDeque::new();
        for kv in engine.scan_prefix(keys::RAFT_ENTRY) {
            let (_, v) = kv?;
            let e = Entry::parse_from_bytes(&v).map_err(|e| corrupt("log entry", e))?;
            if e.index <= truncated.0 {
                continue; // compacted; its delete is still in flight or was interrupted
            }
            let expected = truncated.0 + entries.len() as u64 + 1;
            if e.index != expected {
                return Err(corrupt("log", format!("entry {} found where {expected} was expected", e.index)));
            }
            entries.push_back(e);
        }
        Ok(Self { engine, hard_state, conf_state, truncated, entries, source })
    }

    /// Whether the storage holds any raft state at all (a member that never started has none).
    pub fn is_initialized(&self) -> bool {
        !self.conf_state.voters.is_empty() || self.last_idx() > 0 || self.hard_state.term > 0
    }

    /// Bootstraps a new cluster: every founding member starts with the same voters and an empty log.
    pub fn bootstrap(&mut self, voters: Vec<u64>, batch: &mut WriteBatch) {
        self.conf_state = ConfState::from((voters, vec![]));
        batch.put(keys::RAFT_CONF_STATE.to_vec(), self.conf_state.write_to_bytes().expect("encode conf state"));
    }

    pub fn hard_state(&self) -> &HardState {
        &self.hard_state
    }

    pub fn conf_state(&self) -> &ConfState {
        &self.conf_state
    }

    pub fn truncated_index(&self) -> u64 {
        self.truncated.0
    }

    fn first_idx(&self) -> u64 {
        self.truncated.0 + 1
    }

    fn last_idx(&self) -> u64 {
        self.truncated.0 + self.entries.len() as u64
    }

    /// Appends entries from a Ready, truncating any conflicting suffix first.
    pub fn append(&mut self, ents: &[Entry], batch: &mut WriteBatch) -> Result<()> {
        let Some(first) = ents.first() else { return Ok(()) };
        if first.index <= self.truncated.0 {
            return Err(corrupt("append", format!("entry {} is below the compacted index {}", first.index, self.truncated.0)));
        }
        let last = self.last_idx();
        if first.index > last + 1 {
            return Err(corrupt("append", format!("gap: last index {last}, appending {}", first.index)));
        }
        // Drop the conflicting suffix: entries at and after `first.index` are replaced.
        let keep = (first.index - self.first_idx()) as usize;
        self.entries.truncate(keep);
        let new_last = ents[ents.len() - 1].index;
        for idx in new_last + 1..=last {
            batch.delete(keys::with_u64(keys::RAFT_ENTRY, idx));
        }
        for e in ents {
            batch.put(keys::with_u64(keys::RAFT_ENTRY, e.index), e.write_to_bytes().expect("encode entry"));
            self.entries.push_back(e.clone());
        }
        Ok(())
    }

    pub fn set_hard_state(&mut self, hs: &HardState, batch: &mut WriteBatch) {
        self.hard_state = hs.clone();
        batch.put(keys::RAFT_HARD_STATE.to_vec(), hs.write_to_bytes().expect("encode hard state"));
    }

    pub fn set_commit(&mut self, commit: u64, batch: &mut WriteBatch) {
        let mut hs = self.hard_state.clone();
        hs.commit = commit;
        self.set_hard_state(&hs, batch);
    }

    pub fn set_conf_state(&mut self, cs: ConfState, batch: &mut WriteBatch) {
        batch.put(keys::RAFT_CONF_STATE.to_vec(), cs.write_to_bytes().expect("encode conf state"));
        self.conf_state = cs;
    }

    /// Installs a snapshot's metadata: the whole log is replaced by the snapshot's position.
    pub fn apply_snapshot(&mut self, meta: &SnapshotMetadata, batch: &mut WriteBatch) {
        for idx in self.first_idx()..=self.last_idx() {
            batch.delete(keys::with_u64(keys::RAFT_ENTRY, idx));
        }
        self.entries.clear();
        self.truncated = (meta.index, meta.term);
        batch.put(keys::RAFT_TRUNCATED.to_vec(), encode_pair(meta.index, meta.term));
        let mut hs = self.hard_state.clone();
        hs.term = hs.term.max(meta.term);
        hs.commit = meta.index;
        self.set_hard_state(&hs, batch);
        self.set_conf_state(meta.get_conf_state().clone(), batch);
    }

    /// Discards the log up to and including `index` (which must be applied).
    pub fn compact(&mut self, index: u64, batch: &mut WriteBatch) -> Result<()> {
        if index <= self.truncated.0 {
            return Ok(());
        }
        if index > self.last_idx() {
            return Err(corrupt("compact", format!("index {index} is past the last index {}", self.last_idx())));
        }
        let term = self.term_of(index)?;
        while self.entries.front().is_some_and(|e| e.index <= index) {
            let e = self.entries.pop_front().expect("checked");
            batch.delete(keys::with_u64(keys::RAFT_ENTRY, e.index));
        }
        self.truncated = (index, term);
        batch.put(keys::RAFT_TRUNCATED.to_vec(), encode_pair(index, term));
        Ok(())
    }

    fn term_of(&self, idx: u64) -> raft::Result<u64> {
        if idx == self.truncated.0 {
            return Ok(self.truncated.1);
        }
        if idx < self.truncated.0 {
            return Err(raft::Error::Store(StorageError::Compacted));
        }
        if idx > self.last_idx() {
            return Err(raft::Error::Store(StorageError::Unavailable));
        }
        Ok(self.entries[(idx - self.first_idx()) as usize].term)
    }

    /// The engine, for the Ready loop's writes.
    pub fn engine(&self) -> &Arc<dyn Engine> {
        &self.engine
    }
}

impl raft::Storage for PeerStorage {
    fn initial_state(&self) -> raft::Result<RaftState> {
        Ok(RaftState::new(self.hard_state.clone(), self.conf_state.clone()))
    }

    fn entries(
        &self,
        low: u64,
        high: u64,
        max_size: impl Into<Option<u64>>,
        _context: raft::GetEntriesContext,
    ) -> raft::Result<Vec<Entry>> {
        if low <= self.truncated.0 {
            return Err(raft::Error::Store(StorageError::Compacted));
        }
        if high > self.last_idx() + 1 {
            return Err(raft::Error::Store(StorageError::Unavailable));
        }
        let offset = self.first_idx();
        let mut ents: Vec<Entry> =
            self.entries.range((low - offset) as usize..(high - offset) as usize).cloned().collect();
        raft::util::limit_size(&mut ents, max_size.into());
        Ok(ents)
    }

    fn term(&self, idx: u64) -> raft::Result<u64> {
        self.term_of(idx)
    }

    fn first_index(&self) -> raft::Result<u64> {
        Ok(self.first_idx())
    }

    fn last_index(&self) -> raft::Result<u64> {
        Ok(self.last_idx())
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
        meta.term = self.term_of(index)?;
        meta.set_conf_state(self.conf_state.clone());
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

    fn storage(engine: &Arc<dyn Engine>) -> PeerStorage {
        PeerStorage::load(engine.clone(), Arc::new(NoSnapshot)).unwrap()
    }

    fn write(s: &PeerStorage, b: WriteBatch) {
        s.engine().write(b).unwrap();
        s.engine().flush().unwrap();
    }

    #[test]
    fn append_truncates_conflicts_and_survives_reload() {
        let engine: Arc<dyn Engine> = Arc::new(SledEngine::temporary().unwrap());
        let mut s = storage(&engine);
        let mut b = WriteBatch::default();
        s.append(&[entry(1, 1), entry(2, 1), entry(3, 1), entry(4, 1)], &mut b).unwrap();
        // A new leader overwrites 3..4 with a shorter suffix of a later term.
        s.append(&[entry(3, 2)], &mut b).unwrap();
        write(&s, b);
        assert_eq!(s.last_index().unwrap(), 3);
        assert_eq!(s.term(3).unwrap(), 2);

        let s = storage(&engine);
        assert_eq!((s.first_index().unwrap(), s.last_index().unwrap()), (1, 3));
        assert_eq!(s.term(3).unwrap(), 2);
        let ents = s.entries(1, 4, None, raft::GetEntriesContext::empty(false)).unwrap();
        assert_eq!(ents.iter().map(|e| (e.index, e.term)).collect::<Vec<_>>(), vec![(1, 1), (2, 1), (3, 2)]);
    }

    #[test]
    fn compaction_keeps_the_term_before_the_first_index() {
        let engine: Arc<dyn Engine> = Arc::new(SledEngine::temporary().unwrap());
        let mut s = storage(&engine);
        let mut b = WriteBatch::default();
        s.append(&(1..=10).map(|i| entry(i, 1 + i / 5)).collect::<Vec<_>>(), &mut b).unwrap();
        s.compact(6, &mut b).unwrap();
        write(&s, b);
        for s in [s, storage(&engine)] {
            assert_eq!(s.first_index().unwrap(), 7);
            assert_eq!(s.last_index().unwrap(), 10);
            assert_eq!(s.term(6).unwrap(), 2, "term of first_index - 1 must be kept");
            assert!(matches!(s.term(5), Err(raft::Error::Store(StorageError::Compacted))));
            assert!(matches!(
                s.entries(6, 8, None, raft::GetEntriesContext::empty(false)),
                Err(raft::Error::Store(StorageError::Compacted))
            ));
            assert!(matches!(s.term(11), Err(raft::Error::Store(StorageError::Unavailable))));
        }
    }

    #[test]
    fn applying_a_snapshot_replaces_the_log() {
        let engine: Arc<dyn Engine> = Arc::new(SledEngine::temporary().unwrap());
        let mut s = storage(&engine);
        let mut b = WriteBatch::default();
        s.append(&[entry(1, 1), entry(2, 1)], &mut b).unwrap();
        let mut meta = SnapshotMetadata::default();
        meta.index = 50;
        meta.term = 3;
        meta.set_conf_state(ConfState::from((vec![1, 2, 3], vec![])));
        s.apply_snapshot(&meta, &mut b);
        write(&s, b);
        let s = storage(&engine);
        assert_eq!((s.first_index().unwrap(), s.last_index().unwrap()), (51, 50));
        assert_eq!(s.term(50).unwrap(), 3);
        assert_eq!(s.hard_state().commit, 50);
        assert_eq!(s.conf_state().voters, vec![1, 2, 3]);
        // The log continues after the snapshot.
        let mut s = s;
        let mut b = WriteBatch::default();
        s.append(&[entry(51, 3)], &mut b).unwrap();
        write(&s, b);
        assert_eq!(storage(&engine).last_index().unwrap(), 51);
    }

    #[test]
    fn entries_respect_max_size_but_return_at_least_one() {
        let engine: Arc<dyn Engine> = Arc::new(SledEngine::temporary().unwrap());
        let mut s = storage(&engine);
        let mut b = WriteBatch::default();
        s.append(&(1..=5).map(|i| entry(i, 1)).collect::<Vec<_>>(), &mut b).unwrap();
        let ents = s.entries(1, 6, Some(0), raft::GetEntriesContext::empty(false)).unwrap();
        assert_eq!(ents.len(), 1);
    }
}
