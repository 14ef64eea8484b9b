//! nodeagent-bench: how fast `kubelab nodeagent` turns pods into running containers on a real
//! containerd, next to the raw CRI floor measured in the same run on the same containerd.
//!
//! 1. Raw CRI floor: RunPodSandbox + CreateContainer + StartContainer called directly (with CNI),
//!    `--floor-runs` times, then torn down — what any node agent must spend.
//! 2. Single-pod startup: `--pods` pods created one after the other (spec.nodeName set, so the
//!    scheduler is not measured); latency = create sent → phase Running seen on a watch.
//! 3. Burst: `--burst` pods created at once; time until all are Running.
//! 4. PLEG relist time with about 100 containers on the node, from the agent's own
//!    kubelet_pleg_relist_duration_seconds histogram, and the agent's RSS with 0 and 100 pods.
//!
//! With `--probes`, only the probe overhead instead: the agent's CPU (utime + stime from
//! /proc/<pid>/stat over `--probe-window` seconds) and RSS with `--probe-pods` pods without
//! probes, then with the same number of pods each carrying an exec liveness probe every 10 s.
//!
//! `cargo run --release -p e2e --bin nodeagent-bench -- --help`

use std::collections::HashMap;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Parser;
use e2e::apiserver::{ApiCluster, ApiOptions};
use e2e::bench::{machine, ms, percentile};
use e2e::nodeagent::{NodeAgent, NodeAgentOptions};
use futures::{StreamExt, TryStreamExt};
use k8s_cri::v1 as cri;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, PostParams, WatchEvent, WatchParams};
use nodeagent::cri::RemoteRuntime;
use serde_json::json;

#[derive(Parser, Debug)]
#[command(about = "Benchmark kubelab's node agent: pod startup latency against the raw CRI floor")]
struct Args {
    /// Pods created one at a time for the startup latency.
    #[arg(long, env = "BENCH_PODS", default_value_t = 20)]
    pods: usize,
    /// Raw CRI create → running runs for the floor.
    #[arg(long, env = "BENCH_FLOOR_RUNS", default_value_t = 20)]
    floor_runs: usize,
    /// Pods created at once.
    #[arg(long, env = "BENCH_BURST", default_value_t = 30)]
    burst: usize,
    /// Pods (one container each) on the node for the relist and RSS figures.
    #[arg(long, env = "BENCH_FULL", default_value_t = 100)]
    full: usize,
    /// Measure the probe overhead only (see the module docs).
    #[arg(long)]
    probes: bool,
    /// Pods on the node for the probe overhead.
    #[arg(long, env = "BENCH_PROBE_PODS", default_value_t = 100)]
    probe_pods: usize,
    /// Seconds over which the agent's CPU is measured, with and without probes.
    #[arg(long, env = "BENCH_PROBE_WINDOW", default_value_t = 60)]
    probe_window: u64,
    /// The node's pod CIDR is 10.244.<octet>.0/24 (distinct from concurrent tests' bridges).
    #[arg(long, env = "BENCH_POD_CIDR_OCTET", default_value_t = 90)]
    octet: u8,
}

const IMAGE: &str = "docker.io/library/busybox:1.36";
const NODE: &str = "bench-node";

fn rss_mib(pid: u32) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("VmRSS:")).and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok()))
        .map(|kb| kb / 1024.0)
        .unwrap_or(0.0)
}

fn threads(pid: u32) -> usize {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("Threads:")).and_then(|l| l.split_whitespace().nth(1)?.parse().ok()))
        .unwrap_or(0)
}

fn pod(name: &str) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"bench": "nodeagent"}},
        "spec": {"nodeName": NODE, "terminationGracePeriodSeconds": 0,
                 "containers": [{"name": "c", "image": IMAGE, "command": ["sleep", "3600"]}]}
    }))
    .expect("valid pod")
}

/// [`pod`] with an exec liveness probe every 10 s (the issue's "100 pods each carrying an exec
/// liveness probe").
fn probed_pod(name: &str) -> Pod {
    let mut p = pod(name);
    if let Some(c) = p.spec.as_mut().and_then(|s| s.containers.first_mut()) {
        c.liveness_probe = Some(k8s_openapi::api::core::v1::Probe {
            exec: Some(k8s_openapi::api::core::v1::ExecAction { command: Some(vec!["true".into()]) }),
            period_seconds: Some(10),
            ..Default::default()
        });
    }
    p
}

/// The agent's CPU time so far, in seconds.
fn cpu_seconds(pid: u32) -> anyhow::Result<f64> {
    Ok(e2e::bench::cpu_time(pid).context("reading utime and stime from /proc/<pid>/stat")?.as_secs_f64())
}

/// The agent's mean CPU (percent of one core) over `window`, and its RSS at the end.
async fn agent_usage(pid: u32, window: Duration) -> anyhow::Result<(f64, f64)> {
    let (c0, t0) = (cpu_seconds(pid)?, Instant::now());
    tokio::time::sleep(window).await;
    let (c1, t1) = (cpu_seconds(pid)?, Instant::now());
    Ok(((c1 - c0) / (t1 - t0).as_secs_f64() * 100.0, rss_mib(pid)))
}

/// The probe overhead: `n` pods without probes, then `n` pods with an exec liveness probe every
/// 10 s; the agent's CPU and RSS with each, measured once the pods run and have settled.
async fn probe_overhead(pods: &Api<Pod>, pid: u32, n: usize, window: Duration) -> anyhow::Result<[(f64, f64); 2]> {
    let mut out = [(0.0, 0.0); 2];
    for (i, make) in [pod as fn(&str) -> Pod, probed_pod].into_iter().enumerate() {
        let names: Vec<String> = (0..n).map(|j| format!("probes-{i}-{j}")).collect();
        for chunk in names.chunks(20) {
            run_pods_with(pods, chunk, make).await?;
        }
        // Past the startup work, and past a full probe period (every worker has probed).
        tokio::time::sleep(Duration::from_secs(15)).await;
        out[i] = agent_usage(pid, window).await?;
        delete_all(pods).await?;
    }
    Ok(out)
}

/// Create `names` at once and return each one's create → Running latency (seen on a watch).
async fn run_pods(pods: &Api<Pod>, names: &[String]) -> anyhow::Result<Vec<Duration>> {
    run_pods_with(pods, names, pod).await
}

/// [`run_pods`] with pods made by `make`.
async fn run_pods_with(pods: &Api<Pod>, names: &[String], make: fn(&str) -> Pod) -> anyhow::Result<Vec<Duration>> {
    let wp = WatchParams::default().labels("bench=nodeagent");
    let mut stream = pods.watch(&wp, "0").await?.boxed();
    let mut sent: HashMap<String, Instant> = HashMap::new();
    let creates = names.iter().map(|n| {
        let p = make(n);
        async move { (n.clone(), Instant::now(), pods.create(&PostParams::default(), &p).await) }
    });
    for (n, t, r) in futures::future::join_all(creates).await {
        r.with_context(|| format!("create {n}"))?;
        sent.insert(n, t);
    }
    let mut done: HashMap<String, Duration> = HashMap::new();
    let deadline = Instant::now() + Duration::from_secs(300);
    while done.len() < names.len() {
        let left = deadline.saturating_duration_since(Instant::now());
        let ev = tokio::time::timeout(left, stream.try_next()).await.context("pods did not all reach Running in 300 s")??;
        let Some(ev) = ev else { anyhow::bail!("watch ended") };
        if let WatchEvent::Added(p) | WatchEvent::Modified(p) = ev {
            let name = p.metadata.name.clone().unwrap_or_default();
            if p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
                && let Some(t) = sent.get(&name)
            {
                done.entry(name).or_insert_with(|| t.elapsed());
            }
        }
    }
    Ok(names.iter().filter_map(|n| done.get(n).copied()).collect())
}

/// The raw CRI path for one container: sandbox (with CNI), create, start; then teardown.
async fn floor_once(rt: &RemoteRuntime, i: usize, logs: &std::path::Path) -> anyhow::Result<Duration> {
    let sandbox = cri::PodSandboxConfig {
        metadata: Some(cri::PodSandboxMetadata { name: format!("floor-{i}"), uid: format!("floor-uid-{i}"), namespace: "bench".into(), attempt: 0 }),
        hostname: format!("floor-{i}"),
        log_directory: logs.join(format!("floor-{i}")).to_string_lossy().into_owned(),
        ..Default::default()
    };
    let start = Instant::now();
    let sb = rt.run_pod_sandbox(sandbox.clone(), "").await?;
    let config = cri::ContainerConfig {
        metadata: Some(cri::ContainerMetadata { name: "c".into(), attempt: 0 }),
        image: Some(cri::ImageSpec { image: IMAGE.into(), ..Default::default() }),
        command: vec!["sleep".into(), "3600".into()],
        log_path: "c/0.log".into(),
        ..Default::default()
    };
    let id = rt.create_container(&sb, config, sandbox).await?;
    rt.start_container(&id).await?;
    let took = start.elapsed();
    rt.stop_container(&id, Duration::ZERO).await?;
    rt.remove_container(&id).await?;
    rt.stop_pod_sandbox(&sb).await?;
    rt.remove_pod_sandbox(&sb).await?;
    Ok(took)
}

/// (sum, count) of the agent's relist histogram.
async fn relist_histogram(port: u16) -> anyhow::Result<(f64, f64)> {
    let text = reqwest::get(format!("http://127.0.0.1:{port}/metrics")).await?.text().await?;
    let get = |name: &str| {
        text.lines().find(|l| l.starts_with(name)).and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok()).unwrap_or(0.0)
    };
    Ok((get("kubelet_pleg_relist_duration_seconds_sum"), get("kubelet_pleg_relist_duration_seconds_count")))
}

async fn delete_all(pods: &Api<Pod>) -> anyhow::Result<()> {
    let dp = DeleteParams { grace_period_seconds: Some(0), ..Default::default() };
    pods.delete_collection(&dp, &kube::api::ListParams::default().labels("bench=nodeagent")).await?;
    let deadline = Instant::now() + Duration::from_secs(300);
    while !pods.list(&kube::api::ListParams::default().labels("bench=nodeagent")).await?.items.is_empty() {
        anyhow::ensure!(Instant::now() < deadline, "pods not deleted within 300 s");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    e2e::containerd::prerequisites().map_err(|e| anyhow::anyhow!(e))?;
    let api = ApiCluster::start(ApiOptions::default()).await?;
    let agent = NodeAgent::start(api.root(), NodeAgentOptions { master: Some(api.url()), node_name: NODE, pod_cidr_octet: args.octet, extra: vec![] }).await?;
    let client = api.kube_client()?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pid = agent.pid().context("agent pid")?;
    // Let the agent register, import images and settle.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let rss_idle = rss_mib(pid);

    if args.probes {
        let window = Duration::from_secs(args.probe_window);
        let [(cpu_off, rss_off), (cpu_on, rss_on)] = probe_overhead(&pods, pid, args.probe_pods, window).await?;
        let ratio = |on: f64, off: f64| if off > 0.0 { format!("{:.2}×", on / off) } else { "–".into() };
        println!("{}", machine());
        println!("One `kubelab nodeagent` on its own containerd; {} busybox pods (`sleep 3600`), CPU averaged over {} s once the pods settled.", args.probe_pods, args.probe_window);
        println!("| {} pods | agent CPU (% of one core) | agent RSS |", args.probe_pods);
        println!("| --- | ---: | ---: |");
        println!("| without probes | {cpu_off:.2} % | {rss_off:.1} MiB |");
        println!("| each with an exec liveness probe every 10 s | {cpu_on:.2} % | {rss_on:.1} MiB |");
        println!("| with / without | {} | {} |", ratio(cpu_on, cpu_off), ratio(rss_on, rss_off));
        return Ok(());
    }

    // 1. The raw CRI floor, once the agent has imported the images (pause, busybox).
    let rt = RemoteRuntime::connect(&agent.containerd().endpoint()).await?;
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    while rt.image_status(e2e::containerd::PAUSE_IMAGE).await?.is_none() || rt.image_status(IMAGE).await?.is_none() {
        anyhow::ensure!(std::time::Instant::now() < deadline, "the agent did not import the images within 120 s:\n{}", agent.log_tail(40));
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let logs = api.root().join("floor-logs");
    let mut floor = vec![];
    for i in 0..args.floor_runs {
        floor.push(floor_once(&rt, i, &logs).await?);
    }
    floor.sort();

    // 2. One pod at a time.
    let mut single = vec![];
    for i in 0..args.pods {
        single.extend(run_pods(&pods, &[format!("single-{i}")]).await?);
    }
    single.sort();

    // 3. A burst.
    let names: Vec<String> = (0..args.burst).map(|i| format!("burst-{i}")).collect();
    let t = Instant::now();
    let mut burst = run_pods(&pods, &names).await?;
    let burst_all = t.elapsed();
    burst.sort();

    // 4. Fill the node to `full` pods, then read the relist time over 10 s and the RSS.
    let have = args.pods + args.burst;
    let more: Vec<String> = (have..args.full.max(have)).map(|i| format!("fill-{i}")).collect();
    for chunk in more.chunks(20) {
        run_pods(&pods, chunk).await?;
    }
    let (s0, c0) = relist_histogram(agent.port()).await?;
    tokio::time::sleep(Duration::from_secs(10)).await;
    let (s1, c1) = relist_histogram(agent.port()).await?;
    let relist = if c1 > c0 { Duration::from_secs_f64((s1 - s0) / (c1 - c0)) } else { Duration::ZERO };
    let containers = rt.list_containers(None).await?.len();
    let rss_full = rss_mib(pid);
    let threads_full = threads(pid);
    delete_all(&pods).await?;

    let floor_p50 = percentile(&floor, 0.5);
    println!("{}", machine());
    println!("One `kubelab nodeagent` on its own containerd {}, with a one-member kubelab store and `kubelab apiserver`; pods use busybox:1.36 and set spec.nodeName (no scheduler).", rt.version().await.map(|v| v.runtime_version).unwrap_or_default());
    println!("| measurement | p50 | p99 | goal | |");
    println!("| --- | ---: | ---: | --- | --- |");
    println!("| raw CRI floor: RunPodSandbox + CreateContainer + StartContainer ({} runs) | {} | {} | | |", floor.len(), ms(floor_p50), ms(percentile(&floor, 0.99)));
    let p50 = percentile(&single, 0.5);
    let p99 = percentile(&single, 0.99);
    let met = |b: bool| if b { "met" } else { "missed" };
    println!("| pod startup, one at a time: create → Running on a watch ({} pods) | {} | {} | p50 ≤ floor + 100 ms ({}) | {} |", single.len(), ms(p50), ms(p99), ms(floor_p50 + Duration::from_millis(100)), met(p50 <= floor_p50 + Duration::from_millis(100)));
    println!("| … p99 | | {} | p99 ≤ 1 s | {} |", ms(p99), met(p99 <= Duration::from_secs(1)));
    println!("| {} pods created at once: each create → Running | {} | {} | | |", burst.len(), ms(percentile(&burst, 0.5)), ms(percentile(&burst, 0.99)));
    println!("| {} pods created at once: all Running | {} | | | |", burst.len(), ms(burst_all));
    println!("| PLEG relist with {containers} containers (mean over 10 s) | {} | | | |", ms(relist));
    println!("| agent RSS, no pods | {rss_idle:.1} MiB | | | |");
    println!("| agent RSS, {} pods ({threads_full} threads) | {rss_full:.1} MiB | | ≤ 50 MB | {} |", args.full.max(have), met(rss_full * 1.048_576 <= 50.0));
    Ok(())
}
