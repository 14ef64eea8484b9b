//! Mirrors printServiceAccount in pkg/printers/internalversion/printers.go: NAME, SECRETS, AGE.

use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::printers::fields::{age, len_at, name};
use crate::printers::tablegenerator::{Column, Printer, age_col, col, name_col};

pub struct ServiceAccountPrinter;

impl Printer for ServiceAccountPrinter {
    fn columns(&self) -> Vec<Column> {
        vec![name_col(), col("Secrets", "string", "Number of secrets listed.", 0), age_col()]
    }

    fn row(&self, obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
        vec![name(obj).into(), len_at(obj, &["secrets"]).into(), age(obj, now).into()]
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
            (json!({"metadata": meta, "secrets": [{"name": "s1"}, {"name": "s2"}]}), vec![json!("x"), json!(2), json!("10s")]),
            (json!({"metadata": meta}), vec![json!("x"), json!(0), json!("10s")]),
        ];
        assert_printer(&ServiceAccountPrinter, &cases, &[("Name", 0), ("Secrets", 0), ("Age", 0)]);
    }
}
