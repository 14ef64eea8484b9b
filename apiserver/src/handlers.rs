//! Mirrors k8s.io/apiserver/pkg/endpoints/handlers: one entry point that routes a request path to
//! a resource (and a namespace, name and subresource), then runs get, list, watch, create,
//! update, patch or delete against that resource's registry.
//!
//! Paths: `/api/v1/...` (the core group) and `/apis/<group>/<version>/...`, then
//! `[namespaces/<ns>/]<resource>[/<name>[/<subresource>]]`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use actix_web::http::header;
use actix_web::{HttpRequest, HttpResponse, web};
use serde_json::{Value, json};
use tracing::Instrument as _;

use crate::error::{Error, Result};
use crate::printers::tablegenerator::{table, table_json};
use crate::registry::generic::options::{DeleteOptions, ListOptions};
use crate::registry::generic::store::{Registry, name_of};
use crate::{Api, watch};

/// Where a request goes.
pub struct Target {
    pub registry: Arc<Registry>,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub subresource: Option<String>,
}

/// Resolves `/api/v1/...` or `/apis/<g>/<v>/...` to a resource of `api`.
pub fn route(api: &Api, path: &str) -> Result<Target> {
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, version, rest) = match segs.as_slice() {
        ["api", v, rest @ ..] => ("", *v, rest),
        ["apis", g, v, rest @ ..] => (*g, *v, rest),
        _ => return Err(Error::NoRoute),
    };
    let find = |plural: &str| api.registry(group, version, plural).ok_or(Error::NoRoute);
    let t = |registry, namespace: Option<&str>, name: Option<&str>, sub: Option<&str>| Target {
        registry,
        namespace: namespace.map(String::from),
        name: name.map(String::from),
        subresource: sub.map(String::from),
    };
    match rest {
        [res] => Ok(t(find(res)?, None, None, None)),
        ["namespaces", ns, res] if api.registry(group, version, res).is_some_and(|r| r.info().namespaced) => {
            Ok(t(find(res)?, Some(ns), None, None))
        }
        ["namespaces", ns, res, name] => Ok(t(find(res)?, Some(ns), Some(name), None)),
        ["namespaces", ns, res, name, sub] => Ok(t(find(res)?, Some(ns), Some(name), Some(sub))),
        [res, name] => Ok(t(find(res)?, None, Some(name), None)),
        [res, name, sub] => Ok(t(find(res)?, None, Some(name), Some(sub))),
        _ => Err(Error::NoRoute),
    }
}

fn query(req: &HttpRequest) -> HashMap<String, String> {
    web::Query::<HashMap<String, String>>::from_query(req.query_string()).map(|q| q.into_inner()).unwrap_or_default()
}

fn list_options(q: &HashMap<String, String>) -> ListOptions {
    let flag = |k: &str| q.get(k).is_some_and(|v| v == "true" || v == "1");
    ListOptions {
        label_selector: q.get("labelSelector").cloned(),
        field_selector: q.get("fieldSelector").cloned(),
        limit: q.get("limit").and_then(|l| l.parse().ok()).unwrap_or(0),
        continue_token: q.get("continue").cloned(),
        resource_version: q.get("resourceVersion").cloned(),
        resource_version_match: q.get("resourceVersionMatch").cloned(),
        watch: flag("watch"),
        allow_watch_bookmarks: flag("allowWatchBookmarks"),
        send_initial_events: flag("sendInitialEvents"),
        timeout_seconds: q.get("timeoutSeconds").and_then(|t| t.parse().ok()),
    }
}

/// Whether the client asked for a `meta.k8s.io/v1` Table.
pub fn wants_table(req: &HttpRequest) -> bool {
    req.headers().get(header::ACCEPT).and_then(|a| a.to_str().ok()).is_some_and(|a| {
        a.split(',').next().is_some_and(|first| first.contains("as=Table"))
    })
}

fn json_response(code: u16, v: &Value, warnings: &[String]) -> HttpResponse {
    let mut b = HttpResponse::build(actix_web::http::StatusCode::from_u16(code).unwrap_or(actix_web::http::StatusCode::OK));
    b.content_type("application/json");
    for w in warnings {
        // A quoted-string (RFC 7234 warn-text): inner quotes are escaped, as kube-apiserver does.
        b.append_header(("Warning", format!("299 - \"{}\"", w.replace('\\', "\\\\").replace('"', "\\\""))));
    }
    b.body(serde_json::to_vec(v).unwrap_or_default())
}

/// Parses a request body as JSON or YAML, by content type.
pub fn parse_body(req: &HttpRequest, body: &[u8]) -> Result<Value> {
    let ct = req.headers().get(header::CONTENT_TYPE).and_then(|c| c.to_str().ok()).unwrap_or("application/json");
    let media = ct.split(';').next().unwrap_or("").trim();
    match media {
        "application/json" | "" | "application/merge-patch+json" | "application/strategic-merge-patch+json" | "application/json-patch+json" => {
            serde_json::from_slice(body).map_err(|e| Error::BadRequest(format!("the body of the request could not be decoded as JSON: {e}")))
        }
        "application/yaml" | "application/apply-patch+yaml" | "application/x-yaml" => {
            serde_norway::from_slice(body).map_err(|e| Error::BadRequest(format!("the body of the request could not be decoded as YAML: {e}")))
        }
        // kubectl's typed generators (`create namespace`, `create configmap`, ...) send protobuf.
        crate::serializer::protobuf::CONTENT_TYPE => crate::serializer::protobuf::decode(body).map_err(|e| {
            if e.is_unsupported() { Error::UnsupportedMediaType(format!("application/json, application/yaml ({e})")) } else { Error::BadRequest(e.to_string()) }
        }),
        other => Err(Error::UnsupportedMediaType(format!("application/json, application/yaml (not {other})"))),
    }
}

/// Checks `apiVersion`/`kind` against the URL and fills them in when absent.
fn check_type(reg: &Registry, obj: &mut Value) -> Result<()> {
    let info = reg.info();
    let api_version = info.api_version();
    let Some(map) = obj.as_object_mut() else { return Err(Error::BadRequest("the body must be an object".into())) };
    match map.get("apiVersion").and_then(Value::as_str) {
        Some(v) if v != api_version => {
            return Err(Error::BadRequest(format!("the API version in the data ({v}) does not match the expected API version ({api_version})")));
        }
        Some(_) => {}
        None => {
            map.insert("apiVersion".into(), json!(api_version));
        }
    }
    match map.get("kind").and_then(Value::as_str) {
        Some(k) if k != info.kind => {
            return Err(Error::BadRequest(format!("{k} in version \"{}\" cannot be handled as a {}: the kind in the data does not match the URL", info.version, info.kind)));
        }
        Some(_) => {}
        None => {
            map.insert("kind".into(), json!(info.kind));
        }
    }
    if !map.get("metadata").is_some_and(Value::is_object) {
        map.insert("metadata".into(), json!({}));
    }
    Ok(())
}

fn check_name_and_namespace(t: &Target, obj: &Value) -> Result<()> {
    if let Some(name) = &t.name {
        let body_name = name_of(obj);
        if !body_name.is_empty() && body_name != name {
            return Err(Error::BadRequest(format!("the name of the object ({body_name}) does not match the name on the URL ({name})")));
        }
    }
    if let (Some(ns), Some(body_ns)) = (&t.namespace, obj.pointer("/metadata/namespace").and_then(Value::as_str))
        && t.registry.info().namespaced
        && !body_ns.is_empty()
        && body_ns != ns
    {
        return Err(Error::BadRequest("the namespace of the provided object does not match the namespace sent on the request".into()));
    }
    Ok(())
}

/// Decodes through the typed object; unknown fields are warnings, or 400 under Strict.
fn decode(reg: &Registry, mut obj: Value, q: &HashMap<String, String>) -> Result<(Value, Vec<String>)> {
    check_type(reg, &mut obj)?;
    let (canonical, unknown) = reg.info().codec.decode(reg.info().kind, obj)?;
    let warnings: Vec<String> = unknown.iter().map(|f| format!("unknown field \"{f}\"")).collect();
    if !warnings.is_empty() && q.get("fieldValidation").map(String::as_str) == Some("Strict") {
        let kind = reg.info().kind;
        return Err(Error::BadRequest(format!("strict decoding error: {}", warnings.join(", ")).replace("strict decoding error", &format!("{kind} in version \"{}\" cannot be handled as a {kind}: strict decoding error", reg.info().version))));
    }
    Ok((canonical, warnings))
}

pub fn dry_run(q: &HashMap<String, String>) -> bool {
    q.get("dryRun").is_some_and(|v| v == "All")
}

/// The single entry point for resource requests.
pub async fn dispatch(req: HttpRequest, payload: web::Payload, api: web::Data<Api>) -> HttpResponse {
    let started = Instant::now();
    // exec and attach take the connection over: what follows their request is the upgraded
    // stream, which must not be read as a body.
    if let Some((ns, name, sub)) = crate::exec::target(&api, req.path()) {
        let resp = crate::exec::serve(&req, payload, &api, &ns, &name, sub).await.unwrap_or_else(|e| json_response(e.code(), &e.to_status(), &[]));
        api.metrics.observe("CONNECT", &format!("pods/{sub}"), resp.status().as_u16(), started.elapsed());
        return resp;
    }
    let body = match read_body(payload, api.options.max_request_bytes).await {
        Ok(b) => b,
        Err(e) => return json_response(e.code(), &e.to_status(), &[]),
    };
    let path = req.path().to_string();
    let verb_hint = req.method().as_str().to_string();
    let (resource, verb, resp) = match route(&api, &path) {
        Ok(t) => {
            let resource = match &t.subresource {
                Some(s) => format!("{}/{}", t.registry.info().plural, s),
                None => t.registry.info().plural.to_string(),
            };
            let verb = verb_of(&req, &t);
            // A request is a step of the pod it writes (`kubelab trace`); the pod's UID is
            // learned when the store write happens (storage.rs). Its spans are at debug level:
            // the step recorder and the exporter take them at any level, and the log output
            // (info by default) would otherwise format their fields for every request.
            let span = tracing::debug_span!(target: "apiserver", "request", verb = %verb, resource = %resource, pod_uid = tracing::field::Empty);
            let resp = handle(&req, body, &api, t).instrument(span).await.unwrap_or_else(|e| json_response(e.code(), &e.to_status(), &[]));
            (resource, verb, resp)
        }
        Err(e) => (String::new(), verb_hint, json_response(e.code(), &e.to_status(), &[])),
    };
    api.metrics.observe(&verb, &resource, resp.status().as_u16(), started.elapsed());
    resp
}

/// Reads the body up to the limit: a larger one is 413 with a Status, and nothing is written.
async fn read_body(mut payload: web::Payload, limit: usize) -> Result<web::Bytes> {
    use futures::StreamExt;
    let mut buf = web::BytesMut::new();
    while let Some(chunk) = payload.next().await {
        let chunk = chunk.map_err(|e| Error::BadRequest(format!("error reading the request body: {e}")))?;
        if buf.len() + chunk.len() > limit {
            return Err(Error::TooLarge(limit));
        }
        buf.extend_from_slice(&chunk);
    }
    Ok(buf.freeze())
}

fn verb_of(req: &HttpRequest, t: &Target) -> String {
    let q = query(req);
    match (req.method().as_str(), t.name.is_some()) {
        ("GET", false) if q.get("watch").is_some_and(|w| w == "true" || w == "1") => "WATCH",
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

async fn handle(req: &HttpRequest, body: web::Bytes, api: &Api, t: Target) -> Result<HttpResponse> {
    let q = query(req);
    let reg = t.registry.clone();
    let info = reg.info();
    let ns = t.namespace.as_deref();
    if info.namespaced && t.name.is_some() && ns.is_none() {
        return Err(Error::NoRoute);
    }
    if let Some(sub) = &t.subresource
        && !info.subresources.iter().any(|s| s.name == sub)
    {
        return Err(Error::NoRoute);
    }
    match (req.method().as_str(), t.name.as_deref(), t.subresource.as_deref()) {
        ("GET", None, None) => {
            let opts = list_options(&q);
            if opts.watch {
                return watch::serve(req, &reg, ns, &opts);
            }
            let list = reg.list(ns, &opts).await?;
            if wants_table(req) {
                let table = table_json(info.printer, &list.items, &list.resource_version, list.continue_token.as_deref(), chrono::Utc::now());
                return Ok(HttpResponse::Ok().content_type("application/json").body(table));
            }
            let mut meta = json!({"resourceVersion": list.resource_version});
            if let Some(c) = &list.continue_token {
                meta["continue"] = json!(c);
            }
            if let Some(r) = list.remaining {
                meta["remainingItemCount"] = json!(r);
            }
            // The items are written straight from the (shared) objects, without a copy.
            let mut body = serde_json::to_vec(&json!({"kind": format!("{}List", info.kind), "apiVersion": info.api_version(), "metadata": meta}))
                .unwrap_or_default();
            body.pop(); // the closing brace: the items follow
            body.extend_from_slice(b",\"items\":[");
            for (i, item) in list.items.iter().enumerate() {
                if i > 0 {
                    body.push(b',');
                }
                serde_json::to_writer(&mut body, &**item).map_err(|e| Error::Internal(e.to_string()))?;
            }
            body.extend_from_slice(b"]}");
            Ok(HttpResponse::Ok().content_type("application/json").body(body))
        }
        ("GET", Some(name), None | Some("status")) => {
            let obj = reg.get(ns, name).await?;
            if wants_table(req) {
                let rv = obj.pointer("/metadata/resourceVersion").and_then(Value::as_str).unwrap_or("").to_string();
                return Ok(json_response(200, &table(info.printer, &[obj], &rv, None, chrono::Utc::now()), &[]));
            }
            Ok(json_response(200, &obj, &[]))
        }
        ("GET", Some(name), Some("log")) => crate::logs::serve(req, api, ns.unwrap_or("default"), name).await,
        ("POST", None, None) => {
            let (obj, warnings) = tracing::debug_span!(target: "apiserver", "decode", pod_uid = tracing::field::Empty).in_scope(|| {
                let obj = parse_body(req, &body)?;
                let (obj, warnings) = decode(&reg, obj, &q)?;
                check_name_and_namespace(&t, &obj)?;
                Ok::<_, Error>((obj, warnings))
            })?;
            // With --otlp-endpoint, the pod carries this request's trace context to the scheduler
            // and the node agent (podtrace::otel); without, it is left as it came.
            let mut obj = obj;
            if info.kind == "Pod" {
                podtrace::otel::annotate(&mut obj);
            }
            if info.namespaced {
                let admission = tracing::debug_span!(target: "apiserver", "admission", check = "NamespaceLifecycle", pod_uid = tracing::field::Empty);
                api.check_namespace_open(ns.unwrap_or("default")).instrument(admission).await?;
            }
            let created = reg.create_with(ns, api.record_managed_fields(obj, None, &q, "Update"), dry_run(&q), &|_| Ok(())).await?;
            // The request names its pod too, so a tracing UI finds the create by `pod_uid`.
            if info.kind == "Pod"
                && let Some(uid) = created.pointer("/metadata/uid").and_then(Value::as_str)
            {
                tracing::Span::current().record("pod_uid", uid);
            }
            if !dry_run(&q) {
                api.after_create(&reg, &created).await;
            }
            Ok(json_response(201, &created, &warnings))
        }
        ("POST", Some(name), Some("binding")) => {
            let binding = parse_body(req, &body)?;
            crate::pods::bind(&reg, ns.unwrap_or("default"), name, &binding).await?;
            Ok(json_response(201, &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}), &[]))
        }
        ("POST", Some(name), Some("eviction")) => {
            let eviction = parse_body(req, &body)?;
            let opts = DeleteOptions::from_json(eviction.get("deleteOptions").unwrap_or(&Value::Null));
            reg.delete(ns, name, &opts).await?;
            Ok(json_response(201, &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}), &[]))
        }
        ("PUT", Some(name), sub @ (None | Some("status") | Some("finalize"))) => {
            let obj = parse_body(req, &body)?;
            let (obj, warnings) = decode(&reg, obj, &q)?;
            check_name_and_namespace(&t, &obj)?;
            let old = reg.get(ns, name).await?;
            let obj = api.record_managed_fields(obj, Some(&old), &q, "Update");
            let updated = reg.update_with(ns, name, obj, sub, dry_run(&q)).await?;
            Ok(json_response(200, &updated, &warnings))
        }
        ("PATCH", Some(name), sub @ (None | Some("status"))) => crate::patch::serve(req, &body, api, &reg, ns, name, sub, &q).await,
        ("DELETE", Some(name), None) => {
            let mut opts = if body.is_empty() { DeleteOptions::default() } else { DeleteOptions::from_json(&parse_body(req, &body)?) };
            if let Some(g) = q.get("gracePeriodSeconds").and_then(|g| g.parse().ok()) {
                opts.grace_period_seconds = Some(g);
            }
            admit_delete(&reg, name)?;
            if dry_run(&q) {
                return Ok(json_response(200, &reg.get(ns, name).await?, &[]));
            }
            let (obj, _gone) = reg.delete(ns, name, &opts).await?;
            Ok(json_response(200, &obj, &[]))
        }
        ("DELETE", None, None) => {
            let opts = if body.is_empty() { DeleteOptions::default() } else { DeleteOptions::from_json(&parse_body(req, &body)?) };
            let list = reg.list(ns, &list_options(&q)).await?;
            let mut deleted = Vec::new();
            for item in list.items {
                if admit_delete(&reg, name_of(&item)).is_err() {
                    continue;
                }
                let item_ns = item.pointer("/metadata/namespace").and_then(Value::as_str).map(String::from);
                match reg.delete(item_ns.as_deref(), name_of(&item), &opts).await {
                    Ok((obj, _)) => deleted.push(obj),
                    Err(Error::NotFound { .. }) => {}
                    Err(e) => return Err(e),
                }
            }
            let v = json!({"kind": format!("{}List", info.kind), "apiVersion": info.api_version(), "metadata": {}, "items": deleted});
            Ok(json_response(200, &v, &[]))
        }
        (m, _, _) => Err(Error::MethodNotAllowed(format!("the server does not allow this method on the requested resource ({m})"))),
    }
}

/// Mirrors the NamespaceLifecycle admission plugin: the namespaces the system lives in may not be
/// deleted.
fn admit_delete(reg: &Registry, name: &str) -> Result<()> {
    if reg.info().kind == "Namespace" && crate::UNDELETABLE_NAMESPACES.contains(&name) {
        return Err(Error::Forbidden(format!("namespaces \"{name}\" is forbidden: this namespace may not be deleted")));
    }
    Ok(())
}

pub fn respond(code: u16, v: &Value, warnings: &[String]) -> HttpResponse {
    json_response(code, v, warnings)
}

pub fn decode_for(reg: &Registry, obj: Value, q: &HashMap<String, String>) -> Result<(Value, Vec<String>)> {
    decode(reg, obj, q)
}

pub fn check_target(t_name: &str, t_ns: Option<&str>, reg: &Arc<Registry>, obj: &Value) -> Result<()> {
    let t = Target { registry: reg.clone(), namespace: t_ns.map(String::from), name: Some(t_name.to_string()), subresource: None };
    check_name_and_namespace(&t, obj)
}
