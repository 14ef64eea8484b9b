//! Mirrors the options of k8s.io/apimachinery/pkg/apis/meta/v1 (ListOptions, DeleteOptions) and
//! the continue token of k8s.io/apiserver/pkg/storage/continue.go: what a list, watch or delete
//! asks for, and where a paged list resumes.

use serde_json::{Value, json};

use crate::error::{Error, Result};

/// Options of a list or watch (metav1.ListOptions).
#[derive(Debug, Default, Clone)]
pub struct ListOptions {
    pub label_selector: Option<String>,
    pub field_selector: Option<String>,
    pub limit: i64,
    pub continue_token: Option<String>,
    pub resource_version: Option<String>,
    pub resource_version_match: Option<String>,
    pub watch: bool,
    pub allow_watch_bookmarks: bool,
    pub send_initial_events: bool,
    pub timeout_seconds: Option<u64>,
}

/// Options of a delete (metav1.DeleteOptions).
#[derive(Debug, Default, Clone)]
pub struct DeleteOptions {
    pub grace_period_seconds: Option<i64>,
    pub precondition_uid: Option<String>,
    pub precondition_resource_version: Option<String>,
    pub propagation_policy: Option<String>,
}

impl DeleteOptions {
    pub fn from_json(v: &Value) -> Self {
        Self {
            grace_period_seconds: v.get("gracePeriodSeconds").and_then(Value::as_i64),
            precondition_uid: v.pointer("/preconditions/uid").and_then(Value::as_str).map(String::from),
            precondition_resource_version: v.pointer("/preconditions/resourceVersion").and_then(Value::as_str).map(String::from),
            propagation_policy: v.get("propagationPolicy").and_then(Value::as_str).map(String::from),
        }
    }
}

/// A continue token: the list's revision and the key to resume at (Kubernetes' format).
pub fn encode_continue(rev: i64, start: &str) -> String {
    let raw = serde_json::to_vec(&json!({"v": "meta.k8s.io/v1", "rv": rev, "start": start})).unwrap_or_default();
    serde_json::to_value(k8s_openapi::ByteString(raw)).ok().and_then(|v| v.as_str().map(String::from)).unwrap_or_default()
}

pub fn decode_continue(token: &str) -> Result<(i64, String)> {
    let bad = || Error::BadRequest("continue key is not valid: illegal base64 data".into());
    let bytes: k8s_openapi::ByteString = serde_json::from_value(json!(token)).map_err(|_| bad())?;
    let v: Value = serde_json::from_slice(&bytes.0).map_err(|_| bad())?;
    let rev = v.get("rv").and_then(Value::as_i64).ok_or_else(bad)?;
    let start = v.get("start").and_then(Value::as_str).ok_or_else(bad)?.to_string();
    Ok((rev, start))
}
