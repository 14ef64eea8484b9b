//! Mirrors pkg/registry/storage/csidriver/strategy.go: a driver's description is cluster-scoped,
//! named after the driver, and has no status; defaulted and validated by the `api` crate.

use k8s_openapi::api::storage::v1::CSIDriver;
use serde_json::Value;

use super::printer::CSIDriverPrinter;
use crate::error::Cause;
use crate::registry::generic::strategy::{ResourceInfo, Strategy, causes, set_defaults_on_update};
use crate::registry::generic::typed::{Object, Typed};

pub static CSIDRIVERS: ResourceInfo = ResourceInfo {
    group: "storage.k8s.io",
    version: "v1",
    kind: "CSIDriver",
    plural: "csidrivers",
    singular: "csidriver",
    namespaced: false,
    short_names: &[],
    storage_name: "csidrivers",
    subresources: &[],
    categories: &[],
    codec: &Typed::<CSIDriver>::NEW,
    printer: &CSIDriverPrinter,
};

pub struct CSIDriverStrategy;

impl Strategy for CSIDriverStrategy {
    fn info(&self) -> &'static ResourceInfo {
        &CSIDRIVERS
    }

    /// A delete answers with the object deleted, not a Status (its store's ReturnDeletedObject),
    /// which the typed clients decode.
    fn return_deleted_object(&self) -> bool {
        true
    }

    fn set_defaults(&self, obj: &mut Object) {
        if let Some(driver) = obj.typed_mut::<CSIDriver>() {
            api::storage::v1::defaults::set_defaults_csi_driver(driver);
        }
    }

    fn prepare_for_update(&self, new: &mut Value, _old: &Value) {
        set_defaults_on_update(self, new);
    }

    fn validate(&self, obj: &Value) -> Vec<Cause> {
        causes(api::storage::validation::validate_csi_driver(obj))
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<Cause> {
        causes(api::storage::validation::validate_csi_driver_update(new, old))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_reapplied_driver_is_defaulted_again_and_stays_valid() {
        let mut obj = Object::new(json!({"metadata": {"name": "hostpath.csi.kubelab.io"}, "spec": {}}));
        CSIDriverStrategy.set_defaults(&mut obj);
        let old = obj.into_json();
        assert_eq!(CSIDriverStrategy.validate(&old), vec![]);
        let mut new = json!({"metadata": {"name": "hostpath.csi.kubelab.io"}, "spec": {}});
        CSIDriverStrategy.prepare_for_update(&mut new, &old);
        assert_eq!(CSIDriverStrategy.validate_update(&new, &old), vec![]);
    }
}
