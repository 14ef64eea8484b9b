//! Mirrors pkg/controller/daemon/update.go: the DaemonSet's rolling update and its history.
//!
//! A rolling update ([`rolling_update_plan`], pure) replaces old pods node by node:
//! - without surge, it deletes old pods — the unavailable ones at once, available ones only
//!   while fewer than `maxUnavailable` nodes are unavailable — and the manage loop creates the
//!   new pods on the emptied nodes;
//! - with `maxSurge`, it creates a new pod beside an old one (at once where the old one is
//!   unavailable, otherwise on at most `maxSurge` nodes at a time) and deletes the old pod once
//!   the new one is available.
//!
//! History: each distinct template is a ControllerRevision holding the patch that restores it
//! ([`get_patch`]: `{"spec":{"template":{…, "$patch":"replace"}}}`, which `kubectl rollout undo`
//! applies); the revision that [`matches`] the current template is the current one (re-numbered
//! newest after a rollback), its `controller-revision-hash` label goes on the pods made from it,
//! and old revisions no pod uses are deleted beyond `revisionHistoryLimit`
//! ([`revisions_to_delete`]). The calls that do it (constructHistory, cleanupHistory) are the
//! controller's, in `daemon_controller.rs`, so that this file holds only decisions.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

use super::util::is_pod_updated;
use crate::history::{CONTROLLER_REVISION_HASH_LABEL, sort_controller_revisions};
use crate::replicaset::replica_set_utils::is_pod_available;

/// findUpdatedPodsOnNode: the node's new and old pod (those not being deleted), or `None` when
/// it has two of either kind (the manage loop cleans that up first).
pub fn find_updated_pods_on_node<'a>(pods: &'a [Arc<Pod>], hash: &str, generation: Option<i64>) -> Option<(Option<&'a Pod>, Option<&'a Pod>)> {
    let (mut new, mut old) = (None, None);
    for pod in pods.iter().filter(|p| p.metadata.deletion_timestamp.is_none()) {
        let slot = if is_pod_updated(pod, hash, generation) { &mut new } else { &mut old };
        if slot.is_some() {
            return None;
        }
        *slot = Some(pod.as_ref());
    }
    Some((new, old))
}

/// What a rolling update step does: old pods to delete, nodes to create a new pod on.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct RollingPlan {
    pub delete: Vec<String>,
    pub create_on: Vec<String>,
}

/// The budgets and facts [`rolling_update_plan`] decides by.
pub struct RollingInput<'a> {
    /// Every node that should run a pod (possibly with none yet) and every node with pods.
    pub node_to_pods: &'a BTreeMap<String, Vec<Arc<Pod>>>,
    pub should_run: &'a dyn Fn(&str) -> bool,
    pub hash: &'a str,
    pub generation: Option<i64>,
    pub max_surge: i32,
    pub max_unavailable: i32,
    pub min_ready_seconds: i32,
    pub now: Timestamp,
}

/// rollingUpdate's decision (nodes in name order, so a step is deterministic).
pub fn rolling_update_plan(input: &RollingInput) -> RollingPlan {
    let available = |p: &Pod| is_pod_available(p, input.min_ready_seconds, input.now);
    let mut plan = RollingPlan::default();
    if input.max_surge == 0 {
        // Without surge: delete within maxUnavailable; the manage loop creates the new pods.
        let mut unavailable = 0;
        let mut replacements = Vec::new();
        let mut candidates = Vec::new();
        for pods in input.node_to_pods.values() {
            let Some((new, old)) = find_updated_pods_on_node(pods, input.hash, input.generation) else {
                unavailable += 1; // the manage loop cleans it up
                continue;
            };
            match (new, old) {
                (None, None) | (Some(_), Some(_)) => unavailable += 1,
                (Some(new), None) => {
                    if !available(new) {
                        unavailable += 1;
                    }
                }
                (None, Some(old)) => {
                    if !available(old) {
                        // Not available anyway: replace it at once.
                        replacements.push(old.metadata.name.clone().unwrap_or_default());
                        unavailable += 1;
                    } else if unavailable < input.max_unavailable {
                        candidates.push(old.metadata.name.clone().unwrap_or_default());
                    }
                }
            }
        }
        let remaining = (input.max_unavailable - unavailable).clamp(0, candidates.len() as i32) as usize;
        plan.delete = replacements;
        plan.delete.extend(candidates.into_iter().take(remaining));
        return plan;
    }
    // With surge: a new pod beside the old, the old one deleted once the new one is available.
    let mut surging = 0;
    let mut allowed = Vec::new();
    let mut candidates = Vec::new();
    for (node, pods) in input.node_to_pods {
        let Some((new, old)) = find_updated_pods_on_node(pods, input.hash, input.generation) else {
            surging += 1;
            continue;
        };
        match (new, old) {
            (_, None) => {} // the manage loop creates a pod if there is none
            (None, Some(old)) => {
                if !(input.should_run)(node) {
                    // No new pod goes there; the manage loop deletes the old one.
                    continue;
                }
                if !available(old) {
                    allowed.push(node.clone());
                } else if surging < input.max_surge {
                    candidates.push(node.clone());
                }
            }
            (Some(new), Some(old)) => {
                if available(new) {
                    plan.delete.push(old.metadata.name.clone().unwrap_or_default());
                } else {
                    surging += 1;
                }
            }
        }
    }
    let remaining = (input.max_surge - surging).clamp(0, candidates.len() as i32) as usize;
    plan.create_on = allowed;
    plan.create_on.extend(candidates.into_iter().take(remaining));
    plan
}

/// getPatch: the patch that restores the DaemonSet's template — what a revision holds.
pub fn get_patch(ds: &DaemonSet) -> Value {
    let mut template = serde_json::to_value(&ds.spec.template).unwrap_or_else(|_| json!({}));
    if let Some(t) = template.as_object_mut() {
        t.insert("$patch".into(), json!("replace"));
    }
    json!({"spec": {"template": template}})
}

/// Match: whether a revision holds the DaemonSet's current template.
pub fn matches(ds: &DaemonSet, revision: &ControllerRevision) -> bool {
    revision.data.0 == get_patch(ds)
}

/// The old revisions cleanupHistory deletes: beyond `limit`, the oldest first, never one whose
/// hash a live pod carries.
pub fn revisions_to_delete(old: &[ControllerRevision], live_hashes: &BTreeSet<String>, limit: i32) -> Vec<ControllerRevision> {
    let excess = old.len().saturating_sub(limit.max(0) as usize);
    let mut old = old.to_vec();
    sort_controller_revisions(&mut old);
    old.into_iter()
        .filter(|r| r.metadata.labels.as_ref().and_then(|l| l.get(CONTROLLER_REVISION_HASH_LABEL)).is_none_or(|h| !live_hashes.contains(h)))
        .take(excess)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pod on `node` of revision `hash`, ready since `ready_since` (none: not ready).
    fn pod(name: &str, hash: &str, ready_since: Option<&str>) -> Arc<Pod> {
        let mut v = json!({"metadata": {"name": name, "labels": {CONTROLLER_REVISION_HASH_LABEL: hash}}, "spec": {"containers": []}, "status": {"phase": "Running"}});
        if let Some(t) = ready_since {
            v["status"]["conditions"] = json!([{"type": "Ready", "status": "True", "lastTransitionTime": t}]);
        }
        Arc::new(serde_json::from_value(v).expect("pod"))
    }

    const LONG_AGO: Option<&str> = Some("2026-12-03T00:00:00Z");
    const JUST_NOW: Option<&str> = Some("2026-12-03T00:09:59Z");

    fn plan(nodes: Vec<(&str, Vec<Arc<Pod>>)>, max_surge: i32, max_unavailable: i32, min_ready: i32) -> RollingPlan {
        let node_to_pods: BTreeMap<String, Vec<Arc<Pod>>> = nodes.into_iter().map(|(n, p)| (n.to_string(), p)).collect();
        let should_run = |n: &str| n != "gone";
        rolling_update_plan(&RollingInput {
            node_to_pods: &node_to_pods,
            should_run: &should_run,
            hash: "new",
            generation: None,
            max_surge,
            max_unavailable,
            min_ready_seconds: min_ready,
            now: "2026-12-03T00:10:00Z".parse().expect("time"),
        })
    }

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn without_surge_old_pods_go_within_max_unavailable() {
        let old = |n: &str| pod(n, "old", LONG_AGO);
        // Three old available pods, maxUnavailable 1: one at a time, by node name.
        assert_eq!(plan(vec![("n1", vec![old("a")]), ("n2", vec![old("b")]), ("n3", vec![old("c")])], 0, 1, 0).delete, s(&["a"]));
        // maxUnavailable 2: two.
        assert_eq!(plan(vec![("n1", vec![old("a")]), ("n2", vec![old("b")]), ("n3", vec![old("c")])], 0, 2, 0).delete, s(&["a", "b"]));
        // A node still without its new pod uses up the budget.
        assert_eq!(plan(vec![("n1", vec![]), ("n2", vec![old("b")]), ("n3", vec![old("c")])], 0, 1, 0).delete, s(&[]));
        // A new pod not yet available (minReadySeconds) counts as unavailable.
        assert_eq!(plan(vec![("n1", vec![pod("a2", "new", JUST_NOW)]), ("n2", vec![old("b")])], 0, 1, 10).delete, s(&[]));
        // Once available, the next old pod goes.
        assert_eq!(plan(vec![("n1", vec![pod("a2", "new", LONG_AGO)]), ("n2", vec![old("b")])], 0, 1, 10).delete, s(&["b"]));
        // An unavailable old pod is replaced at once, whatever the budget.
        assert_eq!(plan(vec![("n1", vec![pod("a", "old", None)]), ("n2", vec![pod("b", "old", None)]), ("n3", vec![old("c")])], 0, 1, 0).delete, s(&["a", "b"]));
        // Two pods on a node: left to the manage loop, counted unavailable.
        assert_eq!(plan(vec![("n1", vec![old("a"), old("a2")]), ("n2", vec![old("b")])], 0, 1, 0).delete, s(&[]));
        // Nothing old: nothing to do; the plan never creates without surge.
        let done = plan(vec![("n1", vec![pod("a", "new", LONG_AGO)])], 0, 1, 0);
        assert_eq!(done, RollingPlan::default());
    }

    #[test]
    fn with_surge_a_new_pod_comes_first_and_the_old_one_goes_when_it_is_available() {
        let old = |n: &str| pod(n, "old", LONG_AGO);
        // maxSurge 1: a new pod on the first node only.
        let p = plan(vec![("n1", vec![old("a")]), ("n2", vec![old("b")])], 1, 0, 0);
        assert_eq!((p.create_on, p.delete), (s(&["n1"]), s(&[])));
        // The new pod is not available yet: no more surge, nothing deleted.
        let p = plan(vec![("n1", vec![old("a"), pod("a2", "new", None)]), ("n2", vec![old("b")])], 1, 0, 0);
        assert_eq!((p.create_on, p.delete), (s(&[]), s(&[])));
        // It is available: the old pod goes, and the next node surges.
        let p = plan(vec![("n1", vec![old("a"), pod("a2", "new", LONG_AGO)]), ("n2", vec![old("b")])], 1, 0, 0);
        assert_eq!((p.create_on, p.delete), (s(&["n2"]), s(&["a"])));
        // An unavailable old pod gets its new pod at once, beyond the budget.
        let p = plan(vec![("n1", vec![pod("a", "old", None)]), ("n2", vec![pod("b", "old", None)]), ("n3", vec![old("c")])], 1, 0, 0);
        assert_eq!((p.create_on, p.delete), (s(&["n1", "n2", "n3"]), s(&[])));
        // No new pod goes to a node that should no longer run one.
        let p = plan(vec![("gone", vec![old("a")])], 1, 0, 0);
        assert_eq!(p, RollingPlan::default());
    }

    #[test]
    fn history_keeps_the_limit_and_what_pods_use() {
        let rev = |name: &str, n: i64| -> ControllerRevision {
            serde_json::from_value(json!({"metadata": {"name": name, "labels": {CONTROLLER_REVISION_HASH_LABEL: name}}, "data": {}, "revision": n})).expect("revision")
        };
        let old = vec![rev("r3", 3), rev("r1", 1), rev("r2", 2), rev("r4", 4)];
        let names = |v: Vec<ControllerRevision>| v.into_iter().filter_map(|r| r.metadata.name).collect::<Vec<_>>();
        assert_eq!(names(revisions_to_delete(&old, &BTreeSet::new(), 2)), ["r1", "r2"]);
        assert_eq!(names(revisions_to_delete(&old, &["r1".to_string()].into(), 2)), ["r2", "r3"]);
        assert_eq!(names(revisions_to_delete(&old, &BTreeSet::new(), 10)), Vec::<String>::new());
        assert_eq!(names(revisions_to_delete(&old, &BTreeSet::new(), 0)), ["r1", "r2", "r3", "r4"]);
    }

    #[test]
    fn a_revision_restores_the_template() {
        let ds: DaemonSet = serde_json::from_value(json!({"metadata": {"name": "d"}, "spec": {"selector": {}, "template": {"metadata": {"labels": {"app": "d"}}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}})).expect("ds");
        let patch = get_patch(&ds);
        assert_eq!(patch["spec"]["template"]["$patch"], json!("replace"));
        assert_eq!(patch["spec"]["template"]["spec"]["containers"][0]["image"], json!("busybox"));
        let cr = ControllerRevision { data: k8s_openapi::apimachinery::pkg::runtime::RawExtension(patch), ..ControllerRevision::default() };
        assert!(matches(&ds, &cr));
        let mut other = ds.clone();
        if let Some(s) = other.spec.template.spec.as_mut() {
            s.containers[0].image = Some("busybox:1.36".into());
        }
        assert!(!matches(&other, &cr));
    }
}
