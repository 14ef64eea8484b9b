//! Mirrors the informer listers kube-apiserver gives its RBAC authorizer
//! (pkg/kubeapiserver/authorizer/config.go's `rbac.New(&rbac.RoleGetter{…}, …)`): the roles and
//! bindings as the server's own watch caches hold them, read without a store round trip.

use std::sync::Arc;

use serde_json::Value;

use super::rule::PolicySource;
use crate::registry::generic::store::Registry;

/// The four RBAC resources' generic stores (their watch caches are what is read).
pub struct WatchCacheListers {
    pub roles: Arc<Registry>,
    pub role_bindings: Arc<Registry>,
    pub cluster_roles: Arc<Registry>,
    pub cluster_role_bindings: Arc<Registry>,
}

impl PolicySource for WatchCacheListers {
    fn cluster_role_bindings(&self, visit: &mut dyn FnMut(&Value) -> bool) {
        self.cluster_role_bindings.cache.visit_prefix(&self.cluster_role_bindings.prefix(None), visit);
    }

    fn role_bindings(&self, namespace: &str, visit: &mut dyn FnMut(&Value) -> bool) {
        self.role_bindings.cache.visit_prefix(&self.role_bindings.prefix(Some(namespace)), visit);
    }

    fn cluster_role(&self, name: &str) -> Option<Arc<Value>> {
        self.cluster_roles.cache.get(&self.cluster_roles.key(None, name))
    }

    fn role(&self, namespace: &str, name: &str) -> Option<Arc<Value>> {
        self.roles.cache.get(&self.roles.key(Some(namespace), name))
    }
}
