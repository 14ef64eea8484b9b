//! Mirrors pkg/controller/certificates/rootcacertpublisher/publisher.go: every namespace holds a
//! ConfigMap `kube-root-ca.crt` whose `ca.crt` is the cluster's root CA bundle, so that a pod
//! can verify the API server it reaches at `kubernetes.default.svc` (projected service account
//! volumes mount it next to the token).
//!
//! A namespace added or changed (and not terminating) queues itself; a `kube-root-ca.crt` that
//! is deleted, or that someone changed so that it is no longer what it should be
//! ([`needs_update`]), queues its namespace. One sync
//! ([`Publisher::sync_namespace`]):
//! 1. Read the namespace from the cache; gone or terminating: nothing to do (nothing may be
//!    created in it).
//! 2. No `kube-root-ca.crt` in the cache: create it ([`new_config_map`]). AlreadyExists (the
//!    cache is behind) is done: if that one is wrong, its event queues the namespace again. So
//!    is a create refused because the namespace is gone or has begun terminating meanwhile.
//! 3. It holds the CA and a description: nothing to do.
//! 4. Otherwise update it ([`updated_config_map`]): its data becomes exactly `ca.crt`, the
//!    description annotation is set, the rest of it is kept.

use std::collections::BTreeMap;

use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, PostParams};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};

use crate::error::{Error, Result};
use crate::workqueue::WorkQueue;

const TARGET: &str = "controllers::rootcacertpublisher";
/// Workers syncing at once (kube-controller-manager starts this controller with one).
pub const WORKERS: usize = 1;
/// The ConfigMap published in every namespace.
pub const ROOT_CA_CERT_CONFIG_MAP_NAME: &str = "kube-root-ca.crt";
/// Its one key: the PEM bundle.
pub const CA_CERT_KEY: &str = "ca.crt";
/// The annotation that says what the ConfigMap is for, and its text (Kubernetes' own words, so
/// that a client reading it sees what a real cluster says).
pub const DESCRIPTION_ANNOTATION: &str = "kubernetes.io/description";
pub const DESCRIPTION: &str = concat!(
    "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal ",
    "service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters.",
);
/// The status cause the API server's NamespaceLifecycle admission gives a create refused in a
/// terminating namespace (`v1.NamespaceTerminatingCause`).
const NAMESPACE_TERMINATING_CAUSE: &str = "NamespaceTerminating";

/// Publishes one root CA bundle (PEM) in every namespace.
pub struct Publisher {
    /// Lists and watches for the caches: the controller manager's own client (see
    /// [`crate::controller_context`]).
    informers: kube::Client,
    /// Everything else: the controller's own client.
    client: kube::Client,
    root_ca: String,
}

/// The data a `kube-root-ca.crt` holds: `ca.crt` and nothing else.
fn desired_data(root_ca: &str) -> BTreeMap<String, String> {
    BTreeMap::from([(CA_CERT_KEY.to_string(), root_ca.to_string())])
}

/// Step 2: the ConfigMap created in a namespace that has none (the namespace comes from the
/// request's path).
pub fn new_config_map(root_ca: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(ROOT_CA_CERT_CONFIG_MAP_NAME.to_string()),
            annotations: Some(BTreeMap::from([(DESCRIPTION_ANNOTATION.to_string(), DESCRIPTION.to_string())])),
            ..ObjectMeta::default()
        },
        data: Some(desired_data(root_ca)),
        ..ConfigMap::default()
    }
}

/// Step 3: whether an existing `kube-root-ca.crt` must be rewritten: its data is not exactly
/// `ca.crt` with this CA, or it has no (or an empty) description. As in Kubernetes, any
/// non-empty description will do (a distribution may word its own), and `binaryData` and the
/// other annotations are not looked at.
pub fn needs_update(cm: &ConfigMap, root_ca: &str) -> bool {
    let described = cm.metadata.annotations.as_ref().and_then(|a| a.get(DESCRIPTION_ANNOTATION)).is_some_and(|d| !d.is_empty());
    cm.data.as_ref() != Some(&desired_data(root_ca)) || !described
}

/// Step 4: `cm` as it is written back: data exactly `ca.crt`, the description set; its other
/// annotations, labels, `binaryData` and resourceVersion (so a concurrent write makes this one
/// fail with a conflict rather than be lost) kept.
pub fn updated_config_map(cm: &ConfigMap, root_ca: &str) -> ConfigMap {
    let mut cm = cm.clone();
    cm.data = Some(desired_data(root_ca));
    cm.metadata.annotations.get_or_insert_with(BTreeMap::new).insert(DESCRIPTION_ANNOTATION.to_string(), DESCRIPTION.to_string());
    cm
}

/// Whether a namespace is being deleted: nothing new may be created in it.
pub fn is_terminating(ns: &Namespace) -> bool {
    ns.metadata.deletion_timestamp.is_some() || ns.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Terminating")
}

/// Whether a create was refused because its namespace is terminating. Kubernetes looks for the
/// `NamespaceTerminating` cause in the 403's details; kubelab's NamespaceLifecycle admission
/// sends none, so its message (Kubernetes' wording) is recognised too.
fn refused_as_terminating(e: &kube::Error) -> bool {
    let kube::Error::Api(s) = e else { return false };
    let by_cause = s.details.as_ref().is_some_and(|d| d.causes.iter().any(|c| c.reason == NAMESPACE_TERMINATING_CAUSE));
    s.is_forbidden() && (by_cause || s.message.ends_with("because it is being terminated"))
}

impl Publisher {
    pub fn new(informers: kube::Client, client: kube::Client, root_ca: String) -> Self {
        Self { informers, client, root_ca }
    }

    /// Watches namespaces and the `kube-root-ca.crt` ConfigMaps (those alone, by a field
    /// selector: Kubernetes' informer holds every ConfigMap) into caches; [`WORKERS`] workers
    /// sync the namespaces queued.
    pub async fn run(self) -> Result<()> {
        let (namespaces, namespaces_w) = reflector::store::<Namespace>();
        let (config_maps, config_maps_w) = reflector::store::<ConfigMap>();
        let queue: WorkQueue<String> = WorkQueue::new();
        let informers = async {
            // namespaceAdded / namespaceUpdated.
            let on_namespace = |ev: watcher::Event<Namespace>| match ev {
                watcher::Event::Apply(ns) | watcher::Event::InitApply(ns) if !is_terminating(&ns) => {
                    queue.add(ns.metadata.name.unwrap_or_default());
                }
                _ => {}
            };
            // configMapUpdated / configMapDeleted: only a change that leaves it wrong matters
            // (the controller's own writes do not queue anything).
            let on_config_map = |ev: watcher::Event<ConfigMap>| match ev {
                watcher::Event::Apply(cm) | watcher::Event::InitApply(cm) if needs_update(&cm, &self.root_ca) => {
                    queue.add(cm.metadata.namespace.unwrap_or_default());
                }
                watcher::Event::Delete(cm) => queue.add(cm.metadata.namespace.unwrap_or_default()),
                _ => {}
            };
            let by_name = watcher::Config::default().fields(&format!("metadata.name={ROOT_CA_CERT_CONFIG_MAP_NAME}"));
            tokio::join!(
                drive("namespaces", reflector::reflector(namespaces_w, watcher(Api::<Namespace>::all(self.informers.clone()), watcher::Config::default())), on_namespace),
                drive("configmaps", reflector::reflector(config_maps_w, watcher(Api::<ConfigMap>::all(self.informers.clone()), by_name)), on_config_map),
            );
        };
        let work = async {
            if namespaces.wait_until_ready().await.is_err() || config_maps.wait_until_ready().await.is_err() {
                return;
            }
            let worker = || async {
                while let Some(ns) = queue.get().await {
                    match self.sync_namespace(&namespaces, &config_maps, &ns).await {
                        Ok(()) => queue.forget(&ns),
                        Err(e) => {
                            tracing::warn!(target: TARGET, namespace = %ns, error = %e, "syncing the root CA ConfigMap failed; will retry");
                            queue.add_rate_limited(ns.clone());
                        }
                    }
                    queue.done(&ns);
                }
            };
            futures::future::join_all((0..WORKERS).map(|_| worker())).await;
        };
        tokio::select! {
            () = informers => {}
            () = work => {}
        }
        Ok(())
    }

    /// Steps 1–4 for one namespace.
    async fn sync_namespace(&self, namespaces: &Store<Namespace>, config_maps: &Store<ConfigMap>, ns: &str) -> Result<()> {
        // Step 1.
        match namespaces.get(&ObjectRef::new(ns)) {
            Some(namespace) if !is_terminating(&namespace) => {}
            _ => return Ok(()),
        }
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), ns);
        // Step 2.
        let Some(cm) = config_maps.get(&ObjectRef::new(ROOT_CA_CERT_CONFIG_MAP_NAME).within(ns)) else {
            return match api.create(&PostParams::default(), &new_config_map(&self.root_ca)).await {
                Ok(_) => {
                    tracing::info!(target: TARGET, namespace = %ns, configmap = ROOT_CA_CERT_CONFIG_MAP_NAME, "published the root CA");
                    Ok(())
                }
                Err(kube::Error::Api(s)) if s.is_already_exists() || s.is_not_found() => Ok(()),
                Err(e) if refused_as_terminating(&e) => Ok(()),
                Err(e) => Err(Error::Kube(e)),
            };
        };
        // Step 3.
        if !needs_update(&cm, &self.root_ca) {
            return Ok(());
        }
        // Step 4.
        api.replace(ROOT_CA_CERT_CONFIG_MAP_NAME, &PostParams::default(), &updated_config_map(&cm, &self.root_ca)).await.map_err(Error::Kube)?;
        tracing::info!(target: TARGET, namespace = %ns, configmap = ROOT_CA_CERT_CONFIG_MAP_NAME, "restored the root CA");
        Ok(())
    }
}

/// Runs one informer, handing each event to `on_event` once its cache has taken it in.
async fn drive<K>(what: &'static str, stream: impl Stream<Item = watcher::Result<watcher::Event<K>>>, on_event: impl Fn(watcher::Event<K>)) {
    let mut stream = std::pin::pin!(stream.default_backoff());
    while let Some(ev) = stream.next().await {
        match ev {
            Ok(ev) => on_event(ev),
            Err(e) => tracing::warn!(target: TARGET, resource = what, error = %e, "watch failed; retrying"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    const CA: &str = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";

    fn config_map(v: Value) -> ConfigMap {
        serde_json::from_value(v).expect("a ConfigMap")
    }

    #[test]
    fn a_new_config_map_holds_the_ca_and_the_description() {
        let cm = new_config_map(CA);
        assert_eq!(
            serde_json::to_value(&cm).expect("serializes"),
            json!({
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "kube-root-ca.crt", "annotations": {"kubernetes.io/description": DESCRIPTION}},
                "data": {"ca.crt": CA},
            })
        );
        // Word for word Kubernetes' (clients may compare it).
        let kubernetes = "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the \
                          internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of \
                          Kubernetes clusters.";
        assert_eq!(DESCRIPTION, kubernetes);
        assert!(!needs_update(&cm, CA));
    }

    #[test]
    fn which_config_maps_need_an_update() {
        let described = json!({"kubernetes.io/description": DESCRIPTION});
        // (the ConfigMap, whether it must be rewritten)
        let cases = [
            (json!({"metadata": {"annotations": described}, "data": {"ca.crt": CA}}), false),
            // Other annotations, labels and binaryData are not the controller's business.
            (
                json!({"metadata": {"labels": {"a": "b"}, "annotations": {"kubernetes.io/description": DESCRIPTION, "owner": "me"}},
                       "data": {"ca.crt": CA}, "binaryData": {"extra": "AA=="}}),
                false,
            ),
            // Any non-empty description is kept, as in Kubernetes.
            (json!({"metadata": {"annotations": {"kubernetes.io/description": "ours"}}, "data": {"ca.crt": CA}}), false),
            (json!({"metadata": {"annotations": {"kubernetes.io/description": ""}}, "data": {"ca.crt": CA}}), true),
            (json!({"metadata": {"annotations": {"owner": "me"}}, "data": {"ca.crt": CA}}), true),
            (json!({"metadata": {}, "data": {"ca.crt": CA}}), true),
            (json!({"metadata": {"annotations": described}, "data": {"ca.crt": "another CA"}}), true),
            (json!({"metadata": {"annotations": described}, "data": {"ca.crt": CA, "extra": "x"}}), true),
            (json!({"metadata": {"annotations": described}, "data": {}}), true),
            (json!({"metadata": {"annotations": described}}), true),
        ];
        for (cm, want) in cases {
            assert_eq!(needs_update(&config_map(cm.clone()), CA), want, "{cm}");
        }
    }

    #[test]
    fn an_update_sets_the_data_and_the_description_and_keeps_the_rest() {
        let cm = config_map(json!({
            "metadata": {"name": "kube-root-ca.crt", "namespace": "team", "resourceVersion": "42",
                         "labels": {"a": "b"}, "annotations": {"owner": "me", "kubernetes.io/description": ""}},
            "data": {"ca.crt": "stale", "extra": "x"},
            "binaryData": {"blob": "AA=="},
        }));
        let updated = updated_config_map(&cm, CA);
        assert_eq!(
            serde_json::to_value(&updated).expect("serializes"),
            json!({
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "kube-root-ca.crt", "namespace": "team", "resourceVersion": "42",
                             "labels": {"a": "b"}, "annotations": {"owner": "me", "kubernetes.io/description": DESCRIPTION}},
                "data": {"ca.crt": CA},
                "binaryData": {"blob": "AA=="},
            })
        );
        assert!(!needs_update(&updated, CA));
        // No annotations at all: the description is the one.
        let bare = updated_config_map(&config_map(json!({"metadata": {"name": "kube-root-ca.crt"}})), CA);
        assert_eq!(bare.metadata.annotations, Some(BTreeMap::from([(DESCRIPTION_ANNOTATION.to_string(), DESCRIPTION.to_string())])));
    }

    #[test]
    fn terminating_namespaces() {
        let ns = |v: Value| serde_json::from_value::<Namespace>(v).expect("a Namespace");
        assert!(!is_terminating(&ns(json!({"metadata": {"name": "a"}, "status": {"phase": "Active"}}))));
        assert!(!is_terminating(&ns(json!({"metadata": {"name": "a"}}))));
        assert!(is_terminating(&ns(json!({"metadata": {"name": "a"}, "status": {"phase": "Terminating"}}))));
        assert!(is_terminating(&ns(json!({"metadata": {"name": "a", "deletionTimestamp": "2024-01-01T00:00:00Z"}, "status": {"phase": "Active"}}))));
    }

    #[test]
    fn a_create_refused_in_a_terminating_namespace_is_recognised() {
        let status = |v: Value| kube::Error::Api(Box::new(serde_json::from_value(v).expect("a Status")));
        let with_cause = status(json!({"status": "Failure", "code": 403, "reason": "Forbidden", "message": "forbidden",
                                       "details": {"causes": [{"reason": "NamespaceTerminating", "field": "metadata.namespace"}]}}));
        let kubelab = status(json!({"status": "Failure", "code": 403, "reason": "Forbidden",
                                    "message": "unable to create new content in namespace team because it is being terminated"}));
        let rbac = status(json!({"status": "Failure", "code": 403, "reason": "Forbidden",
                                 "message": "configmaps is forbidden: User \"x\" cannot create resource \"configmaps\" in API group \"\" in the namespace \"team\""}));
        let not_found = status(json!({"status": "Failure", "code": 404, "reason": "NotFound", "message": "namespaces \"team\" not found"}));
        assert!(refused_as_terminating(&with_cause));
        assert!(refused_as_terminating(&kubelab));
        assert!(!refused_as_terminating(&rbac));
        assert!(!refused_as_terminating(&not_found));
    }
}
