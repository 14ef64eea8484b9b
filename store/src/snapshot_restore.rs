//! Mirrors etcd's `etcdutl/snapshot/v3_snapshot.go` (`Restore`): `kubelab store snapshot
//! restore FILE` makes a fresh data directory for one member of a *new* cluster from a snapshot
//! file ([`crate::snapshot`]) that `etcdctl snapshot save` took from any member.
//!
//! As etcd's restore does, it
//! 1. checks the file's trailing sha256 (unless `--skip-hash-check`) and that the data directory
//!    is empty or missing;
//! 2. keeps the key space as it was (every revision since the compacted one, the current and
//!    compacted revisions), the leases and the alarms; drops the old cluster's member records and
//!    removed IDs (each new member records the members of `--initial-cluster` when it first
//!    starts, and publishes its name again);
//! 3. writes the data directory of a member of a new cluster: its identity (member and cluster
//!    ids from `--name`, `--initial-cluster` and `--initial-cluster-token`), the state machine at
//!    raft index N (N the number of members, etcd's `commit`), and a raft log that starts with a
//!    snapshot at index N, term 1, whose voters are the members of `--initial-cluster`.
//!
//! Every member of the new cluster is restored from the same file with its own `--name` (and the
//! same `--initial-cluster` and token), so all of them start at the same index with the same
//! state, and elect a leader as a fresh cluster would. Start them with the same flags.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use raft::eraftpb::{ConfState, SnapshotMetadata};

use crate::apply::StateMachine;
use crate::config::{self, Peer};
use crate::engine::{Engine, SledEngine, WriteBatch, keys};
use crate::error::{Error, Result};
use crate::raft_storage::PeerStorage;

/// What `kubelab store snapshot restore` is told (etcdutl's flags).
#[derive(Clone, Debug)]
pub struct RestoreConfig {
    /// The snapshot file.
    pub snapshot_path: PathBuf,
    /// `--name`: the member this data directory is for.
    pub name: String,
    /// `--data-dir`: must be empty or missing.
    pub output_data_dir: PathBuf,
    /// `--initial-cluster` (name=peer-url,...).
    pub initial_cluster: String,
    /// `--initial-cluster-token`.
    pub initial_cluster_token: String,
    /// `--initial-advertise-peer-urls`: this member's, which `--initial-cluster` must list.
    pub peer_urls: Vec<String>,
    /// `--skip-hash-check`: restore a file without (or with a wrong) hash, such as a member's
    /// data copied by hand.
    pub skip_hash_check: bool,
}

/// What a restore produced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Restored {
    pub member_id: u64,
    pub cluster_id: u64,
    pub revision: i64,
    pub compacted: i64,
    pub keys: usize,
    /// The raft index (and applied index) the new cluster starts from.
    pub index: u64,
}

fn dir_is_empty(dir: &Path) -> bool {
    std::fs::read_dir(dir).map(|mut d| d.next().is_none()).unwrap_or(false)
}

/// Checks the flags hang together, as etcd does before it touches anything.
fn members(cfg: &RestoreConfig) -> Result<Vec<Peer>> {
    let peers = config::parse_initial_cluster(&cfg.initial_cluster, &cfg.initial_cluster_token)?;
    let me = peers.iter().find(|p| p.name == cfg.name).ok_or_else(|| {
        Error::Config(format!("member {:?} has no entry in --initial-cluster={}", cfg.name, cfg.initial_cluster))
    })?;
    for u in &cfg.peer_urls {
        if !me.peer_urls.contains(u) {
            return Err(Error::Config(format!(
                "--initial-advertise-peer-urls has {u} but missing from --initial-cluster={}",
                cfg.initial_cluster
            )));
        }
    }
    Ok(peers)
}

/// Restores the snapshot into a fresh data directory (see the module docs).
pub fn restore(cfg: &RestoreConfig) -> Result<Restored> {
    let peers = members(cfg)?;
    let data_dir = &cfg.output_data_dir;
    if data_dir.exists() && !dir_is_empty(data_dir) {
        return Err(Error::Snapshot(format!("data-dir {:?} not empty or could not be read", data_dir.display().to_string())));
    }
    let file = std::fs::read(&cfg.snapshot_path)
        .map_err(|e| Error::Config(format!("{}: {e}", cfg.snapshot_path.display())))?;
    let mut data = crate::snapshot::read_file(&file, cfg.skip_hash_check)?;
    // The old cluster's members are not this one's.
    data.members.clear();
    data.removed.clear();
    let (revision, compacted) = (data.revision, data.compacted);
    let body = prost::Message::encode_to_vec(&data);
    drop(file);

    let member_id = config::member_id(&cfg.name, &cfg.initial_cluster_token);
    let cluster_id = config::cluster_id(&peers);
    // etcd's `commit`: the new cluster's log starts after one entry per member.
    let index = peers.len() as u64;
    let dir = data_dir.join("member");
    std::fs::create_dir_all(&dir)?;
    let engine: Arc<dyn Engine> = Arc::new(SledEngine::open(&dir.join("db"))?);
    let mut identity = WriteBatch::default();
    identity.put(keys::IDENTITY.to_vec(), crate::server::identity_record(&cfg.name, member_id, cluster_id).into_bytes());
    engine.write(identity)?;

    let sm = Arc::new(RwLock::new(StateMachine::load(engine.clone(), 1, 1)?));
    let mut restored = WriteBatch::default();
    sm.write().expect("state machine lock").restore(&body, index, &mut restored)?;
    let keys = sm.read().expect("state machine lock").kv.live_keys();
    let mut storage = PeerStorage::open(&dir.join("wal"), engine.clone(), sm.clone())?;
    let mut meta = SnapshotMetadata { index, term: 1, ..Default::default() };
    meta.set_conf_state(ConfState::from((peers.iter().map(|p| p.id).collect::<Vec<_>>(), vec![])));
    // The state machine and the snapshot marker are flushed to the engine first, then the WAL
    // is written starting at the snapshot (the order a leader's snapshot is installed in).
    storage.apply_snapshot(&meta, restored)?;
    storage.persist(None, true, Vec::new())?;
    drop(storage);
    engine.flush()?;
    tracing::info!(
        target: "store::snapshot",
        path = %cfg.snapshot_path.display(),
        data_dir = %data_dir.display(),
        member = %format!("{member_id:x}"),
        cluster = %format!("{cluster_id:x}"),
        revision,
        index = meta.index,
        term = meta.term,
        "restored snapshot"
    );
    Ok(Restored { member_id, cluster_id, revision, compacted, keys, index })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apply::{InternalRaftRequest, Request};
    use prost::Message as _;
    use proto::etcd::*;

    fn cfg(file: &Path, name: &str, dir: &Path) -> RestoreConfig {
        RestoreConfig {
            snapshot_path: file.to_path_buf(),
            name: name.into(),
            output_data_dir: dir.to_path_buf(),
            initial_cluster: "m0=http://127.0.0.1:1,m1=http://127.0.0.1:2,m2=http://127.0.0.1:3".into(),
            initial_cluster_token: "restored".into(),
            peer_urls: Vec::new(),
            skip_hash_check: false,
        }
    }

    /// A snapshot file of a state machine with history, a compaction, a lease and an alarm.
    fn snapshot_file(dir: &Path) -> (PathBuf, Vec<u8>) {
        let mut sm = StateMachine::load(Arc::new(SledEngine::temporary().unwrap()), 1, 16).unwrap();
        let mut b = WriteBatch::default();
        let now = std::time::Instant::now();
        let mut apply = |i: u64, r: Request| {
            sm.apply_entry(i, &InternalRaftRequest { origin: 0, seq: 0, request: Some(r) }.encode_to_vec(), now, &mut b);
        };
        apply(1, Request::LeaseGrant(PbLeaseGrantRequest { id: 42, ttl: 600 }));
        for i in 0..50u64 {
            apply(2 + i, Request::Put(PbPutRequest { key: format!("k{}", i % 10).into(), value: format!("v{i}").into(), ..Default::default() }));
        }
        apply(60, Request::Compaction(PbCompactionRequest { revision: 20, physical: false }));
        apply(61, Request::MemberAttributes(crate::apply::MemberAttributes { id: 99, name: "old".into(), client_urls: vec![] }));
        let gone = crate::membership::Member { id: 99, ..Default::default() };
        sm.apply_member_change(crate::membership::ChangeKind::Remove, &gone, &mut b).unwrap();
        let mut file = Vec::new();
        crate::snapshot::SnapshotView::of(&sm).write_file(&mut file).unwrap();
        let path = dir.join("snap.db");
        std::fs::write(&path, &file).unwrap();
        (path, sm.snapshot_data())
    }

    #[test]
    fn three_members_restore_one_file_into_the_same_new_cluster() {
        let tmp = tempfile::tempdir().unwrap();
        let (file, _) = snapshot_file(tmp.path());
        let mut restored = Vec::new();
        for name in ["m0", "m1", "m2"] {
            let r = restore(&cfg(&file, name, &tmp.path().join(name))).unwrap();
            assert_eq!((r.revision, r.compacted, r.keys, r.index), (50, 20, 10, 3));
            restored.push(r);
        }
        assert!(restored.iter().all(|r| r.cluster_id == restored[0].cluster_id), "one new cluster");
        assert_ne!(restored[0].member_id, restored[1].member_id);

        // The data directory opens as a member's would: identity, state machine and raft log.
        let dir = tmp.path().join("m1/member");
        let engine: Arc<dyn Engine> = Arc::new(SledEngine::open(&dir.join("db")).unwrap());
        let identity = String::from_utf8(engine.get(keys::IDENTITY).unwrap().unwrap()).unwrap();
        assert_eq!(identity, crate::server::identity_record("m1", restored[1].member_id, restored[1].cluster_id));
        let sm = Arc::new(RwLock::new(StateMachine::load(engine.clone(), 1, 16).unwrap()));
        {
            let s = sm.read().unwrap();
            assert_eq!((s.kv.current_revision(), s.kv.compacted_revision(), s.applied_index), (50, 20, 3));
            assert_eq!(s.kv.get_at(b"k3", 50).unwrap().value, b"v43");
            assert_eq!(s.kv.get_at(b"k3", 25).unwrap().value, b"v23", "history since the compaction is kept");
            assert!(s.lessor.exists(42));
            assert!(s.members.is_empty(), "the old cluster's members are dropped");
            assert!(s.removed.is_empty(), "and the IDs it removed");
        }
        let storage = PeerStorage::open(&dir.join("wal"), engine, sm).unwrap();
        assert!(storage.is_initialized());
        assert_eq!(storage.conf_state().voters.len(), 3);
        assert_eq!((storage.truncated_index(), storage.hard_state().commit, storage.hard_state().term), (3, 3, 1));
    }

    #[test]
    fn a_corrupt_file_or_a_used_data_dir_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let (file, _) = snapshot_file(tmp.path());
        let mut bytes = std::fs::read(&file).unwrap();
        bytes[40] ^= 1;
        let bad = tmp.path().join("bad.db");
        std::fs::write(&bad, &bytes).unwrap();
        let out = tmp.path().join("out");
        let err = restore(&cfg(&bad, "m0", &out)).unwrap_err().to_string();
        assert!(err.starts_with("expected sha256 ["), "{err}");
        assert!(!out.join("member").exists(), "nothing is written for a corrupt file");

        std::fs::create_dir_all(&out).unwrap();
        std::fs::write(out.join("leftover"), b"x").unwrap();
        let err = restore(&cfg(&file, "m0", &out)).unwrap_err().to_string();
        assert_eq!(err, format!("data-dir {:?} not empty or could not be read", out.display().to_string()));

        let err = restore(&cfg(&file, "nobody", &tmp.path().join("x"))).unwrap_err().to_string();
        assert!(err.contains("has no entry in --initial-cluster"), "{err}");
        let mut c = cfg(&file, "m0", &tmp.path().join("y"));
        c.peer_urls = vec!["http://127.0.0.1:9".into()];
        let err = restore(&c).unwrap_err().to_string();
        assert!(err.contains("--initial-advertise-peer-urls has http://127.0.0.1:9 but missing from --initial-cluster="), "{err}");
    }
}
