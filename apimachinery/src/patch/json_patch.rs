//! Mirrors the API server's use of evanphx/json-patch (patch.go's `applyJSPatch`): RFC 6902.

use serde_json::Value;

use super::Error;

/// Applies an RFC 6902 JSON patch (`[{"op":"replace","path":"/spec/replicas","value":3}]`).
///
/// A body that is not a list of operations is a 400 (`BadPatch`); an operation that cannot be
/// applied (missing path, failed `test`) is a 422 (`CannotApply`), as in Kubernetes. The patch is
/// atomic: on error the target is untouched (we work on a copy).
pub fn json_patch(target: &Value, patch: &[u8]) -> Result<Value, Error> {
    let ops: json_patch::Patch = serde_json::from_slice(patch)
        .map_err(|e| Error::BadPatch(format!("error decoding patch: {e}")))?;
    let mut doc = target.clone();
    json_patch::patch(&mut doc, &ops).map_err(|e| Error::CannotApply(e.to_string()))?;
    Ok(doc)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_patches() {
        let pod = json!({"metadata": {"name": "web", "labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "nginx:1.25"}]}});
        // (patch, Ok(result) or Err(http code))
        let cases: Vec<(&str, Result<Value, u16>)> = vec![
            (
                r#"[{"op":"replace","path":"/spec/containers/0/image","value":"nginx:1.26"}]"#,
                Ok(
                    json!({"metadata": {"name": "web", "labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "nginx:1.26"}]}}),
                ),
            ),
            (
                r#"[{"op":"add","path":"/metadata/labels/env","value":"prod"},{"op":"remove","path":"/metadata/labels/app"}]"#,
                Ok(
                    json!({"metadata": {"name": "web", "labels": {"env": "prod"}}, "spec": {"containers": [{"name": "c", "image": "nginx:1.25"}]}}),
                ),
            ),
            (
                r#"[{"op":"test","path":"/metadata/name","value":"web"}]"#,
                Ok(pod.clone()),
            ),
            (
                r#"[{"op":"test","path":"/metadata/name","value":"db"}]"#,
                Err(422),
            ),
            (r#"[{"op":"remove","path":"/spec/nodeName"}]"#, Err(422)),
            (r#"[{"op":"frobnicate","path":"/x"}]"#, Err(400)),
            (r#"{"spec":{}}"#, Err(400)),
            ("not json", Err(400)),
            ("[]", Ok(pod.clone())),
        ];
        for (patch, want) in cases {
            let got = json_patch(&pod, patch.as_bytes()).map_err(|e| e.http_code());
            assert_eq!(got, want, "{patch}");
        }
    }
}
