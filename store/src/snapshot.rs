//! Mirrors etcd's backend snapshot (`mvcc/backend/backend.go` `Snapshot`, `WriteTo`) and the file
//! `etcdctl snapshot save` writes from the `Maintenance.Snapshot` stream (`v3rpc/maintenance.go`):
//! a consistent point-in-time copy of a member's whole state machine, followed by the sha256 of
//! everything before it.
//!
//! etcd's file is its bbolt database; ours is the store's own format, so `etcdctl snapshot
//! status` cannot read it, and `kubelab store snapshot restore` ([`crate::snapshot_restore`])
//! is what restores it. The layout:
//!
//! ```text
//! "kubelab-snapshot"       16 bytes, the magic
//! body                     a SnapshotData message (apply.rs): every MVCC record with its
//!                          revision, the current and compacted revisions, leases, members, alarms
//! zeros                    padding, so that the payload is a multiple of 512 bytes
//! body length              8 bytes, big-endian
//! sha256(payload)          32 bytes: etcd's trailing integrity hash
//! ```
//!
//! The padding is there because etcd's tools find the hash by the file's length (`size % 512 ==
//! 32`: a bbolt file is made of whole pages), and etcdctl 3.5 refuses a download without it.
//! The body is the same encoding a leader sends a follower behind its log ([`StateMachine::
//! snapshot_data`](crate::apply::StateMachine::snapshot_data)), written record by record so that a
//! large key space is never encoded twice in memory.

use std::io::Write;
use std::sync::Arc;

use prost::Message as _;
use prost::encoding::{self, WireType};

use crate::apply::{SnapshotData, StateMachine};
use crate::error::{Error, Result};
use crate::mvcc::{Record, Revision};

pub const MAGIC: &[u8; 16] = b"kubelab-snapshot";
/// etcd's `sha256.Size`.
pub const SHA256_SIZE: usize = 32;
/// The payload is padded to a multiple of this (etcd's `hasChecksum`: `size % 512 == 32`).
pub const ALIGN: u64 = 512;
/// Bytes per `SnapshotResponse` (etcd's `snapshotSendBufferSize`, 32 KiB).
pub const SEND_BUFFER_SIZE: usize = 32 * 1024;

/// The state machine at one applied index, as [`SnapshotView::of`] takes
/// it under its lock: the records are shared with the live key space, not copied.
pub struct SnapshotView {
    pub records: Vec<(Revision, Arc<Record>)>,
    /// Everything else, `records` left empty.
    pub rest: SnapshotData,
}

impl SnapshotView {
    /// A point-in-time view of the whole state machine, cheap to take under its lock (the
    /// records are shared, not copied) and encoded after the lock is released.
    pub fn of(sm: &StateMachine) -> Self {
        Self { records: sm.kv.records_shared(), rest: sm.snapshot_rest() }
    }
}

/// Field 1 of `SnapshotData`, one `SnapshotRecord` (main 1, sub 2, tombstone 3, kv 4), encoded
/// from the shared record without copying it; defaults are skipped as prost skips them, so the
/// bytes are those `SnapshotData::encode` would give.
fn record_len(rev: &Revision, rec: &Record) -> usize {
    let mut n = 0;
    if rev.main != 0 {
        n += encoding::int64::encoded_len(1, &rev.main);
    }
    if rev.sub != 0 {
        n += encoding::int64::encoded_len(2, &rev.sub);
    }
    if rec.tombstone {
        n += encoding::bool::encoded_len(3, &rec.tombstone);
    }
    n + encoding::message::encoded_len(4, &rec.kv)
}

fn encode_record(rev: &Revision, rec: &Record, buf: &mut Vec<u8>) {
    encoding::encode_key(1, WireType::LengthDelimited, buf);
    encoding::encode_varint(record_len(rev, rec) as u64, buf);
    if rev.main != 0 {
        encoding::int64::encode(1, &rev.main, buf);
    }
    if rev.sub != 0 {
        encoding::int64::encode(2, &rev.sub, buf);
    }
    if rec.tombstone {
        encoding::bool::encode(3, &rec.tombstone, buf);
    }
    encoding::message::encode(4, &rec.kv, buf);
}

impl SnapshotView {
    /// The revision the view was taken at.
    pub fn revision(&self) -> i64 {
        self.rest.revision
    }

    /// Bytes of the `SnapshotData` body.
    pub fn body_len(&self) -> u64 {
        let records: usize = self
            .records
            .iter()
            .map(|(rev, rec)| {
                let n = record_len(rev, rec);
                encoding::key_len(1) + encoding::encoded_len_varint(n as u64) + n
            })
            .sum();
        (records + self.rest.encoded_len()) as u64
    }

    /// Writes the `SnapshotData` body.
    pub fn encode_to(&self, w: &mut impl Write) -> std::io::Result<()> {
        let mut buf = Vec::with_capacity(SEND_BUFFER_SIZE);
        for (rev, rec) in &self.records {
            encode_record(rev, rec, &mut buf);
            if buf.len() >= SEND_BUFFER_SIZE {
                w.write_all(&buf)?;
                buf.clear();
            }
        }
        // Fields 2 to 7 follow field 1, as prost orders them.
        self.rest.encode(&mut buf).expect("encoding into a Vec cannot fail");
        w.write_all(&buf)
    }

    /// The size of the whole file: payload and hash.
    pub fn file_len(&self) -> u64 {
        payload_len(self.body_len()) + SHA256_SIZE as u64
    }

    /// Writes the whole file (payload, then its sha256); returns its length.
    pub fn write_file(&self, w: &mut impl Write) -> std::io::Result<u64> {
        let body_len = self.body_len();
        let mut hashed = Hashing { inner: w, sha: aws_lc_rs::digest::Context::new(&aws_lc_rs::digest::SHA256), written: 0 };
        hashed.write_all(MAGIC)?;
        self.encode_to(&mut hashed)?;
        if hashed.written != MAGIC.len() as u64 + body_len {
            return Err(std::io::Error::other(format!("snapshot body is {} bytes, {body_len} expected", hashed.written - MAGIC.len() as u64)));
        }
        let padding = payload_len(body_len) - hashed.written - 8;
        hashed.write_all(&vec![0; padding as usize])?;
        hashed.write_all(&body_len.to_be_bytes())?;
        let Hashing { inner, sha, written } = hashed;
        inner.write_all(sha.finish().as_ref())?;
        Ok(written + SHA256_SIZE as u64)
    }
}

/// Payload bytes for a body of `body_len`: magic, body, padding and the length, rounded up to
/// [`ALIGN`].
fn payload_len(body_len: u64) -> u64 {
    (MAGIC.len() as u64 + body_len + 8).div_ceil(ALIGN) * ALIGN
}

/// A writer that hashes what passes through it.
struct Hashing<'a, W: Write> {
    inner: &'a mut W,
    sha: aws_lc_rs::digest::Context,
    written: u64,
}

impl<W: Write> Write for Hashing<'_, W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.sha.update(&buf[..n]);
        self.written += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// How etcd prints a hash in its mismatch error (Go's `%v` of a byte slice).
fn go_bytes(b: &[u8]) -> String {
    format!("[{}]", b.iter().map(u8::to_string).collect::<Vec<_>>().join(" "))
}

/// Checks a snapshot file's trailing sha256 (unless `skip_hash_check`) and decodes it, with
/// etcd's errors for a file without a hash or with the wrong one.
pub fn read_file(file: &[u8], skip_hash_check: bool) -> Result<SnapshotData> {
    let has_hash = file.len() as u64 % ALIGN == SHA256_SIZE as u64;
    if !has_hash && !skip_hash_check {
        return Err(Error::Snapshot("snapshot missing hash but --skip-hash-check=false".into()));
    }
    let payload = if has_hash { &file[..file.len() - SHA256_SIZE] } else { file };
    if has_hash && !skip_hash_check {
        let sha = &file[file.len() - SHA256_SIZE..];
        let db_sha = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, payload);
        if sha != db_sha.as_ref() {
            return Err(Error::Snapshot(format!("expected sha256 {}, got {}", go_bytes(sha), go_bytes(db_sha.as_ref()))));
        }
    }
    let not_ours = || {
        Error::Snapshot(
            "not a kubelab store snapshot (an etcd snapshot is a bbolt database, which this store cannot read)".into(),
        )
    };
    if payload.len() < MAGIC.len() + 8 || &payload[..MAGIC.len()] != MAGIC {
        return Err(not_ours());
    }
    let len_at = payload.len() - 8;
    let body_len = u64::from_be_bytes(payload[len_at..].try_into().expect("8 bytes")) as usize;
    let body = payload.get(MAGIC.len()..MAGIC.len().saturating_add(body_len)).filter(|_| MAGIC.len() + body_len <= len_at).ok_or_else(not_ours)?;
    SnapshotData::decode(body).map_err(|e| Error::Corrupt { what: "snapshot", detail: e.to_string() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apply::Request;
    use crate::engine::{SledEngine, WriteBatch};
    use proto::etcd::*;

    fn sm() -> StateMachine {
        StateMachine::load(Arc::new(SledEngine::temporary().unwrap()), 1, 16).unwrap()
    }

    fn filled() -> StateMachine {
        let mut s = sm();
        let mut b = WriteBatch::default();
        let now = std::time::Instant::now();
        s.apply_entry(1, &crate::apply::InternalRaftRequest { origin: 0, seq: 0, request: Some(Request::LeaseGrant(PbLeaseGrantRequest { id: 9, ttl: 60 })) }.encode_to_vec(), now, &mut b);
        for i in 0..2000u64 {
            let p = PbPutRequest { key: format!("/registry/k{}", i % 700).into(), value: vec![b'v'; (i % 50) as usize], lease: if i % 3 == 0 { 9 } else { 0 }, ..Default::default() };
            let e = crate::apply::InternalRaftRequest { origin: 0, seq: 0, request: Some(Request::Put(p)) };
            s.apply_entry(i + 2, &e.encode_to_vec(), now, &mut b);
        }
        let d = crate::apply::InternalRaftRequest { origin: 0, seq: 0, request: Some(Request::DeleteRange(PbDeleteRequest { key: b"/registry/k1".to_vec(), ..Default::default() })) };
        s.apply_entry(3000, &d.encode_to_vec(), now, &mut b);
        let c = crate::apply::InternalRaftRequest { origin: 0, seq: 0, request: Some(Request::Compaction(PbCompactionRequest { revision: 500, physical: false })) };
        s.apply_entry(3001, &c.encode_to_vec(), now, &mut b);
        s
    }

    #[test]
    fn the_file_holds_the_state_machine_with_etcds_trailing_hash() {
        let s = filled();
        let view = SnapshotView::of(&s);
        let mut file = Vec::new();
        let n = view.write_file(&mut file).unwrap();
        assert_eq!(n, file.len() as u64);
        assert_eq!(n, view.file_len(), "the length announced before streaming is the length streamed");
        assert_eq!(file.len() as u64 % ALIGN, SHA256_SIZE as u64, "etcd finds the hash by the length");
        let data = read_file(&file, false).unwrap();
        assert_eq!(data.encode_to_vec(), s.snapshot_data(), "the body is the follower snapshot's encoding");
        assert_eq!((data.revision, data.compacted), (2001, 500));
        assert_eq!(data.leases.len(), 1);
    }

    #[test]
    fn a_corrupt_or_foreign_file_is_refused_with_etcds_messages() {
        let mut file = Vec::new();
        SnapshotView::of(&filled()).write_file(&mut file).unwrap();
        let mut bad = file.clone();
        bad[100] ^= 0xff;
        let err = read_file(&bad, false).unwrap_err().to_string();
        assert!(err.starts_with("expected sha256 ["), "{err}");
        assert!(err.contains("], got ["), "{err}");
        // --skip-hash-check reads a file whose hash does not match.
        let mut body_flip = file.clone();
        let last = body_flip.len() - 1;
        body_flip[last] ^= 0xff;
        assert!(read_file(&body_flip, true).is_ok());
        let err = read_file(&file[..file.len() - 1], false).unwrap_err().to_string();
        assert_eq!(err, "snapshot missing hash but --skip-hash-check=false");
        let mut bbolt = vec![0u8; 4096];
        bbolt.extend_from_slice(aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, &bbolt).as_ref());
        let err = read_file(&bbolt, false).unwrap_err().to_string();
        assert!(err.contains("not a kubelab store snapshot"), "{err}");
    }
}
