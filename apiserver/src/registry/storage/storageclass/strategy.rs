//! Mirrors pkg/registry/storage/storageclass/strategy.go: a class is cluster-scoped and has no
//! status; defaulted and validated by the `api` crate ([`api::storage::v1::defaults`],
//! [`api::storage::validation`]). Its provisioner, parameters, reclaim policy and binding mode are
//! fixed at creation.

use k8s_openapi::api::storage::v1::StorageClass;
use serde_json::Value;

use super::printer::StorageClassPrinter;
use crate::error::Cause;
use crate::registry::generic::strategy::{ResourceInfo, Strategy, causes, set_defaults_on_update};
use crate::registry::generic::typed::{Object, Typed};

pub static STORAGECLASSES: ResourceInfo = ResourceInfo {
    group: "storage.k8s.io",
    version: "v1",
    kind: "StorageClass",
    plural: "storageclasses",
    singular: "storageclass",
    namespaced: false,
    short_names: &["sc"],
    storage_name: "storageclasses",
    subresources: &[],
    categories: &[],
    codec: &Typed::<StorageClass>::NEW,
    printer: &StorageClassPrinter,
};

pub struct StorageClassStrategy;

impl Strategy for StorageClassStrategy {
    fn info(&self) -> &'static ResourceInfo {
        &STORAGECLASSES
    }

    /// A delete answers with the object deleted, not a Status (its store's ReturnDeletedObject),
    /// which the typed clients decode.
    fn return_deleted_object(&self) -> bool {
        true
    }

    fn set_defaults(&self, obj: &mut Object) {
        if let Some(class) = obj.typed_mut::<StorageClass>() {
            api::storage::v1::defaults::set_defaults_storage_class(class);
        }
    }

    fn prepare_for_update(&self, new: &mut Value, _old: &Value) {
        set_defaults_on_update(self, new);
    }

    fn validate(&self, obj: &Value) -> Vec<Cause> {
        causes(api::storage::validation::validate_storage_class(obj))
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<Cause> {
        causes(api::storage::validation::validate_storage_class_update(new, old))
    }
}
