//! Mirrors printStorageClass in pkg/printers/internalversion/printers.go: NAME (with
//! ` (default)` after the default class's), PROVISIONER, RECLAIMPOLICY, VOLUMEBINDINGMODE,
//! ALLOWVOLUMEEXPANSION, AGE.

use api::storage::util::is_default_annotation;
use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::printers::fields::{age, bool_at, get, name, str_at};
use crate::printers::tablegenerator::{Column, Printer, age_col, col, name_col};

pub struct StorageClassPrinter;

impl Printer for StorageClassPrinter {
    fn columns(&self) -> Vec<Column> {
        vec![
            name_col(),
            col("Provisioner", "string", "provisioner indicates the type of the provisioner.", 0),
            col("ReclaimPolicy", "string", "reclaimPolicy controls the reclaimPolicy for dynamically provisioned PersistentVolumes of this storage class.", 0),
            col("VolumeBindingMode", "string", "volumeBindingMode indicates how PersistentVolumeClaims should be provisioned and bound.", 0),
            col("AllowVolumeExpansion", "string", "allowVolumeExpansion shows whether the storage class allow volume expand.", 0),
            age_col(),
        ]
    }

    fn row(&self, obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
        let mut shown = name(obj).to_string();
        if is_default_annotation(obj) {
            shown.push_str(" (default)");
        }
        // Unset pointers print as what they default to.
        let policy = get(obj, &["reclaimPolicy"]).and_then(Value::as_str).unwrap_or("Delete");
        let mode = get(obj, &["volumeBindingMode"]).and_then(Value::as_str).unwrap_or("Immediate");
        vec![shown.into(), str_at(obj, &["provisioner"]).into(), policy.into(), mode.into(), bool_at(obj, &["allowVolumeExpansion"]).into(), age(obj, now).into()]
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::StorageClassPrinter;
    use crate::printers::tablegenerator::testing::{assert_printer, object};

    #[test]
    fn storage_class_cells() {
        let mut standard = object(json!({"provisioner": "hostpath.csi.kubelab.io", "reclaimPolicy": "Delete", "volumeBindingMode": "WaitForFirstConsumer"}));
        standard["metadata"]["annotations"] = json!({"storageclass.kubernetes.io/is-default-class": "true"});
        let plain = object(json!({"provisioner": "p", "allowVolumeExpansion": true}));
        assert_printer(
            &StorageClassPrinter,
            &[
                (standard, vec![json!("x (default)"), json!("hostpath.csi.kubelab.io"), json!("Delete"), json!("WaitForFirstConsumer"), json!(false), json!("10s")]),
                (plain, vec![json!("x"), json!("p"), json!("Delete"), json!("Immediate"), json!(true), json!("10s")]),
            ],
            &[("Name", 0), ("Provisioner", 0), ("ReclaimPolicy", 0), ("VolumeBindingMode", 0), ("AllowVolumeExpansion", 0), ("Age", 0)],
        );
    }
}
