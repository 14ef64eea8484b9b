//! Mirrors pkg/controller/serviceaccount/tokengetter.go (`NewGetterFromClient`): the objects a
//! service account token names, as kube-apiserver's informers hold them — here the watch caches
//! of service accounts, pods and secrets (no store round trip on a request).

use std::sync::Arc;

use serde_json::Value;

use crate::registry::generic::store::Registry;
use crate::serviceaccount::tokengetter::ServiceAccountTokenGetter;

/// The three resources' generic stores (their watch caches are what is read).
pub struct WatchCacheGetter {
    pub service_accounts: Arc<Registry>,
    pub pods: Arc<Registry>,
    pub secrets: Arc<Registry>,
}

impl ServiceAccountTokenGetter for WatchCacheGetter {
    fn service_account(&self, namespace: &str, name: &str) -> Option<Arc<Value>> {
        self.service_accounts.cache.get(&self.service_accounts.key(Some(namespace), name))
    }

    fn pod(&self, namespace: &str, name: &str) -> Option<Arc<Value>> {
        self.pods.cache.get(&self.pods.key(Some(namespace), name))
    }

    fn secret(&self, namespace: &str, name: &str) -> Option<Arc<Value>> {
        self.secrets.cache.get(&self.secrets.key(Some(namespace), name))
    }
}
