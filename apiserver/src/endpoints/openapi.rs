//! Mirrors k8s.io/kube-openapi's builder3 and handler3 (and what they share with the v2 builder):
//! the API the server serves, described once as a [`Spec`] — every path and operation, and the
//! schemas of every kind — and rendered as OpenAPI v3: `/openapi/v3` lists a document per
//! group-version, and each document lists every path with its operations. The v2 rendering of the
//! same [`Spec`] is in [`super::openapi_v2`].
//!
//! kubectl reads the documents to learn that the server validates fields itself (the
//! `fieldValidation` parameter on each operation; it then sends `fieldValidation=Strict` instead
//! of validating client-side), to explain a kind's fields (`kubectl explain`, which finds a kind
//! by its `x-kubernetes-group-version-kind`), and to compute a client-side `apply`'s strategic
//! merge patch (the `x-kubernetes-patch-*` extensions on lists).

use std::collections::BTreeMap;

use apimachinery::patch::{ListStrategy, PatchMeta};
use k8s_openapi::api::autoscaling::v1::Scale;
use k8s_openapi::api::core::v1::Binding;
use k8s_openapi::api::policy::v1::Eviction;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ListMeta, Status};
use schemars::SchemaGenerator;
use serde_json::{Map, Value, json};

use crate::config::Api;
use crate::registry::generic::rest::SubresourceRest;
use crate::registry::generic::strategy::ResourceInfo;
use crate::registry::generic::typed::{Codec, Typed};

/// `info.version` of both documents: the `gitVersion` discovery reports.
pub const INFO_VERSION: &str = "v1.32.0-kubelab";

/// Where a schema's references point in the source (OpenAPI v3's place for them).
pub const V3_REF_PREFIX: &str = "#/components/schemas/";

/// Group, version and kind, as `x-kubernetes-group-version-kind` gives them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gvk {
    pub group: &'static str,
    pub version: &'static str,
    pub kind: &'static str,
}

impl Gvk {
    pub fn to_json(self) -> Value {
        json!({"group": self.group, "version": self.version, "kind": self.kind})
    }
}

/// Where a parameter goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum In {
    Path,
    Query,
}

/// One parameter of an operation.
#[derive(Debug, Clone, Copy)]
pub struct Param {
    pub name: &'static str,
    pub location: In,
    /// `string`, `integer` or `boolean`.
    pub ty: &'static str,
    pub description: &'static str,
}

const fn query(name: &'static str, ty: &'static str, description: &'static str) -> Param {
    Param { name, location: In::Query, ty, description }
}

const PRETTY: Param = query("pretty", "string", "If 'true', then the output is pretty printed.");
const DRY_RUN: Param = query("dryRun", "string", "When present (All), modifications are not persisted.");
const FIELD_MANAGER: Param = query("fieldManager", "string", "A name associated with the actor or entity that is making these changes.");
const FIELD_VALIDATION: Param = query("fieldValidation", "string", "Strict, Warn or Ignore: how the server treats unknown or duplicate fields.");
const FORCE: Param = query("force", "boolean", "Force an apply request: take the fields other managers own.");
const GRACE_PERIOD: Param = query("gracePeriodSeconds", "integer", "The duration in seconds before the object should be deleted.");
const PROPAGATION: Param = query("propagationPolicy", "string", "Whether and how garbage collection will be performed: Orphan, Background or Foreground.");
const LIST: &[Param] = &[
    query("labelSelector", "string", "A selector to restrict the list of returned objects by their labels."),
    query("fieldSelector", "string", "A selector to restrict the list of returned objects by their fields."),
    query("limit", "integer", "The maximum number of responses to return for a list call."),
    query("continue", "string", "The continue token of a previous, limited list call."),
    query("resourceVersion", "string", "Constrains which resource versions a request may be served from."),
    query("resourceVersionMatch", "string", "How resourceVersion is applied to list calls: Exact or NotOlderThan."),
    query("watch", "boolean", "Watch for changes to the described resources and return them as a stream of events."),
    query("allowWatchBookmarks", "boolean", "Requests watch events with type BOOKMARK."),
    query("sendInitialEvents", "boolean", "With watch: start with synthetic events for the current state, then a bookmark."),
    query("timeoutSeconds", "integer", "Timeout for the list/watch call."),
];

/// One operation: a method on a path, with kube-apiserver's `x-kubernetes-action` and the kind
/// it acts on.
#[derive(Debug, Clone)]
pub struct Operation {
    pub method: &'static str,
    /// get, list, post, put, patch, delete, deletecollection or connect.
    pub action: &'static str,
    pub gvk: Gvk,
    pub operation_id: String,
    pub params: Vec<Param>,
    /// The schema (a name in [`Spec::schemas`]) of the request body, if it takes one.
    pub body: Option<String>,
    /// The schema of the 200 (or 201) answer, if it is an object.
    pub response: Option<String>,
}

/// The served API, once: what both OpenAPI documents are renderings of.
#[derive(Debug, Default)]
pub struct Spec {
    /// Path (`/api/v1/namespaces/{namespace}/pods`) → its operations.
    pub paths: BTreeMap<String, Vec<Operation>>,
    /// Schema name (`io.k8s.api.core.v1.Pod`) → schema, references as `#/components/schemas/…`.
    pub schemas: Map<String, Value>,
}

/// One served resource: what discovery says of it, and the subresources its own code serves.
pub struct Served<'a> {
    pub info: &'a ResourceInfo,
    pub subresources: &'a [(&'static str, SubresourceRest)],
    /// A create-only resource (the reviews): one POST, no list kind.
    pub create_only: bool,
}

/// Every resource `api` serves.
pub fn served(api: &Api) -> Vec<Served<'_>> {
    let stored = api.registries.stored.iter().map(|i| Served { info: i.registry.info(), subresources: i.subresources, create_only: false });
    stored.chain(api.registries.create_only.iter().map(|c| Served { info: c.info, subresources: &[], create_only: true })).collect()
}

fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() { format!("api/{version}") } else { format!("apis/{group}/{version}") }
}

/// `coordination.k8s.io` → `Coordination`, `` → `Core` (operation ids, as kube-apiserver builds them).
fn group_label(group: &str) -> String {
    if group.is_empty() {
        return "Core".into();
    }
    group.trim_end_matches(".k8s.io").split('.').map(capitalize).collect()
}

fn capitalize(s: &str) -> String {
    let mut c = s.chars();
    c.next().map(|f| f.to_uppercase().chain(c).collect()).unwrap_or_default()
}

/// The codecs of the kinds subresources take that are not a resource's own kind: they get a
/// definition too. (PodExecOptions and PodAttachOptions are query parameters, and have none, as
/// in Kubernetes.)
const SUBRESOURCE_KINDS: &[(&str, &str, &dyn Codec)] =
    &[
        ("", "Binding", &Typed::<Binding>::NEW),
        ("policy", "Eviction", &Typed::<Eviction>::NEW),
        ("autoscaling", "Scale", &Typed::<Scale>::NEW),
        ("authentication.k8s.io", "TokenRequest", &Typed::<k8s_openapi::api::authentication::v1::TokenRequest>::NEW),
    ];

/// Builds the [`Spec`] of the resources `served` whose group-version `wanted` accepts.
pub fn spec(served: &[Served<'_>], wanted: impl Fn(&str, &str) -> bool) -> Spec {
    let mut generator = schemars::generate::SchemaSettings::openapi3().into_generator();
    let mut spec = Spec::default();
    // Each definition that is a kind, with its gvk; and each resource's kind with its patch table.
    let mut kinds: Vec<(String, Value)> = Vec::new();
    let mut roots: Vec<(String, PatchMeta)> = Vec::new();
    let status = generator.subschema_for::<Status>();
    let status = schema_name(&status);
    ensure_patch_schema(&mut generator);
    for s in served.iter().filter(|s| wanted(s.info.group, s.info.version)) {
        let info = s.info;
        let gvk = Gvk { group: info.group, version: info.version, kind: info.kind };
        let name = info.codec.openapi_schema(&mut generator);
        kinds.push((name.clone(), gvk.to_json()));
        if s.create_only {
            add_create_only_path(&mut spec, info, &name);
            continue;
        }
        let list = list_schema(&mut generator, &name, gvk);
        kinds.push((list.clone(), json!({"group": info.group, "version": info.version, "kind": format!("{}List", info.kind)})));
        roots.push((name.clone(), PatchMeta::for_kind(info.kind)));
        add_paths(&mut spec, s, &mut generator, &mut kinds, (&name, &list, &status));
    }
    spec.schemas = generator.take_definitions(true).into_iter().collect();
    // A definition served under two versions (SelfSubjectReview: v1 and v1beta1) names both.
    let mut gvks: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for (name, gvk) in kinds {
        gvks.entry(name).or_default().push(gvk);
    }
    for (name, gvks) in gvks {
        let Some(Value::Object(schema)) = spec.schemas.get_mut(&name) else { continue };
        schema.insert("x-kubernetes-group-version-kind".into(), Value::Array(gvks));
        // k8s-openapi marks `metadata` required (a Rust field without Option); Kubernetes'
        // schemas do not, and `kubectl explain` would print it as required.
        if let Some(Value::Array(required)) = schema.get_mut("required") {
            required.retain(|r| r != "metadata");
            if required.is_empty() {
                schema.remove("required");
            }
        }
    }
    for (root, meta) in roots {
        annotate_patch_strategies(&mut spec.schemas, &root, &meta);
    }
    spec
}

/// The name a generator gave a schema it returned as a reference.
fn schema_name(reference: &schemars::Schema) -> String {
    reference.get("$ref").and_then(Value::as_str).and_then(|r| r.strip_prefix(V3_REF_PREFIX)).unwrap_or_default().to_string()
}

/// `<Kind>List`'s schema, as Kubernetes defines one for every kind it lists.
fn list_schema(generator: &mut SchemaGenerator, item: &str, gvk: Gvk) -> String {
    let list_meta = generator.subschema_for::<ListMeta>();
    let name = format!("{item}List");
    let schema = json!({
        "description": format!("{}List is a list of {}.", gvk.kind, gvk.kind),
        "type": "object",
        "properties": {
            "apiVersion": {"description": "APIVersion defines the versioned schema of this representation of an object.", "type": "string"},
            "items": {"description": format!("List of {}.", gvk.kind), "type": "array", "items": {"$ref": format!("{V3_REF_PREFIX}{item}")}},
            "kind": {"description": "Kind is a string value representing the REST resource this object represents.", "type": "string"},
            "metadata": {"allOf": [list_meta], "description": "Standard list metadata."},
        },
        "required": ["items"],
    });
    if let Ok(schema) = schemars::Schema::try_from(schema) {
        generator.definitions_mut().insert(name.clone(), schema.into());
    }
    name
}

/// An operation on a path of `info`'s group-version: its id is `<verb><Group><Version><suffix>`
/// (`createCoreV1NamespacedPodEviction`, though an eviction is a policy/v1 kind), as kube-apiserver
/// names them.
fn operation(info: &ResourceInfo, method: &'static str, action: &'static str, gvk: Gvk, verb: &str, suffix: &str, params: Vec<Param>) -> Operation {
    let id = format!("{verb}{}{}{suffix}", group_label(info.group), capitalize(info.version));
    Operation { method, action, gvk, operation_id: id, params, body: None, response: None }
}

/// The one path of a create-only resource: `POST` of its collection.
fn add_create_only_path(spec: &mut Spec, info: &ResourceInfo, kind: &str) {
    let gvk = Gvk { group: info.group, version: info.version, kind: info.kind };
    let base = format!("/{}", gv_path(info.group, info.version));
    let (path, scope, ns) = if info.namespaced {
        (format!("{base}/namespaces/{{namespace}}/{}", info.plural), vec![Param { name: "namespace", location: In::Path, ty: "string", description: "" }], "Namespaced")
    } else {
        (format!("{base}/{}", info.plural), vec![], "")
    };
    let params = scope.into_iter().chain([PRETTY, DRY_RUN, FIELD_MANAGER, FIELD_VALIDATION]).collect();
    let mut create = operation(info, "post", "post", gvk, "create", &format!("{ns}{}", info.kind), params);
    create.body = Some(kind.into());
    create.response = Some(kind.into());
    spec.paths.insert(path, vec![create]);
}

/// Every path of one resource, with its operations, as kube-apiserver's installer registers them.
/// `schemas` names the kind's, its list's and Status's definitions; subresource kinds with a
/// definition of their own are added to `kinds`.
fn add_paths(spec: &mut Spec, s: &Served<'_>, generator: &mut SchemaGenerator, kinds: &mut Vec<(String, Value)>, schemas: (&str, &str, &str)) {
    let (kind, list, status) = schemas;
    let info = s.info;
    let gvk = Gvk { group: info.group, version: info.version, kind: info.kind };
    let base = format!("/{}", gv_path(info.group, info.version));
    let path_param = |name| Param { name, location: In::Path, ty: "string", description: "" };
    let scope: Vec<Param> = if info.namespaced { vec![path_param("namespace")] } else { vec![] };
    let ns = if info.namespaced { "Namespaced" } else { "" };
    let coll = if info.namespaced { format!("{base}/namespaces/{{namespace}}/{}", info.plural) } else { format!("{base}/{}", info.plural) };
    let with = |extra: &[Param]| -> Vec<Param> { scope.iter().copied().chain([PRETTY]).chain(extra.iter().copied()).collect() };
    let named = |extra: &[Param]| -> Vec<Param> { let mut p = with(extra); p.insert(scope.len(), path_param("name")); p };
    let k = info.kind;
    let mut insert = |path: String, ops: Vec<Operation>| {
        spec.paths.insert(path, ops);
    };

    let mut list_op = operation(info, "get", "list", gvk, "list", &format!("{ns}{k}"), with(LIST));
    list_op.response = Some(list.into());
    let mut create = operation(info, "post", "post", gvk, "create", &format!("{ns}{k}"), with(&[DRY_RUN, FIELD_MANAGER, FIELD_VALIDATION]));
    create.body = Some(kind.into());
    create.response = Some(kind.into());
    let mut delete_coll = operation(info, "delete", "deletecollection", gvk, "delete", &format!("Collection{ns}{k}"), with(&[DRY_RUN, GRACE_PERIOD, PROPAGATION]).into_iter().chain(LIST.iter().copied()).collect());
    delete_coll.response = Some(status.into());
    insert(coll.clone(), vec![list_op, create, delete_coll]);

    if info.namespaced {
        let mut all = operation(info, "get", "list", gvk, "list", &format!("{k}ForAllNamespaces"), [PRETTY].into_iter().chain(LIST.iter().copied()).collect());
        all.response = Some(list.into());
        insert(format!("{base}/{}", info.plural), vec![all]);
    }

    let item = format!("{coll}/{{name}}");
    let mut read = operation(info, "get", "get", gvk, "read", &format!("{ns}{k}"), named(&[]));
    read.response = Some(kind.into());
    let mut replace = operation(info, "put", "put", gvk, "replace", &format!("{ns}{k}"), named(&[DRY_RUN, FIELD_MANAGER, FIELD_VALIDATION]));
    replace.body = Some(kind.into());
    replace.response = Some(kind.into());
    let mut patch = operation(info, "patch", "patch", gvk, "patch", &format!("{ns}{k}"), named(&[DRY_RUN, FIELD_MANAGER, FIELD_VALIDATION, FORCE]));
    patch.body = Some(PATCH_SCHEMA.into());
    patch.response = Some(kind.into());
    let mut delete = operation(info, "delete", "delete", gvk, "delete", &format!("{ns}{k}"), named(&[DRY_RUN, GRACE_PERIOD, PROPAGATION]));
    delete.response = Some(kind.into());
    insert(item.clone(), vec![read, replace, patch, delete]);

    for sub in info.subresources {
        let sub_gvk = Gvk { group: sub.group, version: sub.version, kind: sub.kind };
        let suffix = format!("{ns}{k}{}", capitalize(sub.name));
        let connect = s.subresources.iter().any(|(n, r)| *n == sub.name && matches!(r, SubresourceRest::Connect(_)));
        let sub_schema = if sub.kind == info.kind {
            Some(kind.to_string())
        } else {
            let own = SUBRESOURCE_KINDS.iter().find(|(g, k, _)| *g == sub.group && *k == sub.kind);
            let name = own.map(|(_, _, c)| c.openapi_schema(generator));
            if let Some(n) = &name {
                kinds.push((n.clone(), sub_gvk.to_json()));
            }
            name
        };
        let mut ops = Vec::new();
        for verb in sub.verbs {
            let op = match (*verb, connect) {
                ("get", true) => operation(info, "get", "connect", sub_gvk, "connect", &format!("Get{suffix}"), named(&[])),
                ("create", true) => operation(info, "post", "connect", sub_gvk, "connect", &format!("Post{suffix}"), named(&[])),
                ("get", false) => Operation { response: sub_schema.clone().filter(|_| sub.name != "log"), ..operation(info, "get", "get", sub_gvk, "read", &suffix, named(&[])) },
                ("update", false) => Operation { body: sub_schema.clone(), response: sub_schema.clone(), ..operation(info, "put", "put", sub_gvk, "replace", &suffix, named(&[DRY_RUN, FIELD_MANAGER, FIELD_VALIDATION])) },
                ("patch", false) => Operation { body: Some(PATCH_SCHEMA.into()), response: sub_schema.clone(), ..operation(info, "patch", "patch", sub_gvk, "patch", &suffix, named(&[DRY_RUN, FIELD_MANAGER, FIELD_VALIDATION, FORCE])) },
                ("create", false) => Operation { body: sub_schema.clone(), response: sub_schema.clone(), ..operation(info, "post", "post", sub_gvk, "create", &suffix, named(&[DRY_RUN, FIELD_MANAGER, FIELD_VALIDATION])) },
                _ => continue,
            };
            ops.push(op);
        }
        insert(format!("{item}/{}", sub.name), ops);
    }
}

/// The body of a PATCH: any of the patch types, so a bare object.
const PATCH_SCHEMA: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Patch";

fn ensure_patch_schema(generator: &mut SchemaGenerator) {
    let schema = json!({"description": "Patch is the body of a PATCH request: a JSON patch, a merge patch, a strategic merge patch or an apply configuration, by Content-Type.", "type": "object"});
    if let Ok(schema) = schemars::Schema::try_from(schema) {
        generator.definitions_mut().insert(PATCH_SCHEMA.into(), schema.into());
    }
}

/// Marks each list a strategic merge patch merges (from [`PatchMeta`], the table the server's
/// own patching uses) with `x-kubernetes-patch-strategy` and `x-kubernetes-patch-merge-key`, on
/// the property of the definition that holds it, as Kubernetes' schemas carry its struct tags.
/// kubectl's client-side `apply` reads them to compute its patch; without them it would replace
/// every list whole.
fn annotate_patch_strategies(schemas: &mut Map<String, Value>, root: &str, meta: &PatchMeta) {
    let mut marks: Vec<(String, String, ListStrategy)> = Vec::new();
    collect_lists(schemas, root, "", meta, 0, &mut marks);
    for (def, prop, strategy) in marks {
        let Some(p) = schemas.get_mut(&def).and_then(|d| d.get_mut("properties")).and_then(|p| p.get_mut(&prop)).and_then(Value::as_object_mut) else { continue };
        p.insert("x-kubernetes-patch-strategy".into(), json!("merge"));
        if let ListStrategy::MergeByKey(key) = strategy {
            p.insert("x-kubernetes-patch-merge-key".into(), json!(key));
        }
    }
}

/// The definition a property's schema refers to, directly, through `allOf`, or as array items.
fn referenced(schema: &Value) -> Option<&str> {
    let direct = schema.get("$ref").or_else(|| schema.get("allOf")?.get(0)?.get("$ref"));
    direct.and_then(Value::as_str).and_then(|r| r.strip_prefix(V3_REF_PREFIX))
}

/// Walks definition `def` (found at JSON path `path`), collecting the lists `meta` merges.
fn collect_lists(schemas: &Map<String, Value>, def: &str, path: &str, meta: &PatchMeta, depth: usize, out: &mut Vec<(String, String, ListStrategy)>) {
    // Kubernetes' types nest no deeper than this where lists merge; the bound also ends recursive types.
    if depth > 8 {
        return;
    }
    let Some(props) = schemas.get(def).and_then(|d| d.get("properties")).and_then(Value::as_object) else { return };
    for (name, prop) in props {
        let here = if path.is_empty() { name.clone() } else { format!("{path}.{name}") };
        if prop.get("type").and_then(Value::as_str) == Some("array") {
            let strategy = meta.list_strategy(&here);
            if strategy != ListStrategy::Replace {
                out.push((def.to_string(), name.clone(), strategy));
            }
            if let Some(item) = prop.get("items").and_then(referenced) {
                collect_lists(schemas, item, &format!("{here}[]"), meta, depth + 1, out);
            }
        } else if let Some(child) = referenced(prop) {
            collect_lists(schemas, child, &here, meta, depth + 1, out);
        }
    }
}

/// `GET /openapi/v3`
pub fn index(api: &Api) -> Value {
    let mut paths = Map::new();
    let mut gvs: Vec<(&str, &str)> = api.registries.infos().map(|(info, _)| (info.group, info.version)).collect();
    gvs.push(("policy", "v1"));
    gvs.sort();
    gvs.dedup();
    for (g, v) in gvs {
        let p = gv_path(g, v);
        paths.insert(p.clone(), json!({"serverRelativeURL": format!("/openapi/v3/{p}?hash=kubelab-{}", env!("CARGO_PKG_VERSION"))}));
    }
    json!({"paths": paths})
}

fn v3_param(p: &Param) -> Value {
    let location = match p.location {
        In::Path => "path",
        In::Query => "query",
    };
    let mut v = json!({"name": p.name, "in": location, "schema": {"type": p.ty}});
    if !p.description.is_empty() {
        v["description"] = json!(p.description);
    }
    if p.location == In::Path {
        v["required"] = json!(true);
    }
    v
}

fn v3_operation(op: &Operation) -> Value {
    let mut v = json!({
        "operationId": op.operation_id,
        "parameters": op.params.iter().map(v3_param).collect::<Vec<_>>(),
        "responses": {"200": {"description": "OK"}},
        "x-kubernetes-action": op.action,
        "x-kubernetes-group-version-kind": op.gvk.to_json(),
    });
    if let Some(r) = &op.response {
        v["responses"]["200"]["content"] = json!({"application/json": {"schema": {"$ref": format!("{V3_REF_PREFIX}{r}")}}});
    }
    if let Some(b) = &op.body {
        v["requestBody"] = json!({"required": true, "content": {"*/*": {"schema": {"$ref": format!("{V3_REF_PREFIX}{b}")}}}});
    }
    v
}

/// `GET /openapi/v3/<gv path>`, or None when the group-version is unknown.
pub fn document(api: &Api, path: &str) -> Option<Value> {
    let (group, version) = match path.trim_matches('/').split('/').collect::<Vec<_>>().as_slice() {
        ["api", v] => ("", *v),
        ["apis", g, v] => (*g, *v),
        _ => return None,
    };
    // policy/v1 is served for pods/eviction alone: a document without paths of its own.
    let served_gv = (group == "policy" && version == "v1") || api.registries.infos().any(|(info, _)| info.group == group && info.version == version);
    if !served_gv {
        return None;
    }
    Some(render_v3(&spec(&served(api), |g, v| g == group && v == version)))
}

/// The v3 rendering of `spec` (one group-version's document).
pub fn render_v3(spec: &Spec) -> Value {
    let mut paths = Map::new();
    for (path, ops) in &spec.paths {
        let item: Map<String, Value> = ops.iter().map(|op| (op.method.to_string(), v3_operation(op))).collect();
        paths.insert(path.clone(), Value::Object(item));
    }
    json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes (kubelab)", "version": INFO_VERSION},
        "paths": paths,
        "components": {"schemas": spec.schemas},
    })
}
