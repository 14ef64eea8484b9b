//! `proxy_bench [iptables|nftables]`: what a sync of kube-proxy's rules costs at 1,000 Services ×
//! 10 endpoints, in each mode (both by default, the iptables mode first, each in a network
//! namespace of its own; then the nftables mode's figures as ratios of the iptables mode's,
//! measured in the same run).
//!
//! Prints, each on a line of its own, prefixed with the mode (median of the runs, in milliseconds):
//! - `service and endpoint maps from the watched objects`: what every sync starts with.
//! - `rule generation, 1000 services x 10 endpoints (full sync)`: the maps from the trackers and
//!   the rules of a full sync — iptables-restore text, or the nftables transaction (no I/O).
//! - `apply, 1000 services x 10 endpoints (first sync, empty tables)` and `(full sync, rules in
//!   place)`: the rules applied — `iptables-restore` plus the jump-rule checks, or one nf_tables
//!   netlink batch — inside the mode's network namespace (`kubelab-proxy-bench-<pid>-<mode>`,
//!   deleted at the end).
//! - `full sync (generate + apply)`: a whole sync with the rules in place.
//! - `one-endpoint change: partial sync (generate + apply)`: one EndpointSlice updated through
//!   the proxier's handler, then one sync, which writes only what changes (and, on the line
//!   before, how many per-Service chains it wrote, the bytes handed to the kernel's tool, and its
//!   split into generation and apply).
//! - `Service update → rule in place at 100 changes/s for 10 s, min-sync-period …: p50 / p99`: a
//!   Service or an EndpointSlice (alternately, each time another Service's) updated through the
//!   handlers every 10 ms while the sync loop runs as `kubelab proxy` runs it, with the default
//!   `--iptables-min-sync-period` of 1 s and then with 500 ms; from each change to the end of
//!   the apply that contains it.
//!
//! Needs root (ip netns, iptables-restore, nf_tables). Run: `cargo run --release -p proxy --example proxy_bench`.

use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions, EndpointPort, EndpointSlice};
use proxy::config::{EndpointSliceHandler as _, ServiceHandler as _};
use proxy::endpointschangetracker::EndpointsMap;
use proxy::iptables::proxier::Proxier;
use proxy::iptables::rules::{RulesConfig, write_rules};
use proxy::nftables;
use proxy::proxier::Mode;
use proxy::servicechangetracker::ServicePortMap;
use proxy::util::async_runner::{BURST_SYNCS, bounded_frequency_loop};
use proxy::util::iptables::Iptables;
use proxy::util::nftables::Nftables;
use proxy::{DEFAULT_MIN_SYNC_PERIOD, DEFAULT_SYNC_PERIOD, Ipv4Cidr};

const SERVICES: usize = 1000;
const ENDPOINTS: usize = 10;
const RUNS: usize = 7;

struct Netns(String);

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

/// Changes per second, and for how long, in the latency run.
const RATE: u32 = 100;
const LATENCY_RUN: Duration = Duration::from_secs(10);

fn service(i: usize) -> Service {
    service_port(i, 80)
}

fn service_port(i: usize, port: i32) -> Service {
    let mut s = Service::default();
    s.metadata.namespace = Some("bench".into());
    s.metadata.name = Some(format!("svc-{i}"));
    s.spec = Some(ServiceSpec {
        type_: Some("NodePort".into()),
        cluster_ip: Some(format!("10.96.{}.{}", i / 250, i % 250 + 1)),
        ports: Some(vec![ServicePort { name: Some("http".into()), port, node_port: Some(30000 + i as i32), ..Default::default() }]),
        ..Default::default()
    });
    s
}

fn slice(i: usize, generation: usize) -> EndpointSlice {
    let mut s = EndpointSlice::default();
    s.metadata.namespace = Some("bench".into());
    s.metadata.name = Some(format!("svc-{i}-abcde"));
    s.metadata.labels = Some([("kubernetes.io/service-name".to_string(), format!("svc-{i}"))].into());
    s.address_type = "IPv4".into();
    s.ports = Some(vec![EndpointPort { name: Some("http".into()), port: Some(8080), protocol: Some("TCP".into()), ..Default::default() }]);
    s.endpoints = Some(
        (0..ENDPOINTS)
            .map(|e| {
                let n = i * ENDPOINTS + e + generation;
                Endpoint {
                    addresses: vec![format!("10.{}.{}.{}", 128 + n / 65536, (n / 256) % 256, n % 256)],
                    node_name: Some(format!("node-{}", e % 3)),
                    conditions: Some(EndpointConditions { ready: Some(true), ..Default::default() }),
                    ..Default::default()
                }
            })
            .collect(),
    );
    s
}

fn median(v: Vec<Duration>) -> f64 {
    percentile(v, 50)
}

/// The `p`th percentile (nearest rank), in milliseconds.
fn percentile(mut v: Vec<Duration>, p: usize) -> f64 {
    v.sort();
    let rank = (v.len() * p).div_ceil(100).max(1);
    v[rank - 1].as_secs_f64() * 1e3
}

/// The figures of one mode, its rules in a network namespace of its own.
struct Figures {
    full: f64,
    partial: f64,
    p99: Vec<(Duration, f64)>,
}

fn main() -> anyhow::Result<()> {
    let modes: Vec<String> = match std::env::args().nth(1) {
        Some(m) => vec![m],
        None => vec!["iptables".into(), "nftables".into()],
    };
    let cfg = RulesConfig {
        cluster_cidr: Some(Ipv4Cidr::parse("10.128.0.0/9").map_err(anyhow::Error::msg)?),
        masquerade_all: false,
        bridge_netfilter: true,
        nodeport_addresses: vec!["192.168.77.2".parse()?],
    };
    let range = Ipv4Cidr::parse("10.96.0.0/12").map_err(anyhow::Error::msg)?;
    let mut figures = Vec::new();
    for mode in modes {
        let ns = Netns(format!("kubelab-proxy-bench-{}-{mode}", std::process::id()));
        anyhow::ensure!(Command::new("ip").args(["netns", "add", &ns.0]).status()?.success(), "ip netns add {} (root needed)", ns.0);
        let f = match mode.as_str() {
            "iptables" => {
                let p = Proxier::new(cfg.clone(), Iptables::in_netns(&ns.0), "node-0".into()).with_full_sync_period(DEFAULT_SYNC_PERIOD);
                bench("iptables", Arc::new(p), |s, e| {
                    let r = write_rules(&cfg, s, e, &Default::default(), None, None);
                    format!("{} nat rules, {} filter rules, {} KiB of iptables-restore text", r.nat_rules, r.filter_rules, r.text.len() / 1024)
                })?
            }
            "nftables" => {
                let nft = Nftables::in_netns(nftables::rules::TABLE, &ns.0)?;
                let p = nftables::proxier::Proxier::new(cfg.clone(), Some(range), nft, "node-0".into()).with_full_sync_period(DEFAULT_SYNC_PERIOD);
                bench("nftables", Arc::new(p), |s, e| {
                    let r = nftables::rules::write_table(&cfg, Some(range), s, e, None, None, &Default::default());
                    format!("{} rules in nat chains, {} in filter chains, {} operations in one transaction", r.nat_rules, r.filter_rules, r.tx.ops.len())
                })?
            }
            other => anyhow::bail!("{other:?}: the modes are iptables and nftables"),
        };
        figures.push(f);
    }
    if let [ipt, nft] = figures.as_slice() {
        println!("nftables / iptables, measured in this run: full sync {:.3}, one-endpoint partial sync {:.3}", nft.full / ipt.full, nft.partial / ipt.partial);
        for ((period, a), (_, b)) in ipt.p99.iter().zip(&nft.p99) {
            println!("nftables / iptables, update → rule p99 at min-sync-period {} ms: {:.3}", period.as_millis(), b / a);
        }
    }
    Ok(())
}

/// Every figure of one mode; `generate` writes the rules of a full sync without applying them
/// and describes them.
fn bench<M: Mode>(mode: &str, proxier: Arc<proxy::proxier::Proxier<M>>, generate: impl Fn(&ServicePortMap, &EndpointsMap) -> String) -> anyhow::Result<Figures> {
    proxier.on_services_listed((0..SERVICES).map(service).collect());
    proxier.on_endpoint_slices_listed((0..SERVICES).map(|i| slice(i, 0)).collect());

    // The maps alone (every sync, full or partial, builds them from the watched objects).
    let mut snapshots = Vec::new();
    for _ in 0..RUNS {
        let start = Instant::now();
        let _ = proxier.snapshot();
        snapshots.push(start.elapsed());
    }
    println!("{mode}: service and endpoint maps from the watched objects, {SERVICES} services x {ENDPOINTS} endpoints: {:.1} ms", median(snapshots));

    // Rule generation alone.
    let mut gen_times = Vec::new();
    let mut size = String::new();
    for _ in 0..RUNS {
        let start = Instant::now();
        let (s, e) = proxier.snapshot();
        size = generate(&s, &e);
        gen_times.push(start.elapsed());
    }
    println!("{mode}: ruleset: {size}");
    println!("{mode}: rule generation, {SERVICES} services x {ENDPOINTS} endpoints (full sync): {:.1} ms", median(gen_times));

    // First sync into empty tables, then full syncs with the rules in place.
    let first = proxier.sync_proxy_rules()?;
    println!(
        "{mode}: apply, {SERVICES} services x {ENDPOINTS} endpoints (first sync, empty tables): {:.1} ms (generation {:.1} ms, {} KiB written)",
        first.apply.as_secs_f64() * 1e3,
        first.generate.as_secs_f64() * 1e3,
        first.written_bytes / 1024
    );
    let mut applies = Vec::new();
    let mut totals = Vec::new();
    for _ in 0..RUNS {
        proxier.request_full_sync();
        let start = Instant::now();
        let r = proxier.sync_proxy_rules()?;
        anyhow::ensure!(r.full, "a requested full sync");
        totals.push(start.elapsed());
        applies.push(r.apply);
    }
    println!("{mode}: apply, {SERVICES} services x {ENDPOINTS} endpoints (full sync, rules in place): {:.1} ms", median(applies));
    let full = median(totals);
    println!("{mode}: full sync (generate + apply), {SERVICES} services x {ENDPOINTS} endpoints: {full:.1} ms");

    // One endpoint changes: a partial sync.
    let mut changes = Vec::new();
    let mut split = (Vec::new(), Vec::new());
    let mut last = None;
    for g in 1..=RUNS {
        let start = Instant::now();
        // Service 7's slice: endpoint addresses shifted by `g`, i.e. one endpoint out, one in.
        proxier.on_endpoint_slice_update(slice(7, g));
        let r = proxier.sync_proxy_rules()?;
        anyhow::ensure!(!r.full, "a partial sync");
        changes.push(start.elapsed());
        split.0.push(r.generate);
        split.1.push(r.apply);
        last = Some(r);
    }
    if let Some(r) = last {
        println!(
            "{mode}: one-endpoint change: {} per-Service chains, {} bytes written; generation {:.1} ms, apply {:.1} ms",
            r.chains_written,
            r.written_bytes,
            median(split.0),
            median(split.1)
        );
    }
    let partial = median(changes);
    println!("{mode}: one-endpoint change: partial sync (generate + apply): {partial:.1} ms");

    // Changes at RATE per second through the handlers, the sync loop as `kubelab proxy` runs it:
    // with the default minimum sync period, and with half of it.
    let mut p99 = Vec::new();
    for min_sync in [DEFAULT_MIN_SYNC_PERIOD, DEFAULT_MIN_SYNC_PERIOD / 2] {
        proxier.request_full_sync();
        proxier.sync_proxy_rules()?; // a full sync just before: the run starts a sync period afresh
        let run = latency_run(proxier.clone(), min_sync);
        let (latencies, syncs) = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?.block_on(run)?;
        let (full, partial) = syncs;
        let p = percentile(latencies.clone(), 99);
        println!(
            "{mode}: Service update → rule in place at {RATE} changes/s for {} s, min-sync-period {} ms: p50 {:.0} ms, p99 {p:.0} ms ({} changes, {full} full and {partial} partial syncs)",
            LATENCY_RUN.as_secs(),
            min_sync.as_millis(),
            percentile(latencies.clone(), 50),
            latencies.len(),
        );
        p99.push((min_sync, p));
    }
    Ok(Figures { full, partial, p99 })
}

/// Feeds RATE changes a second for LATENCY_RUN while the bounded-frequency loop syncs; returns
/// each change's time to the end of the restore that carried it, and the (full, partial) syncs.
async fn latency_run<M: Mode>(proxier: Arc<proxy::proxier::Proxier<M>>, min_sync: Duration) -> anyhow::Result<(Vec<Duration>, (usize, usize))> {
    let total = (RATE * LATENCY_RUN.as_secs() as u32) as usize;
    // When each change was handed to the proxier; `fed` of them so far.
    let fed_at: Arc<Mutex<Vec<Instant>>> = Arc::default();
    let fed = Arc::new(AtomicUsize::new(0));
    let latencies: Arc<Mutex<Vec<Duration>>> = Arc::default();
    let syncs: Arc<Mutex<(usize, usize)>> = Arc::default();
    let failed: Arc<Mutex<Option<String>>> = Arc::default();

    let feeder = {
        let (proxier, fed_at, fed) = (proxier.clone(), fed_at.clone(), fed.clone());
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(1) / RATE);
            for k in 0..total {
                tick.tick().await;
                let i = (k * 37) % SERVICES; // another Service each time
                // Recorded before the handler: a sync that reads the trackers after it carries it.
                fed_at.lock().expect("lock").push(Instant::now());
                if k % 2 == 0 {
                    proxier.on_endpoint_slice_update(slice(i, 100 + k));
                } else {
                    proxier.on_service_update(service_port(i, 81 + (k % 4) as i32));
                }
                fed.fetch_add(1, Ordering::SeqCst);
            }
        })
    };
    let sync_loop = bounded_frequency_loop(&proxier.sync_runner, min_sync, DEFAULT_SYNC_PERIOD, BURST_SYNCS, || {
        let (proxier, fed_at, fed, latencies, syncs, failed) =
            (proxier.clone(), fed_at.clone(), fed.clone(), latencies.clone(), syncs.clone(), failed.clone());
        async move {
            // Every change counted here is in the trackers before the sync reads them. One fed
            // between this load and the sync's snapshot is carried too but timed to the next
            // sync (a window of microseconds against 10 ms between changes).
            let carried = fed.load(Ordering::SeqCst);
            let p = proxier.clone();
            let r = tokio::task::spawn_blocking(move || p.sync_proxy_rules()).await;
            let done = Instant::now();
            match r {
                Ok(Ok(r)) => {
                    let mut s = syncs.lock().expect("lock");
                    if r.full { s.0 += 1 } else { s.1 += 1 }
                    let at = fed_at.lock().expect("lock");
                    let mut l = latencies.lock().expect("lock");
                    let from = l.len();
                    l.extend(at[from..carried.max(from)].iter().map(|t| done - *t));
                    true
                }
                Ok(Err(e)) => {
                    *failed.lock().expect("lock") = Some(e.to_string());
                    false
                }
                Err(e) => {
                    *failed.lock().expect("lock") = Some(e.to_string());
                    false
                }
            }
        }
    });
    let done = async {
        loop {
            tokio::time::sleep(Duration::from_millis(50)).await;
            if latencies.lock().expect("lock").len() >= total || failed.lock().expect("lock").is_some() {
                break;
            }
        }
    };
    tokio::select! {
        () = sync_loop => {}
        () = done => {}
        () = tokio::time::sleep(LATENCY_RUN + Duration::from_secs(60)) => anyhow::bail!("changes still not synced a minute after the last"),
    }
    feeder.abort();
    if let Some(e) = failed.lock().expect("lock").take() {
        anyhow::bail!("a sync failed: {e}");
    }
    let l = latencies.lock().expect("lock").clone();
    let s = *syncs.lock().expect("lock");
    Ok((l, s))
}
