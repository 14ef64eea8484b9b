//! Mirrors pkg/registry/core/service/proxy.go (ProxyREST) and `ResourceLocation` in
//! pkg/registry/core/service/storage/storage.go: `services/<[scheme:]name[:port]>/proxy/<path>`
//! passes any HTTP request on to one ready endpoint of the Service.
//!
//! One request, step by step:
//! 1. Split the id into scheme, name and port (the Service port's name or number).
//! 2. The Service (404); an ExternalName one is 400.
//! 3. Its port: the one named, else its only unnamed port (503 `no service port … found`).
//! 4. The Service's EndpointSlices (label `kubernetes.io/service-name`): the ready endpoints with a
//!    port of that name; one at random (503 `no endpoints available for service …` when none).
//! 5. Pass the request on to `<scheme>://<address>:<endpoint port><path>`.

use actix_web::{HttpResponse, web};
use futures::future::LocalBoxFuture;
use rand::seq::IndexedRandom;
use serde_json::Value;

use crate::error::{Error, Result};
use crate::proxy::location::{join_host_port, proxy_path, split_scheme_name_port};
use crate::proxy::upgradeaware;
use crate::registry::discovery::endpointslice::strategy::ENDPOINTSLICES;
use crate::registry::generic::options::ListOptions;
use crate::registry::generic::rest::RestRequest;

/// The label tying an EndpointSlice to its Service.
const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// Step 3: the name of the Service port `port` asks for.
pub fn service_port_name(svc: &Value, name: &str, port: &str) -> Result<String> {
    svc.pointer("/spec/ports")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|p| {
            let p_name = p["name"].as_str().unwrap_or("");
            p_name == port || p["port"].as_i64().is_some_and(|n| n.to_string() == port)
        })
        .map(|p| p["name"].as_str().unwrap_or("").to_string())
        .ok_or_else(|| Error::ServiceUnavailable(format!("no service port {port:?} found for service {name:?}")))
}

/// Step 4's choice: every ready `address:port` of `slices` for the port named `port_name`.
pub fn ready_endpoints(slices: &[Value], port_name: &str) -> Vec<String> {
    let mut out = Vec::new();
    for slice in slices {
        let Some(port) = slice["ports"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|p| p["name"].as_str().unwrap_or("") == port_name)
            .and_then(|p| p["port"].as_i64())
        else {
            continue;
        };
        for ep in slice["endpoints"].as_array().into_iter().flatten() {
            // An unset `ready` means ready (EndpointConditions).
            if ep.pointer("/conditions/ready").and_then(Value::as_bool) == Some(false) {
                continue;
            }
            if let Some(address) = ep["addresses"].as_array().and_then(|a| a.first()).and_then(Value::as_str) {
                out.push(join_host_port(address, &port.to_string()));
            }
        }
    }
    out
}

/// `services/<id>/proxy` (rest.Connecter: any method, the body streamed).
pub fn connect(r: RestRequest<'_>, payload: web::Payload) -> LocalBoxFuture<'_, Result<HttpResponse>> {
    Box::pin(serve(r, payload))
}

async fn serve(r: RestRequest<'_>, payload: web::Payload) -> Result<HttpResponse> {
    // Step 1.
    let (scheme, name, port) = split_scheme_name_port(r.name)?;
    // Step 2.
    let svc = r.registry.get(Some(r.namespace), name).await?;
    if svc.pointer("/spec/type").and_then(Value::as_str) == Some("ExternalName") {
        return Err(Error::BadRequest(format!("service {name:?} is an ExternalName service: it has no endpoints to proxy to")));
    }
    // Step 3.
    let port_name = service_port_name(&svc, name, port)?;
    // Step 4.
    let opts = ListOptions { label_selector: Some(format!("{SERVICE_NAME_LABEL}={name}")), ..Default::default() };
    let slices = r.registries.of(&ENDPOINTSLICES).list(Some(r.namespace), &opts).await?;
    let slices: Vec<Value> = slices.items.iter().map(|s| (**s).clone()).collect();
    let endpoints = ready_endpoints(&slices, &port_name);
    let Some(endpoint) = endpoints.choose(&mut rand::rng()) else {
        return Err(Error::ServiceUnavailable(format!("no endpoints available for service {name:?}")));
    };
    // Step 5.
    let url = format!("{scheme}://{endpoint}{}", proxy_path(r.req.path(), r.name));
    upgradeaware::proxy_http(upgradeaware::proxy_client(), r.req, payload, &url).await
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn ports_and_endpoints() {
        let svc = json!({"spec": {"ports": [{"name": "web", "port": 80}, {"name": "metrics", "port": 9090}]}});
        assert_eq!(service_port_name(&svc, "s", "web").expect("by name"), "web");
        assert_eq!(service_port_name(&svc, "s", "9090").expect("by number"), "metrics");
        assert_eq!(
            service_port_name(&svc, "s", "nope").expect_err("unknown").to_string(),
            "no service port \"nope\" found for service \"s\""
        );
        let unnamed = json!({"spec": {"ports": [{"port": 80}]}});
        assert_eq!(service_port_name(&unnamed, "s", "").expect("the only one"), "");

        let slices = vec![
            json!({"ports": [{"name": "web", "port": 8080}], "endpoints": [
                {"addresses": ["10.0.0.1"], "conditions": {"ready": true}},
                {"addresses": ["10.0.0.2"], "conditions": {"ready": false}},
                {"addresses": ["10.0.0.3"]}
            ]}),
            json!({"ports": [{"name": "other", "port": 1}], "endpoints": [{"addresses": ["10.0.0.9"]}]}),
        ];
        assert_eq!(ready_endpoints(&slices, "web"), ["10.0.0.1:8080", "10.0.0.3:8080"]);
        assert!(ready_endpoints(&slices, "metrics").is_empty());
    }
}
