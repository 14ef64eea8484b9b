//! Mirrors the volume helpers of pkg/apis/core/v1/helper/helpers.go: access modes as `kubectl
//! get` abbreviates them, and the class of a volume or a claim (the beta annotation first, then
//! `spec.storageClassName`), over the JSON every component holds.

use serde_json::Value;

/// The deprecated annotation that named a class before `spec.storageClassName` existed; it still
/// wins over the field, as in Kubernetes.
pub const BETA_STORAGE_CLASS_ANNOTATION: &str = "volume.beta.kubernetes.io/storage-class";

/// The access modes a volume or claim may ask for, with `kubectl get`'s abbreviation, in the
/// order GetAccessModesAsString prints them.
pub const ACCESS_MODES: &[(&str, &str)] =
    &[("ReadWriteOnce", "RWO"), ("ReadOnlyMany", "ROX"), ("ReadWriteMany", "RWX"), ("ReadWriteOncePod", "RWOP")];

/// GetAccessModesAsString: the modes in `modes` (a JSON list of strings), abbreviated, each once,
/// comma-separated in a fixed order (`RWO,ROX`); unknown modes are left out.
pub fn get_access_modes_as_string(modes: Option<&Value>) -> String {
    let modes: Vec<&str> = modes.and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
    ACCESS_MODES.iter().filter(|(mode, _)| modes.contains(mode)).map(|(_, short)| *short).collect::<Vec<_>>().join(",")
}

/// GetPersistentVolumeClass: the beta annotation if present, else `spec.storageClassName`, else "".
pub fn get_persistent_volume_class(pv: &Value) -> &str {
    class_of(pv).unwrap_or("")
}

/// GetPersistentVolumeClaimClass: as for a volume — "" means the claim asks for no class.
pub fn get_persistent_volume_claim_class(pvc: &Value) -> &str {
    class_of(pvc).unwrap_or("")
}

/// PersistentVolumeClaimHasClass: whether the claim names a class at all — an explicit "" counts,
/// and means "no class, and no default either".
pub fn persistent_volume_claim_has_class(pvc: &Value) -> bool {
    class_of(pvc).is_some()
}

fn class_of(obj: &Value) -> Option<&str> {
    let annotation = obj.pointer("/metadata/annotations").and_then(|a| a.get(BETA_STORAGE_CLASS_ANNOTATION)).and_then(Value::as_str);
    annotation.or_else(|| obj.pointer("/spec/storageClassName").and_then(Value::as_str))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn access_modes_are_abbreviated_in_a_fixed_order_once_each() {
        let cases = [
            (json!(null), ""),
            (json!([]), ""),
            (json!(["ReadWriteOnce"]), "RWO"),
            (json!(["ReadWriteMany", "ReadWriteOnce", "ReadWriteOnce"]), "RWO,RWX"),
            (json!(["ReadWriteOncePod", "ReadOnlyMany", "Bogus"]), "ROX,RWOP"),
        ];
        for (modes, want) in cases {
            assert_eq!(get_access_modes_as_string(Some(&modes)), want, "{modes}");
        }
    }

    #[test]
    fn the_beta_annotation_wins_over_the_field() {
        let annotated = json!({"metadata": {"annotations": {BETA_STORAGE_CLASS_ANNOTATION: "old"}}, "spec": {"storageClassName": "new"}});
        assert_eq!(get_persistent_volume_class(&annotated), "old");
        assert_eq!(get_persistent_volume_claim_class(&json!({"spec": {"storageClassName": "fast"}})), "fast");
        assert_eq!(get_persistent_volume_claim_class(&json!({"spec": {}})), "");
        assert!(persistent_volume_claim_has_class(&json!({"spec": {"storageClassName": ""}})), "an explicit empty class");
        assert!(!persistent_volume_claim_has_class(&json!({"spec": {}})));
    }
}
