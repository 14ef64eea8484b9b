//! Mirrors kube-scheduler's volumebinding/assume_cache.go: the PersistentVolumes and claims as the
//! scheduler believes them to be, which — like the pod cache — runs ahead of the API server.
//!
//! When VolumeBinding's Reserve chooses a PV for a claim, or asks for provisioning on a node, it
//! *assumes* the changed object here at once (a PV with its claimRef set, a claim with its
//! selected-node annotation), so that the next pod's cycle does not pick the same PV. The
//! assumption lives on top of the informer's copy ([`Lister`]): it is dropped as soon as the
//! informer holds a newer version of the object (the API server's own, after PreBind wrote it),
//! or when Unreserve restores it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use kube::{Resource, ResourceExt};

use crate::informers::{Lister, key};

/// An object's resourceVersion as a number, for "which is newer" (0 when missing or not numeric).
pub fn version<K: Resource>(obj: &K) -> u64 {
    obj.resource_version().and_then(|v| v.parse().ok()).unwrap_or(0)
}

pub struct AssumeCache<K> {
    lister: Lister<K>,
    /// Assumed objects by key. A std `Mutex`: held only for map operations, never across an await.
    assumed: Mutex<HashMap<String, Arc<K>>>,
}

impl<K: Resource<DynamicType = ()>> AssumeCache<K> {
    pub fn new(lister: Lister<K>) -> AssumeCache<K> {
        AssumeCache { lister, assumed: Mutex::default() }
    }

    /// The assumed object if there is one the informer has not overtaken, else the informer's.
    pub fn get(&self, key: &str) -> Option<Arc<K>> {
        let api = self.lister.get(key);
        let mut assumed = self.assumed.lock().expect("assume cache lock");
        let Some(api) = api else {
            assumed.remove(key);
            return None;
        };
        match assumed.get(key) {
            Some(a) if version(api.as_ref()) <= version(a.as_ref()) => Some(a.clone()),
            Some(_) => {
                assumed.remove(key);
                Some(api)
            }
            None => Some(api),
        }
    }

    /// The informer's object, ignoring assumptions (what the API server last said).
    pub fn get_api(&self, key: &str) -> Option<Arc<K>> {
        self.lister.get(key)
    }

    /// Every object, assumptions applied.
    pub fn list(&self) -> Vec<Arc<K>> {
        self.lister.list().into_iter().filter_map(|o| self.get(&key(o.as_ref()))).collect()
    }

    /// Assumes `obj` (in memory only). It must not be older than what the cache holds.
    pub fn assume(&self, obj: K) -> Result<(), String> {
        let k = key(&obj);
        let Some(latest) = self.get(&k) else { return Err(format!("{} {k:?} not found", K::kind(&()))) };
        if version(&obj) < version(latest.as_ref()) {
            return Err(format!("{} {k:?} is out of sync (stored: {}, assume: {})", K::kind(&()), version(latest.as_ref()), version(&obj)));
        }
        self.assumed.lock().expect("assume cache lock").insert(k, Arc::new(obj));
        Ok(())
    }

    /// Drops the assumption for `key`, if any (Unreserve, or a failed API write).
    pub fn restore(&self, key: &str) {
        self.assumed.lock().expect("assume cache lock").remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::PersistentVolume;

    fn pv(name: &str, rv: &str, class: &str) -> PersistentVolume {
        let mut p = PersistentVolume::default();
        p.metadata.name = Some(name.into());
        p.metadata.resource_version = Some(rv.into());
        p.spec.get_or_insert_default().storage_class_name = Some(class.into());
        p
    }

    fn class(p: &PersistentVolume) -> &str {
        p.spec.as_ref().and_then(|s| s.storage_class_name.as_deref()).unwrap_or("")
    }

    #[test]
    fn assume_restore_and_overtake() {
        let lister = Lister::default();
        lister.upsert(pv("a", "5", "api"));
        let c = AssumeCache::new(lister.clone());
        assert!(c.assume(pv("b", "1", "x")).is_err(), "unknown object");
        assert!(c.assume(pv("a", "4", "x")).is_err(), "older than the cache");
        c.assume(pv("a", "5", "assumed")).unwrap();
        assert_eq!(class(&c.get("a").unwrap()), "assumed");
        assert_eq!(class(&c.get_api("a").unwrap()), "api");
        assert_eq!(c.list().len(), 1);
        c.restore("a");
        assert_eq!(class(&c.get("a").unwrap()), "api");

        // The informer's newer version overtakes an assumption; the same version does not.
        c.assume(pv("a", "5", "assumed")).unwrap();
        lister.upsert(pv("a", "5", "resync"));
        assert_eq!(class(&c.get("a").unwrap()), "assumed");
        lister.upsert(pv("a", "6", "written"));
        assert_eq!(class(&c.get("a").unwrap()), "written");
        lister.remove("a");
        assert!(c.get("a").is_none());
    }
}
