//! Mirrors printConfigMap in pkg/printers/internalversion/printers.go: NAME, DATA, AGE.

use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::printers::fields::{age, len_at, name};
use crate::printers::tablegenerator::{Column, Printer, age_col, col, name_col};

pub struct ConfigMapPrinter;

impl Printer for ConfigMapPrinter {
    fn columns(&self) -> Vec<Column> {
        vec![name_col(), col("Data", "string", "Number of keys in data and binaryData.", 0), age_col()]
    }

    fn row(&self, obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
        let data = len_at(obj, &["data"]) + len_at(obj, &["binaryData"]);
        vec![name(obj).into(), data.into(), age(obj, now).into()]
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
            (
                json!({"metadata": meta, "data": {"a": "1", "b": "2"}, "binaryData": {"c": "AA=="}}),
                vec![json!("x"), json!(3), json!("10s")],
            ),
            (json!({"metadata": meta}), vec![json!("x"), json!(0), json!("10s")]),
        ];
        assert_printer(&ConfigMapPrinter, &cases, &[("Name", 0), ("Data", 0), ("Age", 0)]);
    }
}
