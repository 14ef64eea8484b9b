//! Mirrors printPersistentVolumeClaim in pkg/printers/internalversion/printers.go: NAME, STATUS,
//! VOLUME, CAPACITY, ACCESS MODES, STORAGECLASS, VOLUMEATTRIBUTESCLASS, AGE, and VOLUMEMODE with
//! `-o wide`. Capacity and access modes are the bound volume's (from the status), blank until
//! the claim names a volume.

use api::core::v1::helper::persistentvolume::{get_access_modes_as_string, get_persistent_volume_claim_class};
use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::printers::fields::{age, get, name, str_at};
use crate::printers::tablegenerator::{Column, Printer, age_col, col, name_col};
use crate::registry::core::persistentvolume::printer::{phase_cell, unset_or};

pub struct PersistentVolumeClaimPrinter;

impl Printer for PersistentVolumeClaimPrinter {
    fn columns(&self) -> Vec<Column> {
        vec![
            name_col(),
            col("Status", "string", "phase represents the current phase of PersistentVolumeClaim.", 0),
            col("Volume", "string", "volumeName is the binding reference to the PersistentVolume backing this claim.", 0),
            col("Capacity", "string", "capacity represents the actual resources of the underlying volume.", 0),
            col("Access Modes", "string", "accessModes contains the actual access modes the volume backing the PVC has.", 0),
            col("StorageClass", "string", "StorageClass of the pvc", 0),
            col("VolumeAttributesClass", "string", "VolumeAttributesClass of the pvc", 0),
            age_col(),
            col("VolumeMode", "string", "volumeMode defines what type of volume is required by the claim.", 1),
        ]
    }

    fn row(&self, obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
        let volume = str_at(obj, &["spec", "volumeName"]);
        let (capacity, modes) = if volume.is_empty() {
            (String::new(), String::new())
        } else {
            let capacity = get(obj, &["status", "capacity", "storage"]).and_then(Value::as_str).unwrap_or("0").to_string();
            (capacity, get_access_modes_as_string(get(obj, &["status", "accessModes"])))
        };
        vec![
            name(obj).into(),
            phase_cell(obj).into(),
            volume.into(),
            capacity.into(),
            modes.into(),
            get_persistent_volume_claim_class(obj).into(),
            unset_or(obj, &["spec", "volumeAttributesClassName"]).into(),
            age(obj, now).into(),
            unset_or(obj, &["spec", "volumeMode"]).into(),
        ]
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::PersistentVolumeClaimPrinter;
    use crate::printers::tablegenerator::testing::{assert_printer, object};

    #[test]
    fn pvc_cells() {
        let pending = object(json!({"spec": {"resources": {"requests": {"storage": "1Gi"}}, "storageClassName": "standard", "volumeMode": "Filesystem"}, "status": {"phase": "Pending"}}));
        let bound = object(json!({"spec": {"volumeName": "pvc-1", "storageClassName": "standard", "volumeMode": "Filesystem"},
            "status": {"phase": "Bound", "capacity": {"storage": "2Gi"}, "accessModes": ["ReadWriteOnce"]}}));
        let row = |status: &str, volume: &str, cap: &str, modes: &str| {
            vec![json!("x"), json!(status), json!(volume), json!(cap), json!(modes), json!("standard"), json!("<unset>"), json!("10s"), json!("Filesystem")]
        };
        assert_printer(
            &PersistentVolumeClaimPrinter,
            &[(pending, row("Pending", "", "", "")), (bound, row("Bound", "pvc-1", "2Gi", "RWO"))],
            &[("Name", 0), ("Status", 0), ("Volume", 0), ("Capacity", 0), ("Access Modes", 0), ("StorageClass", 0), ("VolumeAttributesClass", 0), ("Age", 0), ("VolumeMode", 1)],
        );
    }
}
