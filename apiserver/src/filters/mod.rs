//! Mirrors k8s.io/apiserver/pkg/server/config.go's `DefaultBuildHandlerChain` (and the filters it
//! stacks, from k8s.io/apiserver/pkg/endpoints/filters and pkg/server/filters): what every
//! request to `/api` and `/apis` passes through before a handler runs, one filter a file, in
//! this order:
//!
//! 1. [`request_info`]: what the request asks for (verb, resource, namespace, name,
//!    subresource; long-running or not). A GET of a discovery document is not a resource request
//!    and goes straight to authentication and authorization (steps 3 and 4) and discovery.
//! 2. [`panic_recovery`]: a handler that panics is answered 500 with a Status.
//! 3. [`authentication`]: who sent the request (its connection's client certificate, its bearer
//!    token, or anonymous; on the insecure port, a superuser) — or 401.
//!    Then [`impersonation`]: a request asking to act as another user (`kubectl --as`) does,
//!    if that user may impersonate it — or 403.
//! 4. [`authorization`]: whether that user may do what the request asks (`--authorization-mode`)
//!    — or 403 with Kubernetes' message.
//! 5. [`timeout`]: a request that is not long-running is answered 504 after `--request-timeout`,
//!    or its own shorter `?timeout=`. (kube-apiserver runs authentication and authorization
//!    inside it; here they never wait on anything, so they run before it.)
//! 6. [`request_body`]: the body is read, up to `--max-request-bytes` (413 beyond) — except on a
//!    connect (exec, attach), whose connection is handed over unread.
//! 7. The handler ([`crate::endpoints`]), inside the request's `request` span (verb, resource,
//!    and the pod it writes: `kubelab trace`), which also holds steps 3 and 4 as spans of their
//!    own (the user; the rule that allowed it).
//! 8. Last, the audit Event's last stage, with the answer ([`audit`], with `--audit-policy-file`;
//!    its `RequestReceived` stage is written once step 3 knows the user, and it keeps step 4's
//!    decision and step 6's body), and the metrics: `apiserver_request_total` and
//!    `apiserver_request_duration_seconds` by the request info's verb and resource, with the
//!    answer's code.
//!
//! Every other path (`/version`, `/healthz`, `/openapi/v2`, `/metrics`, …) passes steps 3 and 4
//! as a non-resource request ([`non_resource`]).

pub mod audit;
pub mod authentication;
pub mod authorization;
pub mod impersonation;
pub mod panic_recovery;
pub mod request_body;
pub mod request_info;
pub mod timeout;

use std::time::Instant;

use actix_web::body::{BoxBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::middleware::Next;
use actix_web::{HttpMessage, HttpRequest, HttpResponse, web};
use tracing::Instrument as _;

use crate::config::Api;
use crate::endpoints::requestinfo::PathInfo;
use crate::endpoints::metrics::Metrics;
use crate::endpoints::request::{client_name, error_response};
use crate::endpoints::{self, Route, discovery_path, serve_discovery};
use crate::error::{Error, Result};
use panic_recovery::with_panic_recovery;
use request_info::RequestInfo;
use timeout::with_timeout;

/// Everything under `/api` and `/apis`.
pub async fn handle(req: HttpRequest, payload: web::Payload, api: web::Data<Api>, metrics: web::Data<Metrics>) -> HttpResponse {
    // Step 1: a discovery document, or a resource request and its info.
    if let Some(path) = discovery_path(&req) {
        let info = PathInfo::parse(req.method().as_str(), req.path(), req.query_string());
        let resp = with_panic_recovery(&req, async {
            match authenticate_and_authorize(&req, &api, &info) {
                Ok(_) => serve_discovery(&req, &api, path),
                Err(e) => error_response(&e),
            }
        })
        .await;
        return match &api.auditor {
            Some(a) => audit::finish(a, &req, resp, false).await,
            None => resp,
        };
    }
    let started = Instant::now();
    let (info, target) = request_info::resolve(&req, &api);
    // Steps 2 to 7.
    let resp = with_panic_recovery(&req, chain(req.clone(), payload, api.clone(), &info, target)).await;
    // The audit Event's last stage.
    let resp = match &api.auditor {
        Some(a) => audit::finish(a, &req, resp, info.long_running).await,
        None => resp,
    };
    // Step 8.
    metrics.observe(&info.verb, &info.resource, resp.status().as_u16(), started.elapsed());
    resp
}

/// Steps 3 and 4: the request goes on, or gets its 401 or 403. Each step is a span of its own,
/// so that `kubelab trace` shows who created a pod and which rule let them. The user goes with
/// the request (its extensions, Kubernetes' `request.WithUser`) for the handlers that answer
/// about it: the reviews.
fn authenticate_and_authorize(req: &HttpRequest, api: &Api, info: &PathInfo) -> Result<()> {
    let auditor = api.auditor.as_ref();
    let user = tracing::debug_span!(target: "apiserver", "authentication", user = tracing::field::Empty, groups = tracing::field::Empty, pod_uid = tracing::field::Empty).in_scope(|| {
        let requestor = authentication::authenticate(req, &api.authenticator).inspect_err(|_| {
            if let Some(a) = auditor {
                audit::failed_authentication(a, req, info);
            }
        })?;
        if let Some(a) = auditor {
            audit::begin(a, req, info, &requestor);
        }
        let user = impersonation::impersonate(req, api.authorizer.as_ref(), requestor)?;
        if auditor.is_some() && req.headers().contains_key("impersonate-user") {
            audit::impersonated(req, &user);
        }
        let span = tracing::Span::current();
        span.record("user", user.name.as_str());
        span.record("groups", user.groups.join(",").as_str());
        Ok::<_, crate::error::Error>(user)
    })?;
    tracing::debug_span!(target: "apiserver", "authorization", allowed_by = tracing::field::Empty, pod_uid = tracing::field::Empty).in_scope(|| {
        let decided = authorization::authorize(api.authorizer.as_ref(), &user, info);
        if auditor.is_some() {
            match &decided {
                Ok(reason) => audit::annotate_authorization(req, true, reason),
                Err(e) => audit::annotate_authorization(req, false, &e.to_string()),
            }
        }
        let reason = decided?;
        tracing::Span::current().record("allowed_by", reason.as_str());
        Ok::<_, crate::error::Error>(())
    })?;
    req.extensions_mut().insert(std::sync::Arc::new(user));
    Ok(())
}

/// The answer to a request that steps 3 or 4 refused (a 401 or 403), which kube-apiserver gives
/// before the body is read: the body is drained first ([`request_body::discard`]), so that a
/// client still sending it reads the answer rather than a connection closed under it.
async fn refuse<S>(e: &Error, upgrade: bool, payload: S, max_request_bytes: usize) -> HttpResponse
where
    S: futures::Stream<Item = std::result::Result<web::Bytes, actix_web::error::PayloadError>> + Unpin,
{
    request_body::discard(upgrade, payload, max_request_bytes).await;
    error_response(e)
}

/// Steps 3 and 4 for every path outside `/api` and `/apis`, as an actix middleware.
pub async fn non_resource(mut req: ServiceRequest, next: Next<impl MessageBody + 'static>) -> std::result::Result<ServiceResponse<BoxBody>, actix_web::Error> {
    let path = req.path();
    let handled_by_chain = ["/api", "/apis"].iter().any(|p| path.strip_prefix(p).is_some_and(|rest| rest.is_empty() || rest.starts_with('/')));
    if !handled_by_chain && let Some(api) = req.app_data::<web::Data<Api>>().cloned() {
        let info = PathInfo::parse(req.method().as_str(), path, req.query_string());
        if let Err(e) = authenticate_and_authorize(req.request(), &api, &info) {
            let upgrade = req.head().upgrade();
            let resp = refuse(&e, upgrade, req.take_payload(), api.options.max_request_bytes).await;
            let resp = match &api.auditor {
                Some(a) => audit::finish(a, req.request(), resp, false).await,
                None => resp,
            };
            return Ok(req.into_response(resp));
        }
        if let Some(a) = api.auditor.as_ref() {
            let (http, resp) = next.call(req).await?.map_into_boxed_body().into_parts();
            let resp = audit::finish(a, &http, resp, false).await;
            return Ok(ServiceResponse::new(http, resp));
        }
    }
    next.call(req).await.map(ServiceResponse::map_into_boxed_body)
}

/// Steps 3 to 7.
async fn chain(req: HttpRequest, payload: web::Payload, api: web::Data<Api>, info: &RequestInfo, target: Result<Route>) -> HttpResponse {
    // The request's span, which steps 3, 4 and 7 are steps of. A request is a step of the pod it
    // writes (`kubelab trace`, which draws it from its caller); the pod's UID is learned when the
    // store write happens (storage/store.rs). Its spans are at debug level: the step recorder and
    // the exporter take them at any level, and the log output (info by default) would otherwise
    // format their fields for every request.
    let caller = client_name(&req);
    let span = tracing::debug_span!(target: "apiserver", "request", verb = %info.verb, resource = %info.resource, caller = %caller, pod_uid = tracing::field::Empty);
    // Steps 3 and 4.
    if let Err(e) = span.in_scope(|| authenticate_and_authorize(&req, &api, &info.path_info)) {
        return refuse(&e, req.head().upgrade(), payload, api.options.max_request_bytes).await;
    }
    if info.connect
        && let Ok(Route::Stored(t)) = &target
    {
        return endpoints::connect(&req, payload, &api, t).await;
    }
    let request_timeout = api.options.request_timeout;
    let handler_req = req.clone();
    let handler = async move {
        // Step 6.
        let body = match request_body::read(payload, api.options.max_request_bytes).await {
            Ok(b) => b,
            Err(e) => return error_response(&e),
        };
        if api.auditor.is_some() {
            audit::request_body(&handler_req, &body);
        }
        // Step 7.
        let served = match target {
            Ok(Route::Stored(t)) => endpoints::serve(&handler_req, body, &api, t).instrument(span).await,
            Ok(Route::CreateOnly(resource, namespace)) => endpoints::serve_create_only(&handler_req, body, &api, resource, namespace).instrument(span).await,
            Err(e) => Err(e),
        };
        served.unwrap_or_else(|e| error_response(&e))
    };
    // Step 5.
    with_timeout(&req, info, request_timeout, handler).await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An HTTP server built as server.rs builds its own (actix-http's defaults: the connection
    /// is closed as soon as an early answer is written), whose every request is refused as
    /// steps 3 and 4 refuse one.
    fn refusing_server() -> (std::net::SocketAddr, actix_server::ServerHandle) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a loopback port");
        let addr = listener.local_addr().expect("its address");
        let server = actix_server::Server::build()
            .listen("refusing", listener, || {
                let app = actix_web::App::new().default_service(web::to(|req: HttpRequest, payload: web::Payload| async move {
                    refuse(&Error::Unauthorized, req.head().upgrade(), payload, 3 * 1024 * 1024).await
                }));
                actix_http::HttpService::build().finish(actix_service::map_config(app, |_: ()| actix_web::dev::AppConfig::default())).tcp()
            })
            .expect("listening")
            .workers(1)
            .disable_signals()
            .run();
        let handle = server.handle();
        actix_rt::spawn(server);
        (addr, handle)
    }

    #[actix_rt::test]
    async fn a_large_body_refused_unread_still_gets_its_401() {
        // What the fuzzing found: an anonymous 10 MB POST on the secure port met a connection
        // closed under it; kube-apiserver answers 401 (authentication comes before the body).
        let (addr, handle) = refusing_server();
        let client = reqwest::Client::new();
        for size in [0, 100, 10 * 1024 * 1024] {
            let resp = client
                .post(format!("http://{addr}/api/v1/namespaces/default/configmaps"))
                .header("Content-Type", "application/json")
                .body(vec![b' '; size])
                .send()
                .await
                .unwrap_or_else(|e| panic!("a {size}-byte body: no answer: {e:#}"));
            assert_eq!(resp.status().as_u16(), 401, "a {size}-byte body");
            let status: serde_json::Value = resp.json().await.expect("a Status");
            assert_eq!((status["kind"].as_str(), status["reason"].as_str(), status["code"].as_u64()), (Some("Status"), Some("Unauthorized"), Some(401)));
        }
        handle.stop(false).await;
    }
}
