//! Mirrors the informers kube-apiserver gives its Node authorizer's graph
//! (pkg/kubeapiserver/authorizer/config.go's `node.AddGraphEventHandlers(…Pods()…)`): the pods as
//! the server's own watch cache holds them, read without a store round trip.

use std::sync::Arc;

use serde_json::Value;

use super::graph::PodSource;
use crate::registry::generic::store::Registry;

/// The pods' generic store (its watch cache is what is read).
pub struct WatchCacheListers {
    pub pods: Arc<Registry>,
}

impl PodSource for WatchCacheListers {
    fn pods(&self, namespace: &str, visit: &mut dyn FnMut(&Value) -> bool) {
        self.pods.cache.visit_prefix(&self.pods.prefix(Some(namespace)), visit);
    }
}
