//! Mirrors printNamespace in pkg/printers/internalversion/printers.go: NAME, STATUS, AGE.

use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::printers::fields::{age, name, str_at};
use crate::printers::tablegenerator::{Column, Printer, age_col, col, name_col};

pub struct NamespacePrinter;

impl Printer for NamespacePrinter {
    fn columns(&self) -> Vec<Column> {
        vec![name_col(), col("Status", "string", "The status of the namespace", 0), age_col()]
    }

    fn row(&self, obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
        vec![name(obj).into(), str_at(obj, &["status", "phase"]).into(), age(obj, now).into()]
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::printers::tablegenerator::testing::{ago, assert_printer};

    #[test]
    fn cells_and_columns() {
        let meta = json!({"name": "x", "creationTimestamp": ago(10)});
        let cases = vec![
            (json!({"metadata": meta, "status": {"phase": "Active"}}), vec![json!("x"), json!("Active"), json!("10s")]),
            (json!({"metadata": meta, "status": {"phase": "Terminating"}}), vec![json!("x"), json!("Terminating"), json!("10s")]),
        ];
        assert_printer(&NamespacePrinter, &cases, &[("Name", 0), ("Status", 0), ("Age", 0)]);
    }
}
