//! Mirrors the `ScaleREST` of pkg/registry/apps/{deployment,replicaset,statefulset}/storage/
//! storage.go (one and the same for the three): `<resource>/<name>/scale`, the object seen as an
//! `autoscaling/v1` Scale — what `kubectl scale` reads and writes, and what an autoscaler would.
//!
//! - GET answers the Scale: `spec.replicas` the object's, `status.replicas` what its controller
//!   last counted, `status.selector` its selector as a string.
//! - PUT and PATCH change the Scale; its `spec.replicas` is written into the object's, which is
//!   then updated as any update of the object is (its validation, a new generation). A
//!   `resourceVersion` in the Scale is the object's and must be current (409 otherwise).

use k8s_openapi::api::autoscaling::v1::{Scale, ScaleSpec, ScaleStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::{Value, json};

use crate::error::{Cause, Error, Result};
use crate::printers::fields::format_label_selector;
use crate::registry::generic::rest::View;

/// The scale subresource of a workload.
pub const SCALE: View = View { kind: "Scale", api_version: "autoscaling/v1", get: to_scale, update: apply_scale };

/// The object as a Scale (scaleFromDeployment and its siblings).
pub fn to_scale(obj: &Value) -> Result<Value> {
    let meta = |field: &str| obj.pointer(&format!("/metadata/{field}")).and_then(Value::as_str).map(String::from);
    let int = |path: &str| obj.pointer(path).and_then(Value::as_i64).and_then(|n| i32::try_from(n).ok());
    let selector = format_label_selector(obj.pointer("/spec/selector"));
    let scale = Scale {
        metadata: ObjectMeta {
            name: meta("name"),
            namespace: meta("namespace"),
            uid: meta("uid"),
            resource_version: meta("resourceVersion"),
            creation_timestamp: serde_json::from_value(obj.pointer("/metadata/creationTimestamp").cloned().unwrap_or(Value::Null)).ok(),
            ..ObjectMeta::default()
        },
        // Go's omitempty: zero replicas are not written.
        spec: Some(ScaleSpec { replicas: int("/spec/replicas").filter(|n| *n != 0) }),
        status: Some(ScaleStatus { replicas: int("/status/replicas").unwrap_or(0), selector: (selector != "<none>").then_some(selector) }),
    };
    let mut v = serde_json::to_value(&scale).map_err(|e| Error::Internal(format!("encoding a Scale: {e}")))?;
    v["kind"] = json!("Scale");
    v["apiVersion"] = json!("autoscaling/v1");
    Ok(v)
}

/// The object with the Scale's replicas (ValidateScale first: replicas must not be negative).
pub fn apply_scale(obj: &Value, scale: &Value) -> Result<Value> {
    let name = obj.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("");
    let replicas = match scale.pointer("/spec/replicas") {
        None | Some(Value::Null) => 0,
        Some(v) => v.as_i64().filter(|n| i32::try_from(*n).is_ok()).ok_or_else(|| {
            Error::BadRequest(format!("Scale in version \"v1\" cannot be handled as a Scale: spec.replicas must be an integer, got {v}"))
        })?,
    };
    if replicas < 0 {
        return Err(Error::Invalid {
            kind: "Scale".into(),
            kind_singular: "Scale.autoscaling".into(),
            name: name.into(),
            causes: vec![Cause { reason: "FieldValueInvalid".into(), field: "spec.replicas".into(), message: format!("Invalid value: {replicas}: must be greater than or equal to 0") }],
        });
    }
    let mut new = obj.clone();
    new["spec"]["replicas"] = json!(replicas);
    match scale.pointer("/metadata/resourceVersion").and_then(Value::as_str).filter(|rv| !rv.is_empty()) {
        Some(rv) => new["metadata"]["resourceVersion"] = json!(rv),
        None => {
            if let Some(meta) = new.get_mut("metadata").and_then(Value::as_object_mut) {
                meta.remove("resourceVersion");
            }
        }
    }
    Ok(new)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deployment() -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
               "metadata": {"name": "web", "namespace": "d", "uid": "u1", "resourceVersion": "7", "creationTimestamp": "2026-01-01T00:00:00Z"},
               "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}}},
               "status": {"replicas": 2}})
    }

    #[test]
    fn a_workload_as_a_scale() {
        let scale = to_scale(&deployment()).expect("scale");
        assert_eq!(
            scale,
            json!({"kind": "Scale", "apiVersion": "autoscaling/v1",
                   "metadata": {"name": "web", "namespace": "d", "uid": "u1", "resourceVersion": "7", "creationTimestamp": "2026-01-01T00:00:00Z"},
                   "spec": {"replicas": 3}, "status": {"replicas": 2, "selector": "app=web"}})
        );
        let mut zero = deployment();
        zero["spec"]["replicas"] = json!(0);
        assert_eq!(to_scale(&zero).expect("scale")["spec"], json!({}));
    }

    #[test]
    fn a_scale_written_back() {
        let new = apply_scale(&deployment(), &json!({"spec": {"replicas": 5}, "metadata": {"resourceVersion": "7"}})).expect("applied");
        assert_eq!(new["spec"]["replicas"], json!(5));
        assert_eq!(new["metadata"]["resourceVersion"], json!("7"));
        let unpinned = apply_scale(&deployment(), &json!({"spec": {"replicas": 0}})).expect("applied");
        assert_eq!(unpinned["spec"]["replicas"], json!(0));
        assert!(unpinned.pointer("/metadata/resourceVersion").is_none());
        let err = apply_scale(&deployment(), &json!({"spec": {"replicas": -1}})).expect_err("negative");
        assert_eq!(err.to_string(), "Scale.autoscaling \"web\" is invalid: spec.replicas: Invalid value: -1: must be greater than or equal to 0");
    }
}
