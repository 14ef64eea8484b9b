//! Mirrors pkg/controller/deployment/util/deployment_util.go (and controller_utils.go's
//! ComputeHash): the Deployment controller's arithmetic — surge and unavailability, the new
//! ReplicaSet's size, revisions, the pod-template-hash — as pure functions.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{ObjectReference, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::controller_utils::safe_encoded_fnv32a;

/// The label that ties a ReplicaSet and its pods to one template (`DefaultDeploymentUniqueLabelKey`).
pub const POD_TEMPLATE_HASH: &str = "pod-template-hash";
/// The revision a ReplicaSet (and its Deployment) carries.
pub const REVISION_ANNOTATION: &str = "deployment.kubernetes.io/revision";
pub const DESIRED_REPLICAS_ANNOTATION: &str = "deployment.kubernetes.io/desired-replicas";
pub const MAX_REPLICAS_ANNOTATION: &str = "deployment.kubernetes.io/max-replicas";

pub fn replicas(d: &Deployment) -> i32 {
    d.spec.replicas.unwrap_or(1)
}

pub fn rs_replicas(rs: &ReplicaSet) -> i32 {
    rs.spec.replicas.unwrap_or(1)
}

pub fn is_recreate(d: &Deployment) -> bool {
    d.spec.strategy.as_ref().and_then(|s| s.type_.as_deref()) == Some("Recreate")
}

/// The old ReplicaSets and the new one, as one list.
pub fn scaled_all(olds: &[ReplicaSet], new: Option<&ReplicaSet>) -> Vec<ReplicaSet> {
    olds.iter().cloned().chain(new.cloned()).collect()
}

/// The Deployment as its events name it.
pub fn reference(d: &Deployment) -> ObjectReference {
    client::record::object_reference("apps/v1", "Deployment", &d.metadata)
}

/// An int-or-percent of `total`: a percentage rounds up or down as asked
/// (GetScaledValueFromIntOrPercent).
pub fn scaled_value(v: Option<&IntOrString>, total: i32, round_up: bool, default: &str) -> Result<i32, String> {
    let v = v.cloned().unwrap_or_else(|| IntOrString::String(default.into()));
    match v {
        IntOrString::Int(n) => Ok(n),
        IntOrString::String(s) => {
            let pct: i64 = s.strip_suffix('%').and_then(|p| p.parse().ok()).ok_or_else(|| format!("invalid value for IntOrString: invalid value {s:?}"))?;
            let scaled = pct * i64::from(total);
            let v = if round_up { (scaled + 99).div_euclid(100) } else { scaled.div_euclid(100) };
            Ok(i32::try_from(v).unwrap_or(i32::MAX))
        }
    }
}

/// ResolveFenceposts: (maxSurge, maxUnavailable) for a RollingUpdate Deployment — surge rounds
/// up, unavailability down, and both zero would never move, so unavailability becomes 1.
pub fn resolve_fenceposts(d: &Deployment) -> Result<(i32, i32), String> {
    let ru = d.spec.strategy.as_ref().and_then(|s| s.rolling_update.as_ref());
    let want = replicas(d);
    let surge = scaled_value(ru.and_then(|r| r.max_surge.as_ref()), want, true, "25%")?;
    let mut unavailable = scaled_value(ru.and_then(|r| r.max_unavailable.as_ref()), want, false, "25%")?;
    if surge == 0 && unavailable == 0 {
        unavailable = 1;
    }
    Ok((surge, unavailable))
}

/// MaxUnavailable (0 for Recreate, never more than the replicas).
pub fn max_unavailable(d: &Deployment) -> i32 {
    if is_recreate(d) || replicas(d) == 0 {
        return 0;
    }
    resolve_fenceposts(d).map(|(_, u)| u.min(replicas(d))).unwrap_or(0)
}

/// MaxSurge (0 for Recreate).
pub fn max_surge(d: &Deployment) -> i32 {
    if is_recreate(d) {
        return 0;
    }
    resolve_fenceposts(d).map(|(s, _)| s).unwrap_or(0)
}

/// NewRSNewReplicas for a RollingUpdate: how big the new ReplicaSet may be now — up to the
/// Deployment's replicas, while all pods together stay within replicas + maxSurge.
pub fn new_rs_new_replicas(d: &Deployment, all_spec_replicas: i32, new_rs_replicas: i32) -> i32 {
    if is_recreate(d) {
        return replicas(d);
    }
    let want = replicas(d);
    let max_total = want + max_surge(d);
    if all_spec_replicas >= max_total {
        return new_rs_replicas;
    }
    let up = (max_total - all_spec_replicas).min(want - new_rs_replicas).max(0);
    new_rs_replicas + up
}

/// The template without the pod-template-hash label (EqualIgnoreHash compares these).
pub fn template_without_hash(t: &PodTemplateSpec) -> serde_json::Value {
    let mut t = t.clone();
    if let Some(labels) = t.metadata.as_mut().and_then(|m| m.labels.as_mut()) {
        labels.remove(POD_TEMPLATE_HASH);
    }
    let mut v = serde_json::to_value(&t).unwrap_or_default();
    // An empty label map and none are the same template.
    if v.pointer("/metadata/labels").is_some_and(|l| l.as_object().is_some_and(|m| m.is_empty())) {
        v["metadata"].as_object_mut().map(|m| m.remove("labels"));
    }
    v
}

/// EqualIgnoreHash.
pub fn equal_ignore_hash(a: &PodTemplateSpec, b: &PodTemplateSpec) -> bool {
    template_without_hash(a) == template_without_hash(b)
}

/// ComputeHash: FNV-32a of the template (its canonical JSON here; Kubernetes hashes Go's
/// printed form, so the values differ from a real cluster's) and the collision count, written
/// as decimal digits each mapped onto `bcdfghjklmnpqrstvwxz2456789` (SafeEncodeString).
pub fn compute_hash(template: &PodTemplateSpec, collision_count: Option<i32>) -> String {
    let json = template_without_hash(template).to_string();
    let collision = collision_count.map(|c| (c as u32).to_le_bytes());
    safe_encoded_fnv32a(&[json.as_bytes(), collision.as_ref().map_or(&[][..], |c| &c[..])])
}

/// A ReplicaSet's revision (0 when it has none).
pub fn revision(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> i64 {
    meta.annotations.as_ref().and_then(|a| a.get(REVISION_ANNOTATION)).and_then(|r| r.parse().ok()).unwrap_or(0)
}

/// MaxRevision of the ReplicaSets.
pub fn max_revision<'a>(sets: impl IntoIterator<Item = &'a ReplicaSet>) -> i64 {
    sets.into_iter().map(|rs| revision(&rs.metadata)).max().unwrap_or(0)
}

/// The annotations a Deployment passes to its ReplicaSets (all but kubectl's last-applied
/// configuration and the revision bookkeeping, as skipCopyAnnotation says).
pub fn copied_annotations(d: &Deployment) -> BTreeMap<String, String> {
    d.metadata
        .annotations
        .clone()
        .unwrap_or_default()
        .into_iter()
        .filter(|(k, _)| k != "kubectl.kubernetes.io/last-applied-configuration" && k != REVISION_ANNOTATION && k != DESIRED_REPLICAS_ANNOTATION && k != MAX_REPLICAS_ANNOTATION)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    /// What `kubectl rollout history` shows for a revision: copied to the ReplicaSets.
    const CHANGE_CAUSE_ANNOTATION: &str = "kubernetes.io/change-cause";

    fn deployment(replicas: i32, strategy: Value) -> Deployment {
        serde_json::from_value(json!({"metadata": {"name": "web"}, "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
            "strategy": strategy, "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}}))
        .expect("deployment")
    }

    #[test]
    fn surge_rounds_up_unavailability_down_and_never_both_zero() {
        let cases = [
            (json!({"type": "RollingUpdate"}), 10, (3, 2)),
            (json!({"type": "RollingUpdate"}), 3, (1, 0)),
            (json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 0}}), 3, (0, 1)),
            (json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "50%", "maxUnavailable": "50%"}}), 3, (2, 1)),
            (json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 2, "maxUnavailable": 1}}), 3, (2, 1)),
        ];
        for (strategy, replicas, want) in cases {
            assert_eq!(resolve_fenceposts(&deployment(replicas, strategy.clone())), Ok(want), "{strategy} x{replicas}");
        }
        let recreate = deployment(3, json!({"type": "Recreate"}));
        assert_eq!((max_surge(&recreate), max_unavailable(&recreate)), (0, 0));
    }

    #[test]
    fn the_new_replica_set_grows_within_the_surge() {
        // replicas 4, surge 1 (25 % up): at most 5 pods in all.
        let d = deployment(4, json!({"type": "RollingUpdate"}));
        // (all RS spec replicas, new RS replicas) -> new RS replicas
        let cases = [(4, 0, 1), (5, 1, 1), (4, 1, 2), (3, 2, 4), (4, 4, 4)];
        for (all, new, want) in cases {
            assert_eq!(new_rs_new_replicas(&d, all, new), want, "all={all} new={new}");
        }
        assert_eq!(new_rs_new_replicas(&deployment(4, json!({"type": "Recreate"})), 4, 0), 4);
    }

    #[test]
    fn templates_compare_and_hash_without_their_hash_label() {
        let d = deployment(1, json!({"type": "RollingUpdate"}));
        let mut labeled = d.spec.template.clone();
        labeled.metadata.as_mut().and_then(|m| m.labels.as_mut()).map(|l| l.insert(POD_TEMPLATE_HASH.into(), "abc".into()));
        assert!(equal_ignore_hash(&d.spec.template, &labeled));
        assert_eq!(compute_hash(&d.spec.template, None), compute_hash(&labeled, None));
        let mut other = d.spec.template.clone();
        if let Some(s) = other.spec.as_mut() {
            s.containers[0].image = Some("nginx".into());
        }
        assert!(!equal_ignore_hash(&d.spec.template, &other));
        let h = compute_hash(&d.spec.template, None);
        assert_ne!(h, compute_hash(&other, None));
        assert_ne!(h, compute_hash(&d.spec.template, Some(1)), "a collision count changes the hash");
        assert!(h.chars().all(|c| "bcdfghjklmnpqrstvwxz2456789".contains(c)) && !h.is_empty(), "{h}");
    }

    #[test]
    fn revisions_and_annotations() {
        let rs = |rev: Option<&str>| -> ReplicaSet {
            let mut v = json!({"metadata": {"name": "r"}, "spec": {"selector": {}}});
            if let Some(r) = rev {
                v["metadata"]["annotations"] = json!({REVISION_ANNOTATION: r});
            }
            serde_json::from_value(v).expect("rs")
        };
        let sets = [rs(Some("3")), rs(None), rs(Some("x")), rs(Some("7"))];
        assert_eq!(max_revision(&sets), 7);
        let mut d = deployment(1, json!({"type": "RollingUpdate"}));
        d.metadata.annotations = Some([(REVISION_ANNOTATION.to_string(), "2".to_string()), (CHANGE_CAUSE_ANNOTATION.to_string(), "why".to_string()), ("kubectl.kubernetes.io/last-applied-configuration".to_string(), "{}".to_string())].into());
        assert_eq!(copied_annotations(&d).keys().collect::<Vec<_>>(), [CHANGE_CAUSE_ANNOTATION]);
    }
}
