//! Mirrors Kubernetes' pkg/printers/tablegenerator.go: a kind's `TableHandler` (its column
//! definitions and its print function, here the [`Printer`] interface) and the `metav1.Table` it
//! generates.

use chrono::{DateTime, Utc};
use serde_json::{Map, Value, json};

use super::fields::{age, name, time_at};

/// One `metav1.TableColumnDefinition`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Column {
    /// Title-cased as Kubernetes declares it ("Nominated Node"); kubectl upper-cases it for display.
    pub name: &'static str,
    /// An OpenAPI type: "string" | "integer" | "date".
    pub type_: &'static str,
    /// "name" for the column that holds the object's name, otherwise "".
    pub format: &'static str,
    pub description: &'static str,
    /// 0 = always shown; 1 = shown only with `-o wide`.
    pub priority: i32,
}

pub const NAME_DESCRIPTION: &str = "Name must be unique within a namespace.";
pub const AGE_DESCRIPTION: &str =
    "CreationTimestamp is a timestamp representing the server time when this object was created.";

pub const fn col(
    name: &'static str,
    type_: &'static str,
    description: &'static str,
    priority: i32,
) -> Column {
    Column {
        name,
        type_,
        format: "",
        description,
        priority,
    }
}

pub const fn name_col() -> Column {
    Column {
        name: "Name",
        type_: "string",
        format: "name",
        description: NAME_DESCRIPTION,
        priority: 0,
    }
}

pub const fn age_col() -> Column {
    col("Age", "string", AGE_DESCRIPTION, 0)
}

/// One kind's `TableHandler`: the columns `kubectl get` shows and the cells of one object's row.
/// Each resource's folder has its own (`printer.rs`), named by its `ResourceInfo`.
pub trait Printer: Send + Sync {
    /// The column definitions (Kubernetes' `AddHandlers`), wide (priority 1) ones included.
    fn columns(&self) -> Vec<Column>;

    /// The cells of one row, in the order of [`Printer::columns`], wide cells included.
    fn row(&self, obj: &Value, now: DateTime<Utc>) -> Vec<Value>;

    /// Row conditions (only pods have one: `Completed`).
    fn row_conditions(&self, _obj: &Value) -> Option<Value> {
        None
    }
}

/// NAME, one column of the kind's own, AGE: most kinds' table (printNamespace, printConfigMap,
/// printServiceAccount, printLease…).
pub struct OneColumnPrinter {
    pub column: Column,
    /// The column's cell for one object.
    pub cell: fn(&Value) -> Value,
}

impl Printer for OneColumnPrinter {
    fn columns(&self) -> Vec<Column> {
        vec![name_col(), self.column.clone(), age_col()]
    }

    fn row(&self, obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
        vec![name(obj).into(), (self.cell)(obj), age(obj, now).into()]
    }
}

/// NAME and AGE: what a kind without a printer of its own shows.
pub struct DefaultPrinter;

impl Printer for DefaultPrinter {
    fn columns(&self) -> Vec<Column> {
        vec![name_col(), age_col()]
    }

    fn row(&self, obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
        vec![name(obj).into(), age(obj, now).into()]
    }
}

/// k8s.io/apiserver's `rest.NewDefaultTableConvertor` (registry/rest/table.go): NAME and a
/// `date`-typed CREATED AT, the creation time in UTC as RFC 3339. What a kind whose storage names
/// no printer gets in Kubernetes: Roles and ClusterRoles (printers.go has no handler for them).
pub struct DefaultTableConvertor;

impl Printer for DefaultTableConvertor {
    fn columns(&self) -> Vec<Column> {
        vec![name_col(), col("Created At", "date", AGE_DESCRIPTION, 0)]
    }

    fn row(&self, obj: &Value, _now: DateTime<Utc>) -> Vec<Value> {
        // An unset time is Go's zero time, which formats as year 1.
        let created = time_at(obj, &["metadata", "creationTimestamp"])
            .map_or_else(|| "0001-01-01T00:00:00Z".to_string(), |t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true));
        vec![name(obj).into(), created.into()]
    }
}

/// The `metav1.Table` for a list of objects printed by `printer`. Each row's `object` is the object's metadata
/// as a `PartialObjectMetadata` (what `includeObject=Metadata`, kubectl's default, asks for): kubectl
/// reads labels (`--show-labels`, `-L`) and the namespace (`-A`) from it.
pub fn table(
    printer: &dyn Printer,
    objects: &[impl std::borrow::Borrow<Value>],
    resource_version: &str,
    continue_token: Option<&str>,
    now: DateTime<Utc>,
) -> Value {
    let mut metadata = Map::new();
    if !resource_version.is_empty() {
        metadata.insert("resourceVersion".into(), resource_version.into());
    }
    if let Some(token) = continue_token.filter(|t| !t.is_empty()) {
        metadata.insert("continue".into(), token.into());
    }
    let column_definitions: Vec<Value> = printer.columns()
        .iter()
        .map(|c| {
            json!({
                "name": c.name,
                "type": c.type_,
                "format": c.format,
                "description": c.description,
                "priority": c.priority,
            })
        })
        .collect();
    let rows: Vec<Value> = objects
        .iter()
        .map(|obj| {
            let obj: &Value = obj.borrow();
            let mut r = json!({
                "cells": printer.row(obj, now),
                "object": {
                    "kind": "PartialObjectMetadata",
                    "apiVersion": "meta.k8s.io/v1",
                    "metadata": obj.get("metadata").cloned().unwrap_or_else(|| json!({})),
                },
            });
            if let Some(conditions) = printer.row_conditions(obj) {
                r["conditions"] = conditions;
            }
            r
        })
        .collect();
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": metadata,
        "columnDefinitions": column_definitions,
        "rows": rows,
    })
}

/// The same Table as [`table`], encoded straight to JSON: each row's object metadata is borrowed
/// from the object rather than copied into a new tree (what makes a 10,000-row LIST affordable).
pub fn table_json(
    printer: &dyn Printer,
    objects: &[impl std::borrow::Borrow<Value>],
    resource_version: &str,
    continue_token: Option<&str>,
    now: DateTime<Utc>,
) -> Vec<u8> {
    #[derive(serde::Serialize)]
    struct PartialObject<'a> {
        kind: &'static str,
        #[serde(rename = "apiVersion")]
        api_version: &'static str,
        metadata: &'a Value,
    }
    #[derive(serde::Serialize)]
    struct Row<'a> {
        cells: Vec<Value>,
        object: PartialObject<'a>,
        #[serde(skip_serializing_if = "Option::is_none")]
        conditions: Option<Value>,
    }
    let empty = json!({});
    let rows: Vec<Row> = objects
        .iter()
        .map(|obj| {
            let obj: &Value = obj.borrow();
            Row {
                cells: printer.row(obj, now),
                object: PartialObject {
                    kind: "PartialObjectMetadata",
                    api_version: "meta.k8s.io/v1",
                    metadata: obj.get("metadata").unwrap_or(&empty),
                },
                conditions: printer.row_conditions(obj),
            }
        })
        .collect();
    // The envelope (metadata and columns) from `table` with no rows, then the rows spliced in.
    let mut out = serde_json::to_vec(&table(printer, &[] as &[Value], resource_version, continue_token, now)).unwrap_or_default();
    let tail = b"\"rows\":[]}";
    if out.ends_with(tail) {
        out.truncate(out.len() - tail.len());
        out.extend_from_slice(b"\"rows\":");
        let _ = serde_json::to_writer(&mut out, &rows);
        out.push(b'}');
    }
    out
}

/// What every printer's table tests share: a fixed clock and the columns in short.
#[cfg(test)]
pub mod testing {
    use chrono::{DateTime, Duration, Utc};

    use super::Printer;

    pub fn now() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-01-01T12:00:00Z")
            .map(|t| t.with_timezone(&Utc))
            .expect("valid time")
    }

    /// An RFC 3339 timestamp `secs` seconds before [`now`].
    pub fn ago(secs: i64) -> String {
        (now() - Duration::seconds(secs)).to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
    }

    /// Each column's name and priority.
    pub fn column_names(printer: &dyn Printer) -> Vec<(&'static str, i32)> {
        printer.columns().iter().map(|c| (c.name, c.priority)).collect()
    }

    /// The columns that carry the "name" format: exactly one in every kind.
    pub fn name_columns(printer: &dyn Printer) -> Vec<&'static str> {
        printer.columns().iter().filter(|c| c.format == "name").map(|c| c.name).collect()
    }

    /// An object named `x`, created ten seconds before [`now`], with `fields` besides.
    pub fn object(fields: serde_json::Value) -> serde_json::Value {
        let mut obj = serde_json::json!({"metadata": {"name": "x", "creationTimestamp": ago(10)}});
        if let (Some(obj), Some(fields)) = (obj.as_object_mut(), fields.as_object()) {
            obj.extend(fields.clone());
        }
        obj
    }

    /// Checks a printer against a table of (object, cells), and its columns (name, priority):
    /// every row has a cell per column, and exactly one column is the object's name.
    pub fn assert_printer(printer: &dyn Printer, cases: &[(serde_json::Value, Vec<serde_json::Value>)], columns: &[(&str, i32)]) {
        for (obj, want) in cases {
            assert_eq!(&printer.row(obj, now()), want, "{obj}");
            assert_eq!(printer.columns().len(), want.len(), "{obj}");
        }
        assert_eq!(column_names(printer), columns);
        assert_eq!(name_columns(printer), vec!["Name"]);
    }
}

#[cfg(test)]
mod tests {
    use super::testing::{ago, assert_printer};
    use super::*;

    #[test]
    fn kinds_without_a_printer_get_name_and_age() {
        let meta = json!({"name": "x", "creationTimestamp": ago(10)});
        // (kind, object, cells)
        let cases = vec![
            (
                "Deployment",
                json!({"metadata": meta}),
                vec![json!("x"), json!("10s")],
            ),
            (
                "Widget",
                json!({"metadata": {"name": "w"}}),
                vec![json!("w"), json!("<unknown>")],
            ),
            (
                "Widget",
                json!("not an object"),
                vec![json!(""), json!("<unknown>")],
            ),
        ];
        let cases: Vec<_> = cases.into_iter().map(|(_kind, obj, cells)| (obj, cells)).collect();
        assert_printer(&DefaultPrinter, &cases, &[("Name", 0), ("Age", 0)]);
    }

    #[test]
    fn the_default_table_convertor_prints_the_creation_time() {
        let cases = vec![
            (json!({"metadata": {"name": "view", "creationTimestamp": "2025-03-04T05:06:07+01:00"}}), vec![json!("view"), json!("2025-03-04T04:06:07Z")]),
            (json!({"metadata": {"name": "edit"}}), vec![json!("edit"), json!("0001-01-01T00:00:00Z")]),
        ];
        assert_printer(&DefaultTableConvertor, &cases, &[("Name", 0), ("Created At", 0)]);
        assert_eq!(DefaultTableConvertor.columns()[1].type_, "date");
    }
}
