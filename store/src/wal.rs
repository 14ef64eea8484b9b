//! Mirrors etcd's wal package: the raft log (entries, HardState, ConfState, the truncation point)
//! in append-only segment files, written with one `write` and made durable with one `fdatasync`
//! per Ready (or fewer: Readies that queue up share them).
//!
//! # Files
//! `<data-dir>/member/wal/` holds segments named `<seq>.wal`, `seq` in 16 hex digits (etcd names
//! them `<seq>-<first index>.wal`; ours need not carry the index, since replay reads every
//! segment it keeps). A segment is a run of records:
//!
//! ```text
//! | len: u32 LE | crc: u32 LE | type: u8 | payload: len bytes |
//! ```
//!
//! `crc` is the CRC-32 of the type byte and the payload. Types: an [`Entry`], a [`HardState`], a
//! [`ConfState`] (all three encoded as raft-rs encodes them), and a *snapshot* record (index and
//! term, big-endian) saying that the log before and at that index is gone. etcd chains the CRC
//! from one record to the next and pads records to 8 bytes; a per-record CRC and a zero header
//! for the end are enough to find where a crash cut the log.
//!
//! # Writing
//! The Ready loop stages a Ready's records in a [`WalJob`]; [`Wal::run`] writes them with one
//! `pwrite` at the tail segment's logical end, then `fdatasync`s when raft says the Ready must be
//! durable. In the server the jobs run on a thread of their own, the [`WalWriter`], so that the
//! raft thread keeps stepping, committing and applying while a disk flush is under way; jobs
//! that queue meanwhile are merged into the next write and `fdatasync`.
//!
//! Segments are preallocated to [`SEGMENT_SIZE`] with `fallocate`, as etcd's are, so that an
//! append does not change the file's size, which `fdatasync` would otherwise have to persist as
//! well. That is not all `fdatasync` can be made to persist: `fallocate` reserves *unwritten*
//! extents, and the first write into one converts it, a change of the file's metadata that ext4
//! commits to its journal with the data. So each append also writes zeros a little ahead of
//! itself (`Wal::zero_ahead`, up to 1 MiB at a time): the appends that follow land in blocks
//! already written, and their `fdatasync` flushes data alone. On this project's machines that
//! took a third off the time and the CPU of each `fdatasync` (PostgreSQL zero-fills its WAL
//! segments for the same reason).
//!
//! A write that would run past the preallocated size *cuts* the segment: the tail is synced, and
//! a new empty segment (`seq + 1`) is created and becomes the tail. A write or sync error is
//! returned (or reported by the writer, which then stops), and the member stops: after a failed
//! `fsync` the page cache may have dropped the data, so retrying would claim a durability that
//! never happened.
//!
//! # Replay
//! [`Wal::open`] reads the segments in order and folds the records into a [`LogState`]: an entry
//! at index `i` truncates the log at `i` and appends (a new leader's entries replace the
//! conflicting suffix, exactly as they did in memory); a HardState or ConfState replaces the
//! previous one; a snapshot record clears the entries and moves the truncation point. Replay
//! stops at the first zero header (the preallocated, never-written rest of the segment) or at
//! the first torn record (too short, bad CRC): a crash in the middle of a write. That can only be
//! in the tail segment — every other one was synced before the next was created — so anywhere
//! else it is reported as corruption. The tail is then truncated at the last good record and
//! preallocated again (etcd's `ZeroToEnd`), so that the bytes of a write that never completed
//! cannot be read back as records once new ones are appended before them.
//!
//! # Compaction: rewrite into a new segment
//! A rewrite ([`WalJob::set_rewrite`]) writes the whole current state — snapshot record (truncation point),
//! ConfState, HardState, remaining entries — into a new segment `seq + 1`: to a `.tmp` file, which
//! is preallocated, fsynced and renamed into place before the directory is fsynced. Only then are
//! the older segments deleted. It serves both log compaction and the install of a leader's
//! snapshot. We rewrite rather than keep numbered segments and delete whole ones below the
//! compaction point (etcd's way) because it keeps replay trivial — a rewritten segment stands on
//! its own — and the cost is small: the entries kept behind a compaction (a few thousand) are
//! written once more every `--snapshot-count` entries.
//!
//! Crash safety of the rewrite: before the rename the new segment does not exist (a leftover
//! `.tmp` is deleted on open); after it, replay starts at the newest segment that begins with a
//! snapshot record and deletes any older ones, whose deletion was interrupted.
//!
//! # What is durable where
//! The WAL is the only thing fsynced on the write path. The state machine in sled is written in
//! batches without a sync and may lag after a crash; raft re-delivers the committed entries after
//! its durable applied index. The two rules that make this safe — sled is flushed durably before
//! the WAL forgets anything it may need, and a leader's snapshot is durable in sled before the WAL
//! records it — are [`crate::raft_storage`]'s, which owns both.

use std::collections::VecDeque;
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::mpsc as std_mpsc;
use std::time::{Duration, Instant};

use protobuf::Message as _;
use raft::StorageError;
use raft::eraftpb::{ConfState, Entry, HardState, Message};

use crate::error::{Error, Result};

/// Size a segment is preallocated to (etcd's `SegmentSizeBytes`).
pub const SEGMENT_SIZE: u64 = 64 << 20;

/// Length, CRC, type.
const HEADER: usize = 9;

const ENTRY: u8 = 1;
const HARD_STATE: u8 = 2;
const CONF_STATE: u8 = 3;
const SNAPSHOT: u8 = 4;

/// The raft log as replay rebuilds it, and as [`crate::raft_storage::PeerStorage`] keeps it in
/// memory between compactions (raft's `MemoryStorage`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LogState {
    /// Index and term of the last entry discarded by compaction or replaced by a snapshot.
    pub snapshot: (u64, u64),
    pub hard_state: HardState,
    pub conf_state: ConfState,
    /// Entries `snapshot.0 + 1 ..= last_index()`.
    pub entries: VecDeque<Entry>,
}

fn corrupt(what: &'static str, detail: impl std::fmt::Display) -> Error {
    Error::Corrupt { what, detail: detail.to_string() }
}

impl LogState {
    pub fn first_index(&self) -> u64 {
        self.snapshot.0 + 1
    }

    pub fn last_index(&self) -> u64 {
        self.snapshot.0 + self.entries.len() as u64
    }

    /// Appends entries, replacing the suffix they conflict with: an entry at index `i` truncates
    /// the log at `i` first.
    pub fn append(&mut self, ents: &[Entry]) -> Result<()> {
        let Some(first) = ents.first() else { return Ok(()) };
        if first.index <= self.snapshot.0 {
            return Err(corrupt("log", format!("entry {} is at or below the compacted index {}", first.index, self.snapshot.0)));
        }
        let last = self.last_index();
        if first.index > last + 1 {
            return Err(corrupt("log", format!("gap: last index {last}, appending {}", first.index)));
        }
        self.entries.truncate((first.index - self.first_index()) as usize);
        self.entries.extend(ents.iter().cloned());
        Ok(())
    }

    /// The term of entry `idx`, answering for `first_index - 1` too (raft asks for it).
    pub fn term(&self, idx: u64) -> raft::Result<u64> {
        if idx == self.snapshot.0 {
            return Ok(self.snapshot.1);
        }
        if idx < self.snapshot.0 {
            return Err(raft::Error::Store(StorageError::Compacted));
        }
        if idx > self.last_index() {
            return Err(raft::Error::Store(StorageError::Unavailable));
        }
        Ok(self.entries[(idx - self.first_index()) as usize].term)
    }

    /// Discards the entries up to and including `index`.
    pub fn compact(&mut self, index: u64) -> Result<()> {
        if index <= self.snapshot.0 {
            return Ok(());
        }
        if index > self.last_index() {
            return Err(corrupt("compact", format!("index {index} is past the last index {}", self.last_index())));
        }
        let term = self.term(index)?;
        self.entries.drain(..(index - self.snapshot.0) as usize);
        self.snapshot = (index, term);
        Ok(())
    }

    /// Replaces the whole log by a snapshot's position.
    pub fn restore(&mut self, index: u64, term: u64) {
        self.entries.clear();
        self.snapshot = (index, term);
    }

    fn replay(&mut self, r: Record) -> Result<()> {
        match r {
            Record::Entry(e) => self.append(std::slice::from_ref(&e))?,
            Record::HardState(hs) => self.hard_state = hs,
            Record::ConfState(cs) => self.conf_state = cs,
            Record::Snapshot { index, term } => self.restore(index, term),
        }
        Ok(())
    }
}

enum Record {
    Entry(Entry),
    HardState(HardState),
    ConfState(ConfState),
    Snapshot { index: u64, term: u64 },
}

/// What one position of a segment holds.
enum Decoded {
    /// A record and its length on disk.
    Record(Record, usize),
    /// A zero header, or the end of the file: nothing was ever written here.
    End,
    /// Part of a record, or bytes that do not check: where a write was cut short.
    Torn(&'static str),
}

fn checksum(kind: u8, payload: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&[kind]);
    h.update(payload);
    h.finalize()
}

fn decode(buf: &[u8]) -> Result<Decoded> {
    if buf.len() < HEADER {
        return Ok(if buf.iter().all(|b| *b == 0) { Decoded::End } else { Decoded::Torn("short header") });
    }
    let len = u32::from_le_bytes(buf[0..4].try_into().expect("4 bytes")) as usize;
    let crc = u32::from_le_bytes(buf[4..8].try_into().expect("4 bytes"));
    let kind = buf[8];
    if len == 0 && crc == 0 && kind == 0 {
        return Ok(Decoded::End);
    }
    if len > buf.len() - HEADER {
        return Ok(Decoded::Torn("record runs past the end of the segment"));
    }
    let payload = &buf[HEADER..HEADER + len];
    if checksum(kind, payload) != crc {
        return Ok(Decoded::Torn("checksum mismatch"));
    }
    // From here the bytes are what we wrote: a record we cannot read is a bug or a foreign file,
    // not a torn write.
    let record = match kind {
        ENTRY => Record::Entry(Entry::parse_from_bytes(payload).map_err(|e| corrupt("WAL entry", e))?),
        HARD_STATE => Record::HardState(HardState::parse_from_bytes(payload).map_err(|e| corrupt("WAL hard state", e))?),
        CONF_STATE => Record::ConfState(ConfState::parse_from_bytes(payload).map_err(|e| corrupt("WAL conf state", e))?),
        SNAPSHOT if len == 16 => Record::Snapshot {
            index: u64::from_be_bytes(payload[..8].try_into().expect("8 bytes")),
            term: u64::from_be_bytes(payload[8..].try_into().expect("8 bytes")),
        },
        other => return Err(corrupt("WAL record", format!("unknown type {other} ({len} bytes)"))),
    };
    Ok(Decoded::Record(record, HEADER + len))
}

/// Appends one record to `buf`.
fn encode(buf: &mut Vec<u8>, kind: u8, payload: impl FnOnce(&mut Vec<u8>)) {
    let start = buf.len();
    buf.extend_from_slice(&[0; HEADER]);
    payload(buf);
    let len = buf.len() - start - HEADER;
    let crc = checksum(kind, &buf[start + HEADER..]);
    buf[start..start + 4].copy_from_slice(&(len as u32).to_le_bytes());
    buf[start + 4..start + 8].copy_from_slice(&crc.to_le_bytes());
    buf[start + 8] = kind;
}

fn encode_message(buf: &mut Vec<u8>, kind: u8, m: &impl protobuf::Message) {
    encode(buf, kind, |b| m.write_to_vec(b).expect("encode a raft message into a Vec"));
}

fn wal_err(path: &Path) -> impl FnOnce(io::Error) -> Error + '_ {
    move |source| Error::Wal { path: path.display().to_string(), source }
}

fn segment_path(dir: &Path, seq: u64) -> PathBuf {
    dir.join(format!("{seq:016x}.wal"))
}

/// The segments in `dir`, by sequence number.
fn list_segments(dir: &Path) -> Result<Vec<u64>> {
    let mut seqs = Vec::new();
    for item in fs::read_dir(dir).map_err(wal_err(dir))? {
        let name = item.map_err(wal_err(dir))?.file_name();
        let name = name.to_string_lossy();
        if let Some(seq) = name.strip_suffix(".wal").and_then(|s| u64::from_str_radix(s, 16).ok()) {
            seqs.push(seq);
        }
    }
    seqs.sort_unstable();
    Ok(seqs)
}

/// Allocates `len` bytes to the file (and extends its size to at least `len`), as etcd's
/// `fileutil.Preallocate`; falls back to a sparse size where `fallocate` is not supported.
fn preallocate(f: &File, len: u64) -> io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        // SAFETY: fallocate only reads its integer arguments; the descriptor is open for the
        // lifetime of `f`.
        let r = unsafe { libc::fallocate(f.as_raw_fd(), 0, 0, len as libc::off_t) };
        if r == 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EOPNOTSUPP) {
            return Err(e);
        }
    }
    if f.metadata()?.len() < len {
        f.set_len(len)?;
    }
    Ok(())
}

/// The error a failpoint's `return` makes an fdatasync fail with (EIO, as a failing disk's).
#[cfg(feature = "failpoints")]
fn failed_sync(failpoint: &str, msg: String) -> io::Error {
    io::Error::other(format!("fdatasync failed (failpoint {failpoint}: {})", if msg.is_empty() { "input/output error" } else { &msg }))
}

fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir).and_then(|d| d.sync_all()).map_err(wal_err(dir))
}

/// Creates segment `seq` holding `content`, durably: written to a temporary name, preallocated,
/// fsynced, renamed into place, and the directory fsynced. A crash leaves either no segment
/// `seq` or a complete one.
fn create_segment(dir: &Path, seq: u64, size: u64, content: &[u8]) -> Result<File> {
    let path = segment_path(dir, seq);
    let tmp = path.with_extension("wal.tmp");
    let f = OpenOptions::new().read(true).write(true).create(true).truncate(true).open(&tmp).map_err(wal_err(&tmp))?;
    preallocate(&f, size.max(content.len() as u64)).map_err(wal_err(&tmp))?;
    f.write_all_at(content, 0).map_err(wal_err(&tmp))?;
    f.sync_all().map_err(wal_err(&tmp))?;
    fs::rename(&tmp, &path).map_err(wal_err(&path))?;
    sync_dir(dir)?;
    Ok(f)
}

/// Whether segment `seq` begins with a snapshot record, i.e. was written by [`Wal::rewrite`].
fn starts_with_snapshot(dir: &Path, seq: u64) -> Result<bool> {
    let path = segment_path(dir, seq);
    let f = File::open(&path).map_err(wal_err(&path))?;
    let mut head = [0u8; HEADER + 16];
    let mut n = 0;
    while n < head.len() {
        match f.read_at(&mut head[n..], n as u64).map_err(wal_err(&path))? {
            0 => break,
            k => n += k,
        }
    }
    Ok(matches!(decode(&head[..n]), Ok(Decoded::Record(Record::Snapshot { .. }, _))))
}

/// One hand-off to the WAL, in order: a rewrite (if any) and then records, written with one
/// `write`, and synced with one `fdatasync` if `sync`.
#[derive(Default, Debug)]
pub struct WalJob {
    pub rewrite: Option<LogState>,
    pub records: Vec<u8>,
    pub sync: bool,
}

impl WalJob {
    pub fn push_entries(&mut self, ents: &[Entry]) {
        for e in ents {
            encode_message(&mut self.records, ENTRY, e);
        }
    }

    pub fn push_hard_state(&mut self, hs: &HardState) {
        encode_message(&mut self.records, HARD_STATE, hs);
    }

    pub fn push_conf_state(&mut self, cs: &ConfState) {
        encode_message(&mut self.records, CONF_STATE, cs);
    }

    /// Replaces the WAL by `state`; records staged before are dropped (`state` includes them).
    pub fn set_rewrite(&mut self, state: LogState) {
        self.rewrite = Some(state);
        self.records.clear();
    }

    pub fn is_empty(&self) -> bool {
        self.rewrite.is_none() && self.records.is_empty()
    }

    /// Adds a later job to this one: one write, one sync for both.
    fn merge(&mut self, later: WalJob) {
        if later.rewrite.is_some() {
            self.rewrite = later.rewrite;
            self.records = later.records;
        } else {
            self.records.extend_from_slice(&later.records);
        }
        self.sync |= later.sync;
    }
}

/// The write-ahead log of one member: its segment files.
pub struct Wal {
    dir: PathBuf,
    segment_size: u64,
    /// Sequence number of the tail segment, the one appended to.
    seq: u64,
    tail: File,
    /// Where the next record goes in the tail segment.
    end: u64,
    /// The tail is written (records, then zeros) up to here; past it, only allocated.
    zeroed: u64,
    /// Whether bytes were written to the tail since its last fdatasync.
    unsynced: bool,
}

impl Wal {
    /// Opens the WAL in `dir` (creating an empty one if there is none) and replays it.
    pub fn open(dir: &Path) -> Result<(Self, LogState)> {
        Self::open_with_segment_size(dir, SEGMENT_SIZE)
    }

    /// As [`Wal::open`], with smaller segments for tests.
    pub fn open_with_segment_size(dir: &Path, segment_size: u64) -> Result<(Self, LogState)> {
        fs::create_dir_all(dir).map_err(wal_err(dir))?;
        // A segment whose creation a crash interrupted never existed.
        for item in fs::read_dir(dir).map_err(wal_err(dir))? {
            let path = item.map_err(wal_err(dir))?.path();
            if path.extension().is_some_and(|e| e == "tmp") {
                fs::remove_file(&path).map_err(wal_err(&path))?;
            }
        }
        let mut seqs = list_segments(dir)?;
        if seqs.is_empty() {
            create_segment(dir, 0, segment_size, &[])?;
            seqs.push(0);
        }
        // Replay starts at the newest rewrite; older segments are ones whose deletion after that
        // rewrite was interrupted.
        let mut start = 0;
        for (i, seq) in seqs.iter().enumerate().rev() {
            if starts_with_snapshot(dir, *seq)? {
                start = i;
                break;
            }
        }
        for seq in seqs.drain(..start) {
            let path = segment_path(dir, seq);
            fs::remove_file(&path).map_err(wal_err(&path))?;
        }

        let mut state = LogState::default();
        let mut end = 0;
        let last = *seqs.last().expect("at least one segment");
        for seq in &seqs {
            let path = segment_path(dir, *seq);
            let data = fs::read(&path).map_err(wal_err(&path))?;
            let mut off = 0;
            loop {
                match decode(&data[off..])? {
                    Decoded::Record(r, len) => {
                        state.replay(r)?;
                        off += len;
                    }
                    Decoded::End => break,
                    Decoded::Torn(why) if *seq == last => {
                        tracing::warn!(target: "store::wal", segment = %path.display(), offset = off, why, "torn record at the end of the WAL (a crash mid-write); the log ends before it");
                        break;
                    }
                    Decoded::Torn(why) => {
                        return Err(corrupt("WAL", format!("{} at offset {off}: {why}, but a later segment exists", path.display())));
                    }
                }
            }
            end = off as u64;
        }

        // Open the tail for appending, with nothing but zeros after its logical end.
        let path = segment_path(dir, last);
        let tail = OpenOptions::new().read(true).write(true).open(&path).map_err(wal_err(&path))?;
        tail.set_len(end).map_err(wal_err(&path))?;
        preallocate(&tail, segment_size.max(end)).map_err(wal_err(&path))?;
        tail.sync_all().map_err(wal_err(&path))?;
        tracing::info!(target: "store::wal", dir = %dir.display(), segments = seqs.len(), first_index = state.first_index(), last_index = state.last_index(), "replayed the WAL");
        let wal = Self { dir: dir.to_path_buf(), segment_size, seq: last, tail, end, zeroed: end, unsynced: false };
        Ok((wal, state))
    }

    /// Carries out a job: its rewrite, its records with one `write`, then one `fdatasync` if it
    /// asks for one. Returns how long the `fdatasync` took.
    pub fn run(&mut self, job: WalJob) -> Result<Option<Duration>> {
        if let Some(state) = &job.rewrite {
            self.rewrite(state)?;
        }
        // etcd's failpoints around `storage.Save(rd.HardState, rd.Entries)`, where there is
        // something to save.
        let saving = !job.records.is_empty();
        if saving {
            failpoint!("raftBeforeSave");
        }
        self.write(&job.records)?;
        let fsync = if job.sync { Some(self.sync()?) } else { None };
        if saving {
            failpoint!("raftAfterSave");
        }
        Ok(fsync)
    }

    /// Writes records with one `pwrite`, cutting a new segment first if they would overflow the
    /// tail's preallocated size. Not durable until [`Wal::sync`].
    fn write(&mut self, records: &[u8]) -> Result<()> {
        if records.is_empty() {
            return Ok(());
        }
        if self.end > 0 && self.end + records.len() as u64 > self.segment_size {
            self.cut()?;
        }
        // The segment's path is made only for an error: formatting it per write showed in profiles.
        self.tail.write_all_at(records, self.end).map_err(|e| self.tail_err(e))?;
        self.end += records.len() as u64;
        self.zero_ahead()?;
        self.unsynced = true;
        Ok(())
    }

    /// How far ahead of the end zeros are written at a time: 1 MiB, less in a small segment.
    fn zero_chunk(&self) -> u64 {
        (self.segment_size / 16).clamp(4096, 1 << 20)
    }

    /// Writes zeros after the end when the end has caught up with them (see the module docs):
    /// one chunk, up to the segment's preallocated size. Past the end there are no records, so
    /// nothing is overwritten; the next `fdatasync` makes the zeros durable with the records.
    fn zero_ahead(&mut self) -> Result<()> {
        if self.end + self.zero_chunk() / 2 <= self.zeroed {
            return Ok(());
        }
        let from = self.end.max(self.zeroed);
        let to = (self.end + self.zero_chunk()).min(self.segment_size);
        if to > from {
            let zeros = vec![0u8; (to - from) as usize];
            self.tail.write_all_at(&zeros, from).map_err(|e| self.tail_err(e))?;
            self.zeroed = to;
        }
        Ok(())
    }

    /// `fdatasync`s the tail segment; returns how long it took.
    fn sync(&mut self) -> Result<Duration> {
        // `return` stands for a failed fdatasync: the writer stops and the member exits.
        failpoint!("walBeforeSync", |msg| return Err(self.tail_err(failed_sync("walBeforeSync", msg))));
        // INJECTED BUG, for the tests only (`failpoints` feature, `bugSkipFsync=return`): the
        // records stay in the page cache, and a power loss takes them (e2e/tests/lazyfs.rs).
        if injected_bug!("bugSkipFsync") {
            self.unsynced = false;
            return Ok(Duration::ZERO);
        }
        let t = Instant::now();
        self.tail.sync_data().map_err(|e| self.tail_err(e))?;
        failpoint!("walAfterSync", |msg| return Err(self.tail_err(failed_sync("walAfterSync", msg))));
        self.unsynced = false;
        Ok(t.elapsed())
    }

    /// An I/O error of the tail segment, naming its file.
    fn tail_err(&self, source: io::Error) -> Error {
        wal_err(&segment_path(&self.dir, self.seq))(source)
    }

    /// Starts a new, empty tail segment once the current one is durable.
    fn cut(&mut self) -> Result<()> {
        if self.unsynced {
            self.sync()?;
        }
        let seq = self.seq + 1;
        self.tail = create_segment(&self.dir, seq, self.segment_size, &[])?;
        self.seq = seq;
        self.end = 0;
        self.zeroed = 0;
        tracing::debug!(target: "store::wal", segment = seq, "cut a new WAL segment");
        Ok(())
    }

    /// Replaces the WAL by one segment holding `state` (compaction, or a leader's snapshot),
    /// durably, then deletes the older segments.
    fn rewrite(&mut self, state: &LogState) -> Result<()> {
        let mut buf = Vec::new();
        encode(&mut buf, SNAPSHOT, |b| {
            b.extend_from_slice(&state.snapshot.0.to_be_bytes());
            b.extend_from_slice(&state.snapshot.1.to_be_bytes());
        });
        encode_message(&mut buf, CONF_STATE, &state.conf_state);
        encode_message(&mut buf, HARD_STATE, &state.hard_state);
        for e in &state.entries {
            encode_message(&mut buf, ENTRY, e);
        }
        let seq = self.seq + 1;
        self.tail = create_segment(&self.dir, seq, self.segment_size, &buf)?;
        self.seq = seq;
        self.end = buf.len() as u64;
        self.zeroed = self.end;
        self.unsynced = false;
        for old in list_segments(&self.dir)?.into_iter().filter(|s| *s < seq) {
            let path = segment_path(&self.dir, old);
            fs::remove_file(&path).map_err(wal_err(&path))?;
        }
        Ok(())
    }
}

/// What the [`WalWriter`] reports after each write: the last Ready it covered, the messages that
/// waited for it, and how long its `fdatasync` took.
#[derive(Debug)]
pub struct Written {
    pub number: Option<u64>,
    pub messages: Vec<Message>,
    pub fsync: Option<Duration>,
}

type Submission = (WalJob, Option<u64>, Vec<Message>);

/// The WAL on a thread of its own, so that the raft thread goes on stepping messages, committing
/// and applying while a Ready's `fdatasync` runs (TiKV's async write workers; etcd fsyncs in its
/// raft goroutine but applies in another). Jobs are carried out in order; whatever queued up
/// during one `fdatasync` goes into the next write and `fdatasync` together (group commit across
/// Readies). The channel is unbounded because the raft thread must never block on it: what
/// queues is what raft produced during one `fdatasync`.
pub struct WalWriter {
    tx: Option<std_mpsc::Sender<Submission>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl WalWriter {
    /// Starts the writer. `done` is called on the writer's thread after each write, with the
    /// error if one failed (the writer then stops: see the module docs).
    pub fn start(mut wal: Wal, mut done: impl FnMut(Result<Written>) + Send + 'static) -> Result<Self> {
        let (tx, rx) = std_mpsc::channel::<Submission>();
        let thread = std::thread::Builder::new().name("wal".into()).spawn(move || {
            let failed = loop {
                let Ok((mut job, mut number, mut messages)) = rx.recv() else { break None };
                while let Ok((later, n, m)) = rx.try_recv() {
                    job.merge(later);
                    number = n.or(number);
                    messages.extend(m);
                }
                match wal.run(job) {
                    Ok(fsync) => done(Ok(Written { number, messages, fsync })),
                    Err(e) => break Some(e),
                }
            };
            if let Some(e) = failed {
                drop(rx); // from now on `submit` fails
                done(Err(e));
            }
        })?;
        Ok(Self { tx: Some(tx), thread: Some(thread) })
    }

    /// Queues a job, the Ready it persists and the messages to send once it is written.
    pub fn submit(&self, job: WalJob, number: Option<u64>, messages: Vec<Message>) -> Result<()> {
        let tx = self.tx.as_ref().expect("the sender lives as long as the writer");
        tx.send((job, number, messages)).map_err(|_| Error::Stopped)
    }
}

impl Drop for WalWriter {
    /// Lets the writer finish what was queued, then waits for it.
    fn drop(&mut self) {
        drop(self.tx.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(index: u64, term: u64) -> Entry {
        Entry { index, term, data: format!("entry {index} of term {term}").into_bytes().into(), ..Default::default() }
    }

    fn hs(term: u64, vote: u64, commit: u64) -> HardState {
        HardState { term, vote, commit, ..Default::default() }
    }

    fn ids(state: &LogState) -> Vec<(u64, u64)> {
        state.entries.iter().map(|e| (e.index, e.term)).collect()
    }

    /// Appends like the Ready loop does: the HardState, then the entries, one write, one sync.
    fn save(wal: &mut Wal, h: Option<HardState>, ents: &[Entry]) {
        let mut job = WalJob { sync: true, ..Default::default() };
        if let Some(h) = h {
            job.push_hard_state(&h);
        }
        job.push_entries(ents);
        assert!(wal.run(job).unwrap().is_some(), "synced");
    }

    #[test]
    fn a_new_wal_is_empty_and_replays_what_was_written() {
        let dir = tempfile::tempdir().unwrap();
        let (mut wal, state) = Wal::open(dir.path()).unwrap();
        assert_eq!(state, LogState::default());
        let mut job = WalJob::default();
        job.push_conf_state(&ConfState::from((vec![1, 2, 3], vec![])));
        assert_eq!(wal.run(job).unwrap(), None, "written, not synced");
        save(&mut wal, Some(hs(1, 1, 0)), &[entry(1, 1), entry(2, 1)]);
        save(&mut wal, Some(hs(1, 1, 2)), &[entry(3, 1)]);
        drop(wal);

        let (_, state) = Wal::open(dir.path()).unwrap();
        assert_eq!(ids(&state), vec![(1, 1), (2, 1), (3, 1)]);
        assert_eq!(state.hard_state, hs(1, 1, 2));
        assert_eq!(state.conf_state.voters, vec![1, 2, 3]);
        assert_eq!(state.entries[1], entry(2, 1), "entries come back byte for byte");
    }

    #[test]
    fn a_later_entry_replaces_the_conflicting_suffix_on_replay() {
        let dir = tempfile::tempdir().unwrap();
        let (mut wal, _) = Wal::open(dir.path()).unwrap();
        save(&mut wal, Some(hs(1, 1, 1)), &[entry(1, 1), entry(2, 1), entry(3, 1), entry(4, 1)]);
        // A new leader of term 2 overwrites 3.. with a shorter suffix.
        save(&mut wal, Some(hs(2, 2, 1)), &[entry(3, 2)]);
        drop(wal);
        let (mut wal, state) = Wal::open(dir.path()).unwrap();
        assert_eq!(ids(&state), vec![(1, 1), (2, 1), (3, 2)]);
        assert_eq!(state.hard_state.term, 2);
        // And appending after the replay continues the replaced log.
        save(&mut wal, None, &[entry(4, 2)]);
        drop(wal);
        let (_, state) = Wal::open(dir.path()).unwrap();
        assert_eq!(ids(&state), vec![(1, 1), (2, 1), (3, 2), (4, 2)]);
    }

    /// The tail segment's path and the logical end of its records.
    fn tail(dir: &Path) -> (PathBuf, u64) {
        let (wal, _) = Wal::open(dir).unwrap();
        (segment_path(dir, wal.seq), wal.end)
    }

    fn torn_tail_is_dropped_and_cannot_resurface(damage: impl Fn(&File, u64)) {
        let dir = tempfile::tempdir().unwrap();
        let (mut wal, _) = Wal::open(dir.path()).unwrap();
        save(&mut wal, Some(hs(1, 1, 0)), &[entry(1, 1), entry(2, 1)]);
        let good_end = wal.end;
        save(&mut wal, None, &[entry(3, 1), entry(4, 1)]);
        let full_end = wal.end;
        drop(wal);
        let (path, _) = tail(dir.path());
        let f = OpenOptions::new().write(true).open(&path).unwrap();
        // Entry 3 is the first record after `good_end`: damage it, leave entry 4 intact.
        damage(&f, good_end);
        drop(f);

        let (mut wal, state) = Wal::open(dir.path()).unwrap();
        assert_eq!(ids(&state), vec![(1, 1), (2, 1)], "the log ends before the torn record");
        assert_eq!(wal.end, good_end);
        // Entry 4's bytes were zeroed with the rest of the tail: appending a record of another
        // length at entry 3's place must not bring it back.
        let mut long = entry(3, 2);
        long.data = vec![7u8; 100].into();
        save(&mut wal, Some(hs(2, 0, 2)), &[long]);
        assert!(wal.end != full_end);
        drop(wal);
        let (_, state) = Wal::open(dir.path()).unwrap();
        assert_eq!(ids(&state), vec![(1, 1), (2, 1), (3, 2)]);
    }

    #[test]
    fn a_record_cut_short_ends_the_log() {
        // Only the first bytes of the record reached the disk; the rest reads as zeros.
        torn_tail_is_dropped_and_cannot_resurface(|f, at| f.write_all_at(&[0u8; 20], at + 12).unwrap());
    }

    #[test]
    fn a_record_with_garbage_ends_the_log() {
        torn_tail_is_dropped_and_cannot_resurface(|f, at| f.write_all_at(b"garbage", at + HEADER as u64 + 2).unwrap());
    }

    #[test]
    fn a_file_truncated_mid_record_ends_the_log() {
        let dir = tempfile::tempdir().unwrap();
        let (mut wal, _) = Wal::open(dir.path()).unwrap();
        save(&mut wal, Some(hs(1, 1, 0)), &[entry(1, 1), entry(2, 1)]);
        let end = wal.end;
        drop(wal);
        let (path, _) = tail(dir.path());
        OpenOptions::new().write(true).open(&path).unwrap().set_len(end - 5).unwrap();
        let (mut wal, state) = Wal::open(dir.path()).unwrap();
        assert_eq!(ids(&state), vec![(1, 1)]);
        save(&mut wal, None, &[entry(2, 2)]);
        drop(wal);
        let (_, state) = Wal::open(dir.path()).unwrap();
        assert_eq!(ids(&state), vec![(1, 1), (2, 2)]);
        assert_eq!(fs::metadata(&path).unwrap().len(), SEGMENT_SIZE, "the tail is preallocated again");
    }

    #[test]
    fn appends_write_zeros_ahead_of_themselves_and_replay_reads_only_records() {
        let dir = tempfile::tempdir().unwrap();
        let size = 64 << 10;
        let (mut wal, _) = Wal::open_with_segment_size(dir.path(), size).unwrap();
        let chunk = wal.zero_chunk();
        assert_eq!(chunk, 4096);
        let mut fills = 0;
        let mut zeroed = wal.zeroed;
        for i in 1..=600 {
            save(&mut wal, None, &[entry(i, 1)]);
            assert!(wal.zeroed >= wal.end + chunk / 2 || wal.zeroed == size, "zeros stay ahead of the end");
            if wal.zeroed != zeroed {
                fills += 1;
                zeroed = wal.zeroed;
                let mut after = vec![0xffu8; (wal.zeroed - wal.end) as usize];
                wal.tail.read_exact_at(&mut after, wal.end).unwrap();
                assert!(after.iter().all(|b| *b == 0), "only zeros after the end");
            }
        }
        assert_eq!(wal.seq, 0, "one segment");
        assert!(fills > 4 && fills < 600 / 4, "zeros are written a chunk at a time, not per append: {fills} fills");
        drop(wal);

        // Replay stops at the zeros; the reopened tail zeroes again from its end on.
        let (mut wal, state) = Wal::open_with_segment_size(dir.path(), size).unwrap();
        assert_eq!(ids(&state), (1..=600).map(|i| (i, 1)).collect::<Vec<_>>());
        assert_eq!(wal.zeroed, wal.end);
        save(&mut wal, None, &[entry(601, 1)]);
        assert!(wal.zeroed >= wal.end + chunk / 2);
        drop(wal);
        let (_, state) = Wal::open_with_segment_size(dir.path(), size).unwrap();
        assert_eq!(state.last_index(), 601);
    }

    #[test]
    fn damage_before_the_tail_segment_is_corruption_not_a_torn_write() {
        let dir = tempfile::tempdir().unwrap();
        let (mut wal, _) = Wal::open_with_segment_size(dir.path(), 256).unwrap();
        for i in 1..=10 {
            save(&mut wal, None, &[entry(i, 1)]);
        }
        assert!(wal.seq > 0, "small segments were cut");
        drop(wal);
        let first = segment_path(dir.path(), 0);
        OpenOptions::new().write(true).open(&first).unwrap().write_all_at(b"garbage", 20).unwrap();
        assert!(matches!(Wal::open_with_segment_size(dir.path(), 256), Err(Error::Corrupt { .. })));
    }

    #[test]
    fn segments_are_cut_when_full_and_replayed_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let (mut wal, _) = Wal::open_with_segment_size(dir.path(), 300).unwrap();
        for i in 1..=20 {
            save(&mut wal, Some(hs(1, 1, i - 1)), &[entry(i, 1)]);
        }
        // A batch larger than a segment goes whole into a fresh one, which grows past its size.
        let big: Vec<Entry> = (21..=40).map(|i| entry(i, 1)).collect();
        save(&mut wal, None, &big);
        assert!(list_segments(dir.path()).unwrap().len() > 3);
        drop(wal);
        let (_, state) = Wal::open_with_segment_size(dir.path(), 300).unwrap();
        assert_eq!(ids(&state), (1..=40).map(|i| (i, 1)).collect::<Vec<_>>());
        assert_eq!(state.hard_state.commit, 19);
    }

    #[test]
    fn a_rewrite_survives_reopen_and_removes_older_segments() {
        let dir = tempfile::tempdir().unwrap();
        let (mut wal, mut state) = Wal::open_with_segment_size(dir.path(), 300).unwrap();
        state.conf_state = ConfState::from((vec![1, 2, 3], vec![]));
        let mut job = WalJob::default();
        job.push_conf_state(&state.conf_state);
        wal.run(job).unwrap();
        for i in 1..=20 {
            let e = entry(i, 1 + i / 10);
            state.append(std::slice::from_ref(&e)).unwrap();
            save(&mut wal, None, &[e]);
        }
        state.hard_state = hs(3, 1, 20);
        state.compact(15).unwrap();
        let mut job = WalJob::default();
        job.set_rewrite(state.clone());
        wal.run(job).unwrap();
        assert_eq!(list_segments(dir.path()).unwrap(), vec![wal.seq], "only the rewritten segment is left");
        // The log continues in the rewritten segment.
        let e = entry(21, 3);
        state.append(std::slice::from_ref(&e)).unwrap();
        save(&mut wal, None, &[e]);
        drop(wal);

        let (_, replayed) = Wal::open_with_segment_size(dir.path(), 300).unwrap();
        assert_eq!(replayed, state);
        assert_eq!(replayed.snapshot, (15, 2));
        assert_eq!(replayed.term(15).unwrap(), 2);
        assert_eq!(replayed.first_index(), 16);
    }

    #[test]
    fn an_interrupted_rewrite_leaves_a_consistent_log() {
        let dir = tempfile::tempdir().unwrap();
        let (mut wal, mut state) = Wal::open(dir.path()).unwrap();
        let ents: Vec<Entry> = (1..=10).map(|i| entry(i, 1)).collect();
        state.append(&ents).unwrap();
        save(&mut wal, None, &ents);
        state.compact(5).unwrap();
        wal.rewrite(&state).unwrap();
        let rewritten = wal.seq;
        drop(wal);
        // As if the crash came before the rewrite's rename: a leftover temporary...
        fs::write(segment_path(dir.path(), rewritten + 1).with_extension("wal.tmp"), b"half a segment").unwrap();
        // ...and after it, but before the older segments were deleted.
        fs::write(segment_path(dir.path(), 0), b"an old segment, partly overwritten").unwrap();
        let (_, replayed) = Wal::open(dir.path()).unwrap();
        assert_eq!(replayed, state);
        assert_eq!(list_segments(dir.path()).unwrap(), vec![rewritten]);
        assert!(!segment_path(dir.path(), rewritten + 1).with_extension("wal.tmp").exists());
    }

    #[test]
    fn a_write_error_is_returned_not_swallowed() {
        let dir = tempfile::tempdir().unwrap();
        let (mut wal, _) = Wal::open(dir.path()).unwrap();
        // A descriptor that cannot write stands in for a full or failing disk.
        wal.tail = File::open(segment_path(dir.path(), wal.seq)).unwrap();
        let mut job = WalJob::default();
        job.push_entries(&[entry(1, 1)]);
        assert!(matches!(wal.run(job), Err(Error::Wal { .. })));
    }

    #[test]
    fn the_writer_thread_reports_a_write_error_and_stops() {
        let dir = tempfile::tempdir().unwrap();
        let (mut wal, _) = Wal::open(dir.path()).unwrap();
        wal.tail = File::open(segment_path(dir.path(), wal.seq)).unwrap();
        let (tx, rx) = std_mpsc::channel();
        let writer = WalWriter::start(wal, move |w| tx.send(w.map(|w| w.number)).unwrap()).unwrap();
        let mut job = WalJob { sync: true, ..Default::default() };
        job.push_entries(&[entry(1, 1)]);
        writer.submit(job, Some(1), vec![Message::default()]).unwrap();
        assert!(matches!(rx.recv().unwrap(), Err(Error::Wal { .. })), "the error is reported, the messages are not sent");
        // The writer is gone: later jobs are refused, not silently dropped.
        assert!(matches!(writer.submit(WalJob::default(), Some(2), vec![]), Err(Error::Stopped)));
    }

    #[test]
    fn the_writer_thread_writes_in_order_and_reports_each_write() {
        let dir = tempfile::tempdir().unwrap();
        let (wal, _) = Wal::open(dir.path()).unwrap();
        let (tx, rx) = std_mpsc::channel();
        let writer = WalWriter::start(wal, move |w| tx.send(w.map(|w| (w.number, w.messages.len(), w.fsync.is_some()))).unwrap()).unwrap();
        let mut state = LogState::default();
        for i in 1..=50u64 {
            let mut job = WalJob { sync: i % 2 == 0, ..Default::default() };
            job.push_hard_state(&hs(1, 1, i - 1));
            job.push_entries(&[entry(i, 1)]);
            state.append(&[entry(i, 1)]).unwrap();
            if i == 30 {
                // A compaction in the middle: it supersedes what was queued before it.
                state.compact(20).unwrap();
                state.hard_state = hs(1, 1, 29);
                job.set_rewrite(state.clone());
            }
            writer.submit(job, Some(i), vec![Message::default()]).unwrap();
        }
        // Reports come in order; queued jobs may share one report (group commit).
        let (mut last, mut messages) = (0, 0);
        while last < 50 {
            let (number, n, _) = rx.recv().unwrap().unwrap();
            let number = number.unwrap();
            assert!(number > last);
            last = number;
            messages += n;
        }
        assert_eq!(messages, 50, "every message comes back once");
        drop(writer);
        let (_, replayed) = Wal::open(dir.path()).unwrap();
        assert_eq!(replayed.snapshot, (20, 1));
        assert_eq!(ids(&replayed), (21..=50).map(|i| (i, 1)).collect::<Vec<_>>());
        assert_eq!(replayed.hard_state.commit, 49);
    }
}
