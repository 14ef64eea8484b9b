//! # proxy — kubelab's kube-proxy (iptables and nftables modes)
//!
//! Makes Services work on a node: a connection to a Service's cluster IP (or node port, or
//! external IP) is rewritten by the kernel to one of the Service's endpoints. The proxy itself
//! carries no traffic; it watches the API server and keeps the node's netfilter rules in step
//! with what it sees — chains in the iptables `nat` and `filter` tables (`--proxy-mode
//! iptables`, the default) or one nf_tables table of verdict maps (`--proxy-mode nftables`).
//! The layout mirrors kube-proxy's pkg/proxy:
//!
//! 1. **Watch** ([`config`]): Services and discovery.k8s.io/v1 EndpointSlices, listed then
//!    watched, relisted when a watch expires. Each change goes to the trackers
//!    ([`servicechangetracker`], [`endpointschangetracker`]), which turn objects into
//!    [`serviceport::ServicePortInfo`]s and [`endpoint::Endpoint`]s, and pokes the sync runner.
//! 2. **Debounce** ([`util::async_runner`]): on average a sync at most every
//!    `--iptables-min-sync-period` (1 s; the changes of a rollout fold into one sync), two in a
//!    row after a quiet spell (kube-proxy's burst of 2), and at least every
//!    `--iptables-sync-period` (30 s; whatever removed a rule meanwhile is put right).
//! 3. **Sync** ([`proxier`], the same for both modes): the maps from the trackers, full or
//!    partial — full the first time, once every sync period and after a failure; partial
//!    otherwise, given what the last successful sync wrote ([`proxier::Mode::Synced`]) — then
//!    the mode's writer and applier, and the sync metrics. In both modes a partial sync writes
//!    only what differs from the last sync for the Services that changed (kube-proxy rewrites
//!    more: see each mode).
//! 4. **Write and apply**, each mode its way ([`topology`] decides which endpoints each traffic
//!    policy uses):
//!    - iptables ([`iptables::rules`], [`iptables::proxier`]): the ruleset as iptables-restore
//!      text from a pure function: `KUBE-SERVICES` → `KUBE-SVC-`/`KUBE-SVL-`/`KUBE-EXT-` →
//!      `KUBE-SEP-` (DNAT), the endpoint picked by `statistic` probabilities or a `recent` match
//!      (ClientIP affinity), `KUBE-MARK-MASQ`/`KUBE-POSTROUTING` for masquerading, `REJECT` for
//!      ports without endpoints; one `iptables-restore --noflush` (only the chains the text
//!      declares are touched), then the jumps from the built-in chains ensured (full syncs).
//!    - nftables ([`nftables::rules`], [`nftables::proxier`]): the table `ip kube-proxy` as a
//!      transaction from a pure function: base chains hooked for nat and filter, the
//!      `service-ips` / `service-nodeports` verdict maps → `service-`/`local-`/`external-` chains
//!      → `numgen random` → `endpoint-` chains (DNAT), `no-endpoint-services` → reject; applied
//!      as one nf_tables netlink batch ([`util::nftables`], kubelab's own client in place of
//!      knftables and the `nft` command).
//! 5. **Report** ([`healthcheck`], [`metrics`]): `/healthz` and `/livez` answer 200 while the
//!    last successful sync is recent; `/metrics`, on the same listener, has kube-proxy's sync
//!    metrics (`kubeproxy_sync_proxy_rules_*`); `/debug/trace/services/<uid>` has each sync
//!    that wrote a Service's rules, as a step of that Service (`kubelab trace svc/<name>`).
//!
//! Besides kube-proxy's rules, two things kubelab needs:
//! - **The service-range safety net** ([`iptables::safety_net`]): with
//!   `--service-cluster-ip-range`, filter OUTPUT and FORWARD REJECT anything still addressed to
//!   the range — what no Service rule translated — so that it is refused instead of leaving by
//!   the default route. DNAT happens in the nat table before the filter table runs, so only
//!   untranslated packets match. Installed before the first sync, kept when the proxy stops,
//!   removed only by `--cleanup`.
//! - **Same-bridge replies** ([`sysctl`]): `net.bridge.bridge-nf-call-iptables=1` where the
//!   namespace has it, so a pod's reply to a pod on the same bridge passes conntrack; without
//!   it, traffic to cluster IPs is masqueraded.
//!
//! [`server::run`] ties these together; [`server::cleanup`] is `--cleanup`.
//!
//! ## Implementation caveats
//! - No IPVS mode. The `iptables` command may itself be the nf_tables backend, as on Debian;
//!   the iptables mode's rules are the same either way.
//! - IPv4 only: IPv6 cluster IPs and IPv6 EndpointSlices are ignored (the nftables mode has an
//!   `ip` table, not kube-proxy's `ip6` one).
//! - Stale conntrack entries (UDP) are not cleared.
//! - A partial sync still rebuilds the Service and endpoint maps from the watched objects
//!   (kube-proxy keeps them); an unchanged Service's rules it takes from the last sync's. It
//!   leaves out every chain whose rules did not change, where kube-proxy rewrites the
//!   top-level chains (iptables) or refills the maps (nftables) and all of a changed Service's
//!   chains. At 1,000 Services × 10 endpoints (BENCHMARKS.md): with the iptables-nft backend a
//!   one-endpoint partial sync takes 52–64 ms (40 ms or more of it the kernel committing the nat
//!   table) and a full sync 5.7–7.8 s (mostly iptables-nft-restore's own time); in the
//!   nftables mode 16–18 ms and about 0.4 s.
//! - The nftables mode's full sync flushes and refills every chain and map (as kube-proxy's);
//!   its ClientIP-affinity sets are kept. Each Service chain's random pick is a named map
//!   (`numgen random mod N vmap @<the chain's name>`) where kube-proxy writes an anonymous one:
//!   the kernel binds each anonymous set by walking the whole transaction, which made a full
//!   sync four times slower. Addresses of the Service range that no Service holds are rejected
//!   (kube-proxy drops them). The iptables-mode `KUBE-FORWARD` rules (conntrack INVALID drop,
//!   accepting marked traffic) have no counterpart there, as in kube-proxy's nftables mode.
//! - Metrics are served on the health listener (kube-proxy: a second one, 127.0.0.1:10249), and
//!   only the sync metrics listed in [`metrics`].
//! - Chain names hash with FNV-1a, not SHA-256: same shape (`KUBE-SVC-` + 16 base32
//!   characters), different names from Kubernetes'.
//! - No LoadBalancer ingress IPs, `loadBalancerSourceRanges` (`KUBE-FW-`/`KUBE-PROXY-FIREWALL`),
//!   health-check node ports, topology-aware hints, `KUBE-PROXY-CANARY`, or the
//!   `nodeEligible` field of `/healthz`.
//! - `--nodeport-addresses` names CIDRs matched against the interfaces' addresses once, at
//!   start; the default (the Node's InternalIP/ExternalIP) is also read once. Node ports never
//!   answer on 127.0.0.1 (kube-proxy's `route_localnet` trick is left out).
//! - The br_netfilter module is never loaded by the proxy (that would change every namespace of
//!   the host); it only turns the setting on where the module already provides it.
#![allow(rustdoc::private_intra_doc_links)]

pub mod config;
pub mod endpoint;
pub mod endpointschangetracker;
pub mod error;
pub mod healthcheck;
pub mod iptables;
pub mod metrics;
pub mod nftables;
pub mod proxier;
pub mod server;
pub mod servicechangetracker;
pub mod serviceport;
pub mod sysctl;
pub mod topology;
pub mod util;

use std::net::SocketAddr;
use std::time::Duration;

pub use error::{Error, Result};
pub use server::{cleanup, run};
pub use util::cidr::Ipv4Cidr;

/// `--iptables-min-sync-period`'s default.
pub const DEFAULT_MIN_SYNC_PERIOD: Duration = Duration::from_secs(1);
/// `--iptables-sync-period`'s default.
pub const DEFAULT_SYNC_PERIOD: Duration = Duration::from_secs(30);
/// `--healthz-bind-address`'s default.
pub const DEFAULT_HEALTHZ_BIND_ADDRESS: &str = "0.0.0.0:10256";

/// `kubelab proxy`'s options, named after kube-proxy's flags.
#[derive(Clone, Debug)]
pub struct Options {
    pub connection: client::Connection,
    /// `--hostname-override`: this node's name (default: the hostname).
    pub hostname_override: Option<String>,
    /// `--cluster-cidr`: the pods' range; traffic to cluster IPs from outside it is masqueraded.
    pub cluster_cidr: Option<Ipv4Cidr>,
    /// `--service-cluster-ip-range`: turns the safety net on.
    pub service_cluster_ip_range: Option<Ipv4Cidr>,
    /// `--nodeport-addresses`.
    pub nodeport_addresses: Vec<Ipv4Cidr>,
    /// `--masquerade-all`.
    pub masquerade_all: bool,
    /// `--iptables-min-sync-period`.
    pub min_sync_period: Duration,
    /// `--iptables-sync-period`.
    pub sync_period: Duration,
    /// `--healthz-bind-address`.
    pub healthz_bind_address: SocketAddr,
    /// `--proxy-mode`.
    pub proxy_mode: ProxyMode,
}

/// `--proxy-mode`: how Services become rules (kube-proxy's `iptables` and `nftables`; no `ipvs`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ProxyMode {
    /// Chains in the `nat` and `filter` tables, written with `iptables-restore` (the default).
    #[default]
    Iptables,
    /// One table, `ip kube-proxy`, with verdict maps, written over nf_tables netlink.
    Nftables,
}

impl std::str::FromStr for ProxyMode {
    type Err = String;
    fn from_str(s: &str) -> Result<ProxyMode, String> {
        match s {
            "iptables" | "" => Ok(ProxyMode::Iptables),
            "nftables" => Ok(ProxyMode::Nftables),
            "ipvs" => Err("--proxy-mode ipvs: kubelab has no IPVS mode (iptables or nftables)".into()),
            other => Err(format!("--proxy-mode {other:?}: not a proxy mode (iptables or nftables)")),
        }
    }
}

impl Options {
    pub fn new(connection: client::Connection) -> Options {
        Options {
            connection,
            hostname_override: None,
            cluster_cidr: None,
            service_cluster_ip_range: None,
            nodeport_addresses: Vec::new(),
            masquerade_all: false,
            min_sync_period: DEFAULT_MIN_SYNC_PERIOD,
            sync_period: DEFAULT_SYNC_PERIOD,
            healthz_bind_address: DEFAULT_HEALTHZ_BIND_ADDRESS.parse().expect("the default healthz address parses"),
            proxy_mode: ProxyMode::Iptables,
        }
    }
}
