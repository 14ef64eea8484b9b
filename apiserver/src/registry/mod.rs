//! Mirrors Kubernetes' pkg/registry: the storage of every resource — the generic store and the
//! strategy interface ([`generic`]), and one folder per resource, by API group ([`core`],
//! [`apps`], [`batch`], [`policy`], [`rbac`], [`coordination`], [`certificates`], [`storage`]): its `strategy.rs` (its `ResourceInfo` and `Strategy`), its `printer.rs`
//! (`kubectl get`'s columns), and the code of its subresources (a CertificateSigningRequest's
//! `status` and `approval` are its strategy's three update paths). The reviews of [`authentication`]
//! and [`authorization`] have no store: one file each, its `ResourceInfo` and its create.

pub mod apps;
pub mod authentication;
pub mod authorization;
pub mod batch;
pub mod certificates;
pub mod coordination;
pub mod core;
pub mod discovery;
pub mod generic;
pub mod policy;
pub mod rbac;
pub mod storage;
