//! Mirrors the `ServiceAccountTokenGetter` interface of pkg/serviceaccount: where a token's
//! account and bound object are looked up when the token is checked. The server's getter reads
//! its watch caches (registry/core/serviceaccount/tokengetter.rs).

use std::sync::Arc;

use serde_json::Value;


/// The objects a token's claims name, as they are now.
pub trait ServiceAccountTokenGetter: Send + Sync {
    fn service_account(&self, namespace: &str, name: &str) -> Option<Arc<Value>>;
    fn pod(&self, namespace: &str, name: &str) -> Option<Arc<Value>>;
    fn secret(&self, namespace: &str, name: &str) -> Option<Arc<Value>>;
}
