//! controllers-bench: a Deployment of `--replicas` pods scaled up, rolled and deleted, in the
//! manner of Kubernetes' density tests with hollow nodes: a one-member kubelab store,
//! `kubelab apiserver`, `kubelab controller-manager` and `kubelab scheduler` on loopback, `--nodes`
//! Node objects created through the API (their Leases renewed by the benchmark), and no node
//! agent: the benchmark stands in for every kubelet, as a hollow node does — it marks each bound
//! pod Running and Ready through `pods/<name>/status`, and removes each pod that is being deleted
//! (a final delete with a zero grace period, as a kubelet does once the containers are gone).
//!
//! Measured, each from the request that starts it:
//! 1. scale-up: `replicas` 0 → N on the Deployment's `scale` subresource, until every pod has
//!    been created, every pod bound, and the Deployment reports N available;
//! 2. rolling update: a new template (an annotation), until the Deployment reports N updated,
//!    N available and no old pods (`kubectl rollout status` done), and the fewest available
//!    replicas the status showed meanwhile;
//! 3. delete: the Deployment deleted with `propagationPolicy: Background`, until the garbage
//!    collector has removed its ReplicaSets and the last pod is gone from the API;
//!
//! and each process's CPU during each phase, with the controller manager's per pod.
//!
//! `cargo run --release -p e2e --bin controllers-bench -- --help`

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Parser;
use e2e::apiserver::{ApiCluster, ApiOptions};
use e2e::bench::{cpu_time, machine};
use futures::StreamExt;
use serde_json::{Value, json};
use tokio::sync::mpsc;

#[derive(Parser, Debug, Clone)]
#[command(about = "Benchmark kubelab's controller manager: a Deployment of N replicas scaled up, rolled and deleted")]
struct Args {
    /// The Deployment's replicas.
    #[arg(long, env = "BENCH_REPLICAS", default_value_t = 1000)]
    replicas: usize,
    /// Node objects to spread them over (110 pods each).
    #[arg(long, env = "BENCH_NODES", default_value_t = 50)]
    nodes: usize,
    /// Concurrent clients of the stand-in kubelets.
    #[arg(long, env = "BENCH_CLIENTS", default_value_t = 16)]
    clients: usize,
    /// How long each phase may take.
    #[arg(long, env = "BENCH_MAX_SECONDS", default_value_t = 180)]
    max_seconds: u64,
}

const NS: &str = "default";
const NAME: &str = "bench";

fn node_json(name: &str) -> Value {
    let alloc = json!({"cpu": "32", "memory": "64Gi", "pods": "110", "ephemeral-storage": "100Gi"});
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {"capacity": alloc, "allocatable": alloc,
                   "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "a hollow node"}]},
    })
}

fn lease_json(name: &str) -> Value {
    json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": name},
           "spec": {"holderIdentity": name, "leaseDurationSeconds": 40, "renewTime": now()}})
}

fn now() -> String {
    k8s_openapi::jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()
}

fn deployment_json() -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": NAME},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"app": NAME}},
            "template": {
                "metadata": {"labels": {"app": NAME}},
                "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                                         "resources": {"requests": {"cpu": "10m", "memory": "10Mi"}}}]},
            },
        },
    })
}

/// What the stand-in kubelets need of a pod event.
#[derive(serde::Deserialize)]
struct WatchLine {
    #[serde(rename = "type")]
    type_: String,
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
#[serde(rename_all = "camelCase")]
struct WatchMeta {
    name: Option<String>,
    uid: Option<String>,
    deletion_timestamp: Option<String>,
}

#[derive(serde::Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct WatchSpec {
    node_name: Option<String>,
}

/// What the pod watch has seen, for the phases to wait on.
#[derive(Default)]
struct Seen {
    created: HashSet<String>,
    bound: HashSet<String>,
    marked: HashSet<String>,
    removing: HashSet<String>,
    live: HashSet<String>,
}

enum Work {
    MarkReady(String),
    Remove(String, String),
}

/// The stand-in kubelets: `clients` workers PATCH pods Ready and finish deletions.
fn start_kubelets(http: reqwest::Client, base: String, clients: usize) -> mpsc::UnboundedSender<Work> {
    let (tx, rx) = mpsc::unbounded_channel::<Work>();
    let rx = Arc::new(tokio::sync::Mutex::new(rx));
    for _ in 0..clients {
        let (http, base, rx) = (http.clone(), base.clone(), rx.clone());
        tokio::spawn(async move {
            loop {
                let Some(work) = rx.lock().await.recv().await else { return };
                let r = match work {
                    Work::MarkReady(name) => {
                        let t = now();
                        let cond = |ty: &str| json!({"type": ty, "status": "True", "lastTransitionTime": t});
                        let patch = json!({"status": {
                            "phase": "Running", "startTime": t, "podIP": "10.1.0.1", "hostIP": "10.0.0.1",
                            "conditions": [cond("PodScheduled"), cond("Initialized"), cond("ContainersReady"), cond("Ready")],
                            "containerStatuses": [{"name": "c", "image": "registry.k8s.io/pause:3.10", "imageID": "", "ready": true,
                                                   "restartCount": 0, "started": true, "state": {"running": {"startedAt": t}}}],
                        }});
                        http.patch(format!("{base}/api/v1/namespaces/{NS}/pods/{name}/status"))
                            .header("content-type", "application/merge-patch+json")
                            .body(patch.to_string())
                            .send()
                            .await
                    }
                    Work::Remove(name, uid) => {
                        let body = json!({"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0, "preconditions": {"uid": uid}});
                        http.delete(format!("{base}/api/v1/namespaces/{NS}/pods/{name}")).header("content-type", "application/json").body(body.to_string()).send().await
                    }
                };
                match r {
                    Ok(resp) if resp.status().is_success() || matches!(resp.status().as_u16(), 404 | 409) => {}
                    Ok(resp) => eprintln!("[bench] kubelet request: {}", resp.status()),
                    Err(e) => eprintln!("[bench] kubelet request: {e}"),
                }
            }
        });
    }
    tx
}

/// Watches the namespace's pods from `rv`, feeding the kubelets and recording what it sees.
fn start_pod_watch(http: reqwest::Client, base: String, rv: String, seen: Arc<Mutex<Seen>>, kubelets: mpsc::UnboundedSender<Work>) -> tokio::task::JoinHandle<anyhow::Result<()>> {
    tokio::spawn(async move {
        let url = format!("{base}/api/v1/namespaces/{NS}/pods?watch=1&resourceVersion={rv}&allowWatchBookmarks=true");
        let resp = http.get(url).send().await?;
        let mut body = resp.bytes_stream();
        let mut buf = Vec::new();
        while let Some(chunk) = body.next().await {
            buf.extend_from_slice(&chunk?);
            while let Some(nl) = buf.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = buf.drain(..=nl).collect();
                let ev: WatchLine = serde_json::from_slice(&line)?;
                let (Some(name), Some(uid)) = (ev.object.metadata.name, ev.object.metadata.uid) else { continue };
                let mut s = seen.lock().expect("lock");
                if ev.type_ == "DELETED" {
                    s.live.remove(&name);
                    continue;
                }
                s.created.insert(name.clone());
                s.live.insert(name.clone());
                if ev.object.metadata.deletion_timestamp.is_some() {
                    if s.removing.insert(name.clone()) {
                        let _ = kubelets.send(Work::Remove(name, uid));
                    }
                } else if ev.object.spec.node_name.is_some_and(|n| !n.is_empty()) {
                    s.bound.insert(name.clone());
                    if s.marked.insert(name.clone()) {
                        let _ = kubelets.send(Work::MarkReady(name));
                    }
                }
            }
        }
        anyhow::bail!("the pod watch ended")
    })
}

struct Cpu(Vec<(String, u32, Duration)>);

impl Cpu {
    fn now(pids: &[(String, u32)]) -> Cpu {
        Cpu(pids.iter().map(|(n, p)| (n.clone(), *p, cpu_time(*p).unwrap_or_default())).collect())
    }
    /// Each process's CPU since `self`.
    fn since(&self) -> Vec<(String, Duration)> {
        self.0.iter().map(|(n, p, before)| (n.clone(), cpu_time(*p).unwrap_or_default().saturating_sub(*before))).collect()
    }
}

struct Phase {
    name: &'static str,
    /// (what, seconds from the start of the phase)
    marks: Vec<(String, f64)>,
    cpu: Vec<(String, Duration)>,
    /// Pods the controller manager created or deleted in the phase.
    pod_ops: usize,
    extra: String,
}

async fn get_json(http: &reqwest::Client, url: &str) -> anyhow::Result<Value> {
    let resp = http.get(url).send().await?;
    anyhow::ensure!(resp.status().is_success(), "GET {url}: {}", resp.status());
    Ok(resp.json().await?)
}

async fn send_json(req: reqwest::RequestBuilder, content_type: &str, body: &Value) -> anyhow::Result<Value> {
    let resp = req.header("content-type", content_type).body(body.to_string()).send().await?;
    let status = resp.status();
    let text = resp.text().await.unwrap_or_default();
    anyhow::ensure!(status.is_success(), "{status}: {}", &text[..text.len().min(300)]);
    Ok(serde_json::from_str(&text).unwrap_or(Value::Null))
}

/// Polls `check` every 50 ms until it gives a value, or fails after `max`.
async fn until<T, F, Fut>(what: &str, max: Duration, mut check: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<Option<T>>>,
{
    let deadline = Instant::now() + max;
    loop {
        if let Some(v) = check().await? {
            return Ok(v);
        }
        anyhow::ensure!(Instant::now() < deadline, "{what}: not within {}s", max.as_secs());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn status_of(d: &Value, field: &str) -> i64 {
    d["status"][field].as_i64().unwrap_or(0)
}

async fn run(a: &Args) -> anyhow::Result<Vec<Phase>> {
    let mut c = ApiCluster::start(ApiOptions { controller_manager: true, ..ApiOptions::default() }).await?;
    let http = reqwest::Client::builder().timeout(Duration::from_secs(60)).build()?;
    let base = c.url();
    let max = Duration::from_secs(a.max_seconds);
    let n = a.replicas;

    // Nodes and their Leases, renewed every 10 s as kubelets do.
    for i in 0..a.nodes {
        let name = format!("node-{i}");
        send_json(http.post(format!("{base}/api/v1/nodes")), "application/json", &node_json(&name)).await?;
        send_json(http.post(format!("{base}/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases")), "application/json", &lease_json(&name)).await.context("create a node Lease")?;
    }
    {
        let (http, base, nodes) = (http.clone(), base.clone(), a.nodes);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_secs(10)).await;
                for i in 0..nodes {
                    let patch = json!({"spec": {"renewTime": now()}});
                    let _ = http
                        .patch(format!("{base}/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/node-{i}"))
                        .header("content-type", "application/merge-patch+json")
                        .body(patch.to_string())
                        .send()
                        .await;
                }
            }
        });
    }
    c.start_scheduler(&[])?;
    let deadline = Instant::now() + Duration::from_secs(60);
    while !c.scheduler_log(0).contains("caches synced") {
        anyhow::ensure!(Instant::now() < deadline, "the scheduler did not sync its caches:\n{}", c.log_tails(40));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    eprintln!("[bench] {} nodes, scheduler and controller manager up", a.nodes);

    let list = get_json(&http, &format!("{base}/api/v1/namespaces/{NS}/pods?limit=1")).await?;
    let rv = list["metadata"]["resourceVersion"].as_str().unwrap_or("0").to_string();
    let seen: Arc<Mutex<Seen>> = Arc::default();
    let kubelets = start_kubelets(http.clone(), base.clone(), a.clients);
    let watch = start_pod_watch(c.http_streaming(), base.clone(), rv, seen.clone(), kubelets);

    let deploy_url = format!("{base}/apis/apps/v1/namespaces/{NS}/deployments");
    send_json(http.post(&deploy_url), "application/json", &deployment_json()).await?;
    let d_url = format!("{deploy_url}/{NAME}");
    // The Deployment's first (empty) ReplicaSet exists before the clock starts.
    until("the first ReplicaSet", max, || async {
        let d = get_json(&http, &d_url).await?;
        Ok((d["status"]["observedGeneration"].as_i64() == d["metadata"]["generation"].as_i64()).then_some(()))
    })
    .await?;
    let pids = c.pids();
    let mut phases = Vec::new();

    // Phase 1: scale up.
    let cpu = Cpu::now(&pids);
    let t0 = Instant::now();
    send_json(http.patch(format!("{d_url}/scale")), "application/merge-patch+json", &json!({"spec": {"replicas": n}})).await?;
    let mut marks = Vec::new();
    let created = until("every pod created", max, || async { Ok((seen.lock().expect("lock").created.len() >= n).then(|| t0.elapsed())) }).await?;
    marks.push((format!("{n} pods created"), created.as_secs_f64()));
    let bound = until("every pod bound", max, || async { Ok((seen.lock().expect("lock").bound.len() >= n).then(|| t0.elapsed())) }).await?;
    marks.push((format!("{n} pods bound"), bound.as_secs_f64()));
    let available = until("the Deployment available", max, || async {
        let d = get_json(&http, &d_url).await?;
        Ok((status_of(&d, "availableReplicas") >= n as i64).then(|| t0.elapsed()))
    })
    .await?;
    marks.push((format!("Deployment reports {n} available"), available.as_secs_f64()));
    phases.push(Phase { name: "scale-up 0 → N", marks, cpu: cpu.since(), pod_ops: n, extra: String::new() });
    eprintln!("[bench] scale-up done in {:.2}s", available.as_secs_f64());

    // Phase 2: rolling update (25 % surge, 25 % unavailable: the defaults).
    let cpu = Cpu::now(&pids);
    let before = seen.lock().expect("lock").created.len();
    let t0 = Instant::now();
    let patch = json!({"spec": {"template": {"metadata": {"annotations": {"bench/rollout": "2"}}}}});
    send_json(http.patch(&d_url), "application/merge-patch+json", &patch).await?;
    let min_available = Arc::new(Mutex::new(i64::MAX));
    let done = until("the rollout complete", max, || {
        let (http, d_url, min_available) = (http.clone(), d_url.clone(), min_available.clone());
        async move {
            let d = get_json(&http, &d_url).await?;
            let avail = status_of(&d, "availableReplicas");
            let mut m = min_available.lock().expect("lock");
            *m = (*m).min(avail);
            let complete = d["status"]["observedGeneration"].as_i64() >= d["metadata"]["generation"].as_i64()
                && status_of(&d, "updatedReplicas") == n as i64
                && status_of(&d, "replicas") == n as i64
                && avail == n as i64;
            Ok(complete.then(|| t0.elapsed()))
        }
    })
    .await?;
    let new_pods = seen.lock().expect("lock").created.len() - before;
    let min_avail = *min_available.lock().expect("lock");
    phases.push(Phase {
        name: "rolling update",
        marks: vec![("rollout complete (N updated, N available, no old pods)".into(), done.as_secs_f64())],
        cpu: cpu.since(),
        pod_ops: new_pods + n,
        extra: format!("{new_pods} new pods; fewest available seen in the Deployment's status: {min_avail} (the floor is {})", n - n / 4),
    });
    eprintln!("[bench] rollout done in {:.2}s", done.as_secs_f64());

    // Phase 3: delete, background propagation.
    let cpu = Cpu::now(&pids);
    let live = seen.lock().expect("lock").live.len();
    let t0 = Instant::now();
    let opts = json!({"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"});
    send_json(http.delete(&d_url), "application/json", &opts).await?;
    let rs_gone = until("the ReplicaSets collected", max, || async {
        let l = get_json(&http, &format!("{base}/apis/apps/v1/namespaces/{NS}/replicasets")).await?;
        Ok(l["items"].as_array().is_some_and(|i| i.is_empty()).then(|| t0.elapsed()))
    })
    .await?;
    let pods_gone = until("every pod gone", max, || async {
        let l = get_json(&http, &format!("{base}/api/v1/namespaces/{NS}/pods?limit=1")).await?;
        let left = l["items"].as_array().map_or(0, Vec::len) as i64 + l["metadata"]["remainingItemCount"].as_i64().unwrap_or(0);
        Ok((left == 0).then(|| t0.elapsed()))
    })
    .await?;
    phases.push(Phase {
        name: "delete (garbage collection)",
        marks: vec![("ReplicaSets gone".into(), rs_gone.as_secs_f64()), (format!("last of {live} pods gone"), pods_gone.as_secs_f64())],
        cpu: cpu.since(),
        pod_ops: live,
        extra: String::new(),
    });
    eprintln!("[bench] delete done in {:.2}s", pods_gone.as_secs_f64());
    watch.abort();
    let log = std::fs::read_to_string(c.root().join("controller-manager").join("stderr.log")).unwrap_or_default();
    anyhow::ensure!(!log.contains("panicked"), "the controller manager panicked:\n{}", c.log_tails(40));
    Ok(phases)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let a = Args::parse();
    let phases = run(&a).await?;
    println!();
    println!("controllers-bench: a Deployment of {} replicas over {} hollow nodes, {} stand-in kubelet clients; {}", a.replicas, a.nodes, a.clients, machine());
    println!();
    println!("| phase | milestone | seconds from the request |");
    println!("| --- | --- | ---: |");
    for p in &phases {
        for (what, s) in &p.marks {
            println!("| {} | {what} | {s:.2} |", p.name);
        }
    }
    println!();
    println!("| phase | CPU: {} | controller manager per pod created or deleted |", phases[0].cpu.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>().join(", "));
    println!("| --- | ---: | ---: |");
    for p in &phases {
        let cm = p.cpu.iter().find(|(n, _)| n == "controller-manager").map_or(Duration::ZERO, |(_, d)| *d);
        let all: Vec<String> = p.cpu.iter().map(|(_, d)| format!("{:.2} s", d.as_secs_f64())).collect();
        println!("| {} | {} | {:.0} µs ({} pods) |", p.name, all.join(", "), cm.as_secs_f64() * 1e6 / p.pod_ops.max(1) as f64, p.pod_ops);
    }
    for p in &phases {
        if !p.extra.is_empty() {
            println!();
            println!("{}: {}", p.name, p.extra);
        }
    }
    let bound = phases[0].marks.get(1).map_or(f64::MAX, |m| m.1);
    let gc = phases[2].marks.last().map_or(f64::MAX, |m| m.1);
    println!();
    println!("goal: {} replicas created and bound in < 5 s — {bound:.2} s: {}", a.replicas, if bound < 5.0 { "met" } else { "missed" });
    println!("goal: garbage collection of all of them in < 5 s — {gc:.2} s: {}", if gc < 5.0 { "met" } else { "missed" });
    Ok(())
}
