//! Mirrors pkg/registry/core/pod/storage/storage.go's BindingREST: the scheduler's binding of a
//! pod to a node, which sets spec.nodeName once and marks the pod PodScheduled.

use futures::future::LocalBoxFuture;
use serde_json::{Value, json};

use crate::registry::generic::rest::RestRequest;
use crate::error::{Error, Result};
use crate::registry::generic::store::{Registry, now_rfc3339};

/// `POST pods/<name>/binding` (rest.Creater).
pub fn create(r: RestRequest<'_>, binding: Value) -> LocalBoxFuture<'_, Result<()>> {
    Box::pin(async move { bind(r.registry, r.namespace, r.name, &binding).await })
}

pub async fn bind(pods: &Registry, namespace: &str, name: &str, binding: &Value) -> Result<()> {
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
    pods.raw_update(Some(namespace), name, |pod| {
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
    })
    .await?;
    Ok(())
}
