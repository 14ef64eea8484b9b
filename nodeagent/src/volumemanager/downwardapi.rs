//! Mirrors pkg/volume/downwardapi/downwardapi.go and pkg/fieldpath/fieldpath.go: the pod's own
//! metadata as files.
//!
//! Supported `fieldRef.fieldPath`s: `metadata.name`, `metadata.namespace`, `metadata.uid`,
//! `metadata.labels`, `metadata.annotations` (and the subscripted `metadata.labels['k']` /
//! `metadata.annotations['k']` the extractor understands). `resourceFieldRef` (a container's
//! requests and limits, with the node's allocatable as the default limit) is not implemented yet:
//! such an item fails the volume with an error that says so, rather than writing a wrong number.
//!
//! Like Kubernetes, the volume is memory-backed (tmpfs) and rewritten through the atomic writer on
//! every sync, so a label change reaches the files.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{DownwardAPIVolumeFile, Pod};

use super::atomic_writer::{FileProjection, Payload, file_mode};
use crate::error::{Error, Result};

/// The plugin's directory name under `pods/<uid>/volumes`.
pub const PLUGIN_NAME: &str = "kubernetes.io~downward-api";

/// The files the items describe, each with its `mode` or `default_mode`.
pub fn collect_data(items: &[DownwardAPIVolumeFile], pod: &Pod, default_mode: u32) -> Result<Payload> {
    let mut payload = Payload::new();
    for item in items {
        let mode = file_mode(item.mode, default_mode)?;
        let data = if let Some(field) = &item.field_ref {
            extract_field_path_as_string(pod, &field.field_path)
                .map_err(|e| Error::Invalid(format!("unable to extract field {}: {e}", field.field_path)))?
        } else if item.resource_field_ref.is_some() {
            return Err(Error::Invalid(format!(
                "downward API item {:?}: resourceFieldRef is not supported by kubelab yet",
                item.path
            )));
        } else {
            return Err(Error::Invalid(format!(
                "downward API item {:?}: neither fieldRef nor resourceFieldRef",
                item.path
            )));
        };
        payload.insert(item.path.clone(), FileProjection { data: data.into_bytes(), mode });
    }
    Ok(payload)
}

/// fieldpath.ExtractFieldPathAsString for the pod's metadata.
pub fn extract_field_path_as_string(pod: &Pod, field_path: &str) -> std::result::Result<String, String> {
    let meta = &pod.metadata;
    let empty = BTreeMap::new();
    let labels = meta.labels.as_ref().unwrap_or(&empty);
    let annotations = meta.annotations.as_ref().unwrap_or(&empty);
    if let Some((map, key)) = split_subscript(field_path) {
        return match map {
            "metadata.labels" => Ok(labels.get(key).cloned().unwrap_or_default()),
            "metadata.annotations" => Ok(annotations.get(key).cloned().unwrap_or_default()),
            _ => Err(format!("fieldPath {field_path:?} does not support subscript")),
        };
    }
    match field_path {
        "metadata.annotations" => Ok(format_map(annotations)),
        "metadata.labels" => Ok(format_map(labels)),
        "metadata.name" => Ok(meta.name.clone().unwrap_or_default()),
        "metadata.namespace" => Ok(meta.namespace.clone().unwrap_or_default()),
        "metadata.uid" => Ok(meta.uid.clone().unwrap_or_default()),
        _ => Err(format!("unsupported fieldPath: {field_path}")),
    }
}

/// `metadata.labels['app']` → `("metadata.labels", "app")`.
fn split_subscript(field_path: &str) -> Option<(&str, &str)> {
    let (path, rest) = field_path.split_once("['")?;
    let key = rest.strip_suffix("']")?;
    Some((path, key))
}

/// Kubernetes' format for a labels or annotations file: one `key="value"` line per entry, sorted
/// by key, the value quoted as Go's `%q` does, no newline after the last line.
pub fn format_map(m: &BTreeMap<String, String>) -> String {
    m.iter().map(|(k, v)| format!("{k}={}", go_quote(v))).collect::<Vec<_>>().join("\n")
}

/// Go's `strconv.Quote`: backslash escapes for quotes, backslashes and control characters;
/// printable characters (non-ASCII included) kept as they are. Go's notion of "printable" is
/// approximated by "not a control character and not whitespace other than the ASCII space".
fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if c.is_control() || (c.is_whitespace() && c != ' ') => {
                if (c as u32) < 0x10000 {
                    out.push_str(&format!("\\u{:04x}", c as u32));
                } else {
                    out.push_str(&format!("\\U{:08x}", c as u32));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{ObjectFieldSelector, ResourceFieldSelector};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;
    use crate::volumemanager::atomic_writer::DEFAULT_MODE;

    fn pod() -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some("web-0".into()),
                namespace: Some("shop".into()),
                uid: Some("1234-abcd".into()),
                labels: Some(BTreeMap::from([
                    ("zone".to_string(), "us-east".to_string()),
                    ("app".to_string(), "web".to_string()),
                ])),
                annotations: Some(BTreeMap::from([("note".to_string(), "say \"hi\"\nthen\tleave \\ é".to_string())])),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn field(path: &str, field_path: &str, mode: Option<i32>) -> DownwardAPIVolumeFile {
        DownwardAPIVolumeFile {
            path: path.into(),
            field_ref: Some(ObjectFieldSelector { field_path: field_path.into(), api_version: None }),
            mode,
            ..Default::default()
        }
    }

    #[test]
    fn format_map_table() {
        let cases: &[(&[(&str, &str)], &str)] = &[
            (&[], ""),
            (&[("a", "1")], "a=\"1\""),
            (&[("b", "2"), ("a", "1")], "a=\"1\"\nb=\"2\""),
            (&[("q", "say \"hi\"")], r#"q="say \"hi\"""#),
            (&[("nl", "x\ny\tz\\")], r#"nl="x\ny\tz\\""#),
            (&[("ctl", "\u{1}\u{7f}")], r#"ctl="\x01\x7f""#),
            (&[("uni", "é☃ ok")], "uni=\"é☃ ok\""),
            (&[("nbsp", "a\u{a0}b")], r#"nbsp="a\u00a0b""#),
        ];
        for (entries, want) in cases {
            let m: BTreeMap<String, String> = entries.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
            assert_eq!(format_map(&m), *want, "{entries:?}");
        }
    }

    #[test]
    fn collects_metadata_fields() -> Result<()> {
        let items = [
            field("labels", "metadata.labels", None),
            field("annotations", "metadata.annotations", Some(0o600)),
            field("name", "metadata.name", None),
            field("ns", "metadata.namespace", None),
            field("meta/uid", "metadata.uid", None),
            field("app", "metadata.labels['app']", None),
        ];
        let p = collect_data(&items, &pod(), DEFAULT_MODE)?;
        let text = |k: &str| String::from_utf8_lossy(&p[k].data).into_owned();
        assert_eq!(text("labels"), "app=\"web\"\nzone=\"us-east\"");
        assert_eq!(text("annotations"), r#"note="say \"hi\"\nthen\tleave \\ é""#);
        assert_eq!(p["annotations"].mode, 0o600);
        assert_eq!(p["labels"].mode, 0o644);
        assert_eq!(text("name"), "web-0");
        assert_eq!(text("ns"), "shop");
        assert_eq!(text("meta/uid"), "1234-abcd");
        assert_eq!(text("app"), "web");
        Ok(())
    }

    #[test]
    fn unsupported_fields_say_so() {
        let err = collect_data(&[field("ip", "status.podIP", None)], &pod(), DEFAULT_MODE).expect_err("unsupported");
        assert_eq!(err.to_string(), "unable to extract field status.podIP: unsupported fieldPath: status.podIP");
        let item = DownwardAPIVolumeFile {
            path: "cpu".into(),
            resource_field_ref: Some(ResourceFieldSelector { resource: "limits.cpu".into(), ..Default::default() }),
            ..Default::default()
        };
        let err = collect_data(&[item], &pod(), DEFAULT_MODE).expect_err("not yet");
        assert!(err.to_string().contains("resourceFieldRef is not supported"), "{err}");
    }
}
