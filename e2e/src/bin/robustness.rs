//! robustness: the long run of the store's robustness checks (`make robustness`), with the
//! figures BENCHMARKS.md's RELIABILITY section records.
//!
//! 1. kubelab (its failpoint build on lazyfs, every fault but replacements, behind the proxy mesh) and
//!    real etcd 3.4 (the faults it can take: kill -9, SIGSTOP, replacements) each run the same
//!    workload for `--duration`; kubelab also runs `--replace-duration` without the mesh, where
//!    members are replaced among its other faults. Every history is checked alike
//!    ([`e2e::robustness`]).
//! 2. The checker proven able to fail: kubelab with each injected bug, with the faults that
//!    expose it, until the bug is caught or `--bug-duration` passes; the time into the run of
//!    the first violating operation is how long it took to be caught.
//!
//! Reports go to `--report-dir` (one file per run). Exits non-zero if a clean run found a
//! violation or a bug went uncaught.
//!
//! `cargo run -p e2e --bin robustness -- --help`

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use e2e::Flavor;
use e2e::robustness::failpoint::Fault;
use e2e::robustness::{RunOptions, RunResult, run};

#[derive(Parser, Debug)]
#[command(about = "Check kubelab's store (and etcd 3.4) for linearizability and watch guarantees under faults")]
struct Args {
    /// Seconds of load and faults of each clean run.
    #[arg(long, default_value_t = 600)]
    duration: u64,
    /// Which stores get a clean run: both, kubelab or etcd.
    #[arg(long, default_value = "both")]
    stores: String,
    /// Seconds of kubelab's clean run without the proxy mesh, where members lose their disks
    /// and are replaced; 0 skips it.
    #[arg(long, default_value_t = 200)]
    replace_duration: u64,
    /// Seconds each injected-bug run may take; 0 skips them.
    #[arg(long, default_value_t = 90)]
    bug_duration: u64,
    #[arg(long, default_value_t = 6)]
    clients: usize,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    #[arg(long, default_value = "/tmp/kubelab-robustness")]
    report_dir: PathBuf,
    /// Run kubelab's failpoint build (`--failpoints false`: the normal build, without the
    /// failpoint faults and the injected bugs).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    failpoints: bool,
}

/// The injected bugs and the faults that expose each.
const BUGS: [(&str, &[Fault]); 3] = [
    ("bugStaleRead", &[Fault::PartitionFollower, Fault::PartitionLeader]),
    ("bugEarlyAck", &[Fault::PartitionLeader]),
    ("bugWatchSkip", &[Fault::KillFollower, Fault::PauseFollower]),
];

fn row(name: &str, r: &RunResult, secs: u64) {
    let s = &r.validation.summary;
    let mut kinds: std::collections::BTreeMap<String, usize> = Default::default();
    for f in &r.faults {
        *kinds.entry(f.fault.to_string()).or_default() += 1;
    }
    println!(
        "| {name} | {secs} s | {} ({} reads, {} writes, {} failed writes resolved) | {} events in {} streams, {} revisions | {} | {} | {} | {:.1?} |",
        s.reads + s.writes,
        s.reads,
        s.writes,
        s.failed_writes_persisted + s.failed_writes_dropped,
        s.watch_events,
        s.watch_sessions,
        s.revisions,
        kinds.iter().map(|(k, c)| format!("{k} ×{c}")).collect::<Vec<_>>().join(", "),
        r.compactions,
        r.validation.violations.len(),
        s.linearizability_time
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 4)]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    std::fs::create_dir_all(&args.report_dir)?;
    let mut failed = false;
    println!("| store | load | operations checked | watch | faults injected | compactions | violations | linearizability check |");
    println!("|---|---|---|---|---|---|---|---|");
    let runs = [(Flavor::Kubelab, true, args.duration), (Flavor::Kubelab, false, args.replace_duration), (Flavor::Etcd, false, args.duration)];
    for (flavor, mesh, secs) in runs {
        if (args.stores != "both" && args.stores != flavor.to_string()) || secs == 0 {
            continue;
        }
        let mut o = RunOptions::short(flavor);
        o.mesh = mesh;
        o.lazyfs = flavor == Flavor::Kubelab && mesh;
        o.failpoints = flavor == Flavor::Kubelab && args.failpoints;
        o.duration = Duration::from_secs(secs);
        o.clients = args.clients;
        o.seed = args.seed;
        let name = if flavor == Flavor::Kubelab && !mesh { "kubelab, members replaced (no proxy mesh)".to_string() } else { flavor.to_string() };
        let file = if flavor == Flavor::Kubelab && !mesh { "kubelab-replaced.txt".to_string() } else { format!("{flavor}.txt") };
        o.report = Some(args.report_dir.join(file));
        o.title = format!("{secs}-second robustness run against {name}");
        let r = run(o).await?;
        row(&name, &r, secs);
        if !r.validation.violations.is_empty() || r.validation.summary.partitions_timed_out > 0 {
            failed = true;
            eprintln!("{}", r.report_text);
        }
    }
    if args.bug_duration > 0 && args.failpoints {
        println!();
        println!("| injected bug | faults | caught | first violation | time to catch |");
        println!("|---|---|---|---|---|");
        for (bug, faults) in BUGS {
            let mut o = RunOptions::short(Flavor::Kubelab);
            o.failpoints = true;
            o.env = vec![("KUBELAB_FAILPOINTS".into(), format!("{bug}=return"))];
            o.faults = faults.to_vec();
            o.duration = Duration::from_secs(args.bug_duration);
            o.clients = args.clients;
            o.seed = args.seed;
            o.report = Some(args.report_dir.join(format!("{bug}.txt")));
            o.title = format!("kubelab with {bug}");
            let r = run(o).await?;
            let first = r.validation.violations.first();
            println!(
                "| {bug} | {} | {} | {} | {} |",
                faults.iter().map(|f| f.to_string()).collect::<Vec<_>>().join(", "),
                if first.is_some() { "yes" } else { "NO" },
                first.map(|v| v.kind).unwrap_or("-"),
                r.first_violation_at().map(|d| format!("{:.1} s", d.as_secs_f64())).unwrap_or_else(|| "-".into())
            );
            if first.is_none() {
                failed = true;
            }
        }
    }
    println!("\nreports: {}", args.report_dir.display());
    anyhow::ensure!(!failed, "a clean run found a violation, or a bug went uncaught (see the reports)");
    Ok(())
}
