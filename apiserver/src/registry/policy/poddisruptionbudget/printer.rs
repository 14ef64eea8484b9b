//! Mirrors printPodDisruptionBudget in pkg/printers/internalversion/printers.go: NAME, MIN
//! AVAILABLE, MAX UNAVAILABLE, ALLOWED DISRUPTIONS, AGE.

use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::printers::fields::{age, get, int_at, int_or_string, name};
use crate::printers::tablegenerator::{Column, Printer, age_col, col, name_col};

pub struct PodDisruptionBudgetPrinter;

impl Printer for PodDisruptionBudgetPrinter {
    fn columns(&self) -> Vec<Column> {
        vec![
            name_col(),
            col("Min Available", "string", "The minimum number of pods that must be available.", 0),
            col("Max Unavailable", "string", "The maximum number of pods that may be unavailable.", 0),
            col("Allowed Disruptions", "integer", "Calculated number of pods that may be disrupted at this time.", 0),
            age_col(),
        ]
    }

    fn row(&self, obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
        vec![
            name(obj).into(),
            int_or_string(get(obj, &["spec", "minAvailable"])),
            int_or_string(get(obj, &["spec", "maxUnavailable"])),
            int_at(obj, &["status", "disruptionsAllowed"]).into(),
            age(obj, now).into(),
        ]
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::PodDisruptionBudgetPrinter;
    use crate::printers::tablegenerator::testing::{assert_printer, object};

    #[test]
    fn pdb_cells() {
        let min = object(json!({"spec": {"minAvailable": 2}, "status": {"disruptionsAllowed": 1}}));
        let max = object(json!({"spec": {"maxUnavailable": "25%"}}));
        assert_printer(
            &PodDisruptionBudgetPrinter,
            &[
                (min, vec![json!("x"), json!(2), json!("N/A"), json!(1), json!("10s")]),
                (max, vec![json!("x"), json!("N/A"), json!("25%"), json!(0), json!("10s")]),
            ],
            &[("Name", 0), ("Min Available", 0), ("Max Unavailable", 0), ("Allowed Disruptions", 0), ("Age", 0)],
        );
    }
}
