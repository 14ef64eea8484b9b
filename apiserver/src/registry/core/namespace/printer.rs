//! Mirrors printNamespace in pkg/printers/internalversion/printers.go: NAME, STATUS, AGE.

use crate::printers::fields::str_at;
use crate::printers::tablegenerator::{OneColumnPrinter, col};

pub const NAMESPACE_PRINTER: OneColumnPrinter = OneColumnPrinter {
    column: col("Status", "string", "The status of the namespace", 0),
    cell: |obj| str_at(obj, &["status", "phase"]).into(),
};

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::NAMESPACE_PRINTER;
    use crate::printers::tablegenerator::testing::{assert_printer, object};

    #[test]
    fn namespace_cells() {
        let cases = [
            (object(json!({"status": {"phase": "Active"}})), vec![json!("x"), json!("Active"), json!("10s")]),
            (object(json!({"status": {"phase": "Terminating"}})), vec![json!("x"), json!("Terminating"), json!("10s")]),
        ];
        assert_printer(&NAMESPACE_PRINTER, &cases, &[("Name", 0), ("Status", 0), ("Age", 0)]);
    }
}
