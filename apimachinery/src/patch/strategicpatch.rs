//! Mirrors apimachinery's pkg/util/strategicpatch/patch.go (`StrategicMergePatch`, i.e.
//! `mergeMap` / `mergeSlice` with the API server's options: parallel lists merged, unmatched
//! nulls ignored).
//!
//! A strategic merge patch is a JSON merge patch that knows lists. Where RFC 7386 would replace a
//! list, a list with a merge key is merged item by item (a patch `containers: [{name: web, image:
//! x}]` changes one container and leaves the others alone). The patch carries directives:
//!
//! - `null` as a map value removes the key;
//! - `{"$patch": "delete", <key>: v}` in a keyed list removes the item with that key;
//! - `{"$patch": "replace"}` in a list or map replaces it whole instead of merging;
//! - `"$patch": "delete"` in a map empties it;
//! - `"$retainKeys": [..]` in a map drops every key of the object not listed (union types such as
//!   a Deployment's `strategy`, a volume's source);
//! - `"$deleteFromPrimitiveList/<list>": [..]` removes values from a set of strings;
//! - `"$setElementOrder/<list>": [..]` gives the order the merged list must have.

use serde_json::{Map, Value};

use super::Error;
use super::patch_meta::{ListStrategy, PatchMeta};

const DIRECTIVE_MARKER: &str = "$patch";
const RETAIN_KEYS_DIRECTIVE: &str = "$retainKeys";
const DELETE_FROM_PRIMITIVE_LIST_PREFIX: &str = "$deleteFromPrimitiveList/";
const SET_ELEMENT_ORDER_PREFIX: &str = "$setElementOrder/";

/// Applies a strategic merge patch to `target`, using `meta` (see `PatchMeta::for_kind`) to
/// learn how each list merges. Both documents must be JSON objects.
pub fn strategic_merge_patch(
    target: &Value,
    patch: &Value,
    meta: &PatchMeta,
) -> Result<Value, Error> {
    let (Value::Object(original), Value::Object(patch)) = (target, patch) else {
        return Err(Error::BadPatch("invalid JSON document".into()));
    };
    merge_map(original.clone(), patch, "", meta).map(Value::Object)
}

fn child_path(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// mergeMap: merges `patch` into `original`; `path` locates the map for `PatchMeta` lookups.
fn merge_map(
    mut original: Map<String, Value>,
    patch: &Map<String, Value>,
    path: &str,
    meta: &PatchMeta,
) -> Result<Map<String, Value>, Error> {
    let mut patch = patch.clone();

    // Step 1: a `$patch` directive on the map itself.
    if let Some(directive) = patch.remove(DIRECTIVE_MARKER) {
        return match directive.as_str() {
            Some("replace") => merge_map(Map::new(), &patch, path, meta),
            Some("delete") => Ok(Map::new()),
            _ => Err(Error::BadPatch(format!(
                "unknown patch type: {directive} in map: {}",
                Value::Object(patch)
            ))),
        };
    }

    // Step 2: `$retainKeys` clears the keys the patch does not list.
    if let Some(retain) = patch.remove(RETAIN_KEYS_DIRECTIVE) {
        let keys: Vec<String> = retain
            .as_array()
            .and_then(|a| a.iter().map(|v| v.as_str().map(str::to_string)).collect())
            .ok_or_else(|| Error::BadPatch("invalid patch format of retainKeys".into()))?;
        for (k, v) in &patch {
            let directive = k.starts_with(DELETE_FROM_PRIMITIVE_LIST_PREFIX)
                || k.starts_with(SET_ELEMENT_ORDER_PREFIX);
            if !v.is_null() && !directive && !keys.contains(k) {
                return Err(Error::CannotApply(
                    "patch content doesn't match retainKeys list".into(),
                ));
            }
        }
        original.retain(|k, _| keys.contains(k));
    }

    // Step 3: `$deleteFromPrimitiveList/<list>` removes values from a list of primitives.
    let delete_lists: Vec<String> = patch
        .keys()
        .filter(|k| k.starts_with(DELETE_FROM_PRIMITIVE_LIST_PREFIX))
        .cloned()
        .collect();
    for directive in delete_lists {
        let Some(values) = patch.remove(&directive) else {
            continue;
        };
        let values = values
            .as_array()
            .ok_or_else(|| Error::BadPatch("invalid patch format of primitive list".into()))?;
        let name = &directive[DELETE_FROM_PRIMITIVE_LIST_PREFIX.len()..];
        if let Some(Value::Array(list)) = original.get_mut(name) {
            list.retain(|v| !values.contains(v));
        }
    }

    // Step 4: lists with `$setElementOrder/<list>` are merged and then put in the given order.
    let orders: Vec<String> = patch
        .keys()
        .filter(|k| k.starts_with(SET_ELEMENT_ORDER_PREFIX))
        .cloned()
        .collect();
    for directive in orders {
        let Some(order) = patch.remove(&directive) else {
            continue;
        };
        let order = order.as_array().cloned().ok_or_else(|| {
            Error::BadPatch("invalid patch format of setElementOrder list".into())
        })?;
        let name = directive[SET_ELEMENT_ORDER_PREFIX.len()..].to_string();
        let list_path = child_path(path, &name);
        let original_list = match original.get(&name) {
            Some(Value::Array(list)) => Some(list.clone()),
            _ => None,
        };
        let merged = match (patch.remove(&name), &original_list) {
            (None, None) => continue,
            (None, Some(list)) => list.clone(),
            (Some(Value::Array(p)), _) => merge_list(
                original_list.clone().unwrap_or_default(),
                &p,
                &list_path,
                meta,
            )?,
            (Some(Value::Null), _) => {
                original.remove(&name);
                continue;
            }
            (Some(other), _) => {
                original.insert(name, other);
                continue;
            }
        };
        let key = match meta.list_strategy(&list_path) {
            ListStrategy::Replace => {
                original.insert(name, Value::Array(merged));
                continue;
            }
            ListStrategy::Set => None,
            ListStrategy::MergeByKey(key) => Some(key),
        };
        let key = key
            .as_deref()
            .filter(|_| merged.iter().any(Value::is_object));
        let sorted =
            normalize_element_order(merged, &order, &original_list.unwrap_or_default(), key);
        original.insert(name, Value::Array(sorted));
    }

    // Step 5: every other key: null deletes, maps and lists recurse, anything else replaces.
    for (k, patch_value) in patch {
        if k.starts_with('$') {
            return Err(Error::BadPatch(format!("unknown patch directive: {k}")));
        }
        if patch_value.is_null() {
            original.remove(&k);
            continue;
        }
        let child = child_path(path, &k);
        let merged = match (original.remove(&k), patch_value) {
            (Some(Value::Object(o)), Value::Object(p)) => {
                Value::Object(merge_map(o, &p, &child, meta)?)
            }
            (None, Value::Object(p)) => Value::Object(merge_map(Map::new(), &p, &child, meta)?),
            (Some(Value::Array(o)), Value::Array(p)) => {
                Value::Array(merge_list(o, &p, &child, meta)?)
            }
            (None, Value::Array(p)) => Value::Array(merge_list(Vec::new(), &p, &child, meta)?),
            (_, other) => other,
        };
        original.insert(k, merged);
    }
    Ok(original)
}

/// mergeSlice: merges a patch list into the object's list according to the list's strategy.
fn merge_list(
    original: Vec<Value>,
    patch: &[Value],
    path: &str,
    meta: &PatchMeta,
) -> Result<Vec<Value>, Error> {
    let key = match meta.list_strategy(path) {
        // No strategy: the patch's list is the new list.
        ListStrategy::Replace => return Ok(patch.to_vec()),
        ListStrategy::Set => None,
        ListStrategy::MergeByKey(key) => Some(key),
    };
    if patch.iter().chain(&original).any(Value::is_array) {
        return Err(Error::BadPatch("lists of lists are not supported".into()));
    }

    // Step 1: special elements. `{"$patch":"replace"}` makes the other elements the whole list;
    // `{"$patch":"delete", key: v}` removes the item whose key is v.
    let item_path = format!("{path}[]");
    let mut items = Vec::new();
    let mut deletes = Vec::new();
    let mut replace = false;
    for element in patch {
        let Some(map) = element.as_object() else {
            items.push(element.clone());
            continue;
        };
        match map.get(DIRECTIVE_MARKER).map(|d| d.as_str()) {
            None => items.push(element.clone()),
            Some(Some("replace")) => replace = true,
            Some(Some("delete")) => {
                let value = key.as_deref().and_then(|k| map.get(k)).ok_or_else(|| {
                    Error::BadPatch("delete patch type with no merge key defined".into())
                })?;
                deletes.push(value.clone());
            }
            Some(Some("merge")) => {
                return Err(Error::BadPatch(
                    "merging lists cannot yet be specified in the patch".into(),
                ));
            }
            Some(_) => {
                return Err(Error::BadPatch(format!(
                    "unknown patch type: {} in map: {element}",
                    map[DIRECTIVE_MARKER]
                )));
            }
        }
    }
    if replace {
        return items
            .iter()
            .map(|item| clean(item, &item_path, meta))
            .collect();
    }

    // Step 2: lists of primitives (a set, or a keyed list holding scalars) are unioned.
    let all_scalars = items.iter().chain(&original).all(|v| !v.is_object());
    let (merged, key) = match key {
        Some(key) if !all_scalars => {
            let mut merged = original.clone();
            merged.retain(|o| !o.get(&key).is_some_and(|v| deletes.contains(v)));
            for item in &items {
                let Some(Value::Object(item_map)) = Some(item) else {
                    return Err(Error::BadPatch(format!(
                        "mismatched types in list {path}: {item}"
                    )));
                };
                let Some(value) = item_map.get(&key) else {
                    return Err(Error::BadPatch(format!(
                        "map: {item} does not contain declared merge key: {key}"
                    )));
                };
                match merged.iter().position(|o| o.get(&key) == Some(value)) {
                    Some(pos) => {
                        let current = match &merged[pos] {
                            Value::Object(m) => m.clone(),
                            _ => Map::new(),
                        };
                        merged[pos] =
                            Value::Object(merge_map(current, item_map, &item_path, meta)?);
                    }
                    None => merged.push(clean(item, &item_path, meta)?),
                }
            }
            (merged, Some(key))
        }
        _ => {
            let mut merged: Vec<Value> = Vec::new();
            for v in original.iter().chain(&items) {
                if !merged.contains(v) {
                    merged.push(v.clone());
                }
            }
            (merged, None)
        }
    };

    // Step 3: patch items come in the patch's order, the others keep the object's order.
    Ok(normalize_element_order(
        merged,
        &items,
        &original,
        key.as_deref(),
    ))
}

/// Applies a patch value to nothing, which drops its nulls and directives.
fn clean(item: &Value, path: &str, meta: &PatchMeta) -> Result<Value, Error> {
    match item {
        Value::Object(m) => Ok(Value::Object(merge_map(Map::new(), m, path, meta)?)),
        other => Ok(other.clone()),
    }
}

/// Where `item` sits in `list`, comparing by merge key for objects and by value otherwise.
fn index_in(list: &[Value], item: &Value, key: Option<&str>) -> Option<usize> {
    match key {
        Some(k) => {
            let v = item.get(k)?;
            list.iter().position(|x| x.get(k) == Some(v))
        }
        None => list.iter().position(|x| x == item),
    }
}

/// normalizeElementOrder + mergeSortedSlice: splits `merged` into the items named in `patch_order`
/// (sorted by it) and server-only items (sorted by `server_order`, the object's list before the
/// patch), then interleaves the two, taking the server-only item first whenever both are in the
/// object's list and it came first there (or when they cannot be compared).
fn normalize_element_order(
    merged: Vec<Value>,
    patch_order: &[Value],
    server_order: &[Value],
    key: Option<&str>,
) -> Vec<Value> {
    let (mut patch_items, mut server_only): (Vec<Value>, Vec<Value>) = merged
        .into_iter()
        .partition(|v| index_in(patch_order, v, key).is_some());
    patch_items.sort_by_key(|v| index_in(patch_order, v, key));
    server_only.sort_by_key(|v| index_in(server_order, v, key));

    let mut result = Vec::with_capacity(patch_items.len() + server_only.len());
    let (mut left, mut right) = (
        server_only.into_iter().peekable(),
        patch_items.into_iter().peekable(),
    );
    loop {
        let take_left = match (left.peek(), right.peek()) {
            (None, None) => break,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (Some(l), Some(r)) => match (
                index_in(server_order, l, key),
                index_in(server_order, r, key),
            ) {
                (Some(li), Some(ri)) => li < ri,
                _ => true,
            },
        };
        let next = if take_left { left.next() } else { right.next() };
        result.extend(next);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod() -> Value {
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web", "labels": {"app": "web", "env": "prod"}, "finalizers": ["a.io/x"]},
            "spec": {
                "nodeSelector": {"disk": "hdd", "zone": "a"},
                "containers": [
                    {"name": "web", "image": "nginx:1.25", "args": ["-a"],
                     "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                     "ports": [{"containerPort": 80, "protocol": "TCP"}]},
                    {"name": "sidecar", "image": "busybox"}
                ],
                "tolerations": [{"key": "k1", "operator": "Exists"}],
                "volumes": [{"name": "data", "emptyDir": {}}, {"name": "cfg", "configMap": {"name": "c"}}]
            },
            "status": {"conditions": [{"type": "Ready", "status": "False"}, {"type": "PodScheduled", "status": "True"}]}
        })
    }

    /// Applies `patch` to `pod()` and returns the result, to compare parts of it.
    fn apply(patch: Value) -> Result<Value, Error> {
        strategic_merge_patch(&pod(), &patch, &PatchMeta::for_kind("Pod"))
    }

    #[test]
    fn pod_patches() {
        // (what kubectl does, patch, JSON pointer into the result, expected value there)
        let cases: Vec<(&str, Value, &str, Value)> = vec![
            (
                "kubectl apply: image changed and env var B removed",
                json!({"spec": {
                    "$setElementOrder/containers": [{"name": "web"}, {"name": "sidecar"}],
                    "containers": [{"$setElementOrder/env": [{"name": "A"}], "env": [{"$patch": "delete", "name": "B"}], "image": "nginx:1.26", "name": "web"}]
                }}),
                "/spec/containers",
                json!([
                    {"name": "web", "image": "nginx:1.26", "args": ["-a"], "env": [{"name": "A", "value": "1"}], "ports": [{"containerPort": 80, "protocol": "TCP"}]},
                    {"name": "sidecar", "image": "busybox"}
                ]),
            ),
            (
                "kubectl apply: env var inserted in the middle",
                json!({"spec": {"containers": [{"name": "web", "$setElementOrder/env": [{"name": "A"}, {"name": "C"}, {"name": "B"}], "env": [{"name": "C", "value": "3"}]}]}}),
                "/spec/containers/0/env",
                json!([{"name": "A", "value": "1"}, {"name": "C", "value": "3"}, {"name": "B", "value": "2"}]),
            ),
            (
                "new env var without order is appended",
                json!({"spec": {"containers": [{"name": "web", "env": [{"name": "C", "value": "3"}]}]}}),
                "/spec/containers/0/env",
                json!([{"name": "A", "value": "1"}, {"name": "B", "value": "2"}, {"name": "C", "value": "3"}]),
            ),
            (
                "patch list order wins over the object's for the items it names",
                json!({"spec": {"containers": [{"name": "sidecar", "image": "busybox:2"}, {"name": "web"}]}}),
                "/spec/containers/0",
                json!({"name": "sidecar", "image": "busybox:2"}),
            ),
            (
                "$setElementOrder reorders containers",
                json!({"spec": {"$setElementOrder/containers": [{"name": "sidecar"}, {"name": "web"}]}}),
                "/spec/containers/0/name",
                json!("sidecar"),
            ),
            (
                "new container appended",
                json!({"spec": {"containers": [{"name": "log", "image": "fluentd"}]}}),
                "/spec/containers/2",
                json!({"name": "log", "image": "fluentd"}),
            ),
            (
                "ports merge by containerPort",
                json!({"spec": {"containers": [{"name": "web", "ports": [{"containerPort": 80, "name": "http"}, {"containerPort": 443}]}]}}),
                "/spec/containers/0/ports",
                json!([{"containerPort": 80, "protocol": "TCP", "name": "http"}, {"containerPort": 443}]),
            ),
            (
                "args have no strategy: replaced whole",
                json!({"spec": {"containers": [{"name": "web", "args": ["-b"]}]}}),
                "/spec/containers/0/args",
                json!(["-b"]),
            ),
            (
                "tolerations are replaced whole",
                json!({"spec": {"tolerations": [{"key": "k2", "operator": "Exists"}]}}),
                "/spec/tolerations",
                json!([{"key": "k2", "operator": "Exists"}]),
            ),
            (
                "volume deleted by name",
                json!({"spec": {"volumes": [{"$patch": "delete", "name": "data"}]}}),
                "/spec/volumes",
                json!([{"name": "cfg", "configMap": {"name": "c"}}]),
            ),
            (
                "deleting an absent item is a no-op",
                json!({"spec": {"volumes": [{"$patch": "delete", "name": "nope"}]}}),
                "/spec/volumes/0/name",
                json!("data"),
            ),
            (
                "$patch: replace on a list",
                json!({"spec": {"containers": [{"$patch": "replace"}, {"name": "only", "image": "x"}]}}),
                "/spec/containers",
                json!([{"name": "only", "image": "x"}]),
            ),
            (
                "$patch: replace on a map",
                json!({"spec": {"nodeSelector": {"$patch": "replace", "disk": "ssd"}}}),
                "/spec/nodeSelector",
                json!({"disk": "ssd"}),
            ),
            (
                "$patch: delete on a map",
                json!({"spec": {"nodeSelector": {"$patch": "delete"}}}),
                "/spec/nodeSelector",
                json!({}),
            ),
            (
                "label removal",
                json!({"metadata": {"labels": {"env": null}}}),
                "/metadata/labels",
                json!({"app": "web"}),
            ),
            (
                "null for an absent key is ignored",
                json!({"metadata": {"annotations": {"x": null}}}),
                "/metadata/annotations",
                json!({}),
            ),
            (
                "finalizers merge as a set",
                json!({"metadata": {"finalizers": ["b.io/y"]}}),
                "/metadata/finalizers",
                json!(["a.io/x", "b.io/y"]),
            ),
            (
                "a set never holds duplicates",
                json!({"metadata": {"finalizers": ["a.io/x"]}}),
                "/metadata/finalizers",
                json!(["a.io/x"]),
            ),
            (
                "values the patch names come in the patch's order",
                json!({"metadata": {"finalizers": ["b.io/y", "a.io/x"]}}),
                "/metadata/finalizers",
                json!(["b.io/y", "a.io/x"]),
            ),
            (
                "$deleteFromPrimitiveList",
                json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["a.io/x"], "finalizers": ["b.io/y"]}}),
                "/metadata/finalizers",
                json!(["b.io/y"]),
            ),
            (
                "$setElementOrder on a set",
                json!({"metadata": {"$setElementOrder/finalizers": ["c.io/z", "a.io/x"], "finalizers": ["c.io/z"]}}),
                "/metadata/finalizers",
                json!(["c.io/z", "a.io/x"]),
            ),
            (
                "status conditions merge by type",
                json!({"status": {"$setElementOrder/conditions": [{"type": "Ready"}, {"type": "PodScheduled"}], "conditions": [{"type": "Ready", "status": "True"}]}}),
                "/status/conditions",
                json!([{"type": "Ready", "status": "True"}, {"type": "PodScheduled", "status": "True"}]),
            ),
            (
                "a list replacing a scalar (type change) replaces",
                json!({"spec": {"nodeSelector": "x"}}),
                "/spec/nodeSelector",
                json!("x"),
            ),
            (
                "nulls and directives inside a new item are dropped",
                json!({"spec": {"containers": [{"name": "new", "image": "x", "command": null, "env": [{"$patch": "delete", "name": "Z"}]}]}}),
                "/spec/containers/2",
                json!({"name": "new", "image": "x", "env": []}),
            ),
        ];
        for (name, patch, pointer, want) in cases {
            let got = apply(patch).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(got.pointer(pointer), Some(&want), "{name}: {got:#}");
        }
    }

    #[test]
    fn untouched_parts_survive() {
        let got = apply(json!({"spec": {"containers": [{"name": "web", "image": "nginx:1.26"}]}}))
            .unwrap_or_default();
        let mut want = pod();
        want["spec"]["containers"][0]["image"] = json!("nginx:1.26");
        assert_eq!(got, want);
        assert_eq!(apply(json!({})).ok(), Some(pod()));
    }

    #[test]
    fn node_patches() {
        let node = json!({
            "metadata": {"name": "n1"},
            "spec": {"taints": [{"key": "a", "effect": "NoSchedule"}]},
            "status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.1"}, {"type": "Hostname", "address": "n1"}]}
        });
        let meta = PatchMeta::for_kind("Node");
        // (what, patch, expected node)
        let cases = [
            (
                "kubectl cordon",
                json!({"spec": {"unschedulable": true}}),
                json!({"metadata": {"name": "n1"}, "spec": {"taints": [{"key": "a", "effect": "NoSchedule"}], "unschedulable": true}, "status": node["status"]}),
            ),
            (
                "kubectl uncordon (never cordoned)",
                json!({"spec": {"unschedulable": null}}),
                node.clone(),
            ),
            (
                "taints replaced whole",
                json!({"spec": {"taints": [{"key": "b", "effect": "NoExecute"}]}}),
                json!({"metadata": {"name": "n1"}, "spec": {"taints": [{"key": "b", "effect": "NoExecute"}]}, "status": node["status"]}),
            ),
            (
                "addresses merge by type",
                json!({"status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.2"}]}}),
                json!({"metadata": {"name": "n1"}, "spec": node["spec"], "status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.2"}, {"type": "Hostname", "address": "n1"}]}}),
            ),
        ];
        for (name, patch, want) in cases {
            let got = strategic_merge_patch(&node, &patch, &meta)
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(got, want, "{name}");
        }
        let cordoned =
            strategic_merge_patch(&node, &json!({"spec": {"unschedulable": true}}), &meta)
                .unwrap_or_default();
        let uncordoned =
            strategic_merge_patch(&cordoned, &json!({"spec": {"unschedulable": null}}), &meta)
                .unwrap_or_default();
        assert_eq!(uncordoned, node, "uncordon after cordon");
    }

    #[test]
    fn retain_keys() {
        let deployment = json!({"spec": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}}});
        let meta = PatchMeta::for_kind("Deployment");
        let cases = [
            (
                json!({"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}}}),
                Ok(json!({"spec": {"strategy": {"type": "Recreate"}}})),
            ),
            (
                json!({"spec": {"strategy": {"$retainKeys": ["type", "rollingUpdate"], "rollingUpdate": {"maxSurge": 2}}}}),
                Ok(
                    json!({"spec": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 2}}}}),
                ),
            ),
            (
                json!({"spec": {"strategy": {"$retainKeys": ["type"], "rollingUpdate": {"maxSurge": 2}}}}),
                Err(422),
            ),
            (
                json!({"spec": {"strategy": {"$retainKeys": "type"}}}),
                Err(400),
            ),
        ];
        for (patch, want) in cases {
            let got = strategic_merge_patch(&deployment, &patch, &meta).map_err(|e| e.http_code());
            assert_eq!(got, want, "{patch}");
        }
    }

    #[test]
    fn owner_references_by_uid() {
        let cm = json!({"metadata": {"ownerReferences": [{"uid": "1", "name": "a"}, {"uid": "2", "name": "b"}]}});
        let patch = json!({"metadata": {"ownerReferences": [{"uid": "2", "controller": true}, {"$patch": "delete", "uid": "1"}]}});
        let got = strategic_merge_patch(&cm, &patch, &PatchMeta::for_kind("ConfigMap")).ok();
        assert_eq!(
            got,
            Some(
                json!({"metadata": {"ownerReferences": [{"uid": "2", "name": "b", "controller": true}]}})
            )
        );
    }

    #[test]
    fn errors() {
        let cases = [
            (
                json!({"spec": {"containers": [{"image": "x"}]}}),
                "map: {\"image\":\"x\"} does not contain declared merge key: name",
            ),
            (
                json!({"spec": {"volumes": [{"$patch": "delete"}]}}),
                "delete patch type with no merge key defined",
            ),
            (
                json!({"spec": {"nodeSelector": {"$patch": "explode"}}}),
                "unknown patch type: \"explode\" in map: {}",
            ),
            (
                json!({"spec": {"containers": [{"$patch": "merge"}]}}),
                "merging lists cannot yet be specified in the patch",
            ),
            (
                json!({"spec": {"$frobnicate": 1}}),
                "unknown patch directive: $frobnicate",
            ),
            (
                json!({"spec": {"$setElementOrder/containers": "web"}}),
                "invalid patch format of setElementOrder list",
            ),
            (
                json!({"metadata": {"$deleteFromPrimitiveList/finalizers": "a"}}),
                "invalid patch format of primitive list",
            ),
            (json!([1]), "invalid JSON document"),
        ];
        for (patch, want) in cases {
            match apply(patch.clone()) {
                Ok(v) => panic!("{patch} applied: {v}"),
                Err(e) => assert_eq!(e.to_string(), want, "{patch}"),
            }
        }
    }
}
