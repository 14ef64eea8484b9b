//! Mirrors plugin/pkg/admission/storage/storageobjectinuseprotection/admission.go, the
//! StorageObjectInUseProtection plugin: every new PersistentVolumeClaim gets the finalizer
//! `kubernetes.io/pvc-protection` and every new PersistentVolume `kubernetes.io/pv-protection`.
//! A delete then only marks the object; the pvc-protection controller removes the finalizer once
//! no pod uses the claim, the pv-protection controller once no claim is bound to the volume.

use serde_json::{Value, json};

use crate::admission::interfaces::{Attributes, MutationInterface, Operation};
use crate::error::Result;
use crate::registry::generic::typed::Object;

pub const NAME: &str = "StorageObjectInUseProtection";

/// The finalizer that keeps a claim while a pod uses it.
pub const PVC_PROTECTION_FINALIZER: &str = "kubernetes.io/pvc-protection";
/// The finalizer that keeps a volume while a claim is bound to it.
pub const PV_PROTECTION_FINALIZER: &str = "kubernetes.io/pv-protection";

pub struct StorageObjectInUseProtection;

impl StorageObjectInUseProtection {
    /// The finalizer a new object of the request's resource gets, if any.
    fn finalizer(a: &Attributes<'_>) -> Option<&'static str> {
        if a.is_for("", "persistentvolumeclaims") {
            Some(PVC_PROTECTION_FINALIZER)
        } else if a.is_for("", "persistentvolumes") {
            Some(PV_PROTECTION_FINALIZER)
        } else {
            None
        }
    }
}

impl MutationInterface for StorageObjectInUseProtection {
    fn name(&self) -> &'static str {
        NAME
    }

    fn handles(&self, a: &Attributes<'_>) -> bool {
        a.operation == Operation::Create && a.subresource.is_empty() && Self::finalizer(a).is_some()
    }

    fn admit_object(&self, a: &Attributes<'_>, obj: &mut Object) -> Result<()> {
        let Some(finalizer) = Self::finalizer(a) else { return Ok(()) };
        add_finalizer(obj.json_mut(), finalizer);
        Ok(())
    }
}

/// Appends `finalizer` to the object's finalizers unless it is there already.
fn add_finalizer(obj: &mut Value, finalizer: &str) {
    if !obj.get("metadata").is_some_and(Value::is_object) {
        obj["metadata"] = json!({});
    }
    let meta = &mut obj["metadata"];
    if !meta.get("finalizers").is_some_and(Value::is_array) {
        meta["finalizers"] = json!([]);
    }
    if let Some(list) = meta["finalizers"].as_array_mut()
        && !list.iter().any(|f| f.as_str() == Some(finalizer))
    {
        list.push(json!(finalizer));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::interfaces::testing::NOBODY;
    use crate::registry::core::configmap::strategy::CONFIGMAPS;
    use crate::registry::core::persistentvolume::strategy::PERSISTENTVOLUMES;
    use crate::registry::core::persistentvolumeclaim::strategy::PERSISTENTVOLUMECLAIMS;
    use crate::registry::generic::strategy::ResourceInfo;

    fn attributes(op: Operation, resource: &'static ResourceInfo) -> Attributes<'static> {
        Attributes { operation: op, user: &NOBODY, resource, subresource: "", namespace: None, name: "x", dry_run: false, object: None, old_object: None }
    }

    fn finalizers(resource: &'static ResourceInfo, obj: Value) -> Value {
        let mut obj = Object::new(obj);
        StorageObjectInUseProtection.admit_object(&attributes(Operation::Create, resource), &mut obj).expect("admitted");
        obj.into_json()["metadata"]["finalizers"].clone()
    }

    #[test]
    fn protection_finalizers_table() {
        let cases = [
            (&PERSISTENTVOLUMECLAIMS, json!({"metadata": {"name": "x"}}), json!(["kubernetes.io/pvc-protection"])),
            (&PERSISTENTVOLUMES, json!({"metadata": {"name": "x"}}), json!(["kubernetes.io/pv-protection"])),
            (&PERSISTENTVOLUMES, json!({"metadata": {"name": "x", "finalizers": ["a"]}}), json!(["a", "kubernetes.io/pv-protection"])),
            (&PERSISTENTVOLUMECLAIMS, json!({"metadata": {"name": "x", "finalizers": ["kubernetes.io/pvc-protection"]}}), json!(["kubernetes.io/pvc-protection"])),
        ];
        for (resource, obj, want) in cases {
            assert_eq!(finalizers(resource, obj.clone()), want, "{} {obj}", resource.plural);
        }
    }

    #[test]
    fn only_creates_of_claims_and_volumes_are_handled() {
        let p = StorageObjectInUseProtection;
        assert!(p.handles(&attributes(Operation::Create, &PERSISTENTVOLUMECLAIMS)));
        assert!(p.handles(&attributes(Operation::Create, &PERSISTENTVOLUMES)));
        assert!(!p.handles(&attributes(Operation::Update, &PERSISTENTVOLUMES)));
        assert!(!p.handles(&attributes(Operation::Delete, &PERSISTENTVOLUMECLAIMS)));
        assert!(!p.handles(&attributes(Operation::Create, &CONFIGMAPS)));
    }
}
