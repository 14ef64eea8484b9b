//! Mirrors pkg/registry/core/pod: pods — their strategy, their columns, and the subresources
//! their own code serves ([`storage::SUBRESOURCES`]): binding, eviction, log, exec, attach,
//! portforward and proxy;
//! and `/debug/trace/...` ([`trace`]), kubelab's view of one pod's journey.

pub mod binding;
pub mod eviction;
pub mod exec;
pub mod log;
pub mod portforward;
pub mod printer;
pub mod proxy;
pub mod storage;
pub mod strategy;
pub mod trace;
