//! Mirrors k8s.io/kube-openapi's v2 builder and handler (pkg/builder, pkg/handler): `GET
//! /openapi/v2`, the whole API in one Swagger 2.0 document, as JSON or as the gnostic
//! `openapi.v2.Document` protobuf message kubectl asks for. It is a rendering of the same
//! [`Spec`] as `/openapi/v3`: definitions under `#/definitions/`, each operation with its
//! `x-kubernetes-action` and `x-kubernetes-group-version-kind`.
//!
//! 1. Negotiate: the first media range of `Accept` (best first) that names JSON or one of the two
//!    protobuf media types wins; `*/*` (and no `Accept`) means JSON; nothing acceptable is a bare
//!    406, as kube-openapi answers.
//! 2. Render the document and its ETag (a hash of the JSON form, shared by both encodings).
//! 3. `If-None-Match` naming that ETag answers 304 with no body.

use actix_web::http::{StatusCode, header};
use actix_web::{HttpRequest, HttpResponse, web};
use proto::openapi_v2 as pb;
use serde_json::{Map, Value, json};

use super::negotiation::parse_accept;
use super::openapi::{In, INFO_VERSION, Operation, Param, Spec, V3_REF_PREFIX, served, spec};
use crate::config::Api;

/// Where a v2 document's references point.
pub const V2_REF_PREFIX: &str = "#/definitions/";
/// The media type kubectl asks for (kube-openapi calls it deprecated, and still serves it).
pub const MIME_PROTOBUF_DEPRECATED: &str = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf";
/// The protobuf media type kube-openapi answers with, whichever of the two was asked for.
pub const MIME_PROTOBUF: &str = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";
pub const MIME_JSON: &str = "application/json";

/// The encodings `/openapi/v2` serves, in kube-openapi's order of preference for wildcards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    Json,
    Protobuf,
}

const ACCEPTED: &[(&str, &str, Encoding)] = &[
    ("application", "json", Encoding::Json),
    ("application", "com.github.proto-openapi.spec.v2@v1.0+protobuf", Encoding::Protobuf),
    ("application", "com.github.proto-openapi.spec.v2.v1.0+protobuf", Encoding::Protobuf),
];

/// Step 1: the encoding `accept` asks for, None when it names nothing served. Media ranges are
/// tried best first ([`parse_accept`]: by quality, then in the client's order; `q=0` refuses).
pub fn negotiate(accept: Option<&str>) -> Option<Encoding> {
    parse_accept(accept).iter().find_map(|range| {
        let matches = |t: &str, s: &str| (range.type_ == "*" || range.type_ == t) && (range.subtype == "*" || range.subtype == s);
        ACCEPTED.iter().find(|(t, s, _)| matches(t, s)).map(|(_, _, e)| *e)
    })
}

/// `GET /openapi/v2`
pub async fn serve(req: HttpRequest, api: web::Data<Api>) -> HttpResponse {
    // Step 1
    let accept = req.headers().get(header::ACCEPT).and_then(|a| a.to_str().ok());
    let Some(encoding) = negotiate(accept) else {
        return HttpResponse::build(StatusCode::NOT_ACCEPTABLE).insert_header((header::VARY, "Accept")).finish();
    };
    // Step 2: the document is rendered on a blocking thread: it is some hundreds of kilobytes.
    let served_api = api.clone();
    let rendered = web::block(move || {
        let doc = render(&spec(&served(&served_api), |_, _| true));
        let json = serde_json::to_vec(&doc).unwrap_or_default();
        let etag = etag(&json);
        let body = match encoding {
            Encoding::Json => json,
            Encoding::Protobuf => prost::Message::encode_to_vec(&to_proto(&doc)),
        };
        (etag, body)
    })
    .await;
    let Ok((etag, body)) = rendered else {
        return HttpResponse::ServiceUnavailable().finish();
    };
    let content_type = match encoding {
        Encoding::Json => MIME_JSON,
        Encoding::Protobuf => MIME_PROTOBUF,
    };
    // Step 3
    let matches = req.headers().get_all(header::IF_NONE_MATCH).filter_map(|v| v.to_str().ok()).flat_map(|v| v.split(',')).any(|t| {
        let t = t.trim();
        t == "*" || t.strip_prefix("W/").unwrap_or(t) == etag
    });
    let mut resp = if matches { HttpResponse::NotModified() } else { HttpResponse::Ok() };
    resp.insert_header((header::VARY, "Accept")).insert_header((header::ETAG, etag));
    if matches {
        return resp.finish();
    }
    resp.content_type(content_type).body(body)
}

/// A strong ETag of `data`: FNV-1a, 128 bits as two 64-bit halves, quoted. (kube-openapi uses
/// SHA-512; any stable hash of the document serves as a cache validator.)
pub fn etag(data: &[u8]) -> String {
    let fnv = |basis: u64| data.iter().fold(basis, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3));
    format!("\"{:016X}{:016X}\"", fnv(0xcbf2_9ce4_8422_2325), fnv(0x6c62_272e_07bb_0142))
}

/// The Swagger 2.0 rendering of `spec`.
pub fn render(spec: &Spec) -> Value {
    let mut paths = Map::new();
    for (path, ops) in &spec.paths {
        let item: Map<String, Value> = ops.iter().map(|op| (op.method.to_string(), operation(op))).collect();
        paths.insert(path.clone(), Value::Object(item));
    }
    let definitions: Map<String, Value> = spec.schemas.iter().map(|(k, v)| (k.clone(), schema(v))).collect();
    json!({
        "swagger": "2.0",
        "info": {"title": "Kubernetes (kubelab)", "version": INFO_VERSION},
        "paths": paths,
        "definitions": definitions,
    })
}

fn reference(name: &str) -> Value {
    json!({"$ref": format!("{V2_REF_PREFIX}{name}")})
}

fn param(p: &Param) -> Value {
    let location = match p.location {
        In::Path => "path",
        In::Query => "query",
    };
    let mut v = json!({"name": p.name, "in": location, "type": p.ty, "uniqueItems": true});
    if !p.description.is_empty() {
        v["description"] = json!(p.description);
    }
    if p.location == In::Path {
        v["required"] = json!(true);
    }
    v
}

fn operation(op: &Operation) -> Value {
    let mut params: Vec<Value> = op.params.iter().map(param).collect();
    if let Some(b) = &op.body {
        params.push(json!({"name": "body", "in": "body", "required": true, "schema": reference(b)}));
    }
    let mut ok = json!({"description": "OK"});
    if let Some(r) = &op.response {
        ok["schema"] = reference(r);
    }
    let tag = format!("{}_{}", if op.gvk.group.is_empty() { "core" } else { op.gvk.group.split('.').next().unwrap_or_default() }, op.gvk.version);
    json!({
        "operationId": op.operation_id,
        "consumes": ["*/*"],
        "produces": ["application/json", "application/yaml", "application/vnd.kubernetes.protobuf"],
        "schemes": ["https"],
        "tags": [tag],
        "parameters": params,
        "responses": {"200": ok, "401": {"description": "Unauthorized"}},
        "x-kubernetes-action": op.action,
        "x-kubernetes-group-version-kind": op.gvk.to_json(),
    })
}

/// A v3 schema as v2 writes it: references under `#/definitions/`, a reference with a
/// description as `$ref` beside it (v3 must wrap it in `allOf`), and an int-or-string as the
/// string of format `int-or-string` Kubernetes' v2 documents give it.
pub fn schema(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut out = Map::new();
            for (k, v) in m {
                match (k.as_str(), v) {
                    ("$ref", Value::String(r)) => {
                        out.insert(k.clone(), json!(r.replacen(V3_REF_PREFIX, V2_REF_PREFIX, 1)));
                    }
                    ("allOf", Value::Array(all)) if all.len() == 1 && all[0].get("$ref").is_some() => {
                        if let Some(r) = schema(&all[0]).get("$ref") {
                            out.insert("$ref".into(), r.clone());
                        }
                    }
                    // v3-only keywords have no v2 form.
                    ("nullable" | "oneOf" | "anyOf" | "not", _) => {}
                    _ => {
                        out.insert(k.clone(), schema(v));
                    }
                }
            }
            if out.get("x-kubernetes-int-or-string") == Some(&json!(true)) && !out.contains_key("type") {
                out.insert("type".into(), json!("string"));
                out.insert("format".into(), json!("int-or-string"));
            }
            Value::Object(out)
        }
        Value::Array(a) => Value::Array(a.iter().map(schema).collect()),
        other => other.clone(),
    }
}

// ---------------------------------------------------------------------------------------------
// The protobuf form: the JSON document, field by field, into gnostic's messages.

fn s(v: &Value, key: &str) -> String {
    v.get(key).and_then(Value::as_str).unwrap_or_default().to_string()
}

fn strings(v: &Value, key: &str) -> Vec<String> {
    v.get(key).and_then(Value::as_array).map(|a| a.iter().filter_map(|x| x.as_str().map(String::from)).collect()).unwrap_or_default()
}

/// A value gnostic keeps as YAML text (JSON is YAML).
fn any(v: &Value) -> pb::Any {
    pb::Any { value: None, yaml: v.to_string() }
}

/// The `x-…` members of `v`.
fn extensions(v: &Value) -> Vec<pb::NamedAny> {
    v.as_object()
        .map(|m| m.iter().filter(|(k, _)| k.starts_with("x-")).map(|(k, v)| pb::NamedAny { name: k.clone(), value: Some(any(v)) }).collect())
        .unwrap_or_default()
}

fn f64_of(v: &Value, key: &str) -> f64 {
    v.get(key).and_then(Value::as_f64).unwrap_or_default()
}

fn i64_of(v: &Value, key: &str) -> i64 {
    v.get(key).and_then(Value::as_i64).unwrap_or_default()
}

fn bool_of(v: &Value, key: &str) -> bool {
    v.get(key).and_then(Value::as_bool).unwrap_or_default()
}

/// A v2 JSON schema as gnostic's `Schema`.
pub fn schema_proto(v: &Value) -> pb::Schema {
    let ty = match v.get("type") {
        Some(Value::String(t)) => Some(pb::TypeItem { value: vec![t.clone()] }),
        Some(Value::Array(_)) => Some(pb::TypeItem { value: strings(v, "type") }),
        _ => None,
    };
    let items = match v.get("items") {
        Some(Value::Array(a)) => Some(pb::ItemsItem { schema: a.iter().map(schema_proto).collect() }),
        Some(i @ Value::Object(_)) => Some(pb::ItemsItem { schema: vec![schema_proto(i)] }),
        _ => None,
    };
    let additional_properties = match v.get("additionalProperties") {
        Some(Value::Bool(b)) => Some(pb::AdditionalPropertiesItem { oneof: Some(pb::additional_properties_item::Oneof::Boolean(*b)) }),
        Some(a @ Value::Object(_)) => Some(pb::AdditionalPropertiesItem { oneof: Some(pb::additional_properties_item::Oneof::Schema(schema_proto(a))) }),
        _ => None,
    };
    let properties = v.get("properties").and_then(Value::as_object).map(|p| pb::Properties {
        additional_properties: p.iter().map(|(k, v)| pb::NamedSchema { name: k.clone(), value: Some(schema_proto(v)) }).collect(),
    });
    pb::Schema {
        r#ref: s(v, "$ref"),
        format: s(v, "format"),
        title: s(v, "title"),
        description: s(v, "description"),
        default: v.get("default").map(any),
        multiple_of: f64_of(v, "multipleOf"),
        maximum: f64_of(v, "maximum"),
        exclusive_maximum: bool_of(v, "exclusiveMaximum"),
        minimum: f64_of(v, "minimum"),
        exclusive_minimum: bool_of(v, "exclusiveMinimum"),
        max_length: i64_of(v, "maxLength"),
        min_length: i64_of(v, "minLength"),
        pattern: s(v, "pattern"),
        max_items: i64_of(v, "maxItems"),
        min_items: i64_of(v, "minItems"),
        unique_items: bool_of(v, "uniqueItems"),
        max_properties: i64_of(v, "maxProperties"),
        min_properties: i64_of(v, "minProperties"),
        required: strings(v, "required"),
        r#enum: v.get("enum").and_then(Value::as_array).map(|a| a.iter().map(any).collect()).unwrap_or_default(),
        additional_properties: additional_properties.map(Box::new),
        r#type: ty,
        items,
        all_of: v.get("allOf").and_then(Value::as_array).map(|a| a.iter().map(schema_proto).collect()).unwrap_or_default(),
        properties,
        discriminator: s(v, "discriminator"),
        read_only: bool_of(v, "readOnly"),
        example: v.get("example").map(any),
        vendor_extension: extensions(v),
    }
}

fn param_proto(p: &Value) -> pb::ParametersItem {
    use pb::non_body_parameter::Oneof as NonBody;
    let parameter = if s(p, "in") == "body" {
        pb::parameter::Oneof::BodyParameter(pb::BodyParameter {
            description: s(p, "description"),
            name: s(p, "name"),
            r#in: s(p, "in"),
            required: bool_of(p, "required"),
            schema: p.get("schema").map(schema_proto),
            vendor_extension: extensions(p),
        })
    } else {
        let sub = if s(p, "in") == "path" {
            NonBody::PathParameterSubSchema(pb::PathParameterSubSchema {
                required: bool_of(p, "required"),
                r#in: s(p, "in"),
                description: s(p, "description"),
                name: s(p, "name"),
                r#type: s(p, "type"),
                unique_items: bool_of(p, "uniqueItems"),
                vendor_extension: extensions(p),
                ..Default::default()
            })
        } else {
            NonBody::QueryParameterSubSchema(pb::QueryParameterSubSchema {
                required: bool_of(p, "required"),
                r#in: s(p, "in"),
                description: s(p, "description"),
                name: s(p, "name"),
                r#type: s(p, "type"),
                unique_items: bool_of(p, "uniqueItems"),
                vendor_extension: extensions(p),
                ..Default::default()
            })
        };
        pb::parameter::Oneof::NonBodyParameter(pb::NonBodyParameter { oneof: Some(sub) })
    };
    pb::ParametersItem { oneof: Some(pb::parameters_item::Oneof::Parameter(pb::Parameter { oneof: Some(parameter) })) }
}

fn operation_proto(op: &Value) -> pb::Operation {
    let responses = op.get("responses").and_then(Value::as_object).map(|r| pb::Responses {
        response_code: r
            .iter()
            .map(|(code, resp)| pb::NamedResponseValue {
                name: code.clone(),
                value: Some(pb::ResponseValue {
                    oneof: Some(pb::response_value::Oneof::Response(pb::Response {
                        description: s(resp, "description"),
                        schema: resp.get("schema").map(|sc| pb::SchemaItem { oneof: Some(pb::schema_item::Oneof::Schema(schema_proto(sc))) }),
                        ..Default::default()
                    })),
                }),
            })
            .collect(),
        vendor_extension: Vec::new(),
    });
    pb::Operation {
        tags: strings(op, "tags"),
        summary: s(op, "summary"),
        description: s(op, "description"),
        operation_id: s(op, "operationId"),
        produces: strings(op, "produces"),
        consumes: strings(op, "consumes"),
        parameters: op.get("parameters").and_then(Value::as_array).map(|a| a.iter().map(param_proto).collect()).unwrap_or_default(),
        responses,
        schemes: strings(op, "schemes"),
        deprecated: bool_of(op, "deprecated"),
        vendor_extension: extensions(op),
    }
}

/// The v2 JSON document as gnostic's `Document` (what kubectl decodes).
pub fn to_proto(doc: &Value) -> pb::Document {
    let path_items = doc.get("paths").and_then(Value::as_object).map(|p| {
        p.iter()
            .map(|(path, item)| {
                let op = |m: &str| item.get(m).map(operation_proto);
                pb::NamedPathItem {
                    name: path.clone(),
                    value: Some(pb::PathItem { get: op("get"), put: op("put"), post: op("post"), delete: op("delete"), patch: op("patch"), ..Default::default() }),
                }
            })
            .collect()
    });
    let definitions = doc.get("definitions").and_then(Value::as_object).map(|d| pb::Definitions {
        additional_properties: d.iter().map(|(k, v)| pb::NamedSchema { name: k.clone(), value: Some(schema_proto(v)) }).collect(),
    });
    let info = doc.get("info").map(|i| pb::Info { title: s(i, "title"), version: s(i, "version"), description: s(i, "description"), ..Default::default() });
    pb::Document {
        swagger: s(doc, "swagger"),
        info,
        paths: path_items.map(|path| pb::Paths { vendor_extension: Vec::new(), path }),
        definitions,
        vendor_extension: extensions(doc),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::endpoints::openapi::Served;
    use crate::registry::coordination::lease::strategy::LEASES;
    use crate::registry::core::configmap::strategy::CONFIGMAPS;
    use crate::registry::core::event::strategy::EVENTS;
    use crate::registry::core::namespace::strategy::NAMESPACES;
    use crate::registry::core::node::strategy::NODES;
    use crate::registry::core::pod;
    use crate::registry::core::pod::strategy::PODS;
    use crate::registry::core::secret::strategy::SECRETS;
    use crate::registry::core::serviceaccount::strategy::SERVICEACCOUNTS;
    use prost::Message;

    /// What the server serves (server.rs's `resources`, without the stores).
    fn all_served() -> Vec<Served<'static>> {
        [&NAMESPACES, &PODS, &NODES, &EVENTS, &CONFIGMAPS, &SECRETS, &SERVICEACCOUNTS, &LEASES]
            .into_iter()
            .map(|info| Served { info, subresources: if std::ptr::eq(info, &PODS) { pod::storage::SUBRESOURCES } else { &[] }, create_only: false })
            .collect()
    }

    fn document() -> Value {
        render(&spec(&all_served(), |_, _| true))
    }

    fn refs<'a>(v: &'a Value, out: &mut Vec<&'a str>) {
        match v {
            Value::Object(m) => {
                if let Some(Value::String(r)) = m.get("$ref") {
                    out.push(r);
                }
                m.values().for_each(|v| refs(v, out));
            }
            Value::Array(a) => a.iter().for_each(|v| refs(v, out)),
            _ => {}
        }
    }

    #[test]
    fn every_ref_resolves_to_a_definition() {
        let doc = document();
        let mut all = Vec::new();
        refs(&doc, &mut all);
        assert!(all.len() > 100, "a document with references: {}", all.len());
        for r in all {
            let name = r.strip_prefix(V2_REF_PREFIX).unwrap_or_else(|| panic!("{r} is not under #/definitions/"));
            assert!(doc["definitions"].get(name).is_some(), "{r} has no definition");
        }
        assert!(!doc.to_string().contains("#/components/"), "no v3 reference is left");
        assert!(!doc.to_string().contains("\"allOf\""), "references with a description are plain $refs in v2");
    }

    #[test]
    fn every_served_kind_has_a_definition_with_its_gvk() {
        let doc = document();
        let defs = doc["definitions"].as_object().expect("definitions");
        let has = |group: &str, version: &str, kind: &str| {
            defs.values().any(|d| d["x-kubernetes-group-version-kind"].as_array().is_some_and(|g| g.contains(&json!({"group": group, "version": version, "kind": kind}))))
        };
        for s in all_served() {
            let i = s.info;
            assert!(has(i.group, i.version, i.kind), "{} has no definition", i.kind);
            assert!(has(i.group, i.version, &format!("{}List", i.kind)), "{}List has no definition", i.kind);
            for sub in i.subresources.iter().filter(|s| !s.kind.ends_with("Options")) {
                assert!(has(sub.group, sub.version, sub.kind), "{}/{}: {} has no definition", i.plural, sub.name, sub.kind);
            }
        }
        assert_eq!(defs["io.k8s.api.core.v1.Pod"]["x-kubernetes-group-version-kind"], json!([{"group": "", "version": "v1", "kind": "Pod"}]));
        assert_eq!(defs["io.k8s.api.policy.v1.Eviction"]["x-kubernetes-group-version-kind"], json!([{"group": "policy", "version": "v1", "kind": "Eviction"}]));
        assert!(defs["io.k8s.api.core.v1.Pod"].get("required").is_none(), "metadata is not required, as in Kubernetes");
    }

    #[test]
    fn every_operation_names_its_action_and_kind() {
        let doc = document();
        let paths = doc["paths"].as_object().expect("paths");
        let mut ids = std::collections::BTreeSet::new();
        for (path, item) in paths {
            for (method, op) in item.as_object().expect("path item") {
                assert!(op["x-kubernetes-action"].is_string(), "{method} {path}: action");
                assert!(op["x-kubernetes-group-version-kind"]["kind"].is_string(), "{method} {path}: gvk");
                assert!(ids.insert(op["operationId"].as_str().expect("id").to_string()), "{method} {path}: operationId {} is not unique", op["operationId"]);
            }
        }
        let op = |path: &str, method: &str| paths[path][method].clone();
        let pods = "/api/v1/namespaces/{namespace}/pods";
        assert_eq!(op(pods, "get")["x-kubernetes-action"], "list");
        assert_eq!(op(pods, "get")["operationId"], "listCoreV1NamespacedPod");
        assert_eq!(op(pods, "get")["responses"]["200"]["schema"]["$ref"], "#/definitions/io.k8s.api.core.v1.PodList");
        assert_eq!(op(pods, "delete")["x-kubernetes-action"], "deletecollection");
        assert_eq!(op("/api/v1/pods", "get")["operationId"], "listCoreV1PodForAllNamespaces");
        let patch = op(&format!("{pods}/{{name}}"), "patch");
        assert!(patch["parameters"].as_array().expect("params").iter().any(|p| p["name"] == "fieldValidation" && p["in"] == "query"), "kubectl looks for fieldValidation on the patch operation");
        let eviction = op(&format!("{pods}/{{name}}/eviction"), "post");
        assert_eq!(eviction["x-kubernetes-group-version-kind"], json!({"group": "policy", "version": "v1", "kind": "Eviction"}));
        assert_eq!(eviction["operationId"], "createCoreV1NamespacedPodEviction", "named by the path's group-version");
        assert_eq!(eviction["parameters"].as_array().and_then(|p| p.last()).map(|b| b["schema"]["$ref"].clone()), Some(json!("#/definitions/io.k8s.api.policy.v1.Eviction")));
        assert_eq!(op(&format!("{pods}/{{name}}/exec"), "get")["x-kubernetes-action"], "connect");
        assert_eq!(op("/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}", "put")["operationId"], "replaceCoordinationV1NamespacedLease");
        assert!(paths.get("/api/v1/nodes/{name}/status").is_some_and(|p| p.get("patch").is_some()));
    }

    #[test]
    fn lists_carry_their_patch_strategy() {
        let doc = document();
        let d = &doc["definitions"];
        let prop = |def: &str, p: &str| d[def]["properties"][p].clone();
        assert_eq!(prop("io.k8s.api.core.v1.PodSpec", "containers")["x-kubernetes-patch-merge-key"], "name");
        assert_eq!(prop("io.k8s.api.core.v1.PodSpec", "containers")["x-kubernetes-patch-strategy"], "merge");
        assert_eq!(prop("io.k8s.api.core.v1.Container", "ports")["x-kubernetes-patch-merge-key"], "containerPort");
        assert_eq!(prop("io.k8s.api.core.v1.Container", "env")["x-kubernetes-patch-merge-key"], "name");
        assert_eq!(prop("io.k8s.api.core.v1.NodeStatus", "addresses")["x-kubernetes-patch-merge-key"], "type");
        assert_eq!(prop("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta", "finalizers")["x-kubernetes-patch-strategy"], "merge");
        assert!(prop("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta", "finalizers").get("x-kubernetes-patch-merge-key").is_none());
        assert!(prop("io.k8s.api.core.v1.PodSpec", "tolerations").get("x-kubernetes-patch-strategy").is_none(), "replaced whole");
        assert!(prop("io.k8s.api.core.v1.NodeSpec", "taints").get("x-kubernetes-patch-strategy").is_none(), "replaced whole");
    }

    #[test]
    fn v3_schemas_become_v2_schemas() {
        let cases = [
            (json!({"$ref": "#/components/schemas/A"}), json!({"$ref": "#/definitions/A"})),
            (json!({"allOf": [{"$ref": "#/components/schemas/A"}], "description": "d"}), json!({"$ref": "#/definitions/A", "description": "d"})),
            (json!({"type": "array", "items": {"$ref": "#/components/schemas/A"}}), json!({"type": "array", "items": {"$ref": "#/definitions/A"}})),
            (json!({"x-kubernetes-int-or-string": true}), json!({"x-kubernetes-int-or-string": true, "type": "string", "format": "int-or-string"})),
            (json!({"type": "string", "nullable": true}), json!({"type": "string"})),
        ];
        for (v3, v2) in cases {
            assert_eq!(schema(&v3), v2, "{v3}");
        }
    }

    #[test]
    fn protobuf_round_trips_and_keeps_what_kubectl_reads() {
        let doc = document();
        let pb = to_proto(&doc);
        let bytes = pb.encode_to_vec();
        let back = pb::Document::decode(bytes.as_slice()).expect("decodes");
        assert_eq!(back, pb);
        assert_eq!(back.swagger, "2.0");
        let defs = &back.definitions.as_ref().expect("definitions").additional_properties;
        assert_eq!(defs.len(), doc["definitions"].as_object().map_or(0, |d| d.len()));
        let pod = defs.iter().find(|d| d.name == "io.k8s.api.core.v1.Pod").and_then(|d| d.value.as_ref()).expect("Pod");
        let gvk = pod.vendor_extension.iter().find(|e| e.name == "x-kubernetes-group-version-kind").and_then(|e| e.value.as_ref()).expect("gvk");
        assert_eq!(serde_json::from_str::<Value>(&gvk.yaml).expect("JSON is YAML"), json!([{"group": "", "version": "v1", "kind": "Pod"}]));
        let spec = pod.properties.as_ref().expect("properties").additional_properties.iter().find(|p| p.name == "spec").and_then(|p| p.value.as_ref()).expect("spec");
        assert_eq!(spec.r#ref, "#/definitions/io.k8s.api.core.v1.PodSpec");
        assert!(!spec.description.is_empty(), "the description beside the reference is kept");
        let labels = defs.iter().find(|d| d.name == "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta").and_then(|d| d.value.as_ref()).and_then(|m| m.properties.as_ref()).and_then(|p| p.additional_properties.iter().find(|p| p.name == "labels")).and_then(|p| p.value.as_ref()).expect("labels");
        assert_eq!(labels.r#type.as_ref().map(|t| t.value.clone()), Some(vec!["object".to_string()]));
        let additional = labels.additional_properties.as_ref().and_then(|a| a.oneof.as_ref());
        assert!(matches!(additional, Some(pb::additional_properties_item::Oneof::Schema(s)) if s.r#type.as_ref().is_some_and(|t| t.value == ["string"])), "{additional:?}");
        // kubectl's field-validation check: the patch operation's query parameters.
        let paths = &back.paths.as_ref().expect("paths").path;
        let patch = paths.iter().find(|p| p.name == "/api/v1/namespaces/{namespace}/pods/{name}").and_then(|p| p.value.as_ref()).and_then(|p| p.patch.as_ref()).expect("patch");
        let has_field_validation = patch.parameters.iter().any(|p| {
            matches!(&p.oneof, Some(pb::parameters_item::Oneof::Parameter(pb::Parameter { oneof: Some(pb::parameter::Oneof::NonBodyParameter(pb::NonBodyParameter { oneof: Some(pb::non_body_parameter::Oneof::QueryParameterSubSchema(q)) })) })) if q.name == "fieldValidation")
        });
        assert!(has_field_validation);
    }

    #[test]
    fn negotiation_follows_kube_openapi() {
        use Encoding::*;
        let cases = [
            (None, Some(Json)),
            (Some(""), Some(Json)),
            (Some("*/*"), Some(Json)),
            (Some("application/json"), Some(Json)),
            (Some(MIME_PROTOBUF_DEPRECATED), Some(Protobuf)),
            (Some(MIME_PROTOBUF), Some(Protobuf)),
            (Some("application/json;q=0.5, application/com.github.proto-openapi.spec.v2@v1.0+protobuf"), Some(Protobuf)),
            (Some("application/*;q=0.9, application/com.github.proto-openapi.spec.v2.v1.0+protobuf;q=0.1"), Some(Json)),
            (Some("text/html, */*;q=0.1"), Some(Json)),
            (Some("application/json;q=0, application/yaml"), None),
            (Some("application/yaml"), None),
            (Some("text/plain, application/vnd.kubernetes.protobuf"), None),
        ];
        for (accept, want) in cases {
            assert_eq!(negotiate(accept), want, "{accept:?}");
        }
    }

    #[test]
    fn etag_is_stable_and_quoted() {
        assert_eq!(etag(b"abc"), etag(b"abc"));
        assert_ne!(etag(b"abc"), etag(b"abd"));
        let t = etag(b"abc");
        assert!(t.starts_with('"') && t.ends_with('"') && t.len() == 34, "{t}");
    }
}
