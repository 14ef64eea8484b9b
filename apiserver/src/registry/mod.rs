//! Mirrors Kubernetes' pkg/registry: the storage of every resource — the generic store and the
//! strategy interface ([`generic`]), and one folder per resource, by API group ([`core`],
//! [`apps`], [`batch`], [`policy`], [`rbac`], [`coordination`]): its `strategy.rs` (its `ResourceInfo` and `Strategy`), its `printer.rs`
//! (`kubectl get`'s columns), and the code of its subresources.

pub mod apps;
pub mod batch;
pub mod coordination;
pub mod core;
pub mod discovery;
pub mod generic;
pub mod policy;
pub mod rbac;
