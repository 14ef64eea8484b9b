//! The store's promises under faults, the short version `make test` runs (`make robustness`
//! runs the long one): linearizability, no acknowledged write lost, watches ordered, unique and
//! gap-free — checked on the whole history of a run ([`e2e::robustness`]).
//!
//! 1. kubelab's failpoint build on lazyfs, every kind of fault in turn: no violation. The
//!    partitions and one-way losses run behind the proxy mesh; a member replaced after losing
//!    its disk, which cannot sit behind it, in a run of its own.
//! 2. Real etcd 3.4, the faults it can take: no violation (the checks are etcd's promises).
//! 3. The checker can fail: kubelab with each injected bug is caught.

use std::time::Duration;

use e2e::Flavor;
use e2e::robustness::failpoint::Fault;
use e2e::robustness::{RunOptions, RunResult, run};

fn assert_clean(r: &RunResult, min_faults: usize) {
    let s = &r.validation.summary;
    eprintln!("{}", r.report_text);
    assert!(r.validation.violations.is_empty(), "violations found; report in {}", r.report.display());
    assert_eq!(s.partitions_timed_out, 0, "a key group's check ran out of time: undecided");
    assert!(s.reads + s.writes > 1000, "too little load to check anything: {} operations", s.reads + s.writes);
    assert!(s.watch_events > 1000, "too few watch events: {}", s.watch_events);
    assert!(r.faults.len() >= min_faults, "only {} faults injected ({:?})", r.faults.len(), r.fault_errors);
    assert!(r.compactions > 0, "the compactor never compacted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kubelab_keeps_its_promises_under_every_fault() {
    let mut o = RunOptions::short(Flavor::Kubelab);
    o.failpoints = true;
    o.lazyfs = true;
    o.in_turn = true;
    o.duration = Duration::from_secs(30);
    let r = run(o).await.expect("run");
    let all_but_replacements = Fault::ALL.len() - 2;
    assert_clean(&r, all_but_replacements);
    let kinds: std::collections::BTreeSet<Fault> = r.faults.iter().map(|f| f.fault).collect();
    assert_eq!(kinds.len(), all_but_replacements, "every kind of fault but the replacements: {kinds:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kubelab_keeps_its_promises_while_members_are_replaced() {
    let mut o = RunOptions::short(Flavor::Kubelab);
    o.mesh = false;
    o.faults = vec![Fault::ReplaceFollower, Fault::ReplaceLeader, Fault::KillLeader];
    o.in_turn = true;
    o.duration = Duration::from_secs(15);
    o.title = "kubelab, members replaced after losing their disks".into();
    let r = run(o).await.expect("run");
    assert_clean(&r, 3);
    let kinds: std::collections::BTreeSet<Fault> = r.faults.iter().map(|f| f.fault).collect();
    assert!(kinds.contains(&Fault::ReplaceFollower) && kinds.contains(&Fault::ReplaceLeader), "both replacements: {kinds:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn etcd_keeps_the_same_promises() {
    let mut o = RunOptions::short(Flavor::Etcd);
    o.in_turn = true;
    o.duration = Duration::from_secs(15);
    let r = run(o).await.expect("run");
    assert_clean(&r, 6);
    let kinds: std::collections::BTreeSet<Fault> = r.faults.iter().map(|f| f.fault).collect();
    assert_eq!(kinds.len(), 6, "kill -9, SIGSTOP and replacement, of leader and follower: {kinds:?}");
}

/// Runs kubelab with `bug` switched on and the faults that expose it; the checker must find a
/// violation of `kind`.
async fn caught(bug: &str, faults: &[Fault], kinds: &[&str]) {
    let mut o = RunOptions::short(Flavor::Kubelab);
    o.failpoints = true;
    o.env = vec![("KUBELAB_FAILPOINTS".into(), format!("{bug}=return"))];
    o.faults = faults.to_vec();
    o.in_turn = true;
    o.duration = Duration::from_secs(20);
    o.title = format!("kubelab with {bug}");
    let r = run(o).await.expect("run");
    eprintln!("{}", r.report_text);
    let found: Vec<&str> = r.validation.violations.iter().map(|v| v.kind).collect();
    assert!(found.iter().any(|k| kinds.contains(k)), "{bug} was not caught as any of {kinds:?}; found {found:?}");
    eprintln!("[test] {bug} caught {:.1?} into the run", r.first_violation_at());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn checker_catches_stale_linearizable_reads() {
    caught("bugStaleRead", &[Fault::PartitionFollower, Fault::PartitionLeader], &["not linearizable", "revision went back"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn checker_catches_writes_acknowledged_before_commit() {
    caught(
        "bugEarlyAck",
        &[Fault::PartitionLeader],
        &["acknowledged write lost", "not linearizable", "revision mismatch", "read disagrees with history", "revision went back", "member diverged"],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn checker_catches_a_watch_that_skips_its_first_revision() {
    caught("bugWatchSkip", &[Fault::KillFollower, Fault::PauseFollower], &["watch gap"]).await;
}
