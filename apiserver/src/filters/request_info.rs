//! Mirrors k8s.io/apiserver/pkg/endpoints/request/requestinfo.go and endpoints/filters/requestinfo.go
//! (WithRequestInfo): what a request asks for — its verb and resource, whether it hands the
//! connection over, whether it is long-running — worked out once, before the other filters, which
//! read it: the timeout, the metrics and the `request` span; and what the authorizers are asked
//! ([`PathInfo`], parsed from the path alone).

use actix_web::HttpRequest;

use crate::config::Api;
use crate::endpoints::request::{Target, flag, query};
use crate::endpoints::{Route, is_connect, route};
use crate::error::Result;
pub use crate::endpoints::requestinfo::PathInfo;

/// The long-running verbs and subresources, as kube-apiserver's `BasicLongRunningRequestCheck` is
/// given them (watch and proxy; attach, exec, log, portforward and proxy), of those kubelab
/// serves. A long-running request is not bound by the request timeout.
const LONG_RUNNING_VERBS: &[&str] = &["WATCH"];
const LONG_RUNNING_SUBRESOURCES: &[&str] = &["attach", "exec", "log", "portforward", "proxy"];

pub struct RequestInfo {
    /// The verb as the metrics name it: GET, LIST, WATCH, POST, PUT, PATCH, DELETE,
    /// DELETECOLLECTION, CONNECT; the HTTP method when the path names no resource.
    pub verb: String,
    /// The resource as the metrics name it: `pods`, `pods/status`; empty when the path names no
    /// resource.
    pub resource: String,
    /// exec, attach, portforward and proxy: the connection is handed over, so the body is never read.
    pub connect: bool,
    pub long_running: bool,
    /// What the request asks to do, as the authorizers see it.
    pub path_info: PathInfo,
}

/// The request's info, and where it goes (the router's answer, 404 when nowhere).
pub fn resolve(req: &HttpRequest, api: &Api) -> (RequestInfo, Result<Route>) {
    let target = route(api, req.path());
    let path_info = PathInfo::parse(req.method().as_str(), req.path(), req.query_string());
    let info = match &target {
        Ok(Route::CreateOnly(c, _)) => {
            RequestInfo { verb: req.method().as_str().to_string(), resource: c.info.plural.to_string(), connect: false, long_running: false, path_info }
        }
        Ok(Route::Stored(t)) => {
            let connect = is_connect(api, t);
            let plural = t.registry.info().plural;
            let resource = match &t.subresource {
                Some(s) => format!("{plural}/{s}"),
                None => plural.to_string(),
            };
            let verb = if connect { "CONNECT".to_string() } else { verb_of(req, t) };
            let long_running = LONG_RUNNING_VERBS.contains(&verb.as_str())
                || t.subresource.as_deref().is_some_and(|s| LONG_RUNNING_SUBRESOURCES.contains(&s));
            RequestInfo { verb, resource, connect, long_running, path_info }
        }
        Err(_) => RequestInfo { verb: req.method().as_str().to_string(), resource: String::new(), connect: false, long_running: false, path_info },
    };
    (info, target)
}

/// The verb from the method, whether the path names an object, and `?watch`.
fn verb_of(req: &HttpRequest, t: &Target) -> String {
    match (req.method().as_str(), t.name.is_some()) {
        ("GET", false) if flag(&query(req), "watch") => "WATCH",
        ("GET", false) => "LIST",
        ("GET", true) => "GET",
        ("POST", _) => "POST",
        ("PUT", _) => "PUT",
        ("PATCH", _) => "PATCH",
        ("DELETE", true) => "DELETE",
        ("DELETE", false) => "DELETECOLLECTION",
        (m, _) => m,
    }
    .to_string()
}

