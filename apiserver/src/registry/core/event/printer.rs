//! Mirrors printEvent in pkg/printers/internalversion/printers.go: LAST SEEN, TYPE, REASON,
//! OBJECT, MESSAGE (and, wide, SUBOBJECT, SOURCE, FIRST SEEN, COUNT, NAME).

use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::printers::fields::{int_at, name, obj_at, since, str_at, time_at};
use crate::printers::tablegenerator::{Column, Printer, col, name_col};

pub struct EventPrinter;

impl Printer for EventPrinter {
    fn columns(&self) -> Vec<Column> {
        vec![
            col("Last Seen", "string", "The time at which the most recent occurrence of this event was recorded.", 0),
            col("Type", "string", "Type of this event (Normal, Warning).", 0),
            col("Reason", "string", "A short, machine understandable string for why this event happened.", 0),
            col("Object", "string", "The object that this event is about.", 0),
            col("Subobject", "string", "The field path of the part of the object the event is about.", 1),
            col("Source", "string", "The component reporting this event.", 1),
            col("Message", "string", "A human-readable description of the status of this operation.", 0),
            col("First Seen", "string", "The time at which the event was first recorded.", 1),
            col("Count", "string", "The number of times this event has occurred.", 1),
            Column { priority: 1, ..name_col() },
        ]
    }

    fn row(&self, obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
        print_event(obj, now)
    }
}

fn print_event(event: &Value, now: DateTime<Utc>) -> Vec<Value> {
    // First seen: firstTimestamp, else the events.k8s.io eventTime. (Falling back further to the
    // creationTimestamp is ours: it keeps hand-made events from showing "<unknown>".)
    let first = time_at(event, &["firstTimestamp"])
        .or_else(|| time_at(event, &["eventTime"]))
        .or_else(|| time_at(event, &["metadata", "creationTimestamp"]));
    let mut last = time_at(event, &["lastTimestamp"]).or(first);
    let mut count = int_at(event, &["count"]);
    if obj_at(event, &["series"]).is_some() {
        last = time_at(event, &["series", "lastObservedTime"]);
        count = int_at(event, &["series", "count"]);
    } else if count == 0 {
        // Singleton events of the new API carry no count.
        count = 1;
    }
    let kind = str_at(event, &["involvedObject", "kind"]).to_lowercase();
    let involved_name = str_at(event, &["involvedObject", "name"]);
    let target = if involved_name.is_empty() {
        kind
    } else {
        format!("{kind}/{involved_name}")
    };
    let component = first_non_empty(
        str_at(event, &["source", "component"]),
        str_at(event, &["reportingComponent"]),
    );
    let instance = first_non_empty(
        str_at(event, &["source", "host"]),
        str_at(event, &["reportingInstance"]),
    );
    let source = if instance.is_empty() {
        component.to_string()
    } else {
        format!("{component}, {instance}")
    };
    vec![
        since(last, now).into(),
        str_at(event, &["type"]).into(),
        str_at(event, &["reason"]).into(),
        target.into(),
        str_at(event, &["involvedObject", "fieldPath"]).into(),
        source.into(),
        str_at(event, &["message"]).trim().into(),
        since(first, now).into(),
        count.into(),
        name(event).into(),
    ]
}

fn first_non_empty<'a>(a: &'a str, b: &'a str) -> &'a str {
    if a.is_empty() { b } else { a }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::printers::tablegenerator::testing::{ago, column_names, name_columns, now};

    #[test]
    fn event_cells_table() {
        let base = json!({
            "metadata": {"name": "web.123", "namespace": "default", "creationTimestamp": ago(900)},
            "involvedObject": {"kind": "Pod", "name": "web", "fieldPath": "spec.containers{app}"},
            "reason": "Pulled", "type": "Normal", "message": "  Pulled image  \n",
            "source": {"component": "kubelet", "host": "n1"},
        });
        let with = |patch: Value| {
            let mut e = base.clone();
            if let (Some(e), Some(p)) = (e.as_object_mut(), patch.as_object()) {
                for (k, v) in p {
                    e.insert(k.clone(), v.clone());
                }
            }
            e
        };
        // (case, event, LAST SEEN, FIRST SEEN, COUNT, OBJECT, SOURCE)
        let cases = vec![
            (
                "classic timestamps",
                with(json!({"firstTimestamp": ago(600), "lastTimestamp": ago(5), "count": 4})),
                "5s",
                "10m",
                4,
                "pod/web",
                "kubelet, n1",
            ),
            (
                "last falls back to first",
                with(json!({"firstTimestamp": ago(600)})),
                "10m",
                "10m",
                1,
                "pod/web",
                "kubelet, n1",
            ),
            (
                "eventTime only",
                with(
                    json!({"eventTime": "2026-01-01T11:59:30.123456Z", "source": {},
                    "reportingComponent": "kubelab-scheduler", "reportingInstance": "sched-1"}),
                ),
                "29s",
                "29s",
                1,
                "pod/web",
                "kubelab-scheduler, sched-1",
            ),
            (
                "creationTimestamp as last resort",
                base.clone(),
                "15m",
                "15m",
                1,
                "pod/web",
                "kubelet, n1",
            ),
            (
                "series overrides last seen and count",
                with(
                    json!({"eventTime": ago(3600), "series": {"count": 7, "lastObservedTime": ago(60)}}),
                ),
                "60s",
                "60m",
                7,
                "pod/web",
                "kubelet, n1",
            ),
            (
                "object without a name, source without host",
                with(
                    json!({"involvedObject": {"kind": "Node"}, "source": {"component": "kubelab"}, "lastTimestamp": ago(1)}),
                ),
                "1s",
                "15m",
                1,
                "node",
                "kubelab",
            ),
        ];
        for (case, e, last, first, count, object, source) in cases {
            let cells = EventPrinter.row(&e, now());
            assert_eq!(cells.len(), EventPrinter.columns().len(), "{case}");
            assert_eq!(cells[0], last, "{case}: LAST SEEN");
            assert_eq!(cells[3], object, "{case}: OBJECT");
            assert_eq!(cells[5], source, "{case}: SOURCE");
            assert_eq!(cells[7], first, "{case}: FIRST SEEN");
            assert_eq!(cells[8], count, "{case}: COUNT");
        }
        let cells = EventPrinter.row(&base, now());
        assert_eq!(cells[1], "Normal");
        assert_eq!(cells[2], "Pulled");
        assert_eq!(cells[4], "spec.containers{app}");
        assert_eq!(cells[6], "Pulled image");
        assert_eq!(cells[9], "web.123");
        let bare = json!({"metadata": {"name": "e"}});
        assert_eq!(EventPrinter.row(&bare, now())[0], "<unknown>");
    }

    #[test]
    fn columns_match_kubernetes() {
        assert_eq!(
            column_names(&EventPrinter),
            vec![
                ("Last Seen", 0),
                ("Type", 0),
                ("Reason", 0),
                ("Object", 0),
                ("Subobject", 1),
                ("Source", 1),
                ("Message", 0),
                ("First Seen", 1),
                ("Count", 1),
                ("Name", 1)
            ]
        );
        assert_eq!(name_columns(&EventPrinter), vec!["Name"]);
    }
}
