//! Mirrors how Go's printers read a typed object: a missing or mistyped field is its zero value
//! ("", 0, false, nil), so a printer never fails on an odd object.

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::duration::human_duration;

pub fn get<'a>(v: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(v, |cur, key| cur.get(key))
}

pub fn str_at<'a>(v: &'a Value, path: &[&str]) -> &'a str {
    get(v, path).and_then(Value::as_str).unwrap_or("")
}

pub fn int_at(v: &Value, path: &[&str]) -> i64 {
    get(v, path).and_then(Value::as_i64).unwrap_or(0)
}

pub fn bool_at(v: &Value, path: &[&str]) -> bool {
    get(v, path).and_then(Value::as_bool).unwrap_or(false)
}

pub fn arr_at<'a>(v: &'a Value, path: &[&str]) -> &'a [Value] {
    get(v, path)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

/// A field that is present as an object (a Go pointer that is not nil).
pub fn obj_at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a Value> {
    get(v, path).filter(|x| x.is_object())
}

pub fn obj_present(v: &Value, path: &[&str]) -> bool {
    get(v, path).is_some_and(|x| !x.is_null())
}

pub fn len_at(v: &Value, path: &[&str]) -> i64 {
    match get(v, path) {
        Some(Value::Object(m)) => m.len() as i64,
        Some(Value::Array(a)) => a.len() as i64,
        _ => 0,
    }
}

pub fn time_at(v: &Value, path: &[&str]) -> Option<DateTime<Utc>> {
    let s = str_at(v, path);
    DateTime::parse_from_rfc3339(s)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

pub fn name(obj: &Value) -> &str {
    str_at(obj, &["metadata", "name"])
}

/// Kubernetes' `translateTimestampSince`.
pub fn since(t: Option<DateTime<Utc>>, now: DateTime<Utc>) -> String {
    match t {
        Some(t) => human_duration(now - t),
        None => "<unknown>".to_string(),
    }
}

pub fn age(obj: &Value, now: DateTime<Utc>) -> String {
    since(time_at(obj, &["metadata", "creationTimestamp"]), now)
}

/// A workload's template as its `-o wide` columns show it: the containers' names and their
/// images, each comma-separated (Kubernetes' `layoutContainerCells`).
pub fn template_containers(template: &Value) -> (String, String) {
    let containers = arr_at(template, &["spec", "containers"]);
    let names: Vec<&str> = containers.iter().map(|c| str_at(c, &["name"])).collect();
    let images: Vec<&str> = containers.iter().map(|c| str_at(c, &["image"])).collect();
    (names.join(","), images.join(","))
}

/// metav1.FormatLabelSelector: a `LabelSelector` as kubectl prints it (`app=web,tier in (a,b)`),
/// `<none>` when it selects by nothing, `<error>` when it does not parse.
pub fn format_label_selector(selector: Option<&Value>) -> String {
    match apimachinery::labels::Selector::from_label_selector(selector.unwrap_or(&Value::Null)) {
        Ok(s) => {
            let text = s.to_string();
            if text.is_empty() { "<none>".to_string() } else { text }
        }
        Err(_) => "<error>".to_string(),
    }
}

/// An `int32` or a percentage (`IntOrString`) as printed: the number or the string; `N/A` unset.
pub fn int_or_string(v: Option<&Value>) -> Value {
    match v {
        Some(Value::Number(n)) => Value::Number(n.clone()),
        Some(Value::String(s)) => Value::String(s.clone()),
        _ => Value::String("N/A".to_string()),
    }
}
