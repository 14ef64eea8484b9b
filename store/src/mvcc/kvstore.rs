//! Mirrors etcd's `mvcc/kvstore.go` + `mvcc/index.go`: a multi-version key space.
//!
//! Every write transaction gets the next *main* revision of the whole store; each change inside it
//! gets a *sub* revision. A key remembers every revision it was written at (its index) until
//! compaction, so a read can be served "as of" any revision since the compacted one and a watcher
//! can replay history. A delete writes a tombstone. `version` counts the puts since the key was
//! (re)created; `create_revision` is the revision of that creation.
//!
//! The whole history since the last compaction is held in memory (as etcd's index is, while its
//! values sit in bbolt's mmap) and mirrored to the engine as the writes happen. Each record is
//! shared by the two maps that find it: by key (reads) and by revision (watch history,
//! compaction), so a range read finds a key's value without a second lookup.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use prost::Message as _;
use proto::etcd::{PbEvent, PbKeyValue, event_type};

use crate::engine::{WriteBatch, keys};
use crate::error::{Error, Result};

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug, Default)]
pub struct Revision {
    pub main: i64,
    pub sub: i64,
}

impl Revision {
    fn engine_key(self) -> Vec<u8> {
        let mut k = keys::KV.to_vec();
        k.extend_from_slice(&self.main.to_be_bytes());
        k.extend_from_slice(&self.sub.to_be_bytes());
        k
    }

    fn from_engine_key(k: &[u8]) -> Option<Self> {
        let k = k.strip_prefix(keys::KV)?;
        if k.len() != 16 {
            return None;
        }
        Some(Self {
            main: i64::from_be_bytes(k[..8].try_into().ok()?),
            sub: i64::from_be_bytes(k[8..].try_into().ok()?),
        })
    }
}

/// One revision of one key.
#[derive(Clone, Debug, PartialEq)]
pub struct Record {
    /// For a tombstone, only `key` and `mod_revision` are set (as etcd's delete events carry).
    pub kv: PbKeyValue,
    pub tombstone: bool,
}

impl Record {
    fn encode(&self) -> Vec<u8> {
        let mut v = vec![self.tombstone as u8];
        self.kv.encode(&mut v).expect("encoding into a Vec cannot fail");
        v
    }

    /// Bytes the record takes in the engine, with its key.
    fn engine_len(&self) -> u64 {
        (1 + keys::KV.len() + 16 + 1 + self.kv.encoded_len()) as u64
    }

    fn decode(b: &[u8]) -> Result<Self> {
        let (flag, rest) = b.split_first().ok_or_else(|| Error::Corrupt { what: "kv record", detail: "empty".into() })?;
        let kv = PbKeyValue::decode(rest).map_err(|e| Error::Corrupt { what: "kv record", detail: e.to_string() })?;
        Ok(Self { kv, tombstone: *flag == 1 })
    }
}

/// The range a request names, with etcd's conventions: an empty `range_end` means the one key,
/// `range_end == "\0"` means every key from `key` on, and `key == range_end == "\0"` every key.
pub fn key_range(key: &[u8], range_end: &[u8]) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
    if range_end.is_empty() {
        return (Bound::Included(key.to_vec()), Bound::Included(key.to_vec()));
    }
    let start = if key == [0] { Bound::Unbounded } else { Bound::Included(key.to_vec()) };
    if range_end == [0] {
        return (start, Bound::Unbounded);
    }
    if key >= range_end {
        // An empty range; BTreeMap::range would panic on a reversed one.
        return (Bound::Included(range_end.to_vec()), Bound::Excluded(range_end.to_vec()));
    }
    (start, Bound::Excluded(range_end.to_vec()))
}

/// Whether `k` falls in the range a request names (same conventions as [`key_range`]).
pub fn in_range(k: &[u8], key: &[u8], range_end: &[u8]) -> bool {
    if range_end.is_empty() {
        return k == key;
    }
    let after_start = key == [0] || k >= key;
    after_start && (range_end == [0] || k < range_end)
}

/// Changes of one write transaction, collected while it runs.
pub struct WriteTxn<'b> {
    /// The main revision this transaction writes at.
    pub rev: i64,
    sub: i64,
    pub events: Vec<PbEvent>,
    batch: &'b mut WriteBatch,
}

impl WriteTxn<'_> {
    pub fn changed(&self) -> bool {
        self.sub > 0
    }
}

#[derive(Default)]
pub struct KvStore {
    /// key → its revisions in ascending order, each with its record.
    index: BTreeMap<Vec<u8>, Vec<(Revision, Arc<Record>)>>,
    /// revision → the record written at it.
    history: BTreeMap<Revision, Arc<Record>>,
    current: i64,
    compacted: i64,
    /// Bytes the records take in the engine (what Status reports as `dbSizeInUse`).
    bytes: u64,
}

impl KvStore {
    /// Rebuilds the key space from the engine.
    pub fn load(engine: &dyn crate::engine::Engine) -> Result<Self> {
        let mut s = Self::default();
        for kv in engine.scan_prefix(keys::KV) {
            let (k, v) = kv?;
            let rev = Revision::from_engine_key(&k)
                .ok_or_else(|| Error::Corrupt { what: "kv key", detail: format!("{k:?}") })?;
            s.insert(rev, Record::decode(&v)?);
        }
        let read_i64 = |key: &[u8]| -> Result<i64> {
            Ok(match engine.get(key)? {
                Some(b) => i64::from_be_bytes(
                    b.as_slice().try_into().map_err(|_| Error::Corrupt { what: "meta", detail: "not 8 bytes".into() })?,
                ),
                None => 0,
            })
        };
        s.current = read_i64(keys::REVISION)?.max(s.history.keys().next_back().map_or(0, |r| r.main));
        s.compacted = read_i64(keys::COMPACTED)?;
        Ok(s)
    }

    fn insert(&mut self, rev: Revision, rec: Record) {
        self.bytes += rec.engine_len();
        let rec = Arc::new(rec);
        self.index.entry(rec.kv.key.clone()).or_default().push((rev, rec.clone()));
        self.history.insert(rev, rec);
    }

    pub fn current_revision(&self) -> i64 {
        self.current
    }

    pub fn compacted_revision(&self) -> i64 {
        self.compacted
    }

    /// Bytes the key space's records take in the engine, history included: what a
    /// defragmentation would keep of them.
    pub fn size_in_use(&self) -> u64 {
        self.bytes
    }

    /// Number of keys that exist now.
    pub fn live_keys(&self) -> usize {
        self.index.values().filter(|revs| revs.last().is_some_and(|(_, rec)| !rec.tombstone)).count()
    }

    /// Checks a requested read revision (0 = now) and returns the one to read at.
    pub fn read_revision(&self, rev: i64) -> Result<i64> {
        if rev <= 0 {
            return Ok(self.current);
        }
        if rev > self.current {
            return Err(Error::FutureRevision);
        }
        if rev < self.compacted {
            return Err(Error::Compacted { compact_revision: self.compacted });
        }
        Ok(rev)
    }

    /// The key's value as of `rev`, if it existed then.
    pub fn get_at(&self, key: &[u8], rev: i64) -> Option<&PbKeyValue> {
        Self::visible(self.index.get(key)?, rev)
    }

    /// A key's value as of `rev` from its revisions: the newest at or below `rev`, unless that
    /// is a tombstone.
    fn visible(revs: &[(Revision, Arc<Record>)], rev: i64) -> Option<&PbKeyValue> {
        let pos = revs.partition_point(|(r, _)| r.main <= rev);
        let (_, rec) = &revs[pos.checked_sub(1)?];
        (!rec.tombstone).then_some(&rec.kv)
    }

    /// Visits the keys of a range as of `rev`, in key order, until `f` returns false.
    pub fn range_at<'a>(&'a self, key: &[u8], range_end: &[u8], rev: i64, mut f: impl FnMut(&'a PbKeyValue) -> bool) {
        for (_, revs) in self.index.range(key_range(key, range_end)) {
            if let Some(kv) = Self::visible(revs, rev)
                && !f(kv)
            {
                return;
            }
        }
    }

    /// Starts a write transaction at the next revision.
    pub fn begin<'b>(&self, batch: &'b mut WriteBatch) -> WriteTxn<'b> {
        WriteTxn { rev: self.current + 1, sub: 0, events: Vec::new(), batch }
    }

    /// The revision reads inside `txn` see: its own writes included.
    pub fn txn_read_revision(&self, txn: &WriteTxn) -> i64 {
        if txn.changed() { txn.rev } else { self.current }
    }

    /// Puts `value` at `key` inside `txn`; returns the previous value.
    pub fn put(&mut self, txn: &mut WriteTxn, key: &[u8], value: Vec<u8>, lease: i64) -> Option<PbKeyValue> {
        let prev = self.get_at(key, self.txn_read_revision(txn)).cloned();
        let rev = Revision { main: txn.rev, sub: txn.sub };
        txn.sub += 1;
        let kv = PbKeyValue {
            key: key.to_vec(),
            create_revision: prev.as_ref().map_or(rev.main, |p| p.create_revision),
            mod_revision: rev.main,
            version: prev.as_ref().map_or(1, |p| p.version + 1),
            value,
            lease,
        };
        let rec = Record { kv: kv.clone(), tombstone: false };
        txn.batch.put(rev.engine_key(), rec.encode());
        self.insert(rev, rec);
        txn.events.push(PbEvent { r#type: event_type::PUT, kv: Some(kv), prev_kv: prev.clone() });
        prev
    }

    /// Deletes every key of the range inside `txn`; returns what was deleted.
    pub fn delete_range(&mut self, txn: &mut WriteTxn, key: &[u8], range_end: &[u8]) -> Vec<PbKeyValue> {
        let mut deleted = Vec::new();
        self.range_at(key, range_end, self.txn_read_revision(txn), |kv| {
            deleted.push(kv.clone());
            true
        });
        for prev in &deleted {
            let rev = Revision { main: txn.rev, sub: txn.sub };
            txn.sub += 1;
            let kv = PbKeyValue { key: prev.key.clone(), mod_revision: rev.main, ..Default::default() };
            let rec = Record { kv: kv.clone(), tombstone: true };
            txn.batch.put(rev.engine_key(), rec.encode());
            self.insert(rev, rec);
            txn.events.push(PbEvent { r#type: event_type::DELETE, kv: Some(kv), prev_kv: Some(prev.clone()) });
        }
        deleted
    }

    /// Ends a write transaction: the store's revision moves only if something changed.
    pub fn commit(&mut self, txn: WriteTxn) -> Vec<PbEvent> {
        if txn.changed() {
            self.current = txn.rev;
            txn.batch.put(keys::REVISION.to_vec(), self.current.to_be_bytes().to_vec());
        }
        txn.events
    }

    /// Discards history below `rev`: a key keeps its newest revision at or below `rev` unless that
    /// is a tombstone, so every read at `rev` or later still answers the same.
    pub fn compact(&mut self, rev: i64, batch: &mut WriteBatch) -> Result<()> {
        if rev <= self.compacted {
            return Err(Error::Compacted { compact_revision: self.compacted });
        }
        if rev > self.current {
            return Err(Error::FutureRevision);
        }
        let mut empty = Vec::new();
        for (key, revs) in self.index.iter_mut() {
            let upto = revs.partition_point(|(r, _)| r.main <= rev);
            if upto == 0 {
                continue;
            }
            // The newest revision at or below `rev` survives unless it is a tombstone.
            let keep_last = !revs[upto - 1].1.tombstone;
            let drop = if keep_last { upto - 1 } else { upto };
            for (r, rec) in revs.drain(..drop) {
                self.bytes -= rec.engine_len();
                self.history.remove(&r);
                batch.delete(r.engine_key());
            }
            if revs.is_empty() {
                empty.push(key.clone());
            }
        }
        for k in empty {
            self.index.remove(&k);
        }
        self.compacted = rev;
        batch.put(keys::COMPACTED.to_vec(), rev.to_be_bytes().to_vec());
        Ok(())
    }

    /// The events of revisions `from..=to` for keys in a range, in revision order; each delete
    /// and put carries the key's previous value. Fails if `from` is compacted away.
    pub fn events_between(&self, from: i64, to: i64, key: &[u8], range_end: &[u8]) -> Result<Vec<PbEvent>> {
        if from < self.compacted {
            return Err(Error::Compacted { compact_revision: self.compacted });
        }
        let mut out = Vec::new();
        let lo = Revision { main: from, sub: 0 };
        let hi = Revision { main: to, sub: i64::MAX };
        if lo > hi {
            return Ok(out);
        }
        for (rev, rec) in self.history.range(lo..=hi) {
            if !in_range(&rec.kv.key, key, range_end) {
                continue;
            }
            out.push(self.event_of(*rev, rec));
        }
        Ok(out)
    }

    fn event_of(&self, rev: Revision, rec: &Record) -> PbEvent {
        // The previous value is the key's visible revision just before this one.
        let prev = self.index.get(&rec.kv.key).and_then(|revs| {
            let pos = revs.partition_point(|(r, _)| *r < rev);
            let (_, before) = &revs[pos.checked_sub(1)?];
            (!before.tombstone).then(|| before.kv.clone())
        });
        let r#type = if rec.tombstone { event_type::DELETE } else { event_type::PUT };
        PbEvent { r#type, kv: Some(rec.kv.clone()), prev_kv: prev }
    }

    /// Every record, for a snapshot.
    pub fn records(&self) -> impl Iterator<Item = (&Revision, &Record)> {
        self.history.iter().map(|(rev, rec)| (rev, &**rec))
    }

    /// Every record, shared rather than copied: a point-in-time view that stays valid after
    /// the store moves on ([`crate::snapshot`]).
    pub fn records_shared(&self) -> Vec<(Revision, Arc<Record>)> {
        self.history.iter().map(|(rev, rec)| (*rev, rec.clone())).collect()
    }

    /// Replaces the whole key space (a snapshot from the leader), staging the engine writes.
    pub fn restore(
        &mut self,
        records: Vec<(Revision, Record)>,
        current: i64,
        compacted: i64,
        engine: &dyn crate::engine::Engine,
        batch: &mut WriteBatch,
    ) -> Result<()> {
        for kv in engine.scan_prefix(keys::KV) {
            batch.delete(kv?.0);
        }
        *self = Self::default();
        for (rev, rec) in records {
            batch.put(rev.engine_key(), rec.encode());
            self.insert(rev, rec);
        }
        self.current = current;
        self.compacted = compacted;
        batch.put(keys::REVISION.to_vec(), current.to_be_bytes().to_vec());
        batch.put(keys::COMPACTED.to_vec(), compacted.to_be_bytes().to_vec());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{Engine, SledEngine};

    fn put(s: &mut KvStore, b: &mut WriteBatch, k: &str, v: &str) -> i64 {
        let mut t = s.begin(b);
        s.put(&mut t, k.as_bytes(), v.as_bytes().to_vec(), 0);
        let rev = t.rev;
        s.commit(t);
        rev
    }

    fn del(s: &mut KvStore, b: &mut WriteBatch, k: &str, end: &str) -> usize {
        let mut t = s.begin(b);
        let n = s.delete_range(&mut t, k.as_bytes(), end.as_bytes()).len();
        s.commit(t);
        n
    }

    fn keys_at(s: &KvStore, k: &str, end: &str, rev: i64) -> Vec<String> {
        let mut out = vec![];
        s.range_at(k.as_bytes(), end.as_bytes(), rev, |kv| {
            out.push(format!("{}={}", String::from_utf8_lossy(&kv.key), String::from_utf8_lossy(&kv.value)));
            true
        });
        out
    }

    #[test]
    fn revisions_versions_and_tombstones_follow_etcd() {
        let mut s = KvStore::default();
        let mut b = WriteBatch::default();
        assert_eq!(put(&mut s, &mut b, "a", "1"), 1);
        assert_eq!(put(&mut s, &mut b, "a", "2"), 2);
        let kv = s.get_at(b"a", 2).unwrap();
        assert_eq!((kv.create_revision, kv.mod_revision, kv.version), (1, 2, 2));
        assert_eq!(del(&mut s, &mut b, "a", ""), 1);
        assert_eq!(s.current_revision(), 3);
        assert!(s.get_at(b"a", 3).is_none());
        assert_eq!(s.get_at(b"a", 1).unwrap().value, b"1");
        // Re-creation starts a new generation.
        put(&mut s, &mut b, "a", "3");
        let kv = s.get_at(b"a", 4).unwrap();
        assert_eq!((kv.create_revision, kv.version), (4, 1));
        // Deleting nothing does not move the revision.
        assert_eq!(del(&mut s, &mut b, "zzz", ""), 0);
        assert_eq!(s.current_revision(), 4);
    }

    #[test]
    fn ranges_follow_etcd_conventions() {
        let mut s = KvStore::default();
        let mut b = WriteBatch::default();
        for k in ["a", "b", "b/1", "b/2", "c"] {
            put(&mut s, &mut b, k, "x");
        }
        let now = s.current_revision();
        assert_eq!(keys_at(&s, "b", "", now), vec!["b=x"]);
        assert_eq!(keys_at(&s, "b/", "b0", now), vec!["b/1=x", "b/2=x"]);
        assert_eq!(keys_at(&s, "b", "\0", now).len(), 4);
        assert_eq!(keys_at(&s, "\0", "\0", now).len(), 5);
        assert!(keys_at(&s, "c", "a", now).is_empty(), "a reversed range is empty, not a panic");
        assert_eq!(keys_at(&s, "\0", "\0", 2), vec!["a=x", "b=x"]);
    }

    #[test]
    fn compaction_keeps_what_reads_at_or_after_it_need() {
        let mut s = KvStore::default();
        let mut b = WriteBatch::default();
        put(&mut s, &mut b, "a", "1"); // 1
        put(&mut s, &mut b, "a", "2"); // 2
        put(&mut s, &mut b, "gone", "x"); // 3
        del(&mut s, &mut b, "gone", ""); // 4
        put(&mut s, &mut b, "a", "3"); // 5
        s.compact(4, &mut b).unwrap();
        assert!(matches!(s.read_revision(3), Err(Error::Compacted { compact_revision: 4 })));
        assert_eq!(s.get_at(b"a", 4).unwrap().value, b"2");
        assert!(s.get_at(b"gone", 4).is_none());
        assert_eq!(s.history.len(), 2, "a@2 and a@5 remain; the tombstoned key is gone");
        assert!(matches!(s.compact(4, &mut b), Err(Error::Compacted { .. })));
        assert!(matches!(s.compact(9, &mut b), Err(Error::FutureRevision)));
        assert!(matches!(s.events_between(3, 5, b"a", b""), Err(Error::Compacted { .. })));
        assert_eq!(s.events_between(4, 5, b"a", b"").unwrap().len(), 1);
        let kept: u64 = s.history.values().map(|r| r.engine_len()).sum();
        assert_eq!(s.size_in_use(), kept, "the size in use counts what compaction kept");
    }

    #[test]
    fn history_replays_events_with_previous_values() {
        let mut s = KvStore::default();
        let mut b = WriteBatch::default();
        put(&mut s, &mut b, "k", "1");
        put(&mut s, &mut b, "k", "2");
        del(&mut s, &mut b, "k", "");
        let evs = s.events_between(1, 3, b"k", b"").unwrap();
        let shape: Vec<_> = evs
            .iter()
            .map(|e| (e.r#type, e.kv.as_ref().unwrap().mod_revision, e.prev_kv.as_ref().map(|p| p.value.clone())))
            .collect();
        assert_eq!(shape, vec![(0, 1, None), (0, 2, Some(b"1".to_vec())), (1, 3, Some(b"2".to_vec()))]);
    }

    #[test]
    fn the_key_space_survives_a_reload_from_the_engine() {
        let engine = SledEngine::temporary().unwrap();
        let mut s = KvStore::default();
        let mut b = WriteBatch::default();
        put(&mut s, &mut b, "a", "1");
        put(&mut s, &mut b, "b", "1");
        del(&mut s, &mut b, "a", "");
        put(&mut s, &mut b, "b", "2");
        s.compact(2, &mut b).unwrap();
        engine.write(b).unwrap();
        let r = KvStore::load(&engine).unwrap();
        assert_eq!((r.current_revision(), r.compacted_revision()), (4, 2));
        assert_eq!(r.history, s.history);
        assert_eq!(r.index, s.index);
    }
}
