//! The storage engine under the state machine: the MVCC key space, leases, member attributes and
//! the applied index, in one ordered key-value tree. (The raft log is not here: it lives in the
//! WAL, [`crate::wal`].)
//!
//! The engine is written in atomic batches (every 100 ms, as etcd commits its backend; see
//! [`crate::raft_node`]) and is *not* synced then: after a crash it may be behind the WAL, which
//! replays what it misses (see [`crate::raft_storage`]). [`Engine::flush`] makes it durable where
//! that ordering needs it: before the WAL is compacted, and when a leader's snapshot is installed.
//!
//! The engine is a small trait so that sled, effectively unmaintained, can be swapped for another
//! ordered store (redb, bbolt's kind of B+tree) without touching the raft or MVCC code.

use std::collections::BTreeMap;

use crate::error::Result;

/// Key prefixes of the single tree. Index-like parts of keys are big-endian so that keys sort in
/// numeric order and ranges iterate in order.
pub mod keys {
    /// Keys of the raft log as stores before the WAL kept it in the engine (`r\x01` entries,
    /// `r\x02` state). A data directory that has them is refused rather than misread.
    pub const LEGACY_RAFT: &[u8] = b"r";
    /// `k` + main revision (i64 BE) + sub revision (i64 BE) → flag byte + encoded KeyValue.
    pub const KV: &[u8] = b"k";
    /// `l` + lease id (i64 BE) → granted TTL (i64 BE).
    pub const LEASE: &[u8] = b"l";
    /// The raft index of the last applied entry.
    pub const APPLIED: &[u8] = b"m\x00applied";
    /// The store's current revision.
    pub const REVISION: &[u8] = b"m\x00rev";
    /// The revision below which history is compacted away.
    pub const COMPACTED: &[u8] = b"m\x00compact";
    /// The last snapshot installed from a leader: its encoded raft `SnapshotMetadata` (index,
    /// term, ConfState), made durable before the WAL records it.
    pub const SNAPSHOT: &[u8] = b"m\x00snapshot";
    /// Who this data belongs to: cluster id, member id and the members (see `config`).
    pub const IDENTITY: &[u8] = b"m\x00identity";
    /// `m\x01` + member id (u64 BE) → the member's published attributes (name, client URLs).
    pub const MEMBER_ATTRS: &[u8] = b"m\x01";

    pub fn with_u64(prefix: &[u8], n: u64) -> Vec<u8> {
        let mut k = Vec::with_capacity(prefix.len() + 8);
        k.extend_from_slice(prefix);
        k.extend_from_slice(&n.to_be_bytes());
        k
    }
}

/// A set of writes applied atomically. A key written twice keeps its last write only: one Ready
/// rewrites the applied index and the revision once per entry, and the engine need not.
#[derive(Default, Debug)]
pub struct WriteBatch {
    pub(crate) ops: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
}

impl WriteBatch {
    pub fn put(&mut self, key: Vec<u8>, value: Vec<u8>) {
        self.ops.insert(key, Some(value));
    }
    pub fn delete(&mut self, key: Vec<u8>) {
        self.ops.insert(key, None);
    }
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }
    /// Distinct keys written.
    pub fn len(&self) -> usize {
        self.ops.len()
    }
}

/// What the store needs from an ordered, durable key-value engine.
pub trait Engine: Send + Sync + 'static {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>>;
    /// All pairs whose key starts with `prefix`, in key order.
    fn scan_prefix(&self, prefix: &[u8]) -> Box<dyn Iterator<Item = Result<(Vec<u8>, Vec<u8>)>> + '_>;
    /// Pairs in `[start, end)`, in key order.
    fn scan_range(&self, start: &[u8], end: &[u8]) -> Box<dyn Iterator<Item = Result<(Vec<u8>, Vec<u8>)>> + '_>;
    /// The last pair whose key starts with `prefix`, without a scan.
    fn last_with_prefix(&self, prefix: &[u8]) -> Result<Option<(Vec<u8>, Vec<u8>)>>;
    /// Applies the batch atomically. Not durable until `flush` returns.
    fn write(&self, batch: WriteBatch) -> Result<()>;
    /// Makes every earlier write durable (fsync). Returns the bytes flushed, for metrics.
    fn flush(&self) -> Result<usize>;
    /// Bytes the engine occupies on disk.
    fn size_on_disk(&self) -> u64;
}

/// The sled engine: one sled `Db`, its default tree.
pub struct SledEngine {
    db: sled::Db,
    /// sled's own log file, for the fdatasync that sled does not do (see `flush`).
    log: Option<std::fs::File>,
}

impl SledEngine {
    /// Opens (or creates) the engine in `dir`. A directory still locked by a member that is
    /// shutting down is waited for briefly; one held by a running process is an error that says so.
    pub fn open(dir: &std::path::Path) -> Result<Self> {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        loop {
            // sled's background flush (every 500 ms) bounds how much of the WAL a restart
            // replays; durability, where it matters, comes from `Engine::flush`.
            match sled::Config::new().path(dir).cache_capacity(256 << 20).open() {
                Ok(db) => {
                    let log = std::fs::File::open(dir.join("db"))?;
                    return Ok(Self { db, log: Some(log) });
                }
                Err(sled::Error::Io(e)) if e.to_string().contains("could not acquire lock") => {
                    if std::time::Instant::now() >= deadline {
                        return Err(crate::error::Error::Config(format!(
                            "{} is in use by another process (is another store running on this --data-dir?)",
                            dir.display()
                        )));
                    }
                    std::thread::sleep(std::time::Duration::from_millis(50));
                }
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// A throwaway engine in a temporary directory, for tests.
    pub fn temporary() -> Result<Self> {
        Ok(Self { db: sled::Config::new().temporary(true).open()?, log: None })
    }
}

fn pair((k, v): (sled::IVec, sled::IVec)) -> (Vec<u8>, Vec<u8>) {
    (k.to_vec(), v.to_vec())
}

impl Engine for SledEngine {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.db.get(key)?.map(|v| v.to_vec()))
    }

    fn scan_prefix(&self, prefix: &[u8]) -> Box<dyn Iterator<Item = Result<(Vec<u8>, Vec<u8>)>> + '_> {
        Box::new(self.db.scan_prefix(prefix).map(|r| r.map(pair).map_err(Into::into)))
    }

    fn scan_range(&self, start: &[u8], end: &[u8]) -> Box<dyn Iterator<Item = Result<(Vec<u8>, Vec<u8>)>> + '_> {
        Box::new(self.db.range(start.to_vec()..end.to_vec()).map(|r| r.map(pair).map_err(Into::into)))
    }

    fn last_with_prefix(&self, prefix: &[u8]) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        Ok(self.db.scan_prefix(prefix).next_back().transpose()?.map(pair))
    }

    fn write(&self, batch: WriteBatch) -> Result<()> {
        let mut b = sled::Batch::default();
        for (k, v) in batch.ops {
            match v {
                Some(v) => b.insert(k, v),
                None => b.remove(k),
            }
        }
        self.db.apply_batch(b)?;
        Ok(())
    }

    fn flush(&self) -> Result<usize> {
        let n = self.db.flush()?;
        // sled writes its log with sync_file_range(2) on Linux, which persists neither the file's
        // size after an append nor the disk's write cache: not durable across a power loss.
        // fdatasync on the same file (it acts on the inode, whichever descriptor) makes it so.
        // Only compaction and snapshot installs need this; the write path syncs the WAL alone.
        if let Some(log) = &self.log {
            log.sync_data()?;
        }
        Ok(n)
    }

    fn size_on_disk(&self) -> u64 {
        self.db.size_on_disk().unwrap_or(0)
    }
}
