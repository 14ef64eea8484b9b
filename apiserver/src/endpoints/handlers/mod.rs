//! Mirrors k8s.io/apiserver/pkg/endpoints/handlers: one module per verb family, each run by the
//! router ([`crate::endpoints`]) on a resolved [`crate::endpoints::request::Target`].
//!
//! - [`get`]: get (of the object or its status) and list, as JSON or as a Table; get of a
//!   subresource served by the resource's code (pods/log);
//! - [`watch`]: a watch, streamed from the watch cache;
//! - [`create`]: create (decode, defaults, admission, the store's create) and the subresource
//!   creates (pods/binding, pods/eviction);
//! - [`update`]: update of the object, its status or its finalizers;
//! - [`patch`]: the four patch types, server-side apply included;
//! - [`delete`]: delete and deletecollection.

pub mod create;
pub mod delete;
pub mod get;
pub mod patch;
pub mod update;
pub mod watch;
