//! The etcd v3 API of a one-member store run in-process, driven by the `etcd-client` crate:
//! watch semantics, etcd's errors, leases that expire, and data directories that are not ours.

use std::time::Duration;

use etcd_client::{Client, Compare, CompareOp, EventType, GetOptions, PutOptions, Txn, TxnOp, WatchOptions};

mod common;
use common::{Member, Ready, free_ports};

/// A one-member store with a 64 KiB request limit and progress notifications every 300 ms.
fn config(name: &str, dir: &std::path::Path, client: u16, peer: u16) -> store::Config {
    let mut c = common::config(name, dir, client, &[(name, format!("http://127.0.0.1:{peer}"))], false, "test");
    c.max_request_bytes = 64 * 1024;
    c.watch_progress_notify_interval = Duration::from_millis(300);
    c
}

async fn start(name: &str, dir: &std::path::Path) -> Member {
    let (client, peer) = free_ports();
    common::start(config(name, dir, client, peer))
}

/// A client once the member commits a write.
async fn client(m: &mut Member) -> Client {
    m.client_when(Ready::Writes).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_replays_history_filters_and_reports_compaction() {
    let dir = tempfile::tempdir().unwrap();
    let mut m = start("w", dir.path()).await;
    let mut c = client(&mut m).await;
    let first = c.put("w/a", "1", None).await.unwrap().header().unwrap().revision();
    c.put("w/a", "2", None).await.unwrap();
    c.delete("w/a", None).await.unwrap();
    c.put("other", "x", None).await.unwrap();

    // From a past revision, with previous values.
    let mut w = c.watch("w/", Some(WatchOptions::new().with_prefix().with_start_revision(first).with_prev_key())).await.unwrap();
    let created = w.message().await.unwrap().unwrap();
    assert!(created.created());
    let mut seen = Vec::new();
    while seen.len() < 3 {
        let r = w.message().await.unwrap().unwrap();
        for e in r.events() {
            seen.push((e.event_type(), e.kv().unwrap().mod_revision(), e.prev_kv().map(|p| p.value().to_vec())));
        }
    }
    assert_eq!(
        seen,
        vec![
            (EventType::Put, first, None),
            (EventType::Put, first + 1, Some(b"1".to_vec())),
            (EventType::Delete, first + 2, Some(b"2".to_vec())),
        ]
    );
    // A second watch on the same stream, only deletes; then live events reach the right watch.
    w.watch("w/", Some(WatchOptions::new().with_prefix().with_filters([etcd_client::WatchFilterType::NoPut]))).await.unwrap();
    let created = w.message().await.unwrap().unwrap();
    let second = created.watch_id();
    assert_ne!(second, 0);
    c.put("w/b", "live", None).await.unwrap();
    c.delete("w/b", None).await.unwrap();
    let mut by_watch = Vec::new();
    while by_watch.len() < 3 {
        let r = w.message().await.unwrap().unwrap();
        for e in r.events() {
            by_watch.push((r.watch_id(), e.event_type()));
        }
    }
    assert_eq!(by_watch, vec![(0, EventType::Put), (0, EventType::Delete), (second, EventType::Delete)]);

    // Progress: on request, and periodically for watches that ask.
    w.request_progress().await.unwrap();
    let p = w.message().await.unwrap().unwrap();
    assert!(p.events().is_empty() && p.watch_id() == -1);
    let now = c.get("w/", None).await.unwrap().header().unwrap().revision();
    assert!(p.header().unwrap().revision() >= now - 1);

    // Compaction: a watch from before it is cancelled with the compacted revision.
    c.compact(now, None).await.unwrap();
    let mut old = c.watch("w/", Some(WatchOptions::new().with_prefix().with_start_revision(first))).await.unwrap();
    let mut compacted = None;
    for _ in 0..3 {
        let r = old.message().await.unwrap().unwrap();
        if r.canceled() {
            compacted = Some((r.compact_revision(), r.cancel_reason().to_string()));
            break;
        }
    }
    let (rev, reason) = compacted.expect("a compacted watch is cancelled");
    assert_eq!(rev, now);
    assert!(reason.contains("required revision has been compacted"), "{reason}");
    m.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watcher_that_falls_behind_catches_up_from_history_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let mut m = start("slow", dir.path()).await;
    let c = client(&mut m).await;
    let mut w = c.clone().watch("s/", Some(WatchOptions::new().with_prefix())).await.unwrap();
    assert!(w.message().await.unwrap().unwrap().created());
    // More revisions than the broadcast keeps, written while nobody reads the watch.
    let writers: Vec<_> = (0..32)
        .map(|i| {
            let mut c = c.clone();
            tokio::spawn(async move {
                for j in 0..160 {
                    c.put(format!("s/{i}/{j}"), "v", None).await.unwrap();
                }
            })
        })
        .collect();
    for t in writers {
        t.await.unwrap();
    }
    let mut revs = Vec::new();
    while revs.len() < 32 * 160 {
        let r = tokio::time::timeout(Duration::from_secs(10), w.message()).await.expect("events keep coming").unwrap().unwrap();
        revs.extend(r.events().iter().map(|e| e.kv().unwrap().mod_revision()));
    }
    assert!(revs.windows(2).all(|p| p[0] < p[1]), "every revision once, in order");
    m.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_get_etcds_errors_and_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut m = start("bad", dir.path()).await;
    let mut c = client(&mut m).await;
    let rev = c.get("x", None).await.unwrap().header().unwrap().revision();
    let err = |e: etcd_client::Error| e.to_string();
    let too_big = vec![b'x'; 70 * 1024];
    assert!(err(c.put("big", too_big, None).await.unwrap_err()).contains("etcdserver: request is too large"));
    assert!(err(c.put("", "v", None).await.unwrap_err()).contains("etcdserver: key is not provided"));
    assert!(err(c.put("k", "v", Some(PutOptions::new().with_lease(12345))).await.unwrap_err())
        .contains("etcdserver: requested lease not found"));
    assert!(err(c.get("k", Some(GetOptions::new().with_revision(rev + 100))).await.unwrap_err())
        .contains("required revision is a future revision"));
    let dup = Txn::new().and_then([TxnOp::put("d", "1", None), TxnOp::put("d", "2", None)]);
    assert!(err(c.txn(dup).await.unwrap_err()).contains("etcdserver: duplicate key given in txn request"));
    assert_eq!(c.get("x", None).await.unwrap().header().unwrap().revision(), rev, "nothing was written");
    // A txn compare on value, both branches.
    c.put("t", "a", None).await.unwrap();
    let t = Txn::new()
        .when([Compare::value("t", CompareOp::Equal, "a")])
        .and_then([TxnOp::put("t", "b", None)])
        .or_else([TxnOp::get("t", None)]);
    assert!(c.txn(t.clone()).await.unwrap().succeeded());
    assert!(!c.txn(t).await.unwrap().succeeded());
    m.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_leader_expires_leases_and_deletes_their_keys() {
    let dir = tempfile::tempdir().unwrap();
    let mut m = start("lease", dir.path()).await;
    let mut c = client(&mut m).await;
    let lease = c.lease_grant(1, None).await.unwrap();
    assert_eq!(lease.ttl(), 1, "election timeout 500 ms makes the minimum TTL 1 s");
    c.put("ephemeral", "v", Some(PutOptions::new().with_lease(lease.id()))).await.unwrap();
    let mut gone = false;
    for _ in 0..40 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if c.get("ephemeral", None).await.unwrap().kvs().is_empty() {
            gone = true;
            break;
        }
    }
    assert!(gone, "the key of an expired lease is deleted");
    assert_eq!(c.lease_time_to_live(lease.id(), None).await.unwrap().ttl(), -1);
    m.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn data_survives_a_restart_and_a_foreign_data_dir_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut m = start("one", dir.path()).await;
    let mut c = client(&mut m).await;
    c.put("kept", "yes", None).await.unwrap();
    m.stop().await;

    let mut m = start("one", dir.path()).await;
    let mut c = client(&mut m).await;
    assert_eq!(c.get("kept", None).await.unwrap().kvs()[0].value(), b"yes");
    m.stop().await;

    let (client, peer) = free_ports();
    let cfg = config("two", dir.path(), client, peer);
    let err = store::run(cfg, std::future::pending()).await.unwrap_err().to_string();
    assert!(err.contains("belongs to member") && err.contains("(one)"), "{err}");
}
