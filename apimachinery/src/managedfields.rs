//! Mirrors apimachinery's pkg/util/managedfields (the field manager behind server-side apply)
//! and, in spirit, sigs.k8s.io/structured-merge-diff, which it is built on.
//!
//! Every object records in `metadata.managedFields` which manager (`kubectl`, `kube-scheduler`,
//! ...) owns which fields, as a set of field paths in the FieldsV1 format:
//! `{"f:metadata":{"f:labels":{"f:app":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"c\"}":{".":{},"f:image":{}}}}}`
//! (`f:` a field, `k:` a list item by its merge key, `v:` a value of a set, `.` the item itself).
//!
//! Server-side apply, in the steps `apply` marks:
//! 1. The applied configuration's field set is what the manager now claims.
//! 2. Fields another manager owns that the configuration sets to a *different* value are
//!    conflicts: an error, unless forced, which takes ownership from the other manager.
//! 3. Fields the manager claimed last time but no longer mentions are removed, unless somebody else
//!    still owns them.
//! 4. The configuration is merged into the object (lists by the strategic merge keys).
//! 5. The manager's `Apply` entry is replaced by the new field set.
//!
//! Non-apply writes (`create`, `replace`, `patch`) go through `update_managed_fields`: the fields a
//! write changes move to the writer's `Update` entry.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value, json};

use crate::error::{ApplyError, PatchError};
use crate::patch::{ListStrategy, PatchMeta, strategic_merge_patch};

/// The manager Kubernetes charges with the fields of an object that existed before its first
/// server-side apply and carried no managed fields.
pub const BEFORE_FIRST_APPLY_MANAGER: &str = "before-first-apply";

/// Fields never tracked (structured-merge-diff's strip set in the field manager): identity and
/// bookkeeping the server sets itself.
const STRIPPED: &[&[&str]] = &[
    &["f:apiVersion"],
    &["f:kind"],
    &["f:metadata", "f:name"],
    &["f:metadata", "f:namespace"],
    &["f:metadata", "f:creationTimestamp"],
    &["f:metadata", "f:selfLink"],
    &["f:metadata", "f:uid"],
    &["f:metadata", "f:generation"],
    &["f:metadata", "f:managedFields"],
    &["f:metadata", "f:resourceVersion"],
];

/// A path: encoded path elements (`f:spec`, `k:{"name":"c"}`, `v:"a"`).
pub type FieldPath = Vec<String>;

/// A set of field paths (structured-merge-diff's `fieldpath.Set`, flattened).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSet(BTreeSet<FieldPath>);

impl FieldSet {
    /// The fields an object sets: every leaf (scalar, null, empty map or list, list without a
    /// merge strategy) plus each keyed list item and each set value.
    pub fn from_object(obj: &Value, meta: &PatchMeta) -> FieldSet {
        let mut out = BTreeSet::new();
        walk(obj, "", &mut Vec::new(), meta, &mut out);
        out.retain(|p| {
            !STRIPPED
                .iter()
                .any(|s| p.len() >= s.len() && p.iter().zip(s.iter()).all(|(a, b)| a == b))
        });
        FieldSet(out)
    }

    /// Parses a `fieldsV1` object.
    pub fn from_fields_v1(v: &Value) -> FieldSet {
        fn parse(v: &Value, prefix: &mut FieldPath, out: &mut BTreeSet<FieldPath>) {
            let Some(map) = v.as_object() else { return };
            for (k, child) in map {
                if k == "." {
                    out.insert(prefix.clone());
                    continue;
                }
                prefix.push(k.clone());
                if child.as_object().is_some_and(Map::is_empty) {
                    out.insert(prefix.clone());
                } else {
                    parse(child, prefix, out);
                }
                prefix.pop();
            }
        }
        let mut out = BTreeSet::new();
        parse(v, &mut Vec::new(), &mut out);
        FieldSet(out)
    }

    /// Renders the set as a `fieldsV1` object.
    pub fn to_fields_v1(&self) -> Value {
        #[derive(Default)]
        struct Node {
            member: bool,
            children: BTreeMap<String, Node>,
        }
        fn render(node: &Node) -> Value {
            let mut map = Map::new();
            if node.member && !node.children.is_empty() {
                map.insert(".".into(), json!({}));
            }
            for (k, child) in &node.children {
                map.insert(k.clone(), render(child));
            }
            Value::Object(map)
        }
        let mut root = Node::default();
        for path in &self.0 {
            let mut node = &mut root;
            for el in path {
                node = node.children.entry(el.clone()).or_default();
            }
            node.member = true;
        }
        render(&root)
    }

    pub fn contains(&self, path: &FieldPath) -> bool {
        self.0.contains(path)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn paths(&self) -> impl Iterator<Item = &FieldPath> {
        self.0.iter()
    }

    /// Whether some path of the set lies strictly below `path`.
    fn has_descendant(&self, path: &FieldPath) -> bool {
        self.0
            .iter()
            .any(|p| p.len() > path.len() && p.starts_with(path))
    }
}

/// Kubernetes' printed form of a path, as in conflict messages: `.spec.containers[name="c"].image`.
pub fn path_string(path: &FieldPath) -> String {
    let mut s = String::new();
    for el in path {
        if let Some(field) = el.strip_prefix("f:") {
            s.push('.');
            s.push_str(field);
        } else if let Some(key) = el.strip_prefix("k:") {
            let parts: Vec<String> = match serde_json::from_str::<Map<String, Value>>(key) {
                Ok(m) => m.iter().map(|(k, v)| format!("{k}={v}")).collect(),
                Err(_) => vec![key.to_string()],
            };
            s.push_str(&format!("[{}]", parts.join(",")));
        } else if let Some(value) = el.strip_prefix("v:") {
            s.push_str(&format!("[={value}]"));
        } else {
            s.push_str(&format!("[{el}]"));
        }
    }
    s
}

fn child_meta_path(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

fn key_element(key: &str, value: &Value) -> String {
    let mut m = Map::new();
    m.insert(key.to_string(), value.clone());
    format!("k:{}", Value::Object(m))
}

fn walk(
    v: &Value,
    meta_path: &str,
    prefix: &mut FieldPath,
    meta: &PatchMeta,
    out: &mut BTreeSet<FieldPath>,
) {
    let Some(map) = v.as_object() else { return };
    for (k, child) in map {
        let child_path = child_meta_path(meta_path, k);
        prefix.push(format!("f:{k}"));
        match child {
            Value::Object(m) if !m.is_empty() => walk(child, &child_path, prefix, meta, out),
            Value::Array(items) if !items.is_empty() => match meta.list_strategy(&child_path) {
                ListStrategy::MergeByKey(key) if items.iter().all(|i| i.get(&key).is_some()) => {
                    for item in items {
                        let Some(kv) = item.get(&key) else { continue };
                        prefix.push(key_element(&key, kv));
                        out.insert(prefix.clone());
                        walk(item, &format!("{child_path}[]"), prefix, meta, out);
                        prefix.pop();
                    }
                }
                ListStrategy::Set if items.iter().all(|i| !i.is_object() && !i.is_array()) => {
                    for item in items {
                        prefix.push(format!("v:{item}"));
                        out.insert(prefix.clone());
                        prefix.pop();
                    }
                }
                // Atomic list (or one that does not fit its declared strategy): one leaf.
                _ => {
                    out.insert(prefix.clone());
                }
            },
            _ => {
                out.insert(prefix.clone());
            }
        }
        prefix.pop();
    }
}

/// The value at `path` in `obj`, if present.
fn value_at<'a>(obj: &'a Value, path: &[String]) -> Option<&'a Value> {
    let mut cur = obj;
    for el in path {
        cur = step(cur, el)?.1;
    }
    Some(cur)
}

/// Follows one path element: returns (index in list if any, child value).
fn step<'a>(cur: &'a Value, el: &str) -> Option<(Option<usize>, &'a Value)> {
    if let Some(field) = el.strip_prefix("f:") {
        return cur.get(field).map(|v| (None, v));
    }
    let items = cur.as_array()?;
    let pos = if let Some(key) = el.strip_prefix("k:") {
        let key: Map<String, Value> = serde_json::from_str(key).ok()?;
        items
            .iter()
            .position(|i| key.iter().all(|(k, v)| i.get(k) == Some(v)))?
    } else {
        let value: Value = serde_json::from_str(el.strip_prefix("v:")?).ok()?;
        items.iter().position(|i| *i == value)?
    };
    Some((Some(pos), &items[pos]))
}

/// Removes the value at `path` from `obj`; returns whether something was removed.
fn remove_at(obj: &mut Value, path: &[String]) -> bool {
    let Some((last, parent_path)) = path.split_last() else {
        return false;
    };
    let mut cur = obj;
    for el in parent_path {
        let Some((index, _)) = step(cur, el) else {
            return false;
        };
        cur = match (index, el.strip_prefix("f:")) {
            (Some(i), _) => match cur.get_mut(i) {
                Some(v) => v,
                None => return false,
            },
            (None, Some(field)) => match cur.get_mut(field) {
                Some(v) => v,
                None => return false,
            },
            (None, None) => return false,
        };
    }
    match (step(cur, last).map(|(i, _)| i), last.strip_prefix("f:")) {
        (Some(Some(i)), _) => cur.as_array_mut().map(|a| a.remove(i)).is_some(),
        (Some(None), Some(field)) => cur.as_object_mut().and_then(|m| m.remove(field)).is_some(),
        _ => false,
    }
}

/// Whether the value is a leaf for conflict and change detection (not a map with fields).
fn is_leaf(v: &Value) -> bool {
    v.as_object().is_none_or(Map::is_empty)
}

/// One `metadata.managedFields` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManagedFieldsEntry {
    pub manager: String,
    pub operation: String,
    pub api_version: String,
    pub time: String,
    pub subresource: Option<String>,
    pub fields: FieldSet,
}

impl ManagedFieldsEntry {
    fn from_value(v: &Value) -> Option<ManagedFieldsEntry> {
        let s = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
        Some(ManagedFieldsEntry {
            manager: s("manager")?,
            operation: s("operation")?,
            api_version: s("apiVersion").unwrap_or_default(),
            time: s("time").unwrap_or_default(),
            subresource: s("subresource"),
            fields: FieldSet::from_fields_v1(v.get("fieldsV1").unwrap_or(&Value::Null)),
        })
    }

    fn to_value(&self) -> Value {
        let mut v = json!({
            "manager": self.manager,
            "operation": self.operation,
            "apiVersion": self.api_version,
            "time": self.time,
            "fieldsType": "FieldsV1",
            "fieldsV1": self.fields.to_fields_v1(),
        });
        if let Some(sub) = &self.subresource {
            v["subresource"] = json!(sub);
        }
        v
    }

    fn is(&self, manager: &str, operation: &str) -> bool {
        self.manager == manager && self.operation == operation && self.subresource.is_none()
    }
}

/// Reads `metadata.managedFields`; entries that do not parse are dropped.
pub fn managed_fields(obj: &Value) -> Vec<ManagedFieldsEntry> {
    obj.pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(ManagedFieldsEntry::from_value)
                .collect()
        })
        .unwrap_or_default()
}

/// Writes the entries back, dropping empty ones, in Kubernetes' order (operation, time, manager).
fn set_managed_fields(obj: &mut Value, mut entries: Vec<ManagedFieldsEntry>) {
    entries.retain(|e| !e.fields.is_empty());
    entries.sort_by(|a, b| {
        (&a.operation, &a.time, &a.manager, &a.api_version).cmp(&(
            &b.operation,
            &b.time,
            &b.manager,
            &b.api_version,
        ))
    });
    let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    if entries.is_empty() {
        meta.remove("managedFields");
    } else {
        meta.insert(
            "managedFields".into(),
            Value::Array(entries.iter().map(ManagedFieldsEntry::to_value).collect()),
        );
    }
}

fn api_version_of(objs: &[Option<&Value>]) -> String {
    objs.iter()
        .flatten()
        .find_map(|o| o.get("apiVersion").and_then(Value::as_str))
        .unwrap_or_default()
        .to_string()
}

/// Server-side apply of `applied` (the body of an `application/apply-patch+yaml` PATCH) by
/// `manager`. Creates the object when `current` is `None`. `now` is the RFC 3339 time recorded in
/// the manager's entry.
pub fn apply(
    current: Option<&Value>,
    applied: &Value,
    manager: &str,
    force: bool,
    meta: &PatchMeta,
    now: &str,
) -> Result<Value, ApplyError> {
    if !applied.is_object() {
        return Err(
            PatchError::BadPatch("the applied configuration must be a JSON object".into()).into(),
        );
    }
    // Nulls and patch directives mean nothing in an applied configuration: drop them, and the
    // managed fields, which belong to the server.
    let mut applied = strategic_merge_patch(&json!({}), applied, meta)?;
    if let Some(m) = applied.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("managedFields");
    }
    let api_version = api_version_of(&[Some(&applied), current]);
    // Step 1: what the manager now claims.
    let applied_set = FieldSet::from_object(&applied, meta);
    let entry = |fields: FieldSet| ManagedFieldsEntry {
        manager: manager.to_string(),
        operation: "Apply".into(),
        api_version: api_version.clone(),
        time: now.to_string(),
        subresource: None,
        fields,
    };

    let Some(current) = current else {
        set_managed_fields(&mut applied, vec![entry(applied_set)]);
        return Ok(applied);
    };

    let mut entries = managed_fields(current);
    if entries.is_empty() {
        // An object nobody tracked yet: its fields belong to a stand-in manager, so that applying
        // a different value is a conflict rather than a silent overwrite.
        let fields = FieldSet::from_object(current, meta);
        entries.push(ManagedFieldsEntry {
            manager: BEFORE_FIRST_APPLY_MANAGER.into(),
            operation: "Update".into(),
            api_version: api_version.clone(),
            time: now.to_string(),
            subresource: None,
            fields,
        });
    }
    let previous = entries
        .iter()
        .position(|e| e.is(manager, "Apply"))
        .map(|i| entries.remove(i).fields)
        .unwrap_or_default();

    // Step 2: conflicts with other managers.
    let mut conflicts: Vec<(String, FieldPath)> = Vec::new();
    for path in applied_set.paths() {
        let Some(new_value) = value_at(&applied, path).filter(|v| is_leaf(v)) else {
            continue;
        };
        if value_at(current, path) == Some(new_value) {
            continue; // Same value: ownership is shared, not contested.
        }
        for e in entries.iter().filter(|e| e.fields.contains(path)) {
            conflicts.push((e.manager.clone(), path.clone()));
        }
    }
    if !conflicts.is_empty() {
        if !force {
            conflicts.sort();
            conflicts.dedup();
            return Err(ApplyError::Conflict(
                conflicts
                    .iter()
                    .map(|(m, p)| (m.clone(), path_string(p)))
                    .collect(),
            ));
        }
        for (_, path) in &conflicts {
            for e in &mut entries {
                e.fields.0.remove(path);
            }
        }
    }

    // Step 3: remove what this manager dropped from its configuration, unless another manager
    // owns it (or something below it). Shallow paths go first: removing a list item takes its
    // fields along, while removing its key field first would make the item unfindable.
    let mut obj = current.clone();
    let mut removed: Vec<&FieldPath> = previous
        .paths()
        .filter(|p| !applied_set.contains(p))
        .collect();
    removed.sort_by_key(|p| p.len());
    for path in removed {
        let owned_elsewhere = entries
            .iter()
            .any(|e| e.fields.contains(path) || e.fields.has_descendant(path));
        if owned_elsewhere || applied_set.has_descendant(path) || is_merge_key_field(path) {
            continue;
        }
        if remove_at(&mut obj, path) {
            prune_empty_parents(&mut obj, path, &entries, &applied_set);
        }
    }

    // Step 4: merge the configuration in.
    let mut obj = strategic_merge_patch(&obj, &applied, meta)?;

    // Step 5: record the manager's new claim.
    entries.push(entry(applied_set));
    set_managed_fields(&mut obj, entries);
    Ok(obj)
}

/// Whether `path` is the merge key field of a list item (`.containers[name="c"].name`): an item
/// that survives a removal keeps its key.
fn is_merge_key_field(path: &FieldPath) -> bool {
    let [.., parent, last] = path.as_slice() else {
        return false;
    };
    let (Some(key), Some(field)) = (parent.strip_prefix("k:"), last.strip_prefix("f:")) else {
        return false;
    };
    serde_json::from_str::<Map<String, Value>>(key).is_ok_and(|m| m.contains_key(field))
}

/// After a removal, drops the maps and lists it left empty (`labels: {}` once the last applied
/// label is gone), as Go's `omitempty` would, unless somebody owns them.
fn prune_empty_parents(
    obj: &mut Value,
    path: &FieldPath,
    entries: &[ManagedFieldsEntry],
    applied: &FieldSet,
) {
    for len in (1..path.len()).rev() {
        let parent = &path[..len];
        let empty = match value_at(obj, parent) {
            Some(Value::Object(m)) => m.is_empty(),
            Some(Value::Array(a)) => a.is_empty(),
            _ => false,
        };
        let parent_path = parent.to_vec();
        let owned = applied.contains(&parent_path)
            || entries.iter().any(|e| e.fields.contains(&parent_path));
        if !empty || owned || !remove_at(obj, parent) {
            return;
        }
    }
}

/// Records a non-apply write (`operation` is `Update`) by `manager` in `new`'s managed fields:
/// fields the write added or changed move to the manager's entry, fields it removed leave every
/// entry. Follows the field manager's rules for the incoming `metadata.managedFields`: absent
/// keeps the stored entries, a non-empty list replaces them, an empty list `[]` clears tracking.
pub fn update_managed_fields(
    old: Option<&Value>,
    new: &mut Value,
    manager: &str,
    operation: &str,
    now: &str,
) {
    // The object's own `kind` picks the list metadata, so container lists are tracked by key.
    let kind = new.get("kind").and_then(Value::as_str).unwrap_or_default();
    let meta = PatchMeta::for_kind(kind);
    update_managed_fields_with(old, new, manager, operation, now, &meta);
}

/// `update_managed_fields` with explicit list metadata (for objects whose `kind` is not set or
/// not in `PatchMeta::for_kind`'s table).
pub fn update_managed_fields_with(
    old: Option<&Value>,
    new: &mut Value,
    manager: &str,
    operation: &str,
    now: &str,
    meta: &PatchMeta,
) {
    if !new.get("metadata").is_some_and(Value::is_object) {
        return;
    }
    let mut entries = match new.pointer("/metadata/managedFields") {
        Some(Value::Array(a)) if a.is_empty() => {
            set_managed_fields(new, Vec::new());
            return;
        }
        Some(Value::Array(_)) => managed_fields(new),
        _ => old.map(managed_fields).unwrap_or_default(),
    };
    let new_set = FieldSet::from_object(new, meta);
    let old_set = old
        .map(|o| FieldSet::from_object(o, meta))
        .unwrap_or_default();

    let changed: BTreeSet<FieldPath> = new_set
        .paths()
        .filter(|p| {
            let Some(old) = old else { return true };
            if !old_set.contains(p) {
                return true;
            }
            let new_value = value_at(new, p);
            new_value.is_some_and(is_leaf) && new_value != value_at(old, p)
        })
        .cloned()
        .collect();
    let removed: BTreeSet<FieldPath> = old_set
        .paths()
        .filter(|p| !new_set.contains(p))
        .cloned()
        .collect();

    for e in &mut entries {
        e.fields
            .0
            .retain(|p| !removed.contains(p) && !changed.contains(p));
    }
    if !changed.is_empty() {
        let api_version = api_version_of(&[Some(new), old]);
        match entries.iter_mut().find(|e| e.is(manager, operation)) {
            Some(e) => {
                e.fields.0.extend(changed);
                e.time = now.to_string();
                e.api_version = api_version;
            }
            None => entries.push(ManagedFieldsEntry {
                manager: manager.to_string(),
                operation: operation.to_string(),
                api_version,
                time: now.to_string(),
                subresource: None,
                fields: FieldSet(changed),
            }),
        }
    }
    set_managed_fields(new, entries);
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: &str = "2026-01-01T00:00:00Z";
    const T1: &str = "2026-01-01T00:01:00Z";

    fn pod_meta() -> PatchMeta {
        PatchMeta::for_kind("Pod")
    }

    /// `manager/operation: path, path` for each entry, to compare ownership compactly.
    fn owners(obj: &Value) -> Vec<String> {
        managed_fields(obj)
            .iter()
            .map(|e| {
                let paths: Vec<String> = e.fields.paths().map(path_string).collect();
                format!("{}/{}: {}", e.manager, e.operation, paths.join(" "))
            })
            .collect()
    }

    fn without_managed_fields(mut v: Value) -> Value {
        if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
            m.remove("managedFields");
        }
        v
    }

    #[test]
    fn fields_v1_format() {
        let pod = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web", "namespace": "default", "uid": "u", "labels": {"app": "web"}, "finalizers": ["a.io/x"]},
            "spec": {"containers": [{"name": "c", "image": "nginx", "ports": [{"containerPort": 80}]}], "tolerations": [{"key": "k"}], "nodeSelector": {}}
        });
        let set = FieldSet::from_object(&pod, &pod_meta());
        let want = json!({
            "f:metadata": {"f:finalizers": {"v:\"a.io/x\"": {}}, "f:labels": {"f:app": {}}},
            "f:spec": {
                "f:containers": {"k:{\"name\":\"c\"}": {".": {}, "f:image": {}, "f:name": {}, "f:ports": {"k:{\"containerPort\":80}": {".": {}, "f:containerPort": {}}}}},
                "f:nodeSelector": {},
                "f:tolerations": {}
            }
        });
        assert_eq!(set.to_fields_v1(), want);
        assert_eq!(FieldSet::from_fields_v1(&want), set);
        assert_eq!(FieldSet::from_fields_v1(&json!({})), FieldSet::default());
    }

    #[test]
    fn path_strings() {
        let cases: [(&[&str], &str); 5] = [
            (&["f:spec", "f:replicas"], ".spec.replicas"),
            (&["f:metadata", "f:labels", "f:app"], ".metadata.labels.app"),
            (
                &["f:spec", "f:containers", "k:{\"name\":\"c\"}", "f:image"],
                ".spec.containers[name=\"c\"].image",
            ),
            (
                &[
                    "f:spec",
                    "f:containers",
                    "k:{\"name\":\"c\"}",
                    "f:ports",
                    "k:{\"containerPort\":80}",
                ],
                ".spec.containers[name=\"c\"].ports[containerPort=80]",
            ),
            (
                &["f:metadata", "f:finalizers", "v:\"a.io/x\""],
                ".metadata.finalizers[=\"a.io/x\"]",
            ),
        ];
        for (path, want) in cases {
            let path: FieldPath = path.iter().map(|s| s.to_string()).collect();
            assert_eq!(path_string(&path), want);
        }
    }

    fn deployment(replicas: i64, labels: Value) -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "labels": labels}, "spec": {"replicas": replicas}})
    }

    #[test]
    fn apply_table() {
        let meta = PatchMeta::for_kind("Deployment");
        // The object after `kubectl apply --server-side` (manager kubectl) of replicas 1, label app.
        let applied_once = apply(
            None,
            &deployment(1, json!({"app": "d"})),
            "kubectl",
            false,
            &meta,
            T0,
        )
        .unwrap_or_default();
        // ... then scaled by another manager with an Update.
        let mut scaled = applied_once.clone();
        scaled["spec"]["replicas"] = json!(3);
        scaled["metadata"]["labels"]["team"] = json!("x");
        update_managed_fields(
            Some(&applied_once),
            &mut scaled,
            "kubectl-client-side-apply",
            "Update",
            T1,
        );

        struct Case {
            name: &'static str,
            current: Option<Value>,
            applied: Value,
            force: bool,
            want: Result<(Value, Vec<&'static str>), &'static str>,
        }
        let cases = [
            Case {
                name: "create",
                current: None,
                applied: deployment(1, json!({"app": "d"})),
                force: false,
                want: Ok((
                    deployment(1, json!({"app": "d"})),
                    vec!["kubectl/Apply: .metadata.labels.app .spec.replicas"],
                )),
            },
            Case {
                name: "re-apply by the same manager changes its own fields",
                current: Some(applied_once.clone()),
                applied: deployment(2, json!({"app": "d"})),
                force: false,
                want: Ok((
                    deployment(2, json!({"app": "d"})),
                    vec!["kubectl/Apply: .metadata.labels.app .spec.replicas"],
                )),
            },
            Case {
                name: "a field dropped from the configuration is removed",
                current: Some(applied_once.clone()),
                applied: json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": {"replicas": 1}}),
                force: false,
                want: Ok((
                    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": {"replicas": 1}}),
                    vec!["kubectl/Apply: .spec.replicas"],
                )),
            },
            Case {
                name: "conflict with the manager that scaled",
                current: Some(scaled.clone()),
                applied: deployment(1, json!({"app": "d"})),
                force: false,
                want: Err(
                    "Apply failed with 1 conflict: conflict with \"kubectl-client-side-apply\": .spec.replicas",
                ),
            },
            Case {
                name: "same value as the other manager: shared, no conflict",
                current: Some(scaled.clone()),
                applied: deployment(3, json!({"app": "d"})),
                force: false,
                want: Ok((
                    deployment(3, json!({"app": "d", "team": "x"})),
                    vec![
                        "kubectl/Apply: .metadata.labels.app .spec.replicas",
                        "kubectl-client-side-apply/Update: .metadata.labels.team .spec.replicas",
                    ],
                )),
            },
            Case {
                name: "force takes ownership",
                current: Some(scaled.clone()),
                applied: deployment(1, json!({"app": "d"})),
                force: true,
                want: Ok((
                    deployment(1, json!({"app": "d", "team": "x"})),
                    vec![
                        "kubectl/Apply: .metadata.labels.app .spec.replicas",
                        "kubectl-client-side-apply/Update: .metadata.labels.team",
                    ],
                )),
            },
            Case {
                name: "dropping a field another manager also owns keeps it",
                current: Some(scaled.clone()),
                applied: json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "labels": {"app": "d"}}}),
                force: false,
                want: Ok((
                    deployment(3, json!({"app": "d", "team": "x"})),
                    vec![
                        "kubectl/Apply: .metadata.labels.app",
                        "kubectl-client-side-apply/Update: .metadata.labels.team .spec.replicas",
                    ],
                )),
            },
            Case {
                name: "an untracked object belongs to before-first-apply",
                current: Some(deployment(5, json!({"app": "d"}))),
                applied: deployment(1, json!({"app": "d"})),
                force: false,
                want: Err(
                    "Apply failed with 1 conflict: conflict with \"before-first-apply\": .spec.replicas",
                ),
            },
        ];
        for case in cases {
            let got = apply(
                case.current.as_ref(),
                &case.applied,
                "kubectl",
                case.force,
                &meta,
                T1,
            );
            match (got, case.want) {
                (Ok(obj), Ok((want_obj, want_owners))) => {
                    assert_eq!(owners(&obj), want_owners, "{}", case.name);
                    assert_eq!(without_managed_fields(obj), want_obj, "{}", case.name);
                }
                (Err(e), Err(want)) => assert_eq!(e.to_string(), want, "{}", case.name),
                (got, want) => panic!("{}: got {got:?}, want {want:?}", case.name),
            }
        }
    }

    #[test]
    fn apply_lists() {
        let meta = pod_meta();
        let pod = |containers: Value| json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": containers}});
        let first = pod(
            json!([{"name": "c", "image": "nginx:1", "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]}]),
        );
        let created = apply(None, &first, "kubectl", false, &meta, T0).unwrap_or_default();
        // Somebody else adds a sidecar.
        let mut with_sidecar = created.clone();
        if let Some(list) = with_sidecar["spec"]["containers"].as_array_mut() {
            list.push(json!({"name": "side", "image": "busybox"}));
        }
        update_managed_fields_with(
            Some(&created),
            &mut with_sidecar,
            "injector",
            "Update",
            T1,
            &meta,
        );

        // kubectl changes the image and drops env B; the sidecar it never owned stays.
        let second =
            pod(json!([{"name": "c", "image": "nginx:2", "env": [{"name": "A", "value": "1"}]}]));
        let got =
            apply(Some(&with_sidecar), &second, "kubectl", false, &meta, T1).unwrap_or_default();
        assert_eq!(
            without_managed_fields(got.clone())["spec"]["containers"],
            json!([{"name": "c", "image": "nginx:2", "env": [{"name": "A", "value": "1"}]}, {"name": "side", "image": "busybox"}])
        );
        assert_eq!(
            owners(&got),
            vec![
                "kubectl/Apply: .spec.containers[name=\"c\"] .spec.containers[name=\"c\"].env[name=\"A\"] .spec.containers[name=\"c\"].env[name=\"A\"].name .spec.containers[name=\"c\"].env[name=\"A\"].value .spec.containers[name=\"c\"].image .spec.containers[name=\"c\"].name",
                "injector/Update: .spec.containers[name=\"side\"] .spec.containers[name=\"side\"].image .spec.containers[name=\"side\"].name",
            ]
        );
        // The recorded entry has Kubernetes' shape.
        let entry = &got["metadata"]["managedFields"][0];
        assert_eq!(entry["operation"], "Apply");
        assert_eq!(entry["apiVersion"], "v1");
        assert_eq!(entry["fieldsType"], "FieldsV1");
        assert_eq!(entry["time"], T1);
        assert!(entry["fieldsV1"]["f:spec"]["f:containers"]["k:{\"name\":\"c\"}"]["."].is_object());
        // Another manager changed env B's value; when kubectl drops B, the item stays with the
        // fields still owned (and its merge key), while kubectl's entry no longer mentions it.
        let mut tweaked = created.clone();
        tweaked["spec"]["containers"][0]["env"][1]["value"] = json!("9");
        update_managed_fields_with(Some(&created), &mut tweaked, "tuner", "Update", T1, &meta);
        let got = apply(Some(&tweaked), &second, "kubectl", false, &meta, T1).unwrap_or_default();
        assert_eq!(
            got["spec"]["containers"][0]["env"],
            json!([{"name": "A", "value": "1"}, {"name": "B", "value": "9"}])
        );
        assert_eq!(
            owners(&got)[1],
            "tuner/Update: .spec.containers[name=\"c\"].env[name=\"B\"].value"
        );
        // A non-object configuration is rejected.
        assert_eq!(
            apply(None, &json!([1]), "kubectl", false, &meta, T0).map_err(|e| e.http_code()),
            Err(400)
        );
    }

    #[test]
    fn update_table() {
        let cm = |data: Value| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "resourceVersion": "1"}, "data": data});
        let mut created = cm(json!({"a": "1", "b": "2"}));
        update_managed_fields(None, &mut created, "kubectl-create", "Update", T0);

        // (what, new object, manager, owners afterwards)
        let cases: Vec<(&str, Value, &str, Vec<&str>)> = vec![
            (
                "no change adds no entry",
                cm(json!({"a": "1", "b": "2"})),
                "kubectl-edit",
                vec!["kubectl-create/Update: .data.a .data.b"],
            ),
            (
                "a changed field moves to the writer",
                cm(json!({"a": "9", "b": "2"})),
                "kubectl-edit",
                vec![
                    "kubectl-create/Update: .data.b",
                    "kubectl-edit/Update: .data.a",
                ],
            ),
            (
                "a removed field leaves every entry",
                cm(json!({"a": "1"})),
                "kubectl-edit",
                vec!["kubectl-create/Update: .data.a"],
            ),
            (
                "an added field goes to the writer",
                cm(json!({"a": "1", "b": "2", "c": "3"})),
                "kubectl-create",
                vec!["kubectl-create/Update: .data.a .data.b .data.c"],
            ),
        ];
        for (name, mut new, manager, want) in cases {
            update_managed_fields(Some(&created), &mut new, manager, "Update", T1);
            assert_eq!(owners(&new), want, "{name}");
        }
        assert_eq!(
            owners(&created),
            vec!["kubectl-create/Update: .data.a .data.b"]
        );
        assert_eq!(
            created["metadata"]["managedFields"][0]["fieldsV1"],
            json!({"f:data": {"f:a": {}, "f:b": {}}})
        );

        // An explicit empty list clears tracking.
        let mut reset = cm(json!({"a": "1"}));
        reset["metadata"]["managedFields"] = json!([]);
        update_managed_fields(Some(&created), &mut reset, "m", "Update", T1);
        assert!(reset["metadata"].get("managedFields").is_none());
    }
}
