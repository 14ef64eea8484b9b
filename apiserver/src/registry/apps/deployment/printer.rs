//! Mirrors printDeployment in pkg/printers/internalversion/printers.go: NAME, READY, UP-TO-DATE,
//! AVAILABLE, AGE (and, wide, the template's containers and images and the selector).

use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::printers::fields::{age, get, int_at, name};
use crate::printers::tablegenerator::{Column, Printer, age_col, col, name_col};
use crate::registry::apps::{wide_cells, workload_columns};

pub struct DeploymentPrinter;

impl Printer for DeploymentPrinter {
    fn columns(&self) -> Vec<Column> {
        workload_columns(
            vec![
                name_col(),
                col("Ready", "string", "Number of the pod with ready state", 0),
                col("Up-to-date", "string", "Total number of non-terminated pods targeted by this deployment that have the desired template spec.", 0),
                col("Available", "string", "Total number of available pods (ready for at least minReadySeconds) targeted by this deployment.", 0),
                age_col(),
            ],
            Some("Label selector for pods. Existing ReplicaSets whose pods are selected by this will be the ones affected by this deployment."),
        )
    }

    fn row(&self, obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
        wide_cells(
            vec![
                name(obj).into(),
                format!("{}/{}", int_at(obj, &["status", "readyReplicas"]), int_at(obj, &["spec", "replicas"])).into(),
                int_at(obj, &["status", "updatedReplicas"]).into(),
                int_at(obj, &["status", "availableReplicas"]).into(),
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

    use super::DeploymentPrinter;
    use crate::printers::tablegenerator::testing::{assert_printer, object};

    #[test]
    fn deployment_cells() {
        let deploy = object(json!({
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"spec": {"containers": [{"name": "web", "image": "nginx"}, {"name": "log", "image": "busybox"}]}}},
            "status": {"readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 2}
        }));
        let fresh = object(json!({"spec": {"replicas": 1, "selector": {}}}));
        assert_printer(
            &DeploymentPrinter,
            &[
                (deploy, vec![json!("x"), json!("2/3"), json!(3), json!(2), json!("10s"), json!("web,log"), json!("nginx,busybox"), json!("app=web")]),
                (fresh, vec![json!("x"), json!("0/1"), json!(0), json!(0), json!("10s"), json!(""), json!(""), json!("<none>")]),
            ],
            &[("Name", 0), ("Ready", 0), ("Up-to-date", 0), ("Available", 0), ("Age", 0), ("Containers", 1), ("Images", 1), ("Selector", 1)],
        );
    }
}
