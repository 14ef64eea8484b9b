//! Mirrors the informers kube-apiserver gives its Node authorizer's graph
//! (pkg/kubeapiserver/authorizer/config.go's `node.AddGraphEventHandlers(…Pods()…,
//! …PersistentVolumes()…, …VolumeAttachments()…)`): the objects as the server's own watch caches
//! hold them, read without a store round trip.

use std::sync::Arc;

use serde_json::Value;

use super::graph::PodSource;
use crate::registry::generic::store::Registry;

/// The generic stores of pods, PersistentVolumes and VolumeAttachments (their watch caches are
/// what is read).
pub struct WatchCacheListers {
    pub pods: Arc<Registry>,
    pub volumes: Arc<Registry>,
    pub attachments: Arc<Registry>,
}

impl PodSource for WatchCacheListers {
    fn pods(&self, namespace: &str, visit: &mut dyn FnMut(&Value) -> bool) {
        self.pods.cache.visit_prefix(&self.pods.prefix(Some(namespace)), visit);
    }

    fn persistent_volume(&self, name: &str) -> Option<Arc<Value>> {
        self.volumes.cache.get(&self.volumes.key(None, name))
    }

    fn volume_attachment(&self, name: &str) -> Option<Arc<Value>> {
        self.attachments.cache.get(&self.attachments.key(None, name))
    }
}
