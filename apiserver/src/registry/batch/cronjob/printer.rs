//! Mirrors printCronJob in pkg/printers/internalversion/printers.go: NAME, SCHEDULE, TIMEZONE,
//! SUSPEND, ACTIVE, LAST SCHEDULE, AGE (and, wide, the job template's containers, images and
//! selector).

use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::printers::fields::{age, get, len_at, name, since, str_at, time_at};
use crate::printers::tablegenerator::{Column, Printer, age_col, col, name_col};
use crate::registry::apps::{wide_cells, workload_columns};

pub struct CronJobPrinter;

impl Printer for CronJobPrinter {
    fn columns(&self) -> Vec<Column> {
        workload_columns(
            vec![
                name_col(),
                col("Schedule", "string", "The schedule in Cron format, see https://en.wikipedia.org/wiki/Cron.", 0),
                col("Timezone", "string", "The time zone name for the given schedule, see https://en.wikipedia.org/wiki/List_of_tz_database_time_zones.", 0),
                col("Suspend", "boolean", "This flag tells the controller to suspend subsequent executions, it does not apply to already started executions.", 0),
                col("Active", "integer", "A list of pointers to currently running jobs.", 0),
                col("Last Schedule", "string", "Information when was the last time the job was successfully scheduled.", 0),
                age_col(),
            ],
            Some("A label query over pods that should match the pod count."),
        )
    }

    fn row(&self, obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
        let time_zone = match str_at(obj, &["spec", "timeZone"]) {
            "" if get(obj, &["spec", "timeZone"]).is_none_or(Value::is_null) => "<none>",
            tz => tz,
        };
        let suspend = match get(obj, &["spec", "suspend"]).and_then(Value::as_bool) {
            Some(true) => "True",
            Some(false) => "False",
            None => "<unset>",
        };
        let last_schedule = match time_at(obj, &["status", "lastScheduleTime"]) {
            Some(t) => since(Some(t), now),
            None => "<none>".to_string(),
        };
        wide_cells(
            vec![
                name(obj).into(),
                str_at(obj, &["spec", "schedule"]).into(),
                time_zone.into(),
                suspend.into(),
                len_at(obj, &["status", "active"]).into(),
                last_schedule.into(),
                age(obj, now).into(),
            ],
            get(obj, &["spec", "jobTemplate", "spec"]),
            true,
        )
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::CronJobPrinter;
    use crate::printers::tablegenerator::testing::{ago, assert_printer, object};

    #[test]
    fn cron_job_cells() {
        let cj = object(json!({
            "spec": {"schedule": "*/1 * * * *", "timeZone": "Etc/UTC", "suspend": false,
                     "jobTemplate": {"spec": {"template": {"spec": {"containers": [{"name": "hello", "image": "busybox"}]}}}}},
            "status": {"active": [{"name": "hello-1"}], "lastScheduleTime": ago(30)}
        }));
        let bare = object(json!({"spec": {"schedule": "@hourly"}}));
        assert_printer(
            &CronJobPrinter,
            &[
                (cj, vec![json!("x"), json!("*/1 * * * *"), json!("Etc/UTC"), json!("False"), json!(1), json!("30s"), json!("10s"), json!("hello"), json!("busybox"), json!("<none>")]),
                (bare, vec![json!("x"), json!("@hourly"), json!("<none>"), json!("<unset>"), json!(0), json!("<none>"), json!("10s"), json!(""), json!(""), json!("<none>")]),
            ],
            &[("Name", 0), ("Schedule", 0), ("Timezone", 0), ("Suspend", 0), ("Active", 0), ("Last Schedule", 0), ("Age", 0), ("Containers", 1), ("Images", 1), ("Selector", 1)],
        );
    }
}
