//! Mirrors printCSINode in pkg/printers/internalversion/printers.go: NAME, DRIVERS (how many
//! drivers registered on the node), AGE.

use crate::printers::fields::len_at;
use crate::printers::tablegenerator::{OneColumnPrinter, col};

pub const CSINODE_PRINTER: OneColumnPrinter = OneColumnPrinter {
    column: col("Drivers", "integer", "Drivers indicates the number of CSI drivers registered on the node", 0),
    cell: |obj| len_at(obj, &["spec", "drivers"]).into(),
};

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::CSINODE_PRINTER;
    use crate::printers::tablegenerator::testing::{assert_printer, object};

    #[test]
    fn csinode_cells() {
        let cases = [
            (object(json!({"spec": {"drivers": []}})), vec![json!("x"), json!(0), json!("10s")]),
            (object(json!({"spec": {"drivers": [{"name": "d", "nodeID": "n1"}]}})), vec![json!("x"), json!(1), json!("10s")]),
        ];
        assert_printer(&CSINODE_PRINTER, &cases, &[("Name", 0), ("Drivers", 0), ("Age", 0)]);
    }
}
