//! Mirrors printConfigMap in pkg/printers/internalversion/printers.go: NAME, DATA, AGE.

use crate::printers::fields::len_at;
use crate::printers::tablegenerator::{OneColumnPrinter, col};

pub const CONFIGMAP_PRINTER: OneColumnPrinter = OneColumnPrinter {
    column: col("Data", "string", "Number of keys in data and binaryData.", 0),
    cell: |obj| (len_at(obj, &["data"]) + len_at(obj, &["binaryData"])).into(),
};

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::CONFIGMAP_PRINTER;
    use crate::printers::tablegenerator::testing::{assert_printer, object};

    #[test]
    fn configmap_cells() {
        let cases = [
            (object(json!({"data": {"a": "1", "b": "2"}, "binaryData": {"c": "AA=="}})), vec![json!("x"), json!(3), json!("10s")]),
            (object(json!({})), vec![json!("x"), json!(0), json!("10s")]),
        ];
        assert_printer(&CONFIGMAP_PRINTER, &cases, &[("Name", 0), ("Data", 0), ("Age", 0)]);
    }
}
