//! Mirrors k8s.io/apiserver/pkg/server/config.go's `DefaultBuildHandlerChain` (and the filters it
//! stacks, from k8s.io/apiserver/pkg/endpoints/filters and pkg/server/filters): what every
//! request to `/api` and `/apis` passes through before a handler runs, one filter a file, in
//! this order:
//!
//! 1. [`request_info`]: what the request asks for (verb, resource, namespace, name,
//!    subresource; long-running or not). A GET of a discovery document is not a resource request
//!    and goes straight to discovery, through the panic recovery only.
//! 2. [`panic_recovery`]: a handler that panics is answered 500 with a Status.
//! 3. [`timeout`]: a request that is not long-running is answered 504 after `--request-timeout`,
//!    or its own shorter `?timeout=`.
//! 4. Authentication, then authorization, will go here (Kubernetes' WithAuthentication and
//!    WithAuthorization run inside the timeout, before the body is read): today every request is
//!    anonymous and allowed.
//! 5. [`request_body`]: the body is read, up to `--max-request-bytes` (413 beyond) — except on a
//!    connect (exec, attach), whose connection is handed over unread.
//! 6. The handler ([`crate::endpoints`]), inside the request's `request` span (verb, resource, and
//!    the pod it writes: `kubelab trace`).
//! 7. Last, the metrics: `apiserver_request_total` and `apiserver_request_duration_seconds` by the
//!    request info's verb and resource, with the answer's code.

pub mod panic_recovery;
pub mod request_body;
pub mod request_info;
pub mod timeout;

use std::time::Instant;

use actix_web::{HttpRequest, HttpResponse, web};
use tracing::Instrument as _;

use crate::config::Api;
use crate::endpoints::metrics::Metrics;
use crate::endpoints::request::{Target, client_name, error_response};
use crate::endpoints::{self, discovery_path, serve_discovery};
use crate::error::Result;
use panic_recovery::with_panic_recovery;
use request_info::RequestInfo;
use timeout::with_timeout;

/// Everything under `/api` and `/apis`.
pub async fn handle(req: HttpRequest, payload: web::Payload, api: web::Data<Api>, metrics: web::Data<Metrics>) -> HttpResponse {
    // Step 1: a discovery document, or a resource request and its info.
    if let Some(path) = discovery_path(&req) {
        return with_panic_recovery(&req, async { serve_discovery(&req, &api, path) }).await;
    }
    let started = Instant::now();
    let (info, target) = request_info::resolve(&req, &api);
    // Steps 2 to 6.
    let resp = with_panic_recovery(&req, chain(req.clone(), payload, api.clone(), &info, target)).await;
    // Step 7.
    metrics.observe(&info.verb, &info.resource, resp.status().as_u16(), started.elapsed());
    resp
}

/// Steps 3 to 6.
async fn chain(req: HttpRequest, payload: web::Payload, api: web::Data<Api>, info: &RequestInfo, target: Result<Target>) -> HttpResponse {
    if info.connect
        && let Ok(t) = &target
    {
        return endpoints::connect(&req, payload, &api, t).await;
    }
    let (verb, resource) = (info.verb.clone(), info.resource.clone());
    let request_timeout = api.options.request_timeout;
    let handler_req = req.clone();
    let handler = async move {
        // Step 5.
        let body = match request_body::read(payload, api.options.max_request_bytes).await {
            Ok(b) => b,
            Err(e) => return error_response(&e),
        };
        let t = match target {
            Ok(t) => t,
            Err(e) => return error_response(&e),
        };
        // Step 6. A request is a step of the pod it writes (`kubelab trace`, which draws it from
        // its caller); the pod's UID is learned when the store write happens (storage/store.rs).
        // Its spans are at debug level: the step recorder and the exporter take them at any level,
        // and the log output (info by default) would otherwise format their fields for every
        // request.
        let caller = client_name(&handler_req);
        let span = tracing::debug_span!(target: "apiserver", "request", verb = %verb, resource = %resource, caller = %caller, pod_uid = tracing::field::Empty);
        endpoints::serve(&handler_req, body, &api, t).instrument(span).await.unwrap_or_else(|e| error_response(&e))
    };
    // Step 3 (step 4 will go inside it).
    with_timeout(&req, info, request_timeout, handler).await
}
