//! Mirrors k8s.io/apiserver/pkg/registry/generic: what every resource's storage shares.
//!
//! - [`store`]: the generic store ([`store::Registry`]): create, get, list, watch, update, delete
//!   over [`crate::storage`], each step asking the resource's strategy.
//! - [`strategy`]: the [`strategy::Strategy`] a resource implements and the
//!   [`strategy::ResourceInfo`] that names it.
//! - [`options`]: list, delete and write options (the `dryRun` every write takes), and the
//!   continue token of a paged list.
//! - [`rest`]: the subresources a resource's own code serves (pods/log, pods/exec...), and the
//!   map of every installed resource ([`rest::Registries`]).
//! - [`typed`]: decoding through the k8s-openapi type ([`typed::Typed`]).

pub mod options;
pub mod rest;
pub mod store;
pub mod strategy;
pub mod typed;
