//! Mirrors RFC 7386 JSON merge patch as the API server applies it (evanphx/json-patch's
//! `MergePatch`), used for `application/merge-patch+json` (`kubectl label`, `annotate`,
//! `patch --type=merge`).

use serde_json::{Map, Value};

/// Applies an RFC 7386 merge patch: a `null` deletes the key, an object merges key by key into
/// the target's object (replacing a non-object), anything else (lists included) replaces.
pub fn merge_patch(target: &Value, patch: &Value) -> Value {
    let Value::Object(patch_map) = patch else {
        return patch.clone();
    };
    let mut result = match target {
        Value::Object(m) => m.clone(),
        _ => Map::new(),
    };
    for (k, v) in patch_map {
        if v.is_null() {
            result.remove(k);
        } else {
            let merged = merge_patch(result.get(k).unwrap_or(&Value::Null), v);
            result.insert(k.clone(), merged);
        }
    }
    Value::Object(result)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merge_patches() {
        // (target, patch, result): the RFC 7386 appendix examples plus kubectl's.
        let cases = [
            (json!({"a": "b"}), json!({"a": "c"}), json!({"a": "c"})),
            (
                json!({"a": "b"}),
                json!({"b": "c"}),
                json!({"a": "b", "b": "c"}),
            ),
            (json!({"a": "b"}), json!({"a": null}), json!({})),
            (
                json!({"a": "b", "b": "c"}),
                json!({"a": null}),
                json!({"b": "c"}),
            ),
            (json!({"a": ["b"]}), json!({"a": "c"}), json!({"a": "c"})),
            (json!({"a": "c"}), json!({"a": ["b"]}), json!({"a": ["b"]})),
            (
                json!({"a": {"b": "c"}}),
                json!({"a": {"b": "d", "c": null}}),
                json!({"a": {"b": "d"}}),
            ),
            (
                json!({"a": [{"b": "c"}]}),
                json!({"a": [1]}),
                json!({"a": [1]}),
            ),
            (json!(["a", "b"]), json!(["c", "d"]), json!(["c", "d"])),
            (json!({"a": "b"}), json!(["c"]), json!(["c"])),
            (json!({"a": "foo"}), json!(null), json!(null)),
            (json!({"a": "foo"}), json!("bar"), json!("bar")),
            (
                json!({"e": null}),
                json!({"a": 1}),
                json!({"e": null, "a": 1}),
            ),
            (
                json!([1, 2]),
                json!({"a": "b", "c": null}),
                json!({"a": "b"}),
            ),
            (
                json!({}),
                json!({"a": {"bb": {"ccc": null}}}),
                json!({"a": {"bb": {}}}),
            ),
            // kubectl label pod web env=prod / env-
            (
                json!({"metadata": {"name": "web", "labels": {"app": "web"}}}),
                json!({"metadata": {"labels": {"env": "prod"}}}),
                json!({"metadata": {"name": "web", "labels": {"app": "web", "env": "prod"}}}),
            ),
            (
                json!({"metadata": {"name": "web", "labels": {"app": "web", "env": "prod"}}}),
                json!({"metadata": {"labels": {"env": null}}}),
                json!({"metadata": {"name": "web", "labels": {"app": "web"}}}),
            ),
            // A label removal on an object without labels leaves an empty map, as Kubernetes does.
            (
                json!({"metadata": {"name": "web"}}),
                json!({"metadata": {"labels": {"env": null}}}),
                json!({"metadata": {"name": "web", "labels": {}}}),
            ),
        ];
        for (target, patch, want) in cases {
            assert_eq!(merge_patch(&target, &patch), want, "{target} + {patch}");
        }
    }
}
