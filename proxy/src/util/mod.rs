//! Helpers the proxier uses, as kube-proxy's pkg/proxy/util and pkg/util.

pub mod async_runner;
pub mod cidr;
pub mod iptables;
pub mod nftables;
pub mod nodeport_addresses;
