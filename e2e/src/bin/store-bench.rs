//! store-bench: the same etcd v3 client workload against kubelab's store and real etcd 3.4.
//!
//! Both run as three members on loopback with the same durability: each fsyncs its log
//! per write batch (etcd is *not* given `--unsafe-no-fsync`). Both clusters are up for the
//! whole run, but only one is driven at a time, so the two never compete for the CPU. The
//! workloads run in `--rounds` rounds that alternate between the stores (kubelab, etcd, etcd,
//! kubelab, …), each round with its share of the operations: a machine that is faster or
//! slower for a while weighs on both sides of the ratio alike. A row adds up its rounds. The
//! absolute numbers depend on the machine; the kubelab/etcd ratio is the figure that counts.
//!
//! Workloads, each bounded by a count and by `--max-seconds` per round:
//! 1. sequential puts from one client;
//! 2. puts from `--clients` concurrent clients, each with one connection of its own to one
//!    member, the members taken in turn (as etcd's `benchmark` tool dials its connections);
//!    `--balanced-clients` gives each client a connection to every member instead;
//! 3. linearizable range reads of a `--range-keys`-key prefix;
//! 4. watch latency: a put on one connection until a watcher on another receives it.
//!
//! Besides throughput and latency it prints each store's CPU time per operation (the three
//! members' user + system time, from /proc): the work each store does, whatever the share of
//! the cores the bench client left it. The bench client's own CPU per operation is printed
//! beside it: on a machine whose cores all three members and the client share, what the client
//! spends is taken from both stores.
//!
//! `cargo run --release -p e2e --bin store-bench -- --help`

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Parser;
use e2e::{Flavor, StoreCluster, StoreOptions};
use etcd_client::{Client, GetOptions, WatchOptions};

#[derive(Parser, Debug, Clone)]
#[command(about = "Benchmark kubelab store against real etcd 3.4 with one client workload")]
struct Args {
    /// Which stores to run: both, kubelab or etcd.
    #[arg(long, env = "BENCH_ONLY", default_value = "both")]
    only: String,
    /// Puts in the sequential (one client) workload. Its p99 is the 80th slowest of 8,000: with
    /// 2,000 (the 20th) it moved by 0.5 ms from run to run, more than the two stores differ.
    #[arg(long, env = "BENCH_SEQ_PUTS", default_value_t = 8000)]
    seq_puts: u64,
    /// Concurrent clients in the concurrent-put workload.
    #[arg(long, env = "BENCH_CLIENTS", default_value_t = 64)]
    clients: usize,
    /// Total puts in the concurrent workload.
    #[arg(long, env = "BENCH_CONCURRENT_PUTS", default_value_t = 20000)]
    concurrent_puts: u64,
    /// Keys under the prefix the range workload reads.
    #[arg(long, env = "BENCH_RANGE_KEYS", default_value_t = 1000)]
    range_keys: u64,
    /// Range reads to perform.
    #[arg(long, env = "BENCH_RANGE_READS", default_value_t = 1000)]
    range_reads: u64,
    /// Concurrent clients doing range reads.
    #[arg(long, env = "BENCH_RANGE_CLIENTS", default_value_t = 4)]
    range_clients: usize,
    /// Watch events to time (4,000 for a p99 steadier than the 10th slowest of 1,000).
    #[arg(long, env = "BENCH_WATCH_EVENTS", default_value_t = 4000)]
    watch_events: u64,
    /// Value size in bytes.
    #[arg(long, env = "BENCH_VALUE_SIZE", default_value_t = 256)]
    value_size: usize,
    /// Rounds the workloads are split into, alternating between the stores.
    #[arg(long, env = "BENCH_ROUNDS", default_value_t = 4)]
    rounds: u64,
    /// Time cap per workload per store and round, in seconds.
    #[arg(long, env = "BENCH_MAX_SECONDS", default_value_t = 15)]
    max_seconds: u64,
    /// Give each concurrent client a balanced connection to every member (etcd-client's
    /// choice given all endpoints) instead of one connection to one member.
    #[arg(long, env = "BENCH_BALANCED_CLIENTS")]
    balanced_clients: bool,
}

/// One measured workload on one store.
#[derive(Clone, Debug)]
struct Row {
    ops: u64,
    elapsed: Duration,
    /// Sorted latencies.
    lat: Vec<Duration>,
    errors: u64,
    /// CPU time the three members and the bench client used during the workload.
    cpu: CpuUse,
}

impl Row {
    /// The rounds of one workload as one row: their operations over their summed time.
    fn merge(rows: &[Row]) -> Self {
        let mut lat = Vec::new();
        let (mut elapsed, mut errors) = (Duration::ZERO, 0);
        let mut cpu = CpuUse::default();
        for r in rows {
            lat.extend(&r.lat);
            elapsed += r.elapsed;
            errors += r.errors;
            cpu.members += r.cpu.members;
            cpu.client += r.cpu.client;
        }
        Self::new(lat, elapsed, errors, cpu)
    }
    fn new(mut lat: Vec<Duration>, elapsed: Duration, errors: u64, cpu: CpuUse) -> Self {
        lat.sort();
        Self {
            ops: lat.len() as u64,
            elapsed,
            lat,
            errors,
            cpu,
        }
    }
    /// The members' CPU time per operation.
    fn cpu_per_op(&self) -> Duration {
        self.cpu.members / self.ops.max(1) as u32
    }
    /// The bench client's CPU time per operation.
    fn client_cpu_per_op(&self) -> Duration {
        self.cpu.client / self.ops.max(1) as u32
    }
    fn throughput(&self) -> f64 {
        self.ops as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
    fn pct(&self, p: f64) -> Duration {
        if self.lat.is_empty() {
            return Duration::ZERO;
        }
        let idx = ((self.lat.len() as f64 * p).ceil() as usize).clamp(1, self.lat.len()) - 1;
        self.lat[idx]
    }
}

const WORKLOADS: [&str; 4] = [
    "1 client, sequential puts",
    "concurrent puts",
    "range reads",
    "watch event latency",
];

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let flavors: Vec<Flavor> = match args.only.as_str() {
        "both" => vec![Flavor::Kubelab, Flavor::Etcd],
        "kubelab" => vec![Flavor::Kubelab],
        "etcd" => vec![Flavor::Etcd],
        other => bail!("--only must be both, kubelab or etcd, not {other:?}"),
    };
    let started = Instant::now();
    let mut clusters = Vec::new();
    for flavor in flavors {
        eprintln!("[bench] starting a three-member {flavor} cluster");
        // No proxy: peers talk directly, as in production, so neither store pays a hop.
        let opts = StoreOptions {
            proxy: false,
            ..StoreOptions::for_flavor(flavor)
        };
        let cluster = StoreCluster::start(3, opts)
            .await
            .with_context(|| format!("starting {flavor}"))?;
        clusters.push((flavor, cluster));
    }
    let rounds = args.rounds.max(1);
    // rows[cluster][workload][round]
    let mut rows: Vec<Vec<Vec<Row>>> = vec![vec![Vec::new(); WORKLOADS.len()]; clusters.len()];
    for round in 0..rounds {
        let mut order: Vec<usize> = (0..clusters.len()).collect();
        if round % 2 == 1 {
            order.reverse();
        }
        for i in order {
            let (flavor, cluster) = &mut clusters[i];
            eprintln!("[bench] round {}/{rounds}: {flavor}", round + 1);
            let result = run_workloads(cluster, &args, round, rounds)
                .await
                .with_context(|| format!("benchmarking {flavor}"));
            if let Err(e) = cluster.check_alive() {
                eprintln!("{}", cluster.log_tails(30));
                bail!("{flavor} member died during the benchmark: {e:#}");
            }
            for (w, row) in result?.into_iter().enumerate() {
                eprintln!(
                    "[bench]     {}: {:.0}/s, p50 {}, p99 {}, max {}",
                    WORKLOADS[w],
                    row.throughput(),
                    ms(row.pct(0.5)),
                    ms(row.pct(0.99)),
                    ms(row.pct(1.0))
                );
                rows[i][w].push(row);
            }
        }
    }
    for (_, cluster) in &mut clusters {
        cluster.stop_all();
    }
    let results: Vec<(Flavor, Vec<Row>, Vec<Vec<Row>>)> = clusters
        .iter()
        .zip(rows)
        .map(|((flavor, _), per_workload)| {
            let merged = per_workload.iter().map(|rounds| Row::merge(rounds)).collect();
            (*flavor, merged, per_workload)
        })
        .collect();
    print_table(&args, &results);
    eprintln!("[bench] total {:.1}s", started.elapsed().as_secs_f64());
    Ok(())
}

/// CPU time used so far (user + system): by the cluster's three members, and by this process.
#[derive(Clone, Copy, Debug, Default)]
struct CpuUse {
    members: Duration,
    client: Duration,
}

impl CpuUse {
    fn now(c: &StoreCluster) -> Self {
        let members = (0..c.len())
            .filter_map(|i| c.member(i).pid())
            .filter_map(e2e::bench::cpu_time)
            .sum();
        let client = e2e::bench::cpu_time(std::process::id()).unwrap_or_default();
        Self { members, client }
    }
    /// What was used since `earlier`.
    fn since(c: &StoreCluster, earlier: Self) -> Self {
        let now = Self::now(c);
        Self {
            members: now.members.saturating_sub(earlier.members),
            client: now.client.saturating_sub(earlier.client),
        }
    }
}

async fn connect_all(c: &StoreCluster) -> anyhow::Result<Client> {
    e2e::connect(&c.client_endpoints(), Duration::from_secs(10)).await
}

/// Concurrent client number `i`'s client: one connection to one member, the members taken in
/// turn, as etcd's `benchmark` tool dials; or with `balanced`, a connection to every member.
async fn connect_client(c: &StoreCluster, i: usize, balanced: bool) -> anyhow::Result<Client> {
    if balanced {
        return connect_all(c).await;
    }
    let endpoints = c.client_endpoints();
    let one = endpoints[i % endpoints.len()].clone();
    e2e::connect(&[one], Duration::from_secs(10)).await
}

/// Runs round `round` of `rounds` of every workload on `c`: its share of each count, on keys of
/// its own.
async fn run_workloads(c: &StoreCluster, a: &Args, round: u64, rounds: u64) -> anyhow::Result<Vec<Row>> {
    let cap = Duration::from_secs(a.max_seconds);
    let value = "v".repeat(a.value_size);
    let mut rows = Vec::new();
    let share = |n: u64| (n / rounds).max(1);

    // 1. One client, sequential puts.
    eprintln!("[bench]   {}", WORKLOADS[0]);
    {
        let mut client = connect_all(c).await?;
        let mut lat = Vec::new();
        let start = Instant::now();
        let cpu0 = CpuUse::now(c);
        for i in 0..share(a.seq_puts) {
            if start.elapsed() > cap {
                break;
            }
            let t = Instant::now();
            client
                .put(format!("/bench/seq/{round}/{i:08}"), value.clone(), None)
                .await?;
            lat.push(t.elapsed());
        }
        rows.push(Row::new(lat, start.elapsed(), 0, CpuUse::since(c, cpu0)));
    }

    // 2. N concurrent clients, one connection each (to one member, or balanced over all).
    eprintln!("[bench]   {} ({} clients)", WORKLOADS[1], a.clients);
    {
        let mut clients = Vec::new();
        for i in 0..a.clients {
            clients.push(connect_client(c, i, a.balanced_clients).await?);
        }
        let next = Arc::new(AtomicU64::new(0));
        let errors = Arc::new(AtomicU64::new(0));
        let start = Instant::now();
        let cpu0 = CpuUse::now(c);
        let mut tasks = Vec::new();
        for mut client in clients {
            let (next, errors, value, total) = (
                next.clone(),
                errors.clone(),
                value.clone(),
                share(a.concurrent_puts),
            );
            tasks.push(tokio::spawn(async move {
                let mut lat = Vec::new();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= total || start.elapsed() > cap {
                        break;
                    }
                    let t = Instant::now();
                    match client
                        .put(format!("/bench/conc/{round}/{i:08}"), value.clone(), None)
                        .await
                    {
                        Ok(_) => lat.push(t.elapsed()),
                        Err(_) => {
                            errors.fetch_add(1, Ordering::Relaxed);
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
        rows.push(Row::new(
            lat,
            start.elapsed(),
            errors.load(Ordering::Relaxed),
            CpuUse::since(c, cpu0),
        ));
    }

    // 3. Range reads of a prefix holding `range_keys` keys (loaded first, not timed).
    eprintln!(
        "[bench]   {} ({} keys, {} clients)",
        WORKLOADS[2], a.range_keys, a.range_clients
    );
    {
        let loader = connect_all(c).await?;
        let mut loads = Vec::new();
        for part in 0..16u64 {
            let (mut client, value, n) = (loader.clone(), value.clone(), a.range_keys);
            loads.push(tokio::spawn(async move {
                let mut i = part;
                while i < n {
                    client
                        .put(format!("/bench/range/{i:08}"), value.clone(), None)
                        .await?;
                    i += 16;
                }
                anyhow::Ok(())
            }));
        }
        for l in loads {
            l.await??;
        }
        let next = Arc::new(AtomicU64::new(0));
        let start = Instant::now();
        let cpu0 = CpuUse::now(c);
        let mut tasks = Vec::new();
        for _ in 0..a.range_clients {
            let mut client = connect_all(c).await?;
            let (next, total, keys) = (next.clone(), share(a.range_reads), a.range_keys);
            tasks.push(tokio::spawn(async move {
                let mut lat = Vec::new();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= total || start.elapsed() > cap {
                        break;
                    }
                    let t = Instant::now();
                    let r = client
                        .get("/bench/range/", Some(GetOptions::new().with_prefix()))
                        .await?;
                    lat.push(t.elapsed());
                    anyhow::ensure!(
                        r.kvs().len() as u64 == keys,
                        "range returned {} keys, expected {keys}",
                        r.kvs().len()
                    );
                }
                anyhow::Ok(lat)
            }));
        }
        let mut lat = Vec::new();
        for t in tasks {
            lat.extend(t.await??);
        }
        rows.push(Row::new(lat, start.elapsed(), 0, CpuUse::since(c, cpu0)));
    }

    // 4. Watch latency: put on one connection, until a watcher on another receives it.
    eprintln!("[bench]   {}", WORKLOADS[3]);
    {
        let mut watcher = connect_all(c).await?;
        let mut writer = connect_all(c).await?;
        let mut stream = watcher
            .watch("/bench/watch/", Some(WatchOptions::new().with_prefix()))
            .await?;
        // The first message confirms the watch is registered.
        let created = tokio::time::timeout(Duration::from_secs(10), stream.message())
            .await
            .context("watch not created within 10 s")??;
        anyhow::ensure!(
            created.is_some_and(|r| r.created()),
            "first watch response is not `created`"
        );
        let mut lat = Vec::new();
        let start = Instant::now();
        let cpu0 = CpuUse::now(c);
        for i in 0..share(a.watch_events) {
            if start.elapsed() > cap {
                break;
            }
            let key = format!("/bench/watch/{round}/{i:08}");
            let t = Instant::now();
            writer.put(key.clone(), value.clone(), None).await?;
            'wait: loop {
                let msg = tokio::time::timeout(Duration::from_secs(10), stream.message())
                    .await
                    .with_context(|| format!("no watch event for {key} within 10 s"))??
                    .context("watch stream ended")?;
                for ev in msg.events() {
                    if ev.kv().is_some_and(|kv| kv.key() == key.as_bytes()) {
                        break 'wait;
                    }
                }
            }
            lat.push(t.elapsed());
        }
        rows.push(Row::new(lat, start.elapsed(), 0, CpuUse::since(c, cpu0)));
    }
    Ok(rows)
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

fn print_table(a: &Args, results: &[(Flavor, Vec<Row>, Vec<Vec<Row>>)]) {
    let names: Vec<String> = vec![
        format!("{} ({} puts max)", WORKLOADS[0], a.seq_puts),
        format!(
            "{} clients, concurrent puts ({} max{})",
            a.clients,
            a.concurrent_puts,
            if a.balanced_clients { ", each balanced over all members" } else { "" }
        ),
        format!(
            "range reads, {}-key prefix, {} clients ({} reads max)",
            a.range_keys, a.range_clients, a.range_reads
        ),
        format!(
            "{} (put → watcher on another connection, {} events max)",
            WORKLOADS[3], a.watch_events
        ),
    ];
    let cpus = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(0);
    println!();
    println!(
        "Three members each on 127.0.0.1, {cpus} CPUs, value size {} B, both fsync per write batch, same etcd-client code; {} rounds alternating between the stores, cap {} s per workload and round.",
        a.value_size, a.rounds.max(1), a.max_seconds
    );
    println!();
    let header: Vec<String> = results
        .iter()
        .map(|(f, _, _)| format!("{f} ops/s | {f} p50 | {f} p99"))
        .collect();
    let both = results.len() == 2;
    println!(
        "| workload | {}{} |",
        header.join(" | "),
        if both {
            " | kubelab/etcd throughput"
        } else {
            ""
        }
    );
    let cols = results.len() * 3 + usize::from(both);
    println!("| --- |{}", " ---: |".repeat(cols));
    for (w, name) in names.iter().enumerate() {
        let mut cells = Vec::new();
        for (_, rows, _) in results {
            let r = &rows[w];
            let err = if r.errors > 0 {
                format!(" ({} errors)", r.errors)
            } else {
                String::new()
            };
            cells.push(format!(
                "{:.0}{err} | {} | {}",
                r.throughput(),
                ms(r.pct(0.50)),
                ms(r.pct(0.99))
            ));
        }
        if both {
            let k = results[0].1[w].throughput();
            let e = results[1].1[w].throughput();
            cells.push(format!("{:.2}", k / e.max(1e-9)));
        }
        println!("| {name} | {} |", cells.join(" | "));
    }
    if both {
        // How steady the ratio is: each round on its own.
        println!();
        println!("| workload | kubelab/etcd throughput, round by round |");
        println!("| --- | --- |");
        for (w, name) in names.iter().enumerate() {
            let ratios: Vec<String> = results[0].2[w]
                .iter()
                .zip(&results[1].2[w])
                .map(|(k, e)| format!("{:.2}", k.throughput() / e.throughput().max(1e-9)))
                .collect();
            println!("| {name} | {} |", ratios.join(", "));
        }
    }
    // CPU per operation, all three members summed: what each store spends, apart from how the
    // machine's cores were shared with the bench client and the other members.
    println!();
    let header: Vec<String> = results.iter().map(|(f, _, _)| format!("{f} CPU per op | bench client's")).collect();
    println!(
        "| workload | {}{} |",
        header.join(" | "),
        if both { " | kubelab/etcd CPU per op" } else { "" }
    );
    println!("| --- |{}", " ---: |".repeat(results.len() * 2 + usize::from(both)));
    let us = |d: Duration| format!("{:.0} µs", d.as_secs_f64() * 1e6);
    for (w, name) in names.iter().enumerate() {
        let mut cells: Vec<String> = results
            .iter()
            .map(|(_, rows, _)| format!("{} | {}", us(rows[w].cpu_per_op()), us(rows[w].client_cpu_per_op())))
            .collect();
        if both {
            let k = results[0].1[w].cpu_per_op().as_secs_f64();
            let e = results[1].1[w].cpu_per_op().as_secs_f64();
            cells.push(format!("{:.2}", k / e.max(1e-12)));
        }
        println!("| {name} | {} |", cells.join(" | "));
    }
    println!();
    for (f, rows, _) in results {
        let ops: Vec<String> = rows
            .iter()
            .map(|r| format!("{} ops in {:.1}s", r.ops, r.elapsed.as_secs_f64()))
            .collect();
        println!("<!-- {f}: {} -->", ops.join("; "));
    }
}
