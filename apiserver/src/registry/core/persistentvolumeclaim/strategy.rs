//! Mirrors pkg/registry/core/persistentvolumeclaim/strategy.go: claims are namespaced, defaulted
//! and validated by the `api` crate. A new claim starts `Pending`; the PV controller binds it
//! (`spec.volumeName`, then `status`: `Bound`, the volume's capacity and access modes).

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use serde_json::{Value, json};

use super::printer::PersistentVolumeClaimPrinter;
use crate::error::Cause;
use crate::registry::generic::strategy::{ResourceInfo, Strategy, Subresource, causes, keep_status, set_defaults_on_update};
use crate::registry::generic::typed::{Object, Typed};

pub static PERSISTENTVOLUMECLAIMS: ResourceInfo = ResourceInfo {
    group: "",
    version: "v1",
    kind: "PersistentVolumeClaim",
    plural: "persistentvolumeclaims",
    singular: "persistentvolumeclaim",
    namespaced: true,
    short_names: &["pvc"],
    storage_name: "persistentvolumeclaims",
    subresources: &[Subresource { name: "status", group: "", version: "v1", kind: "PersistentVolumeClaim", verbs: &["get", "patch", "update"] }],
    categories: &[],
    codec: &Typed::<PersistentVolumeClaim>::NEW,
    printer: &PersistentVolumeClaimPrinter,
};

pub struct PersistentVolumeClaimStrategy;

impl Strategy for PersistentVolumeClaimStrategy {
    fn info(&self) -> &'static ResourceInfo {
        &PERSISTENTVOLUMECLAIMS
    }

    /// A delete answers with the object deleted, not a Status (its store's ReturnDeletedObject),
    /// which the typed clients decode.
    fn return_deleted_object(&self) -> bool {
        true
    }

    fn set_defaults(&self, obj: &mut Object) {
        if let Some(pvc) = obj.typed_mut::<PersistentVolumeClaim>() {
            api::core::v1::persistentvolume_defaults::set_defaults_persistent_volume_claim(pvc);
        }
    }

    /// PrepareForCreate: the client's status is dropped; the claim is `Pending` from now.
    fn prepare_for_create(&self, obj: &mut Object) {
        obj.json_mut()["status"] = json!({"phase": "Pending"});
    }

    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        set_defaults_on_update(self, new);
        keep_status(new, old);
    }

    fn validate(&self, obj: &Value) -> Vec<Cause> {
        causes(api::core::validation::validate_persistent_volume_claim(obj))
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<Cause> {
        causes(api::core::validation::validate_persistent_volume_claim_update(new, old))
    }

    fn validate_subresource_update(&self, subresource: &str, new: &Value, old: &Value) -> Vec<Cause> {
        match subresource {
            "status" => causes(api::core::validation::validate_persistent_volume_claim_status_update(new, old)),
            _ => self.validate_update(new, old),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_claim_is_pending_and_an_update_is_defaulted() {
        let mut obj = Object::new(json!({"metadata": {"name": "c", "namespace": "default"}, "spec": {}, "status": {"phase": "Bound"}}));
        PersistentVolumeClaimStrategy.set_defaults(&mut obj);
        PersistentVolumeClaimStrategy.prepare_for_create(&mut obj);
        let pvc = obj.into_json();
        assert_eq!(pvc["status"], json!({"phase": "Pending"}));
        assert_eq!(pvc["spec"]["volumeMode"], "Filesystem");

        // `kubectl apply` of the manifest again: no volumeMode, which must not read as a change.
        let mut new = json!({"metadata": {"name": "c", "namespace": "default"}, "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}});
        let mut old = new.clone();
        old["spec"]["volumeMode"] = json!("Filesystem");
        old["status"] = json!({"phase": "Pending"});
        PersistentVolumeClaimStrategy.prepare_for_update(&mut new, &old);
        assert_eq!(PersistentVolumeClaimStrategy.validate_update(&new, &old), vec![]);
        assert_eq!(new["status"]["phase"], "Pending");
    }
}
