//! Mirrors printSecret in pkg/printers/internalversion/printers.go: NAME, TYPE, DATA, AGE.

use std::collections::BTreeSet;

use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::printers::fields::{age, name, str_at};
use crate::printers::tablegenerator::{Column, Printer, age_col, col, name_col};

pub struct SecretPrinter;

impl Printer for SecretPrinter {
    fn columns(&self) -> Vec<Column> {
        vec![
            name_col(),
            col("Type", "string", "Used to facilitate programmatic handling of secret data.", 0),
            col("Data", "string", "Number of keys in data.", 0),
            age_col(),
        ]
    }

    fn row(&self, obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
        // stringData is write-only: the API server merges it into data. Count the union so an
        // object that has not been through that merge still shows the right number.
        let mut keys: BTreeSet<&str> = BTreeSet::new();
        for field in ["data", "stringData"] {
            if let Some(map) = obj.get(field).and_then(Value::as_object) {
                keys.extend(map.keys().map(String::as_str));
            }
        }
        vec![name(obj).into(), str_at(obj, &["type"]).into(), (keys.len() as i64).into(), age(obj, now).into()]
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::SecretPrinter;
    use crate::printers::tablegenerator::testing::{assert_printer, object};

    #[test]
    fn secret_cells() {
        let cases = [
            (
                object(json!({"type": "Opaque", "data": {"a": "MQ==", "b": "Mg=="}, "stringData": {"b": "2", "c": "3"}})),
                vec![json!("x"), json!("Opaque"), json!(3), json!("10s")],
            ),
            (object(json!({"type": "kubernetes.io/tls"})), vec![json!("x"), json!("kubernetes.io/tls"), json!(0), json!("10s")]),
        ];
        assert_printer(&SecretPrinter, &cases, &[("Name", 0), ("Type", 0), ("Data", 0), ("Age", 0)]);
    }
}
