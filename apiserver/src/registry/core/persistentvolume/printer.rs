//! Mirrors printPersistentVolume in pkg/printers/internalversion/printers.go: NAME, CAPACITY,
//! ACCESS MODES, RECLAIM POLICY, STATUS, CLAIM, STORAGECLASS, VOLUMEATTRIBUTESCLASS, REASON, AGE,
//! and VOLUMEMODE with `-o wide`.

use api::core::v1::helper::persistentvolume::{get_access_modes_as_string, get_persistent_volume_class};
use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::printers::fields::{age, get, name, obj_present, str_at};
use crate::printers::tablegenerator::{Column, Printer, age_col, col, name_col};

pub struct PersistentVolumePrinter;

/// A phase as printed: `Terminating` once the object is being deleted (its protection finalizer
/// holds it), else `status.phase`.
pub fn phase_cell(obj: &Value) -> String {
    if obj_present(obj, &["metadata", "deletionTimestamp"]) { "Terminating".to_string() } else { str_at(obj, &["status", "phase"]).to_string() }
}

/// A pointer-to-string field as printed: its value, `<unset>` when nil.
pub fn unset_or(obj: &Value, path: &[&str]) -> String {
    get(obj, path).and_then(Value::as_str).unwrap_or("<unset>").to_string()
}

impl Printer for PersistentVolumePrinter {
    fn columns(&self) -> Vec<Column> {
        vec![
            name_col(),
            col("Capacity", "string", "capacity is the description of the persistent volume's resources and capacity.", 0),
            col("Access Modes", "string", "accessModes contains all ways the volume can be mounted.", 0),
            col("Reclaim Policy", "string", "persistentVolumeReclaimPolicy defines what happens to a persistent volume when released from its claim.", 0),
            col("Status", "string", "phase indicates if a volume is available, bound to a claim, or released by a claim.", 0),
            col("Claim", "string", "claimRef is part of a bi-directional binding between PersistentVolume and PersistentVolumeClaim.", 0),
            col("StorageClass", "string", "StorageClass of the pv", 0),
            col("VolumeAttributesClass", "string", "VolumeAttributesClass of the pv", 0),
            col("Reason", "string", "reason is a brief CamelCase string that describes any failure.", 0),
            age_col(),
            col("VolumeMode", "string", "volumeMode defines if a volume is intended to be used with a formatted filesystem or to remain in raw block state.", 1),
        ]
    }

    fn row(&self, obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
        // A zero Quantity prints as "0".
        let capacity = get(obj, &["spec", "capacity", "storage"]).and_then(Value::as_str).unwrap_or("0");
        let claim = if obj_present(obj, &["spec", "claimRef"]) {
            format!("{}/{}", str_at(obj, &["spec", "claimRef", "namespace"]), str_at(obj, &["spec", "claimRef", "name"]))
        } else {
            String::new()
        };
        vec![
            name(obj).into(),
            capacity.into(),
            get_access_modes_as_string(get(obj, &["spec", "accessModes"])).into(),
            str_at(obj, &["spec", "persistentVolumeReclaimPolicy"]).into(),
            phase_cell(obj).into(),
            claim.into(),
            get_persistent_volume_class(obj).into(),
            unset_or(obj, &["spec", "volumeAttributesClassName"]).into(),
            str_at(obj, &["status", "reason"]).into(),
            age(obj, now).into(),
            unset_or(obj, &["spec", "volumeMode"]).into(),
        ]
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::PersistentVolumePrinter;
    use crate::printers::tablegenerator::testing::{assert_printer, object};

    #[test]
    fn pv_cells() {
        let bound = object(json!({"spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce", "ReadOnlyMany"], "persistentVolumeReclaimPolicy": "Delete",
            "claimRef": {"namespace": "default", "name": "data"}, "storageClassName": "standard", "volumeMode": "Filesystem"}, "status": {"phase": "Bound"}}));
        let bare = object(json!({"spec": {}, "status": {"phase": "Failed", "reason": "Recycle"}}));
        let mut going = bound.clone();
        going["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        let row = |cap: &str, modes: &str, policy: &str, status: &str, claim: &str, class: &str, reason: &str, mode: &str| {
            vec![json!("x"), json!(cap), json!(modes), json!(policy), json!(status), json!(claim), json!(class), json!("<unset>"), json!(reason), json!("10s"), json!(mode)]
        };
        assert_printer(
            &PersistentVolumePrinter,
            &[
                (bound, row("1Gi", "RWO,ROX", "Delete", "Bound", "default/data", "standard", "", "Filesystem")),
                (bare, row("0", "", "", "Failed", "", "", "Recycle", "<unset>")),
                (going, row("1Gi", "RWO,ROX", "Delete", "Terminating", "default/data", "standard", "", "Filesystem")),
            ],
            &[
                ("Name", 0),
                ("Capacity", 0),
                ("Access Modes", 0),
                ("Reclaim Policy", 0),
                ("Status", 0),
                ("Claim", 0),
                ("StorageClass", 0),
                ("VolumeAttributesClass", 0),
                ("Reason", 0),
                ("Age", 0),
                ("VolumeMode", 1),
            ],
        );
    }
}
