//! Mirrors k8s.io/kube-openapi's v3 handler: `/openapi/v3` lists a document per group-version,
//! and each document lists every path with its operations. kubectl reads it to learn that the
//! server validates fields itself (the `fieldValidation` parameter on each operation) and then
//! sends `fieldValidation=Strict` instead of validating client-side.

use serde_json::{Map, Value, json};

use crate::config::Api;
use crate::registry::generic::strategy::ResourceInfo;

fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() { format!("api/{version}") } else { format!("apis/{group}/{version}") }
}

/// `GET /openapi/v3`
pub fn index(api: &Api) -> Value {
    let mut paths = Map::new();
    let mut gvs: Vec<(&str, &str)> = api.registries.iter().map(|r| (r.info().group, r.info().version)).collect();
    gvs.push(("policy", "v1"));
    gvs.sort();
    gvs.dedup();
    for (g, v) in gvs {
        let p = gv_path(g, v);
        paths.insert(p.clone(), json!({"serverRelativeURL": format!("/openapi/v3/{p}?hash=kubelab-{}", env!("CARGO_PKG_VERSION"))}));
    }
    json!({"paths": paths})
}

fn operation(info: &ResourceInfo, action: &str, mutating: bool) -> Value {
    let mut params = vec![json!({"name": "pretty", "in": "query", "schema": {"type": "string"}})];
    if mutating {
        params.push(json!({"name": "dryRun", "in": "query", "schema": {"type": "string"}}));
        params.push(json!({"name": "fieldManager", "in": "query", "schema": {"type": "string"}}));
        params.push(json!({"name": "fieldValidation", "in": "query", "description": "Strict, Warn or Ignore: how the server treats unknown or duplicate fields.", "schema": {"type": "string"}}));
    }
    json!({
        "operationId": format!("{action}{}", info.kind),
        "parameters": params,
        "responses": {"200": {"description": "OK"}},
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": {"group": info.group, "version": info.version, "kind": info.kind},
    })
}

/// The real schemas of the group-version's kinds (from k8s-openapi, through each resource's codec),
/// each top-level kind marked with `x-kubernetes-group-version-kind` as kube-openapi marks it (what
/// `kubectl explain` looks for).
fn schemas(api: &Api, group: &str, version: &str) -> Value {
    let mut generator = schemars::generate::SchemaSettings::openapi3().into_generator();
    let kinds: Vec<(String, &ResourceInfo)> = api
        .registries
        .iter()
        .filter(|r| r.info().group == group && r.info().version == version)
        .map(|r| (r.info().codec.openapi_schema(&mut generator), r.info()))
        .collect();
    let mut defs: Map<String, Value> = generator.take_definitions(true).into_iter().collect();
    for (name, info) in kinds {
        if let Some(Value::Object(schema)) = defs.get_mut(&name) {
            schema.insert("x-kubernetes-group-version-kind".into(), json!([{"group": info.group, "version": info.version, "kind": info.kind}]));
        }
    }
    Value::Object(defs)
}

/// `GET /openapi/v3/<gv path>`, or None when the group-version is unknown.
pub fn document(api: &Api, path: &str) -> Option<Value> {
    let (group, version) = match path.trim_matches('/').split('/').collect::<Vec<_>>().as_slice() {
        ["api", v] => ("", *v),
        ["apis", g, v] => (*g, *v),
        _ => return None,
    };
    if !(group == "policy" && version == "v1") && !api.registries.iter().any(|r| r.info().group == group && r.info().version == version) {
        return None;
    }
    let mut paths = Map::new();
    for r in api.registries.iter().filter(|r| r.info().group == group && r.info().version == version) {
        let info = r.info();
        let base = format!("/{}", gv_path(group, version));
        let coll = if info.namespaced { format!("{base}/namespaces/{{namespace}}/{}", info.plural) } else { format!("{base}/{}", info.plural) };
        paths.insert(coll.clone(), json!({
            "get": operation(info, "list", false),
            "post": operation(info, "post", true),
            "delete": operation(info, "deletecollection", false),
        }));
        paths.insert(format!("{coll}/{{name}}"), json!({
            "get": operation(info, "get", false),
            "put": operation(info, "put", true),
            "patch": operation(info, "patch", true),
            "delete": operation(info, "delete", false),
        }));
        for s in info.subresources {
            paths.insert(format!("{coll}/{{name}}/{}", s.name), json!({
                "get": operation(info, "get", false),
                "put": operation(info, "put", true),
                "patch": operation(info, "patch", true),
                "post": operation(info, "post", true),
            }));
        }
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes (kubelab)", "version": "v1.32.0-kubelab"},
        "paths": paths,
        "components": {"schemas": schemas(api, group, version)},
    }))
}
