//! Mirrors pkg/apis/storage/v1/defaults.go: the `SetDefaults_*` functions of storage.k8s.io/v1.
//!
//! A class that does not say deletes its volumes with their claims and binds them at once; a
//! CSI driver that does not say must be attached first, wants no pod information on mount, serves
//! persistent volumes only, and lets the kubelet change a volume's group ownership only when the
//! volume is ReadWriteOnce with an fsType.

use k8s_openapi::api::storage::v1::{CSIDriver, StorageClass};

/// SetDefaults_StorageClass: `reclaimPolicy: Delete`, `volumeBindingMode: Immediate`.
pub fn set_defaults_storage_class(class: &mut StorageClass) {
    class.reclaim_policy.get_or_insert_with(|| "Delete".to_string());
    class.volume_binding_mode.get_or_insert_with(|| "Immediate".to_string());
}

/// SetDefaults_CSIDriver: attach required, no pod info on mount, no storage capacity tracking,
/// `fsGroupPolicy: ReadWriteOnceWithFSType`, `volumeLifecycleModes: [Persistent]`, no republish.
pub fn set_defaults_csi_driver(driver: &mut CSIDriver) {
    let spec = &mut driver.spec;
    spec.attach_required.get_or_insert(true);
    spec.pod_info_on_mount.get_or_insert(false);
    spec.storage_capacity.get_or_insert(false);
    spec.fs_group_policy.get_or_insert_with(|| "ReadWriteOnceWithFSType".to_string());
    if spec.volume_lifecycle_modes.as_ref().is_none_or(Vec::is_empty) {
        spec.volume_lifecycle_modes = Some(vec!["Persistent".to_string()]);
    }
    spec.requires_republish.get_or_insert(false);
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_bare_class_deletes_and_binds_immediately() {
        let mut class: StorageClass = serde_json::from_value(json!({"metadata": {"name": "x"}, "provisioner": "p"})).expect("valid");
        set_defaults_storage_class(&mut class);
        assert_eq!(class.reclaim_policy.as_deref(), Some("Delete"));
        assert_eq!(class.volume_binding_mode.as_deref(), Some("Immediate"));

        let mut set: StorageClass =
            serde_json::from_value(json!({"metadata": {"name": "x"}, "provisioner": "p", "reclaimPolicy": "Retain", "volumeBindingMode": "WaitForFirstConsumer"})).expect("valid");
        set_defaults_storage_class(&mut set);
        assert_eq!((set.reclaim_policy.as_deref(), set.volume_binding_mode.as_deref()), (Some("Retain"), Some("WaitForFirstConsumer")));
    }

    #[test]
    fn a_bare_driver_gets_every_default() {
        let mut driver: CSIDriver = serde_json::from_value(json!({"metadata": {"name": "d"}, "spec": {}})).expect("valid");
        set_defaults_csi_driver(&mut driver);
        assert_eq!(
            serde_json::to_value(&driver.spec).expect("encodes"),
            json!({"attachRequired": true, "podInfoOnMount": false, "storageCapacity": false, "fsGroupPolicy": "ReadWriteOnceWithFSType",
                   "volumeLifecycleModes": ["Persistent"], "requiresRepublish": false})
        );
        let mut ephemeral: CSIDriver =
            serde_json::from_value(json!({"metadata": {"name": "d"}, "spec": {"attachRequired": false, "volumeLifecycleModes": ["Ephemeral"]}})).expect("valid");
        set_defaults_csi_driver(&mut ephemeral);
        assert_eq!(ephemeral.spec.attach_required, Some(false));
        assert_eq!(ephemeral.spec.volume_lifecycle_modes, Some(vec!["Ephemeral".to_string()]));
    }
}
