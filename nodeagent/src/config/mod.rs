//! Mirrors kubelet's pkg/kubelet/config (config.go): the pods this node should run come from
//! three sources, merged into one stream of changes.
//!
//! - [`apiserver`]: the pods the API server has bound to this node (`spec.nodeName=<node>`);
//! - [`file`](mod@file): static pods, one manifest a file, in `--pod-manifest-path`;
//! - [`http`]: static pods served at `--manifest-url`.
//!
//! Each source sends **whole snapshots** ([`SourceUpdate`]): every pod it currently wants, not
//! deltas. That keeps the sources simple (a relist, a directory read and a fetch all produce a
//! full set) and makes them robust: a missed event cannot leave a pod behind, because the next
//! snapshot says what is true. The merger, [`PodConfig`], keeps each source's last snapshot and
//! turns the difference into [`PodUpdate`]s (Remove, then Add, then Update, as kubelet's
//! `podStorage.merge` orders them), keyed by pod UID.
//!
//! The merger stamps every pod, as kubelet does, with `kubernetes.io/config.source` (so that
//! [`api::pod::is_static_pod`] can tell where it came from) and `kubernetes.io/config.seen`
//! (when this agent first saw it; kept across updates).
//!
//! [`PodConfig::sources_ready`] says whether every source has delivered at least once. Until then
//! a pod the runtime has but no source mentions may simply not have been reported yet, so nothing
//! that looks orphaned may be deleted (kubelet's SourcesReady).
//!
//! Implementation caveats:
//! - A change to nothing but a pod's status is stored without an update: kubelet's RECONCILE
//!   operation (status-only changes from the API server) is left out; the status manager owns
//!   the status.
//! - Kubelet drops a pod whose full name (`name_namespace`) another source already uses; kubelab
//!   trusts the sources (static pod names carry the node name, so clashes need a user's intent).

pub(crate) mod apiserver;
pub(crate) mod file;
pub(crate) mod http;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use api::pod::kubelet_types::{CONFIG_FIRST_SEEN_ANNOTATION_KEY, CONFIG_SOURCE_ANNOTATION_KEY};
use k8s_openapi::api::core::v1::Pod;
use tokio::sync::mpsc;

/// Capacity of the channel sources send snapshots on. Small: a source that gets ahead of the
/// merger waits (its next snapshot supersedes the one it is holding anyway).
pub(crate) const SOURCE_CHANNEL_CAPACITY: usize = 16;
/// Capacity of the channel of merged updates (kubelet's is 50). Bounded so that a stalled
/// consumer slows the sources down instead of growing memory.
pub(crate) const UPDATE_CHANNEL_CAPACITY: usize = 64;
/// How often the file source re-reads the manifest directory.
pub(crate) const FILE_CHECK_FREQUENCY: Duration = Duration::from_secs(1);
/// How often the HTTP source fetches the manifest URL (kubelet's `--http-check-frequency`).
pub(crate) const HTTP_CHECK_FREQUENCY: Duration = Duration::from_secs(20);

/// One source's complete current set of pods.
#[derive(Clone, Debug)]
pub(crate) struct SourceUpdate {
    pub(crate) source: &'static str,
    pub(crate) pods: Vec<Pod>,
}

/// What happened to the pods of an update (kubetypes.PodOperation, the incremental ones).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PodOperation {
    /// New pods from the source.
    Add,
    /// Pods whose object changed in a way the agent acts on (spec, labels, annotations,
    /// deletionTimestamp, deletionGracePeriodSeconds, generation).
    Update,
    /// Pods the source no longer has (deleted from the API server, manifest removed).
    Remove,
}

/// A change to the desired set, as the pod workers consume it.
#[derive(Clone, Debug)]
pub(crate) struct PodUpdate {
    pub(crate) op: PodOperation,
    pub(crate) source: &'static str,
    pub(crate) pods: Vec<Pod>,
}

/// The merger of pod sources. Create it with [`PodConfig::new`] inside a tokio runtime: it spawns
/// the merging task, which runs until every [`SourceUpdate`] sender (including the one this
/// struct holds) is dropped or the [`PodUpdate`] receiver is.
pub(crate) struct PodConfig {
    tx: mpsc::Sender<SourceUpdate>,
    sources: Vec<&'static str>,
    /// The sources that have delivered a snapshot. A std mutex: held for a set insert or a
    /// subset check, never across an await.
    seen: Arc<Mutex<BTreeSet<&'static str>>>,
}

impl PodConfig {
    /// A merger for `sources` (names from [`api::pod::kubelet_types`]: `APISERVER_SOURCE`,
    /// `FILE_SOURCE`, `HTTP_SOURCE`). Snapshots from any other source are dropped with a warning.
    ///
    /// # Panics
    /// Outside a tokio runtime (it spawns the merging task).
    pub(crate) fn new(sources: &[&'static str]) -> (PodConfig, mpsc::Receiver<PodUpdate>) {
        let (tx, rx) = mpsc::channel(SOURCE_CHANNEL_CAPACITY);
        let (updates_tx, updates_rx) = mpsc::channel(UPDATE_CHANNEL_CAPACITY);
        let seen = Arc::new(Mutex::new(BTreeSet::new()));
        let sources: Vec<&'static str> = sources.to_vec();
        tokio::spawn(merge(rx, updates_tx, sources.clone(), seen.clone()));
        (PodConfig { tx, sources, seen }, updates_rx)
    }

    /// Where a source sends its snapshots.
    pub(crate) fn sender(&self) -> mpsc::Sender<SourceUpdate> {
        self.tx.clone()
    }

    /// Whether every configured source has delivered at least one snapshot (kubelet's
    /// SourcesReady): only then may the agent treat what no source mentions as orphaned.
    pub(crate) fn sources_ready(&self) -> bool {
        let seen = self.seen.lock().expect("sources-seen lock poisoned");
        self.sources.iter().all(|s| seen.contains(s))
    }
}

/// The merging task: one map of UID → pod per source.
async fn merge(
    mut rx: mpsc::Receiver<SourceUpdate>,
    out: mpsc::Sender<PodUpdate>,
    sources: Vec<&'static str>,
    seen: Arc<Mutex<BTreeSet<&'static str>>>,
) {
    let mut state: BTreeMap<&'static str, Vec<Pod>> = BTreeMap::new();
    while let Some(update) = rx.recv().await {
        if !sources.contains(&update.source) {
            tracing::warn!(target: "kubelet::config", source = update.source, "snapshot from a source that is not configured; dropped");
            continue;
        }
        let old = state.remove(update.source).unwrap_or_default();
        let (current, updates) = apply_snapshot(update.source, &old, update.pods, now());
        state.insert(update.source, current);
        for u in updates {
            tracing::debug!(target: "kubelet::config", source = u.source, op = ?u.op, pods = u.pods.len(), "pod update");
            if out.send(u).await.is_err() {
                return; // nobody consumes updates any more
            }
        }
        // Only now: a source counts as ready once its pods are queued for the sync loop, which
        // drains the queue before it looks for orphans. Marked before, a housekeeping round could
        // take a restarted node's running pods for orphans (no source had them in the agent yet)
        // and kill them.
        seen.lock().expect("sources-seen lock poisoned").insert(update.source);
    }
}

fn now() -> String {
    k8s_openapi::jiff::Timestamp::now().to_string()
}

/// One snapshot against the last: stamps the new pods (source, first-seen time — carried over from
/// the old copy when there is one), and returns the new stored set with the updates to emit.
fn apply_snapshot(source: &'static str, old: &[Pod], new: Vec<Pod>, now: String) -> (Vec<Pod>, Vec<PodUpdate>) {
    let first_seen: BTreeMap<&str, &str> = old
        .iter()
        .filter_map(|p| Some((p.metadata.uid.as_deref()?, annotation(p, CONFIG_FIRST_SEEN_ANNOTATION_KEY)?)))
        .collect();
    let mut current = Vec::with_capacity(new.len());
    for mut pod in new {
        let Some(uid) = pod.metadata.uid.clone().filter(|u| !u.is_empty()) else {
            tracing::warn!(target: "kubelet::config", source, pod = ?pod.metadata.name, "pod without a UID ignored");
            continue;
        };
        let seen = first_seen.get(uid.as_str()).map_or_else(|| now.clone(), |s| s.to_string());
        let annotations = pod.metadata.annotations.get_or_insert_with(BTreeMap::new);
        annotations.insert(CONFIG_SOURCE_ANNOTATION_KEY.to_string(), source.to_string());
        annotations.entry(CONFIG_FIRST_SEEN_ANNOTATION_KEY.to_string()).or_insert(seen);
        current.push(pod);
    }
    let (adds, updates, removes) = diff(old, &current);
    let mut out = Vec::new();
    for (op, pods) in [(PodOperation::Remove, removes), (PodOperation::Add, adds), (PodOperation::Update, updates)] {
        if !pods.is_empty() {
            out.push(PodUpdate { op, source, pods });
        }
    }
    let mut deduped: Vec<Pod> = Vec::with_capacity(current.len());
    for p in current {
        if !deduped.iter().any(|q| q.metadata.uid == p.metadata.uid) {
            deduped.push(p);
        }
    }
    (deduped, out)
}

fn annotation<'a>(pod: &'a Pod, key: &str) -> Option<&'a str> {
    pod.metadata.annotations.as_ref()?.get(key).map(String::as_str)
}

/// Whether two versions of one pod differ in anything the agent acts on (kubelet's
/// checkAndUpdatePod): the spec, generation, labels, annotations (but not `config.seen`, which
/// only records when this agent first saw the pod), deletionTimestamp and
/// deletionGracePeriodSeconds. Status and resourceVersion alone are not a change.
pub(crate) fn pod_changed(old: &Pod, new: &Pod) -> bool {
    let annotations = |p: &Pod| -> BTreeMap<String, String> {
        let mut a = p.metadata.annotations.clone().unwrap_or_default();
        a.remove(CONFIG_FIRST_SEEN_ANNOTATION_KEY);
        a
    };
    let (o, n) = (&old.metadata, &new.metadata);
    old.spec != new.spec
        || o.generation != n.generation
        || o.labels.clone().unwrap_or_default() != n.labels.clone().unwrap_or_default()
        || annotations(old) != annotations(new)
        || o.deletion_timestamp != n.deletion_timestamp
        || o.deletion_grace_period_seconds != n.deletion_grace_period_seconds
}

/// The decision: what a source's new snapshot means against its previous one, by pod UID —
/// `(adds, updates, removes)`. Pods without a UID are ignored; a UID twice in `new` counts once
/// (the first). Each list keeps the order of the snapshot it comes from.
pub(crate) fn diff(old: &[Pod], new: &[Pod]) -> (Vec<Pod>, Vec<Pod>, Vec<Pod>) {
    let uid = |p: &Pod| p.metadata.uid.clone().filter(|u| !u.is_empty());
    let old_by_uid: BTreeMap<String, &Pod> = old.iter().filter_map(|p| Some((uid(p)?, p))).collect();
    let mut in_new: BTreeSet<String> = BTreeSet::new();
    let (mut adds, mut updates) = (Vec::new(), Vec::new());
    for p in new {
        let Some(id) = uid(p) else { continue };
        if !in_new.insert(id.clone()) {
            continue;
        }
        match old_by_uid.get(&id) {
            None => adds.push(p.clone()),
            Some(o) if pod_changed(o, p) => updates.push(p.clone()),
            Some(_) => {}
        }
    }
    let mut removed: BTreeSet<String> = BTreeSet::new();
    let removes = old
        .iter()
        .filter(|p| uid(p).is_some_and(|id| !in_new.contains(&id) && removed.insert(id)))
        .cloned()
        .collect();
    (adds, updates, removes)
}

/// FNV-1a, 128 bits, as hex: the static pod sources' UID (kubelet uses an MD5 of the object).
/// Written out here because it is a dozen lines and must never change between builds: the UID of
/// a static pod has to survive agent restarts and upgrades (std's hasher makes no such promise).
pub(crate) fn fnv128_hex(parts: &[&[u8]]) -> String {
    const OFFSET: u128 = 0x6c62_272e_07bb_0142_62b8_2175_6295_c58d;
    const PRIME: u128 = 0x0000_0000_0100_0000_0000_0000_0000_013b;
    let mut h = OFFSET;
    for part in parts {
        // Length-prefix each part so that ("ab", "c") and ("a", "bc") differ.
        for b in (part.len() as u64).to_le_bytes().iter().chain(part.iter()) {
            h ^= u128::from(*b);
            h = h.wrapping_mul(PRIME);
        }
    }
    format!("{h:032x}")
}

/// Logs an outage once: the first failure at warn, the recovery at info, nothing in between.
/// Sources and the node status loop use it so that a dead API server gives two lines, not one a
/// second.
#[derive(Debug, Default)]
pub(crate) struct Outage {
    down: bool,
}

impl Outage {
    /// Records a failure; true the first time in an outage (log it then).
    pub(crate) fn failed(&mut self) -> bool {
        !std::mem::replace(&mut self.down, true)
    }

    /// Records a success; true if it ends an outage.
    pub(crate) fn recovered(&mut self) -> bool {
        std::mem::replace(&mut self.down, false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use api::pod::kubelet_types::{APISERVER_SOURCE, FILE_SOURCE};
    use serde_json::{Value, json};

    fn pod(uid: &str, extra: Value) -> Pod {
        let mut v = json!({"metadata": {"name": format!("p-{uid}"), "namespace": "default", "uid": uid},
            "spec": {"containers": [{"name": "c", "image": "busybox:1"}]}});
        merge_json(&mut v, extra);
        serde_json::from_value(v).expect("pod")
    }

    fn merge_json(a: &mut Value, b: Value) {
        match (a, b) {
            (Value::Object(a), Value::Object(b)) => {
                for (k, v) in b {
                    merge_json(a.entry(k).or_insert(Value::Null), v);
                }
            }
            (a, b) => *a = b,
        }
    }

    fn uids(pods: &[Pod]) -> Vec<&str> {
        pods.iter().map(|p| p.metadata.uid.as_deref().unwrap_or("")).collect()
    }

    #[test]
    fn diff_table() {
        let a = pod("a", json!({}));
        let b = pod("b", json!({}));
        let c = pod("c", json!({}));
        type Case<'a> = (&'a str, Vec<Pod>, Vec<Pod>, [Vec<&'a str>; 3]);
        let cases: Vec<Case> = vec![
            ("first snapshot", vec![], vec![a.clone(), b.clone()], [vec!["a", "b"], vec![], vec![]]),
            ("same again", vec![a.clone(), b.clone()], vec![a.clone(), b.clone()], [vec![], vec![], vec![]]),
            ("one gone, one new", vec![a.clone(), b.clone()], vec![b.clone(), c.clone()], [vec!["c"], vec![], vec!["a"]]),
            ("all gone", vec![a.clone(), b.clone()], vec![], [vec![], vec![], vec!["a", "b"]]),
            (
                "spec change",
                vec![a.clone()],
                vec![pod("a", json!({"spec": {"containers": [{"name": "c", "image": "busybox:2"}]}}))],
                [vec![], vec!["a"], vec![]],
            ),
            ("label change", vec![a.clone()], vec![pod("a", json!({"metadata": {"labels": {"x": "y"}}}))], [vec![], vec!["a"], vec![]]),
            (
                "annotation change",
                vec![a.clone()],
                vec![pod("a", json!({"metadata": {"annotations": {"x": "y"}}}))],
                [vec![], vec!["a"], vec![]],
            ),
            (
                "config.seen alone is no change",
                vec![a.clone()],
                vec![pod("a", json!({"metadata": {"annotations": {"kubernetes.io/config.seen": "later"}}}))],
                [vec![], vec![], vec![]],
            ),
            (
                "deletion requested",
                vec![a.clone()],
                vec![pod("a", json!({"metadata": {"deletionTimestamp": "2025-01-01T00:00:00Z", "deletionGracePeriodSeconds": 30}}))],
                [vec![], vec!["a"], vec![]],
            ),
            (
                "grace period shortened",
                vec![pod("a", json!({"metadata": {"deletionTimestamp": "2025-01-01T00:00:00Z", "deletionGracePeriodSeconds": 30}}))],
                vec![pod("a", json!({"metadata": {"deletionTimestamp": "2025-01-01T00:00:00Z", "deletionGracePeriodSeconds": 0}}))],
                [vec![], vec!["a"], vec![]],
            ),
            ("generation bump", vec![a.clone()], vec![pod("a", json!({"metadata": {"generation": 2}}))], [vec![], vec!["a"], vec![]]),
            (
                "status and resourceVersion alone are no change",
                vec![a.clone()],
                vec![pod("a", json!({"metadata": {"resourceVersion": "9"}, "status": {"phase": "Running"}}))],
                [vec![], vec![], vec![]],
            ),
            (
                "same name, new UID: remove and add",
                vec![a.clone()],
                vec![pod("a2", json!({"metadata": {"name": "p-a"}}))],
                [vec!["a2"], vec![], vec!["a"]],
            ),
            ("duplicate UID counts once", vec![], vec![a.clone(), a.clone()], [vec!["a"], vec![], vec![]]),
            ("pods without a UID are ignored", vec![], vec![pod("", json!({}))], [vec![], vec![], vec![]]),
        ];
        for (name, old, new, [adds, updates, removes]) in cases {
            let (a, u, r) = diff(&old, &new);
            assert_eq!((uids(&a), uids(&u), uids(&r)), (adds, updates, removes), "{name}");
        }
    }

    #[test]
    fn snapshot_stamps_source_and_keeps_first_seen() {
        let (stored, updates) = apply_snapshot(FILE_SOURCE, &[], vec![pod("a", json!({}))], "t1".into());
        assert_eq!(updates.len(), 1);
        assert_eq!(updates[0].op, PodOperation::Add);
        let p = &updates[0].pods[0];
        assert_eq!(annotation(p, CONFIG_SOURCE_ANNOTATION_KEY), Some("file"));
        assert_eq!(annotation(p, CONFIG_FIRST_SEEN_ANNOTATION_KEY), Some("t1"));
        assert!(api::pod::is_static_pod(p));

        let edited = pod("a", json!({"metadata": {"labels": {"v": "2"}}}));
        let (stored, updates) = apply_snapshot(FILE_SOURCE, &stored, vec![edited], "t2".into());
        assert_eq!(updates.len(), 1);
        assert_eq!(updates[0].op, PodOperation::Update);
        assert_eq!(annotation(&updates[0].pods[0], CONFIG_FIRST_SEEN_ANNOTATION_KEY), Some("t1"), "first-seen survives updates");

        let (stored, updates) = apply_snapshot(FILE_SOURCE, &stored, vec![pod("b", json!({}))], "t3".into());
        assert_eq!(updates.iter().map(|u| u.op).collect::<Vec<_>>(), vec![PodOperation::Remove, PodOperation::Add]);
        assert_eq!(uids(&stored), vec!["b"]);
    }

    #[tokio::test]
    async fn merger_reports_changes_and_readiness() {
        let (config, mut updates) = PodConfig::new(&[APISERVER_SOURCE, FILE_SOURCE]);
        assert!(!config.sources_ready());
        let tx = config.sender();
        tx.send(SourceUpdate { source: APISERVER_SOURCE, pods: vec![pod("a", json!({}))] }).await.expect("send");
        let u = updates.recv().await.expect("update");
        assert_eq!((u.op, u.source, uids(&u.pods)), (PodOperation::Add, APISERVER_SOURCE, vec!["a"]));
        assert!(!config.sources_ready(), "the file source has not reported yet");

        // An empty snapshot emits nothing but marks the source as seen.
        tx.send(SourceUpdate { source: FILE_SOURCE, pods: vec![] }).await.expect("send");
        // A source that is not configured is ignored.
        tx.send(SourceUpdate { source: api::pod::kubelet_types::HTTP_SOURCE, pods: vec![pod("h", json!({}))] }).await.expect("send");
        tx.send(SourceUpdate { source: APISERVER_SOURCE, pods: vec![] }).await.expect("send");
        let u = updates.recv().await.expect("update");
        assert_eq!((u.op, uids(&u.pods)), (PodOperation::Remove, vec!["a"]));
        assert!(config.sources_ready());

        // A source is ready only once its pods are queued for the sync loop. Fill the queue with
        // the file source's additions (none read), then let the API server's first snapshot
        // wait for room: until its pod is queued the API source must not count as ready (the
        // sync loop would take a restarted node's pods for orphans).
        let (config, mut updates) = PodConfig::new(&[APISERVER_SOURCE, FILE_SOURCE]);
        let tx = config.sender();
        let mut file_pods = Vec::new();
        for i in 0..UPDATE_CHANNEL_CAPACITY {
            file_pods.push(pod(&format!("f{i}"), json!({})));
            tx.send(SourceUpdate { source: FILE_SOURCE, pods: file_pods.clone() }).await.expect("send");
        }
        tx.send(SourceUpdate { source: APISERVER_SOURCE, pods: vec![pod("b", json!({}))] }).await.expect("send");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        assert!(!config.sources_ready(), "ready while its pod waits for room in the queue");
        let mut seen_b = false;
        while !(seen_b && config.sources_ready()) {
            let u = updates.recv().await.expect("update");
            seen_b |= u.source == APISERVER_SOURCE && uids(&u.pods) == vec!["b"];
        }

        drop(tx);
        drop(config);
        assert!(updates.recv().await.is_none(), "the merger ends when every sender is gone");
    }

    #[test]
    fn fnv_is_stable() {
        // Pinned: a change here would give every static pod a new UID after an upgrade.
        assert_eq!(fnv128_hex(&[b"a"]), fnv128_hex(&[b"a"]));
        assert_ne!(fnv128_hex(&[b"ab", b"c"]), fnv128_hex(&[b"a", b"bc"]));
        assert_eq!(fnv128_hex(&[]), "6c62272e07bb014262b821756295c58d");
        assert_eq!(fnv128_hex(&[b"a"]).len(), 32);
    }

    #[test]
    fn outage_logs_once() {
        let mut o = Outage::default();
        assert!(!o.recovered());
        assert!(o.failed());
        assert!(!o.failed());
        assert!(o.recovered());
        assert!(!o.recovered());
    }
}
