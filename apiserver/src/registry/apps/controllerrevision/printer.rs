//! Mirrors printControllerRevision in pkg/printers/internalversion/printers.go: NAME,
//! CONTROLLER (`<kind>.<group>/<name>` of the owner that controls it), REVISION, AGE.

use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::printers::fields::{age, arr_at, bool_at, int_at, name, str_at};
use crate::printers::tablegenerator::{Column, Printer, age_col, col, name_col};

pub struct ControllerRevisionPrinter;

impl Printer for ControllerRevisionPrinter {
    fn columns(&self) -> Vec<Column> {
        vec![
            name_col(),
            col("Controller", "string", "Controller of the object", 0),
            col("Revision", "string", "Revision indicates the revision of the state represented by Data.", 0),
            age_col(),
        ]
    }

    fn row(&self, obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
        let controller = arr_at(obj, &["metadata", "ownerReferences"]).iter().find(|r| bool_at(r, &["controller"])).map_or_else(
            || "<none>".to_string(),
            |r| {
                let group = str_at(r, &["apiVersion"]).rsplit_once('/').map_or("", |(g, _)| g);
                format!("{}.{group}/{}", str_at(r, &["kind"]).to_lowercase(), str_at(r, &["name"]))
            },
        );
        vec![name(obj).into(), controller.into(), int_at(obj, &["revision"]).into(), age(obj, now).into()]
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::ControllerRevisionPrinter;
    use crate::printers::tablegenerator::testing::{assert_printer, object};

    #[test]
    fn controller_revision_cells() {
        let owned = object(json!({
            "metadata": {"name": "x", "creationTimestamp": crate::printers::tablegenerator::testing::ago(10),
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web", "uid": "u", "controller": true}]},
            "revision": 2
        }));
        let orphan = object(json!({"revision": 1}));
        assert_printer(
            &ControllerRevisionPrinter,
            &[
                (owned, vec![json!("x"), json!("statefulset.apps/web"), json!(2), json!("10s")]),
                (orphan, vec![json!("x"), json!("<none>"), json!(1), json!("10s")]),
            ],
            &[("Name", 0), ("Controller", 0), ("Revision", 0), ("Age", 0)],
        );
    }
}
