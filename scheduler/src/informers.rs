//! Mirrors client-go's shared informers as kube-scheduler hands them to its plugins
//! (framework.Handle's SharedInformerFactory): a local copy of each kind of object the volume
//! plugins read — PersistentVolumes, PersistentVolumeClaims, StorageClasses, CSINodes — kept up
//! to date by a watch, so that a Filter running for every node never makes a request.
//!
//! How one informer runs ([`run`]):
//! 1. List, then watch (kube's `watcher`, relisting after errors and 410s, with backoff).
//! 2. Each object listed or reported goes into the [`Lister`]; the handler hears Add, Update (old
//!    and new) or Delete, as client-go's ResourceEventHandler does. After a relist, objects the
//!    relist no longer returned are deleted.
//! 3. The informer is *synced* after its first complete list. A resource the API server does not
//!    serve (404) or does not let the scheduler read (403) counts as synced and empty, so that
//!    scheduling is not held up by it; the watch keeps retrying and fills the lister once it can.

use std::collections::{BTreeMap, HashSet};
use std::fmt::Debug;
use std::sync::{Arc, RwLock};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::{CSINode, StorageClass};
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;
use tokio::sync::watch;

/// The objects of one kind, by key ("namespace/name", or "name" for cluster-scoped kinds) —
/// client-go's Indexer behind a Lister.
///
/// A std `RwLock`, not an async one: readers are Filter plugins on the scheduling thread and its
/// scoped workers (not async), and no holder ever waits while holding it.
pub struct Lister<K> {
    items: Arc<RwLock<BTreeMap<String, Arc<K>>>>,
}

impl<K> Clone for Lister<K> {
    fn clone(&self) -> Self {
        Lister { items: self.items.clone() }
    }
}

impl<K> Default for Lister<K> {
    fn default() -> Self {
        Lister { items: Arc::default() }
    }
}

/// An object's key in its lister: "namespace/name", or "name" when it has no namespace.
pub fn key<K: Resource>(obj: &K) -> String {
    let name = obj.meta().name.as_deref().unwrap_or("");
    match obj.meta().namespace.as_deref() {
        Some(ns) if !ns.is_empty() => format!("{ns}/{name}"),
        _ => name.to_string(),
    }
}

impl<K: Resource> Lister<K> {
    pub fn get(&self, key: &str) -> Option<Arc<K>> {
        self.items.read().expect("lister lock").get(key).cloned()
    }

    /// Every object, in key order.
    pub fn list(&self) -> Vec<Arc<K>> {
        self.items.read().expect("lister lock").values().cloned().collect()
    }

    /// Adds or replaces `obj`; returns the version it replaced.
    pub fn upsert(&self, obj: K) -> (Option<Arc<K>>, Arc<K>) {
        let obj = Arc::new(obj);
        let old = self.items.write().expect("lister lock").insert(key(obj.as_ref()), obj.clone());
        (old, obj)
    }

    pub fn remove(&self, key: &str) -> Option<Arc<K>> {
        self.items.write().expect("lister lock").remove(key)
    }

    fn keys(&self) -> Vec<String> {
        self.items.read().expect("lister lock").keys().cloned().collect()
    }
}

/// What an informer's handler hears (client-go's OnAdd, OnUpdate, OnDelete).
pub enum Change<'a, K> {
    Add(&'a K),
    Update { old: &'a K, new: &'a K },
    Delete(&'a K),
}

/// The listers the plugins share, and the signal PreBind waits on.
#[derive(Clone)]
pub struct Informers {
    pub persistent_volumes: Lister<PersistentVolume>,
    pub persistent_volume_claims: Lister<PersistentVolumeClaim>,
    pub storage_classes: Lister<StorageClass>,
    pub csi_nodes: Lister<CSINode>,
    /// Bumped after every PersistentVolume or PersistentVolumeClaim change: VolumeBinding's
    /// PreBind waits on it for its claims to become bound (instead of polling every second, as
    /// kube-scheduler does).
    volume_changes: Arc<watch::Sender<u64>>,
}

impl Default for Informers {
    fn default() -> Self {
        Informers {
            persistent_volumes: Lister::default(),
            persistent_volume_claims: Lister::default(),
            storage_classes: Lister::default(),
            csi_nodes: Lister::default(),
            volume_changes: Arc::new(watch::channel(0).0),
        }
    }
}

impl Informers {
    /// A receiver that wakes after the next PV or PVC change.
    pub fn subscribe_volume_changes(&self) -> watch::Receiver<u64> {
        self.volume_changes.subscribe()
    }

    /// Called by the PV and PVC informers' handlers.
    pub fn notify_volume_change(&self) {
        self.volume_changes.send_modify(|n| *n = n.wrapping_add(1));
    }
}

/// Whether a watch error means the resource is not there for us: not served (404) or not
/// readable by this identity (403).
fn not_available(e: &watcher::Error) -> bool {
    let code = match e {
        watcher::Error::InitialListFailed(kube::Error::Api(s)) | watcher::Error::WatchStartFailed(kube::Error::Api(s)) => s.code,
        watcher::Error::WatchError(s) => s.code,
        _ => return false,
    };
    code == 404 || code == 403
}

/// Runs one informer until its watch ends (steps 1–3 in the module docs).
pub async fn run<K>(api: Api<K>, lister: Lister<K>, synced: watch::Sender<bool>, mut handler: impl FnMut(Change<'_, K>))
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    let kind = K::kind(&());
    let mut stream = watcher(api, watcher::Config::default()).default_backoff().boxed();
    let mut relisted: HashSet<String> = HashSet::new();
    let apply = |obj: K, handler: &mut dyn FnMut(Change<'_, K>)| {
        let (old, new) = lister.upsert(obj);
        match old {
            None => handler(Change::Add(&new)),
            // A relist reports every object again: only a new version is an update.
            Some(old) if old.resource_version() != new.resource_version() => handler(Change::Update { old: &old, new: &new }),
            Some(_) => {}
        }
    };
    while let Some(ev) = stream.next().await {
        match ev {
            Ok(watcher::Event::Init) => relisted.clear(),
            Ok(watcher::Event::InitApply(obj)) => {
                relisted.insert(key(&obj));
                apply(obj, &mut handler);
            }
            Ok(watcher::Event::InitDone) => {
                for gone in lister.keys().into_iter().filter(|k| !relisted.contains(k)) {
                    if let Some(obj) = lister.remove(&gone) {
                        handler(Change::Delete(&obj));
                    }
                }
                relisted.clear();
                let _ = synced.send(true);
            }
            Ok(watcher::Event::Apply(obj)) => apply(obj, &mut handler),
            Ok(watcher::Event::Delete(obj)) => {
                if let Some(old) = lister.remove(&key(&obj)) {
                    handler(Change::Delete(&old));
                }
            }
            Err(e) if not_available(&e) => {
                if !*synced.borrow() {
                    tracing::info!(target: "scheduler::informers", kind = %kind, "not available ({e}); counting it as empty and retrying");
                    let _ = synced.send(true);
                } else {
                    tracing::debug!(target: "scheduler::informers", kind = %kind, "watch: {e}");
                }
            }
            Err(e) => tracing::warn!(target: "scheduler::informers", kind = %kind, "watch: {e}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_lister() {
        let mut c = PersistentVolumeClaim::default();
        c.metadata.name = Some("data".into());
        c.metadata.namespace = Some("ns".into());
        let mut v = PersistentVolume::default();
        v.metadata.name = Some("pv1".into());
        assert_eq!(key(&c), "ns/data");
        assert_eq!(key(&v), "pv1");
        let l: Lister<PersistentVolumeClaim> = Lister::default();
        let (old, _) = l.upsert(c.clone());
        assert!(old.is_none());
        let (old, _) = l.upsert(c);
        assert!(old.is_some());
        assert!(l.get("ns/data").is_some());
        assert_eq!(l.list().len(), 1);
        assert!(l.remove("ns/data").is_some());
        assert!(l.get("ns/data").is_none());
    }
}
