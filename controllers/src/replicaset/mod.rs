//! Mirrors pkg/controller/replicaset: the ReplicaSet controller ([`replica_set`]) and the status
//! it writes ([`replica_set_utils`]).

pub mod replica_set;
pub mod replica_set_utils;

pub use replica_set::ReplicaSetController;
