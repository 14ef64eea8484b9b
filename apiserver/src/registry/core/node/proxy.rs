//! Mirrors pkg/registry/core/node/rest/proxy.go (ProxyREST) and `ResourceLocation` in
//! pkg/registry/core/node/strategy.go: `nodes/<[scheme:]name[:port]>/proxy/<path>` passes any
//! HTTP request on to the node's agent (`/healthz`, `/pods`, `/metrics`,
//! `/containerLogs/<ns>/<pod>/<container>`).
//!
//! One request, step by step:
//! 1. Split the id into scheme, name and port.
//! 2. The node (404) and its agent's address (the InternalIP and, unless a port is named, the
//!    daemon port; 503 while the node has reported none).
//! 3. Pass the request on to `<scheme>://<address><path>`: to the agent's own port with the
//!    kubelet client (HTTPS, the API server's client certificate), to any other port as
//!    services/proxy does (Kubernetes' `ResourceLocation` picks the same way).

use actix_web::{HttpResponse, web};
use futures::future::LocalBoxFuture;

use super::kubelet_client::{kubelet_port, node_agent_url};
use crate::error::{Error, Result};
use crate::proxy::location::{proxy_path, split_scheme_name_port};
use crate::proxy::upgradeaware;
use crate::registry::generic::rest::RestRequest;

/// `nodes/<id>/proxy` (rest.Connecter: any method, the body streamed).
pub fn connect(r: RestRequest<'_>, payload: web::Payload) -> LocalBoxFuture<'_, Result<HttpResponse>> {
    Box::pin(serve(r, payload))
}

async fn serve(r: RestRequest<'_>, payload: web::Payload) -> Result<HttpResponse> {
    // Step 1.
    let (scheme, name, port) = split_scheme_name_port(r.name)?;
    // Step 2.
    let node = r.registry.get(None, name).await?;
    let base = node_agent_url(&node).ok_or_else(|| Error::ServiceUnavailable(format!("node {name} has no address yet: its node agent has not reported")))?;
    let mut authority = base.trim_start_matches("https://").to_string();
    let agent = port.is_empty() || port == kubelet_port(&node).to_string();
    if !port.is_empty() {
        let host = authority.rsplit_once(':').map_or(authority.as_str(), |(h, _)| h);
        authority = format!("{host}:{port}");
    }
    // Step 3.
    let path = proxy_path(r.req.path(), r.name);
    if agent {
        // The agent's own port speaks HTTPS whatever scheme was asked for.
        return upgradeaware::proxy_http(&r.kubelet.http, r.req, payload, &format!("https://{authority}{path}")).await;
    }
    upgradeaware::proxy_http(upgradeaware::proxy_client(), r.req, payload, &format!("{scheme}://{authority}{path}")).await
}
