//! Mirrors printServiceAccount in pkg/printers/internalversion/printers.go: NAME, SECRETS, AGE.

use crate::printers::fields::len_at;
use crate::printers::tablegenerator::{OneColumnPrinter, col};

pub const SERVICEACCOUNT_PRINTER: OneColumnPrinter = OneColumnPrinter {
    column: col("Secrets", "string", "Number of secrets listed.", 0),
    cell: |obj| len_at(obj, &["secrets"]).into(),
};

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::SERVICEACCOUNT_PRINTER;
    use crate::printers::tablegenerator::testing::{assert_printer, object};

    #[test]
    fn serviceaccount_cells() {
        let cases = [
            (object(json!({"secrets": [{"name": "s1"}, {"name": "s2"}]})), vec![json!("x"), json!(2), json!("10s")]),
            (object(json!({})), vec![json!("x"), json!(0), json!("10s")]),
        ];
        assert_printer(&SERVICEACCOUNT_PRINTER, &cases, &[("Name", 0), ("Secrets", 0), ("Age", 0)]);
    }
}
