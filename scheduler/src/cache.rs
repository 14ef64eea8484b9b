//! Mirrors kube-scheduler's backend/cache: the nodes and the pods on them as the scheduler
//! believes them to be — which runs ahead of the API server.
//!
//! When a pod is scheduled it is *assumed* onto its node at once, before the binding is written,
//! so the next scheduling cycle already counts its requests and ports. When the pod watch then
//! reports the pod bound, the assumption is *confirmed*. If the binding fails, the assumption is
//! *forgotten* (rolled back); an assumption whose binding was sent but never confirmed expires
//! after [`ASSUMED_POD_TTL`].
//!
//! Each scheduling cycle works on a [`Snapshot`]: the node list as of the cycle's start. Node
//! infos are shared (`Arc`) between cache and snapshot and copied only when one changes.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use tokio::time::Instant;

use crate::framework::{ClusterEvent, NodeInfo, PodInfo};

/// How long an assumed pod whose binding finished waits to be confirmed by the pod watch.
pub const ASSUMED_POD_TTL: Duration = Duration::from_secs(30);

struct PodState {
    pod: Arc<PodInfo>,
    node: String,
    assumed: bool,
    /// Set when the binding was sent: the assumption expires at this time unless confirmed.
    deadline: Option<Instant>,
}

struct CachedNode {
    info: Arc<NodeInfo>,
    /// False once the Node was deleted while pods still point at it (or before it is seen).
    present: bool,
}

#[derive(Default)]
pub struct Cache {
    nodes: BTreeMap<String, CachedNode>,
    pods: HashMap<String, PodState>,
    generation: u64,
    /// Nodes changed since the snapshot was last updated (kube-scheduler walks a generation-ordered
    /// list for the same purpose), and whether the set of nodes itself changed.
    changed: Vec<String>,
    membership_changed: bool,
}

/// The nodes as one scheduling cycle sees them.
#[derive(Default, Clone)]
pub struct Snapshot {
    pub nodes: Vec<Arc<NodeInfo>>,
    /// Node name → position in `nodes`.
    index: HashMap<Arc<str>, usize>,
    /// Positions of the nodes with pods that have pod (anti-)affinity / required anti-affinity.
    with_affinity: std::collections::BTreeSet<usize>,
    with_required_anti_affinity: std::collections::BTreeSet<usize>,
    generation: u64,
}

impl Snapshot {
    fn track(&mut self, i: usize) {
        let n = &self.nodes[i];
        for (set, has) in [
            (&mut self.with_affinity, !n.pods_with_affinity.is_empty()),
            (&mut self.with_required_anti_affinity, !n.pods_with_required_anti_affinity.is_empty()),
        ] {
            if has {
                set.insert(i);
            } else {
                set.remove(&i);
            }
        }
    }

    /// The nodes holding pods with pod (anti-)affinity.
    pub fn nodes_with_affinity(&self) -> Vec<Arc<NodeInfo>> {
        self.with_affinity.iter().map(|&i| self.nodes[i].clone()).collect()
    }

    /// The nodes holding pods with required pod anti-affinity.
    pub fn nodes_with_required_anti_affinity(&self) -> Vec<Arc<NodeInfo>> {
        self.with_required_anti_affinity.iter().map(|&i| self.nodes[i].clone()).collect()
    }
}

fn node_name(pod: &Pod) -> Option<&str> {
    pod.spec.as_ref().and_then(|s| s.node_name.as_deref()).filter(|n| !n.is_empty())
}

fn placeholder_node(name: &str) -> Arc<Node> {
    let mut n = Node::default();
    n.metadata.name = Some(name.to_string());
    Arc::new(n)
}

/// What changed between two versions of a Node, as queue events.
pub fn node_update_events(old: &Node, new: &Node) -> Vec<ClusterEvent> {
    let mut events = Vec::new();
    if old.metadata.labels != new.metadata.labels {
        events.push(ClusterEvent::NodeLabelChange);
    }
    let (os, ns) = (old.spec.as_ref(), new.spec.as_ref());
    if os.and_then(|s| s.taints.as_ref()) != ns.and_then(|s| s.taints.as_ref()) {
        events.push(ClusterEvent::NodeTaintChange);
    }
    if os.and_then(|s| s.unschedulable) != ns.and_then(|s| s.unschedulable) {
        events.push(ClusterEvent::NodeSpecUnschedulableChange);
    }
    let (ost, nst) = (old.status.as_ref(), new.status.as_ref());
    if ost.and_then(|s| s.allocatable.as_ref()) != nst.and_then(|s| s.allocatable.as_ref()) {
        events.push(ClusterEvent::NodeAllocatableChange);
    }
    let ready = |s: Option<&k8s_openapi::api::core::v1::NodeStatus>| {
        s.and_then(|s| s.conditions.as_ref()).map(|c| c.iter().map(|c| (c.type_.clone(), c.status.clone())).collect::<Vec<_>>())
    };
    if ready(ost) != ready(nst) {
        events.push(ClusterEvent::NodeConditionChange);
    }
    events
}

impl Cache {
    pub fn new() -> Cache {
        Cache::default()
    }

    fn node_mut(&mut self, name: &str) -> &mut NodeInfo {
        self.generation += 1;
        let generation = self.generation;
        if self.changed.len() > self.nodes.len() {
            // The snapshot has not been updated for a while: rebuild it in full next time.
            self.changed.clear();
            self.membership_changed = true;
        } else {
            self.changed.push(name.to_string());
        }
        let entry = self
            .nodes
            .entry(name.to_string())
            .or_insert_with(|| CachedNode { info: Arc::new(NodeInfo::new(placeholder_node(name))), present: false });
        let info = Arc::make_mut(&mut entry.info);
        info.generation = generation;
        info
    }

    fn drop_if_empty(&mut self, name: &str) {
        if let Some(n) = self.nodes.get(name)
            && !n.present
            && n.info.pods.is_empty()
        {
            self.nodes.remove(name);
            self.membership_changed = true;
        }
    }

    /// Adds or replaces a Node; returns the queue events this change stands for.
    pub fn upsert_node(&mut self, node: Arc<Node>) -> Vec<ClusterEvent> {
        let name = node.metadata.name.clone().unwrap_or_default();
        let events = match self.nodes.get(&name) {
            Some(n) if n.present => node_update_events(&n.info.node, &node),
            _ => vec![ClusterEvent::NodeAdd],
        };
        if events.is_empty() && self.nodes.get(&name).is_some_and(|n| Arc::ptr_eq(&n.info.node, &node)) {
            return events;
        }
        self.node_mut(&name).set_node(node);
        let entry = self.nodes.get_mut(&name).expect("just inserted");
        if !entry.present {
            entry.present = true;
            self.membership_changed = true;
        }
        events
    }

    pub fn remove_node(&mut self, name: &str) {
        if let Some(n) = self.nodes.get_mut(name) {
            n.present = false;
            self.membership_changed = true;
        }
        self.generation += 1;
        self.drop_if_empty(name);
    }

    /// The pod with `uid` is in the cache (bound or assumed).
    pub fn contains_pod(&self, uid: &str) -> bool {
        self.pods.contains_key(uid)
    }

    pub fn is_assumed(&self, uid: &str) -> bool {
        self.pods.get(uid).is_some_and(|p| p.assumed)
    }

    fn place(&mut self, pod: Arc<PodInfo>, node: &str) {
        self.node_mut(node).add_pod(pod);
    }

    fn unplace(&mut self, uid: &str, node: &str) {
        self.node_mut(node).remove_pod(uid);
        self.drop_if_empty(node);
    }

    /// Counts `pod` on `node` before its binding is written.
    pub fn assume_pod(&mut self, pod: Arc<PodInfo>, node: &str) {
        let uid = pod.uid().to_string();
        if let Some(old) = self.pods.remove(&uid) {
            self.unplace(&uid, &old.node);
        }
        self.place(pod.clone(), node);
        self.pods.insert(uid, PodState { pod, node: node.to_string(), assumed: true, deadline: None });
    }

    /// The binding was sent: start the assumption's expiry clock.
    pub fn finish_binding(&mut self, uid: &str, now: Instant) {
        if let Some(p) = self.pods.get_mut(uid)
            && p.assumed
        {
            p.deadline = Some(now + ASSUMED_POD_TTL);
        }
    }

    /// Rolls an assumption back (its binding failed).
    pub fn forget_pod(&mut self, uid: &str) {
        if let Some(p) = self.pods.get(uid)
            && p.assumed
        {
            let node = p.node.clone();
            self.pods.remove(uid);
            self.unplace(uid, &node);
        }
    }

    /// A pod the watch reports bound to a node: confirms an assumption, or adds/updates it.
    pub fn add_or_update_pod(&mut self, pod: Arc<Pod>) {
        let Some(node) = node_name(&pod).map(str::to_string) else { return };
        let uid = api::pod::uid(&pod).to_string();
        if let Some(old) = self.pods.remove(&uid) {
            self.unplace(&uid, &old.node);
        }
        let info = Arc::new(PodInfo::new(pod));
        self.place(info.clone(), &node);
        self.pods.insert(uid, PodState { pod: info, node, assumed: false, deadline: None });
    }

    pub fn remove_pod(&mut self, uid: &str) {
        if let Some(old) = self.pods.remove(uid) {
            self.unplace(uid, &old.node);
        }
    }

    /// Drops assumptions whose binding finished but which the watch never confirmed.
    pub fn cleanup_expired_assumed_pods(&mut self, now: Instant) -> Vec<String> {
        let expired: Vec<(String, String)> = self
            .pods
            .iter()
            .filter(|(_, p)| p.assumed && p.deadline.is_some_and(|d| d <= now))
            .map(|(uid, p)| (uid.clone(), p.node.clone()))
            .collect();
        for (uid, node) in &expired {
            tracing::warn!(target: "scheduler::cache", pod = self.pods[uid].pod.key(), node, "assumed pod expired without being confirmed");
            self.pods.remove(uid);
            self.unplace(uid, node);
        }
        expired.into_iter().map(|(uid, _)| uid).collect()
    }

    /// Brings `snap` up to date: replaces only the nodes changed since its last update, and
    /// rebuilds it when nodes came or went (or when it is some other snapshot than last time).
    pub fn update_snapshot(&mut self, snap: &mut Snapshot) {
        if snap.generation == self.generation && !self.membership_changed {
            return;
        }
        let incremental = !self.membership_changed && snap.generation != 0 && self.changed.len() < self.nodes.len();
        if incremental {
            for name in self.changed.drain(..) {
                if let (Some(&i), Some(n)) = (snap.index.get(name.as_str()), self.nodes.get(&name)) {
                    snap.nodes[i] = n.info.clone();
                    snap.track(i);
                }
            }
        } else {
            snap.nodes = self.nodes.values().filter(|n| n.present).map(|n| n.info.clone()).collect();
            snap.index = snap.nodes.iter().enumerate().map(|(i, n)| (n.node_name.clone(), i)).collect();
            snap.with_affinity.clear();
            snap.with_required_anti_affinity.clear();
            for i in 0..snap.nodes.len() {
                snap.track(i);
            }
            self.changed.clear();
            self.membership_changed = false;
        }
        snap.generation = self.generation;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::types::testing::*;
    use serde_json::json;

    fn bound(name: &str, node: &str, cpu: &str) -> Arc<Pod> {
        let p = pod(name, json!({"nodeName": node, "containers": [container(cpu, "")]}));
        p.pod.clone()
    }

    #[test]
    fn assume_confirm_forget_expire() {
        let mut c = Cache::new();
        c.upsert_node(plain_node("n1").node.clone());
        let mut snap = Snapshot::default();
        c.update_snapshot(&mut snap);
        assert_eq!(snap.nodes.len(), 1);

        // Assumed: counted at once.
        let p = Arc::new(pod("a", json!({"containers": [container("1", "")]})));
        c.assume_pod(p.clone(), "n1");
        c.update_snapshot(&mut snap);
        assert_eq!(snap.nodes[0].requested.milli_cpu, 1000);
        assert!(c.is_assumed("uid-a"));

        // Confirmed by the watch: still counted once.
        c.add_or_update_pod(bound("a", "n1", "1"));
        c.update_snapshot(&mut snap);
        assert_eq!(snap.nodes[0].requested.milli_cpu, 1000);
        assert!(!c.is_assumed("uid-a"));
        // Forgetting a confirmed pod does nothing.
        c.forget_pod("uid-a");
        assert!(c.contains_pod("uid-a"));

        // A failed binding rolls the assumption back.
        let b = Arc::new(pod("b", json!({"containers": [container("2", "")]})));
        c.assume_pod(b, "n1");
        c.forget_pod("uid-b");
        c.update_snapshot(&mut snap);
        assert_eq!(snap.nodes[0].requested.milli_cpu, 1000);

        // An unconfirmed assumption expires after the TTL once its binding finished.
        let d = Arc::new(pod("d", json!({"containers": [container("1", "")]})));
        let t0 = Instant::now();
        c.assume_pod(d, "n1");
        assert!(c.cleanup_expired_assumed_pods(t0 + ASSUMED_POD_TTL * 2).is_empty(), "no deadline before the binding finished");
        c.finish_binding("uid-d", t0);
        assert!(c.cleanup_expired_assumed_pods(t0 + ASSUMED_POD_TTL / 2).is_empty());
        assert_eq!(c.cleanup_expired_assumed_pods(t0 + ASSUMED_POD_TTL), vec!["uid-d".to_string()]);
        c.update_snapshot(&mut snap);
        assert_eq!(snap.nodes[0].requested.milli_cpu, 1000);
    }

    #[test]
    fn pods_before_their_node_and_after_its_deletion() {
        let mut c = Cache::new();
        c.add_or_update_pod(bound("a", "n1", "1"));
        let mut snap = Snapshot::default();
        c.update_snapshot(&mut snap);
        assert!(snap.nodes.is_empty(), "a node never seen is not schedulable");
        c.upsert_node(plain_node("n1").node.clone());
        c.update_snapshot(&mut snap);
        assert_eq!(snap.nodes[0].requested.milli_cpu, 1000, "pods seen before the node count");
        c.remove_node("n1");
        c.update_snapshot(&mut snap);
        assert!(snap.nodes.is_empty());
        c.remove_pod("uid-a");
        assert_eq!(c.nodes.len(), 0, "a deleted node's entry goes with its last pod");
    }

    #[test]
    fn snapshot_shares_unchanged_nodes() {
        let mut c = Cache::new();
        c.upsert_node(plain_node("n1").node.clone());
        c.upsert_node(plain_node("n2").node.clone());
        let mut s1 = Snapshot::default();
        c.update_snapshot(&mut s1);
        c.add_or_update_pod(bound("a", "n1", "1"));
        let mut s2 = s1.clone();
        c.update_snapshot(&mut s2);
        assert!(!Arc::ptr_eq(&s1.nodes[0], &s2.nodes[0]), "n1 changed");
        assert!(Arc::ptr_eq(&s1.nodes[1], &s2.nodes[1]), "n2 is shared");
        assert_eq!(s1.nodes[0].requested.milli_cpu, 0, "the older snapshot is unchanged");
    }

    #[test]
    fn snapshot_tracks_nodes_with_affinity_pods() {
        let mut c = Cache::new();
        for n in ["n1", "n2", "n3"] {
            c.upsert_node(plain_node(n).node.clone());
        }
        let mut snap = Snapshot::default();
        c.update_snapshot(&mut snap);
        assert!(snap.nodes_with_affinity().is_empty());
        let anti = json!({"nodeName": "n2", "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "zone"}]}}});
        c.add_or_update_pod(pod("a", anti).pod.clone());
        c.update_snapshot(&mut snap); // incremental
        let names = |v: Vec<Arc<NodeInfo>>| v.iter().map(|n| n.name().to_string()).collect::<Vec<_>>();
        assert_eq!(names(snap.nodes_with_affinity()), vec!["n2"]);
        assert_eq!(names(snap.nodes_with_required_anti_affinity()), vec!["n2"]);
        c.remove_pod("uid-a");
        c.update_snapshot(&mut snap);
        assert!(snap.nodes_with_affinity().is_empty());
        assert!(snap.nodes_with_required_anti_affinity().is_empty());
    }

    #[test]
    fn node_update_events_table() {
        let base = plain_node("n").node.as_ref().clone();
        let mut labels = base.clone();
        labels.metadata.labels = Some([("zone".to_string(), "a".to_string())].into());
        let mut cordoned = base.clone();
        cordoned.spec.get_or_insert_default().unschedulable = Some(true);
        assert_eq!(node_update_events(&base, &labels), vec![ClusterEvent::NodeLabelChange]);
        assert_eq!(node_update_events(&base, &cordoned), vec![ClusterEvent::NodeSpecUnschedulableChange]);
        assert!(node_update_events(&base, &base).is_empty());
    }
}
