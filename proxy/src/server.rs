//! Mirrors kube-proxy's cmd/kube-proxy/app/server.go: from the options to a running proxy.
//!
//! 1. The service-range safety net goes in first, before anything can fail on the network.
//! 2. Bridged traffic through iptables, if the namespace allows it ([`crate::sysctl`]).
//! 3. The API client; the node port addresses (the flag, else the Node's, else the interfaces').
//! 4. The proxier of `--proxy-mode`: iptables ([`crate::iptables`]) or nftables
//!    ([`crate::nftables`]).
//! 5. The health and metrics server, the two watches, and the sync loop: a sync after each
//!    change (not more often than the minimum sync period, partial when it can be) and at least
//!    every sync period (then full).

use std::sync::Arc;
use std::time::Instant;

use k8s_openapi::api::core::v1::Node;
use kube::api::Api;

use crate::config;
use crate::error::{Error, Result};
use crate::healthcheck::{self, ProxierHealth};
use crate::iptables::rules::RulesConfig;
use crate::iptables::safety_net;
use crate::proxier::{Mode, Proxier};
use crate::sysctl;
use crate::util::async_runner::{BURST_SYNCS, bounded_frequency_loop};
use crate::util::iptables::Iptables;
use crate::util::nftables::Nftables;
use crate::util::nodeport_addresses;
use crate::{Options, ProxyMode};

async fn blocking<T: Send + 'static>(f: impl FnOnce() -> Result<T> + Send + 'static) -> Result<T> {
    tokio::task::spawn_blocking(f).await.unwrap_or_else(|e| Err(Error::Config(format!("iptables task: {e}"))))
}

pub async fn run(opts: Options, shutdown: impl std::future::Future<Output = ()>) -> Result<()> {
    let hostname = opts.hostname_override.clone().unwrap_or_else(client::hostname).to_lowercase();
    let ipt = Iptables::new();

    // Step 1
    if let Some(range) = opts.service_cluster_ip_range {
        let i = ipt.clone();
        blocking(move || safety_net::ensure(&i, range)).await?;
        tracing::info!(target: "proxy", step = 1, range = %range, "service-range safety net in place");
    }
    // Step 2
    let bridge_netfilter = sysctl::ensure_bridge_nf_call_iptables(std::path::Path::new(sysctl::BRIDGE_NF_CALL_IPTABLES));

    // Step 3
    let client = client::client_as(&opts.connection, "kube-proxy").await?;
    let local = nodeport_addresses::local_addresses().map_err(|e| Error::Config(format!("listing interface addresses: {e}")))?;
    let nodeport_addresses = if !opts.nodeport_addresses.is_empty() {
        nodeport_addresses::matching(&opts.nodeport_addresses, &local)
    } else {
        match Api::<Node>::all(client.clone()).get(&hostname).await {
            Ok(node) if !nodeport_addresses::node_ips(&node).is_empty() => nodeport_addresses::node_ips(&node),
            Ok(_) | Err(_) => {
                tracing::info!(target: "proxy", node = hostname, "Node not readable or without addresses; node ports on every interface address");
                local
            }
        }
    };
    tracing::info!(target: "proxy", step = 3, node = hostname, ?nodeport_addresses, bridge_netfilter, "starting");
    let cfg = RulesConfig { cluster_cidr: opts.cluster_cidr, masquerade_all: opts.masquerade_all, bridge_netfilter, nodeport_addresses };

    // Step 4
    match opts.proxy_mode {
        ProxyMode::Iptables => {
            let proxier = crate::iptables::proxier::Proxier::new(cfg, ipt, hostname);
            serve(&opts, client, Arc::new(proxier.with_full_sync_period(opts.sync_period)), shutdown).await
        }
        ProxyMode::Nftables => {
            let nft = blocking(|| Nftables::new(crate::nftables::rules::TABLE)).await?;
            let proxier = crate::nftables::proxier::Proxier::new(cfg, opts.service_cluster_ip_range, nft, hostname);
            serve(&opts, client, Arc::new(proxier.with_full_sync_period(opts.sync_period)), shutdown).await
        }
    }
}

/// Step 5, for the proxier of either mode.
async fn serve<M: Mode>(opts: &Options, client: kube::Client, proxier: Arc<Proxier<M>>, shutdown: impl std::future::Future<Output = ()>) -> Result<()> {
    let health = Arc::new(ProxierHealth::new(2 * opts.sync_period));
    let listener = tokio::net::TcpListener::bind(opts.healthz_bind_address).await.map_err(|e| Error::Listen(opts.healthz_bind_address, e))?;
    let mut tasks = tokio::task::JoinSet::new();
    let (served, registry) = (health.clone(), proxier.metrics.registry.clone());
    tasks.spawn(async move {
        if let Err(e) = healthcheck::serve_on(listener, served, registry).await {
            tracing::error!(target: "proxy::healthcheck", error = %e, "health server stopped");
        }
    });
    tasks.spawn(config::watch_services(client.clone(), proxier.clone()));
    tasks.spawn(config::watch_endpoint_slices(client, proxier.clone()));
    let (min, max) = (opts.min_sync_period, opts.sync_period);
    let syncing = bounded_frequency_loop(&proxier.sync_runner, min, max, BURST_SYNCS, || {
        let (proxier, health) = (proxier.clone(), health.clone());
        async move {
            if !proxier.is_initialized() {
                return true; // the watches poke again once both have listed
            }
            let start = Instant::now();
            let p = proxier.clone();
            match blocking(move || p.sync_proxy_rules()).await {
                Ok(r) => {
                    health.updated();
                    tracing::info!(
                        target: "proxy::sync",
                        full = r.full, chains_written = r.chains_written, written_bytes = r.written_bytes,
                        services = r.services, endpoints = r.endpoints, nat_rules = r.nat_rules, filter_rules = r.filter_rules,
                        generate_ms = r.generate.as_secs_f64() * 1e3, apply_ms = r.apply.as_secs_f64() * 1e3,
                        total_ms = start.elapsed().as_secs_f64() * 1e3,
                        "SyncProxyRules complete"
                    );
                    true
                }
                Err(e) => {
                    tracing::error!(target: "proxy::sync", error = %e, "SyncProxyRules failed; retrying");
                    false
                }
            }
        }
    });
    tokio::select! {
        () = syncing => {}
        () = shutdown => {}
    }
    // The rules stay: connections keep working while the proxy restarts (as kube-proxy).
    tasks.shutdown().await;
    Ok(())
}

/// `--cleanup`: removes every chain and jump rule the proxy made in either mode (as
/// kube-proxy's, whatever `--proxy-mode`), the safety net included; how many iptables chains
/// went, and whether the nftables table did.
pub fn cleanup() -> Result<(usize, bool)> {
    let chains = crate::iptables::cleanup::cleanup_leftovers(&Iptables::new())?;
    let table = crate::nftables::cleanup::cleanup_leftovers(&Nftables::new(crate::nftables::rules::TABLE)?)?;
    Ok((chains, table))
}
