//! Mirrors printLease in pkg/printers/internalversion/printers.go: NAME, HOLDER, AGE.

use crate::printers::fields::str_at;
use crate::printers::tablegenerator::{OneColumnPrinter, col};

pub const LEASE_PRINTER: OneColumnPrinter = OneColumnPrinter {
    column: col("Holder", "string", "The identity of the holder of the lease.", 0),
    cell: |obj| str_at(obj, &["spec", "holderIdentity"]).into(),
};

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::LEASE_PRINTER;
    use crate::printers::tablegenerator::testing::{assert_printer, object};

    #[test]
    fn lease_cells() {
        let cases = [
            (object(json!({"spec": {"holderIdentity": "n1"}})), vec![json!("x"), json!("n1"), json!("10s")]),
            (object(json!({"spec": {}})), vec![json!("x"), json!(""), json!("10s")]),
        ];
        assert_printer(&LEASE_PRINTER, &cases, &[("Name", 0), ("Holder", 0), ("Age", 0)]);
    }
}
