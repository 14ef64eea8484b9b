//! Mirrors printVolumeAttachment in pkg/printers/internalversion/printers.go: NAME, ATTACHER, PV,
//! NODE, ATTACHED, AGE. (Kubernetes declares ATTACHER with the `name` format too; so does this.)

use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::printers::fields::{age, bool_at, name, str_at};
use crate::printers::tablegenerator::{Column, Printer, age_col, col, name_col};

pub struct VolumeAttachmentPrinter;

impl Printer for VolumeAttachmentPrinter {
    fn columns(&self) -> Vec<Column> {
        vec![
            name_col(),
            Column { format: "name", ..col("Attacher", "string", "attacher indicates the name of the volume driver that MUST handle this request.", 0) },
            col("PV", "string", "persistentVolumeName represents the name of the persistent volume to attach.", 0),
            col("Node", "string", "nodeName represents the node that the volume should be attached to.", 0),
            col("Attached", "boolean", "attached indicates the volume is successfully attached.", 0),
            age_col(),
        ]
    }

    fn row(&self, obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
        vec![
            name(obj).into(),
            str_at(obj, &["spec", "attacher"]).into(),
            str_at(obj, &["spec", "source", "persistentVolumeName"]).into(),
            str_at(obj, &["spec", "nodeName"]).into(),
            bool_at(obj, &["status", "attached"]).into(),
            age(obj, now).into(),
        ]
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::printers::tablegenerator::testing::{column_names, now, object};

    #[test]
    fn volume_attachment_cells() {
        let attached = object(json!({"spec": {"attacher": "d", "nodeName": "n1", "source": {"persistentVolumeName": "pv1"}}, "status": {"attached": true}}));
        let inline = object(json!({"spec": {"attacher": "d", "nodeName": "n1", "source": {"inlineVolumeSpec": {}}}}));
        let p = VolumeAttachmentPrinter;
        assert_eq!(p.row(&attached, now()), vec![json!("x"), json!("d"), json!("pv1"), json!("n1"), json!(true), json!("10s")]);
        assert_eq!(p.row(&inline, now()), vec![json!("x"), json!("d"), json!(""), json!("n1"), json!(false), json!("10s")]);
        assert_eq!(column_names(&p), vec![("Name", 0), ("Attacher", 0), ("PV", 0), ("Node", 0), ("Attached", 0), ("Age", 0)]);
    }
}
