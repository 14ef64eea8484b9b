//! Mirrors kube-proxy's pkg/proxy/nftables: the nftables-mode proxier (`--proxy-mode=nftables`).
//!
//! - [`rules`]: the pure table writer (Services and endpoints in, a transaction out).
//! - [`proxier`]: one sync (write, apply through [`crate::util::nftables`]).
//! - [`cleanup`]: `kubelab proxy --cleanup` (the table deleted).

pub mod cleanup;
pub mod proxier;
pub mod rules;
