//! # dns — kubelab's cluster DNS
//!
//! What CoreDNS does in a Kubernetes cluster with the default Corefile, as one client of the API
//! server: Services and their endpoints get names under the cluster domain, as the Kubernetes
//! DNS specification lays out, and every other name goes to the node's resolvers. The flow:
//!
//! 1. **Watches** ([`controller`], CoreDNS's controller.go): v1 Services and discovery.k8s.io/v1
//!    EndpointSlices, cluster-wide, each object cut down to what DNS needs ([`object`]) and put
//!    in the [`index`]. `/ready` turns OK once both are listed.
//! 2. **Sockets** ([`run`]): UDP and TCP on one address. TCP is read by hickory-server, which
//!    hands each message to the plugin chain ([`server`]); UDP, by kubelab's own readers
//!    ([`udp`]: a task per CPU on the one socket, the server's own answers sent in line), which
//!    call the same chain.
//! 3. **The kubernetes plugin** ([`kubernetes`], with [`parse`] for the names): a name in the
//!    cluster domain is answered from the index, authoritatively:
//!    - `<svc>.<ns>.svc.<domain>` A/AAAA: the ClusterIPs; for a headless Service, the ready
//!      endpoints' addresses; for an ExternalName Service, a CNAME.
//!    - `<hostname>.<svc>.<ns>.svc.<domain>`: one endpoint, by its hostname or dashed address.
//!    - `_<port>._<proto>.<svc>.<ns>.svc.<domain>` SRV (and SRV of the Service name for all of
//!      its ports), with the targets' addresses as additional records.
//!    - `<a-b-c-d>.<ns>.pod.<domain>` A: the address in the name (`pods insecure`).
//!    - PTR of a ClusterIP: the Service's name; of an endpoint address: the endpoint's name.
//!      `dns-version.<domain>` TXT: the schema version.
//!    - NXDOMAIN for a name that does not exist, NODATA for one without records of the type,
//!      each with the zone's SOA.
//! 4. **The forward plugin** ([`forward`]): any other name goes, unchanged, to the resolvers in
//!    `--resolv-conf` (or `--upstream`, with ports); SERVFAIL when none answers.
//! 5. **Metrics and health** ([`metrics`]): `/health`, `/ready`, `/metrics` on `--health-listen`.
//!
//! ## Why hickory-server
//! hickory-server 0.26 (with hickory-proto for the messages) is the maintained Rust DNS server
//! library: it reads TCP, frames and truncates messages, and leaves the answers to a
//! `RequestHandler` — the place of CoreDNS's plugin chain. Its UDP reader (a task per message)
//! held the server to 61–69% of dnsmasq's throughput, so UDP is read by [`udp`], which keeps
//! hickory's `Request`, `RequestHandler` and message encoding and only replaces the loop. Its current release needs Rust 1.88
//! (we build with 1.95) and builds with no default features: no DNSSEC, TLS, HTTPS or QUIC, and
//! no hickory-resolver, since forwarding is ours, as CoreDNS's forward plugin is its own.
//!
//! ## Implementation caveats
//! - No wildcard queries (`*.ns.svc`, `_*._tcp`), no `endpoint_pod_names`, no `ttl 0`.
//! - An ExternalName's CNAME is not chased: the client resolves the target itself.
//! - Reverse names of addresses that are neither a ClusterIP nor an endpoint are forwarded.
//! - `pods insecure` only: a pod name is answered from its label without looking for the pod
//!   (CoreDNS's `pods verified` would watch pods).
//! - No cache plugin, no loop detection, upstreams tried in order (CoreDNS's `policy
//!   sequential`), the resolv.conf read once at start.
//! - A namespace is known to DNS while it has a Service (namespaces are not watched).

pub mod controller;
mod error;
pub mod forward;
pub mod index;
pub mod kubernetes;
pub mod metrics;
pub mod object;
pub mod parse;
mod run;
pub mod server;
mod udp;

pub use error::{Error, Result};
pub use run::{Listeners, Options, TCP_IDLE_TIMEOUT, run, serve};

/// The cluster domain unless `--cluster-domain` says otherwise.
pub const DEFAULT_CLUSTER_DOMAIN: &str = "cluster.local";
/// The TTL of every record, in seconds (CoreDNS's kubernetes plugin's default).
pub const DEFAULT_TTL: u32 = 5;
