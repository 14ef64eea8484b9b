//! The multi-version key space (etcd's `mvcc` package) and its leases (etcd's `lease` package).

pub mod kvstore;
pub mod lease;

pub use kvstore::{KvStore, Record, Revision, WriteTxn, in_range};
pub use lease::Lessor;
