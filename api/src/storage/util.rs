//! Mirrors pkg/apis/storage/util/helpers.go: which StorageClass is the cluster's default.

use serde_json::Value;

/// The annotation that makes a StorageClass the default for claims that name none.
pub const IS_DEFAULT_STORAGE_CLASS_ANNOTATION: &str = "storageclass.kubernetes.io/is-default-class";
/// Its beta spelling, still honoured.
pub const BETA_IS_DEFAULT_STORAGE_CLASS_ANNOTATION: &str = "storageclass.beta.kubernetes.io/is-default-class";

/// IsDefaultAnnotation: either annotation is exactly `"true"`.
pub fn is_default_annotation(class: &Value) -> bool {
    let annotations = class.pointer("/metadata/annotations");
    [IS_DEFAULT_STORAGE_CLASS_ANNOTATION, BETA_IS_DEFAULT_STORAGE_CLASS_ANNOTATION]
        .iter()
        .any(|key| annotations.and_then(|a| a.get(*key)).and_then(Value::as_str) == Some("true"))
}

/// GetDefaultClass: of `classes`, those annotated default; when several are, the newest
/// (`creationTimestamp`, then the name, so the choice is stable) — a cluster being moved to a new
/// default keeps working while both are marked. `None` when no class is the default.
pub fn get_default_class<'a>(classes: impl IntoIterator<Item = &'a Value>) -> Option<&'a Value> {
    let created = |c: &Value| c.pointer("/metadata/creationTimestamp").and_then(Value::as_str).unwrap_or("").to_string();
    let name = |c: &Value| c.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("").to_string();
    // RFC 3339 in UTC with second precision (what the API server writes) sorts as text.
    classes.into_iter().filter(|c| is_default_annotation(c)).min_by(|a, b| created(b).cmp(&created(a)).then_with(|| name(a).cmp(&name(b))))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn class(name: &str, created: &str, default: Option<&str>) -> Value {
        let mut c = json!({"metadata": {"name": name, "creationTimestamp": created}});
        if let Some(v) = default {
            c["metadata"]["annotations"] = json!({IS_DEFAULT_STORAGE_CLASS_ANNOTATION: v});
        }
        c
    }

    #[test]
    fn default_class_table() {
        let old = class("old", "2026-01-01T00:00:00Z", Some("true"));
        let new = class("new", "2026-02-01T00:00:00Z", Some("true"));
        let twin = class("a-twin", "2026-02-01T00:00:00Z", Some("true"));
        let plain = class("plain", "2026-03-01T00:00:00Z", None);
        let no = class("no", "2026-03-01T00:00:00Z", Some("false"));
        let beta = json!({"metadata": {"name": "beta", "annotations": {BETA_IS_DEFAULT_STORAGE_CLASS_ANNOTATION: "true"}}});
        let name = |c: Option<&Value>| c.map(|c| c["metadata"]["name"].as_str().unwrap_or_default().to_string());
        let cases: Vec<(Vec<&Value>, Option<&str>)> = vec![
            (vec![], None),
            (vec![&plain, &no], None),
            (vec![&old, &plain], Some("old")),
            (vec![&old, &new], Some("new")),
            (vec![&new, &twin, &old], Some("a-twin")),
            (vec![&beta], Some("beta")),
        ];
        for (classes, want) in cases {
            assert_eq!(name(get_default_class(classes.iter().copied())).as_deref(), want);
        }
    }
}
