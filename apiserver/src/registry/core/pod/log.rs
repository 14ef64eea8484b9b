//! Mirrors pkg/registry/core/pod/rest/log.go: `pods/log` is proxied to the node agent that runs
//! the pod, at the kubelet's path `/containerLogs/<ns>/<pod>/<container>`, and streamed back.

use actix_web::HttpResponse;
use futures::TryStreamExt;
use futures::future::LocalBoxFuture;
use serde_json::Value;

use super::strategy::container_names;
use crate::error::{Error, Result};
use crate::registry::core::node::kubelet_client::node_agent_url;
use crate::registry::core::node::strategy::NODES;
use crate::registry::generic::rest::RestRequest;

/// The query parameters the node agent understands, passed through as they came.
const PASSED: &[&str] = &["follow", "tailLines", "timestamps", "sinceSeconds", "sinceTime", "limitBytes", "previous"];

/// `GET pods/<name>/log` (rest.GetterWithOptions).
pub fn get(r: RestRequest<'_>) -> LocalBoxFuture<'_, Result<HttpResponse>> {
    Box::pin(serve(r))
}

async fn serve(r: RestRequest<'_>) -> Result<HttpResponse> {
    let (req, namespace, name) = (r.req, r.namespace, r.name);
    let pod = r.registry.get(Some(namespace), name).await?;
    let q: Vec<(String, String)> = url_query(req.query_string());
    let all = container_names(&pod);
    let container = match q.iter().find(|(k, _)| k == "container").map(|(_, v)| v.clone()) {
        Some(c) => c,
        None if all.len() == 1 => all[0].clone(),
        None => {
            return Err(Error::BadRequest(format!("a container name must be specified for pod {name}, choose one of: [{}]", all.join(" "))));
        }
    };
    if !all.contains(&container) {
        return Err(Error::BadRequest(format!("container {container} is not valid for pod {name}")));
    }
    let node_name = pod.pointer("/spec/nodeName").and_then(Value::as_str).unwrap_or("");
    if node_name.is_empty() {
        return Err(Error::BadRequest(format!("pod {name} does not have a host assigned")));
    }
    let node = r.registries.of(&NODES).get(None, node_name).await?;
    let base = node_agent_url(&node).ok_or_else(|| Error::Unavailable(format!("node {node_name} has no address yet: its node agent has not reported")))?;
    let mut url = format!("{base}/containerLogs/{namespace}/{name}/{container}");
    let passed: Vec<String> = q.iter().filter(|(k, _)| PASSED.contains(&k.as_str())).map(|(k, v)| format!("{k}={v}")).collect();
    if !passed.is_empty() {
        url.push('?');
        url.push_str(&passed.join("&"));
    }
    let resp = r.kubelet.http.get(&url).send().await.map_err(|e| {
        Error::Unavailable(format!("the node agent of node {node_name} at {base} is not answering: {e}"))
    })?;
    let code = resp.status().as_u16();
    if !(200..300).contains(&code) {
        let text = resp.text().await.unwrap_or_default();
        // A Status from the node agent passes through; anything else becomes one.
        if let Ok(status) = serde_json::from_str::<Value>(&text)
            && status["kind"] == "Status"
        {
            let msg = status["message"].as_str().unwrap_or(&text).to_string();
            return Err(match code {
                400 => Error::BadRequest(msg),
                404 => Error::not_found("pods", name),
                _ => Error::Internal(msg),
            });
        }
        return Err(if code == 400 { Error::BadRequest(text) } else { Error::Internal(format!("node agent answered {code}: {text}")) });
    }
    let body = resp.bytes_stream().map_err(std::io::Error::other);
    Ok(HttpResponse::Ok().content_type("text/plain").streaming(body))
}

fn url_query(q: &str) -> Vec<(String, String)> {
    actix_web::web::Query::<Vec<(String, String)>>::from_query(q).map(|v| v.into_inner()).unwrap_or_default()
}
