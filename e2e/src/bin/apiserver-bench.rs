//! apiserver-bench: what the API server costs on top of the store, measured the way kubectl talks to it.
//! (Long on purpose: a benchmark reads best top to bottom, each workload beside the figure it prints.)
//!
//! One `kubelab store` member and one `kubelab apiserver` run on loopback; the bench is a plain
//! HTTP/1.1 JSON client (reqwest, one shared connection pool), as kubectl is. The same create
//! workload is also sent straight to the store (an etcd-client Txn put conditioned on
//! `mod_revision == 0`, which is what the API server's create does underneath), so the API
//! server's overhead is a ratio measured in the same run on the same machine.
//!
//! Workloads, in order, each bounded by a count and by `--max-seconds`:
//! 1. pod creates (POST) from 1 and from `--clients` concurrent clients;
//! 2. the same creates sent straight to the store, then deleted again (so the pod count stays
//!    exact). The two run in alternating batches (API server, store, store, API server, …), so a
//!    machine that is faster or slower for a while weighs on both sides of the ratio alike;
//! 3. GET of one pod;
//! 4. bulk creation up to `--list-pods` pods, then LIST of all of them as JSON and as a Table,
//!    from the store (no resourceVersion) and from the watch cache (`resourceVersion=0`);
//! 5. watch fan-out: `--watchers` watch streams, one pod PATCHed `--watch-changes` times, the
//!    time from the PATCH being sent until each watcher reads the MODIFIED event;
//! 6. the API server's resident memory (VmRSS) at rest, with the pods, and with the watchers.
//!
//! `cargo run --release -p e2e --bin apiserver-bench -- --help`

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Parser;
use e2e::bench::{cpu_time, machine, ms};
use e2e::process::Process;
use e2e::{StoreCluster, StoreOptions};
use etcd_client::{Compare, CompareOp, Txn, TxnOp};
use futures::StreamExt;
use serde::Deserialize;
use tokio::sync::{Semaphore, mpsc};

#[derive(Parser, Debug, Clone)]
#[command(about = "Benchmark kubelab's API server over HTTP against its own store")]
struct Args {
    /// Creates in the one-client workload (API server and store each).
    #[arg(long, env = "BENCH_SEQ_CREATES", default_value_t = 1000)]
    seq_creates: u64,
    /// Concurrent clients in the concurrent-create workload.
    #[arg(long, env = "BENCH_CLIENTS", default_value_t = 32)]
    clients: usize,
    /// Creates in the concurrent workload (API server and store each).
    #[arg(long, env = "BENCH_CONCURRENT_CREATES", default_value_t = 4000)]
    concurrent_creates: u64,
    /// Batches each create workload is cut into, per target, alternating between the targets.
    #[arg(long, env = "BENCH_CREATE_BATCHES", default_value_t = 4)]
    create_batches: u64,
    /// GETs of a single pod.
    #[arg(long, env = "BENCH_GETS", default_value_t = 2000)]
    gets: u64,
    /// Pods in the namespace when it is listed (the rest are bulk-created first).
    #[arg(long, env = "BENCH_LIST_PODS", default_value_t = 10_000)]
    list_pods: u64,
    /// LISTs of each kind (JSON/Table × store/cache).
    #[arg(long, env = "BENCH_LIST_READS", default_value_t = 10)]
    list_reads: u64,
    /// Concurrent watch streams.
    #[arg(long, env = "BENCH_WATCHERS", default_value_t = 1000)]
    watchers: usize,
    /// Timed pod changes every watcher must see (after one untimed warm-up change).
    #[arg(long, env = "BENCH_WATCH_CHANGES", default_value_t = 5)]
    watch_changes: u64,
    /// Time cap per workload, in seconds.
    #[arg(long, env = "BENCH_MAX_SECONDS", default_value_t = 20)]
    max_seconds: u64,
}

/// How long a single request may take (a LIST of 10,000 pods included).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the API server gets to answer /readyz and bootstrap the `default` namespace.
const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// How long every watcher gets to receive one change.
const WATCH_EVENT_TIMEOUT: Duration = Duration::from_secs(15);
/// Watch streams being opened at once (each open is a TCP connect and a request).
const WATCH_OPEN_CONCURRENCY: usize = 64;
/// The label the watch workload changes.
const CHANGE_LABEL: &str = "bench-change";

/// One measured workload: latencies of the operations that succeeded, and the failures.
#[derive(Clone, Debug, Default)]
struct Row {
    elapsed: Duration,
    /// Sorted.
    lat: Vec<Duration>,
    errors: u64,
    first_error: Option<String>,
}

impl Row {
    /// The batches of one workload as one row: their operations over their summed time.
    fn merge(rows: Vec<Row>) -> Self {
        let mut lat = Vec::new();
        let (mut elapsed, mut errors, mut first_error) = (Duration::ZERO, 0, None);
        for r in rows {
            lat.extend(r.lat);
            elapsed += r.elapsed;
            errors += r.errors;
            first_error = first_error.or(r.first_error);
        }
        Self::new(lat, elapsed, errors, first_error)
    }
    fn new(mut lat: Vec<Duration>, elapsed: Duration, errors: u64, first_error: Option<String>) -> Self {
        lat.sort();
        Self {
            elapsed,
            lat,
            errors,
            first_error,
        }
    }
    fn ops(&self) -> u64 {
        self.lat.len() as u64
    }
    fn throughput(&self) -> f64 {
        self.ops() as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
    fn pct(&self, p: f64) -> Duration {
        e2e::bench::percentile(&self.lat, p)
    }
}

/// Everything the run measured, for the table.
#[derive(Default)]
struct Report {
    api_create_1: Row,
    store_create_1: Row,
    api_create_n: Row,
    store_create_n: Row,
    /// The API server's CPU time (user + system) per create, in the API server's batches.
    api_cpu_1: Duration,
    api_cpu_n: Duration,
    bulk_create: Row,
    bulk_pods: u64,
    get: Row,
    /// (label, row, body bytes) for JSON/Table × store/cache.
    lists: Vec<(String, Row, usize)>,
    listed_pods: u64,
    watch: Row,
    watch_patch: Row,
    watch_missed: u64,
    rss_rest: Option<u64>,
    rss_pods: Option<u64>,
    rss_watchers: Option<u64>,
}

/// The API server under test, reached over plain HTTP.
struct Api {
    base: String,
    http: reqwest::Client,
    pid: u32,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let started = Instant::now();
    // Before any child is spawned: children inherit the limit, and the API server needs a
    // socket per watcher just as we do.
    raise_nofile_limit(args.watchers as u64 * 2 + 1024);

    eprintln!("[bench] starting a one-member kubelab store");
    let opts = StoreOptions {
        proxy: false,
        ..StoreOptions::default()
    };
    let cluster = StoreCluster::start(1, opts).await.context("starting the store")?;
    let store_url = cluster.endpoint(0);

    let port = e2e::ports::reserve()?;
    let bin = e2e::kubelab_bin()?;
    let apiserver_args: Vec<String> = [
        "apiserver",
        "--etcd-servers",
        &store_url,
        "--insecure-port",
        &port.port.to_string(),
        "--secure-port",
        "0",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let log_dir = cluster.root().join("apiserver");
    let mut apiserver = Process::spawn(
        "apiserver",
        &bin,
        &apiserver_args,
        &log_dir,
        &[("NO_COLOR".into(), "1".into())],
    )?;
    let command_line = format!("{} {}", bin.display(), apiserver_args.join(" "));
    eprintln!("[bench] started apiserver pid {}: {command_line}", apiserver.pid());

    let api = Api {
        base: format!("http://127.0.0.1:{}", port.port),
        http: reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(2))
            .timeout(REQUEST_TIMEOUT)
            .pool_max_idle_per_host(args.clients * 2)
            .build()?,
        pid: apiserver.pid(),
    };

    let result = async {
        wait_ready(&api, &mut apiserver).await?;
        run_workloads(&api, &cluster, &args).await
    }
    .await;
    let died = apiserver.exited();
    let report = match (result, died) {
        (Ok(r), None) => r,
        (r, died) => {
            eprintln!("{}", apiserver.log_tail(40));
            eprintln!("[bench] apiserver: {command_line}");
            if let Some(st) = died {
                bail!("the API server exited during the benchmark ({st}); its log tail is above");
            }
            return r.map(|_| ()).context("benchmarking the API server (its log tail is above)");
        }
    };
    apiserver.terminate();
    drop(cluster);
    print_table(&args, &report);
    eprintln!("[bench] total {:.1}s", started.elapsed().as_secs_f64());
    Ok(())
}

/// Raises RLIMIT_NOFILE's soft limit to at least `want` (up to the hard limit).
fn raise_nofile_limit(want: u64) {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit only read and write the struct we pass.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            eprintln!("[bench] getrlimit(RLIMIT_NOFILE) failed; keeping the limit");
            return;
        }
        if lim.rlim_cur >= want {
            return;
        }
        let old = lim.rlim_cur;
        lim.rlim_cur = want.min(lim.rlim_max);
        if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
            eprintln!("[bench] setrlimit(RLIMIT_NOFILE, {}) failed", lim.rlim_cur);
        } else {
            eprintln!("[bench] open-files limit {old} → {}", lim.rlim_cur);
        }
        if lim.rlim_cur < want {
            eprintln!(
                "[bench] warning: open-files limit {} < {want} wanted; lower --watchers if opening watches fails",
                lim.rlim_cur
            );
        }
    }
}

/// Waits for /readyz and for the bootstrapped `default` namespace; a server that exits explains itself.
async fn wait_ready(api: &Api, p: &mut Process) -> anyhow::Result<()> {
    let start = Instant::now();
    loop {
        if let Some(st) = p.exited() {
            bail!("the API server exited at startup ({st})");
        }
        let ready = api.http.get(format!("{}/readyz", api.base)).send().await;
        let ns = api
            .http
            .get(format!("{}/api/v1/namespaces/default", api.base))
            .send()
            .await;
        let last = match (ready, ns) {
            (Ok(r), Ok(n)) if r.status().is_success() && n.status().is_success() => return Ok(()),
            (Ok(r), Ok(n)) => format!("/readyz {}, namespace default {}", r.status(), n.status()),
            (Err(e), _) | (_, Err(e)) => format!("{e:#}"),
        };
        if start.elapsed() > READY_TIMEOUT {
            bail!("the API server was not ready within {READY_TIMEOUT:?}: {last}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A small busybox pod, as `kubectl run` would send it.
fn pod_json(name: &str) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {"app": "bench"}},
        "spec": {
            "containers": [{
                "name": "busybox",
                "image": "busybox:1.36",
                "command": ["sleep", "3600"],
            }],
            "restartPolicy": "Never",
        },
    }))
    .unwrap_or_default()
}

/// The VmRSS of `pid` in bytes.
fn rss(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// Where a create goes: the API server over HTTP, or the store's etcd v3 API.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Target {
    Api,
    Store,
}

/// Creates pods `<prefix>-<i>` for i in `indexes` from `clients` concurrent clients, at most `cap`.
async fn create_pods(
    api: &Api,
    store_url: &str,
    target: Target,
    prefix: &str,
    indexes: std::ops::Range<u64>,
    clients: usize,
    cap: Duration,
) -> anyhow::Result<Row> {
    let end = indexes.end;
    let next = Arc::new(AtomicU64::new(indexes.start));
    let errors = Arc::new(AtomicU64::new(0));
    let first_error = Arc::new(std::sync::Mutex::new(None::<String>));
    // The store gets one connection per client (as store-bench does); HTTP clients share the pool.
    let mut stores = Vec::new();
    if target == Target::Store {
        for _ in 0..clients {
            stores.push(Some(e2e::connect(&[store_url.to_string()], REQUEST_TIMEOUT).await?));
        }
    } else {
        stores.resize_with(clients, || None);
    }
    let url = format!("{}/api/v1/namespaces/default/pods", api.base);
    let start = Instant::now();
    let mut tasks = Vec::new();
    for mut store in stores {
        let (next, errors, first_error) = (next.clone(), errors.clone(), first_error.clone());
        let (http, url, prefix) = (api.http.clone(), url.clone(), prefix.to_string());
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= end || start.elapsed() > cap {
                    break;
                }
                let name = format!("{prefix}-{i}");
                let body = pod_json(&name);
                let t = Instant::now();
                let r: anyhow::Result<()> = match store.as_mut() {
                    None => async {
                        let resp = http
                            .post(&url)
                            .header("content-type", "application/json")
                            .body(body)
                            .send()
                            .await?;
                        let status = resp.status();
                        let text = resp.bytes().await?;
                        anyhow::ensure!(
                            status.as_u16() == 201,
                            "POST {name}: {status}: {}",
                            String::from_utf8_lossy(&text[..text.len().min(300)])
                        );
                        Ok(())
                    }
                    .await,
                    Some(c) => async {
                        let key = format!("/registry/pods/default/{name}");
                        let txn = Txn::new()
                            .when([Compare::mod_revision(key.clone(), CompareOp::Equal, 0)])
                            .and_then([TxnOp::put(key, body, None)]);
                        let resp = c.txn(txn).await?;
                        anyhow::ensure!(resp.succeeded(), "store create of {name}: key exists");
                        Ok(())
                    }
                    .await,
                };
                match r {
                    Ok(()) => lat.push(t.elapsed()),
                    Err(e) => {
                        if errors.fetch_add(1, Ordering::Relaxed) == 0
                            && let Ok(mut f) = first_error.lock()
                        {
                            *f = Some(format!("{e:#}"));
                        }
                    }
                }
            }
            lat
        }));
    }
    let mut lat = Vec::new();
    for t in tasks {
        lat.extend(t.await?);
    }
    let first = first_error.lock().ok().and_then(|f| f.clone());
    let row = Row::new(lat, start.elapsed(), errors.load(Ordering::Relaxed), first);
    if let Some(e) = &row.first_error {
        eprintln!("[bench]     {} errors; the first: {e}", row.errors);
    }
    eprintln!(
        "[bench]     {} creates in {:.1}s: {:.0}/s, p50 {}, p99 {}",
        row.ops(),
        row.elapsed.as_secs_f64(),
        row.throughput(),
        ms(row.pct(0.5)),
        ms(row.pct(0.99))
    );
    Ok(row)
}

/// The number of pods in `default` and the list's resourceVersion (from the watch cache).
async fn pod_count(api: &Api) -> anyhow::Result<(u64, String)> {
    #[derive(Deserialize)]
    struct List {
        metadata: ListMeta,
        items: Vec<serde::de::IgnoredAny>,
    }
    #[derive(Deserialize)]
    struct ListMeta {
        #[serde(rename = "resourceVersion")]
        resource_version: String,
    }
    let resp = api
        .http
        .get(format!("{}/api/v1/namespaces/default/pods?resourceVersion=0", api.base))
        .send()
        .await?;
    let status = resp.status();
    let body = resp.bytes().await?;
    anyhow::ensure!(status.is_success(), "LIST pods: {status}");
    let list: List = serde_json::from_slice(&body).context("decoding the pod list")?;
    Ok((list.items.len() as u64, list.metadata.resource_version))
}

async fn run_workloads(api: &Api, cluster: &StoreCluster, a: &Args) -> anyhow::Result<Report> {
    let cap = Duration::from_secs(a.max_seconds);
    let store_url = cluster.endpoint(0);
    let mut rep = Report {
        rss_rest: rss(api.pid),
        ..Report::default()
    };

    // 1 + 2. Creates from 1 and N clients, through the API server and straight to the store, in
    // alternating batches: A S S A A S S A …
    let batches = a.create_batches.max(1);
    for (clients, total, api_tag, store_tag) in [
        (1, a.seq_creates, "api1", "store1"),
        (a.clients, a.concurrent_creates, "apin", "storen"),
    ] {
        eprintln!("[bench] pod creates from {clients} client(s), via the API server and straight to the store, {batches} batches each");
        let (mut api_rows, mut store_rows) = (Vec::new(), Vec::new());
        let mut api_cpu = Duration::ZERO;
        for b in 0..batches {
            let indexes = b * total / batches..(b + 1) * total / batches;
            let order = if b % 2 == 0 { [Target::Api, Target::Store] } else { [Target::Store, Target::Api] };
            for target in order {
                if target == Target::Api {
                    eprintln!("[bench]   batch {b}, API server");
                    let before = cpu_time(api.pid).unwrap_or_default();
                    api_rows.push(create_pods(api, &store_url, target, api_tag, indexes.clone(), clients, cap).await?);
                    api_cpu += cpu_time(api.pid).unwrap_or_default().saturating_sub(before);
                } else {
                    eprintln!("[bench]   batch {b}, store");
                    store_rows.push(create_pods(api, &store_url, target, store_tag, indexes.clone(), clients, cap).await?);
                }
            }
        }
        let (api_row, store_row) = (Row::merge(api_rows), Row::merge(store_rows));
        let cpu_per_create = api_cpu / api_row.ops().max(1) as u32;
        if clients == 1 {
            (rep.api_create_1, rep.store_create_1, rep.api_cpu_1) = (api_row, store_row, cpu_per_create);
        } else {
            (rep.api_create_n, rep.store_create_n, rep.api_cpu_n) = (api_row, store_row, cpu_per_create);
        }
    }
    // Remove the store-written pods again so the namespace holds exactly what we count.
    {
        let mut c = e2e::connect(std::slice::from_ref(&store_url), REQUEST_TIMEOUT).await?;
        let opts = etcd_client::DeleteOptions::new().with_prefix();
        c.delete("/registry/pods/default/store", Some(opts)).await?;
    }

    // 3. GET of a single pod.
    eprintln!("[bench] GET of one pod, {} times", a.gets);
    {
        let url = format!("{}/api/v1/namespaces/default/pods/api1-0", api.base);
        let mut lat = Vec::new();
        let (mut errors, mut first) = (0, None);
        let start = Instant::now();
        for _ in 0..a.gets {
            if start.elapsed() > cap {
                break;
            }
            let t = Instant::now();
            let r = async {
                let resp = api.http.get(&url).send().await?;
                let status = resp.status();
                resp.bytes().await?;
                anyhow::ensure!(status.is_success(), "GET pod api1-0: {status}");
                Ok(())
            }
            .await;
            match r {
                Ok(()) => lat.push(t.elapsed()),
                Err(e) => {
                    errors += 1;
                    first.get_or_insert(format!("{e:#}"));
                }
            }
        }
        rep.get = Row::new(lat, start.elapsed(), errors, first);
    }

    // 4. Bulk creation up to `list_pods`, then the lists.
    let (existing, _) = pod_count(api).await?;
    let bulk = a.list_pods.saturating_sub(existing);
    eprintln!(
        "[bench] bulk creation of {bulk} pods ({existing} exist) from {} clients",
        a.clients
    );
    rep.bulk_pods = bulk;
    rep.bulk_create = create_pods(
        api,
        &store_url,
        Target::Api,
        "bulk",
        0..bulk,
        a.clients,
        cap.max(Duration::from_secs(120)),
    )
    .await?;
    let (listed, _) = pod_count(api).await?;
    rep.listed_pods = listed;
    if listed != a.list_pods {
        eprintln!("[bench] warning: {listed} pods in the namespace, not {}", a.list_pods);
    }
    const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json";
    for (label, accept, query) in [
        ("JSON, from the store (no resourceVersion)", "application/json", ""),
        ("JSON, from the watch cache (resourceVersion=0)", "application/json", "?resourceVersion=0"),
        ("Table, from the store (no resourceVersion)", TABLE, ""),
        ("Table, from the watch cache (resourceVersion=0)", TABLE, "?resourceVersion=0"),
    ] {
        eprintln!("[bench] LIST {label}, {} times", a.list_reads);
        let url = format!("{}/api/v1/namespaces/default/pods{query}", api.base);
        let mut lat = Vec::new();
        let mut size = 0;
        let (mut errors, mut first) = (0, None::<String>);
        let mut checked = false;
        let start = Instant::now();
        for _ in 0..a.list_reads {
            if start.elapsed() > cap {
                break;
            }
            let t = Instant::now();
            let resp = api.http.get(&url).header("accept", accept).send().await?;
            let status = resp.status();
            let body = resp.bytes().await?;
            let took = t.elapsed();
            if !status.is_success() {
                // A failing LIST is a finding to report, not a reason to stop the run.
                errors += 1;
                first.get_or_insert_with(|| {
                    format!(
                        "LIST {label}: {status} after {}: {}",
                        ms(took),
                        String::from_utf8_lossy(&body[..body.len().min(300)])
                    )
                });
                continue;
            }
            lat.push(took);
            size = body.len();
            if !checked {
                checked = true;
                // Check once, outside the timing, that the whole namespace came back.
                let v: serde_json::Value = serde_json::from_slice(&body).context("decoding a LIST")?;
                let field = if accept == TABLE { "rows" } else { "items" };
                let n = v.get(field).and_then(|x| x.as_array()).map_or(0, |x| x.len()) as u64;
                anyhow::ensure!(n == listed, "LIST {label} returned {n} {field}, expected {listed}");
            }
        }
        let row = Row::new(lat, start.elapsed(), errors, first);
        if let Some(e) = &row.first_error {
            eprintln!("[bench]     {errors} failed; the first: {e}");
        }
        eprintln!("[bench]     p50 {}, p99 {}, {size} bytes", ms(row.pct(0.5)), ms(row.pct(0.99)));
        rep.lists.push((label.to_string(), row, size));
    }
    rep.rss_pods = rss(api.pid);

    // 5. Watch fan-out.
    eprintln!("[bench] watch fan-out: {} watchers, {} changes", a.watchers, a.watch_changes);
    watch_fanout(api, a, &mut rep).await?;
    Ok(rep)
}

/// The parts of a watch event the bench looks at (serde skips the rest of the pod).
#[derive(Deserialize)]
struct WatchEvent {
    #[serde(rename = "type")]
    kind: String,
    object: EventObject,
}
#[derive(Deserialize)]
struct EventObject {
    metadata: EventMeta,
}
#[derive(Deserialize)]
struct EventMeta {
    name: Option<String>,
    #[serde(default)]
    labels: BTreeMap<String, String>,
}

/// Opens `a.watchers` watch streams, PATCHes one pod's label 1 + `a.watch_changes` times (the
/// first is an untimed warm-up that proves every stream is live) and times each watcher's MODIFIED.
async fn watch_fanout(api: &Api, a: &Args, rep: &mut Report) -> anyhow::Result<()> {
    let target = "api1-0";
    let (_, rv) = pod_count(api).await?;
    // Watches live as long as the run: no whole-request timeout, and their own pool.
    let watch_http = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(5))
        .pool_max_idle_per_host(0)
        .build()?;
    let url = format!(
        "{}/api/v1/namespaces/default/pods?watch=true&resourceVersion={rv}",
        api.base
    );
    // (change number, when its chunk arrived); bounded: at most one report per watcher per change.
    let (tx, mut rx) = mpsc::channel::<(u64, Instant)>(a.watchers * (a.watch_changes as usize + 2));
    let opened = Arc::new(AtomicUsize::new(0));
    let open_errors = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let gate = Arc::new(Semaphore::new(WATCH_OPEN_CONCURRENCY));
    let mut tasks = Vec::new();
    for _ in 0..a.watchers {
        let (http, url, tx, opened, open_errors, gate) = (
            watch_http.clone(),
            url.clone(),
            tx.clone(),
            opened.clone(),
            open_errors.clone(),
            gate.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let permit = gate.acquire_owned().await;
            let resp = match http.get(&url).send().await {
                Ok(r) if r.status().is_success() => r,
                Ok(r) => {
                    if let Ok(mut e) = open_errors.lock() {
                        e.push(format!("watch: {}", r.status()));
                    }
                    return;
                }
                Err(err) => {
                    if let Ok(mut e) = open_errors.lock() {
                        e.push(format!("watch: {err:#}"));
                    }
                    return;
                }
            };
            drop(permit);
            opened.fetch_add(1, Ordering::Relaxed);
            let mut body = resp.bytes_stream();
            let mut buf: Vec<u8> = Vec::new();
            while let Some(Ok(chunk)) = body.next().await {
                let arrived = Instant::now();
                buf.extend_from_slice(&chunk);
                while let Some(nl) = buf.iter().position(|b| *b == b'\n') {
                    let line: Vec<u8> = buf.drain(..=nl).collect();
                    let Ok(ev) = serde_json::from_slice::<WatchEvent>(&line) else {
                        continue;
                    };
                    if ev.kind != "MODIFIED" || ev.object.metadata.name.as_deref() != Some(target) {
                        continue;
                    }
                    let change = ev.object.metadata.labels.get(CHANGE_LABEL).and_then(|v| v.parse::<u64>().ok());
                    if let Some(k) = change {
                        let _ = tx.send((k, arrived)).await;
                    }
                }
            }
        }));
    }
    drop(tx);

    // Wait for the response headers of every watch (a server that holds them back until the
    // first event is caught by the warm-up change below).
    let start = Instant::now();
    while opened.load(Ordering::Relaxed) < a.watchers && start.elapsed() < WATCH_EVENT_TIMEOUT {
        let failed = open_errors.lock().map(|e| e.len()).unwrap_or(0);
        if opened.load(Ordering::Relaxed) + failed >= a.watchers {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let errs = open_errors.lock().map(|e| e.clone()).unwrap_or_default();
    eprintln!(
        "[bench]     {} watches open after {:.1}s ({} failed{})",
        opened.load(Ordering::Relaxed),
        start.elapsed().as_secs_f64(),
        errs.len(),
        errs.first().map(|e| format!("; the first: {e}")).unwrap_or_default()
    );
    anyhow::ensure!(errs.is_empty(), "{} of {} watches failed to open; the first: {}", errs.len(), a.watchers, errs[0]);

    let patch_url = format!("{}/api/v1/namespaces/default/pods/{target}", api.base);
    let mut lat = Vec::new();
    let mut patch_lat = Vec::new();
    let mut missed = 0;
    let timed = Instant::now();
    for k in 0..=a.watch_changes {
        let body = serde_json::to_vec(&serde_json::json!({"metadata": {"labels": {CHANGE_LABEL: k.to_string()}}}))?;
        let t0 = Instant::now();
        let resp = api
            .http
            .patch(&patch_url)
            .header("content-type", "application/merge-patch+json")
            .body(body)
            .send()
            .await?;
        let status = resp.status();
        resp.bytes().await?;
        let patched = t0.elapsed();
        anyhow::ensure!(status.is_success(), "PATCH {target}: {status}");
        let mut got = 0;
        let deadline = tokio::time::Instant::now() + WATCH_EVENT_TIMEOUT;
        let mut this = Vec::new();
        while got < a.watchers {
            match tokio::time::timeout_at(deadline, rx.recv()).await {
                Ok(Some((kk, at))) if kk == k => {
                    got += 1;
                    this.push(at.saturating_duration_since(t0));
                }
                Ok(Some(_)) => {}
                Ok(None) | Err(_) => break,
            }
        }
        let miss = (a.watchers - got) as u64;
        this.sort();
        eprintln!(
            "[bench]     change {k}{}: PATCH {}, {got}/{} watchers, slowest {}",
            if k == 0 { " (warm-up)" } else { "" },
            ms(patched),
            a.watchers,
            this.last().map(|d| ms(*d)).unwrap_or_default()
        );
        if k == 0 {
            anyhow::ensure!(
                miss == 0,
                "{miss} of {} watchers never saw the warm-up change within {WATCH_EVENT_TIMEOUT:?}",
                a.watchers
            );
        } else {
            missed += miss;
            lat.extend(this);
            patch_lat.push(patched);
        }
        // Let the streams drain before the next change so changes are timed one at a time.
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    rep.rss_watchers = rss(api.pid);
    rep.watch = Row::new(lat, timed.elapsed(), missed, None);
    rep.watch_patch = Row::new(patch_lat, timed.elapsed(), 0, None);
    rep.watch_missed = missed;
    for t in tasks {
        t.abort();
    }
    Ok(())
}

fn mib(b: Option<u64>) -> String {
    b.map(|b| format!("{:.1} MiB", b as f64 / (1024.0 * 1024.0)))
        .unwrap_or_else(|| "n/a".into())
}

fn verdict(met: bool) -> &'static str {
    if met { "met" } else { "missed" }
}

fn errors(r: &Row) -> String {
    if r.errors > 0 {
        format!(" ({} errors)", r.errors)
    } else {
        String::new()
    }
}

fn print_table(a: &Args, r: &Report) {
    println!();
    println!("Machine: {}.", machine());
    println!(
        "One `kubelab store` member (fsync per write batch) and one `kubelab apiserver` on 127.0.0.1; the bench client (reqwest, HTTP/1.1 JSON, shared pool) runs on the same machine. Cap {} s per workload.",
        a.max_seconds
    );
    println!();
    println!("| workload | result | p50 | p99 | goal | |");
    println!("| --- | ---: | ---: | ---: | --- | --- |");
    let row = |name: String, res: String, x: &Row, goal: &str, v: &str| {
        println!(
            "| {name} | {res} | {} | {} | {goal} | {v} |",
            ms(x.pct(0.5)),
            ms(x.pct(0.99))
        );
    };
    let ratio = |s: &Row, p: &Row| s.throughput() / p.throughput().max(1e-9);
    for (clients, api, store, cpu) in [
        (1, &r.api_create_1, &r.store_create_1, r.api_cpu_1),
        (a.clients, &r.api_create_n, &r.store_create_n, r.api_cpu_n),
    ] {
        let goal = if clients == 1 { "" } else { "≥ 2,000/s" };
        let v = if clients == 1 { "" } else { verdict(api.throughput() >= 2000.0) };
        row(
            format!("pod create, {clients} client(s), API server (POST, {} pods)", api.ops()),
            format!("{:.0}/s{}", api.throughput(), errors(api)),
            api,
            goal,
            v,
        );
        row(
            format!("pod create, {clients} client(s), store directly (Txn put, {} keys)", store.ops()),
            format!("{:.0}/s{}", store.throughput(), errors(store)),
            store,
            "",
            "",
        );
        let o = ratio(store, api);
        println!(
            "| API server overhead at {clients} client(s) (store/API server throughput) | {o:.2}× | | | ≤ 2× | {} |",
            verdict(o <= 2.0)
        );
        println!("| … the API server's CPU per create (user + system) | {} µs | | | | |", cpu.as_micros());
    }
    row(
        format!("bulk create, {} clients ({} pods, to reach {})", a.clients, r.bulk_pods, a.list_pods),
        format!("{:.0}/s{}", r.bulk_create.throughput(), errors(&r.bulk_create)),
        &r.bulk_create,
        "",
        "",
    );
    row(
        "GET one pod, 1 client".into(),
        format!("{:.0}/s{}", r.get.throughput(), errors(&r.get)),
        &r.get,
        "",
        "",
    );
    for (label, l, size) in &r.lists {
        row(
            format!("LIST {} pods, {label}", r.listed_pods),
            format!("{:.1} MB{}", *size as f64 / 1e6, errors(l)),
            l,
            "p50 < 300 ms",
            verdict(l.errors == 0 && l.pct(0.5) < Duration::from_millis(300)),
        );
    }
    let missed = if r.watch_missed > 0 {
        format!(", {} events missed", r.watch_missed)
    } else {
        String::new()
    };
    row(
        format!(
            "watch fan-out: PATCH → MODIFIED at each of {} watchers ({} changes)",
            a.watchers, a.watch_changes
        ),
        format!("{} events{missed}", r.watch.ops()),
        &r.watch,
        "p99 < 100 ms",
        verdict(r.watch_missed == 0 && !r.watch.lat.is_empty() && r.watch.pct(0.99) < Duration::from_millis(100)),
    );
    row(
        "… of which the PATCH itself".into(),
        format!("{} PATCHes", r.watch_patch.ops()),
        &r.watch_patch,
        "",
        "",
    );
    println!("| API server RSS at rest (no pods) | {} | | | | |", mib(r.rss_rest));
    println!(
        "| API server RSS with {} pods (after the LISTs) | {} | | | | |",
        r.listed_pods,
        mib(r.rss_pods)
    );
    println!(
        "| API server RSS with {} pods and {} watchers | {} | | | | |",
        r.listed_pods,
        a.watchers,
        mib(r.rss_watchers)
    );
    println!();
    let all = [&r.api_create_1, &r.store_create_1, &r.api_create_n, &r.store_create_n, &r.bulk_create, &r.get];
    for e in all.iter().chain(r.lists.iter().map(|(_, l, _)| l).collect::<Vec<_>>().iter()).filter_map(|x| x.first_error.clone()) {
        println!("<!-- first error: {e} -->");
    }
}
