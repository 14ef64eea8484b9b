//! Mirrors printJob in pkg/printers/internalversion/printers.go: NAME, STATUS, COMPLETIONS,
//! DURATION, AGE (and, wide, the template's containers and images and the selector).

use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::printers::duration::human_duration;
use crate::printers::fields::{age, arr_at, get, int_at, name, obj_present, str_at, time_at};
use crate::printers::tablegenerator::{Column, Printer, age_col, col, name_col};
use crate::registry::apps::{wide_cells, workload_columns};

pub struct JobPrinter;

impl Printer for JobPrinter {
    fn columns(&self) -> Vec<Column> {
        workload_columns(
            vec![
                name_col(),
                col("Status", "string", "Status of the job.", 0),
                col("Completions", "string", "The number of pods which reached phase Succeeded.", 0),
                col("Duration", "string", "Time required to complete the job.", 0),
                age_col(),
            ],
            Some("A label query over pods that should match the pod count."),
        )
    }

    fn row(&self, obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
        wide_cells(
            vec![
                name(obj).into(),
                job_status(obj).into(),
                completions(obj).into(),
                duration(obj, now).into(),
                age(obj, now).into(),
            ],
            get(obj, &["spec"]),
            true,
        )
    }
}

/// `succeeded/completions`; without completions, `succeeded/1` (`of <parallelism>` when more than
/// one pod runs at once: any one succeeding completes the job).
fn completions(job: &Value) -> String {
    let succeeded = int_at(job, &["status", "succeeded"]);
    if obj_present(job, &["spec", "completions"]) {
        return format!("{succeeded}/{}", int_at(job, &["spec", "completions"]));
    }
    match int_at(job, &["spec", "parallelism"]) {
        p if p > 1 => format!("{succeeded}/1 of {p}"),
        _ => format!("{succeeded}/1"),
    }
}

/// From the start to the completion, or to now while it runs; empty before it starts.
fn duration(job: &Value, now: DateTime<Utc>) -> String {
    match (time_at(job, &["status", "startTime"]), time_at(job, &["status", "completionTime"])) {
        (None, _) => String::new(),
        (Some(start), None) => human_duration(now - start),
        (Some(start), Some(end)) => human_duration(end - start),
    }
}

/// The first that holds: Complete, Failed, Terminating (being deleted), Suspended,
/// FailureTarget, SuccessCriteriaMet, else Running.
fn job_status(job: &Value) -> &'static str {
    let has = |t: &str| arr_at(job, &["status", "conditions"]).iter().any(|c| str_at(c, &["type"]) == t && str_at(c, &["status"]) == "True");
    if has("Complete") {
        "Complete"
    } else if has("Failed") {
        "Failed"
    } else if obj_present(job, &["metadata", "deletionTimestamp"]) {
        "Terminating"
    } else if has("Suspended") {
        "Suspended"
    } else if has("FailureTarget") {
        "FailureTarget"
    } else if has("SuccessCriteriaMet") {
        "SuccessCriteriaMet"
    } else {
        "Running"
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::JobPrinter;
    use crate::printers::tablegenerator::testing::{ago, assert_printer, object};

    #[test]
    fn job_cells() {
        let selector = json!({"matchLabels": {"batch.kubernetes.io/controller-uid": "u1"}});
        let template = json!({"spec": {"containers": [{"name": "pi", "image": "busybox"}]}});
        let done = object(json!({
            "spec": {"completions": 3, "parallelism": 1, "selector": selector, "template": template},
            "status": {"succeeded": 3, "startTime": ago(100), "completionTime": ago(40), "conditions": [{"type": "Complete", "status": "True"}]}
        }));
        let running = object(json!({"spec": {"parallelism": 2, "selector": selector, "template": template}, "status": {"startTime": ago(5), "active": 2}}));
        let failed = object(json!({"spec": {"completions": 1, "selector": selector}, "status": {"startTime": ago(30), "failed": 7, "conditions": [{"type": "Failed", "status": "True"}]}}));
        let new = object(json!({"spec": {"selector": selector}}));
        let wide = |c: &str, i: &str| [json!(c), json!(i), json!("batch.kubernetes.io/controller-uid=u1")];
        let row = |status: &str, completions: &str, duration: &str, w: [serde_json::Value; 3]| {
            let mut r = vec![json!("x"), json!(status), json!(completions), json!(duration), json!("10s")];
            r.extend(w);
            r
        };
        assert_printer(
            &JobPrinter,
            &[
                (done, row("Complete", "3/3", "60s", wide("pi", "busybox"))),
                (running, row("Running", "0/1 of 2", "5s", wide("pi", "busybox"))),
                (failed, row("Failed", "0/1", "30s", wide("", ""))),
                (new, row("Running", "0/1", "", wide("", ""))),
            ],
            &[("Name", 0), ("Status", 0), ("Completions", 0), ("Duration", 0), ("Age", 0), ("Containers", 1), ("Images", 1), ("Selector", 1)],
        );
    }
}
