//! Mirrors pkg/controller/statefulset/stateful_set_utils.go: a StatefulSet pod's identity (its
//! name `<set>-<ordinal>`, hostname, subdomain and labels), its storage (the claims of
//! `volumeClaimTemplates` as volumes), its state as the update algorithm reads it (created,
//! Running and Ready, available, terminating, failed), its revision label, the revisions of a set
//! (the template as a patch, and a set with a revision's template applied), and its claims (made
//! from `volumeClaimTemplates`, owned as `persistentVolumeClaimRetentionPolicy` says).

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{ControllerRevision, StatefulSet};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, PersistentVolumeClaimVolumeSource, Pod, PodTemplateSpec, Volume};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

use crate::controller_utils::{controller_ref, pod_from_template};
use crate::history::{CONTROLLER_REVISION_HASH_LABEL, new_controller_revision};
use crate::replicaset::replica_set_utils::is_pod_available;

/// The label with the pod's own name, for a Service selecting one pod of the set
/// (`apps.StatefulSetPodNameLabel`).
pub const STATEFUL_SET_POD_NAME_LABEL: &str = "statefulset.kubernetes.io/pod-name";
/// The label with the pod's ordinal (`apps.PodIndexLabel`).
pub const POD_INDEX_LABEL: &str = "apps.kubernetes.io/pod-index";

/// getParentNameAndOrdinal: a name `<parent>-<ordinal>` split in two (`None` when it does not end
/// in a dash and digits, or the ordinal does not fit).
pub fn parent_name_and_ordinal(name: &str) -> Option<(&str, i32)> {
    let (parent, ordinal) = name.rsplit_once('-')?;
    if ordinal.is_empty() || !ordinal.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((parent, ordinal.parse().ok()?))
}

/// getOrdinal: the pod's ordinal, -1 when its name has none.
pub fn ordinal_of(pod: &Pod) -> i32 {
    parent_name_and_ordinal(pod.metadata.name.as_deref().unwrap_or_default()).map_or(-1, |(_, o)| o)
}

/// isMemberOf: the pod's name says it belongs to the set (the name's parent part is the set's).
pub fn is_member_of(set: &StatefulSet, pod: &Pod) -> bool {
    parent_name_and_ordinal(pod.metadata.name.as_deref().unwrap_or_default()).is_some_and(|(parent, _)| Some(parent) == set.metadata.name.as_deref())
}

/// getStartOrdinal: `spec.ordinals.start`, 0 by default.
pub fn start_ordinal(set: &StatefulSet) -> i32 {
    set.spec.ordinals.as_ref().and_then(|o| o.start).unwrap_or(0)
}

/// `spec.replicas` (1 when unset, as defaulting makes it).
pub fn replicas_of(set: &StatefulSet) -> i32 {
    set.spec.replicas.unwrap_or(1).max(0)
}

/// getEndOrdinal: the last ordinal the set should have (start + replicas - 1).
pub fn end_ordinal(set: &StatefulSet) -> i32 {
    start_ordinal(set) + replicas_of(set) - 1
}

/// podInOrdinalRange.
pub fn in_ordinal_range(set: &StatefulSet, ordinal: i32) -> bool {
    ordinal >= start_ordinal(set) && ordinal <= end_ordinal(set)
}

/// getPodName: `<set>-<ordinal>`.
pub fn pod_name(set: &StatefulSet, ordinal: i32) -> String {
    format!("{}-{ordinal}", set.metadata.name.as_deref().unwrap_or_default())
}

/// getPersistentVolumeClaimName: `<claim template>-<set>-<ordinal>`.
pub fn claim_name(set: &StatefulSet, template: &str, ordinal: i32) -> String {
    format!("{template}-{}-{ordinal}", set.metadata.name.as_deref().unwrap_or_default())
}

fn label<'a>(pod: &'a Pod, key: &str) -> Option<&'a str> {
    pod.metadata.labels.as_ref()?.get(key).map(String::as_str)
}

/// identityMatches: the pod's name, namespace and pod-name label are those of its ordinal in
/// the set.
pub fn identity_matches(set: &StatefulSet, pod: &Pod) -> bool {
    let Some((parent, ordinal)) = parent_name_and_ordinal(pod.metadata.name.as_deref().unwrap_or_default()) else { return false };
    let name = pod_name(set, ordinal);
    Some(parent) == set.metadata.name.as_deref()
        && pod.metadata.name.as_deref() == Some(name.as_str())
        && pod.metadata.namespace == set.metadata.namespace
        && label(pod, STATEFUL_SET_POD_NAME_LABEL) == Some(name.as_str())
}

/// updateIdentity: the name, namespace, pod-name and pod-index labels of the pod's ordinal.
pub fn update_identity(set: &StatefulSet, pod: &mut Pod) {
    let ordinal = ordinal_of(pod);
    let name = pod_name(set, ordinal);
    pod.metadata.name = Some(name.clone());
    pod.metadata.namespace = set.metadata.namespace.clone();
    let labels = pod.metadata.labels.get_or_insert_with(BTreeMap::new);
    labels.insert(STATEFUL_SET_POD_NAME_LABEL.into(), name);
    labels.insert(POD_INDEX_LABEL.into(), ordinal.to_string());
}

/// The volumes the pod's claims give it: one per `volumeClaimTemplates` entry, named after the
/// template, on the claim `<template>-<set>-<ordinal>`.
fn claim_volumes(set: &StatefulSet, ordinal: i32) -> Vec<Volume> {
    set.spec
        .volume_claim_templates
        .iter()
        .flatten()
        .filter_map(|t| t.metadata.name.clone())
        .map(|template| Volume {
            name: template.clone(),
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource { claim_name: claim_name(set, &template, ordinal), read_only: None }),
            ..Volume::default()
        })
        .collect()
}

/// storageMatches: every claim template is mounted from the pod's own claim.
pub fn storage_matches(set: &StatefulSet, pod: &Pod) -> bool {
    let ordinal = ordinal_of(pod);
    if ordinal < 0 {
        return false;
    }
    let volumes: BTreeMap<&str, &Volume> = pod.spec.iter().flat_map(|s| s.volumes.iter().flatten()).map(|v| (v.name.as_str(), v)).collect();
    claim_volumes(set, ordinal).iter().all(|want| {
        volumes.get(want.name.as_str()).and_then(|v| v.persistent_volume_claim.as_ref()).map(|c| &c.claim_name) == want.persistent_volume_claim.as_ref().map(|c| &c.claim_name)
    })
}

/// updateStorage: the claims' volumes replace the template's volumes of the same names.
pub fn update_storage(set: &StatefulSet, pod: &mut Pod) {
    let ordinal = ordinal_of(pod);
    let claims = claim_volumes(set, ordinal);
    if claims.is_empty() {
        return;
    }
    let spec = pod.spec.get_or_insert_with(Default::default);
    let mut volumes: Vec<Volume> = spec.volumes.take().unwrap_or_default().into_iter().filter(|v| !claims.iter().any(|c| c.name == v.name)).collect();
    volumes.extend(claims);
    spec.volumes = Some(volumes);
}

/// newStatefulSetPod: the pod of `ordinal` from the set's template — named, with its identity
/// (labels, `hostname` = its name, `subdomain` = `spec.serviceName`, set only at creation) and
/// its claims' volumes, controlled by the set.
pub fn new_stateful_set_pod(set: &StatefulSet, ordinal: i32) -> Pod {
    let owner = controller_ref("apps/v1", "StatefulSet", &set.metadata);
    let ns = set.metadata.namespace.clone().unwrap_or_default();
    let mut pod = pod_from_template(&set.spec.template, &ns, set.metadata.name.as_deref().unwrap_or_default(), owner);
    pod.metadata.name = Some(pod_name(set, ordinal));
    // initIdentity.
    update_identity(set, &mut pod);
    let spec = pod.spec.get_or_insert_with(Default::default);
    spec.hostname = pod.metadata.name.clone();
    spec.subdomain = set.spec.service_name.clone().filter(|s| !s.is_empty());
    update_storage(set, &mut pod);
    pod
}

/// getPersistentVolumeClaims: the claims of the pod of `ordinal`, by template name — each
/// template named `<template>-<set>-<ordinal>`, in the set's namespace, with the template's
/// labels and the set's selector's `matchLabels`. No owner: the retention policy gives them one
/// after the pod exists ([`update_claim_owner_refs`]).
pub fn persistent_volume_claims(set: &StatefulSet, ordinal: i32) -> BTreeMap<String, PersistentVolumeClaim> {
    let match_labels = set.spec.selector.match_labels.clone().unwrap_or_default();
    set.spec
        .volume_claim_templates
        .iter()
        .flatten()
        .filter_map(|t| {
            let template = t.metadata.name.clone()?;
            let mut claim = t.clone();
            claim.metadata.name = Some(claim_name(set, &template, ordinal));
            claim.metadata.namespace = set.metadata.namespace.clone();
            claim.metadata.labels.get_or_insert_with(BTreeMap::new).extend(match_labels.clone());
            claim.metadata.resource_version = None;
            claim.metadata.uid = None;
            claim.status = None;
            Some((template, claim))
        })
        .collect()
}

/// The set's `persistentVolumeClaimRetentionPolicy` as `(whenDeleted, whenScaled)`, Retain by
/// default.
pub fn retention_policy(set: &StatefulSet) -> (&str, &str) {
    let p = set.spec.persistent_volume_claim_retention_policy.as_ref();
    (p.and_then(|p| p.when_deleted.as_deref()).unwrap_or("Retain"), p.and_then(|p| p.when_scaled.as_deref()).unwrap_or("Retain"))
}

/// matchesRef: an owner reference to this kind and name (whatever its uid).
fn matches_ref(r: &OwnerReference, api_version: &str, kind: &str, name: Option<&str>) -> bool {
    r.api_version == api_version && r.kind == kind && Some(r.name.as_str()) == name
}

/// hasUnexpectedController: with a retention policy other than Retain/Retain, the claim has a
/// controller that is neither the set nor the pod, or a reference to either with a stale uid — its
/// ownership is then left alone.
pub fn has_unexpected_controller(claim: &PersistentVolumeClaim, set: &StatefulSet, pod: &Pod) -> bool {
    if retention_policy(set) == ("Retain", "Retain") {
        return false;
    }
    for r in claim.metadata.owner_references.iter().flatten() {
        if matches_ref(r, "apps/v1", "StatefulSet", set.metadata.name.as_deref()) {
            if Some(&r.uid) != set.metadata.uid.as_ref() {
                return true;
            }
            continue;
        }
        if matches_ref(r, "v1", "Pod", pod.metadata.name.as_deref()) {
            if Some(&r.uid) != pod.metadata.uid.as_ref() {
                return true;
            }
            continue;
        }
        if r.controller == Some(true) {
            return true;
        }
    }
    false
}

/// hasStaleOwnerRef for a pod: the claim names the pod by name with another uid (a pod not
/// created yet has none), so it belongs to an earlier pod of that name and is on its way out.
pub fn has_stale_pod_owner_ref(claim: &PersistentVolumeClaim, pod: &Pod) -> bool {
    claim
        .metadata
        .owner_references
        .iter()
        .flatten()
        .find(|r| matches_ref(r, "v1", "Pod", pod.metadata.name.as_deref()))
        .is_some_and(|r| Some(&r.uid) != pod.metadata.uid.as_ref())
}

/// updateClaimOwnerRefForSetAndPod: the claim's owner references as the retention policy wants
/// them — references to the set and the pod scrubbed, then: WhenDeleted=Delete gives the set as
/// controller (the garbage collector deletes the claim with the set) while the pod is in range;
/// WhenScaled=Delete gives the pod as controller once it is condemned (the claim goes with it);
/// Retain/Retain gives neither. Left as they are (minus the scrubbed ones) when another
/// controller holds the claim.
pub fn update_claim_owner_refs(claim: &PersistentVolumeClaim, set: &StatefulSet, pod: &Pod) -> Vec<OwnerReference> {
    let unexpected = has_unexpected_controller(claim, set, pod);
    let mut refs: Vec<OwnerReference> = claim
        .metadata
        .owner_references
        .iter()
        .flatten()
        .filter(|r| !matches_ref(r, "apps/v1", "StatefulSet", set.metadata.name.as_deref()) && !matches_ref(r, "v1", "Pod", pod.metadata.name.as_deref()))
        .cloned()
        .collect();
    if unexpected {
        return refs;
    }
    let scaled_down = !in_ordinal_range(set, ordinal_of(pod));
    let (when_deleted, when_scaled) = retention_policy(set);
    if when_scaled == "Delete" && scaled_down {
        refs.push(controller_ref("v1", "Pod", &pod.metadata));
    }
    if when_deleted == "Delete" && !(when_scaled == "Delete" && scaled_down) {
        refs.push(controller_ref("apps/v1", "StatefulSet", &set.metadata));
    }
    refs
}

/// isClaimOwnerUpToDate: the claim's owner references are those [`update_claim_owner_refs`]
/// gives (in any order).
pub fn claim_owner_up_to_date(claim: &PersistentVolumeClaim, set: &StatefulSet, pod: &Pod) -> bool {
    let key = |r: &OwnerReference| (r.api_version.clone(), r.kind.clone(), r.name.clone(), r.uid.clone(), r.controller);
    let mut have: Vec<_> = claim.metadata.owner_references.iter().flatten().map(key).collect();
    let mut want: Vec<_> = update_claim_owner_refs(claim, set, pod).iter().map(key).collect();
    have.sort();
    want.sort();
    have == want
}

/// The pod's `controller-revision-hash` label (getPodRevision), empty when it has none.
pub fn pod_revision(pod: &Pod) -> &str {
    label(pod, CONTROLLER_REVISION_HASH_LABEL).unwrap_or_default()
}

/// setPodRevision.
pub fn set_pod_revision(pod: &mut Pod, revision: &str) {
    pod.metadata.labels.get_or_insert_with(BTreeMap::new).insert(CONTROLLER_REVISION_HASH_LABEL.into(), revision.into());
}

/// The RollingUpdate partition (pods below it keep the current revision), `None` for OnDelete or
/// a RollingUpdate without parameters.
pub fn partition_of(set: &StatefulSet) -> Option<i32> {
    let strategy = set.spec.update_strategy.as_ref()?;
    if strategy.type_.as_deref().unwrap_or("RollingUpdate") != "RollingUpdate" {
        return None;
    }
    Some(strategy.rolling_update.as_ref()?.partition.unwrap_or(0))
}

/// Whether the set rolls its pods (RollingUpdate, the default) rather than waiting for them to
/// be deleted (OnDelete).
pub fn is_rolling_update(set: &StatefulSet) -> bool {
    set.spec.update_strategy.as_ref().and_then(|s| s.type_.as_deref()).unwrap_or("RollingUpdate") == "RollingUpdate"
}

/// allowsBurst: `podManagementPolicy: Parallel`.
pub fn allows_burst(set: &StatefulSet) -> bool {
    set.spec.pod_management_policy.as_deref() == Some("Parallel")
}

/// newVersionedStatefulSetPod: the pod of `ordinal` at the revision it should have — the
/// current one below the partition of a RollingUpdate (below `status.currentReplicas` when the
/// RollingUpdate has no parameters), the update revision otherwise. `current_set` and
/// `update_set` are the set with each revision's template applied.
pub fn new_versioned_pod(current_set: &StatefulSet, update_set: &StatefulSet, current_revision: &str, update_revision: &str, ordinal: i32) -> Pod {
    let start = start_ordinal(current_set);
    let below_current = is_rolling_update(current_set)
        && match current_set.spec.update_strategy.as_ref().and_then(|s| s.rolling_update.as_ref()) {
            None => ordinal < start + current_set.status.as_ref().and_then(|s| s.current_replicas).unwrap_or(0),
            Some(ru) => ordinal < start + ru.partition.unwrap_or(0),
        };
    let (set, revision) = if below_current { (current_set, current_revision) } else { (update_set, update_revision) };
    let mut pod = new_stateful_set_pod(set, ordinal);
    set_pod_revision(&mut pod, revision);
    pod
}

/// What the update algorithm reads of a pod.
pub fn phase(pod: &Pod) -> &str {
    pod.status.as_ref().and_then(|s| s.phase.as_deref()).unwrap_or("")
}

/// isRunningAndReady.
pub fn is_running_and_ready(pod: &Pod) -> bool {
    phase(pod) == "Running" && api::pod::is_pod_ready(pod)
}

/// isRunningAndAvailable: Running and Ready for `min_ready_seconds`.
pub fn is_running_and_available(pod: &Pod, min_ready_seconds: i32, now: Timestamp) -> bool {
    phase(pod) == "Running" && is_pod_available(pod, min_ready_seconds, now)
}

/// isTerminating.
pub fn is_terminating(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_some()
}

/// isHealthy: Running and Ready, and not terminating.
pub fn is_healthy(pod: &Pod) -> bool {
    is_running_and_ready(pod) && !is_terminating(pod)
}

/// getPatch: the revision data of the set's template — `{"spec": {"template": {..., "$patch":
/// "replace"}}}`, a strategic merge patch that puts the template back whole (what `kubectl
/// rollout undo` applies).
pub fn template_patch(set: &StatefulSet) -> Value {
    let mut template = serde_json::to_value(&set.spec.template).unwrap_or_else(|_| json!({}));
    if let Value::Object(m) = &mut template {
        m.insert("$patch".into(), json!("replace"));
    }
    json!({"spec": {"template": template}})
}

/// newRevision: the set's template as revision `revision`, labelled with the template's labels,
/// with the set's annotations, controlled by the set.
pub fn new_revision(set: &StatefulSet, revision: i64, collision_count: i32) -> ControllerRevision {
    let labels = set.spec.template.metadata.as_ref().and_then(|m| m.labels.clone()).unwrap_or_default();
    let owner = controller_ref("apps/v1", "StatefulSet", &set.metadata);
    let mut cr = new_controller_revision(&set.metadata, owner, &labels, template_patch(set), revision, Some(collision_count));
    if let Some(annotations) = &set.metadata.annotations {
        cr.metadata.annotations.get_or_insert_with(BTreeMap::new).extend(annotations.clone());
    }
    cr
}

/// ApplyRevision: the set with the revision's template. The data is the patch
/// [`template_patch`] made, which replaces the template whole, so applying it is taking its
/// template (without the `$patch` directive).
pub fn apply_revision(set: &StatefulSet, revision: &ControllerRevision) -> StatefulSet {
    let mut clone = set.clone();
    if let Some(Value::Object(template)) = revision.data.0.get("spec").and_then(|s| s.get("template")) {
        let mut template = template.clone();
        template.remove("$patch");
        if let Ok(t) = serde_json::from_value::<PodTemplateSpec>(Value::Object(template)) {
            clone.spec.template = t;
        }
    }
    clone
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn set(v: Value) -> StatefulSet {
        let mut base = json!({"metadata": {"name": "web", "namespace": "default", "uid": "u1", "generation": 1},
            "spec": {"replicas": 3, "serviceName": "nginx", "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "nginx:1"}]}},
                     "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}}});
        json_patch::merge(&mut base, &v);
        serde_json::from_value(base).expect("set")
    }

    #[test]
    fn claims_of_a_pod_and_their_owners() {
        let s = set(json!({"spec": {"replicas": 2, "volumeClaimTemplates": [{"metadata": {"name": "data", "labels": {"tier": "db"}},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}]}}));
        let claims = persistent_volume_claims(&s, 1);
        let c = claims.get("data").expect("claim");
        assert_eq!((c.metadata.name.as_deref(), c.metadata.namespace.as_deref()), (Some("data-web-1"), Some("default")));
        let labels: Vec<(&str, &str)> = c.metadata.labels.iter().flatten().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        assert_eq!(labels, [("app", "web"), ("tier", "db")]);
        assert!(c.metadata.owner_references.is_none(), "ownerless, as with Retain");

        let pod = |ordinal: i32| -> Pod { serde_json::from_value(json!({"metadata": {"name": format!("web-{ordinal}"), "uid": format!("p{ordinal}")}})).expect("pod") };
        let policy = |deleted: &str, scaled: &str| set(json!({"spec": {"replicas": 2, "persistentVolumeClaimRetentionPolicy": {"whenDeleted": deleted, "whenScaled": scaled}}}));
        let owners = |set: &StatefulSet, ordinal: i32| -> Vec<(String, String)> {
            update_claim_owner_refs(c, set, &pod(ordinal)).into_iter().map(|r| (r.kind, r.name)).collect()
        };
        let set_ref = ("StatefulSet".to_string(), "web".to_string());
        let pod_ref = |o: i32| ("Pod".to_string(), format!("web-{o}"));
        // (policy, ordinal (2 is condemned), owners)
        let cases = [
            (policy("Retain", "Retain"), 1, vec![]),
            (policy("Delete", "Retain"), 1, vec![set_ref.clone()]),
            (policy("Delete", "Retain"), 2, vec![set_ref.clone()]),
            (policy("Retain", "Delete"), 1, vec![]),
            (policy("Retain", "Delete"), 2, vec![pod_ref(2)]),
            (policy("Delete", "Delete"), 1, vec![set_ref.clone()]),
            (policy("Delete", "Delete"), 2, vec![pod_ref(2)]),
        ];
        for (s, ordinal, want) in cases {
            assert_eq!(owners(&s, ordinal), want, "{:?} ordinal {ordinal}", retention_policy(&s));
        }
        // Up to date once written; another controller is left alone; a claim of an earlier pod
        // of the same name is stale.
        let delete = policy("Delete", "Retain");
        let mut owned = c.clone();
        owned.metadata.owner_references = Some(update_claim_owner_refs(c, &delete, &pod(1)));
        assert!(claim_owner_up_to_date(&owned, &delete, &pod(1)) && !claim_owner_up_to_date(c, &delete, &pod(1)));
        let mut foreign = c.clone();
        foreign.metadata.owner_references = Some(vec![controller_ref("v1", "Other", &pod(9).metadata)]);
        assert!(has_unexpected_controller(&foreign, &delete, &pod(1)));
        assert_eq!(update_claim_owner_refs(&foreign, &delete, &pod(1)).len(), 1);
        let mut old = c.clone();
        old.metadata.owner_references = Some(vec![controller_ref("v1", "Pod", &pod(1).metadata)]);
        let new_pod: Pod = serde_json::from_value(json!({"metadata": {"name": "web-1"}})).expect("pod");
        assert!(has_stale_pod_owner_ref(&old, &new_pod) && !has_stale_pod_owner_ref(&old, &pod(1)) && !has_stale_pod_owner_ref(c, &new_pod));
    }

    #[test]
    fn names_and_ordinals() {
        let cases = [("web-0", Some(("web", 0))), ("my-web-12", Some(("my-web", 12))), ("web-", None), ("web", None), ("web-1a", None), ("web-99999999999", None), ("-3", Some(("", 3)))];
        for (name, want) in cases {
            assert_eq!(parent_name_and_ordinal(name), want, "{name}");
        }
        let s = set(json!({"spec": {"ordinals": {"start": 5}}}));
        assert_eq!((start_ordinal(&s), end_ordinal(&s)), (5, 7));
        assert!(!in_ordinal_range(&s, 4) && in_ordinal_range(&s, 5) && in_ordinal_range(&s, 7) && !in_ordinal_range(&s, 8));
        assert_eq!(claim_name(&s, "data", 5), "data-web-5");
    }

    #[test]
    fn a_new_pod_has_its_identity_storage_and_revision() {
        let s = set(json!({"spec": {"volumeClaimTemplates": [{"metadata": {"name": "data"}}],
            "template": {"spec": {"volumes": [{"name": "data", "emptyDir": {}}, {"name": "scratch", "emptyDir": {}}]}}}}));
        let mut p = new_versioned_pod(&s, &s, "web-a", "web-b", 2);
        assert_eq!(p.metadata.name.as_deref(), Some("web-2"));
        assert_eq!(p.metadata.generate_name.as_deref(), Some("web-"));
        let labels = p.metadata.labels.clone().unwrap_or_default();
        assert_eq!((labels["app"].as_str(), labels[STATEFUL_SET_POD_NAME_LABEL].as_str(), labels[POD_INDEX_LABEL].as_str()), ("web", "web-2", "2"));
        assert_eq!(pod_revision(&p), "web-b");
        let spec = p.spec.clone().unwrap_or_default();
        assert_eq!((spec.hostname.as_deref(), spec.subdomain.as_deref()), (Some("web-2"), Some("nginx")));
        let vols: Vec<(String, Option<String>)> = spec.volumes.unwrap_or_default().into_iter().map(|v| (v.name, v.persistent_volume_claim.map(|c| c.claim_name))).collect();
        assert_eq!(vols, [("scratch".to_string(), None), ("data".to_string(), Some("data-web-2".to_string()))]);
        assert!(identity_matches(&s, &p) && storage_matches(&s, &p) && is_member_of(&s, &p));
        // A pod whose label was taken away has lost its identity; updating gives it back.
        p.metadata.labels.as_mut().map(|l| l.remove(STATEFUL_SET_POD_NAME_LABEL));
        assert!(!identity_matches(&s, &p));
        update_identity(&s, &mut p);
        assert!(identity_matches(&s, &p));
        let other = set(json!({"metadata": {"name": "db"}}));
        assert!(!identity_matches(&other, &p) && !is_member_of(&other, &p));
    }

    #[test]
    fn pods_below_the_partition_keep_the_current_revision() {
        let current = set(json!({"spec": {"updateStrategy": {"rollingUpdate": {"partition": 2}}}}));
        let update = set(json!({"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "nginx:2"}]}}, "updateStrategy": {"rollingUpdate": {"partition": 2}}}}));
        let image = |p: &Pod| p.spec.as_ref().and_then(|s| s.containers[0].image.clone()).unwrap_or_default();
        // (strategy, ordinal) -> revision and image
        let on_delete = set(json!({"spec": {"updateStrategy": {"type": "OnDelete", "rollingUpdate": null}}}));
        let no_params = set(json!({"spec": {"updateStrategy": {"rollingUpdate": null}}, "status": {"replicas": 3, "currentReplicas": 1}}));
        let cases = [(&current, 1, "cur", "nginx:1"), (&current, 2, "upd", "nginx:2"), (&on_delete, 0, "upd", "nginx:2"), (&no_params, 0, "cur", "nginx:1"), (&no_params, 1, "upd", "nginx:2")];
        for (cur, ordinal, want_rev, want_image) in cases {
            let p = new_versioned_pod(&apply_revision(cur, &new_revision(&current, 1, 0)), &update, "cur", "upd", ordinal);
            assert_eq!((pod_revision(&p), image(&p).as_str()), (want_rev, want_image), "ordinal {ordinal}");
        }
    }

    #[test]
    fn a_revision_holds_the_template_and_gives_it_back() {
        let a = set(json!({"metadata": {"annotations": {"note": "x"}}}));
        let b = set(json!({"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "nginx:2"}]}}}}));
        let ra = new_revision(&a, 1, 0);
        assert_eq!(ra.data.0["spec"]["template"]["$patch"], json!("replace"));
        assert_eq!(ra.data.0["spec"].as_object().map(|m| m.len()), Some(1), "only the template");
        assert_eq!(ra.revision, Some(1));
        assert_eq!(ra.metadata.annotations.as_ref().map(|a| a["note"].as_str()), Some("x"));
        assert!(ra.metadata.name.as_deref().is_some_and(|n| n.starts_with("web-")));
        let back = apply_revision(&b, &ra);
        assert_eq!(back.spec.template, a.spec.template);
        assert_eq!(back.spec.replicas, b.spec.replicas);
        assert_ne!(new_revision(&b, 1, 0).metadata.name, ra.metadata.name);
    }
}
