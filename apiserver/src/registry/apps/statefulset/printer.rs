//! Mirrors printStatefulSet in pkg/printers/internalversion/printers.go: NAME, READY, AGE (and,
//! wide, the template's containers and images).

use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::printers::fields::{age, get, int_at, name};
use crate::printers::tablegenerator::{Column, Printer, age_col, col, name_col};
use crate::registry::apps::{wide_cells, workload_columns};

pub struct StatefulSetPrinter;

impl Printer for StatefulSetPrinter {
    fn columns(&self) -> Vec<Column> {
        workload_columns(
            vec![name_col(), col("Ready", "string", "Number of the pod with ready state", 0), age_col()],
            None,
        )
    }

    fn row(&self, obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
        wide_cells(
            vec![
                name(obj).into(),
                format!("{}/{}", int_at(obj, &["status", "readyReplicas"]), int_at(obj, &["spec", "replicas"])).into(),
                age(obj, now).into(),
            ],
            get(obj, &["spec"]),
            false,
        )
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::StatefulSetPrinter;
    use crate::printers::tablegenerator::testing::{assert_printer, object};

    #[test]
    fn stateful_set_cells() {
        let sts = object(json!({
            "spec": {"replicas": 3, "template": {"spec": {"containers": [{"name": "db", "image": "busybox:1.36"}]}}},
            "status": {"readyReplicas": 1}
        }));
        assert_printer(
            &StatefulSetPrinter,
            &[(sts, vec![json!("x"), json!("1/3"), json!("10s"), json!("db"), json!("busybox:1.36")])],
            &[("Name", 0), ("Ready", 0), ("Age", 0), ("Containers", 1), ("Images", 1)],
        );
    }
}
