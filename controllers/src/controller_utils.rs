//! Mirrors pkg/controller/controller_utils.go: what the workload controllers share — the
//! expectations that keep a sync from acting twice on work the caches have not shown yet, pod
//! creation from a template, the slow-start batches creations go in, the order in which
//! surplus pods are chosen for deletion (`ActivePods`), and the hash that names what a
//! controller makes from a template (`ComputeHash`).

use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

/// How long expectations are trusted before a sync acts anyway (`ExpectationsTimeout`): a
/// watch event lost for good must not stop a controller for ever.
pub const EXPECTATIONS_TIMEOUT: Duration = Duration::from_secs(5 * 60);
/// The most pods one sync creates or deletes (`burstReplicas`).
pub const BURST_REPLICAS: usize = 500;
/// The first batch of a slow start (`SlowStartInitialBatchSize`).
pub const SLOW_START_INITIAL_BATCH_SIZE: usize = 1;
/// The annotation that ranks pods for deletion (`controller.kubernetes.io/pod-deletion-cost`).
pub const POD_DELETION_COST: &str = "controller.kubernetes.io/pod-deletion-cost";

/// The FNV-32a hash of `parts`, written as Kubernetes writes a hash into a name: its decimal
/// digits each mapped onto `bcdfghjklmnpqrstvwxz2456789` (rand.SafeEncodeString, which has no
/// vowels, so no hash spells a word).
pub fn safe_encoded_fnv32a(parts: &[&[u8]]) -> String {
    const ALPHANUMS: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut h: u32 = 0x811c_9dc5;
    for b in parts.iter().flat_map(|p| p.iter()) {
        h ^= u32::from(*b);
        h = h.wrapping_mul(0x0100_0193);
    }
    h.to_string().bytes().map(|c| ALPHANUMS[usize::from(c) % ALPHANUMS.len()] as char).collect()
}

#[derive(Debug)]
struct Expectation {
    add: i64,
    /// Pods (by name) whose deletion was asked and not yet seen (UIDTrackingControllerExpectations).
    del: HashSet<String>,
    at: Instant,
}

/// ControllerExpectations: per controller key, the creations and deletions it asked for that its
/// watch has not shown yet. A key with outstanding expectations is not synced (its caches would
/// make it create or delete the same pods again), unless they are older than
/// [`EXPECTATIONS_TIMEOUT`].
#[derive(Clone, Default)]
pub struct ControllerExpectations {
    inner: Arc<Mutex<HashMap<String, Expectation>>>,
}

impl ControllerExpectations {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Expectation>> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// SatisfiedExpectations: whether `key` may be synced.
    pub fn satisfied(&self, key: &str) -> bool {
        match self.lock().get(key) {
            None => true,
            Some(e) => (e.add <= 0 && e.del.is_empty()) || e.at.elapsed() > EXPECTATIONS_TIMEOUT,
        }
    }

    /// ExpectCreations.
    pub fn expect_creations(&self, key: &str, n: usize) {
        self.lock().insert(key.into(), Expectation { add: n as i64, del: HashSet::new(), at: Instant::now() });
    }

    /// ExpectDeletions, by pod name.
    pub fn expect_deletions(&self, key: &str, pods: impl IntoIterator<Item = String>) {
        self.lock().insert(key.into(), Expectation { add: 0, del: pods.into_iter().collect(), at: Instant::now() });
    }

    /// SetExpectations: creations and deletions (by pod name) at once, as the DaemonSet
    /// controller asks for both in one sync.
    pub fn set_expectations(&self, key: &str, add: usize, del: impl IntoIterator<Item = String>) {
        self.lock().insert(key.into(), Expectation { add: add as i64, del: del.into_iter().collect(), at: Instant::now() });
    }

    /// CreationObserved (also for a creation that was never made: LowerExpectations).
    pub fn creation_observed(&self, key: &str) {
        if let Some(e) = self.lock().get_mut(key) {
            e.add -= 1;
        }
    }

    /// DeletionObserved: the pod was seen going (or its deletion failed).
    pub fn deletion_observed(&self, key: &str, pod: &str) {
        if let Some(e) = self.lock().get_mut(key) {
            e.del.remove(pod);
        }
    }

    /// DeleteExpectations: the controller went.
    pub fn delete(&self, key: &str) {
        self.lock().remove(key);
    }
}

/// The controller reference a workload puts on what it creates (`NewControllerRef`).
pub fn controller_ref(api_version: &str, kind: &str, meta: &ObjectMeta) -> OwnerReference {
    OwnerReference {
        api_version: api_version.into(),
        kind: kind.into(),
        name: meta.name.clone().unwrap_or_default(),
        uid: meta.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// The object's controller, if any (`metav1.GetControllerOf`).
pub fn controller_of(meta: &ObjectMeta) -> Option<&OwnerReference> {
    meta.owner_references.iter().flatten().find(|r| r.controller == Some(true))
}

/// GetPodFromTemplate: a pod named `<prefix>-<random>` by the API server (generateName), with
/// the template's labels, annotations, finalizers and spec, controlled by `owner`.
pub fn pod_from_template(template: &PodTemplateSpec, namespace: &str, prefix: &str, owner: OwnerReference) -> Pod {
    let meta = template.metadata.clone().unwrap_or_default();
    Pod {
        metadata: ObjectMeta {
            generate_name: Some(format!("{prefix}-")),
            namespace: Some(namespace.into()),
            labels: meta.labels,
            annotations: meta.annotations,
            finalizers: meta.finalizers,
            owner_references: Some(vec![owner]),
            ..ObjectMeta::default()
        },
        spec: template.spec.clone(),
        status: None,
    }
}

/// slowStartBatch: runs `count` calls of `f` in batches of 1, 2, 4, … (each batch at once),
/// stopping after the first batch with an error, so a controller whose pods are all refused
/// (a quota, an invalid template) sends one request rather than hundreds. Returns how many
/// succeeded and the first error.
pub async fn slow_start_batch<F, Fut, E>(count: usize, initial: usize, f: F) -> (usize, Option<E>)
where
    F: Fn() -> Fut,
    Fut: Future<Output = Result<(), E>>,
{
    let mut remaining = count;
    let mut successes = 0;
    let mut batch = initial.min(remaining).max(1);
    while remaining > 0 {
        let batch_size = batch.min(remaining);
        let results = futures::future::join_all((0..batch_size).map(|_| f())).await;
        let mut first_err = None;
        for r in results {
            match r {
                Ok(()) => successes += 1,
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        if first_err.is_some() {
            return (successes, first_err);
        }
        remaining -= batch_size;
        batch = (batch * 2).min(remaining.max(1));
    }
    (successes, None)
}

/// Whether the pod counts as running for its controller (`IsPodActive`): not finished, not
/// being deleted.
pub fn is_pod_active(pod: &Pod) -> bool {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref()).unwrap_or("");
    phase != "Succeeded" && phase != "Failed" && pod.metadata.deletion_timestamp.is_none()
}

fn phase_rank(pod: &Pod) -> u8 {
    match pod.status.as_ref().and_then(|s| s.phase.as_deref()).unwrap_or("") {
        "Pending" => 0,
        "Running" => 2,
        _ => 1, // Unknown
    }
}

fn ready_since(pod: &Pod) -> Option<k8s_openapi::jiff::Timestamp> {
    pod.status.as_ref()?.conditions.as_ref()?.iter().find(|c| c.type_ == "Ready" && c.status == "True")?.last_transition_time.as_ref().map(|t| t.0)
}

fn restarts(pod: &Pod) -> i32 {
    pod.status.as_ref().and_then(|s| s.container_statuses.as_ref()).map_or(0, |cs| cs.iter().map(|c| c.restart_count).max().unwrap_or(0))
}

fn deletion_cost(pod: &Pod) -> i32 {
    pod.metadata.annotations.as_ref().and_then(|a| a.get(POD_DELETION_COST)).and_then(|v| v.parse().ok()).unwrap_or(0)
}

/// ActivePods' order: the pods to delete first come first — not yet scheduled, then Pending
/// before Unknown before Running, not ready before ready, a lower deletion cost, ready for a
/// shorter time, more restarts, created later.
pub fn deletion_order(a: &Pod, b: &Pod) -> Ordering {
    let assigned = |p: &Pod| p.spec.as_ref().and_then(|s| s.node_name.as_deref()).is_some_and(|n| !n.is_empty());
    assigned(a)
        .cmp(&assigned(b))
        .then_with(|| phase_rank(a).cmp(&phase_rank(b)))
        .then_with(|| api::pod::is_pod_ready(a).cmp(&api::pod::is_pod_ready(b)))
        .then_with(|| deletion_cost(a).cmp(&deletion_cost(b)))
        .then_with(|| match (ready_since(a), ready_since(b)) {
            (Some(x), Some(y)) => y.cmp(&x), // ready more recently first
            _ => Ordering::Equal,
        })
        .then_with(|| restarts(b).cmp(&restarts(a)))
        .then_with(|| {
            let created = |p: &Pod| p.metadata.creation_timestamp.as_ref().map(|t| t.0);
            created(b).cmp(&created(a))
        })
}

/// Whether every label of `template` is on the pod (FullyLabeledReplicas).
pub fn has_all_labels(pod: &Pod, template: &BTreeMap<String, String>) -> bool {
    let labels = pod.metadata.labels.clone().unwrap_or_default();
    template.iter().all(|(k, v)| labels.get(k) == Some(v))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};
    use std::sync::atomic::{AtomicUsize, Ordering as AtomicOrdering};

    fn pod(v: Value) -> Pod {
        serde_json::from_value(v).expect("pod")
    }

    #[test]
    fn expectations_hold_a_sync_until_the_watch_shows_the_work() {
        let e = ControllerExpectations::default();
        assert!(e.satisfied("rs"));
        e.expect_creations("rs", 2);
        assert!(!e.satisfied("rs"));
        e.creation_observed("rs");
        assert!(!e.satisfied("rs"));
        e.creation_observed("rs");
        assert!(e.satisfied("rs"));
        e.expect_deletions("rs", ["a".to_string(), "b".to_string()]);
        e.deletion_observed("rs", "a");
        e.deletion_observed("rs", "a"); // seen twice (an update, then the delete): counted once
        assert!(!e.satisfied("rs"));
        e.deletion_observed("rs", "b");
        assert!(e.satisfied("rs"));
        e.expect_creations("rs", 1);
        e.delete("rs");
        assert!(e.satisfied("rs"));
    }

    #[tokio::test]
    async fn slow_start_doubles_and_stops_at_the_first_failing_batch() {
        let calls = AtomicUsize::new(0);
        let (ok, err) = slow_start_batch(10, 1, || {
            calls.fetch_add(1, AtomicOrdering::SeqCst);
            async { Ok::<(), String>(()) }
        })
        .await;
        assert_eq!((ok, err, calls.load(AtomicOrdering::SeqCst)), (10, None, 10));
        // Every call fails: one call only (the first batch).
        let calls = AtomicUsize::new(0);
        let (ok, err) = slow_start_batch(10, 1, || {
            calls.fetch_add(1, AtomicOrdering::SeqCst);
            async { Err::<(), String>("quota".into()) }
        })
        .await;
        assert_eq!((ok, err.as_deref(), calls.load(AtomicOrdering::SeqCst)), (0, Some("quota"), 1));
        // The fourth call fails: batches 1, 2, then 4 (calls 4–7, one failing), then stop.
        let calls = AtomicUsize::new(0);
        let (ok, err) = slow_start_batch(20, 1, || {
            let n = calls.fetch_add(1, AtomicOrdering::SeqCst);
            async move { if n == 3 { Err("no".to_string()) } else { Ok(()) } }
        })
        .await;
        assert_eq!((ok, err.is_some(), calls.load(AtomicOrdering::SeqCst)), (6, true, 7));
    }

    #[test]
    fn surplus_pods_are_deleted_in_kubernetes_order() {
        let p = |name: &str, node: Option<&str>, phase: &str, ready: Option<&str>, restarts: i32, created: &str, cost: Option<&str>| {
            let mut v = json!({"metadata": {"name": name, "creationTimestamp": created}, "spec": {"containers": []},
                               "status": {"phase": phase, "containerStatuses": [{"name": "c", "image": "i", "imageID": "", "ready": ready.is_some(), "restartCount": restarts}]}});
            if let Some(n) = node {
                v["spec"]["nodeName"] = json!(n);
            }
            if let Some(t) = ready {
                v["status"]["conditions"] = json!([{"type": "Ready", "status": "True", "lastTransitionTime": t}]);
            }
            if let Some(c) = cost {
                v["metadata"]["annotations"] = json!({POD_DELETION_COST: c});
            }
            pod(v)
        };
        let mut pods = [
            p("ready-old", Some("n"), "Running", Some("2026-01-01T00:00:00Z"), 0, "2026-01-01T00:00:00Z", None),
            p("ready-new", Some("n"), "Running", Some("2026-01-02T00:00:00Z"), 0, "2026-01-01T00:00:00Z", None),
            p("costly", Some("n"), "Running", Some("2026-01-02T00:00:00Z"), 0, "2026-01-01T00:00:00Z", Some("100")),
            p("running-unready", Some("n"), "Running", None, 0, "2026-01-01T00:00:00Z", None),
            p("pending", Some("n"), "Pending", None, 0, "2026-01-01T00:00:00Z", None),
            p("unscheduled", None, "Pending", None, 0, "2026-01-01T00:00:00Z", None),
            p("restarting", Some("n"), "Running", None, 5, "2026-01-01T00:00:00Z", None),
            p("unready-newer", Some("n"), "Running", None, 0, "2026-01-03T00:00:00Z", None),
        ];
        pods.sort_by(deletion_order);
        let names: Vec<&str> = pods.iter().map(|p| p.metadata.name.as_deref().unwrap_or("")).collect();
        assert_eq!(names, ["unscheduled", "pending", "restarting", "unready-newer", "running-unready", "ready-new", "ready-old", "costly"]);
    }

    #[test]
    fn a_pod_from_its_template() {
        let template: PodTemplateSpec = serde_json::from_value(json!({"metadata": {"labels": {"app": "web"}, "annotations": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}})).expect("template");
        let owner_meta = ObjectMeta { name: Some("web-abc".into()), uid: Some("u1".into()), ..ObjectMeta::default() };
        let p = pod_from_template(&template, "default", "web-abc", controller_ref("apps/v1", "ReplicaSet", &owner_meta));
        assert_eq!(p.metadata.generate_name.as_deref(), Some("web-abc-"));
        assert_eq!(p.metadata.labels.as_ref().and_then(|l| l.get("app")).map(String::as_str), Some("web"));
        let owner = controller_of(&p.metadata).expect("controlled");
        assert_eq!((owner.kind.as_str(), owner.uid.as_str(), owner.block_owner_deletion), ("ReplicaSet", "u1", Some(true)));
        assert!(has_all_labels(&p, &[("app".to_string(), "web".to_string())].into()));
        assert!(!has_all_labels(&p, &[("tier".to_string(), "x".to_string())].into()));
    }
}
