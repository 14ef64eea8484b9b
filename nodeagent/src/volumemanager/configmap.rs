//! Mirrors pkg/volume/configmap/configmap.go: a configMap's keys as files.
//!
//! The volume is a disk-backed emptyDir ("wrapped", as Kubernetes says) that the
//! [`AtomicWriter`](super::atomic_writer::AtomicWriter) fills. Fetching the configMap is the
//! [`VolumeManager`](super::VolumeManager)'s job; this file only turns an object into a payload, so
//! it is tested without an API server.

use k8s_openapi::api::core::v1::{ConfigMap, KeyToPath};

use super::atomic_writer::{FileProjection, Payload, file_mode};
use crate::error::{Error, Result};

/// The plugin's directory name under `pods/<uid>/volumes` (`kubernetes.io/configmap`, escaped).
pub(crate) const PLUGIN_NAME: &str = "kubernetes.io~configmap";

/// The error a missing configMap gives, in kubelet's words (its configMap manager names the
/// resource in the singular, unlike the API server's `configmaps "x" not found`).
pub(crate) fn not_found(name: &str) -> Error {
    Error::NotReady(format!("configmap {name:?} not found"))
}

/// The files a configMap projects. Without `items`, every key of `data` and `binaryData` becomes a
/// file of that name with `default_mode`; with `items`, only the listed keys, at their `path`, with
/// their own `mode` if given. A listed key the configMap lacks is an error, unless the source is
/// `optional` (then it is skipped).
pub(crate) fn make_payload(
    items: Option<&[KeyToPath]>,
    config_map: &ConfigMap,
    default_mode: u32,
    optional: bool,
) -> Result<Payload> {
    let lookup = |key: &str| -> Option<Vec<u8>> {
        config_map
            .data
            .as_ref()
            .and_then(|d| d.get(key))
            .map(|s| s.as_bytes().to_vec())
            .or_else(|| config_map.binary_data.as_ref().and_then(|d| d.get(key)).map(|b| b.0.clone()))
    };
    let mut payload = Payload::new();
    match items {
        Some(items) if !items.is_empty() => {
            for item in items {
                let Some(data) = lookup(&item.key) else {
                    if optional {
                        continue;
                    }
                    return Err(Error::VolumeSpec(format!("configmap references non-existent config key: {}", item.key)));
                };
                payload.insert(item.path.clone(), FileProjection { data, mode: file_mode(item.mode, default_mode)? });
            }
        }
        _ => {
            let text = config_map.data.iter().flatten().map(|(k, v)| (k, v.as_bytes().to_vec()));
            let binary = config_map.binary_data.iter().flatten().map(|(k, v)| (k, v.0.clone()));
            for (key, data) in text.chain(binary) {
                payload.insert(key.clone(), FileProjection { data, mode: default_mode });
            }
        }
    }
    Ok(payload)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::ByteString;

    use super::*;
    use crate::volumemanager::atomic_writer::DEFAULT_MODE;

    fn config_map() -> ConfigMap {
        ConfigMap {
            data: Some(BTreeMap::from([
                ("app.yaml".to_string(), "a: 1".to_string()),
                ("level".to_string(), "debug".to_string()),
            ])),
            binary_data: Some(BTreeMap::from([("logo.png".to_string(), ByteString(vec![0x89, 0x50]))])),
            ..Default::default()
        }
    }

    fn item(key: &str, path: &str, mode: Option<i32>) -> KeyToPath {
        KeyToPath { key: key.into(), path: path.into(), mode, ..Default::default() }
    }

    #[test]
    fn all_keys_without_items() -> Result<()> {
        let p = make_payload(None, &config_map(), 0o640, false)?;
        assert_eq!(p.keys().collect::<Vec<_>>(), ["app.yaml", "level", "logo.png"]);
        assert_eq!(p["level"], FileProjection { data: b"debug".to_vec(), mode: 0o640 });
        assert_eq!(p["logo.png"].data, vec![0x89, 0x50]);
        // An empty items list means "all keys" too.
        assert_eq!(make_payload(Some(&[]), &config_map(), DEFAULT_MODE, false)?.len(), 3);
        Ok(())
    }

    #[test]
    fn items_select_rename_and_set_modes() -> Result<()> {
        let items = [item("app.yaml", "conf/app.yaml", Some(0o600)), item("logo.png", "logo", None)];
        let p = make_payload(Some(&items), &config_map(), DEFAULT_MODE, false)?;
        assert_eq!(p.len(), 2);
        assert_eq!(p["conf/app.yaml"], FileProjection { data: b"a: 1".to_vec(), mode: 0o600 });
        assert_eq!(p["logo"].mode, 0o644);
        Ok(())
    }

    #[test]
    fn missing_key_is_an_error_unless_optional() -> Result<()> {
        let items = [item("nope", "nope", None), item("level", "level", None)];
        let err = make_payload(Some(&items), &config_map(), DEFAULT_MODE, false).expect_err("missing key");
        assert_eq!(err.to_string(), "configmap references non-existent config key: nope");
        let p = make_payload(Some(&items), &config_map(), DEFAULT_MODE, true)?;
        assert_eq!(p.keys().collect::<Vec<_>>(), ["level"]);
        Ok(())
    }

    #[test]
    fn bad_item_mode_is_rejected() {
        let items = [item("level", "level", Some(0o4755))];
        assert!(make_payload(Some(&items), &config_map(), DEFAULT_MODE, false).is_err());
    }

    #[test]
    fn not_found_message() {
        assert_eq!(not_found("app-config").to_string(), r#"configmap "app-config" not found"#);
    }
}
