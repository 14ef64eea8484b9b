//! Mirrors the ServiceAccount admission plugin (plugin/pkg/admission/serviceaccount/admission.go):
//! every pod runs as a service account that exists — `default` unless it names one — and, when
//! the API server issues tokens, gets the account's API credentials as a volume.
//!
//! 1. On the request ([`ServiceAccount::admit`]): the account the pod names is looked up — in the
//!    watch cache, then (as the plugin's live lookup) in the store, `default` up to ten times,
//!    since it is created with its namespace. An account that does not exist refuses the pod:
//!    403, `pods "web" is forbidden: error looking up service account default/robot: serviceaccount
//!    "robot" not found`. One read from the store waits for the watch cache to reach it, so step 2
//!    finds it there.
//! 2. On the object ([`ServiceAccount::admit_object`]): `serviceAccountName` defaulted (and its
//!    deprecated alias `serviceAccount` kept in step); the account's `imagePullSecrets` when the
//!    pod has none; and, unless the pod or the account sets `automountServiceAccountToken: false`,
//!    the projected volume `kube-api-access-<5 random>` — a bound token (`token`, 3607 s, which
//!    the node agent requests through TokenRequest and renews), the cluster's CA (`ca.crt`, from
//!    the `kube-root-ca.crt` ConfigMap the controller manager publishes) and the pod's
//!    `namespace` — mounted read-only at `/var/run/secrets/kubernetes.io/serviceaccount` in every
//!    init and app container that mounts nothing there already (ephemeral containers are left
//!    alone, as in Kubernetes).
//!
//! Mirror pods are left alone: their node agent created them, not a user.
//!
//! Implementation caveats:
//! - The volume is added only when the API server issues tokens (`--service-account-signing-key-
//!   file`): kube-apiserver cannot start without one, kubelab can, and a pod whose node agent can
//!   get no token would never start.
//! - Kubernetes' mirror-pod validation (no service account, no secret or token volumes in a mirror
//!   pod) is not done: kubelab's node agent makes mirror pods of its static pods as they are.

use std::sync::Arc;
use std::time::Duration;

use api::pod::is_mirror_pod;
use futures::future::LocalBoxFuture;
use k8s_openapi::api::core::v1::{
    ConfigMapProjection, Container, DownwardAPIProjection, DownwardAPIVolumeFile, KeyToPath, LocalObjectReference,
    ObjectFieldSelector, Pod, PodSpec, ProjectedVolumeSource, ServiceAccountTokenProjection, Volume, VolumeMount,
    VolumeProjection,
};
use serde_json::Value;

use super::interfaces::{Attributes, MutationInterface, Operation};
use crate::error::{Error, Result};
use crate::registry::generic::store::{Registry, generated_name, resource_version_of};
use crate::registry::generic::typed::Object;

pub const NAME: &str = "ServiceAccount";
/// The account a pod runs as unless it names one.
pub const DEFAULT_SERVICE_ACCOUNT_NAME: &str = crate::registry::core::serviceaccount::strategy::DEFAULT_SERVICE_ACCOUNT_NAME;
/// The prefix of the token volume's name (`ServiceAccountVolumeName`).
pub const SERVICE_ACCOUNT_VOLUME_NAME: &str = "kube-api-access";
/// Where every container finds the credentials (`DefaultAPITokenMountPath`).
pub const DEFAULT_API_TOKEN_MOUNT_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
/// The token's requested lifetime: an hour and seven seconds, the number kube-apiserver knows
/// as its own volume's (`WarnOnlyBoundTokenExpirationSeconds`).
pub const TOKEN_EXPIRATION_SECONDS: i64 = 3607;
/// The ConfigMap with the cluster's CA in every namespace (the root CA publisher's).
pub const ROOT_CA_CONFIG_MAP: &str = "kube-root-ca.crt";
/// Live lookups of `default` before the pod is refused, and the pause between them
/// (Kubernetes: 10, 100–200 ms).
const DEFAULT_ACCOUNT_ATTEMPTS: u32 = 10;
const RETRY_INTERVAL: Duration = Duration::from_millis(150);

/// Where the plugin reads service accounts: kube-apiserver's informer lister (`cached`) and its
/// live GET (`live`, which also waits until `cached` holds what it read).
pub trait ServiceAccountGetter: Send + Sync {
    fn cached(&self, namespace: &str, name: &str) -> Option<Arc<Value>>;
    fn live<'a>(&'a self, namespace: &'a str, name: &'a str) -> LocalBoxFuture<'a, Result<Option<Arc<Value>>>>;
}

/// The service accounts' generic store: its watch cache, then the store.
impl ServiceAccountGetter for Arc<Registry> {
    fn cached(&self, namespace: &str, name: &str) -> Option<Arc<Value>> {
        self.cache.get(&self.key(Some(namespace), name))
    }

    fn live<'a>(&'a self, namespace: &'a str, name: &'a str) -> LocalBoxFuture<'a, Result<Option<Arc<Value>>>> {
        Box::pin(async move {
            match self.get(Some(namespace), name).await {
                Ok(sa) => {
                    if let Some(rv) = resource_version_of(&sa) {
                        self.cache.wait_until(rv).await?;
                    }
                    Ok(Some(Arc::new(sa)))
                }
                Err(Error::NotFound { .. }) => Ok(None),
                Err(e) => Err(e),
            }
        })
    }
}

pub struct ServiceAccount {
    service_accounts: Box<dyn ServiceAccountGetter>,
    /// Whether pods get the token volume (the API server issues tokens).
    mount_service_account_token: bool,
}

impl ServiceAccount {
    pub fn new(service_accounts: Box<dyn ServiceAccountGetter>, mount_service_account_token: bool) -> Self {
        Self { service_accounts, mount_service_account_token }
    }

    /// Step 1: the account exists (`getServiceAccount`).
    async fn check_exists(&self, a: &Attributes<'_>, pod: &Value) -> Result<()> {
        let namespace = a.namespace.unwrap_or("default");
        let name = requested_account(pod);
        if self.service_accounts.cached(namespace, name).is_some() {
            return Ok(());
        }
        let attempts = if name == DEFAULT_SERVICE_ACCOUNT_NAME { DEFAULT_ACCOUNT_ATTEMPTS } else { 1 };
        for attempt in 0..attempts {
            if attempt > 0 {
                tokio::time::sleep(RETRY_INTERVAL).await;
            }
            if self.service_accounts.live(namespace, name).await?.is_some() {
                return Ok(());
            }
        }
        Err(a.forbidden(&format!("error looking up service account {namespace}/{name}: serviceaccount \"{name}\" not found")))
    }
}

impl MutationInterface for ServiceAccount {
    fn name(&self) -> &'static str {
        NAME
    }

    fn handles(&self, a: &Attributes<'_>) -> bool {
        a.operation == Operation::Create && a.is_for("", "pods") && a.subresource.is_empty()
    }

    fn admit<'a>(&'a self, a: &'a Attributes<'a>) -> LocalBoxFuture<'a, Result<()>> {
        Box::pin(async move {
            match a.object {
                Some(pod) if !is_mirror(pod) => self.check_exists(a, pod).await,
                _ => Ok(()),
            }
        })
    }

    fn admit_object(&self, a: &Attributes<'_>, obj: &mut Object) -> Result<()> {
        let Some(pod) = obj.typed_mut::<Pod>() else { return Ok(()) };
        if is_mirror_pod(pod) {
            return Ok(());
        }
        let spec = pod.spec.get_or_insert_with(PodSpec::default);
        default_service_account(spec);
        let namespace = a.namespace.unwrap_or("default");
        let name = spec.service_account_name.as_deref().unwrap_or(DEFAULT_SERVICE_ACCOUNT_NAME);
        // Step 1 found it, and made the cache hold it; gone since, the pod is admitted as if the
        // account set nothing (its node agent will find no account to get a token for).
        let account = self.service_accounts.cached(namespace, name);
        let account = account.as_deref();
        if self.mount_service_account_token && should_automount(account, spec) {
            mount_service_account_token(spec, &generated_name(&format!("{SERVICE_ACCOUNT_VOLUME_NAME}-")));
        }
        add_image_pull_secrets(account, spec);
        Ok(())
    }
}

/// The account a pod's request names (before defaults), `default` if none.
fn requested_account(pod: &Value) -> &str {
    ["/spec/serviceAccountName", "/spec/serviceAccount"]
        .iter()
        .filter_map(|p| pod.pointer(p).and_then(Value::as_str))
        .find(|s| !s.is_empty())
        .unwrap_or(DEFAULT_SERVICE_ACCOUNT_NAME)
}

fn is_mirror(pod: &Value) -> bool {
    pod.pointer("/metadata/annotations").and_then(Value::as_object).is_some_and(|a| a.contains_key(api::pod::kubelet_types::CONFIG_MIRROR_ANNOTATION_KEY))
}

/// Every pod runs as some service account. `serviceAccount` is the deprecated alias the API keeps
/// in step with `serviceAccountName`.
fn default_service_account(spec: &mut PodSpec) {
    if spec.service_account_name.as_deref().is_none_or(str::is_empty) {
        spec.service_account_name = Some(DEFAULT_SERVICE_ACCOUNT_NAME.to_string());
    }
    spec.service_account = spec.service_account_name.clone();
}

/// The pod's own `automountServiceAccountToken` wins, then the account's; mounted by default.
fn should_automount(account: Option<&Value>, spec: &PodSpec) -> bool {
    spec.automount_service_account_token
        .or_else(|| account.and_then(|sa| sa.get("automountServiceAccountToken")).and_then(Value::as_bool))
        .unwrap_or(true)
}

/// A pod that names no pull secrets gets its account's.
fn add_image_pull_secrets(account: Option<&Value>, spec: &mut PodSpec) {
    if spec.image_pull_secrets.as_ref().is_some_and(|s| !s.is_empty()) {
        return;
    }
    let secrets: Vec<LocalObjectReference> = account
        .and_then(|sa| sa.get("imagePullSecrets"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|s| s.get("name").and_then(Value::as_str))
        .map(|name| LocalObjectReference { name: name.to_string() })
        .collect();
    if !secrets.is_empty() {
        spec.image_pull_secrets = Some(secrets);
    }
}

/// `mountServiceAccountToken`: the token volume (an existing `kube-api-access-*` one is reused,
/// else one named `new_volume_name`) mounted in every init and app container that has nothing at
/// the mount path; the volume is added only if some container mounts it.
fn mount_service_account_token(spec: &mut PodSpec, new_volume_name: &str) {
    let existing = spec
        .volumes
        .iter()
        .flatten()
        .map(|v| v.name.as_str())
        .find(|n| n.starts_with(&format!("{SERVICE_ACCOUNT_VOLUME_NAME}-")))
        .map(str::to_string);
    let volume_name = existing.clone().unwrap_or_else(|| new_volume_name.to_string());
    let mount = VolumeMount {
        name: volume_name.clone(),
        read_only: Some(true),
        mount_path: DEFAULT_API_TOKEN_MOUNT_PATH.to_string(),
        ..Default::default()
    };
    let mut needs_volume = false;
    let containers = spec.init_containers.iter_mut().flatten().chain(spec.containers.iter_mut());
    for container in containers {
        if !mounts_at_token_path(container) {
            container.volume_mounts.get_or_insert_with(Vec::new).push(mount.clone());
            needs_volume = true;
        }
    }
    if existing.is_none() && needs_volume {
        spec.volumes.get_or_insert_with(Vec::new).push(Volume {
            name: volume_name,
            projected: Some(token_volume_source()),
            ..Default::default()
        });
    }
}

fn mounts_at_token_path(c: &Container) -> bool {
    c.volume_mounts.iter().flatten().any(|m| m.mount_path == DEFAULT_API_TOKEN_MOUNT_PATH)
}

/// `TokenVolumeSource`: the token, the CA, the namespace; mode 0644 written out.
fn token_volume_source() -> ProjectedVolumeSource {
    ProjectedVolumeSource {
        default_mode: Some(0o644),
        sources: Some(vec![
            VolumeProjection {
                service_account_token: Some(ServiceAccountTokenProjection {
                    path: "token".into(),
                    expiration_seconds: Some(TOKEN_EXPIRATION_SECONDS),
                    ..Default::default()
                }),
                ..Default::default()
            },
            VolumeProjection {
                config_map: Some(ConfigMapProjection {
                    name: ROOT_CA_CONFIG_MAP.into(),
                    items: Some(vec![KeyToPath { key: "ca.crt".into(), path: "ca.crt".into(), ..Default::default() }]),
                    optional: None,
                }),
                ..Default::default()
            },
            VolumeProjection {
                downward_api: Some(DownwardAPIProjection {
                    items: Some(vec![DownwardAPIVolumeFile {
                        path: "namespace".into(),
                        field_ref: Some(ObjectFieldSelector { api_version: Some("v1".into()), field_path: "metadata.namespace".into() }),
                        ..Default::default()
                    }]),
                }),
                ..Default::default()
            },
        ]),
        ..Default::default()
    }
}

/// A getter over fixed accounts, for the tests here and of the create handler.
#[cfg(test)]
pub mod testing {
    use std::collections::BTreeMap;

    use super::*;

    #[derive(Default)]
    pub struct Accounts(pub BTreeMap<(String, String), Arc<Value>>);

    impl Accounts {
        /// `default` in `default`, as every namespace has it.
        pub fn with_default() -> Self {
            let mut a = Self::default();
            a.add("default", serde_json::json!({"metadata": {"name": "default", "namespace": "default"}}));
            a
        }

        pub fn add(&mut self, namespace: &str, sa: Value) {
            let name = sa["metadata"]["name"].as_str().expect("named").to_string();
            self.0.insert((namespace.to_string(), name), Arc::new(sa));
        }
    }

    impl ServiceAccountGetter for Accounts {
        fn cached(&self, namespace: &str, name: &str) -> Option<Arc<Value>> {
            self.0.get(&(namespace.to_string(), name.to_string())).cloned()
        }

        fn live<'a>(&'a self, namespace: &'a str, name: &'a str) -> LocalBoxFuture<'a, Result<Option<Arc<Value>>>> {
            Box::pin(std::future::ready(Ok(self.cached(namespace, name))))
        }
    }

    /// The plugin over `accounts`, mounting tokens.
    pub fn plugin(accounts: Accounts) -> ServiceAccount {
        ServiceAccount::new(Box::new(accounts), true)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::testing::{Accounts, plugin};
    use super::*;
    use crate::admission::interfaces::testing::{NOBODY, minimal};
    use crate::registry::core::pod::strategy::PODS;

    /// A create of `pod`, named as the create handler names it (empty for a generateName).
    fn attributes<'a>(pod: &'a Value) -> Attributes<'a> {
        let name = crate::registry::generic::store::name_of(pod);
        Attributes { operation: Operation::Create, user: &NOBODY, resource: &PODS, subresource: "", namespace: Some("default"), name, dry_run: false, object: Some(pod), old_object: None }
    }

    /// The plugin's two steps on `json` (defaulted between them as the store does).
    fn admitted(p: &ServiceAccount, json: Value) -> Result<PodSpec> {
        let a = attributes(&json);
        futures::executor::block_on(p.admit(&a))?;
        let mut pod: Pod = serde_json::from_value(json.clone()).expect("test pod is valid");
        api::core::v1::defaults::set_defaults_pod(&mut pod);
        let mut obj = Object::new(serde_json::to_value(pod).expect("json"));
        p.admit_object(&a, &mut obj)?;
        let pod: Pod = serde_json::from_value(obj.into_json()).expect("a pod");
        Ok(pod.spec.expect("a spec"))
    }

    #[test]
    fn service_account_from_deprecated_field_and_mirror_pods() {
        let mut accounts = Accounts::with_default();
        accounts.add("default", json!({"metadata": {"name": "legacy"}}));
        let p = plugin(accounts);
        let s = admitted(&p, minimal()).expect("admitted");
        assert_eq!(s.service_account_name.as_deref(), Some("default"));
        assert_eq!(s.service_account.as_deref(), Some("default"));

        let mut j = minimal();
        j["spec"]["serviceAccount"] = "legacy".into();
        let s = admitted(&p, j).expect("admitted");
        assert_eq!(s.service_account_name.as_deref(), Some("legacy"));
        assert_eq!(s.service_account.as_deref(), Some("legacy"));

        let mut mirror = minimal();
        mirror["metadata"]["annotations"] = json!({"kubernetes.io/config.mirror": "abc"});
        mirror["spec"]["serviceAccountName"] = "nobody".into();
        let s = admitted(&p, mirror).expect("a mirror pod is not looked up");
        assert_eq!(s.service_account_name.as_deref(), Some("nobody"), "the ServiceAccount plugin skips mirror pods");
        assert!(s.volumes.is_none());
    }

    #[test]
    fn a_missing_account_is_refused_with_kubernetes_message() {
        let p = plugin(Accounts::with_default());
        let mut j = minimal();
        j["spec"]["serviceAccountName"] = "robot".into();
        let err = admitted(&p, j.clone()).expect_err("no such account");
        assert_eq!(err.code(), 403);
        assert_eq!(err.to_string(), r#"pods "web" is forbidden: error looking up service account default/robot: serviceaccount "robot" not found"#);
        j["metadata"] = json!({"generateName": "web-"});
        let err = admitted(&p, j).expect_err("no such account");
        assert!(err.to_string().starts_with(r#"pods "web-" is forbidden: "#), "{err}");
    }

    #[test]
    fn token_volume_mounted_in_init_and_app_containers() {
        let p = plugin(Accounts::with_default());
        let mut j = minimal();
        j["spec"]["initContainers"] = json!([{"name": "init", "image": "busybox:1.36"}]);
        j["spec"]["containers"] = json!([
            {"name": "app", "image": "busybox:1.36"},
            {"name": "own", "image": "busybox:1.36", "volumeMounts": [{"name": "mine", "mountPath": DEFAULT_API_TOKEN_MOUNT_PATH}]}
        ]);
        j["spec"]["volumes"] = json!([{"name": "mine", "emptyDir": {}}]);
        let s = admitted(&p, j).expect("admitted");
        let volumes = s.volumes.as_ref().expect("volumes");
        assert_eq!(volumes.len(), 2);
        let token = &volumes[1];
        assert!(token.name.starts_with("kube-api-access-") && token.name.len() == "kube-api-access-".len() + 5, "{}", token.name);
        let projected = token.projected.as_ref().expect("projected");
        assert_eq!(projected.default_mode, Some(0o644));
        let sources = projected.sources.as_ref().expect("sources");
        assert_eq!(sources[0].service_account_token.as_ref().map(|t| (t.path.as_str(), t.expiration_seconds)), Some(("token", Some(3607))));
        assert_eq!(sources[1].config_map.as_ref().map(|c| c.name.as_str()), Some("kube-root-ca.crt"));
        assert_eq!(sources[2].downward_api.as_ref().and_then(|d| d.items.as_ref()).map(|i| i[0].path.as_str()), Some("namespace"));
        let mount = |c: &Container| c.volume_mounts.iter().flatten().find(|m| m.mount_path == DEFAULT_API_TOKEN_MOUNT_PATH).map(|m| (m.name.clone(), m.read_only));
        let init = &s.init_containers.as_ref().expect("init")[0];
        assert_eq!(mount(init), Some((token.name.clone(), Some(true))));
        assert_eq!(mount(&s.containers[0]), Some((token.name.clone(), Some(true))));
        assert_eq!(mount(&s.containers[1]), Some(("mine".into(), None)), "a container's own mount at the path stays");
    }

    #[test]
    fn automount_and_pull_secrets_from_the_pod_then_the_account() {
        let mut accounts = Accounts::with_default();
        accounts.add("default", json!({"metadata": {"name": "quiet"}, "automountServiceAccountToken": false, "imagePullSecrets": [{"name": "regcred"}]}));
        let p = plugin(accounts);
        let mut j = minimal();
        j["spec"]["serviceAccountName"] = "quiet".into();
        let s = admitted(&p, j.clone()).expect("admitted");
        assert!(s.volumes.is_none(), "the account says no token");
        assert_eq!(s.image_pull_secrets.as_ref().map(|v| v[0].name.as_str()), Some("regcred"));

        j["spec"]["automountServiceAccountToken"] = true.into();
        j["spec"]["imagePullSecrets"] = json!([{"name": "own"}]);
        let s = admitted(&p, j).expect("admitted");
        assert_eq!(s.volumes.as_ref().map(Vec::len), Some(1), "the pod's own setting wins");
        assert_eq!(s.image_pull_secrets.as_ref().map(|v| v[0].name.as_str()), Some("own"), "the pod's own pull secrets stay");

        let mut j = minimal();
        j["spec"]["automountServiceAccountToken"] = false.into();
        assert!(admitted(&p, j).expect("admitted").volumes.is_none());

        let off = ServiceAccount::new(Box::new(Accounts::with_default()), false);
        assert!(admitted(&off, minimal()).expect("admitted").volumes.is_none(), "no token issuer, no token volume");
    }

    #[test]
    fn an_existing_token_volume_is_reused() {
        let p = plugin(Accounts::with_default());
        let mut j = minimal();
        j["spec"]["volumes"] = json!([{"name": "kube-api-access-abcde", "emptyDir": {}}]);
        let s = admitted(&p, j).expect("admitted");
        assert_eq!(s.volumes.as_ref().map(Vec::len), Some(1));
        assert_eq!(s.containers[0].volume_mounts.as_ref().map(|m| m[0].name.as_str()), Some("kube-api-access-abcde"));
    }
}
