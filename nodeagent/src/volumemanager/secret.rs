//! Mirrors pkg/volume/secret/secret.go: a secret's keys as files.
//!
//! As in Kubernetes, the volume is always a memory-backed emptyDir (tmpfs), so secret bytes never
//! reach the node's disk. Fetching is the [`VolumeManager`](super::VolumeManager)'s job; this file
//! turns an object into a payload.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{KeyToPath, Secret};

use super::atomic_writer::{FileProjection, Payload, file_mode};
use crate::error::{Error, Result};

/// The plugin's directory name under `pods/<uid>/volumes`.
pub(crate) const PLUGIN_NAME: &str = "kubernetes.io~secret";

/// The error a missing secret gives, in kubelet's words.
pub(crate) fn not_found(name: &str) -> Error {
    Error::NotReady(format!("secret {name:?} not found"))
}

/// The secret's keys and bytes. `stringData` is write-only in the API (the API server folds it into
/// `data`); it is folded here too, winning over `data` as it does there, so that an object that
/// skipped the API server (a test, a static manifest) reads the same.
fn secret_data(secret: &Secret) -> BTreeMap<&str, Vec<u8>> {
    let mut data: BTreeMap<&str, Vec<u8>> =
        secret.data.iter().flatten().map(|(k, v)| (k.as_str(), v.0.clone())).collect();
    for (k, v) in secret.string_data.iter().flatten() {
        data.insert(k.as_str(), v.as_bytes().to_vec());
    }
    data
}

/// The files a secret projects; the same rules as
/// [`configmap::make_payload`](super::configmap::make_payload).
pub(crate) fn make_payload(
    items: Option<&[KeyToPath]>,
    secret: &Secret,
    default_mode: u32,
    optional: bool,
) -> Result<Payload> {
    let data = secret_data(secret);
    let mut payload = Payload::new();
    match items {
        Some(items) if !items.is_empty() => {
            for item in items {
                let Some(bytes) = data.get(item.key.as_str()) else {
                    if optional {
                        continue;
                    }
                    return Err(Error::VolumeSpec(format!("references non-existent secret key: {}", item.key)));
                };
                payload.insert(
                    item.path.clone(),
                    FileProjection { data: bytes.clone(), mode: file_mode(item.mode, default_mode)? },
                );
            }
        }
        _ => {
            for (key, bytes) in data {
                payload.insert(key.to_string(), FileProjection { data: bytes, mode: default_mode });
            }
        }
    }
    Ok(payload)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::ByteString;

    use super::*;
    use crate::volumemanager::atomic_writer::DEFAULT_MODE;

    fn secret() -> Secret {
        Secret {
            data: Some(BTreeMap::from([
                ("tls.crt".to_string(), ByteString(b"CERT".to_vec())),
                ("tls.key".to_string(), ByteString(b"KEY".to_vec())),
            ])),
            string_data: Some(BTreeMap::from([("token".to_string(), "t0k".to_string())])),
            ..Default::default()
        }
    }

    #[test]
    fn all_keys_including_string_data() -> Result<()> {
        let p = make_payload(None, &secret(), 0o400, false)?;
        assert_eq!(p.keys().collect::<Vec<_>>(), ["tls.crt", "tls.key", "token"]);
        assert_eq!(p["token"], FileProjection { data: b"t0k".to_vec(), mode: 0o400 });
        Ok(())
    }

    #[test]
    fn items_and_missing_keys() -> Result<()> {
        let items = [
            KeyToPath {
                key: "tls.key".into(),
                path: "private/key.pem".into(),
                mode: Some(0o600),
                ..Default::default()
            },
            KeyToPath { key: "ca.crt".into(), path: "ca.crt".into(), ..Default::default() },
        ];
        let err = make_payload(Some(&items), &secret(), DEFAULT_MODE, false).expect_err("ca.crt missing");
        assert_eq!(err.to_string(), "references non-existent secret key: ca.crt");
        let p = make_payload(Some(&items), &secret(), DEFAULT_MODE, true)?;
        assert_eq!(p.len(), 1);
        assert_eq!(p["private/key.pem"], FileProjection { data: b"KEY".to_vec(), mode: 0o600 });
        Ok(())
    }

    #[test]
    fn not_found_message() {
        assert_eq!(not_found("db-creds").to_string(), r#"secret "db-creds" not found"#);
    }
}
