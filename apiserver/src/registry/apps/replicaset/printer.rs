//! Mirrors printReplicaSet in pkg/printers/internalversion/printers.go: NAME, DESIRED, CURRENT,
//! READY, AGE (and, wide, the template's containers and images and the selector).

use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::printers::fields::{age, get, int_at, name};
use crate::printers::tablegenerator::{Column, Printer, age_col, col, name_col};
use crate::registry::apps::{wide_cells, workload_columns};

pub struct ReplicaSetPrinter;

impl Printer for ReplicaSetPrinter {
    fn columns(&self) -> Vec<Column> {
        workload_columns(
            vec![
                name_col(),
                col("Desired", "integer", "Replicas is the number of desired pods.", 0),
                col("Current", "integer", "Replicas is the most recently observed number of non-terminating pods.", 0),
                col("Ready", "integer", "The number of non-terminating pods targeted by this ReplicaSet with a Ready Condition.", 0),
                age_col(),
            ],
            Some("Selector is a label query over pods that should match the replica count."),
        )
    }

    fn row(&self, obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
        wide_cells(
            vec![
                name(obj).into(),
                int_at(obj, &["spec", "replicas"]).into(),
                int_at(obj, &["status", "replicas"]).into(),
                int_at(obj, &["status", "readyReplicas"]).into(),
                age(obj, now).into(),
            ],
            get(obj, &["spec"]),
            true,
        )
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::ReplicaSetPrinter;
    use crate::printers::tablegenerator::testing::{assert_printer, object};

    #[test]
    fn replica_set_cells() {
        let rs = object(json!({
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web", "pod-template-hash": "7d4b9"}},
                     "template": {"spec": {"containers": [{"name": "web", "image": "nginx"}]}}},
            "status": {"replicas": 3, "readyReplicas": 1}
        }));
        assert_printer(
            &ReplicaSetPrinter,
            &[(rs, vec![json!("x"), json!(3), json!(3), json!(1), json!("10s"), json!("web"), json!("nginx"), json!("app=web,pod-template-hash=7d4b9")])],
            &[("Name", 0), ("Desired", 0), ("Current", 0), ("Ready", 0), ("Age", 0), ("Containers", 1), ("Images", 1), ("Selector", 1)],
        );
    }
}
