//! scheduler-bench: pods bound per second end to end, in the manner of kube-scheduler's
//! scheduler_perf ("SchedulingBasic"): N Node objects and then `--pods` pods are created through
//! the API server of a one-member kubelab store, and one `kubelab scheduler` binds them.
//!
//! Measured per node count: throughput = pods / (first create sent → last binding observed on a
//! pod watch), and each pod's latency from its create being sent to its binding being observed
//! (p50, p99). Everything runs on this machine: store, API server, scheduler and the load
//! generator share its cores.
//!
//! `cargo run --release -p e2e --bin scheduler-bench -- --help`

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Parser;
use e2e::apiserver::{ApiCluster, ApiOptions};
use e2e::bench::{cpu_time, machine, ms, percentile};
use futures::StreamExt;
use serde_json::{Value, json};
use tokio::sync::Mutex;

#[derive(Parser, Debug, Clone)]
#[command(about = "Benchmark kubelab's scheduler: pods bound per second over N nodes")]
struct Args {
    /// Node counts, one cluster each.
    #[arg(long, env = "BENCH_NODES", value_delimiter = ',', default_value = "100,1000,5000")]
    nodes: Vec<usize>,
    /// Pods to schedule per node count.
    #[arg(long, env = "BENCH_PODS", default_value_t = 10_000)]
    pods: usize,
    /// Concurrent clients creating pods (and nodes).
    #[arg(long, env = "BENCH_CLIENTS", default_value_t = 32)]
    clients: usize,
    /// How long every pod gets to be bound.
    #[arg(long, env = "BENCH_MAX_SECONDS", default_value_t = 180)]
    max_seconds: u64,
}

#[derive(serde::Deserialize)]
struct WatchLine {
    object: WatchObject,
}

#[derive(serde::Deserialize, Default)]
struct WatchObject {
    #[serde(default)]
    metadata: WatchMeta,
    #[serde(default)]
    spec: WatchSpec,
}

#[derive(serde::Deserialize, Default)]
struct WatchMeta {
    name: Option<String>,
}

#[derive(serde::Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct WatchSpec {
    node_name: Option<String>,
}

struct Row {
    nodes: usize,
    pods: usize,
    bound: usize,
    elapsed: Duration,
    create_elapsed: Duration,
    latencies: Vec<Duration>,
}

impl Row {
    fn throughput(&self) -> f64 {
        self.bound as f64 / self.elapsed.as_secs_f64()
    }
}

fn node_json(name: &str) -> Vec<u8> {
    let alloc = json!({"cpu": "32", "memory": "64Gi", "pods": "110", "ephemeral-storage": "100Gi"});
    serde_json::to_vec(&json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {"capacity": alloc, "allocatable": alloc,
                   "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "bench"}]},
    }))
    .expect("json")
}

fn pod_json(name: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                                 "resources": {"requests": {"cpu": "100m", "memory": "100Mi"}}}]},
    }))
    .expect("json")
}

/// POSTs `count` objects to `url` from `clients` concurrent clients; calls `sent(i)` just before
/// each request goes out.
async fn create_all(
    http: &reqwest::Client,
    url: &str,
    count: usize,
    clients: usize,
    body: impl Fn(usize) -> Vec<u8> + Send + Sync + 'static,
    sent: impl Fn(usize) + Send + Sync + 'static,
) -> anyhow::Result<()> {
    let next = Arc::new(AtomicU64::new(0));
    let (body, sent) = (Arc::new(body), Arc::new(sent));
    let mut tasks = Vec::new();
    for _ in 0..clients {
        let (http, url, next, body, sent) = (http.clone(), url.to_string(), next.clone(), body.clone(), sent.clone());
        tasks.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed) as usize;
                if i >= count {
                    return anyhow::Ok(());
                }
                sent(i);
                let resp = http.post(&url).header("content-type", "application/json").body(body(i)).send().await?;
                let status = resp.status();
                if status.as_u16() != 201 {
                    let text = resp.text().await.unwrap_or_default();
                    anyhow::bail!("POST {url}: {status}: {}", &text[..text.len().min(300)]);
                }
            }
        }));
    }
    for t in tasks {
        t.await??;
    }
    Ok(())
}

async fn run_one(a: &Args, nodes: usize) -> anyhow::Result<Row> {
    let mut c = ApiCluster::start(ApiOptions::default()).await?;
    let http = reqwest::Client::builder().timeout(Duration::from_secs(60)).build()?;
    let base = c.url();
    let t = Instant::now();
    create_all(&http, &format!("{base}/api/v1/nodes"), nodes, a.clients, |i| node_json(&format!("node-{i}")), |_| {}).await?;
    eprintln!("[bench] {nodes} nodes created in {:.1}s", t.elapsed().as_secs_f64());
    c.start_scheduler(&[])?;
    let deadline = Instant::now() + Duration::from_secs(60);
    while !c.scheduler_log(0).contains("caches synced") {
        anyhow::ensure!(Instant::now() < deadline, "the scheduler did not sync its caches:\n{}", c.log_tails(40));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // Watch pods from now on; record when each one is first seen bound.
    let list: Value = http.get(format!("{base}/api/v1/namespaces/default/pods?limit=1")).send().await?.json().await?;
    let rv = list["metadata"]["resourceVersion"].as_str().unwrap_or("0").to_string();
    let bound_at: Arc<Mutex<HashMap<usize, Instant>>> = Arc::default();
    let total = a.pods;
    let watch = {
        let (bound_at, http) = (bound_at.clone(), c.http_streaming());
        let url = format!("{base}/api/v1/namespaces/default/pods?watch=1&resourceVersion={rv}&allowWatchBookmarks=true");
        tokio::spawn(async move {
            let resp = http.get(url).send().await?;
            let mut body = resp.bytes_stream();
            let mut buf = Vec::new();
            while let Some(chunk) = body.next().await {
                buf.extend_from_slice(&chunk?);
                while let Some(nl) = buf.iter().position(|b| *b == b'\n') {
                    let line: Vec<u8> = buf.drain(..=nl).collect();
                    let now = Instant::now();
                    // Only the name and the node: serde skips the rest of the pod without building it.
                    let ev: WatchLine = serde_json::from_slice(&line)?;
                    let Some(i) = ev.object.metadata.name.as_deref().and_then(|n| n.strip_prefix("pod-")).and_then(|n| n.parse().ok()) else {
                        continue;
                    };
                    if ev.object.spec.node_name.is_some_and(|n| !n.is_empty()) {
                        let mut b = bound_at.lock().await;
                        b.entry(i).or_insert(now);
                        if b.len() >= total {
                            return anyhow::Ok(());
                        }
                    }
                }
            }
            anyhow::bail!("the pod watch ended early")
        })
    };

    let mut pids = c.pids();
    pids.push(("bench client".into(), std::process::id()));
    let cpu_before: Vec<(String, u32, Duration)> =
        pids.into_iter().map(|(n, pid)| (n, pid, cpu_time(pid).unwrap_or_default())).collect();
    let sent_at: Arc<std::sync::Mutex<Vec<Option<Instant>>>> = Arc::new(std::sync::Mutex::new(vec![None; total]));
    let start = Instant::now();
    let s = sent_at.clone();
    create_all(&http, &format!("{base}/api/v1/namespaces/default/pods"), total, a.clients, |i| pod_json(&format!("pod-{i}")), move |i| {
        s.lock().expect("lock")[i] = Some(Instant::now());
    })
    .await?;
    let create_elapsed = start.elapsed();
    eprintln!("[bench] {total} pods created in {:.1}s ({:.0}/s)", create_elapsed.as_secs_f64(), total as f64 / create_elapsed.as_secs_f64());
    match tokio::time::timeout(Duration::from_secs(a.max_seconds), watch).await {
        Ok(r) => r.context("watch task")??,
        Err(_) => eprintln!("[bench] not every pod was bound within {}s", a.max_seconds),
    }
    let cpu: Vec<String> = cpu_before
        .iter()
        .map(|(n, pid, before)| format!("{n} {:.1}s", cpu_time(*pid).unwrap_or_default().saturating_sub(*before).as_secs_f64()))
        .collect();
    eprintln!("[bench] CPU used during the run: {}", cpu.join(", "));
    let bound = bound_at.lock().await;
    let sent = sent_at.lock().expect("lock");
    let last = bound.values().max().copied().unwrap_or(start);
    let mut latencies: Vec<Duration> =
        bound.iter().filter_map(|(i, at)| sent[*i].map(|s| at.saturating_duration_since(s))).collect();
    latencies.sort();
    let row = Row { nodes, pods: total, bound: bound.len(), elapsed: last.duration_since(start), create_elapsed, latencies };
    eprintln!(
        "[bench] {nodes} nodes: {}/{} bound in {:.2}s = {:.0} pods/s, p50 {}, p99 {}",
        row.bound,
        row.pods,
        row.elapsed.as_secs_f64(),
        row.throughput(),
        ms(percentile(&row.latencies, 0.5)),
        ms(percentile(&row.latencies, 0.99))
    );
    let log = c.scheduler_log(0);
    anyhow::ensure!(!log.contains("panicked"), "the scheduler panicked:\n{}", c.log_tails(40));
    Ok(row)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let a = Args::parse();
    let mut rows = Vec::new();
    for &n in &a.nodes {
        rows.push(run_one(&a, n).await?);
    }
    println!();
    println!("scheduler-bench: {} pods per run, created by {} concurrent clients; {}", a.pods, a.clients, machine());
    println!();
    println!("| nodes | pods bound | first create → last bound | pods/s | create rate | p50 pod latency | p99 pod latency |");
    println!("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    for r in &rows {
        println!(
            "| {} | {}/{} | {:.2} s | {:.0} | {:.0}/s | {} | {} |",
            r.nodes,
            r.bound,
            r.pods,
            r.elapsed.as_secs_f64(),
            r.throughput(),
            r.pods as f64 / r.create_elapsed.as_secs_f64(),
            ms(percentile(&r.latencies, 0.5)),
            ms(percentile(&r.latencies, 0.99))
        );
    }
    if let Some(r) = rows.iter().find(|r| r.nodes == 1000) {
        let met = r.throughput() >= 1000.0 && r.bound == r.pods;
        println!();
        println!("goal: ≥ 1,000 pods/s with 1,000 nodes — {:.0} pods/s: {}", r.throughput(), if met { "met" } else { "missed" });
    }
    Ok(())
}
