//! Mirrors printDaemonSet in pkg/printers/internalversion/printers.go: NAME, DESIRED, CURRENT,
//! READY, UP-TO-DATE, AVAILABLE, NODE SELECTOR, AGE (and, wide, the template's containers and
//! images and the selector).

use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::printers::fields::{age, get, int_at, name};
use crate::printers::tablegenerator::{Column, Printer, age_col, col, name_col};
use crate::registry::apps::{wide_cells, workload_columns};

pub struct DaemonSetPrinter;

impl Printer for DaemonSetPrinter {
    fn columns(&self) -> Vec<Column> {
        workload_columns(
            vec![
                name_col(),
                col("Desired", "integer", "The total number of nodes that should be running the daemon pod (including nodes correctly running the daemon pod).", 0),
                col("Current", "integer", "The number of nodes that are running at least 1 daemon pod and are supposed to run the daemon pod.", 0),
                col("Ready", "integer", "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running with a Ready Condition.", 0),
                col("Up-to-date", "integer", "The total number of nodes that are running updated daemon pod", 0),
                col("Available", "integer", "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and available (ready for at least spec.minReadySeconds)", 0),
                col("Node Selector", "string", "NodeSelector is a selector which must be true for the pod to fit on a node.", 0),
                age_col(),
            ],
            Some("A label query over pods that are managed by the daemon set."),
        )
    }

    fn row(&self, obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
        let template = get(obj, &["spec", "template"]).unwrap_or(&Value::Null);
        wide_cells(
            vec![
                name(obj).into(),
                int_at(obj, &["status", "desiredNumberScheduled"]).into(),
                int_at(obj, &["status", "currentNumberScheduled"]).into(),
                int_at(obj, &["status", "numberReady"]).into(),
                int_at(obj, &["status", "updatedNumberScheduled"]).into(),
                int_at(obj, &["status", "numberAvailable"]).into(),
                format_labels(get(template, &["spec", "nodeSelector"])).into(),
                age(obj, now).into(),
            ],
            get(obj, &["spec"]),
            true,
        )
    }
}

/// labels.FormatLabels: `k=v` pairs sorted by key, comma-separated; `<none>` for none.
fn format_labels(map: Option<&Value>) -> String {
    let mut pairs: Vec<String> =
        map.and_then(Value::as_object).into_iter().flatten().map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or(""))).collect();
    pairs.sort();
    if pairs.is_empty() { "<none>".to_string() } else { pairs.join(",") }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::DaemonSetPrinter;
    use crate::printers::tablegenerator::testing::{assert_printer, object};

    #[test]
    fn daemon_set_cells() {
        let ds = object(json!({
            "spec": {"selector": {"matchLabels": {"app": "agent"}},
                     "template": {"spec": {"nodeSelector": {"kubernetes.io/os": "linux", "disk": "ssd"},
                                           "containers": [{"name": "agent", "image": "busybox"}]}}},
            "status": {"desiredNumberScheduled": 3, "currentNumberScheduled": 3, "numberReady": 2, "updatedNumberScheduled": 3, "numberAvailable": 2}
        }));
        let bare = object(json!({"spec": {"selector": {"matchLabels": {"app": "a"}}}}));
        assert_printer(
            &DaemonSetPrinter,
            &[
                (ds, vec![json!("x"), json!(3), json!(3), json!(2), json!(3), json!(2), json!("disk=ssd,kubernetes.io/os=linux"), json!("10s"), json!("agent"), json!("busybox"), json!("app=agent")]),
                (bare, vec![json!("x"), json!(0), json!(0), json!(0), json!(0), json!(0), json!("<none>"), json!("10s"), json!(""), json!(""), json!("app=a")]),
            ],
            &[("Name", 0), ("Desired", 0), ("Current", 0), ("Ready", 0), ("Up-to-date", 0), ("Available", 0), ("Node Selector", 0), ("Age", 0), ("Containers", 1), ("Images", 1), ("Selector", 1)],
        );
    }
}
