//! Mirrors pkg/volume/projected/projected.go: several sources (configMaps, secrets, the downward
//! API, service account tokens) merged into one directory.
//!
//! A `serviceAccountToken` source is a token of the pod's service account, bound to the pod, for
//! the source's audience and lifetime, written to its `path` with the volume's `defaultMode`; the
//! token manager ([`crate::token`]) fetches and refreshes it, and each sync rewrites the file when
//! the token changed. The API server's ServiceAccount admission gives every pod such a volume,
//! `kube-api-access-<suffix>`: `token`, `ca.crt` (the `kube-root-ca.crt` configMap) and
//! `namespace`.
//!
//! Not supported, each skipped with a warning naming the pod and source: `clusterTrustBundle` and
//! `podCertificate` (no such APIs in kubelab).
//!
//! Like Kubernetes, the volume is memory-backed (tmpfs).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, VolumeProjection};
use tracing::warn;

use super::atomic_writer::{FileProjection, Payload};
use super::{configmap, downwardapi, secret};
use crate::error::{Error, Result};

/// The plugin's directory name under `pods/<uid>/volumes`.
pub(crate) const PLUGIN_NAME: &str = "kubernetes.io~projected";

/// The configMaps and secrets the sources name, fetched beforehand by name; a name missing from
/// the map is an object that does not exist.
#[derive(Clone, Debug, Default)]
pub(crate) struct ProjectedObjects {
    pub(crate) config_maps: BTreeMap<String, ConfigMap>,
    pub(crate) secrets: BTreeMap<String, Secret>,
    /// The service account tokens of `serviceAccountToken` sources, by their `path`.
    pub(crate) tokens: BTreeMap<String, String>,
    /// The node's allocatable, for downwardAPI `resourceFieldRef`s of unset limits.
    pub(crate) node_allocatable: downwardapi::Allocatable,
}

/// The merged payload of every source, in order (a later source's file wins a path clash, which
/// API validation forbids anyway). `volume` names the volume in the log lines of skipped sources.
pub(crate) fn collect_data(
    volume: &str,
    sources: &[VolumeProjection],
    pod: &Pod,
    default_mode: u32,
    objects: &ProjectedObjects,
) -> Result<Payload> {
    let mut payload = Payload::new();
    let uid = api::pod::uid(pod);
    for source in sources {
        if let Some(cm) = &source.config_map {
            let optional = cm.optional.unwrap_or(false);
            let part = match objects.config_maps.get(&cm.name) {
                Some(object) => configmap::make_payload(cm.items.as_deref(), object, default_mode, optional)?,
                None if optional => Payload::new(),
                None => return Err(configmap::not_found(&cm.name)),
            };
            payload.extend(part);
        }
        if let Some(s) = &source.secret {
            let optional = s.optional.unwrap_or(false);
            let part = match objects.secrets.get(&s.name) {
                Some(object) => secret::make_payload(s.items.as_deref(), object, default_mode, optional)?,
                None if optional => Payload::new(),
                None => return Err(secret::not_found(&s.name)),
            };
            payload.extend(part);
        }
        if let Some(d) = &source.downward_api {
            let items = d.items.as_deref().unwrap_or_default();
            payload.extend(downwardapi::collect_data(items, pod, &objects.node_allocatable, default_mode)?);
        }
        if let Some(token) = &source.service_account_token {
            let data = objects.tokens.get(&token.path).ok_or_else(|| {
                Error::NotReady(format!("no service account token was fetched for path {:?}", token.path))
            })?;
            payload.insert(token.path.clone(), FileProjection { data: data.clone().into_bytes(), mode: default_mode });
        }
        if source.cluster_trust_bundle.is_some() {
            warn!(target: "kubelet::volumes", pod = %uid, volume, "skipping clusterTrustBundle projection: not supported by kubelab");
        }
        if source.pod_certificate.is_some() {
            warn!(target: "kubelet::volumes", pod = %uid, volume, "skipping podCertificate projection: not supported by kubelab");
        }
    }
    Ok(payload)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::ByteString;
    use k8s_openapi::api::core::v1::{
        ConfigMapProjection, DownwardAPIProjection, DownwardAPIVolumeFile, KeyToPath, ObjectFieldSelector,
        SecretProjection, ServiceAccountTokenProjection,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;
    use crate::volumemanager::atomic_writer::DEFAULT_MODE;

    /// The shape of the volume the API server injects for service-account access.
    fn kube_api_access(ca_optional: bool) -> Vec<VolumeProjection> {
        vec![
            VolumeProjection {
                service_account_token: Some(ServiceAccountTokenProjection {
                    path: "token".into(),
                    ..Default::default()
                }),
                ..Default::default()
            },
            VolumeProjection {
                config_map: Some(ConfigMapProjection {
                    name: "kube-root-ca.crt".into(),
                    items: Some(vec![KeyToPath { key: "ca.crt".into(), path: "ca.crt".into(), ..Default::default() }]),
                    optional: Some(ca_optional),
                }),
                ..Default::default()
            },
            VolumeProjection {
                downward_api: Some(DownwardAPIProjection {
                    items: Some(vec![DownwardAPIVolumeFile {
                        path: "namespace".into(),
                        field_ref: Some(ObjectFieldSelector {
                            field_path: "metadata.namespace".into(),
                            api_version: None,
                        }),
                        ..Default::default()
                    }]),
                }),
                ..Default::default()
            },
            VolumeProjection {
                secret: Some(SecretProjection { name: "extra".into(), optional: Some(true), ..Default::default() }),
                ..Default::default()
            },
        ]
    }

    fn pod() -> Pod {
        Pod {
            metadata: ObjectMeta { namespace: Some("shop".into()), uid: Some("u".into()), ..Default::default() },
            ..Default::default()
        }
    }

    fn with_token() -> ProjectedObjects {
        ProjectedObjects { tokens: BTreeMap::from([("token".into(), "eyJ.a.b".into())]), ..Default::default() }
    }

    #[test]
    fn merges_sources_with_the_token() -> Result<()> {
        let mut objects = with_token();
        objects.config_maps.insert(
            "kube-root-ca.crt".into(),
            ConfigMap { data: Some(BTreeMap::from([("ca.crt".into(), "CA".into())])), ..Default::default() },
        );
        let p = collect_data("kube-api-access", &kube_api_access(false), &pod(), 0o444, &objects)?;
        assert_eq!(p.keys().collect::<Vec<_>>(), ["ca.crt", "namespace", "token"]);
        assert_eq!(p["ca.crt"].data, b"CA");
        assert_eq!(p["namespace"].data, b"shop");
        assert_eq!(p["namespace"].mode, 0o444);
        assert_eq!(p["token"].data, b"eyJ.a.b");
        assert_eq!(p["token"].mode, 0o444, "the volume's defaultMode");

        objects.secrets.insert(
            "extra".into(),
            Secret { data: Some(BTreeMap::from([("k".into(), ByteString(b"v".to_vec()))])), ..Default::default() },
        );
        let p = collect_data("kube-api-access", &kube_api_access(false), &pod(), DEFAULT_MODE, &objects)?;
        assert_eq!(p["k"].data, b"v");
        Ok(())
    }

    #[test]
    fn missing_required_object_fails_optional_is_skipped() -> Result<()> {
        let objects = with_token();
        let err = collect_data("v", &kube_api_access(false), &pod(), DEFAULT_MODE, &objects).expect_err("no configmap");
        assert_eq!(err.to_string(), r#"configmap "kube-root-ca.crt" not found"#);
        assert!(matches!(err, crate::Error::NotReady(_)));
        let p = collect_data("v", &kube_api_access(true), &pod(), DEFAULT_MODE, &objects)?;
        assert_eq!(p.keys().collect::<Vec<_>>(), ["namespace", "token"]);
        Ok(())
    }

    #[test]
    fn a_token_not_fetched_fails() {
        let err = collect_data("v", &kube_api_access(true), &pod(), DEFAULT_MODE, &ProjectedObjects::default())
            .expect_err("no token");
        assert_eq!(err.to_string(), r#"no service account token was fetched for path "token""#);
    }
}
