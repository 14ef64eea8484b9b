//! The store's maintenance operations on a one-member store run in-process, driven by the
//! `etcd-client` crate: the space quota and its NOSPACE alarm, defragmentation, auto-compaction,
//! and a snapshot taken over gRPC restored into a new cluster.

use std::time::Duration;

use etcd_client::{AlarmAction, AlarmOptions, AlarmType, Client, Compare, CompareOp, GetOptions, Txn, TxnOp};

mod common;
use common::{Member, Ready, start};

/// A one-member store's flags.
fn config(name: &str, token: &str, dir: &std::path::Path) -> store::Config {
    common::single(name, dir, token)
}

/// A client once the member serves linearizable reads.
async fn client(m: &mut Member) -> Client {
    m.client_when(Ready::Reads).await
}

fn is_no_space(e: &etcd_client::Error) -> bool {
    matches!(e, etcd_client::Error::GRpcStatus(s) if s.code() == tonic::Code::ResourceExhausted && s.message() == "etcdserver: mvcc: database space exceeded")
}

fn for_member(id: u64) -> AlarmOptions {
    let mut o = AlarmOptions::new();
    o.with_member(id);
    o
}

async fn alarms(c: &mut Client) -> Vec<(u64, AlarmType)> {
    let r = c.alarm(AlarmAction::Get, AlarmType::None, None).await.unwrap();
    r.alarms().iter().map(|a| (a.member_id(), a.alarm())).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_database_raises_nospace_until_compacted_defragmented_and_disarmed() {
    let dir = tempfile::tempdir().unwrap();
    // Measure what an empty member takes, then give the member a quota 2 MiB above it.
    let mut m = start(config("q", "quota", dir.path()));
    let mut c = client(&mut m).await;
    let empty = c.status().await.unwrap().db_size() as u64;
    m.stop().await;
    let quota = empty + (2 << 20);
    let mut cfg = config("q", "quota", dir.path());
    cfg.quota_backend_bytes = quota as i64;
    let mut m = start(cfg);
    let mut c = client(&mut m).await;
    let me = c.status().await.unwrap().header().unwrap().member_id();

    // Step 1: fill it. The size on disk lags the writes (the engine is written in batches), so
    // keep writing until one is refused.
    let value = vec![b'x'; 16 * 1024];
    let mut refused = None;
    for i in 0..2000 {
        match c.put(format!("fill/{i:04}"), value.clone(), None).await {
            Ok(_) => {}
            Err(e) => {
                refused = Some((i, e));
                break;
            }
        }
    }
    let (written, err) = refused.expect("a 2 MiB quota refuses writes before 32 MiB are written");
    assert!(is_no_space(&err), "{err:?}");
    assert!(written > 16, "{written} writes before the quota: it was passed too early");
    assert_eq!(alarms(&mut c).await, vec![(me, AlarmType::Nospace)]);
    let status = c.status().await.unwrap();
    assert!(status.errors().iter().any(|e| e.contains("alarm:NOSPACE")), "{:?}", status.errors());
    assert!(status.db_size() as u64 >= quota - 64 * 1024, "db size {} vs quota {quota}", status.db_size());

    // Step 2: what grows the database is refused; reads, deletes, read-only txns are not.
    assert!(is_no_space(&c.put("small", "1", None).await.unwrap_err()));
    let txn_put = Txn::new().when([Compare::version("small", CompareOp::Equal, 0)]).and_then([TxnOp::put("small", "1", None)]);
    assert!(is_no_space(&c.txn(txn_put).await.unwrap_err()));
    assert!(is_no_space(&c.lease_grant(60, None).await.unwrap_err()));
    assert_eq!(c.get("fill/0000", None).await.unwrap().kvs()[0].value().len(), value.len());
    let txn_get = Txn::new().and_then([TxnOp::get("fill/0001", None)]);
    assert!(c.txn(txn_get).await.unwrap().succeeded());
    let deleted = c.delete("fill/", Some(etcd_client::DeleteOptions::new().with_prefix())).await.unwrap();
    assert_eq!(deleted.deleted() as usize, written);

    // Step 3: compact, defragment, disarm: the space is back and writes are accepted.
    let rev = deleted.header().unwrap().revision();
    c.compact(rev, None).await.unwrap();
    let before = c.status().await.unwrap().db_size();
    c.defragment().await.unwrap();
    let after = c.status().await.unwrap();
    eprintln!("db size: {before} bytes before defragmenting, {} after", after.db_size());
    assert!((after.db_size() as u64) < quota, "defragmenting gave the space back: {before} → {}", after.db_size());
    assert!(after.db_size() < before / 2, "{before} → {}", after.db_size());
    assert!(is_no_space(&c.put("small", "1", None).await.unwrap_err()), "still capped until disarmed");
    let disarmed = c.alarm(AlarmAction::Deactivate, AlarmType::Nospace, Some(for_member(me))).await.unwrap();
    assert_eq!(disarmed.alarms().len(), 1);
    assert!(alarms(&mut c).await.is_empty());
    c.put("small", "1", None).await.unwrap();
    c.lease_grant(60, None).await.unwrap();
    m.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_nospace_alarm_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let mut m = start(config("r", "alarm", dir.path()));
    let mut c = client(&mut m).await;
    let me = c.status().await.unwrap().header().unwrap().member_id();
    c.alarm(AlarmAction::Activate, AlarmType::Nospace, Some(for_member(me))).await.unwrap();
    assert!(is_no_space(&c.put("k", "v", None).await.unwrap_err()));
    m.stop().await;
    let mut m = start(config("r", "alarm", dir.path()));
    let mut c = client(&mut m).await;
    assert_eq!(alarms(&mut c).await, vec![(me, AlarmType::Nospace)]);
    assert!(is_no_space(&c.put("k", "v", None).await.unwrap_err()), "still capped after the restart");
    c.alarm(AlarmAction::Deactivate, AlarmType::Nospace, Some(for_member(me))).await.unwrap();
    c.put("k", "v", None).await.unwrap();
    m.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn periodic_auto_compaction_compacts_what_is_older_than_the_retention() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config("a", "auto", dir.path());
    cfg.auto_compaction_mode = "periodic".into();
    cfg.auto_compaction_retention = "1s".into();
    let mut m = start(cfg);
    let mut c = client(&mut m).await;
    let first = c.put("k", "0", None).await.unwrap().header().unwrap().revision();
    for i in 1..10 {
        c.put("k", i.to_string(), None).await.unwrap();
    }
    // Within a few periods the revisions of more than a second ago are compacted away.
    let mut compacted = false;
    for _ in 0..100 {
        c.put("tick", "x", None).await.unwrap();
        match c.get("k", Some(GetOptions::new().with_revision(first))).await {
            Err(etcd_client::Error::GRpcStatus(s)) if s.message() == "etcdserver: mvcc: required revision has been compacted" => {
                compacted = true;
                break;
            }
            Err(e) => panic!("{e:?}"),
            Ok(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
    assert!(compacted, "revision {first} was never compacted");
    assert_eq!(c.get("k", None).await.unwrap().kvs()[0].value(), b"9", "the current value is kept");
    m.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_over_grpc_restores_into_a_new_cluster_at_the_same_revision() {
    let dir = tempfile::tempdir().unwrap();
    let mut m = start(config("s", "old", &dir.path().join("old")));
    let mut c = client(&mut m).await;
    for i in 0..300 {
        c.put(format!("snap/{i:03}"), format!("value-{i}-{}", "x".repeat(200)), None).await.unwrap();
    }
    c.delete("snap/000", None).await.unwrap();
    let rev = c.get("snap/001", None).await.unwrap().header().unwrap().revision();
    let mut stream = c.snapshot().await.unwrap();
    let mut file = Vec::new();
    let mut chunks = 0;
    while let Some(r) = stream.message().await.unwrap() {
        file.extend_from_slice(r.blob());
        chunks += 1;
    }
    assert!(chunks > 1, "streamed in chunks");
    m.stop().await;
    let path = dir.path().join("snap.db");
    std::fs::write(&path, &file).unwrap();

    let cfg = config("n", "new", &dir.path().join("new"));
    let peer_url = cfg.listen_peer_urls[0].clone();
    let restored = store::snapshot_restore::restore(&store::snapshot_restore::RestoreConfig {
        snapshot_path: path,
        name: "n".into(),
        output_data_dir: cfg.data_dir.clone(),
        initial_cluster: format!("n={peer_url}"),
        initial_cluster_token: "new".into(),
        peer_urls: vec![peer_url],
        skip_hash_check: false,
    })
    .unwrap();
    assert_eq!(restored.revision, rev);
    let mut m = start(cfg);
    let mut c = client(&mut m).await;
    let r = c.get("snap/", Some(GetOptions::new().with_prefix().with_count_only())).await.unwrap();
    assert_eq!((r.count(), r.header().unwrap().revision()), (299, rev));
    let kv = c.get("snap/123", None).await.unwrap();
    assert_eq!(kv.kvs()[0].value(), format!("value-123-{}", "x".repeat(200)).as_bytes());
    assert_eq!(kv.kvs()[0].mod_revision(), 124, "revisions are kept");
    assert_eq!(c.status().await.unwrap().header().unwrap().cluster_id(), restored.cluster_id);
    let next = c.put("after", "1", None).await.unwrap().header().unwrap().revision();
    assert_eq!(next, rev + 1, "the new cluster goes on from the snapshot's revision");
    m.stop().await;
}
