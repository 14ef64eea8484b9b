//! Mirrors k8s.io/apiserver/pkg/storage/etcd3/compact.go: the compactor. Every
//! `--etcd-compaction-interval` the API server compacts the store's history up to the revision it
//! saw one interval earlier.
//!
//! The store keeps every revision until it is told to forget (etcd's MVCC, and kubelab's, which
//! holds its history in memory): without this a cluster's store grows with every write — every
//! Lease renewal, every status update — forever. Kubernetes leaves compaction to the API server
//! rather than to etcd's own `--auto-compaction-*` so that the history kept matches what its
//! watchers may still resume from: one interval's worth.
//!
//! Several API servers share one store. They agree on who compacts through one key outside the
//! registry prefix, `compact_rev_key`, whose *version* counts compactions: each API server
//! remembers the version it last saw and, once per interval, writes the key with a transaction
//! that succeeds only if the version is still the one it saw. The one that succeeds compacts (to
//! the revision it saw one interval earlier); the others learn the new version and the current
//! revision, and try again next interval. The same key and scheme as kube-apiserver, so a kubelab
//! API server and a kube-apiserver could share an etcd without compacting twice.

use std::time::Duration;

use etcd_client::{Client, Compare, CompareOp, PutOptions, Txn, TxnOp, TxnOpResponse};

/// The key whose version counts compactions (kube-apiserver's, unprefixed).
pub const COMPACT_REV_KEY: &str = "compact_rev_key";

/// One compaction attempt: `seen` is the key's version this API server last saw, `revision` the
/// store revision it saw one interval ago (0 at first: nothing to compact yet). Returns the
/// version and revision to remember for the next attempt.
pub async fn compact(client: &mut Client, seen: i64, revision: i64) -> Result<(i64, i64), etcd_client::Error> {
    let txn = Txn::new()
        .when([Compare::version(COMPACT_REV_KEY, CompareOp::Equal, seen)])
        .and_then([TxnOp::put(COMPACT_REV_KEY, revision.to_string(), Some(PutOptions::new()))])
        .or_else([TxnOp::get(COMPACT_REV_KEY, None)]);
    let resp = client.txn(txn).await?;
    let current = resp.header().map_or(0, |h| h.revision());
    if !resp.succeeded() {
        // Another API server compacted since: take its count and try again next interval.
        let version = resp
            .op_responses()
            .into_iter()
            .find_map(|op| match op {
                TxnOpResponse::Get(g) => g.kvs().first().map(|kv| kv.version()),
                _ => None,
            })
            .unwrap_or(0);
        return Ok((version, current));
    }
    if revision > 0 {
        client.compact(revision, None).await?;
        tracing::info!(target: "apiserver::compact", revision, "compacted the store's history");
    }
    Ok((seen + 1, current))
}

/// Compacts every `interval`, forever; a failed attempt is logged and tried again next interval.
pub async fn run(mut client: Client, interval: Duration) {
    let (mut seen, mut revision) = (0, 0);
    let mut tick = tokio::time::interval(interval);
    tick.tick().await; // the first tick is immediate: nothing to compact at start
    loop {
        tick.tick().await;
        match compact(&mut client, seen, revision).await {
            Ok((v, r)) => (seen, revision) = (v, r),
            Err(e) => tracing::warn!(target: "apiserver::compact", error = %e, "compaction failed; trying again next interval"),
        }
    }
}
