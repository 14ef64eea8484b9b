//! Prometheus metrics, named as etcd names them where etcd has the same figure. They are served
//! on `--listen-metrics-urls` by [`crate::etcdhttp`].

use std::sync::Arc;

use prometheus::{Histogram, HistogramOpts, IntCounter, IntGauge, Registry, TextEncoder};

pub struct Metrics {
    pub registry: Registry,
    pub has_leader: IntGauge,
    pub is_leader: IntGauge,
    pub term: IntGauge,
    pub leader_changes: IntCounter,
    pub proposals_committed: IntGauge,
    pub proposals_applied: IntGauge,
    pub proposals_pending: IntGauge,
    pub proposals_failed: IntCounter,
    pub apply_duration: Histogram,
    pub fsync_duration: Histogram,
    pub backend_commit_duration: Histogram,
    pub peer_messages_rejected: IntCounter,
    pub snapshots_sent: IntCounter,
    pub snapshots_applied: IntCounter,
}

fn buckets() -> Vec<f64> {
    // 0.1 ms .. ~3.3 s, doubling, as etcd's disk histograms do (from 1 ms).
    prometheus::exponential_buckets(0.0001, 2.0, 16).expect("valid buckets")
}

impl Metrics {
    pub fn new() -> Arc<Self> {
        let registry = Registry::new();
        macro_rules! reg {
            ($m:expr) => {{
                let m = $m.expect("valid metric");
                registry.register(Box::new(m.clone())).expect("unique metric");
                m
            }};
        }
        Arc::new(Self {
            has_leader: reg!(IntGauge::new("etcd_server_has_leader", "Whether or not a leader exists. 1 is existence, 0 is not.")),
            is_leader: reg!(IntGauge::new("etcd_server_is_leader", "Whether or not this member is a leader. 1 if is, 0 otherwise.")),
            term: reg!(IntGauge::new("etcd_server_term", "The raft term this member is in.")),
            leader_changes: reg!(IntCounter::new("etcd_server_leader_changes_seen_total", "The number of leader changes seen.")),
            proposals_committed: reg!(IntGauge::new("etcd_server_proposals_committed_total", "The total number of consensus proposals committed.")),
            proposals_applied: reg!(IntGauge::new("etcd_server_proposals_applied_total", "The total number of consensus proposals applied.")),
            proposals_pending: reg!(IntGauge::new("etcd_server_proposals_pending", "The current number of pending proposals to commit.")),
            proposals_failed: reg!(IntCounter::new("etcd_server_proposals_failed_total", "The total number of failed proposals seen.")),
            apply_duration: reg!(Histogram::with_opts(HistogramOpts::new("etcd_server_apply_duration_seconds", "The latency distributions of applying committed entries of one Ready.").buckets(buckets()))),
            fsync_duration: reg!(Histogram::with_opts(HistogramOpts::new("etcd_disk_wal_fsync_duration_seconds", "The latency distributions of the WAL fdatasync (one per write, shared by the Readies queued for it).").buckets(buckets()))),
            backend_commit_duration: reg!(Histogram::with_opts(HistogramOpts::new("etcd_disk_backend_commit_duration_seconds", "The latency distributions of writing one batch of the state machine's changes to the engine (not synced).").buckets(buckets()))),
            peer_messages_rejected: reg!(IntCounter::new("kubelab_store_peer_messages_rejected_total", "Peer messages rejected as malformed or misaddressed.")),
            snapshots_sent: reg!(IntCounter::new("kubelab_store_snapshots_sent_total", "Snapshots sent to followers behind the compacted log.")),
            snapshots_applied: reg!(IntCounter::new("kubelab_store_snapshots_applied_total", "Snapshots received from the leader and applied.")),
            registry,
        })
    }

    pub fn render(&self) -> String {
        TextEncoder::new().encode_to_string(&self.registry.gather()).unwrap_or_default()
    }
}
