//! Mirrors component-helpers' storage/volume (pv_helpers.go, helpers.go): the decisions about
//! PersistentVolumes and claims that the scheduler's volume plugins (and, in Kubernetes, the PV
//! controller) share — which PV matches a claim, whether a PV's node affinity admits a node,
//! whether a claim's class delays binding. All pure, all table-tested.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use apimachinery::resource::parse_quantity_units;
use k8s_openapi::api::core::v1::{ObjectReference, PersistentVolume, PersistentVolumeClaim, TopologySelectorTerm};
use k8s_openapi::api::storage::v1::StorageClass;

use super::helper::{label_selector, node_selector_term_matches};

/// On a claim: the binding has been set up once (its value does not matter).
pub const ANN_BIND_COMPLETED: &str = "pv.kubernetes.io/bind-completed";
/// On a PV or claim: the binding was made by a controller (or the scheduler), not pre-bound by a user.
pub const ANN_BOUND_BY_CONTROLLER: &str = "pv.kubernetes.io/bound-by-controller";
/// On a claim: the node the scheduler chose, which asks the provisioner to provision there.
pub const ANN_SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";
/// A class with this provisioner cannot provision: its claims bind only to existing PVs.
pub const NOT_SUPPORTED_PROVISIONER: &str = "kubernetes.io/no-provisioner";
/// The class annotation that predates `storageClassName`.
pub const BETA_STORAGE_CLASS_ANNOTATION: &str = "volume.beta.kubernetes.io/storage-class";
/// StorageClass.volumeBindingMode that delays binding until a pod uses the claim.
pub const VOLUME_BINDING_WAIT_FOR_FIRST_CONSUMER: &str = "WaitForFirstConsumer";

fn annotation<'a>(meta: &'a k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta, key: &str) -> Option<&'a str> {
    meta.annotations.as_ref().and_then(|a| a.get(key)).map(String::as_str)
}

/// The claim's class (GetPersistentVolumeClaimClass): the beta annotation wins, then
/// `spec.storageClassName`; "" for none.
pub fn claim_class(pvc: &PersistentVolumeClaim) -> &str {
    if let Some(c) = annotation(&pvc.metadata, BETA_STORAGE_CLASS_ANNOTATION) {
        return c;
    }
    pvc.spec.as_ref().and_then(|s| s.storage_class_name.as_deref()).unwrap_or("")
}

/// The PV's class (GetPersistentVolumeClass), the same way.
pub fn volume_class(pv: &PersistentVolume) -> &str {
    if let Some(c) = annotation(&pv.metadata, BETA_STORAGE_CLASS_ANNOTATION) {
        return c;
    }
    pv.spec.as_ref().and_then(|s| s.storage_class_name.as_deref()).unwrap_or("")
}

/// The claim's `resources.requests.storage` in bytes (0 when unset).
pub fn requested_storage(pvc: &PersistentVolumeClaim) -> i64 {
    pvc.spec
        .as_ref()
        .and_then(|s| s.resources.as_ref())
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get("storage"))
        .and_then(|q| parse_quantity_units(&q.0))
        .unwrap_or(0)
}

/// The PV's `capacity.storage` in bytes (0 when unset).
pub fn volume_capacity(pv: &PersistentVolume) -> i64 {
    pv.spec.as_ref().and_then(|s| s.capacity.as_ref()).and_then(|c| c.get("storage")).and_then(|q| parse_quantity_units(&q.0)).unwrap_or(0)
}

/// Whether the claim is bound and its binding completed (isPVCFullyBound).
pub fn is_claim_fully_bound(pvc: &PersistentVolumeClaim) -> bool {
    let volume = pvc.spec.as_ref().and_then(|s| s.volume_name.as_deref()).unwrap_or("");
    !volume.is_empty() && annotation(&pvc.metadata, ANN_BIND_COMPLETED).is_some()
}

/// Whether the claim's class delays binding until a pod uses it (IsDelayBindingMode). A claim
/// without a class, or whose class does not exist (yet), binds immediately.
pub fn is_delay_binding_mode(pvc: &PersistentVolumeClaim, class: Option<&StorageClass>) -> Result<bool, String> {
    let name = claim_class(pvc);
    if name.is_empty() {
        return Ok(false);
    }
    let Some(class) = class else { return Ok(false) };
    match class.volume_binding_mode.as_deref() {
        Some(mode) => Ok(mode == VOLUME_BINDING_WAIT_FOR_FIRST_CONSUMER),
        None => Err(format!("VolumeBindingMode not set for StorageClass {name:?}")),
    }
}

/// Whether the PV is pre-bound or bound to this claim (IsVolumeBoundToClaim): same namespace and
/// name, and the same UID when the PV's claimRef has one.
pub fn is_volume_bound_to_claim(pv: &PersistentVolume, pvc: &PersistentVolumeClaim) -> bool {
    let Some(r) = pv.spec.as_ref().and_then(|s| s.claim_ref.as_ref()) else { return false };
    if r.name != pvc.metadata.name || r.namespace != pvc.metadata.namespace {
        return false;
    }
    match r.uid.as_deref() {
        Some(uid) if !uid.is_empty() => pvc.metadata.uid.as_deref() == Some(uid),
        _ => true,
    }
}

/// The PV bound to the claim (GetBindVolumeToClaim): its claimRef pointing at the claim and,
/// unless a user pre-bound it, the bound-by-controller annotation. The flag says whether anything
/// changed.
pub fn bind_volume_to_claim(pv: &PersistentVolume, pvc: &PersistentVolumeClaim) -> (PersistentVolume, bool) {
    let set_bound_by_controller = !is_volume_bound_to_claim(pv, pvc);
    let mut out = pv.clone();
    let mut dirty = false;
    let r = pv.spec.as_ref().and_then(|s| s.claim_ref.as_ref());
    if r.is_none_or(|r| r.name != pvc.metadata.name || r.namespace != pvc.metadata.namespace || r.uid != pvc.metadata.uid) {
        out.spec.get_or_insert_default().claim_ref = Some(ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("PersistentVolumeClaim".into()),
            namespace: pvc.metadata.namespace.clone(),
            name: pvc.metadata.name.clone(),
            uid: pvc.metadata.uid.clone(),
            resource_version: pvc.metadata.resource_version.clone(),
            ..Default::default()
        });
        dirty = true;
    }
    if set_bound_by_controller && annotation(&out.metadata, ANN_BOUND_BY_CONTROLLER).is_none() {
        out.metadata.annotations.get_or_insert_default().insert(ANN_BOUND_BY_CONTROLLER.into(), "yes".into());
        dirty = true;
    }
    (out, dirty)
}

/// Whether claim and PV disagree on volumeMode (unset means Filesystem on both sides).
pub fn volume_mode_mismatches(pvc: &PersistentVolumeClaim, pv: &PersistentVolume) -> bool {
    let mode = |m: Option<&String>| m.map(String::as_str).unwrap_or("Filesystem").to_string();
    mode(pvc.spec.as_ref().and_then(|s| s.volume_mode.as_ref())) != mode(pv.spec.as_ref().and_then(|s| s.volume_mode.as_ref()))
}

/// Whether the PV offers every access mode the claim asks for (CheckAccessModes).
pub fn access_modes_satisfied(pvc: &PersistentVolumeClaim, pv: &PersistentVolume) -> bool {
    let offered: HashSet<&str> = pv.spec.iter().flat_map(|s| s.access_modes.iter().flatten()).map(String::as_str).collect();
    pvc.spec.iter().flat_map(|s| s.access_modes.iter().flatten()).all(|m| offered.contains(m.as_str()))
}

/// Whether the claim asks for `mode` (ContainsAccessMode).
pub fn claim_has_access_mode(pvc: &PersistentVolumeClaim, mode: &str) -> bool {
    pvc.spec.iter().flat_map(|s| s.access_modes.iter().flatten()).any(|m| m == mode)
}

/// Whether the PV's required node affinity admits the node (CheckNodeAffinity): no affinity
/// admits every node; otherwise one of the terms must match.
pub fn check_node_affinity(pv: &PersistentVolume, node_name: &str, labels: &BTreeMap<String, String>) -> Result<(), String> {
    let Some(required) = pv.spec.as_ref().and_then(|s| s.node_affinity.as_ref()).and_then(|a| a.required.as_ref()) else {
        return Ok(());
    };
    for term in &required.node_selector_terms {
        if node_selector_term_matches(term, node_name, labels)? {
            return Ok(());
        }
    }
    Err("no matching NodeSelectorTerms".into())
}

/// Whether the node's labels satisfy a class's allowedTopologies (MatchTopologySelectorTerms):
/// none admits every node; otherwise one term must have every key with one of its values.
pub fn match_topology_selector_terms(terms: Option<&[TopologySelectorTerm]>, labels: &BTreeMap<String, String>) -> bool {
    let Some(terms) = terms.filter(|t| !t.is_empty()) else { return true };
    terms.iter().any(|t| {
        t.match_label_expressions
            .iter()
            .flatten()
            .all(|req| labels.get(&req.key).is_some_and(|v| req.values.contains(v)))
    })
}

/// The node a claim is matched on, in the scheduler's path.
pub struct NodeRef<'a> {
    pub name: &'a str,
    pub labels: &'a BTreeMap<String, String>,
}

/// The best PV for the claim among `volumes` (FindMatchingVolume): a PV pre-bound to the claim
/// wins (no match if its node affinity excludes `node`); else the smallest Available PV of the
/// claim's class that is large enough, has the volume mode, labels (claim selector), node
/// affinity and — on the scheduler's path (`node` set) — the access modes the claim wants.
/// `excluded` holds PVs already chosen for the pod's other claims. `delay_binding` (the PV
/// controller's path, `node` unset) skips unbound PVs: the scheduler binds those.
pub fn find_matching_volume(
    pvc: &PersistentVolumeClaim,
    volumes: &[Arc<PersistentVolume>],
    node: Option<&NodeRef<'_>>,
    excluded: &HashSet<String>,
    delay_binding: bool,
) -> Result<Option<Arc<PersistentVolume>>, String> {
    let requested = requested_storage(pvc);
    let class = claim_class(pvc);
    let selector = match pvc.spec.as_ref().and_then(|s| s.selector.as_ref()) {
        Some(sel) => Some(label_selector(Some(sel)).map_err(|e| {
            format!("error creating internal label selector for claim {}/{}: {e}", pvc.metadata.namespace.as_deref().unwrap_or(""), pvc.metadata.name.as_deref().unwrap_or(""))
        })?),
        None => None,
    };
    static EMPTY: BTreeMap<String, String> = BTreeMap::new();
    let mut smallest: Option<(&Arc<PersistentVolume>, i64)> = None;
    for pv in volumes {
        let name = pv.metadata.name.as_deref().unwrap_or("");
        if excluded.contains(name) {
            continue;
        }
        let claim_ref = pv.spec.as_ref().and_then(|s| s.claim_ref.as_ref());
        if claim_ref.is_some() && !is_volume_bound_to_claim(pv, pvc) {
            continue;
        }
        let capacity = volume_capacity(pv);
        if capacity < requested || volume_mode_mismatches(pvc, pv) || pv.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let affinity_ok = node.is_none_or(|n| check_node_affinity(pv, n.name, n.labels).is_ok());
        if is_volume_bound_to_claim(pv, pvc) {
            return Ok(affinity_ok.then(|| pv.clone()));
        }
        if node.is_none() && delay_binding {
            continue;
        }
        let phase = pv.status.as_ref().and_then(|s| s.phase.as_deref());
        if phase != Some("Available") {
            continue;
        }
        if selector.as_ref().is_some_and(|s| !s.matches(pv.metadata.labels.as_ref().unwrap_or(&EMPTY))) {
            continue;
        }
        if volume_class(pv) != class || !affinity_ok {
            continue;
        }
        if node.is_some() && !access_modes_satisfied(pvc, pv) {
            continue;
        }
        if smallest.is_none_or(|(_, q)| q > capacity) {
            smallest = Some((pv, capacity));
        }
    }
    Ok(smallest.map(|(pv, _)| pv.clone()))
}

#[cfg(test)]
pub mod testing {
    //! Builders for the volume plugins' table tests.
    use super::*;
    use serde_json::{Value, json};

    /// A claim in namespace "default" from a spec fragment (uid "uid-<name>").
    pub fn claim(name: &str, spec: Value) -> PersistentVolumeClaim {
        claim_with(name, json!({}), spec, json!({}))
    }

    /// A claim with extra metadata (annotations…), a spec and a status.
    pub fn claim_with(name: &str, meta: Value, spec: Value, status: Value) -> PersistentVolumeClaim {
        let mut m = json!({"name": name, "namespace": "default", "uid": format!("uid-{name}"), "resourceVersion": "1"});
        if let (Some(m), Value::Object(extra)) = (m.as_object_mut(), meta) {
            m.extend(extra);
        }
        serde_json::from_value(json!({"metadata": m, "spec": spec, "status": status})).expect("valid claim")
    }

    /// A PV from a spec fragment, in phase `phase`.
    pub fn volume(name: &str, spec: Value, phase: &str) -> Arc<PersistentVolume> {
        let pv = serde_json::from_value(json!({"metadata": {"name": name, "resourceVersion": "1"}, "spec": spec, "status": {"phase": phase}}))
            .expect("valid pv");
        Arc::new(pv)
    }

    /// A required node affinity pinning a PV to `node` by the hostpath driver's topology key.
    pub fn pinned_to(node: &str) -> Value {
        json!({"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "topology.hostpath.csi.kubelab.io/node", "operator": "In", "values": [node]}]}]}})
    }

    /// A StorageClass with a provisioner and binding mode.
    pub fn class(name: &str, provisioner: &str, mode: &str) -> StorageClass {
        serde_json::from_value(json!({"metadata": {"name": name}, "provisioner": provisioner, "volumeBindingMode": mode})).expect("valid class")
    }

    /// Labels of a node the hostpath driver registered on.
    pub fn node_labels(node: &str) -> BTreeMap<String, String> {
        [("topology.hostpath.csi.kubelab.io/node".to_string(), node.to_string()), ("kubernetes.io/hostname".to_string(), node.to_string())].into()
    }
}

#[cfg(test)]
mod tests {
    use super::testing::*;
    use super::*;
    use serde_json::json;

    #[test]
    fn node_affinity_table() {
        let cases = [
            ("no affinity admits any node", json!({}), "n1", true),
            ("pinned to its node", json!({"nodeAffinity": pinned_to("n1")}), "n1", true),
            ("pinned elsewhere", json!({"nodeAffinity": pinned_to("n2")}), "n1", false),
            (
                "terms are ORed",
                json!({"nodeAffinity": {"required": {"nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "topology.hostpath.csi.kubelab.io/node", "operator": "In", "values": ["n2"]}]},
                    {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["n1"]}]}]}}}),
                "n1",
                true,
            ),
            (
                "by field",
                json!({"nodeAffinity": {"required": {"nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}}}),
                "n1",
                true,
            ),
        ];
        for (case, spec, node, want) in cases {
            let pv = volume("pv", spec, "Available");
            assert_eq!(check_node_affinity(&pv, node, &node_labels(node)).is_ok(), want, "{case}");
        }
    }

    #[test]
    fn find_matching_volume_table() {
        let rwo = json!(["ReadWriteOnce"]);
        let pv = |name: &str, size: &str, class: &str, node: &str, phase: &str| {
            volume(name, json!({"capacity": {"storage": size}, "accessModes": rwo, "storageClassName": class, "nodeAffinity": pinned_to(node)}), phase)
        };
        let want = claim("data", json!({"accessModes": rwo, "storageClassName": "local", "resources": {"requests": {"storage": "1Gi"}}}));
        let labels = node_labels("n1");
        let n1 = NodeRef { name: "n1", labels: &labels };
        let bound_elsewhere = volume(
            "taken",
            json!({"capacity": {"storage": "1Gi"}, "accessModes": rwo, "storageClassName": "local",
                   "claimRef": {"namespace": "default", "name": "other"}}),
            "Bound",
        );
        let prebound = |node: &str| {
            volume(
                "prebound",
                json!({"capacity": {"storage": "5Gi"}, "accessModes": rwo, "storageClassName": "local", "nodeAffinity": pinned_to(node),
                       "claimRef": {"namespace": "default", "name": "data"}}),
                "Available",
            )
        };
        /// (case, volumes, excluded, expected PV name or "" for none)
        type Case<'a> = (&'a str, Vec<Arc<PersistentVolume>>, &'a [&'a str], &'a str);
        let cases: Vec<Case> = vec![
            ("the smallest that fits", vec![pv("big", "10Gi", "local", "n1", "Available"), pv("small", "2Gi", "local", "n1", "Available")], &[], "small"),
            ("too small", vec![pv("tiny", "500Mi", "local", "n1", "Available")], &[], ""),
            ("other class", vec![pv("x", "1Gi", "fast", "n1", "Available")], &[], ""),
            ("other node", vec![pv("x", "1Gi", "local", "n2", "Available")], &[], ""),
            ("not Available", vec![pv("x", "1Gi", "local", "n1", "Released")], &[], ""),
            ("bound to another claim", vec![bound_elsewhere], &[], ""),
            ("excluded: chosen for another claim of the pod", vec![pv("x", "1Gi", "local", "n1", "Available")], &["x"], ""),
            ("pre-bound wins over smaller", vec![pv("small", "1Gi", "local", "n1", "Available"), prebound("n1")], &[], "prebound"),
            ("pre-bound elsewhere: no match at all", vec![pv("small", "1Gi", "local", "n1", "Available"), prebound("n2")], &[], ""),
        ];
        for (case, volumes, excluded, want_pv) in cases {
            let excluded: HashSet<String> = excluded.iter().map(|s| s.to_string()).collect();
            let got = find_matching_volume(&want, &volumes, Some(&n1), &excluded, true).unwrap();
            assert_eq!(got.and_then(|p| p.metadata.name.clone()).unwrap_or_default(), want_pv, "{case}");
        }
        // Access modes and volume modes must agree.
        let rwx = claim("data", json!({"accessModes": ["ReadWriteMany"], "storageClassName": "local", "resources": {"requests": {"storage": "1Gi"}}}));
        assert!(find_matching_volume(&rwx, &[pv("x", "1Gi", "local", "n1", "Available")], Some(&n1), &HashSet::new(), true).unwrap().is_none());
        let block = claim("data", json!({"accessModes": rwo, "volumeMode": "Block", "storageClassName": "local", "resources": {"requests": {"storage": "1Gi"}}}));
        assert!(find_matching_volume(&block, &[pv("x", "1Gi", "local", "n1", "Available")], Some(&n1), &HashSet::new(), true).unwrap().is_none());
        // A claim selector filters by the PV's labels.
        let selective = claim("data", json!({"accessModes": rwo, "storageClassName": "local", "selector": {"matchLabels": {"tier": "gold"}},
                                              "resources": {"requests": {"storage": "1Gi"}}}));
        assert!(find_matching_volume(&selective, &[pv("x", "1Gi", "local", "n1", "Available")], Some(&n1), &HashSet::new(), true).unwrap().is_none());
    }

    #[test]
    fn binding_mode_and_bind_volume_to_claim() {
        let c = claim("data", json!({"storageClassName": "standard"}));
        let wffc = class("standard", "hostpath.csi.kubelab.io", "WaitForFirstConsumer");
        let immediate = class("standard", "hostpath.csi.kubelab.io", "Immediate");
        assert_eq!(is_delay_binding_mode(&c, Some(&wffc)), Ok(true));
        assert_eq!(is_delay_binding_mode(&c, Some(&immediate)), Ok(false));
        assert_eq!(is_delay_binding_mode(&c, None), Ok(false), "a missing class binds immediately");
        assert_eq!(is_delay_binding_mode(&claim("x", json!({})), Some(&wffc)), Ok(false), "no class");

        let pv = volume("pv1", json!({"capacity": {"storage": "1Gi"}}), "Available");
        let (bound, dirty) = bind_volume_to_claim(&pv, &c);
        assert!(dirty);
        assert!(is_volume_bound_to_claim(&bound, &c));
        assert_eq!(bound.metadata.annotations.as_ref().and_then(|a| a.get(ANN_BOUND_BY_CONTROLLER)).map(String::as_str), Some("yes"));
        let (_, dirty) = bind_volume_to_claim(&bound, &c);
        assert!(!dirty, "binding twice changes nothing");
    }

    #[test]
    fn allowed_topologies() {
        let terms: Vec<TopologySelectorTerm> = serde_json::from_value(json!([
            {"matchLabelExpressions": [{"key": "topology.hostpath.csi.kubelab.io/node", "values": ["n1", "n2"]}]}]))
        .unwrap();
        assert!(match_topology_selector_terms(None, &node_labels("n3")));
        assert!(match_topology_selector_terms(Some(&terms), &node_labels("n2")));
        assert!(!match_topology_selector_terms(Some(&terms), &node_labels("n3")));
    }
}
