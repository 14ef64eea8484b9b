//! Mirrors what k8s.io/apiserver/pkg/endpoints/handlers shares between its handlers (rest.go,
//! the response writers, the strict decoder): reading a request — its target,
//! query, body (JSON, YAML or protobuf), options — and writing a response with its warnings.
//! Every handler uses it; it uses no handler.

use std::collections::HashMap;
use std::sync::Arc;

use actix_web::http::header;
use actix_web::{HttpMessage, HttpRequest, HttpResponse, web};
use serde_json::{Value, json};

use crate::authentication::user::UserInfo;
use crate::endpoints::negotiation::Output;
use crate::error::{Error, Result};
use crate::registry::generic::options::{ListOptions, int_param, parse_bool};
use crate::registry::generic::strategy::ResourceInfo;
use crate::registry::generic::store::{Registry, name_of, now_rfc3339};
use crate::serializer::protobuf;

/// Where a request goes: a resource, and in it a namespace, a name and a subresource.
pub struct Target {
    pub registry: Arc<Registry>,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub subresource: Option<String>,
}

/// Which program sent the request: its User-Agent without the version (`kube-scheduler`,
/// `kubelet`, `kubectl`), "unknown" without one. `kubelab trace` draws a request from it and a
/// watch event to it, as the components name themselves (client::client_as).
pub fn client_name(req: &HttpRequest) -> String {
    let agent = req.headers().get(header::USER_AGENT).and_then(|v| v.to_str().ok()).unwrap_or("unknown");
    agent.split('/').next().unwrap_or(agent).to_string()
}

/// The query parameters, the first of each name: Go's `url.Values.Get`, which kube-apiserver's
/// parameter codec reads a single-valued option with, answers the first (`?limit=1&limit=500`
/// lists one).
pub fn query(req: &HttpRequest) -> HashMap<String, String> {
    first_of_each(req.query_string())
}

fn first_of_each(query: &str) -> HashMap<String, String> {
    let pairs = web::Query::<Vec<(String, String)>>::from_query(query).map(|q| q.into_inner()).unwrap_or_default();
    let mut q = HashMap::with_capacity(pairs.len());
    for (name, value) in pairs {
        q.entry(name).or_insert(value);
    }
    q
}

/// Whether a boolean query parameter is on: present, and not false as [`parse_bool`] reads it.
pub fn flag(q: &HashMap<String, String>, name: &str) -> bool {
    q.get(name).is_some_and(|v| parse_bool(v))
}

/// metav1.ListOptions from the query, validated as the list, watch and deletecollection handlers
/// validate them ([`ListOptions::validate`]: a 422). An integer parameter that is not one is a
/// 400, as kube-apiserver's parameter codec (`strconv.ParseInt`) answers: read as absent,
/// `timeoutSeconds=abc` would open a watch that never ends.
pub fn list_options(q: &HashMap<String, String>) -> Result<ListOptions> {
    let opts = ListOptions {
        label_selector: q.get("labelSelector").cloned(),
        field_selector: q.get("fieldSelector").cloned(),
        limit: int_param(q, "limit")?.unwrap_or(0),
        continue_token: q.get("continue").cloned(),
        resource_version: q.get("resourceVersion").cloned(),
        resource_version_match: q.get("resourceVersionMatch").cloned(),
        watch: flag(q, "watch"),
        allow_watch_bookmarks: flag(q, "allowWatchBookmarks"),
        // A `*bool`: present at all, whatever its value, is set.
        send_initial_events: q.get("sendInitialEvents").map(|v| parse_bool(v)),
        // Negative is as good as 0 (Go's timer fires at once).
        timeout_seconds: int_param::<i64>(q, "timeoutSeconds")?.map(|t| t.max(0).unsigned_abs()),
    };
    opts.validate()?;
    Ok(opts)
}

/// `v` as the negotiated `output`: JSON (a Table is JSON too) or YAML.
pub fn respond_as(output: Output, code: u16, v: &Value, warnings: &[String]) -> HttpResponse {
    let resp = respond(code, v, warnings);
    if output != Output::Yaml {
        return resp;
    }
    let mut resp = resp.set_body(serde_norway::to_string(v).unwrap_or_default()).map_into_boxed_body();
    resp.headers_mut().insert(header::CONTENT_TYPE, header::HeaderValue::from_static("application/yaml"));
    resp
}

/// An object, or each item of a list, as `meta.k8s.io/v1` `PartialObjectMetadata`: its metadata
/// only. A Status stays a Status.
pub fn partial_object_metadata(v: &Value) -> Value {
    let kind = v.get("kind").and_then(Value::as_str).unwrap_or("");
    let one = |o: &Value| json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": o.get("metadata").cloned().unwrap_or_else(|| json!({}))});
    match v.get("items").and_then(Value::as_array) {
        _ if kind == "Status" => v.clone(),
        Some(items) if kind.ends_with("List") => json!({
            "kind": "PartialObjectMetadataList",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": v.get("metadata").cloned().unwrap_or_else(|| json!({})),
            "items": items.iter().map(one).collect::<Vec<_>>(),
        }),
        _ => one(v),
    }
}

/// A JSON answer (its head, and its body `json`) rewritten as object metadata only.
pub fn as_partial_object_metadata(head: HttpResponse<()>, json: &[u8]) -> HttpResponse {
    let Ok(v) = serde_json::from_slice::<Value>(json) else { return head.set_body(json.to_vec()).map_into_boxed_body() };
    head.set_body(serde_json::to_vec(&partial_object_metadata(&v)).unwrap_or_default()).map_into_boxed_body()
}

/// A JSON answer (its head, and its body `json`) rewritten as YAML, with the same status and
/// headers. A body that is not JSON is left as it is.
pub fn as_yaml(head: HttpResponse<()>, json: &[u8]) -> HttpResponse {
    let Ok(v) = serde_json::from_slice::<Value>(json) else { return head.set_body(json.to_vec()).map_into_boxed_body() };
    let mut resp = head.set_body(serde_norway::to_string(&v).unwrap_or_default()).map_into_boxed_body();
    resp.headers_mut().insert(header::CONTENT_TYPE, header::HeaderValue::from_static("application/yaml"));
    resp
}

/// A JSON response, with a `Warning` header per warning.
pub fn respond(code: u16, v: &Value, warnings: &[String]) -> HttpResponse {
    let mut b = HttpResponse::build(actix_web::http::StatusCode::from_u16(code).unwrap_or(actix_web::http::StatusCode::OK));
    b.content_type("application/json");
    for w in warning_headers(warnings) {
        b.append_header(("Warning", w));
    }
    b.body(serde_json::to_vec(v).unwrap_or_default())
}

/// The `Warning` header values for `warnings`, as kube-apiserver's warning recorder
/// (endpoints/filters/warning.go) makes them with `net.NewWarningHeader`: `299 - "<text>"`, the
/// text a quoted-string (RFC 7234 warn-text: quotes and backslashes escaped). A warning that is
/// empty, said already, or holds a control character is left out, as the recorder leaves it
/// out: no header may carry one, and an unknown field's name — which a warning quotes — can.
fn warning_headers(warnings: &[String]) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    warnings
        .iter()
        .filter(|w| !w.is_empty() && !w.chars().any(char::is_control) && seen.insert(w.as_str()))
        .map(|w| format!("299 - \"{}\"", w.replace('\\', "\\\\").replace('"', "\\\"")))
        .collect()
}

/// An error as the `metav1.Status` a client reads (with `Retry-After` when it suggests a wait,
/// as kube-apiserver's responsewriters do).
pub fn error_response(e: &Error) -> HttpResponse {
    let mut resp = respond(e.code(), &e.to_status(), &[]);
    if let Some(secs) = e.retry_after_seconds() {
        resp.headers_mut().insert(header::RETRY_AFTER, header::HeaderValue::from(secs));
    }
    resp
}

/// What a subresource create (pods/binding, pods/eviction) answers.
pub fn created_status() -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201})
}

/// How deep `[` and `{` may nest in a YAML body. The YAML parser's time grows with the square
/// of the flow nesting (100,000 levels, 200 KB, held a worker for a minute) and the decoder stops
/// at 128 levels anyway; go-yaml refuses past 10,000 ("exceeded max depth").
const MAX_YAML_FLOW_DEPTH: usize = 1000;

/// The deepest nesting of YAML flow collections (`[`, `{`) in `body`, outside quoted scalars and
/// comments: one pass, before the parser sees it.
fn yaml_flow_depth(body: &[u8]) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    let mut quote: Option<u8> = None;
    let mut comment = false;
    let mut prev = b'\n';
    let mut bytes = body.iter().copied();
    while let Some(b) = bytes.next() {
        match (quote, b) {
            _ if comment => comment = b != b'\n',
            (Some(b'"'), b'\\') => {
                bytes.next();
            }
            (Some(q), _) if b == q => quote = None,
            (Some(_), _) => {}
            (None, b'"' | b'\'') => quote = Some(b),
            (None, b'#') if prev.is_ascii_whitespace() => comment = true,
            (None, b'[' | b'{') => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            (None, b']' | b'}') => depth = depth.saturating_sub(1),
            _ => {}
        }
        prev = b;
    }
    deepest
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
            let yaml_error = |e: &dyn std::fmt::Display| Error::BadRequest(format!("the body of the request could not be decoded as YAML: {e}"));
            if yaml_flow_depth(body) > MAX_YAML_FLOW_DEPTH {
                return Err(yaml_error(&format!("exceeded max depth of {MAX_YAML_FLOW_DEPTH}")));
            }
            serde_norway::from_slice(body).map_err(|e| yaml_error(&e))
        }
        // kubectl's typed generators (`create namespace`, `create configmap`, ...) send protobuf.
        protobuf::CONTENT_TYPE => protobuf::decode(body).map_err(|e| {
            if e.is_unsupported() { Error::UnsupportedMediaType(format!("application/json, application/yaml ({e})")) } else { Error::BadRequest(e.to_string()) }
        }),
        other => Err(Error::UnsupportedMediaType(format!("application/json, application/yaml (not {other})"))),
    }
}

/// The request's user, as authentication left it with the request (`request.UserFrom`).
pub fn request_user(req: &HttpRequest) -> Result<Arc<UserInfo>> {
    req.extensions().get::<Arc<UserInfo>>().cloned().ok_or_else(|| Error::BadRequest("no user present on request".into()))
}

/// Checks `apiVersion`/`kind` against the URL and fills them in when absent.
fn check_type(info: &ResourceInfo, obj: &mut Value) -> Result<()> {
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

/// The body's name and namespace, when it has them, must be the URL's.
pub fn check_name_and_namespace(t: &Target, obj: &Value) -> Result<()> {
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
pub fn decode(reg: &Registry, obj: Value, q: &HashMap<String, String>) -> Result<(Value, Vec<String>)> {
    decode_as(reg.info(), obj, q)
}

/// [`decode`] as one resource's object (a create-only resource has no store).
pub fn decode_as(info: &ResourceInfo, mut obj: Value, q: &HashMap<String, String>) -> Result<(Value, Vec<String>)> {
    check_type(info, &mut obj)?;
    let (canonical, unknown) = info.codec.decode(info.kind, obj)?;
    let warnings: Vec<String> = unknown.iter().map(|f| format!("unknown field \"{f}\"")).collect();
    if !warnings.is_empty() && q.get("fieldValidation").map(String::as_str) == Some("Strict") {
        let kind = info.kind;
        return Err(Error::BadRequest(format!("strict decoding error: {}", warnings.join(", ")).replace("strict decoding error", &format!("{kind} in version \"{}\" cannot be handled as a {kind}: strict decoding error", info.version))));
    }
    Ok((canonical, warnings))
}

/// The manager a non-apply write is recorded under: `fieldManager` when given, else the
/// client's User-Agent up to its first `/` (at most 128 characters), as kube-apiserver's
/// prefixFromUserAgent does — so a controller's creates and updates are recorded as
/// `kube-controller-manager`'s. None without either.
pub fn field_manager(req: &HttpRequest, q: &HashMap<String, String>) -> Option<String> {
    if let Some(m) = q.get("fieldManager").filter(|m| !m.is_empty()) {
        return Some(m.clone());
    }
    let agent = req.headers().get(header::USER_AGENT).and_then(|v| v.to_str().ok())?;
    let prefix: String = agent.split('/').next().unwrap_or(agent).chars().take(128).collect();
    (!prefix.is_empty()).then_some(prefix)
}

/// Records who wrote which fields (metadata.managedFields) for a non-apply write.
pub fn record_managed_fields(mut obj: Value, old: Option<&Value>, manager: Option<&str>, operation: &str) -> Value {
    if let Some(manager) = manager {
        apimachinery::managedfields::update_managed_fields(old, &mut obj, manager, operation, &now_rfc3339());
    }
    obj
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn a_repeated_query_parameter_counts_once_with_its_first_value() {
        let got = first_of_each("limit=1&limit=500&watch=true&labelSelector=a%3Db&watch=false");
        assert_eq!(got, q(&[("limit", "1"), ("watch", "true"), ("labelSelector", "a=b")]));
        assert_eq!(list_options(&got).unwrap().limit, 1);
    }

    #[test]
    fn yaml_nested_too_deep_is_refused_before_it_is_parsed() {
        // What the fuzzing found: `metadata: [[[…]]]` 100,000 deep took the YAML parser a minute.
        for (yaml, depth) in [
            ("a: 1", 0),
            ("a: [1, {b: [2]}]", 3),
            ("a: '[[[' # [[[[\nb: \"{{\\\"[\"", 0),
            ("a: x#[\nb: [c]", 2),
            ("a: [[]]\nb: [[[]]]", 3),
        ] {
            assert_eq!(yaml_flow_depth(yaml.as_bytes()), depth, "{yaml}");
        }
        let deep = format!("metadata: {}{}", "[".repeat(100_000), "]".repeat(100_000));
        let started = std::time::Instant::now();
        assert_eq!(yaml_flow_depth(deep.as_bytes()), 100_000);
        assert!(started.elapsed() < std::time::Duration::from_secs(1));
        let req = actix_web::test::TestRequest::default().insert_header((header::CONTENT_TYPE, "application/yaml")).to_http_request();
        let e = parse_body(&req, deep.as_bytes()).expect_err("too deep");
        assert_eq!((e.code(), e.to_string().as_str()), (400, "the body of the request could not be decoded as YAML: exceeded max depth of 1000"));
        let fine = format!("a: {}1{}", "[".repeat(10), "]".repeat(10));
        assert!(parse_body(&req, fine.as_bytes()).is_ok());
    }

    #[test]
    fn a_warning_with_a_control_character_is_left_out_not_a_500() {
        // What the fuzzing found: a review whose body had an unknown field named with a control
        // character was answered 500 "failed to parse header value" (the warning quoting the
        // name made an invalid header); kube-apiserver's NewWarningHeader refuses such a text and
        // the recorder drops the warning.
        let warnings = ["unknown field \"\u{14}x\"", "unknown field \"a\"", "unknown field \"a\"", "unknown field \"\u{85}\"", "", "unknown field \"\u{b9}\\\""].map(String::from);
        let resp = respond(201, &json!({"kind": "SelfSubjectReview"}), &warnings);
        assert_eq!(resp.status().as_u16(), 201);
        let sent: Vec<&str> = resp.headers().get_all("Warning").filter_map(|v| std::str::from_utf8(v.as_bytes()).ok()).collect();
        assert_eq!(sent, [r#"299 - "unknown field \"a\"""#, "299 - \"unknown field \\\"\u{b9}\\\\\\\"\""]);
    }

    #[test]
    fn boolean_query_parameters_are_read_as_kube_apiserver_reads_them() {
        // What the fuzzing found: `watch=yes` and `watch=` were read as false (kubelab used Go's
        // strconv.ParseBool); kube-apiserver's codec reads only "0" and "false" as false.
        for (value, want) in [
            ("true", true),
            ("True", true),
            ("1", true),
            ("t", true),
            ("yes", true),
            ("maybe", true),
            ("", true),
            ("false", false),
            ("False", false),
            ("FALSE", false),
            ("0", false),
            ("f", true),
            ("00", true),
        ] {
            assert_eq!(parse_bool(value), want, "{value:?}");
            let opts = list_options(&q(&[("watch", value), ("allowWatchBookmarks", value)])).expect("a boolean never fails");
            assert_eq!((opts.watch, opts.allow_watch_bookmarks), (want, want), "{value:?}");
        }
        assert!(!flag(&q(&[]), "watch"), "absent is false");
        let opts = list_options(&q(&[("watch", "1"), ("sendInitialEvents", "false"), ("resourceVersionMatch", "NotOlderThan")])).expect("valid");
        assert_eq!(opts.send_initial_events, Some(false), "set to false is not unset");
        assert_eq!(list_options(&q(&[("watch", "1")])).expect("valid").send_initial_events, None);
    }

    #[test]
    fn list_options_with_an_unknown_resource_version_match_are_a_422() {
        let e = list_options(&q(&[("resourceVersion", "5"), ("resourceVersionMatch", "Bogus")])).expect_err("Bogus");
        assert_eq!((e.code(), e.reason()), (422, "Invalid"));
        assert_eq!(e.to_string(), r#"ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Unsupported value: "Bogus": supported values: "Exact", "NotOlderThan", """#);
        let e = list_options(&q(&[("watch", "true"), ("resourceVersionMatch", "NotOlderThan")])).expect_err("a match on a watch needs sendInitialEvents");
        assert_eq!(e.code(), 422);
        // An integer that does not parse is the codec's 400, before validation.
        let e = list_options(&q(&[("limit", "x"), ("resourceVersionMatch", "Bogus")])).expect_err("both");
        assert_eq!(e.code(), 400);
    }

    #[test]
    fn integer_list_options_that_are_not_integers_are_a_400() {
        // What the fuzzing found: `watch=true&timeoutSeconds=abc` was read as no timeout and
        // opened a watch that never ended; kube-apiserver answers 400.
        for (name, value) in [("limit", "abc"), ("timeoutSeconds", "abc"), ("timeoutSeconds", "1.5"), ("limit", "99999999999999999999")] {
            let e = list_options(&q(&[(name, value)])).err().unwrap_or_else(|| panic!("{name}={value} was accepted"));
            assert_eq!((e.code(), e.reason()), (400, "BadRequest"), "{name}={value}");
            assert_eq!(e.to_string(), format!("strconv.ParseInt: parsing \"{value}\": invalid syntax"));
        }
        let ok = list_options(&q(&[("limit", "-1"), ("timeoutSeconds", "-5")])).expect("negative integers are integers");
        assert_eq!((ok.limit, ok.timeout_seconds), (-1, Some(0)));
        let ok = list_options(&q(&[("limit", ""), ("timeoutSeconds", "18446744073709551615")]));
        assert!(ok.is_err(), "past i64: {:?}", ok.map(|o| o.timeout_seconds));
        let ok = list_options(&q(&[("limit", ""), ("timeoutSeconds", "9223372036854775807")])).expect("i64::MAX");
        assert_eq!((ok.limit, ok.timeout_seconds), (0, Some(i64::MAX as u64)));
    }
}
