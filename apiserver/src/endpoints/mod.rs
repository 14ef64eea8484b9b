//! Mirrors k8s.io/apiserver/pkg/endpoints (installer.go, groupversion.go): the routes of the
//! resource API — `/api/v1/...` (the core group) and `/apis/<group>/<version>/...`, then
//! `[namespaces/<ns>/]<resource>[/<name>[/<subresource>]]` — resolved to a resource's store and
//! run by the verb's handler ([`handlers`]), or to a create-only resource (a review: only a
//! `POST` of its collection), or, for a GET of a root or a group version, answered by discovery
//! ([`discovery`]).
//!
//! Matched here rather than by actix-web route patterns: actix-web matches a pattern with a
//! `{segment}` by regular expression, one pattern after another, for every request, and this path
//! is taken by every request a client makes. The filters ([`crate::filters`]) run before.

pub mod discovery;
pub mod handlers;
pub mod metrics;
pub mod negotiation;
pub mod openapi;
pub mod openapi_v2;
pub mod request;
pub mod requestinfo;

use std::collections::HashMap;

use actix_web::{HttpRequest, HttpResponse, web};

use crate::config::Api;
use crate::registry::generic::rest::{CreateOnly, RestRequest, SubresourceRest};
use crate::error::{Error, Result};
use handlers::{create, delete, get, patch, update, watch};
use negotiation::{Output, negotiate_output, negotiate_watch};
use request::{Target, as_partial_object_metadata, as_yaml, error_response, list_options, query};

/// A discovery document's path: `GET /api`, `/apis`, `/api/<v>` or `/apis/<group>/<v>`.
pub enum DiscoveryPath<'a> {
    Core,
    Groups,
    Resources { group: &'a str, version: &'a str },
}

/// Whether `req` asks for discovery rather than for a resource.
pub fn discovery_path(req: &HttpRequest) -> Option<DiscoveryPath<'_>> {
    if req.method() != actix_web::http::Method::GET {
        return None;
    }
    match req.path() {
        "/api" | "/api/" => Some(DiscoveryPath::Core),
        "/apis" | "/apis/" => Some(DiscoveryPath::Groups),
        path => {
            let mut segments = path.split('/').skip(1);
            let group_version = match (segments.next(), segments.next(), segments.next(), segments.next()) {
                (Some("api"), Some(version), None, None) => Some(("", version)),
                (Some("apis"), Some(group), Some(version), None) if !group.is_empty() => Some((group, version)),
                _ => None,
            };
            group_version.filter(|(_, v)| !v.is_empty()).map(|(group, version)| DiscoveryPath::Resources { group, version })
        }
    }
}

/// Answers a discovery request.
pub fn serve_discovery(req: &HttpRequest, api: &Api, path: DiscoveryPath<'_>) -> HttpResponse {
    match path {
        DiscoveryPath::Core => discovery::core(req, api),
        DiscoveryPath::Groups => discovery::apis(req, api),
        DiscoveryPath::Resources { group, version } => discovery::resources(req, api, group, version).unwrap_or_else(|| status(Error::NoRoute)),
    }
}

/// A `metav1.Status` for what is not a resource request (discovery, OpenAPI, unknown paths).
pub fn status(e: Error) -> HttpResponse {
    HttpResponse::build(actix_web::http::StatusCode::from_u16(e.code()).unwrap_or(actix_web::http::StatusCode::INTERNAL_SERVER_ERROR)).json(e.to_status())
}

/// Where a resource request goes.
pub enum Route {
    /// A resource with a store.
    Stored(Target),
    /// A create-only resource, and the path's namespace if it is namespaced.
    CreateOnly(CreateOnly, Option<String>),
}

/// Resolves `/api/v1/...` or `/apis/<g>/<v>/...` to a resource of `api`.
pub fn route(api: &Api, path: &str) -> Result<Route> {
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, version, rest) = match segs.as_slice() {
        ["api", v, rest @ ..] => ("", *v, rest),
        ["apis", g, v, rest @ ..] => (*g, *v, rest),
        _ => return Err(Error::NoRoute),
    };
    // A create-only resource has its collection's path and nothing else.
    let create_only = match rest {
        [res] => api.registries.create_only(group, version, res).filter(|c| !c.info.namespaced).map(|c| Route::CreateOnly(*c, None)),
        ["namespaces", ns, res] => api.registries.create_only(group, version, res).filter(|c| c.info.namespaced).map(|c| Route::CreateOnly(*c, Some(ns.to_string()))),
        _ => None,
    };
    match create_only {
        Some(route) => Ok(route),
        None => route_stored(api, group, version, rest).map(Route::Stored),
    }
}

/// Resolves the rest of a path, after its group version, to a resource with a store.
fn route_stored(api: &Api, group: &str, version: &str, rest: &[&str]) -> Result<Target> {
    let find = |plural: &str| api.registries.get(group, version, plural).ok_or(Error::NoRoute);
    let t = |registry, namespace: Option<&str>, name: Option<&str>, sub: Option<&str>| Target {
        registry,
        namespace: namespace.map(String::from),
        name: name.map(String::from),
        subresource: sub.map(String::from),
    };
    match rest {
        [res] => Ok(t(find(res)?, None, None, None)),
        ["namespaces", ns, res] if api.registries.get(group, version, res).is_some_and(|r| r.info().namespaced) => {
            Ok(t(find(res)?, Some(ns), None, None))
        }
        ["namespaces", ns, res, name] => Ok(t(find(res)?, Some(ns), Some(name), None)),
        ["namespaces", ns, res, name, sub] => Ok(t(find(res)?, Some(ns), Some(name), Some(sub))),
        // A proxy subresource takes the rest of the path as the backend's.
        ["namespaces", ns, res, name, "proxy", _, ..] => Ok(t(find(res)?, Some(ns), Some(name), Some("proxy"))),
        [res, name, "proxy", _, ..] => Ok(t(find(res)?, None, Some(name), Some("proxy"))),
        [res, name] => Ok(t(find(res)?, None, Some(name), None)),
        [res, name, sub] => Ok(t(find(res)?, None, Some(name), Some(sub))),
        _ => Err(Error::NoRoute),
    }
}

/// The code that serves `t`'s subresource, when the resource's own code does, with the request
/// it is called with.
fn subresource_rest<'a>(req: &'a HttpRequest, api: &'a Api, t: &'a Target) -> Option<(SubresourceRest, RestRequest<'a>)> {
    let (name, sub) = (t.name.as_deref()?, t.subresource.as_deref()?);
    let rest = api.registries.subresource(&t.registry, sub)?;
    let namespace = t.namespace.as_deref().unwrap_or("default");
    Some((rest, RestRequest { req, registries: &api.registries, kubelet: &api.kubelet, token_issuer: api.token_issuer.as_ref(), registry: &t.registry, namespace, name, subresource: sub }))
}

/// Whether `t` is a connect (exec, attach): the connection is handed over, so the body must not
/// be read. Only for a path with the object's name, and its namespace if it has one.
pub fn is_connect(api: &Api, t: &Target) -> bool {
    let scoped = t.namespace.is_some() || !t.registry.info().namespaced;
    scoped && t.name.is_some() && t.subresource.as_deref().and_then(|s| api.registries.subresource(&t.registry, s)).is_some_and(|r| matches!(r, SubresourceRest::Connect(_)))
}

/// Runs a connect (rest.Connecter, k8s handlers/rest.go `ConnectResource`); errors leave as a
/// Status, as from every handler.
pub async fn connect(req: &HttpRequest, payload: web::Payload, api: &Api, t: &Target) -> HttpResponse {
    let resp = match subresource_rest(req, api, t) {
        Some((SubresourceRest::Connect(serve), r)) => serve(r, payload).await,
        _ => Err(Error::NoRoute),
    };
    resp.unwrap_or_else(|e| error_response(&e))
}

/// Runs a create of a create-only resource: `POST` of its collection, answered 201 with the
/// object its code made (in YAML if asked), nothing stored.
pub async fn serve_create_only(req: &HttpRequest, body: web::Bytes, api: &Api, resource: CreateOnly, namespace: Option<String>) -> Result<HttpResponse> {
    if req.method() != actix_web::http::Method::POST {
        return Err(Error::MethodNotAllowed(format!("the server does not allow this method on the requested resource ({})", req.method())));
    }
    let output = negotiate_output(req)?;
    let (obj, warnings) = create::create_only(req, &body, api, resource, namespace.as_deref())?;
    Ok(request::respond_as(output, 201, &obj, &warnings))
}

/// Runs a resource request with its body, answering in the media type negotiated from its
/// `Accept` before anything is done ([`negotiation`]): the verb's handler for the target.
pub async fn serve(req: &HttpRequest, body: web::Bytes, api: &Api, t: Target) -> Result<HttpResponse> {
    // A subresource that streams its own media type (pods/log: text/plain).
    if req.method() == actix_web::http::Method::GET
        && let Some((SubresourceRest::Get(serve), r)) = subresource_rest(req, api, &t)
    {
        return serve(r).await;
    }
    let q = query(req);
    let get = req.method() == actix_web::http::Method::GET;
    let watch = get && t.name.is_none() && list_options(&q)?.watch;
    let output = if watch { negotiate_watch(req)? } else { negotiate_output(req)? };
    let resp = run(req, body, api, t, &q, output).await;
    // GET, LIST and WATCH write Tables and metadata themselves (handlers/get.rs, watch.rs); a
    // write's answer, and any YAML, is rewritten here.
    let rewrite = output == Output::Yaml || (output == Output::Metadata && !get);
    if watch || !rewrite {
        return resp;
    }
    let (head, body) = resp.unwrap_or_else(|e| error_response(&e)).into_parts();
    let json = actix_web::body::to_bytes(body).await.map_err(|e| Error::Internal(format!("reading the answer: {e}")))?;
    Ok(if output == Output::Yaml { as_yaml(head, &json) } else { as_partial_object_metadata(head, &json) })
}

/// The verb's handler for the target, with the request's query and negotiated output.
async fn run(req: &HttpRequest, body: web::Bytes, api: &Api, t: Target, q: &HashMap<String, String>, output: Output) -> Result<HttpResponse> {
    let info = t.registry.info();
    if info.namespaced && t.name.is_some() && t.namespace.is_none() {
        return Err(Error::NoRoute);
    }
    if let Some(sub) = &t.subresource
        && !info.subresources.iter().any(|s| s.name == sub)
    {
        return Err(Error::NoRoute);
    }
    let method = req.method().as_str();
    let not_allowed = || Error::MethodNotAllowed(format!("the server does not allow this method on the requested resource ({method})"));
    // A subresource the resource's own code serves (pods/binding, pods/eviction, a workload's
    // scale; a GET of pods/log was served before negotiation).
    if let Some((rest, r)) = subresource_rest(req, api, &t) {
        return match (method, rest) {
            ("POST", SubresourceRest::Create(serve)) => create::create_subresource(req, &body, api, r, serve).await,
            ("GET", SubresourceRest::View(view)) => get::get_view(&t, r.name, view, output).await,
            ("PUT", SubresourceRest::View(view)) => update::update_view(req, &body, &t, r.name, q, view).await,
            ("PATCH", SubresourceRest::View(view)) => patch::patch_view(req, &body, &t, r.name, q, view).await,
            _ => Err(not_allowed()),
        };
    }
    match (method, t.name.as_deref(), t.subresource.as_deref()) {
        ("GET", None, None) => {
            let opts = list_options(q)?;
            if opts.watch {
                return watch::watch(req, &t.registry, t.namespace.as_deref(), &opts, output);
            }
            get::list(&t, q, output).await
        }
        ("GET", Some(name), None | Some("status") | Some("approval")) => get::get(&t, name, output).await,
        ("POST", None, None) => create::create(req, &body, api, &t, q).await,
        ("PUT", Some(name), None | Some("status") | Some("finalize") | Some("approval")) => update::update(req, &body, api, &t, name, q).await,
        ("PATCH", Some(name), None | Some("status") | Some("approval")) => patch::patch(req, &body, api, &t, name, q).await,
        ("DELETE", Some(name), None) => delete::delete(req, &body, api, &t, name, q).await,
        ("DELETE", None, None) => delete::delete_collection(req, &body, api, &t, q).await,
        _ => Err(not_allowed()),
    }
}
