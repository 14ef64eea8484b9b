//! Mirrors kube-proxy's pkg/proxy/iptables: the iptables-mode proxier.
//!
//! - [`rules`]: the pure rule writer (Services and endpoints in, iptables-restore text out).
//! - [`proxier`]: the trackers, the jump rules, and one sync (write, restore, ensure jumps).
//! - [`safety_net`]: kubelab's service-range REJECT, outside the synced chains.
//! - [`cleanup`]: `kubelab proxy --cleanup`.

pub mod cleanup;
pub mod proxier;
pub mod rules;
pub mod safety_net;
