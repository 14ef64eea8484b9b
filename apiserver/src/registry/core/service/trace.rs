//! Mirrors no Kubernetes file (Kubernetes measures this hop as kube-proxy's
//! `network_programming_duration_seconds` metric): kubelab's
//! `GET /debug/trace/namespaces/<ns>/services/<name>[?uid=<uid>]`, a Service's journey for
//! `kubelab trace svc/<name>`. Built as the pod's (`pod::trace`, whose pieces it uses): the API
//! server's own steps for the Service's UID — the requests that wrote the Service and, from the
//! EndpointSlice controller, its EndpointSlices (`podtrace::trace_uid`), and the watch events
//! that carried them to each proxy — what the store members did for those writes, and from
//! every node's proxy the syncs that wrote the Service's rules, at
//! `http://<node's InternalIP>:<--proxy-healthz-port>/debug/trace/services/<uid>`.

use std::time::Duration;

use actix_web::{HttpRequest, HttpResponse};
use podtrace::Step;
use podtrace::render::Timeline;
use serde_json::Value;

use super::strategy::SERVICES;
use crate::error::Result;
use crate::registry::core::node::kubelet_client::node_host;
use crate::registry::core::node::strategy::NODES;
use crate::registry::core::pod::trace::{OWN_COMPONENTS, fetch, respond, store_steps, traced_object, uid_param};
use crate::registry::generic::rest::Registries;
use crate::registry::generic::options::ListOptions;

/// How long each node's proxy gets to answer (a dead node's must not hold the trace up).
const PROXY_TIMEOUT: Duration = Duration::from_secs(2);

/// `GET /debug/trace/namespaces/<namespace>/services/<name>`.
/// Each node's proxy is asked on `proxy_port` of the node's InternalIP (`--proxy-healthz-port`;
/// nothing registers where a proxy listens, and one elsewhere is a warning in the answer).
pub async fn serve(req: &HttpRequest, registries: &Registries, http: &reqwest::Client, proxy_port: u16, namespace: &str, name: &str) -> HttpResponse {
    respond(gather(registries, http, proxy_port, namespace, name, uid_param(req)).await)
}

async fn gather(registries: &Registries, http: &reqwest::Client, proxy_port: u16, namespace: &str, name: &str, uid: Option<String>) -> Result<Timeline> {
    // Step 1: the Service's UID (a deleted one's from `?uid=`: the proxies still answer for its
    // syncs while they remember them).
    let (_, uid) = traced_object(registries, &SERVICES, namespace, name, uid).await?;
    // Step 2: this API server's steps and the store members'.
    let mut steps = podtrace::recorder().steps(&uid, OWN_COMPONENTS);
    let nodes = registries.of(&NODES);
    let (store, mut warnings) = store_steps(nodes.storage.endpoints(), nodes.storage.tls(), &steps).await;
    steps.extend(store);
    // Step 3: every node's proxy, at once.
    let listed = nodes.list(None, &ListOptions::default()).await?;
    let asked = listed.items.iter().filter_map(|node| {
        let node_name = node.pointer("/metadata/name").and_then(Value::as_str)?.to_string();
        let base = node_host(node).map(|ip| format!("http://{ip}:{proxy_port}"));
        let what = format!("services/{uid}");
        Some(async move {
            let Some(base) = base else { return (node_name, Err("the node has no address yet".to_string())) };
            let answer = match tokio::time::timeout(PROXY_TIMEOUT, fetch(http, &base, &what)).await {
                Ok(r) => r.map_err(|e| format!("proxy at {base}: {e}")),
                Err(_) => Err(format!("proxy at {base}: no answer within {PROXY_TIMEOUT:?}")),
            };
            (node_name, answer)
        })
    });
    for (node_name, answer) in futures::future::join_all(asked).await {
        match answer {
            Ok(s) => steps.extend(s.into_iter().map(|s| Step { node: Some(node_name.clone()), ..s })),
            Err(e) => warnings.push(format!("node {node_name}: {e}")),
        }
    }
    let mut t = Timeline::new(namespace, name, &uid, steps).of_kind("service");
    t.warnings = warnings;
    Ok(t)
}
