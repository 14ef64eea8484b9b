//! Mirrors pkg/volume/downwardapi/downwardapi.go and pkg/fieldpath/fieldpath.go: the pod's own
//! metadata as files.
//!
//! Supported `fieldRef.fieldPath`s: `metadata.name`, `metadata.namespace`, `metadata.uid`,
//! `metadata.labels`, `metadata.annotations` (and the subscripted `metadata.labels['k']` /
//! `metadata.annotations['k']` the extractor understands).
//!
//! `resourceFieldRef` (pkg/api/v1/resource's `ExtractContainerResourceValue`, with kubelet's
//! `defaultPodLimitsForDownwardAPI`): a container's `limits.cpu`, `limits.memory`,
//! `limits.ephemeral-storage` and the matching `requests.*`, divided by the `divisor` (default 1)
//! and **rounded up** — so 250m of cpu with the default divisor reads `1`, and with divisor `1m`
//! reads `250`. A limit the container does not set reads as the node's allocatable, which is what
//! the container may really use. The same extractor serves environment variables
//! (kuberuntime_container's `make_environment_variables`).
//!
//! Like Kubernetes, the volume is memory-backed (tmpfs) and rewritten through the atomic writer on
//! every sync, so a label change reaches the files.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, DownwardAPIVolumeFile, Pod, ResourceFieldSelector};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::atomic_writer::{FileProjection, Payload, file_mode};
use crate::error::{Error, Result};

/// The plugin's directory name under `pods/<uid>/volumes`.
pub(crate) const PLUGIN_NAME: &str = "kubernetes.io~downward-api";

/// The node's allocatable resources (`status.allocatable`), by resource name: the value of a
/// limit a container leaves unset.
pub(crate) type Allocatable = BTreeMap<String, Quantity>;

/// The files the items describe, each with its `mode` or `default_mode`.
pub(crate) fn collect_data(
    items: &[DownwardAPIVolumeFile],
    pod: &Pod,
    allocatable: &Allocatable,
    default_mode: u32,
) -> Result<Payload> {
    let mut payload = Payload::new();
    for item in items {
        let mode = file_mode(item.mode, default_mode)?;
        let data = if let Some(field) = &item.field_ref {
            extract_field_path_as_string(pod, &field.field_path)
                .map_err(|e| Error::VolumeSpec(format!("unable to extract field {}: {e}", field.field_path)))?
        } else if let Some(sel) = &item.resource_field_ref {
            let name = sel.container_name.as_deref().unwrap_or_default();
            let container = find_container(pod, name)
                .ok_or_else(|| Error::VolumeSpec(format!("downward API item {:?}: container {name:?} not found in the pod", item.path)))?;
            extract_container_resource_value(sel, container, allocatable)
                .map_err(|e| Error::VolumeSpec(format!("unable to extract resource {}: {e}", sel.resource)))?
        } else {
            return Err(Error::VolumeSpec(format!(
                "downward API item {:?}: neither fieldRef nor resourceFieldRef",
                item.path
            )));
        };
        payload.insert(item.path.clone(), FileProjection { data: data.into_bytes(), mode });
    }
    Ok(payload)
}

/// fieldpath.ExtractFieldPathAsString for the pod's metadata.
pub(crate) fn extract_field_path_as_string(pod: &Pod, field_path: &str) -> std::result::Result<String, String> {
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

/// A container of the pod by name (app containers first, then init containers).
pub(crate) fn find_container<'a>(pod: &'a Pod, name: &str) -> Option<&'a Container> {
    let spec = pod.spec.as_ref()?;
    spec.containers.iter().chain(spec.init_containers.iter().flatten()).find(|c| c.name == name)
}

/// ExtractContainerResourceValue: `limits.cpu` & co. of `container` in units of the divisor,
/// rounded up; an unset limit is the node's allocatable.
pub(crate) fn extract_container_resource_value(
    sel: &ResourceFieldSelector,
    container: &Container,
    allocatable: &Allocatable,
) -> std::result::Result<String, String> {
    use apimachinery::resource::{parse_quantity_milli, parse_quantity_units};
    let (kind, resource) = sel
        .resource
        .split_once('.')
        .filter(|(k, r)| matches!(*k, "limits" | "requests") && matches!(*r, "cpu" | "memory" | "ephemeral-storage"))
        .ok_or_else(|| format!("unsupported container resource : {}", sel.resource))?;
    let res = container.resources.clone().unwrap_or_default();
    let set = if kind == "limits" { res.limits.as_ref() } else { res.requests.as_ref() };
    let value = match set.and_then(|m| m.get(resource)) {
        Some(q) => q.0.clone(),
        // kubelet's defaultPodLimitsForDownwardAPI: the node's allocatable stands in for a limit.
        None if kind == "limits" => allocatable
            .get(resource)
            .map(|q| q.0.clone())
            .ok_or_else(|| format!("the container sets no {resource} limit and the node's allocatable {resource} is not known"))?,
        // An unset request is zero (API defaulting already copied any limit into it).
        None => "0".to_string(),
    };
    // A zero (or absent) divisor means 1, as Kubernetes reads an empty Quantity.
    let divisor = sel.divisor.as_ref().map(|q| q.0.as_str()).filter(|d| parse_quantity_milli(d).is_some_and(|m| m != 0));
    let bad = |q: &str| format!("invalid quantity {q:?}");
    let (amount, per) = if resource == "cpu" {
        // Millicores over the divisor's millicores: 250m / 1 → 1, 250m / 1m → 250.
        let v = parse_quantity_milli(&value).ok_or_else(|| bad(&value))?;
        let d = divisor.map_or(Some(1000), parse_quantity_milli).ok_or_else(|| bad(divisor.unwrap_or_default()))?;
        (v, d)
    } else {
        // Bytes over the divisor's bytes: 128Mi / 1Mi → 128.
        let v = parse_quantity_units(&value).ok_or_else(|| bad(&value))?;
        let d = divisor.map_or(Some(1), parse_quantity_units).ok_or_else(|| bad(divisor.unwrap_or_default()))?;
        (v, d)
    };
    if per <= 0 {
        return Err(format!("invalid divisor {:?}", divisor.unwrap_or_default()));
    }
    Ok(ceil_div(amount, per).to_string())
}

/// ⌈a / b⌉ for b > 0 (Go's `math.Ceil(float64(a) / float64(b))`, without the float).
fn ceil_div(a: i64, b: i64) -> i64 {
    let (q, r) = (a.div_euclid(b), a.rem_euclid(b));
    if r == 0 { q } else { q + 1 }
}

/// `metadata.labels['app']` → `("metadata.labels", "app")`.
fn split_subscript(field_path: &str) -> Option<(&str, &str)> {
    let (path, rest) = field_path.split_once("['")?;
    let key = rest.strip_suffix("']")?;
    Some((path, key))
}

/// Kubernetes' format for a labels or annotations file: one `key="value"` line per entry, sorted
/// by key, the value quoted as Go's `%q` does, no newline after the last line.
pub(crate) fn format_map(m: &BTreeMap<String, String>) -> String {
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
        let p = collect_data(&items, &pod(), &Allocatable::new(), DEFAULT_MODE)?;
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
        let err = collect_data(&[field("ip", "status.podIP", None)], &pod(), &Allocatable::new(), DEFAULT_MODE).expect_err("unsupported");
        assert_eq!(err.to_string(), "unable to extract field status.podIP: unsupported fieldPath: status.podIP");
        let item = DownwardAPIVolumeFile {
            path: "cpu".into(),
            resource_field_ref: Some(ResourceFieldSelector { resource: "limits.cpu".into(), container_name: Some("nope".into()), ..Default::default() }),
            ..Default::default()
        };
        let err = collect_data(&[item], &pod(), &Allocatable::new(), DEFAULT_MODE).expect_err("no such container");
        assert_eq!(err.to_string(), "downward API item \"cpu\": container \"nope\" not found in the pod");
    }

    fn q(s: &str) -> Quantity {
        Quantity(s.to_string())
    }

    fn resources(limits: &[(&str, &str)], requests: &[(&str, &str)]) -> Container {
        let map = |kv: &[(&str, &str)]| (!kv.is_empty()).then(|| kv.iter().map(|(k, v)| (k.to_string(), q(v))).collect());
        Container {
            name: "app".into(),
            resources: Some(k8s_openapi::api::core::v1::ResourceRequirements {
                limits: map(limits),
                requests: map(requests),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn resource_values_table() {
        let node: Allocatable =
            [("cpu", "2"), ("memory", "4Gi"), ("ephemeral-storage", "10Gi")].iter().map(|(k, v)| (k.to_string(), q(v))).collect();
        let sized = resources(&[("cpu", "1250m"), ("memory", "128Mi"), ("ephemeral-storage", "1Gi")], &[("cpu", "250m"), ("memory", "64Mi")]);
        let bare = resources(&[], &[]);
        // (container, resource, divisor, want)
        type Case<'a> = (&'a Container, &'a str, Option<&'a str>, Result<&'a str, &'a str>);
        let cases: &[Case] = &[
            // cpu rounds up to whole divisors.
            (&sized, "limits.cpu", None, Ok("2")),
            (&sized, "limits.cpu", Some("1m"), Ok("1250")),
            (&sized, "requests.cpu", None, Ok("1")),
            (&sized, "requests.cpu", Some("1m"), Ok("250")),
            (&sized, "requests.cpu", Some("100m"), Ok("3")),
            (&sized, "requests.cpu", Some("0"), Ok("1")),
            (&sized, "limits.memory", None, Ok("134217728")),
            (&sized, "limits.memory", Some("1Mi"), Ok("128")),
            (&sized, "limits.memory", Some("1M"), Ok("135")),
            (&sized, "requests.memory", Some("1Mi"), Ok("64")),
            (&sized, "limits.ephemeral-storage", Some("1Gi"), Ok("1")),
            (&sized, "requests.ephemeral-storage", None, Ok("0")),
            // Unset limits are the node's allocatable.
            (&bare, "limits.cpu", None, Ok("2")),
            (&bare, "limits.cpu", Some("1m"), Ok("2000")),
            (&bare, "limits.memory", Some("1Gi"), Ok("4")),
            (&bare, "limits.ephemeral-storage", Some("1Gi"), Ok("10")),
            (&bare, "requests.cpu", None, Ok("0")),
            (&sized, "limits.hugepages-2Mi", None, Err("unsupported container resource : limits.hugepages-2Mi")),
            (&sized, "cpu", None, Err("unsupported container resource : cpu")),
        ];
        for (c, resource, divisor, want) in cases {
            let sel = ResourceFieldSelector { resource: resource.to_string(), divisor: divisor.map(q), container_name: None };
            let got = extract_container_resource_value(&sel, c, &node);
            assert_eq!(got.as_deref().map_err(String::as_str), *want, "{resource} / {divisor:?}");
        }
        let err = extract_container_resource_value(
            &ResourceFieldSelector { resource: "limits.memory".into(), ..Default::default() },
            &bare,
            &Allocatable::new(),
        )
        .expect_err("no allocatable");
        assert!(err.contains("allocatable memory is not known"), "{err}");
    }

    #[test]
    fn resource_items_in_the_volume() -> Result<()> {
        let mut p = pod();
        p.spec = Some(k8s_openapi::api::core::v1::PodSpec {
            containers: vec![resources(&[("memory", "256Mi")], &[("cpu", "500m")])],
            ..Default::default()
        });
        let item = |path: &str, resource: &str, divisor: Option<&str>| DownwardAPIVolumeFile {
            path: path.into(),
            resource_field_ref: Some(ResourceFieldSelector {
                container_name: Some("app".into()),
                resource: resource.into(),
                divisor: divisor.map(q),
            }),
            ..Default::default()
        };
        let node: Allocatable = [("cpu".to_string(), q("4"))].into();
        let payload = collect_data(
            &[item("mem", "limits.memory", Some("1Mi")), item("cpu_req", "requests.cpu", Some("1m")), item("cpu_lim", "limits.cpu", None)],
            &p,
            &node,
            DEFAULT_MODE,
        )?;
        let text = |k: &str| String::from_utf8_lossy(&payload[k].data).into_owned();
        assert_eq!((text("mem"), text("cpu_req"), text("cpu_lim")), ("256".into(), "500".into(), "4".into()));
        Ok(())
    }
}
