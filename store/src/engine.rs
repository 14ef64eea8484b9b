//! The storage engine under the state machine: the MVCC key space, leases, member attributes and
//! the applied index, in one ordered key-value tree. (The raft log is not here: it lives in the
//! WAL, [`crate::wal`].)
//!
//! The engine is written in atomic batches (every second; etcd commits its backend every 100 ms;
//! see [`crate::raft_node`]) and is *not* synced then: after a crash it may be behind the WAL, which
//! replays what it misses (see [`crate::raft_storage`]). [`Engine::flush`] makes it durable where
//! that ordering needs it: before the WAL is compacted, and when a leader's snapshot is installed.
//! A member writes its batches on a thread of their own ([`BackgroundWrites`]), so that the
//! Ready loop does not wait for them.
//!
//! The engine is a small trait so that sled, effectively unmaintained, can be swapped for another
//! ordered store (redb, bbolt's kind of B+tree) without touching the raft or MVCC code.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};

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
    /// `m\x01` + member id (u64 BE) → the member's record ([`crate::membership::Member`]: peer
    /// URLs, learner or voter, and the name and client URLs it published).
    pub const MEMBER_ATTRS: &[u8] = b"m\x01";
    /// `m\x02` + member id (u64 BE) → empty: a removed member, whose ID never comes back
    /// (etcd's `members_removed` bucket).
    pub const MEMBER_REMOVED: &[u8] = b"m\x02";
    /// `a` + member id (u64 BE) + alarm type (i32 BE) → the encoded `AlarmMember` (etcd's
    /// `alarm` bucket): raised alarms survive a restart.
    pub const ALARM: &[u8] = b"a";

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
    /// Rewrites the engine's files with only the data they hold now, giving back the space
    /// deleted data took (etcd's backend `Defrag`). Every earlier write is kept, and none is made
    /// meanwhile: writes wait for it.
    fn defragment(&self) -> Result<()>;
}

/// The sled engine: one sled `Db`, its default tree.
///
/// The `Db` sits behind a lock only so that [`Engine::defragment`] can replace it with a
/// rewritten one: writes and flushes hold the read lock while they run (so none lands in the old
/// database after the copy began), a defragmentation the write lock.
pub struct SledEngine {
    inner: std::sync::RwLock<SledDb>,
    /// Where the database lives; `None` for a temporary one.
    dir: Option<std::path::PathBuf>,
}

struct SledDb {
    db: sled::Db,
    /// sled's own log file, for the fdatasync that sled does not do (see `flush`).
    log: Option<std::fs::File>,
}

impl SledEngine {
    /// Opens (or creates) the engine in `dir`. A directory still locked by a member that is
    /// shutting down is waited for briefly; one held by a running process is an error that says so.
    pub fn open(dir: &std::path::Path) -> Result<Self> {
        recover_defragment(dir)?;
        Ok(Self { inner: std::sync::RwLock::new(Self::open_db(dir)?), dir: Some(dir.to_path_buf()) })
    }

    fn open_db(dir: &std::path::Path) -> Result<SledDb> {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        loop {
            // sled's background flush (every 500 ms) bounds how much of the WAL a restart
            // replays; durability, where it matters, comes from `Engine::flush`.
            match sled::Config::new().path(dir).cache_capacity(256 << 20).open() {
                Ok(db) => {
                    let log = std::fs::File::open(dir.join("db"))?;
                    return Ok(SledDb { db, log: Some(log) });
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
        let db = sled::Config::new().temporary(true).open()?;
        Ok(Self { inner: std::sync::RwLock::new(SledDb { db, log: None }), dir: None })
    }

    /// The database as it is now (a cheap handle: sled's `Db` is reference counted). A read
    /// through it after a defragmentation replaced it still sees the same data.
    fn db(&self) -> sled::Db {
        self.inner.read().expect("engine lock").db.clone()
    }
}

/// The directories a defragmentation of the database in `dir` uses: the rewritten copy, and the
/// old database while the copy takes its place.
fn defrag_dirs(dir: &std::path::Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    (dir.with_file_name(format!("{name}.defrag")), dir.with_file_name(format!("{name}.old")))
}

/// Finishes or undoes a defragmentation a crash interrupted (see [`SledEngine::defragment`]):
/// a half-written copy is removed; an old database without a database in its place (a crash
/// between the two renames) is put back, since it holds everything; an old database beside
/// the new one (a crash after both renames) is removed.
fn recover_defragment(dir: &std::path::Path) -> Result<()> {
    let (copy, old) = defrag_dirs(dir);
    if copy.exists() {
        std::fs::remove_dir_all(&copy)?;
    }
    if old.exists() {
        if dir.exists() {
            std::fs::remove_dir_all(&old)?;
        } else {
            tracing::warn!(target: "store::engine", dir = %dir.display(), "a defragmentation was interrupted; keeping the database from before it");
            std::fs::rename(&old, dir)?;
        }
    }
    Ok(())
}

/// Pairs copied into the rewritten database per batch.
const DEFRAG_BATCH: usize = 10_000;

fn pair((k, v): (sled::IVec, sled::IVec)) -> (Vec<u8>, Vec<u8>) {
    (k.to_vec(), v.to_vec())
}

impl Engine for SledEngine {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.db().get(key)?.map(|v| v.to_vec()))
    }

    fn scan_prefix(&self, prefix: &[u8]) -> Box<dyn Iterator<Item = Result<(Vec<u8>, Vec<u8>)>> + '_> {
        Box::new(self.db().scan_prefix(prefix).map(|r| r.map(pair).map_err(Into::into)))
    }

    fn scan_range(&self, start: &[u8], end: &[u8]) -> Box<dyn Iterator<Item = Result<(Vec<u8>, Vec<u8>)>> + '_> {
        Box::new(self.db().range(start.to_vec()..end.to_vec()).map(|r| r.map(pair).map_err(Into::into)))
    }

    fn last_with_prefix(&self, prefix: &[u8]) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        Ok(self.db().scan_prefix(prefix).next_back().transpose()?.map(pair))
    }

    fn write(&self, batch: WriteBatch) -> Result<()> {
        let mut b = sled::Batch::default();
        for (k, v) in batch.ops {
            match v {
                Some(v) => b.insert(k, v),
                None => b.remove(k),
            }
        }
        // Held while writing: a defragmentation must not copy the database before this lands.
        let inner = self.inner.read().expect("engine lock");
        inner.db.apply_batch(b)?;
        Ok(())
    }

    fn flush(&self) -> Result<usize> {
        let inner = self.inner.read().expect("engine lock");
        let n = inner.db.flush()?;
        // sled writes its log with sync_file_range(2) on Linux, which persists neither the file's
        // size after an append nor the disk's write cache: not durable across a power loss.
        // fdatasync on the same file (it acts on the inode, whichever descriptor) makes it so.
        // Only compaction and snapshot installs need this; the write path syncs the WAL alone.
        if let Some(log) = &inner.log {
            log.sync_data()?;
        }
        Ok(n)
    }

    fn size_on_disk(&self) -> u64 {
        self.db().size_on_disk().unwrap_or(0)
    }

    /// sled never gives back the space of deleted data (its log reuses freed segments, but the
    /// file does not shrink), so, as etcd rewrites bbolt into a temporary file and renames it
    /// over the old one, the pairs are copied into a fresh database beside the old one, which
    /// then takes its place:
    /// 1. under the write lock (no write lands meanwhile), flush the old database durably;
    /// 2. copy every pair into `<dir>.defrag`, flush it and close it;
    /// 3. rename `<dir>` to `<dir>.old` and `<dir>.defrag` to `<dir>`, open it, drop the old
    ///    one and remove `<dir>.old`.
    ///
    /// A directory cannot replace a non-empty one in one rename: a crash between the two renames
    /// leaves `<dir>.old` alone, which [`SledEngine::open`] puts back (see `recover_defragment`).
    /// A temporary engine is copied the same way into another temporary database.
    fn defragment(&self) -> Result<()> {
        let mut inner = self.inner.write().expect("engine lock");
        inner.db.flush()?;
        if let Some(log) = &inner.log {
            log.sync_data()?;
        }
        let copy_into = |to: &sled::Db| -> Result<()> {
            let mut batch = sled::Batch::default();
            let mut n = 0;
            for kv in inner.db.iter() {
                let (k, v) = kv?;
                batch.insert(k, v);
                n += 1;
                if n == DEFRAG_BATCH {
                    to.apply_batch(std::mem::take(&mut batch))?;
                    n = 0;
                }
            }
            to.apply_batch(batch)?;
            to.flush()?;
            Ok(())
        };
        let Some(dir) = self.dir.clone() else {
            let fresh = sled::Config::new().temporary(true).open()?;
            copy_into(&fresh)?;
            *inner = SledDb { db: fresh, log: None };
            return Ok(());
        };
        let (copy, old) = defrag_dirs(&dir);
        if copy.exists() {
            std::fs::remove_dir_all(&copy)?;
        }
        {
            let fresh = sled::Config::new().path(&copy).open()?;
            copy_into(&fresh)?;
            std::fs::File::open(copy.join("db"))?.sync_all()?;
        }
        std::fs::rename(&dir, &old)?;
        std::fs::rename(&copy, &dir)?;
        if let Some(parent) = dir.parent() {
            std::fs::File::open(parent)?.sync_all()?;
        }
        *inner = Self::open_db(&dir)?;
        if let Err(e) = std::fs::remove_dir_all(&old) {
            // The next start removes it (see `recover_defragment`).
            tracing::warn!(target: "store::engine", dir = %old.display(), error = %e, "the database from before the defragmentation was not removed");
        }
        Ok(())
    }
}

/// An engine whose writes are applied on a thread of their own (`engine`): `write` hands the
/// batch over and returns. sled's `apply_batch` takes time in proportion to the keys (about 10 µs
/// a key here, BENCHMARKS.md), and on the Ready loop's thread every proposal and message would
/// wait for it; here the batch is written while the loop goes on.
///
/// Nothing else changes for the caller:
/// - Batches are applied in the order they were written.
/// - Every read and every `flush` first waits for the batches written before it, so it sees
///   them, as with the engine alone (a leader's snapshot is restored, and the WAL compacted,
///   only after such a `flush`).
/// - A write that fails is reported by the next call (write, read or flush), and the Ready loop
///   stops there, as it would have on the write itself. Batches after a failed one are not
///   applied. Nothing is lost that the WAL does not hold: the engine is not synced per batch
///   anyway.
/// - At most [`BackgroundWrites::QUEUE`] batches wait; a `write` beyond that waits for room, so
///   an engine slower than the applies slows the Ready loop down instead of filling memory.
///
/// The thread runs at the lowest CPU priority (nice 19), as RocksDB runs its compactions: no
/// client waits for it, and on a machine with two cores its bursts otherwise delay the raft,
/// WAL and gRPC threads that clients do wait for. Threads sled starts from it inherit the
/// priority. It still gets the CPU when the others wait for the disk or the network, and if it
/// falls behind, the queue above makes the Ready loop wait for it.
pub struct BackgroundWrites {
    inner: Arc<dyn Engine>,
    queue: Option<mpsc::SyncSender<Job>>,
    /// The first failed write's error, once there is one.
    failed: Arc<Mutex<Option<String>>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

enum Job {
    Write(WriteBatch),
    /// Answered once every earlier batch is applied.
    Barrier(mpsc::Sender<()>),
}

impl BackgroundWrites {
    /// Batches that may wait for the writer before `write` waits too.
    pub const QUEUE: usize = 4;

    /// Starts the writer thread over `inner`. `committed` is told how long each batch took.
    pub fn start(inner: Arc<dyn Engine>, committed: impl Fn(Duration) + Send + 'static) -> Result<Self> {
        let (tx, rx) = mpsc::sync_channel::<Job>(Self::QUEUE);
        let failed = Arc::new(Mutex::new(None));
        let (engine, failure) = (inner.clone(), failed.clone());
        let thread = std::thread::Builder::new().name("engine".into()).spawn(move || {
            if let Err(e) = lowest_cpu_priority() {
                tracing::warn!(target: "store::engine", error = %e, "the engine writer runs at normal priority");
            }
            for job in rx {
                match job {
                    Job::Write(batch) => {
                        if failure.lock().expect("engine failure lock").is_some() {
                            continue;
                        }
                        let start = Instant::now();
                        match engine.write(batch) {
                            Ok(()) => committed(start.elapsed()),
                            Err(e) => {
                                tracing::error!(target: "store::engine", error = %e, "engine write failed");
                                *failure.lock().expect("engine failure lock") = Some(e.to_string());
                            }
                        }
                    }
                    Job::Barrier(done) => {
                        let _ = done.send(());
                    }
                }
            }
        })?;
        Ok(Self { inner, queue: Some(tx), failed, thread: Some(thread) })
    }

    fn check(&self) -> Result<()> {
        match self.failed.lock().expect("engine failure lock").as_ref() {
            Some(e) => Err(Error::EngineFailed(e.clone())),
            None => Ok(()),
        }
    }

    fn writer_gone() -> Error {
        Error::EngineFailed("the engine's writer thread is gone".into())
    }

    fn send(&self, job: Job) -> Result<()> {
        self.queue.as_ref().ok_or_else(Self::writer_gone)?.send(job).map_err(|_| Self::writer_gone())
    }

    /// Waits until every batch written so far is applied (or has failed).
    fn drain(&self) -> Result<()> {
        let (tx, rx) = mpsc::channel();
        self.send(Job::Barrier(tx))?;
        rx.recv().map_err(|_| Self::writer_gone())?;
        self.check()
    }
}

/// Lowers the calling thread (not the process: on Linux `setpriority` with a thread id acts on
/// that thread alone) to nice 19. Raising a nice value needs no privilege.
fn lowest_cpu_priority() -> std::io::Result<()> {
    // SAFETY: plain syscalls on the calling thread's own id.
    let r = unsafe { libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, 19) };
    if r != 0 { Err(std::io::Error::last_os_error()) } else { Ok(()) }
}

impl Engine for BackgroundWrites {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.drain()?;
        self.inner.get(key)
    }

    fn scan_prefix(&self, prefix: &[u8]) -> Box<dyn Iterator<Item = Result<(Vec<u8>, Vec<u8>)>> + '_> {
        match self.drain() {
            Ok(()) => self.inner.scan_prefix(prefix),
            Err(e) => Box::new(std::iter::once(Err(e))),
        }
    }

    fn scan_range(&self, start: &[u8], end: &[u8]) -> Box<dyn Iterator<Item = Result<(Vec<u8>, Vec<u8>)>> + '_> {
        match self.drain() {
            Ok(()) => self.inner.scan_range(start, end),
            Err(e) => Box::new(std::iter::once(Err(e))),
        }
    }

    fn last_with_prefix(&self, prefix: &[u8]) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        self.drain()?;
        self.inner.last_with_prefix(prefix)
    }

    fn write(&self, batch: WriteBatch) -> Result<()> {
        self.check()?;
        self.send(Job::Write(batch))
    }

    fn flush(&self) -> Result<usize> {
        self.drain()?;
        self.inner.flush()
    }

    fn size_on_disk(&self) -> u64 {
        self.inner.size_on_disk()
    }

    fn defragment(&self) -> Result<()> {
        self.drain()?;
        self.inner.defragment()
    }
}

impl Drop for BackgroundWrites {
    /// Applies what is queued before the engine closes.
    fn drop(&mut self) {
        self.queue = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(b: &mut WriteBatch, k: &str, v: &str) {
        b.put(k.as_bytes().to_vec(), v.as_bytes().to_vec());
    }

    #[test]
    fn reads_and_flushes_see_every_batch_written_before_them_in_order() {
        let bg = BackgroundWrites::start(Arc::new(SledEngine::temporary().unwrap()), |_| {}).unwrap();
        for i in 0..50 {
            let mut b = WriteBatch::default();
            put(&mut b, &format!("k{i:02}"), "first");
            put(&mut b, "last", &format!("{i}"));
            bg.write(b).unwrap();
        }
        let mut b = WriteBatch::default();
        b.delete(b"k00".to_vec());
        bg.write(b).unwrap();
        assert_eq!(bg.get(b"last").unwrap(), Some(b"49".to_vec()), "the last batch wins");
        assert_eq!(bg.get(b"k00").unwrap(), None, "a later delete is applied after the put");
        assert_eq!(bg.scan_prefix(b"k").count(), 49);
        assert_eq!(bg.last_with_prefix(b"k").unwrap().unwrap().0, b"k49".to_vec());
        let mut b = WriteBatch::default();
        put(&mut b, "k50", "x");
        bg.write(b).unwrap();
        bg.flush().unwrap();
        assert_eq!(bg.inner.get(b"k50").unwrap(), Some(b"x".to_vec()), "flush waited for the batch");
    }

    #[test]
    fn defragmenting_gives_back_the_space_of_deleted_data_and_keeps_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        let e = SledEngine::open(&path).unwrap();
        for chunk in 0..20 {
            let mut b = WriteBatch::default();
            for i in 0..500 {
                b.put(format!("k{chunk:02}-{i:03}").into_bytes(), vec![b'v'; 1024]);
            }
            e.write(b).unwrap();
        }
        e.flush().unwrap();
        let mut b = WriteBatch::default();
        for chunk in 0..20 {
            for i in 0..500 {
                if chunk != 7 || i % 2 == 1 {
                    b.delete(format!("k{chunk:02}-{i:03}").into_bytes());
                }
            }
        }
        e.write(b).unwrap();
        e.flush().unwrap();
        let before = e.size_on_disk();
        e.defragment().unwrap();
        let after = e.size_on_disk();
        eprintln!("sled size on disk: {before} bytes before defragmenting, {after} after");
        assert!(after * 4 < before, "{before} → {after}: a twentieth of the data is left");
        let left: Vec<_> = e.scan_prefix(b"k").map(|kv| kv.unwrap().0).collect();
        assert_eq!(left.len(), 250);
        assert!(left.iter().all(|k| k.starts_with(b"k07-")));
        assert!(!dir.path().join("db.old").exists() && !dir.path().join("db.defrag").exists());
        // Writes go on in the new database, and it is the one found on reopening.
        let mut b = WriteBatch::default();
        put(&mut b, "after", "1");
        e.write(b).unwrap();
        e.flush().unwrap();
        drop(e);
        let e = SledEngine::open(&path).unwrap();
        assert_eq!(e.get(b"after").unwrap(), Some(b"1".to_vec()));
        assert_eq!(e.scan_prefix(b"k").count(), 250);
    }

    #[test]
    fn a_defragmentation_cut_short_is_undone_or_finished_on_open() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        let e = SledEngine::open(&path).unwrap();
        let mut b = WriteBatch::default();
        put(&mut b, "k", "v");
        e.write(b).unwrap();
        e.flush().unwrap();
        drop(e);
        // A crash between the two renames: only the old database is left, under its old name,
        // beside a half-written copy.
        std::fs::rename(&path, dir.path().join("db.old")).unwrap();
        std::fs::create_dir_all(dir.path().join("db.defrag")).unwrap();
        let e = SledEngine::open(&path).unwrap();
        assert_eq!(e.get(b"k").unwrap(), Some(b"v".to_vec()));
        assert!(!dir.path().join("db.defrag").exists());
        drop(e);
        // A crash after both: the old one is removed.
        std::fs::create_dir_all(dir.path().join("db.old")).unwrap();
        let e = SledEngine::open(&path).unwrap();
        assert_eq!(e.get(b"k").unwrap(), Some(b"v".to_vec()));
        assert!(!dir.path().join("db.old").exists());
    }

    /// The nice value of each of this process's threads called `name`, and of the calling one.
    fn nice_values(name: &str) -> (Vec<i64>, i64) {
        let nice = |stat: &str| -> i64 {
            // Field 19 of stat; the fields after the command, which may hold spaces, start at 3.
            let after = &stat[stat.rfind(')').unwrap() + 2..];
            after.split(' ').nth(16).unwrap().parse().unwrap()
        };
        let mut named = Vec::new();
        for task in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
            let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
            if comm.trim_end() == name
                && let Ok(stat) = std::fs::read_to_string(task.path().join("stat"))
            {
                named.push(nice(&stat));
            }
        }
        (named, nice(&std::fs::read_to_string("/proc/thread-self/stat").unwrap()))
    }

    #[test]
    fn the_writer_thread_alone_runs_at_the_lowest_priority() {
        let before = nice_values("engine").1;
        let bg = BackgroundWrites::start(Arc::new(SledEngine::temporary().unwrap()), |_| {}).unwrap();
        bg.flush().unwrap(); // the thread has started and lowered itself
        let (writers, caller) = nice_values("engine");
        assert!(!writers.is_empty(), "no thread called engine");
        assert!(writers.iter().all(|n| *n == 19), "engine threads at nice {writers:?}");
        assert_eq!(caller, before, "the rest of the process keeps its priority");
    }

    #[test]
    fn batches_queued_at_drop_are_applied() {
        let inner: Arc<dyn Engine> = Arc::new(SledEngine::temporary().unwrap());
        let bg = BackgroundWrites::start(inner.clone(), |_| {}).unwrap();
        for i in 0..20 {
            let mut b = WriteBatch::default();
            put(&mut b, &format!("k{i:02}"), "v");
            bg.write(b).unwrap();
        }
        drop(bg);
        assert_eq!(inner.scan_prefix(b"k").count(), 20);
    }

    /// An engine whose writes fail once `fail` is set (a full disk, say).
    struct Failing {
        inner: SledEngine,
        fail: std::sync::atomic::AtomicBool,
    }

    impl Engine for Failing {
        fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
            self.inner.get(key)
        }
        fn scan_prefix(&self, prefix: &[u8]) -> Box<dyn Iterator<Item = Result<(Vec<u8>, Vec<u8>)>> + '_> {
            self.inner.scan_prefix(prefix)
        }
        fn scan_range(&self, start: &[u8], end: &[u8]) -> Box<dyn Iterator<Item = Result<(Vec<u8>, Vec<u8>)>> + '_> {
            self.inner.scan_range(start, end)
        }
        fn last_with_prefix(&self, prefix: &[u8]) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
            self.inner.last_with_prefix(prefix)
        }
        fn write(&self, batch: WriteBatch) -> Result<()> {
            if self.fail.load(std::sync::atomic::Ordering::SeqCst) {
                return Err(std::io::Error::other("No space left on device").into());
            }
            self.inner.write(batch)
        }
        fn flush(&self) -> Result<usize> {
            self.inner.flush()
        }
        fn size_on_disk(&self) -> u64 {
            0
        }
        fn defragment(&self) -> Result<()> {
            self.inner.defragment()
        }
    }

    #[test]
    fn a_failed_write_is_reported_by_the_next_call_and_later_batches_are_not_applied() {
        let inner = Arc::new(Failing { inner: SledEngine::temporary().unwrap(), fail: false.into() });
        let commits = Arc::new(Mutex::new(0));
        let counted = commits.clone();
        let bg = BackgroundWrites::start(inner.clone(), move |_| *counted.lock().unwrap() += 1).unwrap();
        let mut b = WriteBatch::default();
        put(&mut b, "a", "1");
        bg.write(b).unwrap();
        bg.flush().unwrap();
        assert_eq!(*commits.lock().unwrap(), 1);

        inner.fail.store(true, std::sync::atomic::Ordering::SeqCst);
        let mut b = WriteBatch::default();
        put(&mut b, "b", "2");
        bg.write(b).unwrap(); // handed over; it fails on the writer thread
        let err = bg.flush().unwrap_err();
        assert!(err.to_string().contains("No space left on device"), "{err}");
        inner.fail.store(false, std::sync::atomic::Ordering::SeqCst);
        let mut b = WriteBatch::default();
        put(&mut b, "c", "3");
        assert!(bg.write(b).is_err(), "every later call fails too");
        assert!(bg.get(b"a").is_err());
        assert_eq!(inner.get(b"b").unwrap(), None);
        assert_eq!(inner.get(b"c").unwrap(), None, "nothing after the failed batch was applied");
        assert_eq!(*commits.lock().unwrap(), 1);
    }
}
