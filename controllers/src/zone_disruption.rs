//! Mirrors the zone half of pkg/controller/nodelifecycle/node_lifecycle_controller.go
//! (`ComputeZoneState`, `handleDisruption`, `setLimiterInZone`) and the token bucket behind
//! scheduler/rate_limited_queue.go: how fast dead nodes get their `NoExecute` taint, zone by zone.
//!
//! A `NoExecute` taint on a dead node means its pods are deleted `tolerationSeconds` later. When
//! many nodes die at once the cause is more often the network between them and the control plane
//! than the nodes themselves, and evicting everything would make it worse. So, on every monitor
//! pass, the node lifecycle controller:
//! 1. groups nodes into zones (`topology.kubernetes.io/region` and `zone` labels; unlabelled nodes
//!    share one zone) and gives each zone a state ([`compute_zone_state`]): FullDisruption when
//!    none of its nodes is Ready, PartialDisruption when more than two and at least
//!    `--unhealthy-zone-threshold` (55 %) are not, else Normal;
//! 2. sets each zone's tainting rate ([`zone_qps`]): `--node-eviction-rate` (0.1 nodes/s) in a
//!    Normal or fully disrupted zone; in a partially disrupted one `--secondary-node-eviction-rate`
//!    (0.01/s) if the zone has more than `--large-cluster-size-threshold` (50) nodes, else none;
//!    and none anywhere when *every* zone is fully disrupted — then the control plane itself is the
//!    likely one cut off, and the NoExecute taints already put on are taken away;
//! 3. lets a node get a new `NoExecute` taint only when its zone's bucket has a token
//!    ([`ZoneLimiters::try_take`]; burst 1); one that must wait keeps its NoSchedule taints and
//!    is tried again on the next pass.

use std::collections::HashMap;
use std::time::Instant;

use k8s_openapi::api::core::v1::Node;

/// `--node-eviction-rate`'s default: nodes per second that may get a NoExecute taint in a zone.
pub const DEFAULT_NODE_EVICTION_RATE: f64 = 0.1;
/// `--secondary-node-eviction-rate`'s default: the rate in a partially disrupted large zone.
pub const DEFAULT_SECONDARY_NODE_EVICTION_RATE: f64 = 0.01;
/// `--unhealthy-zone-threshold`'s default: the share of not-Ready nodes that disrupts a zone.
pub const DEFAULT_UNHEALTHY_ZONE_THRESHOLD: f64 = 0.55;
/// `--large-cluster-size-threshold`'s default: above it a disrupted zone keeps a slow rate.
pub const DEFAULT_LARGE_CLUSTER_SIZE_THRESHOLD: usize = 50;

const LABEL_ZONE: &str = "topology.kubernetes.io/zone";
const LABEL_REGION: &str = "topology.kubernetes.io/region";

/// The rates and thresholds, as kube-controller-manager's flags name them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rates {
    pub node_eviction_rate: f64,
    pub secondary_node_eviction_rate: f64,
    pub unhealthy_zone_threshold: f64,
    pub large_cluster_size_threshold: usize,
}

impl Default for Rates {
    fn default() -> Self {
        Rates {
            node_eviction_rate: DEFAULT_NODE_EVICTION_RATE,
            secondary_node_eviction_rate: DEFAULT_SECONDARY_NODE_EVICTION_RATE,
            unhealthy_zone_threshold: DEFAULT_UNHEALTHY_ZONE_THRESHOLD,
            large_cluster_size_threshold: DEFAULT_LARGE_CLUSTER_SIZE_THRESHOLD,
        }
    }
}

/// Kubernetes' `ZoneState`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ZoneState {
    Normal,
    PartialDisruption,
    FullDisruption,
}

/// A node's zone key (`utilnode.GetZoneKey`): region and zone, empty for an unlabelled node.
pub fn zone_of(node: &Node) -> String {
    let labels = node.metadata.labels.as_ref();
    let get = |k: &str| labels.and_then(|l| l.get(k)).map(String::as_str).unwrap_or("");
    let (region, zone) = (get(LABEL_REGION), get(LABEL_ZONE));
    if region.is_empty() && zone.is_empty() { String::new() } else { format!("{region}:{zone}") }
}

/// Step 1: a zone's state from how many of its nodes are Ready and how many are not.
pub fn compute_zone_state(ready: usize, not_ready: usize, unhealthy_threshold: f64) -> ZoneState {
    let total = ready + not_ready;
    if ready == 0 && not_ready > 0 {
        ZoneState::FullDisruption
    } else if not_ready > 2 && total > 0 && not_ready as f64 / total as f64 >= unhealthy_threshold {
        ZoneState::PartialDisruption
    } else {
        ZoneState::Normal
    }
}

/// Step 2: a zone's tainting rate in nodes per second.
pub fn zone_qps(state: ZoneState, zone_size: usize, all_fully_disrupted: bool, rates: &Rates) -> f64 {
    if all_fully_disrupted {
        return 0.0;
    }
    match state {
        ZoneState::Normal | ZoneState::FullDisruption => rates.node_eviction_rate,
        ZoneState::PartialDisruption if zone_size > rates.large_cluster_size_threshold => rates.secondary_node_eviction_rate,
        ZoneState::PartialDisruption => 0.0,
    }
}

/// One zone's token bucket (client-go's `flowcontrol.NewTokenBucketRateLimiter(qps, 1)`).
#[derive(Clone, Debug)]
struct Bucket {
    qps: f64,
    tokens: f64,
    last: Instant,
}

/// Step 3: a token bucket per zone, its rate set on every pass.
#[derive(Debug, Default)]
pub struct ZoneLimiters {
    buckets: HashMap<String, Bucket>,
}

impl ZoneLimiters {
    /// Sets the zone's rate; a new zone starts with its one token.
    pub fn set_qps(&mut self, zone: &str, qps: f64, now: Instant) {
        let b = self.buckets.entry(zone.to_string()).or_insert(Bucket { qps, tokens: 1.0, last: now });
        Self::refill(b, now);
        b.qps = qps;
    }

    /// Takes a token if the zone has one (refilled at its rate since the last look, up to one).
    pub fn try_take(&mut self, zone: &str, now: Instant) -> bool {
        let Some(b) = self.buckets.get_mut(zone) else { return false };
        Self::refill(b, now);
        if b.tokens >= 1.0 {
            b.tokens -= 1.0;
            true
        } else {
            false
        }
    }

    /// Forgets zones that no longer have nodes.
    pub fn retain(&mut self, zones: &[&String]) {
        self.buckets.retain(|z, _| zones.contains(&z));
    }

    fn refill(b: &mut Bucket, now: Instant) {
        let elapsed = now.saturating_duration_since(b.last).as_secs_f64();
        b.tokens = (b.tokens + elapsed * b.qps).min(1.0);
        b.last = now;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn zone_state_table() {
        let t = DEFAULT_UNHEALTHY_ZONE_THRESHOLD;
        let cases = [
            ((3, 0), ZoneState::Normal),
            ((2, 1), ZoneState::Normal),
            ((0, 1), ZoneState::FullDisruption),
            ((0, 3), ZoneState::FullDisruption),
            // Two down of three: not more than two, so Normal, however large the share.
            ((1, 2), ZoneState::Normal),
            ((2, 3), ZoneState::PartialDisruption),
            ((3, 3), ZoneState::Normal), // 50 % < 55 %
            ((0, 0), ZoneState::Normal),
        ];
        for ((ready, not_ready), want) in cases {
            assert_eq!(compute_zone_state(ready, not_ready, t), want, "{ready} ready, {not_ready} not");
        }
    }

    #[test]
    fn zone_qps_table() {
        let r = Rates::default();
        assert_eq!(zone_qps(ZoneState::Normal, 3, false, &r), 0.1);
        assert_eq!(zone_qps(ZoneState::FullDisruption, 3, false, &r), 0.1);
        assert_eq!(zone_qps(ZoneState::PartialDisruption, 10, false, &r), 0.0);
        assert_eq!(zone_qps(ZoneState::PartialDisruption, 51, false, &r), 0.01);
        assert_eq!(zone_qps(ZoneState::Normal, 3, true, &r), 0.0);
    }

    #[test]
    fn buckets_hold_one_token_and_refill_at_their_rate() {
        let t0 = Instant::now();
        let mut l = ZoneLimiters::default();
        assert!(!l.try_take("a", t0), "an unknown zone has no token");
        l.set_qps("a", 0.1, t0);
        assert!(l.try_take("a", t0), "burst 1");
        assert!(!l.try_take("a", t0 + Duration::from_secs(9)));
        assert!(l.try_take("a", t0 + Duration::from_secs(10)), "one token per 10 s at 0.1/s");
        // A long quiet time still gives one token only.
        assert!(l.try_take("a", t0 + Duration::from_secs(100)));
        assert!(!l.try_take("a", t0 + Duration::from_secs(100)));
        // Rate 0: never again.
        l.set_qps("a", 0.0, t0 + Duration::from_secs(100));
        assert!(!l.try_take("a", t0 + Duration::from_secs(1000)));
        l.retain(&[]);
        assert!(!l.try_take("a", t0 + Duration::from_secs(1000)));
    }

    #[test]
    fn zone_keys() {
        let node = |labels: serde_json::Value| -> Node { serde_json::from_value(serde_json::json!({"metadata": {"name": "n", "labels": labels}})).unwrap() };
        assert_eq!(zone_of(&node(serde_json::json!({}))), "");
        assert_eq!(zone_of(&node(serde_json::json!({LABEL_ZONE: "a"}))), ":a");
        assert_eq!(zone_of(&node(serde_json::json!({LABEL_REGION: "r", LABEL_ZONE: "a"}))), "r:a");
    }
}
