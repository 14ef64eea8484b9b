//! Mirrors the ProxyREST of pkg/registry/core/pod/rest/subresources.go and `ResourceLocation` in
//! pkg/registry/core/pod/strategy.go: `pods/<[scheme:]name[:port]>/proxy/<path>` passes any HTTP
//! request on to the pod's IP ([`crate::proxy::upgradeaware::proxy_http`]).
//!
//! One request, step by step:
//! 1. Split the id into scheme (`http`, `https`), name and port (400 otherwise).
//! 2. The pod (404) and its IP (503 while it has none).
//! 3. The port: the one named (a number, or a container port's name), else the first port the
//!    pod's containers declare, else none (the scheme's default).
//! 4. Pass the request on to `<scheme>://<podIP>:<port><path>`.
//!
//! Implementation caveats: links in proxied HTML are not rewritten to go through the proxy again
//! (kube-apiserver rewrites them); websocket upgrades through pods/proxy are not passed.

use actix_web::{HttpResponse, web};
use futures::future::LocalBoxFuture;
use serde_json::Value;

use crate::error::{Error, Result};
use crate::proxy::location::{join_host_port, proxy_path, split_scheme_name_port};
use crate::proxy::upgradeaware;
use crate::registry::generic::rest::RestRequest;

/// Step 3 as a pure function: the port to dial, or the error for a name no container declares.
pub fn resolve_port(pod: &Value, port: &str) -> Result<String> {
    let ports = || {
        pod.pointer("/spec/containers").and_then(Value::as_array).into_iter().flatten().flat_map(|c| c["ports"].as_array().into_iter().flatten())
    };
    if port.is_empty() {
        return Ok(ports().find_map(|p| p["containerPort"].as_i64()).map(|p| p.to_string()).unwrap_or_default());
    }
    if port.parse::<u16>().is_ok() {
        return Ok(port.to_string());
    }
    ports()
        .find(|p| p["name"].as_str() == Some(port))
        .and_then(|p| p["containerPort"].as_i64())
        .map(|p| p.to_string())
        .ok_or_else(|| Error::BadRequest(format!("no container port named {port:?}")))
}

/// `pods/<id>/proxy` (rest.Connecter: any method, the body streamed).
pub fn connect(r: RestRequest<'_>, payload: web::Payload) -> LocalBoxFuture<'_, Result<HttpResponse>> {
    Box::pin(serve(r, payload))
}

async fn serve(r: RestRequest<'_>, payload: web::Payload) -> Result<HttpResponse> {
    // Step 1.
    let (scheme, name, port) = split_scheme_name_port(r.name)?;
    // Step 2.
    let pod = r.registry.get(Some(r.namespace), name).await?;
    let ip = pod.pointer("/status/podIP").and_then(Value::as_str).unwrap_or("");
    if ip.is_empty() {
        return Err(Error::ServiceUnavailable(format!("pod {name} has no IP address yet")));
    }
    // Step 3.
    let port = resolve_port(&pod, port)?;
    // Step 4.
    let url = format!("{scheme}://{}{}", join_host_port(ip, &port), proxy_path(r.req.path(), r.name));
    upgradeaware::proxy_http(upgradeaware::proxy_client(), r.req, payload, &url).await
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn ports() {
        let pod = json!({"spec": {"containers": [
            {"name": "a"},
            {"name": "b", "ports": [{"name": "http", "containerPort": 8080}, {"name": "metrics", "containerPort": 9090}]}
        ]}});
        assert_eq!(resolve_port(&pod, "").expect("first declared"), "8080");
        assert_eq!(resolve_port(&pod, "81").expect("a number"), "81");
        assert_eq!(resolve_port(&pod, "metrics").expect("by name"), "9090");
        assert!(resolve_port(&pod, "nope").is_err());
        assert_eq!(resolve_port(&json!({"spec": {"containers": [{"name": "a"}]}}), "").expect("none"), "");
    }
}
