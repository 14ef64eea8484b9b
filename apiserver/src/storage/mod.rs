//! Mirrors k8s.io/apiserver/pkg/storage: where objects are kept and how their changes reach
//! watchers.
//!
//! - [`store`]: objects as JSON in the store (`kubelab store` or a real etcd), written with
//!   transactions conditioned on each key's revision (storage/etcd3/store.go).
//! - [`watch_cache`]: one store watch per resource, fanned out to every HTTP watcher and serving
//!   lists from memory (storage/cacher).
//! - [`value`]: what an object's bytes become on their way to the store and back: encryption at
//!   rest (storage/value's transformers).
//! - [`compact`]: the periodic compaction of the store's history (storage/etcd3/compact.go).

pub mod compact;
pub mod store;
pub mod value;
pub mod watch_cache;
