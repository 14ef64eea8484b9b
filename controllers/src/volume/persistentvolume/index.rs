//! Mirrors pkg/controller/volume/persistentvolume/index.go: the volumes indexed by their access
//! modes, and `findBestMatchForClaim`, which searches the sets of modes that hold every mode the
//! claim asks for, fewest modes first — so a claim for ReadWriteOnce gets a ReadWriteOnce volume
//! before a ReadWriteOnce+ReadOnlyMany one — and in each takes what [`find_matching_volume`]
//! finds.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};

use super::util::{access_modes, find_matching_volume};

/// findBestMatchForClaim / findByClaim. Volumes are searched by name within a set of modes, so
/// that equal candidates are chosen the same way every time.
pub fn find_best_match<'a>(claim: &PersistentVolumeClaim, volumes: &[&'a PersistentVolume], delay_binding: bool) -> Result<Option<&'a PersistentVolume>, String> {
    let wanted = access_modes(claim.spec.as_ref().and_then(|s| s.access_modes.as_ref()));
    // The index: each volume under the sorted set of its modes.
    let mut index: BTreeMap<Vec<&str>, Vec<&'a PersistentVolume>> = BTreeMap::new();
    for &v in volumes {
        index.entry(access_modes(v.spec.as_ref().and_then(|s| s.access_modes.as_ref()))).or_default().push(v);
    }
    // allPossibleMatchingAccessModes: the sets holding every wanted mode, fewest modes first.
    let mut sets: Vec<(&Vec<&str>, &mut Vec<&'a PersistentVolume>)> = index.iter_mut().filter(|(modes, _)| wanted.iter().all(|m| modes.contains(m))).collect();
    sets.sort_by_key(|(modes, _)| modes.len());
    for (_, candidates) in sets {
        candidates.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        if let Some(v) = find_matching_volume(claim, candidates, delay_binding)? {
            return Ok(Some(v));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::super::util::tests::{pv, pvc};
    use super::*;
    use serde_json::json;

    #[test]
    fn fewest_access_modes_first_then_smallest() {
        let named = |n: &str, modes: serde_json::Value, size: &str| {
            let mut p = pv(json!({"spec": {"accessModes": modes, "capacity": {"storage": size}}}));
            p.metadata.name = Some(n.into());
            p
        };
        let rwo_big = named("rwo-big", json!(["ReadWriteOnce"]), "10Gi");
        let rwo_small = named("rwo-small", json!(["ReadWriteOnce"]), "2Gi");
        let both = named("both", json!(["ReadWriteOnce", "ReadOnlyMany"]), "1Gi");
        let rwx = named("rwx", json!(["ReadWriteMany"]), "1Gi");
        let all = [&rwo_big, &rwo_small, &both, &rwx];
        let pick = |claim: serde_json::Value| find_best_match(&pvc(claim), &all, false).expect("no error").and_then(|v| v.metadata.name.clone());
        // (claim, chosen)
        let cases = [
            (json!({}), Some("rwo-small")), // RWO alone beats the smaller RWO+ROX
            (json!({"spec": {"accessModes": ["ReadOnlyMany"]}}), Some("both")),
            (json!({"spec": {"accessModes": ["ReadWriteOnce", "ReadOnlyMany"]}}), Some("both")),
            (json!({"spec": {"accessModes": ["ReadWriteMany"]}}), Some("rwx")),
            (json!({"spec": {"accessModes": ["ReadWriteOncePod"]}}), None),
            (json!({"spec": {"resources": {"requests": {"storage": "5Gi"}}}}), Some("rwo-big")),
        ];
        for (claim, want) in cases {
            assert_eq!(pick(claim.clone()).as_deref(), want, "{claim}");
        }
        let bad = pvc(json!({"spec": {"selector": {"matchExpressions": [{"key": "a", "operator": "Bogus"}]}}}));
        assert!(find_best_match(&bad, &all, false).is_err());
    }
}
