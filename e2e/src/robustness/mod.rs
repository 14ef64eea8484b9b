//! # robustness — the store's promises, checked under faults
//!
//! kubelab's store promises what etcd does: every operation is linearizable, no acknowledged
//! write is lost, and a watch from a revision delivers every later change once, in order. This
//! module holds it to that the way etcd's own `tests/robustness` suite holds etcd: clients run a
//! mixed workload against a three-member cluster while a nemesis injects faults, every operation
//! and every watch event is recorded, and afterwards the whole history is checked against a
//! model. The same run works against real etcd 3.4, which must pass it too.
//!
//! ## The flow of a run ([`run`])
//! 1. Start three members ([`crate::StoreCluster`]): kubelab behind the proxy mesh (so peer
//!    traffic can be cut) and, with [`RunOptions::failpoints`], the build with failpoints; or
//!    etcd.
//! 2. Start the clients ([`traffic`]): puts, linearizable and serializable gets, deletes,
//!    transactions and leases on grouped keys, each client pinned to one member, each operation
//!    recorded with its invoke and return time on one clock ([`history`]).
//! 3. Start the watchers ([`watch`]): one pinned to each member and one that follows any member,
//!    all from the run's first revision, each resuming from its last revision when its stream
//!    breaks. A compactor compacts every few seconds, never past the watchers' history.
//! 4. Inject faults one at a time until the time is up ([`failpoint`]): kill -9, SIGSTOP,
//!    partitions, one-way message loss, slow or failing fsync, crashes at failpoints, power losses that
//!    drop unsynced writes (lazyfs), a member that lost its disk replaced.
//! 5. Stop the clients, heal, read the final revision, and let the watchers catch up to it.
//! 6. Check ([`validate`]): the watches (ordered, unique, gap-free, agreeing), every
//!    acknowledged write in the history at its revision, reads against the history, revisions
//!    against real time, linearizability of each key group ([`linearizability`], porcupine's
//!    algorithm on the [`model`]), and every member holding the same keys at the end.
//! 7. Write the report ([`report`]): a summary and, for each violation, a timeline of its keys.
//!
//! ## Implementation caveats
//! - Partitions and one-way loss need the proxy mesh, which etcd's peer URLs rule out
//!   ([`crate::cluster`]): against etcd the faults are kill -9 and SIGSTOP.
//! - A member losing its disk is replaced (removed and added back under a new ID: rejoining
//!   under the old identity is refused, as etcd refuses it; `store_faults.rs` checks that).
//!   An added member has one peer URL for every peer, so it cannot sit behind the proxy mesh:
//!   replacements run in a run without the mesh ([`RunOptions::mesh`]), partitions in one with.
//! - kill -9 keeps what was written but not fsynced; a power loss drops it, and needs the
//!   members on lazyfs ([`RunOptions::lazyfs`], FUSE: `/dev/fuse` and root). lazyfs loses
//!   unsynced *data* only: metadata (a create, a rename) is never lost, where a real file
//!   system may lose it too. Crashes at precise points come from the failpoints.
//! - Lease expiry is not exercised here (TTLs outlast the run, as in etcd's suite); revokes are.
//!   `e2e/tests/store_leases.rs` holds expiry to its promises under faults.
//! - A key group whose check runs out of time is reported as undecided, not as passed.
//!
//! ## Public surface
//! [`run`], [`RunOptions`], [`RunResult`]; the layers are public for the test and the long
//! run's binary (`robustness`), which print what they found.

pub mod failpoint;
pub mod history;
pub mod linearizability;
pub mod model;
pub mod report;
pub mod traffic;
pub mod validate;
pub mod violation;
pub mod watch;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering};
use std::time::Duration;

use anyhow::Context;
use etcd_client::{CompactionOptions, GetOptions};

use crate::cluster::Flavor;
use crate::{StoreCluster, StoreOptions};
use failpoint::{Fault, Injected};
use history::{Clock, Operation};
use traffic::{Rng, Worker};
use validate::Validation;
use violation::Violation;
use watch::{WatchSession, WatchTarget};

/// Every key of a run is under this prefix.
pub const PREFIX: &str = "/robustness/";

/// How to run.
#[derive(Clone, Debug)]
pub struct RunOptions {
    pub flavor: Flavor,
    /// Run kubelab behind the proxy mesh (partitions and one-way loss) rather than without it
    /// (members replaced after losing their disks); etcd always runs without.
    pub mesh: bool,
    /// Put kubelab's members on lazyfs, so that power losses can drop unsynced writes.
    pub lazyfs: bool,
    /// Run kubelab's failpoint build (needed for the failpoint faults and the injected bugs).
    pub failpoints: bool,
    /// Extra environment of every member, e.g. `KUBELAB_FAILPOINTS=bugStaleRead=return`.
    pub env: Vec<(String, String)>,
    /// How long the clients run while faults are injected.
    pub duration: Duration,
    pub clients: usize,
    /// The faults to choose from (those that do not apply to the cluster are left out).
    pub faults: Vec<Fault>,
    /// Take the faults in turn rather than at random, each at least once even past the
    /// duration: a short run then injects every kind.
    pub in_turn: bool,
    /// How long a pause, cut or slow disk lasts; a killed member stays down half of it.
    pub hold: Duration,
    pub seed: u64,
    pub compact_every: Duration,
    /// Time allowed to the linearizability check of one key group.
    pub check_timeout: Duration,
    /// Where the report goes; a temporary directory's file when None.
    pub report: Option<PathBuf>,
    pub title: String,
}

impl RunOptions {
    /// A short run: what `make test` runs.
    pub fn short(flavor: Flavor) -> Self {
        Self {
            flavor,
            mesh: flavor == Flavor::Kubelab,
            lazyfs: false,
            failpoints: false,
            env: Vec::new(),
            duration: Duration::from_secs(25),
            clients: 6,
            faults: Fault::ALL.to_vec(),
            in_turn: false,
            hold: Duration::from_millis(2500),
            seed: 1,
            compact_every: Duration::from_secs(5),
            check_timeout: Duration::from_secs(60),
            report: None,
            title: format!("robustness run against {flavor}"),
        }
    }
}

/// What a run found.
pub struct RunResult {
    pub validation: Validation,
    pub faults: Vec<Injected>,
    /// Faults that could not be injected (the cluster was not in a state to take them).
    pub fault_errors: Vec<String>,
    pub compactions: usize,
    pub final_revision: i64,
    pub report: PathBuf,
    pub report_text: String,
}

impl RunResult {
    /// The earliest time into the run at which a violation showed (an operation's invocation,
    /// a watch response's arrival): how long the fault or bug took to be caught.
    pub fn first_violation_at(&self) -> Option<Duration> {
        self.validation.violations.iter().filter_map(|v| v.at).min().map(Duration::from_nanos)
    }
}

/// One run: start, load, faults, check, report. An error after the cluster started carries
/// the tails of the members' logs.
pub async fn run(opts: RunOptions) -> anyhow::Result<RunResult> {
    let mut cluster = None;
    match run_on(opts, &mut cluster).await {
        Ok(r) => Ok(r),
        Err(e) => match cluster {
            Some(c) => Err(e.context(format!("the members' logs:\n{}", c.log_tails(60)))),
            None => Err(e),
        },
    }
}

async fn run_on(opts: RunOptions, slot: &mut Option<StoreCluster>) -> anyhow::Result<RunResult> {
    // 1.
    let mut store_opts = StoreOptions::for_flavor(opts.flavor);
    store_opts.failpoints = opts.failpoints;
    store_opts.proxy = opts.mesh && opts.flavor == Flavor::Kubelab;
    store_opts.lazyfs = opts.lazyfs;
    store_opts.env.extend(opts.env.iter().cloned());
    // A small snapshot count: a member that was down or wiped catches up by snapshot, a path
    // worth exercising.
    store_opts.snapshot_count = Some(2000);
    let cluster = slot.insert(StoreCluster::start(3, store_opts).await.context("starting the cluster")?);
    let clock = Clock::start();
    let mut any = crate::connect(&cluster.client_endpoints(), crate::RPC_TIMEOUT).await?;
    let first_revision = any.get(PREFIX, None).await?.header().map(|h| h.revision()).unwrap_or(1) + 1;

    // 2.
    let stop = Arc::new(AtomicBool::new(false));
    let mut workers = Vec::new();
    for client in 0..opts.clients {
        let member = client % cluster.len();
        let w = Worker {
            client,
            member,
            endpoint: cluster.endpoint(member),
            prefix: PREFIX.to_string(),
            seed: opts.seed.wrapping_mul(1000).wrapping_add(client as u64),
            request_timeout: crate::scaled(Duration::from_secs(2)),
        };
        workers.push(tokio::spawn(traffic::run_worker(w, clock, stop.clone())));
    }

    // 3.
    let final_revision = Arc::new(AtomicI64::new(0));
    let history_progress = Arc::new(AtomicI64::new(first_revision - 1));
    let mut watchers = Vec::new();
    let all: Vec<(usize, String)> = (0..cluster.len()).map(|i| (i, cluster.endpoint(i))).collect();
    let mut targets: Vec<(WatchTarget, Arc<AtomicI64>)> = all
        .iter()
        .map(|(i, e)| {
            (WatchTarget { name: format!("watcher-{i}"), endpoints: vec![(*i, e.clone())], start_revision: first_revision }, Arc::new(AtomicI64::new(0)))
        })
        .collect();
    targets.push((WatchTarget { name: "history".into(), endpoints: all.clone(), start_revision: first_revision }, history_progress.clone()));
    for (t, progress) in targets {
        watchers.push(tokio::spawn(watch::watch_loop(
            t,
            PREFIX.to_string(),
            clock,
            stop.clone(),
            final_revision.clone(),
            progress,
            crate::scaled(Duration::from_secs(30)),
        )));
    }
    let compactions = Arc::new(AtomicUsize::new(0));
    let compactor = tokio::spawn(compact_loop(cluster.client_endpoints(), opts.compact_every, history_progress.clone(), compactions.clone(), stop.clone()));

    // 4.
    let mut rng = Rng::new(opts.seed);
    let faults: Vec<Fault> = opts.faults.iter().copied().filter(|f| f.applies_to(cluster)).collect();
    let mut injected = Vec::new();
    let mut fault_errors = Vec::new();
    let end = std::time::Instant::now() + opts.duration;
    let mut turn = 0;
    // In turn, every fault is injected at least once, however short the duration.
    while !faults.is_empty() && (std::time::Instant::now() < end || (opts.in_turn && turn < faults.len())) {
        tokio::time::sleep(Duration::from_millis(500 + rng.below(1000))).await;
        let fault = if opts.in_turn { faults[turn % faults.len()] } else { faults[rng.below(faults.len() as u64) as usize] };
        turn += 1;
        match failpoint::inject(cluster, fault, &mut rng, &clock, opts.hold).await {
            Ok(i) => injected.push(i),
            Err(e) => {
                fault_errors.push(format!("{fault}: {e:#}"));
                let _ = cluster.wait_healthy().await;
            }
        }
    }
    if faults.is_empty() {
        tokio::time::sleep(opts.duration).await;
    }

    // 5.
    stop.store(true, Ordering::SeqCst);
    let mut ops: Vec<Operation> = Vec::new();
    for w in workers {
        ops.extend(w.await.context("a client task")?);
    }
    ops.sort_by_key(|o| o.invoke);
    for (i, o) in ops.iter_mut().enumerate() {
        o.id = i;
    }
    let _ = compactor.await;
    cluster.wait_healthy().await.context("the cluster after the faults")?;
    // The final revision, from whichever member answers a linearizable read.
    let fin = crate::poll_until("the final revision", crate::scaled(Duration::from_secs(30)), Duration::from_millis(200), || async {
        let mut last = None;
        for i in 0..cluster.len() {
            let got = async {
                let mut c = cluster.client(i).await?;
                let r = tokio::time::timeout(Duration::from_secs(3), c.get(PREFIX, None)).await??;
                anyhow::Ok(r.header().map(|h| h.revision()))
            };
            match got.await {
                Ok(Some(rev)) => return Ok(Some(rev)),
                Ok(None) => last = Some(anyhow::anyhow!("member-{i}: a response without a header")),
                Err(e) => last = Some(e.context(format!("member-{i}"))),
            }
        }
        Err(last.unwrap_or_else(|| anyhow::anyhow!("no member")))
    })
    .await?;
    final_revision.store(fin, Ordering::SeqCst);
    let mut sessions: Vec<WatchSession> = Vec::new();
    for w in watchers {
        sessions.extend(w.await.context("a watch task")?);
    }

    // 6.
    let mut validation = validate::validate(PREFIX, ops, &sessions, first_revision, opts.check_timeout);
    let history_last = sessions.iter().filter(|s| s.watcher == "history").filter_map(|s| s.last_revision()).max();
    if fin >= first_revision && history_last != Some(fin) {
        validation.violations.push(Violation::watch(
            "watch history incomplete",
            format!("the store is at revision {fin}, but the history watch ended at {history_last:?}"),
            Vec::new(),
        ));
    }
    check_members_agree(cluster, fin, &validation.union, &mut validation.violations).await;

    // 7.
    let text = report::render(&opts.title, &validation.summary, &injected, &validation.violations, &validation.ops, &validation.union);
    let text = if fault_errors.is_empty() { text } else { format!("{text}\nfaults that could not be injected:\n  {}\n", fault_errors.join("\n  ")) };
    let path = match &opts.report {
        Some(p) => p.clone(),
        None => std::env::temp_dir().join(format!("kubelab-robustness-{}-{}.txt", opts.flavor, std::process::id())),
    };
    std::fs::write(&path, &text).with_context(|| format!("writing {}", path.display()))?;
    Ok(RunResult {
        validation,
        faults: injected,
        fault_errors,
        compactions: compactions.load(Ordering::SeqCst),
        final_revision: fin,
        report: path,
        report_text: text,
    })
}

/// Compacts every `every` to a revision the history watch has passed, keeping the last 50.
async fn compact_loop(endpoints: Vec<String>, every: Duration, progress: Arc<AtomicI64>, count: Arc<AtomicUsize>, stop: Arc<AtomicBool>) {
    let mut last = 0;
    while !stop.load(Ordering::SeqCst) {
        tokio::time::sleep(every).await;
        let target = progress.load(Ordering::SeqCst) - 50;
        if target <= last {
            continue;
        }
        let Ok(mut c) = crate::connect(&endpoints, Duration::from_secs(2)).await else { continue };
        if let Ok(Ok(_)) = tokio::time::timeout(Duration::from_secs(3), c.compact(target, Some(CompactionOptions::new()))).await {
            last = target;
            count.fetch_add(1, Ordering::SeqCst);
        }
    }
}

/// Every member serves the same keys at the end, equal to the history's state at the final
/// revision (each asked alone, serializably, once all have applied it).
async fn check_members_agree(c: &StoreCluster, fin: i64, union: &watch::Union, violations: &mut Vec<Violation>) {
    let mut want: std::collections::BTreeMap<String, (String, i64)> = std::collections::BTreeMap::new();
    for (rev, evs) in union {
        for e in evs {
            if e.delete {
                want.remove(&e.key);
            } else {
                want.insert(e.key.clone(), (e.value.clone(), *rev));
            }
        }
    }
    for i in 0..c.len() {
        let got = crate::poll_until(&format!("member-{i} at revision {fin}"), crate::scaled(Duration::from_secs(20)), Duration::from_millis(100), || async {
            let mut cl = c.client(i).await?;
            let r = cl.get(PREFIX, Some(GetOptions::new().with_prefix().with_serializable())).await?;
            let rev = r.header().map(|h| h.revision()).unwrap_or(0);
            if rev < fin {
                anyhow::bail!("member-{i} is at revision {rev}");
            }
            Ok(Some(
                r.kvs()
                    .iter()
                    .map(|kv| (String::from_utf8_lossy(kv.key()).into_owned(), (String::from_utf8_lossy(kv.value()).into_owned(), kv.mod_revision())))
                    .collect::<std::collections::BTreeMap<_, _>>(),
            ))
        })
        .await;
        match got {
            Ok(got) if got == want => {}
            Ok(got) => {
                let differ: Vec<String> = want.keys().chain(got.keys()).filter(|k| want.get(*k) != got.get(*k)).cloned().collect::<std::collections::BTreeSet<_>>().into_iter().collect();
                violations.push(Violation::watch(
                    "member diverged",
                    format!("member-{i} at revision {fin} differs from the history on {}", differ.join(", ")),
                    differ,
                ));
            }
            Err(e) => violations.push(Violation::watch("member diverged", format!("member-{i}: {e:#}"), Vec::new())),
        }
    }
}
