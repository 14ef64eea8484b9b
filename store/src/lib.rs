//! # store — kubelab's etcd
//!
//! Every object of the cluster lives here. The store is an MVCC key space (etcd's data model:
//! revisions, versions, tombstones, history for watchers, compaction, leases), replicated by raft
//! (the `raft` crate, the same raft TiKV runs) through a write-ahead log, kept in sled, and served
//! through the etcd v3 gRPC
//! API subset a Kubernetes API server uses, so that real `etcdctl` works against it and kubelab's
//! API server works against a real etcd.
//!
//! ## The flow of a write
//! 1. A client's `Put` reaches [`v3rpc::kv`] on any member. It is checked (empty key, size) the
//!    way etcd checks it, wrapped in an [`apply::InternalRaftRequest`] naming this member and a
//!    sequence number, and handed to the raft thread ([`server`]); the client waits on a oneshot.
//! 2. The raft thread proposes it. On a follower, raft forwards it to the leader.
//! 3. The leader's Ready loop ([`raft_node`]) sends it to the followers ([`transport`]) and hands
//!    it to the write-ahead log ([`wal`]), whose thread makes it durable with one `fdatasync` for
//!    everything queued meanwhile; followers do the same and answer once their write is durable.
//! 4. Once a majority has it, it is committed; every member applies it to its [`apply::StateMachine`]
//!    ([`mvcc`], kept in sled through [`engine`], not synced: after a crash it is replayed from the
//!    WAL), in log order, and publishes the revision's events to watchers ([`v3rpc::watch`]).
//! 5. The member that proposed it finds its waiter by sequence number and answers the client.
//!
//! Reads are linearizable through raft's ReadIndex (the member learns the leader's commit index,
//! waits until it has applied that far, then reads locally) unless the request asks to be
//! serializable. The log is compacted every `--snapshot-count` entries; a member behind the
//! compacted log receives a snapshot of the state machine, and its watches then catch up from
//! the restored history (etcd's `watchableStore.Restore`). Expired leases are revoked by the
//! leader, through the log, proposed at once so that a leader deposed meanwhile cannot have its
//! successor revoke them.
//!
//! ## Membership changes
//! The member records (ID, peer URLs, learner or voter, and the name and client URLs a member
//! publishes once it serves) are replicated state ([`membership`], kept by [`apply`]): the
//! founding members are recorded from `--initial-cluster` when a new cluster starts, and after
//! that they change only through the log, so every member and every snapshot agrees.
//! 1. A client's `MemberAdd`/`MemberRemove`/`MemberPromote` reaches [`v3rpc::cluster`], which
//!    checks it as etcd does: the URLs, what the apply would refuse, and the quorum
//!    (`--strict-reconfig-check`: enough started members, this member connected to every voter
//!    for five seconds). A promotion is decided by the leader, which alone knows the learner's
//!    match index (within 90% of its own); a follower hands it to the leader's peer port.
//! 2. It is proposed as a raft `ConfChange` (add voter, add learner, remove; promotion is adding
//!    a learner as a voter) whose context carries the member record and the proposer; an update
//!    of peer URLs, which raft does not see, is a plain entry.
//! 3. Every member applies it in log order ([`raft_node`] step 3): the record first, checked
//!    again; raft's configuration only if the record took it. The ConfState goes to the WAL
//!    with the entry, so a restart keeps it. Adding a member compacts the log to what is
//!    applied, so the new member is sent a snapshot (the log does not hold the founding
//!    configuration). The raft thread then brings the [`transport`] in line: new peers dialed,
//!    removed ones dropped and refused from then on, updated ones dialed at their new URLs.
//! 4. The added member starts with `--initial-cluster-state existing` on an empty data
//!    directory: it asks the others for the member list at their peer URLs (they serve
//!    `MemberList` there too), finds its ID by its peer URLs, records it, and starts raft with
//!    no configuration and no log; the leader's snapshot brings both. It then publishes its
//!    name. A member whose old self is in the list (it lost its data) is refused: "has already
//!    been bootstrapped".
//! 5. A member that applies its own removal stops ten ticks later (so a removed leader's
//!    heartbeats still carry the commit), and one that missed it learns it from a peer, which
//!    refuses its messages; `run` then ends with [`Error::MemberRemoved`]. A learner serves only
//!    serializable reads and `Status` on its client port (etcd 3.4's "rpc not supported for
//!    learner"), and neither votes nor counts for the quorum.
//!
//! ## TLS
//! As in etcd, a URL's scheme decides: `https://` client URLs are served over TLS with
//! `--cert-file`/`--key-file`, and with `--client-cert-auth` a client without a certificate
//! `--trusted-ca-file` signed is refused during the handshake; `https://` peer URLs the same with
//! the `--peer-` flags, and a member dials `https://` peers presenting its peer certificate and
//! verifying theirs against the peer CA. [`tlsinfo`] reads the files and builds the
//! configurations (etcd's `TLSInfo`); [`netutil`] makes the handshakes, accepted and dialed, so
//! that [`authority`] still reads a client's HTTP/2 stream (decrypted). `--listen-metrics-urls`
//! stay plain HTTP.
//!
//! ## Failpoints (tests only)
//! With the `failpoints` feature (the `kubelab-failpoints` binary; never `kubelab`), [`failpoint`]
//! gives the robustness tests etcd's gofail failpoints: set from `KUBELAB_FAILPOINTS`
//! (`name=term;…`) at start, or over HTTP (`PUT`/`GET`/`DELETE /<name>`, `GET /`) when
//! `KUBELAB_FAILPOINTS_HTTP=127.0.0.1:PORT`; a term is `off`, `panic` (the process ends at
//! once, a `kill -9` there), `sleep(MS)`, `return("msg")` or `print`, optionally `N*` or `P%`.
//! The engine (terms, registry, HTTP endpoint) is the `failpoint` crate, which the node agent's
//! failpoints use too; without the feature it is not linked and every site compiles to nothing.
//! The sites, named after etcd's:
//! - Ready loop ([`raft_node`]): `raftBeforeLeaderSend` (step 1, a leader's messages);
//!   `raftBeforeApplySnap`, `raftAfterApplySnap` (step 2, around restoring the state machine from
//!   a leader's snapshot), `raftBeforeSaveSnap`, `raftAfterSaveSnap` (around making it durable in
//!   sled, before the WAL's rewrite); `beforeCommit`, `afterCommit` (around handing the pending
//!   state machine batch to the engine).
//! - [`wal`]: `raftBeforeSave`, `raftAfterSave` (around writing and syncing a Ready's HardState
//!   and entries); `walBeforeSync`, `walAfterSync` (around the tail's `fdatasync`: `sleep` makes
//!   it slow, `return` makes it fail, and the member then exits, as etcd's does, without
//!   acknowledging what the write held).
//! - [`server`]: `raftBeforeFollowerSend` (the messages that waited for the WAL: a follower's
//!   append responses, votes). [`apply`]: `compactBeforeCommitScheduledCompact`,
//!   `compactAfterCommitScheduledCompact` (around applying a Compaction).
//! - Four deliberately injected bugs, on only when set (`=return`), for checking the checkers:
//!   `bugStaleRead` ([`v3rpc::kv`]: a linearizable Range or read-only Txn is served without
//!   ReadIndex, so a member cut off from the majority answers stale data); `bugEarlyAck`
//!   ([`raft_node`]: a leader commits what its own WAL holds without a quorum, so a leader cut
//!   off from the majority acknowledges writes that are then lost); `bugWatchSkip`
//!   ([`v3rpc::watch`]: a watch catching up from history, from its start revision or after
//!   falling behind, skips that first revision's events); `bugSkipFsync` ([`wal`]: the WAL's
//!   `fdatasync` is skipped, so a power loss takes acknowledged writes).
//!
//! ## Implementation caveats
//! - Membership: a member that lost its disk is replaced (`member remove`, `member add`, start
//!   the new one with `existing`); it cannot come back under its old identity, since raft cannot
//!   take a member back whose log it lost. Differences from etcd: the founding records are each
//!   member's reading of its own `--initial-cluster` (etcd puts them in the log), so members that
//!   list each other at different URLs (the e2e proxy mesh) hold different peer URLs; a
//!   `MemberUpdate` is a log entry, not a ConfChange (raft-rs has no update change); the
//!   joining member asks the Cluster gRPC service on the peer port, not etcd's peer HTTP
//!   `/members`, so an etcd member cannot join a kubelab cluster nor the reverse; a request
//!   forwarded to a leader that stops is lost and the client sees "request timed out", as a
//!   proposal is; a removed learner that hears nothing from the others does not learn it was
//!   removed until it sends to them (it never campaigns); `--strict-reconfig-check` is always on.
//! - TLS, but no etcd authentication: the Auth service answers UNIMPLEMENTED (no users or roles,
//!   and a client certificate's common name is no user). Certificates are read once, at start (etcd reads them again for each handshake, so a renewed one needs no
//!   restart); no `--peer-cert-allowed-cn`, `--cipher-suites`, CRLs or `--auto-tls`.
//! - The key space since the last compaction is held in memory, as etcd's index is (etcd keeps
//!   values in bbolt's mmap). The API server (kubelab's or Kubernetes') compacts every five
//!   minutes; `--auto-compaction-mode`/`--auto-compaction-retention` ([`v3compactor`]) are off
//!   by default, as in etcd, and the revision mode looks every five minutes (etcd's
//!   `revInterval`), not configurable.
//! - A leader's snapshot to a follower travels as one message (etcd streams it in chunks;
//!   `Maintenance.Snapshot` to a client is streamed in chunks here too).
//! - Lease keep-alives go through the raft log (etcd sends them to the leader only and
//!   checkpoints remaining TTLs); simpler and agreed by every member, at the cost of a log entry
//!   per keep-alive.
//! - Maintenance: Status, Alarm, Defragment and Snapshot; Hash, HashKV, MoveLeader and Downgrade
//!   answer UNIMPLEMENTED. The only alarm is NOSPACE (no CORRUPT: there are no hash checks).
//!   Only the member whose size passes `--quota-backend-bytes` raises it, when its gRPC edge
//!   refuses a request ([`v3rpc::quota`]); etcd also raises it when applying an accepted
//!   request passes the quota. The size is sled's files, which shrink only through Defragment
//!   (a copy into a fresh directory swapped in: [`engine`]); the member's engine writes wait
//!   meanwhile.
//! - A snapshot file (`etcdctl snapshot save`) is the store's own format ([`snapshot`]), not
//!   etcd's bbolt file: `kubelab store snapshot restore` ([`snapshot_restore`]) restores it, but
//!   `etcdctl snapshot status` and etcd's restore cannot read it, nor can the store read etcd's.
//! - The WAL: no CRC chained across records and no per-segment metadata record (etcd has both);
//!   a new segment is created on the write path when the tail fills up (etcd prepares the next
//!   one in the background); the queue of jobs for the WAL writer thread is unbounded (a leader
//!   on a disk slower than its followers' keeps accepting proposals). Data directories from
//!   before the WAL, with the raft log in sled, are refused rather than converted.

//! ## Public surface
//! - [`run`] (a member until shutdown), [`Config`] (etcd's flags), [`Error`]/[`Result`]: what
//!   `kubelab store`, `kubelab up` and the end-to-end tests use.
//! - The layers a member is built from, public for the store's own integration tests
//!   (`store/tests/`) and the end-to-end tests that drive them directly: [`apply`], [`config`],
//!   [`engine`], [`metrics`], [`raft_node`], [`raft_storage`], [`tlsinfo`], [`transport`],
//!   [`v3rpc`], [`wal`].
//! - [`snapshot_restore`]: what `kubelab store snapshot restore` runs.
//!   The rest (the raft thread's server, MVCC, alarms, the quota, auto-compaction, the snapshot
//!   file format, the HTTP endpoints, socket options and TLS handshakes, the `:authority`
//!   repair, the revision trace) is the crate's own.
#![allow(rustdoc::private_intra_doc_links)] // the tour names private modules; read it in the source

// First: the modules after it use its `failpoint!` and `injected_bug!` macros.
#[macro_use]
pub(crate) mod failpoint;
pub(crate) mod alarms;
pub mod apply;
pub(crate) mod authority;
pub mod config;
pub mod engine;
pub mod error;
pub(crate) mod etcdhttp;
pub(crate) mod membership;
pub(crate) mod cluster_util;
pub mod metrics;
pub(crate) mod mvcc;
pub(crate) mod netutil;
pub(crate) mod quota;
pub mod raft_node;
pub mod raft_storage;
pub(crate) mod server;
pub(crate) mod snapshot;
pub mod snapshot_restore;
pub mod tlsinfo;
pub(crate) mod traceutil;
pub mod transport;
pub(crate) mod v3compactor;
pub mod v3rpc;
pub mod wal;

use std::future::Future;
use std::time::Duration;

pub use config::Config;
pub use error::{Error, Result};
pub use server::Node;

use tokio::net::TcpListener;
use tokio::sync::watch;

async fn listen(url: &str, what: &str) -> Result<TcpListener> {
    let addr = config::parse_url(url)?;
    TcpListener::bind(addr).await.map_err(|e| {
        Error::Config(format!("cannot listen for {what} on {url}: {e} (is another store or etcd running there?)"))
    })
}

/// A listener of the client or peer port, and for an `https://` URL what its connections'
/// TLS handshakes are made with.
struct Listener {
    tcp: TcpListener,
    tls: Option<tokio_rustls::TlsAcceptor>,
}

/// Binds `urls`; the `https://` ones serve TLS with `tls` (built once for all of them).
async fn listen_all(urls: &[String], what: &str, tls: &tlsinfo::TlsInfo) -> Result<Vec<Listener>> {
    let mut acceptor = None;
    let mut out = Vec::new();
    for url in urls {
        let tls = if config::is_https(url) {
            if acceptor.is_none() {
                acceptor = Some(tokio_rustls::TlsAcceptor::from(tls.server_config()?));
            }
            acceptor.clone()
        } else {
            if !tls.is_empty() {
                tracing::warn!(target: "store::tls", url = %url, "scheme is HTTP while key and cert files are present; ignoring key and cert files");
            }
            None
        };
        out.push(Listener { tcp: listen(url, what).await?, tls });
    }
    Ok(out)
}

/// Client connections: as [`netutil::accept`] hands them out, read through
/// [`authority::AuthorityFix`] so that etcd clients whose `:authority` h2 would refuse are
/// served (over TLS it reads the decrypted stream).
fn incoming_clients(l: Listener) -> impl futures::Stream<Item = std::io::Result<authority::AuthorityFix<netutil::Accepted>>> {
    use futures::StreamExt;
    netutil::accept(l.tcp, l.tls, "client").map(|s| s.map(authority::AuthorityFix::new))
}

/// Answers any gRPC method we do not serve with UNIMPLEMENTED naming the method.
async fn unimplemented_method(uri: axum::http::Uri) -> axum::http::Response<axum::body::Body> {
    tonic::Status::unimplemented(format!("kubelab store does not implement {}", uri.path())).into_http()
}

/// Runs a member until `shutdown` completes, then stops it cleanly.
pub async fn run(cfg: Config, shutdown: impl Future<Output = ()>) -> Result<()> {
    cfg.validate()?;
    // Bind first: a port in use is reported before the data directory is touched.
    // Certificates are read here too: a missing or bad file is reported before the data
    // directory is touched.
    let client_listeners = listen_all(&cfg.listen_client_urls, "clients", &cfg.client_tls_info).await?;
    let peer_listeners = listen_all(&cfg.listen_peer_urls, "peers", &cfg.peer_tls_info).await?;
    let mut metrics_listeners = Vec::new();
    for url in &cfg.listen_metrics_urls {
        metrics_listeners.push(listen(url, "metrics").await?);
    }

    // Peers at https:// URLs are dialed with this member's peer certificate (`--peer-cert-file`),
    // and theirs is verified against `--peer-trusted-ca-file`.
    // A member added later is dialed like the others: the configuration is built when this
    // member's own peer URLs are https:// too.
    let https_peers = cfg.peers().any(|p| p.peer_urls.iter().any(|u| config::is_https(u)));
    let peer_tls = match https_peers || cfg.listen_peer_urls.iter().any(|u| config::is_https(u)) {
        true => Some(cfg.peer_tls_info.client_config()?),
        false => None,
    };

    // A member `member add` added starts on an empty data directory with `existing`: it asks
    // the cluster who it is ([`cluster_util`]).
    let join = match !cfg.new_cluster && !cfg.data_dir.join("member").join("db").exists() {
        true => Some(cluster_util::join(&cfg, peer_tls.clone()).await?),
        false => None,
    };
    let rt = tokio::runtime::Handle::current();
    let (node, raft_thread) = server::start(cfg.clone(), &rt, peer_tls, join)?;
    if let Some(ac) = config::AutoCompaction::parse(&cfg.auto_compaction_mode, &cfg.auto_compaction_retention)? {
        tokio::spawn(v3compactor::run(node.clone(), ac, node.stopped()));
    }
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut tasks = Vec::new();

    for l in peer_listeners {
        let svc = proto::raftpb::raft_peer_server::RaftPeerServer::new(transport::PeerService {
            cluster_id: node.cluster_id(),
            my_id: node.id(),
            members: node.peer_set(),
            raft: node.raft(),
            metrics: node.metrics().clone(),
        })
        .max_decoding_message_size(transport::MAX_PEER_MESSAGE)
        .max_encoding_message_size(transport::MAX_PEER_MESSAGE);
        // The peer port also answers MemberList (a joining member asks it) and MemberPromote
        // (a follower hands a promotion to the leader), as etcd's peer HTTP handlers do.
        let members = proto::etcd::PbClusterServer::new(v3rpc::cluster::ClusterService { node: node.clone(), peer_port: true });
        let mut stop = stop_rx.clone();
        tasks.push(tokio::spawn(async move {
            tonic::transport::Server::builder()
                .http2_keepalive_interval(Some(Duration::from_secs(1)))
                .http2_keepalive_timeout(Some(Duration::from_secs(2)))
                .add_service(svc)
                .add_service(members)
                .serve_with_incoming_shutdown(netutil::accept(l.tcp, l.tls, "peer"), async move {
                    let _ = stop.wait_for(|s| *s).await;
                })
                .await
                .map_err(Error::from)
        }));
    }

    for l in client_listeners {
        let (kv, watch_svc, lease, maintenance, cluster) = v3rpc::services(node.clone());
        let trace = proto::debugpb::trace_server::TraceServer::new(v3rpc::trace::TraceService(node.clone()));
        let routes = tonic::service::Routes::new(kv)
            .add_service(watch_svc)
            .add_service(lease)
            .add_service(maintenance)
            .add_service(cluster)
            .add_service(trace)
            .into_axum_router()
            .fallback(unimplemented_method);
        let mut stop = stop_rx.clone();
        tasks.push(tokio::spawn(async move {
            tonic::transport::Server::builder()
                .http2_keepalive_interval(Some(Duration::from_secs(30)))
                .add_routes(tonic::service::Routes::from(routes))
                .serve_with_incoming_shutdown(incoming_clients(l), async move {
                    let _ = stop.wait_for(|s| *s).await;
                })
                .await
                .map_err(Error::from)
        }));
    }

    for l in metrics_listeners {
        let node = node.clone();
        let stop = stop_rx.clone();
        tasks.push(tokio::spawn(async move { etcdhttp::serve(l, node, stop).await.map_err(Error::from) }));
    }

    tracing::info!(
        target: "store",
        name = %cfg.name,
        member = %format!("{:x}", node.id()),
        cluster = %format!("{:x}", node.cluster_id()),
        clients = ?cfg.listen_client_urls,
        peers = ?cfg.listen_peer_urls,
        client_cert_auth = cfg.client_tls_info.client_cert_auth,
        peer_client_cert_auth = cfg.peer_tls_info.client_cert_auth,
        "store member serving"
    );

    // Run until asked to stop, until a server fails, or until the member stops by itself
    // (removed from the cluster).
    let mut stopped = node.stopped();
    let failed = tokio::select! {
        _ = shutdown => None,
        _ = stopped.wait_for(|s| *s) => None,
        (r, i, _) = futures::future::select_all(tasks.iter_mut()) => Some((r, i)),
    };
    if let Some((_, i)) = failed {
        tasks.remove(i); // finished: its handle must not be polled again
    }
    let failed = failed.map(|(r, _)| r);
    node.shutdown();
    let _ = stop_tx.send(true);
    // Servers drain gracefully, but long-lived watch streams never end by themselves.
    for mut t in tasks {
        if tokio::time::timeout(Duration::from_secs(2), &mut t).await.is_err() {
            t.abort();
        }
    }
    let _ = tokio::task::spawn_blocking(move || raft_thread.join()).await;
    if node.was_removed() {
        return Err(Error::MemberRemoved);
    }
    match failed {
        Some(Ok(Err(e))) => Err(e),
        Some(Err(e)) => Err(Error::Config(format!("server task failed: {e}"))),
        _ => Ok(()),
    }
}
