//! Mirrors the `SecretNamespaceLister` kube-apiserver gives the bootstrap token authenticator
//! (pkg/kubeapiserver/authenticator/config.go, a `kube-system` lister of its shared informer):
//! here the secrets' watch cache, read with no store round trip on a request.

use std::sync::Arc;

use serde_json::Value;

use crate::authentication::token::bootstrap::SecretNamespaceLister;
use crate::registry::generic::store::Registry;

/// The Secrets of one namespace, as the watch cache holds them.
pub struct WatchCacheSecretLister {
    pub secrets: Arc<Registry>,
    pub namespace: String,
}

impl SecretNamespaceLister for WatchCacheSecretLister {
    fn get(&self, name: &str) -> Option<Arc<Value>> {
        self.secrets.cache.get(&self.secrets.key(Some(&self.namespace), name))
    }
}
