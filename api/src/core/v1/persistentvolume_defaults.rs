//! Mirrors the PersistentVolume and PersistentVolumeClaim part of pkg/apis/core/v1/defaults.go:
//! a volume is retained when its claim goes and holds a filesystem; a claim asks for a
//! filesystem. Both start `Pending` (the API server's PrepareForCreate writes the phase).

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, PersistentVolumeClaimSpec, PersistentVolumeSpec};

/// SetDefaults_PersistentVolume: `persistentVolumeReclaimPolicy: Retain`, `volumeMode: Filesystem`.
pub fn set_defaults_persistent_volume(pv: &mut PersistentVolume) {
    let spec = pv.spec.get_or_insert_with(PersistentVolumeSpec::default);
    if spec.persistent_volume_reclaim_policy.as_deref().is_none_or(str::is_empty) {
        spec.persistent_volume_reclaim_policy = Some("Retain".to_string());
    }
    spec.volume_mode.get_or_insert_with(|| "Filesystem".to_string());
}

/// SetDefaults_PersistentVolumeClaim: `volumeMode: Filesystem`.
pub fn set_defaults_persistent_volume_claim(pvc: &mut PersistentVolumeClaim) {
    let spec = pvc.spec.get_or_insert_with(PersistentVolumeClaimSpec::default);
    spec.volume_mode.get_or_insert_with(|| "Filesystem".to_string());
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn volume_and_claim_defaults() {
        let mut pv: PersistentVolume = serde_json::from_value(json!({"metadata": {"name": "v"}, "spec": {"hostPath": {"path": "/x"}}})).expect("valid");
        set_defaults_persistent_volume(&mut pv);
        let spec = pv.spec.expect("spec");
        assert_eq!(spec.persistent_volume_reclaim_policy.as_deref(), Some("Retain"));
        assert_eq!(spec.volume_mode.as_deref(), Some("Filesystem"));

        let mut kept: PersistentVolume = serde_json::from_value(json!({"spec": {"persistentVolumeReclaimPolicy": "Delete", "volumeMode": "Block"}})).expect("valid");
        set_defaults_persistent_volume(&mut kept);
        let spec = kept.spec.expect("spec");
        assert_eq!((spec.persistent_volume_reclaim_policy.as_deref(), spec.volume_mode.as_deref()), (Some("Delete"), Some("Block")));

        let mut pvc: PersistentVolumeClaim = serde_json::from_value(json!({"metadata": {"name": "c"}})).expect("valid");
        set_defaults_persistent_volume_claim(&mut pvc);
        assert_eq!(pvc.spec.expect("spec").volume_mode.as_deref(), Some("Filesystem"));
    }
}
