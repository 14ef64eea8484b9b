//! Mirrors pkg/registry/storage/volumeattachment/strategy.go: cluster-scoped, created by the
//! attach-detach controller with an empty status; the external attacher writes `status`
//! (`attached`, `attachmentMetadata`, `attachError`) through its subresource. The spec never
//! changes; validated by the `api` crate.

use k8s_openapi::api::storage::v1::VolumeAttachment;
use serde_json::{Value, json};

use super::printer::VolumeAttachmentPrinter;
use crate::error::Cause;
use crate::registry::generic::strategy::{ResourceInfo, Strategy, Subresource, causes};
use crate::registry::generic::typed::{Object, Typed};

pub static VOLUMEATTACHMENTS: ResourceInfo = ResourceInfo {
    group: "storage.k8s.io",
    version: "v1",
    kind: "VolumeAttachment",
    plural: "volumeattachments",
    singular: "volumeattachment",
    namespaced: false,
    short_names: &[],
    storage_name: "volumeattachments",
    subresources: &[Subresource { name: "status", group: "storage.k8s.io", version: "v1", kind: "VolumeAttachment", verbs: &["get", "patch", "update"] }],
    categories: &[],
    codec: &Typed::<VolumeAttachment>::NEW,
    printer: &VolumeAttachmentPrinter,
};

pub struct VolumeAttachmentStrategy;

impl Strategy for VolumeAttachmentStrategy {
    fn info(&self) -> &'static ResourceInfo {
        &VOLUMEATTACHMENTS
    }

    /// A delete answers with the object deleted, not a Status (its store's ReturnDeletedObject),
    /// which the typed clients decode.
    fn return_deleted_object(&self) -> bool {
        true
    }

    /// PrepareForCreate: the client's status is dropped for an empty one — which Go writes as
    /// `{"attached": false}`, the field being required.
    fn prepare_for_create(&self, obj: &mut Object) {
        obj.json_mut()["status"] = json!({"attached": false});
    }

    fn validate(&self, obj: &Value) -> Vec<Cause> {
        causes(api::storage::validation::validate_volume_attachment(obj))
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<Cause> {
        causes(api::storage::validation::validate_volume_attachment_update(new, old))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_attachment_is_not_attached() {
        let mut obj = Object::new(json!({"metadata": {"name": "csi-1"}, "spec": {}, "status": {"attached": true}}));
        VolumeAttachmentStrategy.prepare_for_create(&mut obj);
        assert_eq!(obj.into_json()["status"], json!({"attached": false}));
    }

    #[test]
    fn the_status_is_written_only_through_its_subresource() {
        let old = json!({"metadata": {"name": "csi-1"}, "spec": {"attacher": "d", "nodeName": "n1", "source": {"persistentVolumeName": "pv1"}}, "status": {"attached": false}});
        let mut main = old.clone();
        main["status"]["attached"] = json!(true);
        VolumeAttachmentStrategy.prepare_for_update(&mut main, &old);
        assert_eq!(main["status"]["attached"], false);

        let mut status = old.clone();
        status["status"]["attached"] = json!(true);
        status["spec"]["nodeName"] = json!("n2");
        VolumeAttachmentStrategy.prepare_for_status_update(&mut status, &old);
        assert_eq!((status["status"]["attached"].clone(), status["spec"]["nodeName"].clone()), (json!(true), json!("n1")));
        assert_eq!(VolumeAttachmentStrategy.validate_subresource_update("status", &status, &old), vec![]);
    }
}
