//! Mirrors pkg/registry/core/persistentvolume/strategy.go: volumes are cluster-scoped, defaulted
//! and validated by the `api` crate ([`api::core::v1::persistentvolume_defaults`],
//! [`api::core::validation::persistentvolume`]). A new volume starts `Pending`; its phase is then
//! the PV controller's to write through `status`, and each change of phase stamps
//! `lastPhaseTransitionTime`.

use k8s_openapi::api::core::v1::PersistentVolume;
use serde_json::{Value, json};

use super::printer::PersistentVolumePrinter;
use crate::error::Cause;
use crate::registry::generic::store::now_rfc3339;
use crate::registry::generic::strategy::{ResourceInfo, Strategy, Subresource, causes, keep_status, set_defaults_on_update};
use crate::registry::generic::typed::{Object, Typed};

pub static PERSISTENTVOLUMES: ResourceInfo = ResourceInfo {
    group: "",
    version: "v1",
    kind: "PersistentVolume",
    plural: "persistentvolumes",
    singular: "persistentvolume",
    namespaced: false,
    short_names: &["pv"],
    storage_name: "persistentvolumes",
    subresources: &[Subresource { name: "status", group: "", version: "v1", kind: "PersistentVolume", verbs: &["get", "patch", "update"] }],
    categories: &[],
    codec: &Typed::<PersistentVolume>::NEW,
    printer: &PersistentVolumePrinter,
};

pub struct PersistentVolumeStrategy;

impl Strategy for PersistentVolumeStrategy {
    fn info(&self) -> &'static ResourceInfo {
        &PERSISTENTVOLUMES
    }

    /// A delete answers with the object deleted, not a Status (its store's ReturnDeletedObject),
    /// which the typed clients decode.
    fn return_deleted_object(&self) -> bool {
        true
    }

    fn set_defaults(&self, obj: &mut Object) {
        if let Some(pv) = obj.typed_mut::<PersistentVolume>() {
            api::core::v1::persistentvolume_defaults::set_defaults_persistent_volume(pv);
        }
    }

    /// PrepareForCreate: the client's status is dropped; the volume is `Pending` from now.
    fn prepare_for_create(&self, obj: &mut Object) {
        obj.json_mut()["status"] = json!({"phase": "Pending", "lastPhaseTransitionTime": now_rfc3339()});
    }

    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        set_defaults_on_update(self, new);
        keep_status(new, old);
    }

    /// PrepareForUpdate of the status strategy: only the status changes, and a new phase gets a
    /// new `lastPhaseTransitionTime` unless the writer set one itself.
    fn prepare_for_status_update(&self, new: &mut Value, old: &Value) {
        let status = new.get("status").cloned().unwrap_or_else(|| json!({}));
        let rv = new.pointer("/metadata/resourceVersion").cloned();
        let mut merged = old.clone();
        merged["status"] = status;
        if let Some(rv) = rv {
            merged["metadata"]["resourceVersion"] = rv;
        }
        let phase_changed = merged.pointer("/status/phase") != old.pointer("/status/phase");
        let time_kept = merged.pointer("/status/lastPhaseTransitionTime") == old.pointer("/status/lastPhaseTransitionTime");
        if phase_changed && time_kept {
            merged["status"]["lastPhaseTransitionTime"] = json!(now_rfc3339());
        }
        *new = merged;
    }

    fn validate(&self, obj: &Value) -> Vec<Cause> {
        causes(api::core::validation::validate_persistent_volume(obj))
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<Cause> {
        causes(api::core::validation::validate_persistent_volume_update(new, old))
    }

    fn validate_subresource_update(&self, subresource: &str, new: &Value, old: &Value) -> Vec<Cause> {
        match subresource {
            "status" => causes(api::core::validation::validate_persistent_volume_status_update(new, old)),
            _ => self.validate_update(new, old),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_volume_is_pending_with_its_defaults() {
        let mut obj = Object::new(json!({"metadata": {"name": "pv1"}, "spec": {"hostPath": {"path": "/x"}}, "status": {"phase": "Bound"}}));
        PersistentVolumeStrategy.set_defaults(&mut obj);
        PersistentVolumeStrategy.prepare_for_create(&mut obj);
        let pv = obj.into_json();
        assert_eq!(pv["status"]["phase"], "Pending");
        assert!(pv["status"]["lastPhaseTransitionTime"].is_string());
        assert_eq!(pv["spec"]["persistentVolumeReclaimPolicy"], "Retain");
        assert_eq!(pv["spec"]["volumeMode"], "Filesystem");
    }

    #[test]
    fn a_status_write_changes_only_the_status_and_stamps_a_new_phase() {
        let old = json!({"metadata": {"name": "pv1", "resourceVersion": "1"}, "spec": {"capacity": {"storage": "1Gi"}},
                         "status": {"phase": "Pending", "lastPhaseTransitionTime": "2026-01-01T00:00:00Z"}});
        let mut new = json!({"metadata": {"name": "pv1", "resourceVersion": "1"}, "spec": {"capacity": {"storage": "9Gi"}},
                             "status": {"phase": "Bound", "lastPhaseTransitionTime": "2026-01-01T00:00:00Z"}});
        PersistentVolumeStrategy.prepare_for_status_update(&mut new, &old);
        assert_eq!(new["spec"]["capacity"]["storage"], "1Gi");
        assert_eq!(new["status"]["phase"], "Bound");
        assert_ne!(new["status"]["lastPhaseTransitionTime"], "2026-01-01T00:00:00Z");

        let mut main = json!({"metadata": {"name": "pv1"}, "spec": {"capacity": {"storage": "1Gi"}, "claimRef": {"name": "c"}}, "status": {"phase": "Released"}});
        PersistentVolumeStrategy.prepare_for_update(&mut main, &old);
        assert_eq!(main["status"]["phase"], "Pending", "the main resource does not write the status");
        assert_eq!(main["spec"]["volumeMode"], "Filesystem", "an update is defaulted as a create is");
    }
}
