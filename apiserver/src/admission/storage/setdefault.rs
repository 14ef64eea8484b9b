//! Mirrors plugin/pkg/admission/storage/storageclass/setdefault/admission.go, the
//! DefaultStorageClass plugin: a PersistentVolumeClaim created without a class (neither
//! `spec.storageClassName` nor the beta annotation — an explicit `""` is a choice of "no class")
//! gets the class annotated `storageclass.kubernetes.io/is-default-class: "true"`; when several
//! are, the newest ([`api::storage::util::get_default_class`]). No default class: the claim is
//! left as it is.

use std::sync::Arc;

use api::core::v1::helper::persistentvolume::persistent_volume_claim_has_class;
use api::storage::util::get_default_class;
use serde_json::{Value, json};

use crate::admission::interfaces::{Attributes, MutationInterface, Operation};
use crate::error::Result;
use crate::registry::generic::store::Registry;
use crate::registry::generic::typed::Object;

pub const NAME: &str = "DefaultStorageClass";

/// Where the plugin reads the classes: the StorageClass watch cache (Kubernetes: its lister), or
/// a test's list.
pub trait ClassLister: Send + Sync {
    fn classes(&self) -> Vec<Arc<Value>>;
}

impl ClassLister for Arc<Registry> {
    fn classes(&self) -> Vec<Arc<Value>> {
        self.cache.list(&|_| true).0
    }
}

pub struct DefaultStorageClass {
    lister: Box<dyn ClassLister>,
}

impl DefaultStorageClass {
    pub fn new(lister: Box<dyn ClassLister>) -> Self {
        Self { lister }
    }
}

impl MutationInterface for DefaultStorageClass {
    fn name(&self) -> &'static str {
        NAME
    }

    fn handles(&self, a: &Attributes<'_>) -> bool {
        a.operation == Operation::Create && a.is_for("", "persistentvolumeclaims") && a.subresource.is_empty()
    }

    fn admit_object(&self, _a: &Attributes<'_>, obj: &mut Object) -> Result<()> {
        let pvc = obj.json_mut();
        // Step 1: the user asked for a class (or for none, with "").
        if persistent_volume_claim_has_class(pvc) {
            return Ok(());
        }
        // Step 2: the default class, if any.
        let classes = self.lister.classes();
        let Some(default) = get_default_class(classes.iter().map(|c| c.as_ref())) else { return Ok(()) };
        let name = default.pointer("/metadata/name").cloned().unwrap_or(Value::Null);
        tracing::debug!(target: "apiserver::admission", class = %name, "defaulting storage class for claim");
        // Step 3: the claim names it.
        if !pvc.get("spec").is_some_and(Value::is_object) {
            pvc["spec"] = json!({});
        }
        pvc["spec"]["storageClassName"] = name;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::interfaces::testing::NOBODY;
    use crate::registry::core::persistentvolumeclaim::strategy::PERSISTENTVOLUMECLAIMS;
    use crate::registry::core::persistentvolume::strategy::PERSISTENTVOLUMES;

    struct FakeClasses(Vec<Value>);

    impl ClassLister for FakeClasses {
        fn classes(&self) -> Vec<Arc<Value>> {
            self.0.iter().cloned().map(Arc::new).collect()
        }
    }

    fn class(name: &str, created: &str, default: bool) -> Value {
        let mut c = json!({"metadata": {"name": name, "creationTimestamp": created}, "provisioner": "p"});
        if default {
            c["metadata"]["annotations"] = json!({"storageclass.kubernetes.io/is-default-class": "true"});
        }
        c
    }

    fn attributes(op: Operation, resource: &'static crate::registry::generic::strategy::ResourceInfo) -> Attributes<'static> {
        Attributes { operation: op, user: &NOBODY, resource, subresource: "", namespace: Some("default"), name: "data", dry_run: false, object: None, old_object: None }
    }

    /// The claim's class after admission, given the classes and the claim's own spec.
    fn admitted(classes: Vec<Value>, claim: Value) -> Value {
        let plugin = DefaultStorageClass::new(Box::new(FakeClasses(classes)));
        let mut obj = Object::new(claim);
        plugin.admit_object(&attributes(Operation::Create, &PERSISTENTVOLUMECLAIMS), &mut obj).expect("admitted");
        obj.into_json().pointer("/spec/storageClassName").cloned().unwrap_or(Value::Null)
    }

    #[test]
    fn default_storage_class_table() {
        let standard = class("standard", "2026-01-01T00:00:00Z", true);
        let newer = class("newer", "2026-02-01T00:00:00Z", true);
        let fast = class("fast", "2026-03-01T00:00:00Z", false);
        let bare = json!({"metadata": {"name": "data"}, "spec": {}});
        let cases = [
            (vec![standard.clone(), fast.clone()], bare.clone(), json!("standard")),
            (vec![standard.clone(), newer.clone()], bare.clone(), json!("newer")),
            (vec![fast.clone()], bare.clone(), Value::Null),
            (vec![], json!({"metadata": {"name": "data"}}), Value::Null),
            (vec![standard.clone()], json!({"metadata": {"name": "data"}}), json!("standard")),
            (vec![standard.clone()], json!({"metadata": {"name": "data"}, "spec": {"storageClassName": "fast"}}), json!("fast")),
            (vec![standard.clone()], json!({"metadata": {"name": "data"}, "spec": {"storageClassName": ""}}), json!("")),
            (vec![standard.clone()], json!({"metadata": {"name": "data", "annotations": {"volume.beta.kubernetes.io/storage-class": "old"}}, "spec": {}}), Value::Null),
        ];
        for (classes, claim, want) in cases {
            assert_eq!(admitted(classes, claim.clone()), want, "{claim}");
        }
    }

    #[test]
    fn only_claim_creates_are_handled() {
        let plugin = DefaultStorageClass::new(Box::new(FakeClasses(vec![])));
        assert!(plugin.handles(&attributes(Operation::Create, &PERSISTENTVOLUMECLAIMS)));
        assert!(!plugin.handles(&attributes(Operation::Update, &PERSISTENTVOLUMECLAIMS)));
        assert!(!plugin.handles(&attributes(Operation::Create, &PERSISTENTVOLUMES)));
        let status = Attributes { subresource: "status", ..attributes(Operation::Create, &PERSISTENTVOLUMECLAIMS) };
        assert!(!plugin.handles(&status));
    }
}
