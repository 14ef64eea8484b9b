//! Mirrors printLease in pkg/printers/internalversion/printers.go: NAME, HOLDER, AGE.

use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::printers::fields::{age, name, str_at};
use crate::printers::tablegenerator::{Column, Printer, age_col, col, name_col};

pub struct LeasePrinter;

impl Printer for LeasePrinter {
    fn columns(&self) -> Vec<Column> {
        vec![name_col(), col("Holder", "string", "The identity of the holder of the lease.", 0), age_col()]
    }

    fn row(&self, obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
        vec![name(obj).into(), str_at(obj, &["spec", "holderIdentity"]).into(), age(obj, now).into()]
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
            (json!({"metadata": meta, "spec": {"holderIdentity": "n1"}}), vec![json!("x"), json!("n1"), json!("10s")]),
            (json!({"metadata": meta, "spec": {}}), vec![json!("x"), json!(""), json!("10s")]),
        ];
        assert_printer(&LeasePrinter, &cases, &[("Name", 0), ("Holder", 0), ("Age", 0)]);
    }
}
