//! `proxy_bench`: what a sync of kube-proxy's rules costs at 1,000 Services × 10 endpoints.
//!
//! Prints, each on a line of its own (median of the runs, in milliseconds):
//! - `service and endpoint maps from the watched objects`: what every sync starts with.
//! - `rule generation, 1000 services x 10 endpoints (full sync)`: the maps from the trackers and
//!   the iptables-restore text (no I/O).
//! - `iptables-restore, 1000 services x 10 endpoints (first sync, empty tables)` and
//!   `(full sync, rules in place)`: the text applied (plus the jump-rule checks) inside a network
//!   namespace the benchmark creates (`kubelab-proxy-bench-<pid>`, deleted at the end).
//! - `full sync (generate + iptables-restore), 1000 services x 10 endpoints`: a whole sync with
//!   the rules in place.
//! - `one-endpoint change: partial sync (generate + iptables-restore)`: one EndpointSlice updated
//!   through the proxier's handler, then one sync, which rewrites only the chains whose rules
//!   change (and, on the line before, how many per-Service chains it wrote, its size and its
//!   split into generation and iptables-restore).
//! - `Service update → rule in place at 100 changes/s for 10 s: p50 / p99`: a Service or an
//!   EndpointSlice (alternately, each time another Service's) updated through the handlers
//!   every 10 ms while the sync loop runs as `kubelab proxy` runs it (the real
//!   `--iptables-min-sync-period` of 1 s); from each change to the return of the
//!   iptables-restore that contains it.
//!
//! Needs root (ip netns, iptables-restore). Run: `cargo run --release -p proxy --example proxy_bench`.

use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions, EndpointPort, EndpointSlice};
use proxy::config::{EndpointSliceHandler as _, ServiceHandler as _};
use proxy::iptables::proxier::Proxier;
use proxy::iptables::rules::{RulesConfig, write_rules};
use proxy::util::async_runner::{BURST_SYNCS, bounded_frequency_loop};
use proxy::util::iptables::Iptables;
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

fn main() -> anyhow::Result<()> {
    let cfg = RulesConfig {
        cluster_cidr: Some(Ipv4Cidr::parse("10.128.0.0/9").map_err(anyhow::Error::msg)?),
        masquerade_all: false,
        bridge_netfilter: true,
        nodeport_addresses: vec!["192.168.77.2".parse()?],
    };
    let ns = Netns(format!("kubelab-proxy-bench-{}", std::process::id()));
    anyhow::ensure!(Command::new("ip").args(["netns", "add", &ns.0]).status()?.success(), "ip netns add {} (root needed)", ns.0);
    let proxier = Arc::new(Proxier::new(cfg.clone(), Iptables::in_netns(&ns.0), "node-0".into()).with_full_sync_period(DEFAULT_SYNC_PERIOD));
    proxier.on_services_listed((0..SERVICES).map(service).collect());
    proxier.on_endpoint_slices_listed((0..SERVICES).map(|i| slice(i, 0)).collect());

    // The maps alone (every sync, full or partial, builds them from the watched objects).
    let mut snapshots = Vec::new();
    for _ in 0..RUNS {
        let start = Instant::now();
        let _ = proxier.snapshot();
        snapshots.push(start.elapsed());
    }
    println!("service and endpoint maps from the watched objects, {SERVICES} services x {ENDPOINTS} endpoints: {:.1} ms", median(snapshots));

    // Rule generation alone.
    let mut gen_times = Vec::new();
    let mut size = (0, 0, 0);
    for _ in 0..RUNS {
        let start = Instant::now();
        let (s, e) = proxier.snapshot();
        let r = write_rules(&cfg, &s, &e, &Default::default(), None, None);
        gen_times.push(start.elapsed());
        size = (r.nat_rules, r.filter_rules, r.text.len());
    }
    println!("ruleset: {} nat rules, {} filter rules, {} KiB of iptables-restore text", size.0, size.1, size.2 / 1024);
    println!("rule generation, {SERVICES} services x {ENDPOINTS} endpoints (full sync): {:.1} ms", median(gen_times));

    // First sync into empty tables, then full syncs with the rules in place.
    let first = proxier.sync_proxy_rules()?;
    println!(
        "iptables-restore, {SERVICES} services x {ENDPOINTS} endpoints (first sync, empty tables): {:.1} ms (generation {:.1} ms)",
        first.apply.as_secs_f64() * 1e3,
        first.generate.as_secs_f64() * 1e3
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
    println!("iptables-restore, {SERVICES} services x {ENDPOINTS} endpoints (full sync, rules in place): {:.1} ms", median(applies));
    println!("full sync (generate + iptables-restore), {SERVICES} services x {ENDPOINTS} endpoints: {:.1} ms", median(totals));

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
            "one-endpoint change: {} nat chains, {} KiB of iptables-restore text; generation {:.1} ms, iptables-restore {:.1} ms",
            r.nat_chains_written,
            r.restore_bytes / 1024,
            median(split.0),
            median(split.1)
        );
    }
    println!("one-endpoint change: partial sync (generate + iptables-restore): {:.1} ms", median(changes));

    // Changes at RATE per second through the handlers, the sync loop as `kubelab proxy` runs it.
    proxier.request_full_sync();
    proxier.sync_proxy_rules()?; // a full sync just before: the run starts a sync period afresh
    let (latencies, syncs) = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?.block_on(latency_run(proxier.clone()))?;
    let (full, partial) = syncs;
    println!(
        "Service update → rule in place at {RATE} changes/s for {} s: p50 {:.0} ms, p99 {:.0} ms ({} changes, {full} full and {partial} partial syncs, min-sync-period {} s)",
        LATENCY_RUN.as_secs(),
        percentile(latencies.clone(), 50),
        percentile(latencies.clone(), 99),
        latencies.len(),
        DEFAULT_MIN_SYNC_PERIOD.as_secs_f64(),
    );
    Ok(())
}

/// Feeds RATE changes a second for LATENCY_RUN while the bounded-frequency loop syncs; returns
/// each change's time to the end of the restore that carried it, and the (full, partial) syncs.
async fn latency_run(proxier: Arc<Proxier>) -> anyhow::Result<(Vec<Duration>, (usize, usize))> {
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
    let sync_loop = bounded_frequency_loop(&proxier.sync_runner, DEFAULT_MIN_SYNC_PERIOD, DEFAULT_SYNC_PERIOD, BURST_SYNCS, || {
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
