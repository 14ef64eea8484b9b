//! What recording pod steps for `kubelab trace` costs (issue 8): pod startup latency and the API
//! server's pod create throughput with recording on and off, in the same run.
//!
//! Two parts, each comparing recording on and off (`--record-pod-steps`, which every component
//! takes, also as `KUBELAB_RECORD_POD_STEPS`):
//! 1. **Pod startup.** Each round starts a whole cluster — a one-member store, the API server,
//!    the scheduler and a node agent on its own containerd — in the round's mode, and runs
//!    `--pods` pods one at a time, taking each one's create → Running latency as seen on a watch
//!    (the pods go through the scheduler and the node agent: every component records). Rounds
//!    alternate on, off, on, off…; each mode's figure is the median of its rounds.
//! 2. **Create throughput.** Two control planes run side by side for the whole part — a store,
//!    an API server and a scheduler each, one recording and one not — and receive batches of
//!    `--batch` pod creates from `--clients` concurrent HTTP clients in turn (on, off, off, on,
//!    on, off…), so that whatever else the machine does falls on both alike. The pods are bound
//!    to a node that does not exist (`spec.nodeName`): only the API server and the store work,
//!    and record, for them. The figure is creates per second, the median of each mode's batches.
//!
//! `make bench-trace` builds in release and runs it.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Parser;
use e2e::apiserver::{ApiCluster, ApiOptions};
use e2e::bench::{cpu_time, machine, ms, percentile};
use e2e::nodeagent::{NodeAgent, NodeAgentOptions};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, PostParams, WatchEvent, WatchParams};
use serde_json::json;

const NODE: &str = "node-trace-bench";
const IMAGE: &str = "docker.io/library/busybox:1.36";

#[derive(Parser)]
struct Args {
    /// Rounds per mode (on and off alternate).
    #[arg(long, env = "BENCH_ROUNDS", default_value_t = 3)]
    rounds: usize,
    /// Pods run one at a time per round for the startup latency.
    #[arg(long, env = "BENCH_PODS", default_value_t = 15)]
    pods: usize,
    /// Pods created per batch for the create throughput.
    #[arg(long, env = "BENCH_BATCH", default_value_t = 1000)]
    batch: u64,
    /// Batches per mode.
    #[arg(long, env = "BENCH_BATCHES", default_value_t = 8)]
    batches: usize,
    /// Concurrent clients creating them.
    #[arg(long, env = "BENCH_CLIENTS", default_value_t = 32)]
    clients: usize,
    /// The node's pod CIDR is 10.244.<octet>.0/24.
    #[arg(long, env = "BENCH_POD_CIDR_OCTET", default_value_t = 91)]
    octet: u8,
}

/// The command-line flag that puts a component in a mode.
fn switch(on: bool) -> String {
    format!("--record-pod-steps={on}")
}

fn pod(name: &str, node: Option<&str>) -> anyhow::Result<Pod> {
    let mut spec = json!({
        "containers": [{"name": "c", "image": IMAGE, "command": ["sleep", "3600"], "imagePullPolicy": "IfNotPresent"}],
        "terminationGracePeriodSeconds": 0
    });
    if let Some(n) = node {
        spec["nodeName"] = json!(n);
    }
    Ok(serde_json::from_value(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"bench": "trace"}}, "spec": spec}))?)
}

/// Runs `name` and returns its create → Running latency, seen on a watch opened before the create.
async fn run_one(pods: &Api<Pod>, name: &str) -> anyhow::Result<Duration> {
    let wp = WatchParams::default().fields(&format!("metadata.name={name}"));
    let mut stream = pods.watch(&wp, "0").await?.boxed();
    let p = pod(name, None)?;
    let t = Instant::now();
    pods.create(&PostParams::default(), &p).await.with_context(|| format!("create {name}"))?;
    let deadline = t + Duration::from_secs(120);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let ev = tokio::time::timeout(left, stream.try_next()).await.with_context(|| format!("{name} not Running within 120 s"))??;
        match ev {
            Some(WatchEvent::Added(p) | WatchEvent::Modified(p)) if p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running") => return Ok(t.elapsed()),
            Some(_) => {}
            None => anyhow::bail!("the watch on {name} ended"),
        }
    }
}

/// Creates `total` pods named `create-<batch>-<i>`, bound to a node that does not exist, from
/// `clients` concurrent clients; creates per second.
async fn create_throughput(api: &ApiCluster, batch: usize, total: u64, clients: usize) -> anyhow::Result<f64> {
    let url = format!("{}/api/v1/namespaces/default/pods", api.url());
    let next = Arc::new(AtomicU64::new(0));
    let http = reqwest::Client::builder().pool_max_idle_per_host(clients * 2).build()?;
    let start = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..clients {
        let (next, http, url) = (next.clone(), http.clone(), url.clone());
        tasks.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= total {
                    return anyhow::Ok(());
                }
                let body = serde_json::to_vec(&pod(&format!("create-{batch}-{i}"), Some("nowhere"))?)?;
                let resp = http.post(&url).header("content-type", "application/json").body(body).send().await?;
                anyhow::ensure!(resp.status().is_success(), "create {i}: {} {}", resp.status(), resp.text().await.unwrap_or_default());
            }
        }));
    }
    for t in tasks {
        t.await??;
    }
    Ok(total as f64 / start.elapsed().as_secs_f64())
}

/// One startup round: a whole cluster in the given mode; each pod's create → Running, sorted.
async fn startup_round(args: &Args, i: usize, on: bool) -> anyhow::Result<Vec<Duration>> {
    let flag = switch(on);
    let mut api = ApiCluster::start(ApiOptions { extra_args: vec![flag.clone()], store_args: vec![flag.clone()], ..ApiOptions::default() }).await?;
    api.start_scheduler(&[&flag])?;
    let agent = NodeAgent::start(api.root(), NodeAgentOptions { master: Some(api.url()), node_name: NODE, pod_cidr_octet: args.octet, extra: vec![flag] }).await?;
    let pods: Api<Pod> = Api::namespaced(api.kube_client()?, "default");
    // The first pod waits for the node to register and the images to be imported: unmeasured.
    let deadline = Instant::now() + Duration::from_secs(120);
    while run_one(&pods, "warmup").await.is_err() {
        anyhow::ensure!(Instant::now() < deadline, "the warm-up pod never ran:\n{}", agent.log_tail(40));
        let _ = pods.delete("warmup", &DeleteParams::default()).await;
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let mut startup = Vec::new();
    for j in 0..args.pods {
        startup.push(run_one(&pods, &format!("start-{j}")).await?);
    }
    startup.sort();
    eprintln!("[bench] startup round {i}, recording {}: p50 {} p90 {}", mode(on), ms(percentile(&startup, 0.5)), ms(percentile(&startup, 0.9)));
    // Dropped: the agent, its containerd (with every pod) and the store go with the round.
    drop(agent);
    drop(api);
    Ok(startup)
}

/// What one mode's batches cost: creates per second batch by batch, and the CPU time each
/// process of the control plane spent on them (user + system), by process name.
#[derive(Default)]
struct Creates {
    rates: Vec<f64>,
    cpu: std::collections::BTreeMap<String, Duration>,
    pods: u64,
}

fn cpu_times(api: &ApiCluster) -> Vec<(String, Duration)> {
    api.pids().into_iter().filter_map(|(name, pid)| Some((name, cpu_time(pid)?))).collect()
}

/// The create-throughput part: two control planes side by side, batches in turn.
async fn throughput(args: &Args) -> anyhow::Result<(Creates, Creates)> {
    let mut planes = Vec::new();
    for on in [true, false] {
        let flag = switch(on);
        let mut api = ApiCluster::start(ApiOptions { extra_args: vec![flag.clone()], store_args: vec![flag.clone()], ..ApiOptions::default() }).await?;
        api.start_scheduler(&[&flag])?;
        // Unmeasured: connections, the watch cache, the scheduler's informers.
        create_throughput(&api, usize::MAX, 200, args.clients).await?;
        planes.push(api);
    }
    let (mut on, mut off) = (Creates::default(), Creates::default());
    for b in 0..args.batches * 2 {
        // on, off, off, on, on, off…: neither mode always goes first.
        let recording = (b % 4 == 0) || (b % 4 == 3);
        let api = &planes[if recording { 0 } else { 1 }];
        let before = cpu_times(api);
        let rate = create_throughput(api, b, args.batch, args.clients).await?;
        eprintln!("[bench] batch {b}, recording {}: {rate:.0} creates/s", mode(recording));
        let c = if recording { &mut on } else { &mut off };
        c.rates.push(rate);
        c.pods += args.batch;
        for ((name, after), (_, before)) in cpu_times(api).into_iter().zip(before) {
            *c.cpu.entry(name).or_default() += after.saturating_sub(before);
        }
    }
    Ok((on, off))
}

fn mode(on: bool) -> &'static str {
    if on { "on" } else { "off" }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    if v.is_empty() { 0.0 } else { v[v.len() / 2] }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    e2e::containerd::prerequisites().map_err(|e| anyhow::anyhow!(e))?;
    // Without them the agent would wait forever for a pause image it cannot pull.
    for tar in ["pause.tar", "busybox.tar"] {
        e2e::containerd::image_tar(tar)?;
    }
    let (mut on, mut off) = (Vec::new(), Vec::new());
    for i in 0..args.rounds * 2 {
        let recording = i % 2 == 0;
        let startup = startup_round(&args, i, recording).await?;
        if recording { on.push(startup) } else { off.push(startup) }
    }
    let (tput_on, tput_off) = throughput(&args).await?;
    let p = |rs: &[Vec<Duration>], q: f64| median(rs.iter().map(|r| percentile(r, q).as_secs_f64() * 1000.0).collect());
    let diff = |a: f64, b: f64| if b > 0.0 { (a / b - 1.0) * 100.0 } else { 0.0 };
    println!("{}", machine());
    println!(
        "Startup: a one-member store, the API server, the scheduler and a node agent on its own containerd, started afresh for each of {} rounds per mode (on and off alternating), {} busybox pods run one at a time (create → Running on a watch); medians over the rounds. Creates: two control planes side by side (store, API server, scheduler; one recording, one not), {} batches each of {} pods bound to a missing node from {} clients, in turn; medians over the batches.",
        args.rounds, args.pods, args.batches, args.batch, args.clients
    );
    println!("| measurement | recording on | recording off | on vs off | goal |");
    println!("| --- | ---: | ---: | ---: | --- |");
    // BENCH_ROUNDS=0 runs the throughput part alone.
    if !on.is_empty() {
        let (a, b) = (p(&on, 0.5), p(&off, 0.5));
        println!("| pod startup p50 | {a:.1} ms | {b:.1} ms | {:+.1} % | < 5 % |", diff(a, b));
        let (a, b) = (p(&on, 0.9), p(&off, 0.9));
        println!("| pod startup p90 | {a:.1} ms | {b:.1} ms | {:+.1} % | |", diff(a, b));
    }
    let (a, b) = (median(tput_on.rates.clone()), median(tput_off.rates.clone()));
    println!("| API server creates/s ({} clients) | {a:.0} | {b:.0} | {:+.1} % | < 5 % |", args.clients, diff(a, b));
    let per_create = |c: &Creates, name: &str| c.cpu.get(name).map_or(0.0, |d| d.as_secs_f64() * 1e6 / c.pods.max(1) as f64);
    for name in tput_on.cpu.keys() {
        let (a, b) = (per_create(&tput_on, name), per_create(&tput_off, name));
        println!("| CPU per create, {name} | {a:.0} µs | {b:.0} µs | {:+.1} % | |", diff(a, b));
    }
    println!();
    println!("| batch pair | creates/s on | creates/s off |");
    println!("| --- | ---: | ---: |");
    for (i, (a, b)) in tput_on.rates.iter().zip(&tput_off.rates).enumerate() {
        println!("| {i} | {a:.0} | {b:.0} |");
    }
    Ok(())
}
