//! Mirrors pkg/registry/core/pod/storage/storage.go's BindingREST: the scheduler's binding of a
//! pod to a node, which sets spec.nodeName once and marks the pod PodScheduled.

use futures::future::LocalBoxFuture;
use serde_json::{Value, json};

use crate::error::{Error, Result};
use crate::registry::generic::options::WriteOptions;
use crate::registry::generic::rest::RestRequest;
use crate::registry::generic::store::{Registry, now_rfc3339};

/// `POST pods/<name>/binding` (rest.Creater). A dry run (`?dryRun=All`) checks the binding
/// against the pod as a real one does, and writes nothing.
pub fn create(r: RestRequest<'_>, binding: Value, opts: WriteOptions) -> LocalBoxFuture<'_, Result<Option<Value>>> {
    Box::pin(async move { bind(r.registry, r.namespace, r.name, &binding, opts.is_dry_run()).await.map(|()| None) })
}

pub async fn bind(pods: &Registry, namespace: &str, name: &str, binding: &Value, dry_run: bool) -> Result<()> {
    let node = binding
        .pointer("/target/name")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .ok_or_else(|| Error::BadRequest("binding target.name is required".into()))?
        .to_string();
    if let Some(kind) = binding.pointer("/target/kind").and_then(Value::as_str)
        && !kind.is_empty()
        && kind != "Node"
    {
        return Err(Error::BadRequest(format!("binding target kind must be Node, not {kind}")));
    }
    pods.raw_update_with(Some(namespace), name, dry_run, |pod| bound_pod(pod, name, &node, binding)).await?;
    Ok(())
}

/// The pod bound to `node` (setPodHostAndAnnotations): refused when it is being deleted or is
/// bound already.
fn bound_pod(pod: &Value, name: &str, node: &str, binding: &Value) -> Result<Value> {
    if pod.pointer("/metadata/deletionTimestamp").is_some() {
        return Err(Error::Conflict { kind: "pods/binding".into(), name: name.into(), message: format!("pod {name} is being deleted, cannot be assigned to a host") });
    }
    if let Some(current) = pod.pointer("/spec/nodeName").and_then(Value::as_str).filter(|n| !n.is_empty()) {
        return Err(Error::Conflict { kind: "pods/binding".into(), name: name.into(), message: format!("pod {name} is already assigned to node \"{current}\"") });
    }
    let mut pod = pod.clone();
    pod["spec"]["nodeName"] = json!(node);
    // The binding's annotations land on the pod (setPodHostAndAnnotations).
    if let Some(extra) = binding.pointer("/metadata/annotations").and_then(Value::as_object).filter(|a| !a.is_empty()) {
        if !pod["metadata"]["annotations"].is_object() {
            pod["metadata"]["annotations"] = json!({});
        }
        for (k, v) in extra {
            pod["metadata"]["annotations"][k] = v.clone();
        }
    }
    let condition = json!({"type": "PodScheduled", "status": "True", "lastProbeTime": null, "lastTransitionTime": now_rfc3339()});
    let conditions = pod["status"]["conditions"].as_array().cloned().unwrap_or_default();
    let mut conditions: Vec<Value> = conditions.into_iter().filter(|c| c["type"] != "PodScheduled").collect();
    conditions.push(condition);
    pod["status"]["conditions"] = json!(conditions);
    Ok(pod)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pod_is_bound_once_and_never_while_being_deleted() {
        let binding = json!({"metadata": {"name": "web", "annotations": {"a": "b"}}, "target": {"kind": "Node", "name": "n1"}});
        let pod = json!({"metadata": {"name": "web", "resourceVersion": "4"}, "spec": {}, "status": {"conditions": [{"type": "PodScheduled", "status": "False"}]}});
        let bound = bound_pod(&pod, "web", "n1", &binding).expect("binds");
        assert_eq!(bound["spec"]["nodeName"], "n1");
        assert_eq!(bound["metadata"]["annotations"]["a"], "b");
        let conditions = bound["status"]["conditions"].as_array().expect("conditions");
        assert_eq!(conditions.len(), 1, "the condition is replaced: {bound}");
        assert_eq!(conditions[0]["status"], "True");
        let again = bound_pod(&bound, "web", "n2", &binding).expect_err("bound already");
        assert_eq!(again.code(), 409);
        assert!(again.to_string().contains("already assigned to node \"n1\""), "{again}");
        let mut deleting = pod.clone();
        deleting["metadata"]["deletionTimestamp"] = json!("2026-01-02T03:04:05Z");
        assert_eq!(bound_pod(&deleting, "web", "n1", &binding).expect_err("being deleted").code(), 409);
    }
}
