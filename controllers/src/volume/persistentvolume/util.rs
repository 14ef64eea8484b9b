//! Mirrors pkg/controller/volume/persistentvolume/util/util.go and component-helpers'
//! storage/volume helpers: the annotations the binder writes and reads, a claim's and a volume's
//! class, whether a volume is bound to a claim, and `FindMatchingVolume`, which picks the smallest
//! volume that fits a claim.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ObjectReference, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use serde_json::Value;

/// On a claim: the binding is complete (`pv.kubernetes.io/bind-completed: "yes"`).
pub const ANN_BIND_COMPLETED: &str = "pv.kubernetes.io/bind-completed";
/// On a claim or a volume: the binder, not the user, chose the other side.
pub const ANN_BOUND_BY_CONTROLLER: &str = "pv.kubernetes.io/bound-by-controller";
/// On a volume: the provisioner that made it (`AnnDynamicallyProvisioned`).
pub const ANN_DYNAMICALLY_PROVISIONED: &str = "pv.kubernetes.io/provisioned-by";
/// On a claim: the provisioner asked to make its volume (GA and beta names; both are written).
pub const ANN_STORAGE_PROVISIONER: &str = "volume.kubernetes.io/storage-provisioner";
pub const ANN_BETA_STORAGE_PROVISIONER: &str = "volume.beta.kubernetes.io/storage-provisioner";
/// On a claim: the node the scheduler chose for a WaitForFirstConsumer claim's first pod.
pub const ANN_SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";
/// The class as an annotation (beta, read before `spec.storageClassName`).
pub const ANN_BETA_STORAGE_CLASS: &str = "volume.beta.kubernetes.io/storage-class";
/// On a StorageClass: the default class (GA and beta names).
pub const ANN_DEFAULT_STORAGE_CLASS: &str = "storageclass.kubernetes.io/is-default-class";
pub const ANN_BETA_DEFAULT_STORAGE_CLASS: &str = "storageclass.beta.kubernetes.io/is-default-class";
/// A volume handed over to a CSI driver by migration: the binder stands down.
pub const ANN_MIGRATED_TO: &str = "pv.kubernetes.io/migrated-to";

pub const VOLUME_AVAILABLE: &str = "Available";
pub const VOLUME_BOUND: &str = "Bound";
pub const VOLUME_RELEASED: &str = "Released";
pub const VOLUME_FAILED: &str = "Failed";
pub const CLAIM_PENDING: &str = "Pending";
pub const CLAIM_BOUND: &str = "Bound";
pub const CLAIM_LOST: &str = "Lost";

/// `metav1.HasAnnotation`.
pub fn has_annotation(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta, key: &str) -> bool {
    meta.annotations.as_ref().is_some_and(|a| a.contains_key(key))
}

pub fn annotation<'a>(meta: &'a k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta, key: &str) -> Option<&'a str> {
    meta.annotations.as_ref()?.get(key).map(String::as_str)
}

/// GetPersistentVolumeClaimClass: the beta annotation, else `spec.storageClassName`, else "".
pub fn claim_class(claim: &PersistentVolumeClaim) -> &str {
    annotation(&claim.metadata, ANN_BETA_STORAGE_CLASS).or(claim.spec.as_ref().and_then(|s| s.storage_class_name.as_deref())).unwrap_or_default()
}

/// GetPersistentVolumeClass: the beta annotation, else `spec.storageClassName`, else "".
pub fn volume_class(volume: &PersistentVolume) -> &str {
    annotation(&volume.metadata, ANN_BETA_STORAGE_CLASS).or(volume.spec.as_ref().and_then(|s| s.storage_class_name.as_deref())).unwrap_or_default()
}

pub fn volume_phase(volume: &PersistentVolume) -> &str {
    volume.status.as_ref().and_then(|s| s.phase.as_deref()).unwrap_or_default()
}

pub fn claim_phase(claim: &PersistentVolumeClaim) -> &str {
    claim.status.as_ref().and_then(|s| s.phase.as_deref()).unwrap_or_default()
}

pub fn claim_ref(volume: &PersistentVolume) -> Option<&ObjectReference> {
    volume.spec.as_ref()?.claim_ref.as_ref()
}

pub fn claim_volume_name(claim: &PersistentVolumeClaim) -> &str {
    claim.spec.as_ref().and_then(|s| s.volume_name.as_deref()).unwrap_or_default()
}

pub fn reclaim_policy(volume: &PersistentVolume) -> &str {
    // The API server defaults it (Retain; Delete for a provisioned volume); unset reads as Retain.
    volume.spec.as_ref().and_then(|s| s.persistent_volume_reclaim_policy.as_deref()).unwrap_or("Retain")
}

/// `<namespace>/<name>` of a claim (claimToClaimKey).
pub fn claim_key(claim: &PersistentVolumeClaim) -> String {
    format!("{}/{}", claim.metadata.namespace.as_deref().unwrap_or_default(), claim.metadata.name.as_deref().unwrap_or_default())
}

/// `<namespace>/<name>` a volume's claimRef names (claimrefToClaimKey).
pub fn claim_ref_key(r: &ObjectReference) -> String {
    format!("{}/{}", r.namespace.as_deref().unwrap_or_default(), r.name.as_deref().unwrap_or_default())
}

/// IsVolumeBoundToClaim: the volume's claimRef names the claim (and its uid, unless the ref has
/// none: a volume pre-bound by name).
pub fn is_volume_bound_to_claim(volume: &PersistentVolume, claim: &PersistentVolumeClaim) -> bool {
    let Some(r) = claim_ref(volume) else { return false };
    if r.name != claim.metadata.name || r.namespace != claim.metadata.namespace {
        return false;
    }
    r.uid.as_deref().is_none_or(str::is_empty) || r.uid == claim.metadata.uid
}

/// CheckVolumeModeMismatches: a claim's and a volume's `volumeMode` (Filesystem by default)
/// differ.
pub fn volume_mode_mismatches(claim: &PersistentVolumeClaim, volume: &PersistentVolume) -> bool {
    let want = claim.spec.as_ref().and_then(|s| s.volume_mode.as_deref()).unwrap_or("Filesystem");
    let have = volume.spec.as_ref().and_then(|s| s.volume_mode.as_deref()).unwrap_or("Filesystem");
    want != have
}

/// The claim's storage request in bytes (0 when it asks for none).
pub fn requested_storage(claim: &PersistentVolumeClaim) -> i128 {
    claim
        .spec
        .as_ref()
        .and_then(|s| s.resources.as_ref())
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get("storage"))
        .and_then(|q| apimachinery::resource::parse_quantity_nanos(&q.0))
        .unwrap_or(0)
}

/// The volume's `capacity.storage` in billionths of a byte (0 when missing).
pub fn volume_capacity(volume: &PersistentVolume) -> i128 {
    volume
        .spec
        .as_ref()
        .and_then(|s| s.capacity.as_ref())
        .and_then(|c| c.get("storage"))
        .and_then(|q| apimachinery::resource::parse_quantity_nanos(&q.0))
        .unwrap_or(0)
}

pub fn access_modes(modes: Option<&Vec<String>>) -> Vec<&str> {
    let mut m: Vec<&str> = modes.into_iter().flatten().map(String::as_str).collect();
    m.sort_unstable();
    m.dedup();
    m
}

/// FindMatchingVolume (the binder's path: no node): among `volumes`, the one pre-bound to the
/// claim, else — unless binding waits for the first consumer — the smallest Available one that
/// is big enough, of the claim's class and volume mode, whose labels the claim's selector
/// matches. Access modes are the caller's business ([`super::index`]). An unparsable selector
/// is an error.
pub fn find_matching_volume<'a>(claim: &PersistentVolumeClaim, volumes: &[&'a PersistentVolume], delay_binding: bool) -> Result<Option<&'a PersistentVolume>, String> {
    let requested = requested_storage(claim);
    let class = claim_class(claim);
    let selector = match claim.spec.as_ref().and_then(|s| s.selector.as_ref()) {
        Some(sel) => {
            let v = serde_json::to_value(sel).unwrap_or(Value::Null);
            Some(apimachinery::labels::Selector::from_label_selector(&v).map_err(|e| format!("error creating internal label selector for claim: {}: {e}", claim_key(claim)))?)
        }
        None => None,
    };
    let mut smallest: Option<(&PersistentVolume, i128)> = None;
    for &volume in volumes {
        if claim_ref(volume).is_some() && !is_volume_bound_to_claim(volume, claim) {
            continue;
        }
        let capacity = volume_capacity(volume);
        if capacity < requested || volume_mode_mismatches(claim, volume) || volume.metadata.deletion_timestamp.is_some() {
            continue;
        }
        // A volume pre-bound to this claim (by the user, or made for it by a provisioner) wins.
        if is_volume_bound_to_claim(volume, claim) {
            return Ok(Some(volume));
        }
        // The scheduler binds WaitForFirstConsumer claims (it knows the node); not the binder.
        if delay_binding {
            continue;
        }
        if volume_phase(volume) != VOLUME_AVAILABLE {
            continue;
        }
        let labels: BTreeMap<String, String> = volume.metadata.labels.clone().unwrap_or_default();
        if selector.as_ref().is_some_and(|s| !s.matches(&labels)) || volume_class(volume) != class {
            continue;
        }
        if smallest.is_none_or(|(_, q)| q > capacity) {
            smallest = Some((volume, capacity));
        }
    }
    Ok(smallest.map(|(v, _)| v))
}

/// GetDefaultClass: the class annotated as the default (GA or beta annotation, "true"), the
/// newest when several are (then by name).
pub fn default_class(classes: &[&StorageClass]) -> Option<String> {
    let is_default = |c: &StorageClass| [ANN_DEFAULT_STORAGE_CLASS, ANN_BETA_DEFAULT_STORAGE_CLASS].iter().any(|a| annotation(&c.metadata, a) == Some("true"));
    classes
        .iter()
        .filter(|c| is_default(c))
        .max_by(|a, b| a.metadata.creation_timestamp.as_ref().map(|t| t.0).cmp(&b.metadata.creation_timestamp.as_ref().map(|t| t.0)).then_with(|| b.metadata.name.cmp(&a.metadata.name)))
        .and_then(|c| c.metadata.name.clone())
}

/// The claims a pod's volumes name: `persistentVolumeClaim` volumes, and the claim
/// `<pod>-<volume>` of each generic ephemeral volume.
pub fn pod_claim_names(pod: &Pod) -> Vec<String> {
    let pod_name = pod.metadata.name.as_deref().unwrap_or_default();
    pod.spec
        .iter()
        .flat_map(|s| s.volumes.iter().flatten())
        .filter_map(|v| match (&v.persistent_volume_claim, &v.ephemeral) {
            (Some(pvc), _) => Some(pvc.claim_name.clone()),
            (None, Some(_)) => Some(format!("{pod_name}-{}", v.name)),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use serde_json::json;

    pub(crate) fn pv(v: Value) -> PersistentVolume {
        let mut base = json!({"metadata": {"name": "pv"}, "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"]}, "status": {"phase": "Available"}});
        merge(&mut base, v);
        serde_json::from_value(base).expect("pv")
    }

    pub(crate) fn pvc(v: Value) -> PersistentVolumeClaim {
        let mut base = json!({"metadata": {"name": "claim", "namespace": "default", "uid": "uid-1"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}, "status": {"phase": "Pending"}});
        merge(&mut base, v);
        serde_json::from_value(base).expect("pvc")
    }

    /// A JSON merge patch (RFC 7386), for building test objects.
    pub(crate) fn merge(base: &mut Value, patch: Value) {
        match (base, patch) {
            (Value::Object(b), Value::Object(p)) => {
                for (k, v) in p {
                    if v.is_null() {
                        b.remove(&k);
                    } else {
                        merge(b.entry(k).or_insert(Value::Null), v);
                    }
                }
            }
            (b, p) => *b = p,
        }
    }

    /// (what, claim, volumes, delay binding, chosen)
    type MatchCase<'a> = (&'a str, PersistentVolumeClaim, Vec<&'a PersistentVolume>, bool, Option<&'a str>);

    #[test]
    fn matching_volumes() {
        let named = |n: &str, v: Value| {
            let mut p = pv(v);
            p.metadata.name = Some(n.into());
            p
        };
        let small = named("small", json!({"spec": {"capacity": {"storage": "1Gi"}}}));
        let big = named("big", json!({"spec": {"capacity": {"storage": "10Gi"}}}));
        let tiny = named("tiny", json!({"spec": {"capacity": {"storage": "500Mi"}}}));
        let fast = named("fast", json!({"spec": {"storageClassName": "fast"}}));
        let labelled = named("labelled", json!({"metadata": {"labels": {"disk": "ssd"}}}));
        let block = named("block", json!({"spec": {"volumeMode": "Block"}}));
        let bound_elsewhere = named("taken", json!({"spec": {"claimRef": {"namespace": "default", "name": "other", "uid": "x"}}}));
        let prebound = named("prebound", json!({"spec": {"capacity": {"storage": "100Gi"}, "claimRef": {"namespace": "default", "name": "claim"}}}));
        let released = named("released", json!({"status": {"phase": "Released"}}));
        let name = |r: Result<Option<&PersistentVolume>, String>| r.expect("no error").and_then(|v| v.metadata.name.clone());
        // (what, claim, volumes, delay binding, chosen)
        let cases: Vec<MatchCase> = vec![
            ("smallest that fits", pvc(json!({})), vec![&big, &small, &tiny], false, Some("small")),
            ("nothing big enough", pvc(json!({"spec": {"resources": {"requests": {"storage": "20Gi"}}}})), vec![&big, &small], false, None),
            ("same class only", pvc(json!({"spec": {"storageClassName": "fast"}})), vec![&small, &fast], false, Some("fast")),
            ("empty class takes no classed volume", pvc(json!({})), vec![&fast], false, None),
            ("selector", pvc(json!({"spec": {"selector": {"matchLabels": {"disk": "ssd"}}}})), vec![&small, &labelled], false, Some("labelled")),
            ("volume mode", pvc(json!({"spec": {"volumeMode": "Block"}})), vec![&small, &block], false, Some("block")),
            ("bound to another claim", pvc(json!({})), vec![&bound_elsewhere], false, None),
            ("pre-bound beats smaller", pvc(json!({})), vec![&small, &prebound], false, Some("prebound")),
            ("not Available", pvc(json!({})), vec![&released], false, None),
            ("WaitForFirstConsumer: nothing but pre-bound", pvc(json!({})), vec![&small], true, None),
            ("WaitForFirstConsumer: pre-bound still binds", pvc(json!({})), vec![&small, &prebound], true, Some("prebound")),
        ];
        for (what, claim, volumes, delay, want) in cases {
            assert_eq!(name(find_matching_volume(&claim, &volumes, delay)).as_deref(), want, "{what}");
        }
        // A pre-bound ref with another uid is another claim's.
        let stale = named("stale", json!({"spec": {"claimRef": {"namespace": "default", "name": "claim", "uid": "old"}}}));
        assert!(!is_volume_bound_to_claim(&stale, &pvc(json!({}))));
    }

    #[test]
    fn classes_and_claim_names() {
        assert_eq!(claim_class(&pvc(json!({"metadata": {"annotations": {ANN_BETA_STORAGE_CLASS: "old"}}, "spec": {"storageClassName": "new"}}))), "old");
        assert_eq!(claim_class(&pvc(json!({"spec": {"storageClassName": "new"}}))), "new");
        let class = |name: &str, default: bool, at: &str| -> StorageClass {
            let ann = if default { json!({ANN_DEFAULT_STORAGE_CLASS: "true"}) } else { json!({}) };
            serde_json::from_value(json!({"metadata": {"name": name, "annotations": ann, "creationTimestamp": at}, "provisioner": "p"})).expect("class")
        };
        let (a, b, c) = (class("a", true, "2026-01-01T00:00:00Z"), class("b", true, "2026-02-01T00:00:00Z"), class("c", false, "2026-03-01T00:00:00Z"));
        assert_eq!(default_class(&[&a, &b, &c]).as_deref(), Some("b"));
        assert_eq!(default_class(&[&c]), None);
        let pod: Pod = serde_json::from_value(json!({"metadata": {"name": "web"}, "spec": {"containers": [], "volumes": [
            {"name": "data", "persistentVolumeClaim": {"claimName": "data-web"}}, {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}, {"name": "tmp", "emptyDir": {}}]}}))
        .expect("pod");
        assert_eq!(pod_claim_names(&pod), ["data-web", "web-scratch"]);
    }
}
