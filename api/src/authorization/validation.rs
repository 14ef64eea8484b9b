//! Mirrors pkg/apis/authorization/validation/validation.go: what makes a SubjectAccessReview,
//! SelfSubjectAccessReview or LocalSubjectAccessReview a question that can be answered. The spec
//! asks about exactly one of a resource (`resourceAttributes`) or a path
//! (`nonResourceAttributes`); a review of someone else names a user or a group; the metadata
//! is empty (a review has no name: nothing is stored), but for a LocalSubjectAccessReview's
//! namespace, which must be the one its resource attributes ask about.
//!
//! A value that Go prints as a struct is printed as Go's `%#v` prints it
//! (`authorization.NonResourceAttributes{Path:"/healthz", Verb:"get"}`), since kubectl shows the
//! message verbatim; but non-empty metadata is printed as its JSON (Go prints the whole
//! `v1.ObjectMeta` struct, every zero field included).

use apimachinery::validation::FieldError;
use serde_json::{Value, json};

/// `ValidateSubjectAccessReview`.
pub fn validate_subject_access_review(obj: &Value) -> Vec<FieldError> {
    let mut errs = validate_spec(obj.get("spec").unwrap_or(&Value::Null), true);
    errs.extend(validate_empty_metadata(obj, false));
    errs
}

/// `ValidateSelfSubjectAccessReview`: no user or group, the request's own user is asked about.
pub fn validate_self_subject_access_review(obj: &Value) -> Vec<FieldError> {
    let mut errs = validate_spec(obj.get("spec").unwrap_or(&Value::Null), false);
    errs.extend(validate_empty_metadata(obj, false));
    errs
}

/// `ValidateLocalSubjectAccessReview`: a SubjectAccessReview about one namespace, its own.
pub fn validate_local_subject_access_review(obj: &Value) -> Vec<FieldError> {
    let spec = obj.get("spec").unwrap_or(&Value::Null);
    let mut errs = validate_spec(spec, true);
    errs.extend(validate_empty_metadata(obj, true));
    let namespace = obj.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or("");
    if let Some(attributes) = present(spec, "resourceAttributes") {
        let asked = attributes.get("namespace").and_then(Value::as_str).unwrap_or("");
        if asked != namespace {
            errs.push(FieldError::invalid("spec.resourceAttributes.namespace", &json!(asked), "must match metadata.namespace"));
        }
    }
    if let Some(attributes) = present(spec, "nonResourceAttributes") {
        errs.push(FieldError::invalid_shown("spec.nonResourceAttributes", &go_non_resource(attributes), "disallowed on this kind of request"));
    }
    errs
}

/// `ValidateSubjectAccessReviewSpec` (with `who`) and `ValidateSelfSubjectAccessReviewSpec`.
fn validate_spec(spec: &Value, who: bool) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let resource = present(spec, "resourceAttributes");
    let non_resource = present(spec, "nonResourceAttributes");
    match (resource, non_resource) {
        (Some(_), Some(n)) => errs.push(FieldError::invalid_shown("spec.nonResourceAttributes", &go_non_resource(n), "cannot be specified in combination with resourceAttributes")),
        (None, None) => errs.push(FieldError::invalid("spec.resourceAttributes", &json!("null"), "exactly one of nonResourceAttributes or resourceAttributes must be specified")),
        _ => {}
    }
    if who {
        let user = spec.get("user").and_then(Value::as_str).unwrap_or("");
        let no_groups = spec.get("groups").and_then(Value::as_array).is_none_or(Vec::is_empty);
        if user.is_empty() && no_groups {
            errs.push(FieldError::invalid("spec.user", &json!(user), "at least one of user or group must be specified"));
        }
    }
    errs
}

/// The object at `spec.<field>` if the client sent one (Go's non-nil pointer).
fn present<'a>(spec: &'a Value, field: &str) -> Option<&'a Value> {
    spec.get(field).filter(|v| v.is_object())
}

/// How Go's `%#v` prints NonResourceAttributes (field.Error prints what a pointer points to).
fn go_non_resource(attributes: &Value) -> String {
    let s = |k: &str| json!(attributes.get(k).and_then(Value::as_str).unwrap_or("")).to_string();
    format!("authorization.NonResourceAttributes{{Path:{}, Verb:{}}}", s("path"), s("verb"))
}

/// Metadata must be empty but for managedFields (and, for a LocalSubjectAccessReview, the
/// namespace). Empty as Go sees it: a field with its zero value (`creationTimestamp: null`,
/// which kubectl sends) is absent.
fn validate_empty_metadata(obj: &Value, but_namespace: bool) -> Vec<FieldError> {
    let Some(meta) = obj.get("metadata").and_then(Value::as_object) else { return Vec::new() };
    let set = meta.iter().any(|(k, v)| k != "managedFields" && !(but_namespace && k == "namespace") && !is_zero(v));
    if !set {
        return Vec::new();
    }
    let detail = if but_namespace { "must be empty except for namespace" } else { "must be empty" };
    vec![FieldError::invalid("metadata", &Value::Object(meta.clone()), detail)]
}

fn is_zero(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::Bool(b) => !b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn messages(errs: Vec<FieldError>) -> Vec<String> {
        errs.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn a_review_asks_exactly_one_question() {
        let ok = json!({"metadata": {"creationTimestamp": null}, "spec": {"resourceAttributes": {"verb": "get", "resource": "pods"}}});
        assert!(validate_self_subject_access_review(&ok).is_empty(), "kubectl's empty metadata is empty");
        assert_eq!(
            messages(validate_self_subject_access_review(&json!({"spec": {}}))),
            vec![r#"spec.resourceAttributes: Invalid value: "null": exactly one of nonResourceAttributes or resourceAttributes must be specified"#]
        );
        let both = json!({"spec": {"resourceAttributes": {"verb": "get"}, "nonResourceAttributes": {"path": "/healthz", "verb": "get"}}});
        assert_eq!(
            messages(validate_self_subject_access_review(&both)),
            vec![r#"spec.nonResourceAttributes: Invalid value: authorization.NonResourceAttributes{Path:"/healthz", Verb:"get"}: cannot be specified in combination with resourceAttributes"#]
        );
        let named = json!({"metadata": {"name": "x"}, "spec": {"nonResourceAttributes": {"path": "/healthz", "verb": "get"}}});
        assert_eq!(messages(validate_self_subject_access_review(&named)), vec![r#"metadata: Invalid value: {"name":"x"}: must be empty"#]);
    }

    #[test]
    fn a_review_of_someone_else_names_them() {
        let nobody = json!({"spec": {"resourceAttributes": {"verb": "get"}}});
        assert_eq!(messages(validate_subject_access_review(&nobody)), vec![r#"spec.user: Invalid value: "": at least one of user or group must be specified"#]);
        assert!(validate_subject_access_review(&json!({"spec": {"resourceAttributes": {"verb": "get"}, "groups": ["devs"]}})).is_empty());
    }

    #[test]
    fn a_local_review_stays_in_its_namespace() {
        let ok = json!({"metadata": {"namespace": "team"}, "spec": {"user": "jane", "resourceAttributes": {"namespace": "team", "verb": "get"}}});
        assert!(validate_local_subject_access_review(&ok).is_empty());
        let other = json!({"metadata": {"namespace": "team"}, "spec": {"user": "jane", "resourceAttributes": {"namespace": "prod", "verb": "get"}}});
        assert_eq!(messages(validate_local_subject_access_review(&other)), vec![r#"spec.resourceAttributes.namespace: Invalid value: "prod": must match metadata.namespace"#]);
        let path = json!({"metadata": {"namespace": "team", "labels": {"a": "b"}}, "spec": {"user": "jane", "nonResourceAttributes": {"path": "/x", "verb": "get"}}});
        assert_eq!(
            messages(validate_local_subject_access_review(&path)),
            vec![
                r#"metadata: Invalid value: {"labels":{"a":"b"},"namespace":"team"}: must be empty except for namespace"#.to_string(),
                r#"spec.nonResourceAttributes: Invalid value: authorization.NonResourceAttributes{Path:"/x", Verb:"get"}: disallowed on this kind of request"#.to_string(),
            ]
        );
    }
}
