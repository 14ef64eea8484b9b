//! Mirrors pkg/controller/daemon/util/daemonset_util.go (and the node-fitting part of
//! daemon_controller.go's NodeShouldRunDaemonPod): what a daemon pod is made of and which nodes
//! should run one — the tolerations every daemon pod gets, the node affinity that pins it to its
//! node, its template-generation and revision-hash labels, whether it is up to date, and the
//! rolling update's budgets. All pure.

use std::cmp::Ordering;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Affinity, Node, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, Pod, PodSpec, PodTemplateSpec, Toleration};

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use api::core::v1::helper::{find_untolerated, match_required_node_affinity};
use api::core::v1::well_known::{
    TAINT_NODE_DISK_PRESSURE, TAINT_NODE_MEMORY_PRESSURE, TAINT_NODE_NETWORK_UNAVAILABLE, TAINT_NODE_NOT_READY, TAINT_NODE_PID_PRESSURE, TAINT_NODE_UNREACHABLE,
    TAINT_NODE_UNSCHEDULABLE,
};

use crate::deployment::util::scaled_value;
use crate::history::CONTROLLER_REVISION_HASH_LABEL;

/// The annotation in which the API server keeps a DaemonSet's template generation
/// (apps/v1's form of the internal `spec.templateGeneration`).
pub const TEMPLATE_GENERATION_ANNOTATION: &str = "deprecated.daemonset.template.generation";
/// The label a daemon pod carries with the template generation it was made from
/// (`DaemonSetTemplateGenerationKey`).
pub const POD_TEMPLATE_GENERATION_LABEL: &str = "pod-template-generation";

fn exists(key: &str, effect: &str) -> Toleration {
    Toleration { key: Some(key.into()), operator: Some("Exists".into()), effect: Some(effect.into()), ..Toleration::default() }
}

/// The tolerations every daemon pod gets (AddOrUpdateDaemonPodTolerations): it stays on a node
/// that is not ready or unreachable (NoExecute, for ever), and goes to one under disk, memory
/// or PID pressure or cordoned (NoSchedule); with host networking, also to one whose network is
/// not up yet.
pub fn daemon_pod_tolerations(host_network: bool) -> Vec<Toleration> {
    let mut v = vec![
        exists(TAINT_NODE_NOT_READY, "NoExecute"),
        exists(TAINT_NODE_UNREACHABLE, "NoExecute"),
        exists(TAINT_NODE_DISK_PRESSURE, "NoSchedule"),
        exists(TAINT_NODE_MEMORY_PRESSURE, "NoSchedule"),
        exists(TAINT_NODE_PID_PRESSURE, "NoSchedule"),
        exists(TAINT_NODE_UNSCHEDULABLE, "NoSchedule"),
    ];
    if host_network {
        v.push(exists(TAINT_NODE_NETWORK_UNAVAILABLE, "NoSchedule"));
    }
    v
}

/// AddOrUpdateDaemonPodTolerations: each of [`daemon_pod_tolerations`] replaces a toleration
/// of the spec with the same key, operator, value and effect (MatchToleration; so one with
/// `tolerationSeconds` loses them), or is added.
pub fn add_or_update_daemon_pod_tolerations(spec: &mut PodSpec) {
    let wanted = daemon_pod_tolerations(spec.host_network == Some(true));
    let tolerations = spec.tolerations.get_or_insert_with(Vec::new);
    let same = |a: &Toleration, b: &Toleration| a.key == b.key && a.operator == b.operator && a.value == b.value && a.effect == b.effect;
    for t in wanted {
        match tolerations.iter_mut().find(|have| same(have, &t)) {
            Some(have) => *have = t,
            None => tolerations.push(t),
        }
    }
}

/// ReplaceDaemonSetPodNodeNameNodeAffinity: the pod's required node affinity becomes the one
/// term `metadata.name In [<node>]`, so the scheduler can only bind it there (its preferred
/// terms stay; the DaemonSet's own required terms were already checked against the node).
pub fn replace_daemon_set_pod_node_name_node_affinity(affinity: Option<Affinity>, node: &str) -> Affinity {
    let term = NodeSelectorTerm {
        match_fields: Some(vec![NodeSelectorRequirement { key: "metadata.name".into(), operator: "In".into(), values: Some(vec![node.into()]) }]),
        match_expressions: None,
    };
    let mut affinity = affinity.unwrap_or_default();
    let na = affinity.node_affinity.get_or_insert_with(NodeAffinity::default);
    na.required_during_scheduling_ignored_during_execution = Some(NodeSelector { node_selector_terms: vec![term] });
    affinity
}

/// GetTemplateGeneration: the DaemonSet's template generation, if the API server wrote one.
pub fn template_generation(ds: &DaemonSet) -> Result<Option<i64>, String> {
    match ds.metadata.annotations.as_ref().and_then(|a| a.get(TEMPLATE_GENERATION_ANNOTATION)) {
        None => Ok(None),
        Some(v) => v.parse().map(Some).map_err(|_| format!("invalid {TEMPLATE_GENERATION_ANNOTATION} {v:?}")),
    }
}

/// CreatePodTemplate: the DaemonSet's template with the daemon tolerations, the template
/// generation label (when there is one) and the revision hash label.
pub fn create_pod_template(template: &PodTemplateSpec, generation: Option<i64>, hash: &str) -> PodTemplateSpec {
    let mut t = template.clone();
    add_or_update_daemon_pod_tolerations(t.spec.get_or_insert_with(PodSpec::default));
    let labels = t.metadata.get_or_insert_with(Default::default).labels.get_or_insert_with(Default::default);
    if let Some(g) = generation {
        labels.insert(POD_TEMPLATE_GENERATION_LABEL.into(), g.to_string());
    }
    if !hash.is_empty() {
        labels.insert(CONTROLLER_REVISION_HASH_LABEL.into(), hash.into());
    }
    t
}

/// IsPodUpdated: made from the current revision (by its hash label) or the current template
/// generation.
pub fn is_pod_updated(pod: &Pod, hash: &str, generation: Option<i64>) -> bool {
    let label = |k: &str| pod.metadata.labels.as_ref().and_then(|l| l.get(k)).cloned();
    let template_matches = generation.is_some_and(|g| label(POD_TEMPLATE_GENERATION_LABEL) == Some(g.to_string()));
    let hash_matches = !hash.is_empty() && label(CONTROLLER_REVISION_HASH_LABEL).as_deref() == Some(hash);
    hash_matches || template_matches
}

/// GetTargetNodeName: the node a daemon pod is for — where it is bound, or, before that, the
/// node its `metadata.name In [<node>]` affinity names.
pub fn target_node_name(pod: &Pod) -> Option<String> {
    let spec = pod.spec.as_ref()?;
    if let Some(n) = spec.node_name.as_ref().filter(|n| !n.is_empty()) {
        return Some(n.clone());
    }
    let terms = &spec.affinity.as_ref()?.node_affinity.as_ref()?.required_during_scheduling_ignored_during_execution.as_ref()?.node_selector_terms;
    terms
        .iter()
        .flat_map(|t| t.match_fields.iter().flatten())
        .find(|r| r.key == "metadata.name" && r.operator == "In" && r.values.as_ref().is_some_and(|v| v.len() == 1))
        .and_then(|r| r.values.as_ref()?.first().cloned())
}

/// NodeShouldRunDaemonPod: (should run, should continue running). A daemon pod (with its
/// tolerations) fits a node when the template's `nodeName`, if any, is the node, its nodeSelector
/// and required node affinity match, and the node has no NoSchedule or NoExecute taint it does
/// not tolerate. A node it fits except for an untolerated NoSchedule taint keeps the pod it has
/// (but gets none); an untolerated NoExecute taint, or a selector or affinity that no longer
/// matches, sends the pod away.
pub fn node_should_run_daemon_pod(node: &Node, ds: &DaemonSet) -> (bool, bool) {
    let mut spec = ds.spec.template.spec.clone().unwrap_or_default();
    let name = node.metadata.name.as_deref().unwrap_or_default();
    if spec.node_name.as_deref().is_some_and(|n| !n.is_empty() && n != name) {
        return (false, false);
    }
    add_or_update_daemon_pod_tolerations(&mut spec);
    let labels = node.metadata.labels.clone().unwrap_or_default();
    if !match_required_node_affinity(&spec, name, &labels).unwrap_or(false) {
        return (false, false);
    }
    let taints = node.spec.as_ref().and_then(|s| s.taints.clone()).unwrap_or_default();
    let tolerations = spec.tolerations.unwrap_or_default();
    if find_untolerated(&taints, &tolerations, &["NoSchedule", "NoExecute"]).is_some() {
        return (false, find_untolerated(&taints, &tolerations, &["NoExecute"]).is_none());
    }
    (true, true)
}

/// The rolling update parameters, unless the strategy is OnDelete (unset ones take their
/// defaults below, as the API server's defaulting would have written them).
fn rolling_update(ds: &DaemonSet) -> Option<k8s_openapi::api::apps::v1::RollingUpdateDaemonSet> {
    let s = ds.spec.update_strategy.clone().unwrap_or_default();
    if s.type_.as_deref().unwrap_or("RollingUpdate") != "RollingUpdate" {
        return None;
    }
    Some(s.rolling_update.unwrap_or_default())
}

/// UnavailableCount: `maxUnavailable` of `desired` nodes (a percentage rounds up); 0 for OnDelete.
pub fn unavailable_count(ds: &DaemonSet, desired: i32) -> Result<i32, String> {
    match rolling_update(ds) {
        None => Ok(0),
        Some(ru) => scaled_value(Some(&ru.max_unavailable.unwrap_or(IntOrString::Int(1))), desired, true, "0%"),
    }
}

/// SurgeCount: `maxSurge` of `desired` nodes (rounding up); 0 for OnDelete or when unset.
pub fn surge_count(ds: &DaemonSet, desired: i32) -> Result<i32, String> {
    match rolling_update(ds) {
        None => Ok(0),
        Some(ru) => scaled_value(ru.max_surge.as_ref(), desired, true, "0%"),
    }
}

/// AllowsSurge: a RollingUpdate with a non-zero `maxSurge` (a node may then hold an old and a
/// new pod at once).
pub fn allows_surge(ds: &DaemonSet) -> bool {
    surge_count(ds, 1).is_ok_and(|n| n != 0)
}

/// podByCreationTimestampAndPhase: bound pods first, then the oldest, then by name.
pub fn by_creation_timestamp_and_phase(a: &Pod, b: &Pod) -> Ordering {
    let bound = |p: &Pod| p.spec.as_ref().and_then(|s| s.node_name.as_deref()).is_some_and(|n| !n.is_empty());
    bound(b)
        .cmp(&bound(a))
        .then_with(|| {
            let t = |p: &Pod| p.metadata.creation_timestamp.as_ref().map(|t| t.0);
            t(a).cmp(&t(b))
        })
        .then_with(|| a.metadata.name.cmp(&b.metadata.name))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn node(name: &str, labels: Value, taints: Value) -> Node {
        serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}, "spec": {"taints": taints}})).expect("node")
    }

    fn ds(spec: Value) -> DaemonSet {
        let mut pod_spec = spec;
        pod_spec["containers"] = json!([{"name": "c", "image": "busybox"}]);
        serde_json::from_value(json!({"metadata": {"name": "ds", "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": "d"}}, "template": {"metadata": {"labels": {"app": "d"}}, "spec": pod_spec}}}))
        .expect("ds")
    }

    #[test]
    fn which_nodes_should_run_a_daemon_pod() {
        let taint = |key: &str, effect: &str| json!([{"key": key, "value": "x", "effect": effect}]);
        let required = |op: &str| json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": op, "values": ["a"]}]}]}}}});
        // (case, node labels, node taints, pod spec) -> (should run, should continue running)
        let cases = [
            ("a plain node", json!({}), json!([]), json!({}), (true, true)),
            ("nodeSelector matches", json!({"disk": "ssd"}), json!([]), json!({"nodeSelector": {"disk": "ssd"}}), (true, true)),
            ("nodeSelector fails", json!({"disk": "hdd"}), json!([]), json!({"nodeSelector": {"disk": "ssd"}}), (false, false)),
            ("required affinity matches", json!({"zone": "a"}), json!([]), required("In"), (true, true)),
            ("required affinity fails", json!({"zone": "a"}), json!([]), required("NotIn"), (false, false)),
            ("template nodeName elsewhere", json!({}), json!([]), json!({"nodeName": "n2"}), (false, false)),
            ("template nodeName here", json!({}), json!([]), json!({"nodeName": "n1"}), (true, true)),
            ("untolerated NoSchedule keeps a pod", json!({}), taint("dedicated", "NoSchedule"), json!({}), (false, true)),
            ("untolerated NoExecute evicts", json!({}), taint("dedicated", "NoExecute"), json!({}), (false, false)),
            ("PreferNoSchedule is ignored", json!({}), taint("dedicated", "PreferNoSchedule"), json!({}), (true, true)),
            ("tolerated NoSchedule", json!({}), taint("dedicated", "NoSchedule"), json!({"tolerations": [{"key": "dedicated", "operator": "Exists"}]}), (true, true)),
            ("cordoned: tolerated by default", json!({}), taint(TAINT_NODE_UNSCHEDULABLE, "NoSchedule"), json!({}), (true, true)),
            ("not ready: tolerated by default", json!({}), taint(TAINT_NODE_NOT_READY, "NoExecute"), json!({}), (true, true)),
            ("unreachable: tolerated by default", json!({}), taint(TAINT_NODE_UNREACHABLE, "NoExecute"), json!({}), (true, true)),
            ("memory pressure: tolerated by default", json!({}), taint(TAINT_NODE_MEMORY_PRESSURE, "NoSchedule"), json!({}), (true, true)),
            ("network unavailable: not without hostNetwork", json!({}), taint(TAINT_NODE_NETWORK_UNAVAILABLE, "NoSchedule"), json!({}), (false, true)),
            ("network unavailable: tolerated with hostNetwork", json!({}), taint(TAINT_NODE_NETWORK_UNAVAILABLE, "NoSchedule"), json!({"hostNetwork": true}), (true, true)),
        ];
        for (case, labels, taints, spec, want) in cases {
            assert_eq!(node_should_run_daemon_pod(&node("n1", labels, taints), &ds(spec)), want, "{case}");
        }
    }

    #[test]
    fn a_daemon_pod_template_and_its_node() {
        let d = ds(json!({"tolerations": [{"key": TAINT_NODE_NOT_READY, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30}, {"key": "mine", "operator": "Exists"}],
            "affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "preference": {"matchExpressions": [{"key": "zone", "operator": "Exists"}]}}],
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "Exists"}]}]}}}}));
        let t = create_pod_template(&d.spec.template, Some(3), "abc");
        let labels = t.metadata.as_ref().and_then(|m| m.labels.clone()).unwrap_or_default();
        assert_eq!((labels.get("app").map(String::as_str), labels.get(POD_TEMPLATE_GENERATION_LABEL).map(String::as_str), labels.get(CONTROLLER_REVISION_HASH_LABEL).map(String::as_str)), (Some("d"), Some("3"), Some("abc")));
        let spec = t.spec.clone().unwrap_or_default();
        let tolerations = spec.tolerations.clone().unwrap_or_default();
        // The user's own toleration stays; the not-ready one loses its seconds; six defaults in all.
        assert_eq!(tolerations.len(), 7, "{tolerations:?}");
        assert!(tolerations.iter().any(|t| t.key.as_deref() == Some("mine")));
        let not_ready = tolerations.iter().find(|t| t.key.as_deref() == Some(TAINT_NODE_NOT_READY)).expect("not-ready");
        assert_eq!(not_ready.toleration_seconds, None);
        assert!(!tolerations.iter().any(|t| t.key.as_deref() == Some(TAINT_NODE_NETWORK_UNAVAILABLE)));
        // Pinned to its node: the required terms replaced, the preferred kept.
        let pod = Pod { spec: Some(PodSpec { affinity: Some(replace_daemon_set_pod_node_name_node_affinity(spec.affinity.clone(), "n7")), ..spec }), ..Pod::default() };
        let na = pod.spec.as_ref().and_then(|s| s.affinity.as_ref()).and_then(|a| a.node_affinity.clone()).expect("node affinity");
        assert_eq!(na.required_during_scheduling_ignored_during_execution.map(|r| r.node_selector_terms.len()), Some(1));
        assert!(na.preferred_during_scheduling_ignored_during_execution.is_some());
        assert_eq!(target_node_name(&pod).as_deref(), Some("n7"));
        let fresh = Pod { spec: Some(PodSpec { affinity: Some(replace_daemon_set_pod_node_name_node_affinity(None, "n8")), ..PodSpec::default() }), ..Pod::default() };
        assert_eq!(target_node_name(&fresh).as_deref(), Some("n8"));
        let bound: Pod = serde_json::from_value(json!({"metadata": {}, "spec": {"containers": [], "nodeName": "n9"}})).expect("pod");
        assert_eq!(target_node_name(&bound).as_deref(), Some("n9"));
        assert_eq!(target_node_name(&Pod::default()), None);
    }

    #[test]
    fn a_pod_is_updated_by_hash_or_template_generation() {
        let pod = |labels: Value| -> Pod { serde_json::from_value(json!({"metadata": {"labels": labels}})).expect("pod") };
        let cases = [
            (json!({CONTROLLER_REVISION_HASH_LABEL: "h2"}), "h2", Some(1), true),
            (json!({CONTROLLER_REVISION_HASH_LABEL: "h1"}), "h2", None, false),
            (json!({CONTROLLER_REVISION_HASH_LABEL: "h1", POD_TEMPLATE_GENERATION_LABEL: "2"}), "h2", Some(2), true),
            (json!({POD_TEMPLATE_GENERATION_LABEL: "1"}), "h2", Some(2), false),
            (json!({}), "", None, false),
        ];
        for (labels, hash, generation, want) in cases {
            assert_eq!(is_pod_updated(&pod(labels.clone()), hash, generation), want, "{labels} {hash} {generation:?}");
        }
    }

    #[test]
    fn rolling_update_budgets() {
        let with = |strategy: Value| -> DaemonSet {
            let mut d = ds(json!({}));
            d.spec.update_strategy = Some(serde_json::from_value(strategy).expect("strategy"));
            d
        };
        let cases = [
            (json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}}), 10, (1, 0), false),
            (json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": 0}}), 10, (3, 0), false),
            (json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": "10%"}}), 15, (0, 2), true),
            (json!({"type": "RollingUpdate"}), 4, (1, 0), false),
            (json!({"type": "OnDelete"}), 4, (0, 0), false),
        ];
        for (strategy, desired, want, surge) in cases {
            let d = with(strategy.clone());
            assert_eq!((unavailable_count(&d, desired), surge_count(&d, desired)), (Ok(want.0), Ok(want.1)), "{strategy}");
            assert_eq!(allows_surge(&d), surge, "{strategy}");
        }
        let mut d = ds(json!({}));
        d.metadata.annotations = Some([(TEMPLATE_GENERATION_ANNOTATION.to_string(), "4".to_string())].into());
        assert_eq!(template_generation(&d), Ok(Some(4)));
        d.metadata.annotations = Some([(TEMPLATE_GENERATION_ANNOTATION.to_string(), "x".to_string())].into());
        assert!(template_generation(&d).is_err());
    }
}
