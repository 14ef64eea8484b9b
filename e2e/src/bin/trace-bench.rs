//! What recording pod steps for `kubelab trace` costs (issue 8): pod startup latency and the API
//! server's pod create throughput with recording on and off, in the same run.
//!
//! Each round starts a whole cluster — a one-member store, the API server, the scheduler and a
//! node agent on its own containerd — with `KUBELAB_RECORD_POD_STEPS` (the `--record-pod-steps`
//! flag every component takes) set to the round's mode, then:
//! 1. runs `--pods` pods one at a time and takes each one's create → Running latency, seen on a
//!    watch (the pods go through the scheduler and the node agent: every component records);
//! 2. creates `--creates` pods from `--clients` concurrent HTTP clients, each bound to a node that
//!    does not exist (`spec.nodeName`), so that only the API server and the store work — and
//!    record — for them; the figure is creates per second.
//!
//! Rounds alternate on, off, on, off… so that a drift of the machine (page cache, another
//! process) does not fall on one mode; each mode's figure is the median of its rounds.
//! `make bench-trace` builds in release and runs it.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Parser;
use e2e::apiserver::{ApiCluster, ApiOptions};
use e2e::bench::{machine, ms, percentile};
use e2e::nodeagent::{NodeAgent, NodeAgentOptions};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, PostParams, WatchEvent, WatchParams};
use serde_json::json;

const NODE: &str = "node-trace-bench";
const IMAGE: &str = "docker.io/library/busybox:1.36";
/// The variable every kubelab component reads for `--record-pod-steps`.
const SWITCH: &str = "KUBELAB_RECORD_POD_STEPS";

#[derive(Parser)]
struct Args {
    /// Rounds per mode (on and off alternate).
    #[arg(long, env = "BENCH_ROUNDS", default_value_t = 3)]
    rounds: usize,
    /// Pods run one at a time per round for the startup latency.
    #[arg(long, env = "BENCH_PODS", default_value_t = 15)]
    pods: usize,
    /// Pods created per round for the create throughput.
    #[arg(long, env = "BENCH_CREATES", default_value_t = 2000)]
    creates: u64,
    /// Concurrent clients creating them.
    #[arg(long, env = "BENCH_CLIENTS", default_value_t = 32)]
    clients: usize,
    /// The node's pod CIDR is 10.244.<octet>.0/24.
    #[arg(long, env = "BENCH_POD_CIDR_OCTET", default_value_t = 91)]
    octet: u8,
}

/// One round's figures.
struct Round {
    startup: Vec<Duration>,
    creates_per_sec: f64,
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

/// Creates `total` pods bound to a node that does not exist from `clients` concurrent clients;
/// creates per second.
async fn create_throughput(api: &ApiCluster, round: usize, total: u64, clients: usize) -> anyhow::Result<f64> {
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
                let body = serde_json::to_vec(&pod(&format!("create-{round}-{i}"), Some("nowhere"))?)?;
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

async fn round(args: &Args, i: usize, on: bool) -> anyhow::Result<Round> {
    // SAFETY: set before the round's processes are spawned; no other thread reads the
    // environment concurrently (the runtime's workers only run this round's futures).
    unsafe { std::env::set_var(SWITCH, if on { "true" } else { "false" }) };
    let mut api = ApiCluster::start(ApiOptions::default()).await?;
    api.start_scheduler(&[])?;
    let agent = NodeAgent::start(api.root(), NodeAgentOptions { master: Some(api.url()), node_name: NODE, pod_cidr_octet: args.octet, extra: vec![] }).await?;
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
    let creates_per_sec = create_throughput(&api, i, args.creates, args.clients).await?;
    eprintln!(
        "[bench] round {i} recording {}: startup p50 {} p90 {}, {creates_per_sec:.0} creates/s",
        if on { "on" } else { "off" },
        ms(percentile(&startup, 0.5)),
        ms(percentile(&startup, 0.9))
    );
    // Dropped: the agent, its containerd (with every pod) and the store go with the round.
    drop(agent);
    drop(api);
    Ok(Round { startup, creates_per_sec })
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
    let mut on = Vec::new();
    let mut off = Vec::new();
    for i in 0..args.rounds * 2 {
        let mode = i % 2 == 0;
        let r = round(&args, i, mode).await?;
        if mode { on.push(r) } else { off.push(r) }
    }
    let p50 = |rs: &[Round]| median(rs.iter().map(|r| percentile(&r.startup, 0.5).as_secs_f64() * 1000.0).collect());
    let p90 = |rs: &[Round]| median(rs.iter().map(|r| percentile(&r.startup, 0.9).as_secs_f64() * 1000.0).collect());
    let tput = |rs: &[Round]| median(rs.iter().map(|r| r.creates_per_sec).collect());
    let diff = |a: f64, b: f64| if b > 0.0 { (a / b - 1.0) * 100.0 } else { 0.0 };
    println!("{}", machine());
    println!(
        "A one-member store, the API server, the scheduler and a node agent on its own containerd, started afresh for each of {} rounds per mode (on and off alternating); medians over the rounds. Startup: {} pods run one at a time (busybox, create → Running on a watch). Creates: {} pods bound to a missing node from {} clients.",
        args.rounds, args.pods, args.creates, args.clients
    );
    println!("| measurement | recording on | recording off | on vs off | goal |");
    println!("| --- | ---: | ---: | ---: | --- |");
    let (a, b) = (p50(&on), p50(&off));
    println!("| pod startup p50 | {a:.1} ms | {b:.1} ms | {:+.1} % | < 5 % |", diff(a, b));
    let (a, b) = (p90(&on), p90(&off));
    println!("| pod startup p90 | {a:.1} ms | {b:.1} ms | {:+.1} % | |", diff(a, b));
    let (a, b) = (tput(&on), tput(&off));
    println!("| API server creates/s ({} clients) | {a:.0} | {b:.0} | {:+.1} % | < 5 % |", args.clients, diff(a, b));
    Ok(())
}
