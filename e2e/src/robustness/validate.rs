//! Checking a run: the watches, the revisions, and linearizability. Mirrors etcd's
//! `tests/robustness/validate/` (`validate.go`, `patch_history.go`, `operations.go`,
//! `watch.go`).
//!
//! 1. Failed reads are dropped: they changed nothing and showed nothing.
//! 2. The watch streams are checked and merged into one history of the run ([`watch::check`]).
//! 3. The history is patched (etcd's `patchedOperationHistory`): a failed write whose value
//!    some watch delivered did happen, by the time the first watch delivered it; one whose value
//!    no watch delivered did not, and is dropped. Only done when the watch history is complete,
//!    so the patch never hides a lost write.
//! 4. Revisions: every acknowledged write is in the history at the revision it was answered
//!    with; a write or linearizable read invoked after a write returned sees a revision at least
//!    that write's (strictly greater for a write); every read returns the key as the history has
//!    it at the read's revision (serializable reads included: stale is allowed, made up is not).
//! 5. Linearizability of each key group ([`linearizability::check`]).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use super::history::{Operation, Outcome, Request, Response, Time, TxnOp};
use super::linearizability::{self, Verdict};
use super::violation::Violation;
use super::watch::{self, Union, WatchSession};

/// What was checked.
#[derive(Clone, Debug, Default)]
pub struct Summary {
    pub operations: usize,
    pub reads: usize,
    pub writes: usize,
    pub failed_reads_dropped: usize,
    pub failed_writes: usize,
    /// Failed writes a watch showed had happened.
    pub failed_writes_persisted: usize,
    /// Failed writes no watch showed: they did not happen.
    pub failed_writes_dropped: usize,
    pub watch_sessions: usize,
    pub watch_events: usize,
    /// Revisions in the watch history.
    pub revisions: usize,
    pub partitions: usize,
    pub partitions_timed_out: usize,
    pub linearizability_time: Duration,
}

/// The result of [`validate`].
pub struct Validation {
    pub summary: Summary,
    pub violations: Vec<Violation>,
    /// The history as checked (patched), for the report's timelines.
    pub ops: Vec<Operation>,
    /// The store's history as the watches delivered it.
    pub union: Union,
}

/// Checks a run whose writes all went under `prefix`, starting at `first_revision` (the first
/// revision any of its writes could get).
pub fn validate(prefix: &str, mut ops: Vec<Operation>, sessions: &[WatchSession], first_revision: i64, timeout: Duration) -> Validation {
    let mut summary = Summary { operations: ops.len(), watch_sessions: sessions.len(), ..Summary::default() };
    let mut violations = Vec::new();

    // 1.
    let before = ops.len();
    ops.retain(|op| op.request.is_write() || op.ok().is_some());
    ops.retain(|op| !matches!((&op.request, &op.outcome), (Request::LeaseGrant { .. }, Outcome::Failed { .. })));
    summary.failed_reads_dropped = before - ops.len();

    // 2.
    let union = watch::check(sessions, &ops, &mut violations);
    summary.watch_events = sessions.iter().map(|s| s.events().count()).sum();
    summary.revisions = union.len();
    let complete = violations.is_empty() && union.keys().next().is_none_or(|first| *first == first_revision);
    if !complete && union.keys().next().is_some_and(|first| *first != first_revision) {
        violations.push(Violation::watch(
            "watch history incomplete",
            format!("the watch history starts at revision {} but the run's writes start at {first_revision}", union.keys().next().unwrap()),
            Vec::new(),
        ));
    }

    // 3.
    summary.failed_writes = ops.iter().filter(|op| matches!(op.outcome, Outcome::Failed { .. })).count();
    if complete {
        let delivered = first_delivery(sessions);
        let mut keep = Vec::with_capacity(ops.len());
        for mut op in ops {
            if let Outcome::Failed { .. } = op.outcome {
                match patch(&op, &delivered) {
                    Patch::Happened(outcome) => {
                        op.outcome = outcome;
                        summary.failed_writes_persisted += 1;
                    }
                    Patch::DidNot => {
                        summary.failed_writes_dropped += 1;
                        continue;
                    }
                    Patch::Unknown => {}
                }
            }
            keep.push(op);
        }
        ops = keep;
    }
    for (i, op) in ops.iter_mut().enumerate() {
        op.id = i;
    }
    summary.reads = ops.iter().filter(|o| !o.request.is_write()).count();
    summary.writes = ops.len() - summary.reads;

    // 4.
    if complete {
        check_writes_in_history(&ops, &union, &mut violations);
        check_reads_against_history(&ops, &union, &mut violations);
    }
    check_real_time_revisions(&ops, &mut violations);

    // 5.
    let started = Instant::now();
    let results = linearizability::check(prefix, &ops, timeout);
    summary.linearizability_time = started.elapsed();
    summary.partitions = results.len();
    for r in results {
        match r.verdict {
            Verdict::Linearizable => {}
            Verdict::TimedOut => summary.partitions_timed_out += 1,
            Verdict::Illegal { longest, unplaced } => {
                let ids: Vec<usize> = longest.iter().rev().take(3).copied().chain(unplaced.iter().copied()).collect();
                let keys = ids.iter().flat_map(|i| ops[*i].request.keys()).map(str::to_string).collect::<std::collections::BTreeSet<_>>();
                let at = ids.iter().map(|i| ops[*i].invoke).min();
                violations.push(Violation {
                    at,
                    kind: "not linearizable",
                    message: format!(
                        "key group {}: no order of its {} operations explains what the clients saw; {} could be placed, then none of [{}] could come next",
                        r.partition,
                        r.operations,
                        longest.len(),
                        unplaced.iter().map(|i| format!("#{i}")).collect::<Vec<_>>().join(", ")
                    ),
                    keys: keys.into_iter().collect(),
                    ops: ids,
                });
            }
        }
    }
    Validation { summary, violations, ops, union }
}

enum Patch {
    Happened(Outcome),
    DidNot,
    Unknown,
}

/// value → (revision, time first delivered by any watch).
fn first_delivery(sessions: &[WatchSession]) -> BTreeMap<&str, (i64, Time)> {
    let mut m: BTreeMap<&str, (i64, Time)> = BTreeMap::new();
    for s in sessions {
        for r in &s.responses {
            for e in r.events.iter().filter(|e| !e.delete) {
                let entry = m.entry(e.value.as_str()).or_insert((e.revision, r.time));
                entry.1 = entry.1.min(r.time);
            }
        }
    }
    m
}

fn patch(op: &Operation, delivered: &BTreeMap<&str, (i64, Time)>) -> Patch {
    match &op.request {
        Request::Put { value, .. } => match delivered.get(value.as_str()) {
            Some((revision, t)) => Patch::Happened(Outcome::Ok { response: Response::Put, revision: *revision, returned: (*t).max(op.invoke) }),
            None => Patch::DidNot,
        },
        // The run's transactions write only in their then-branch and only read in their else:
        // a then-value delivered means it took that branch; none means it changed nothing.
        Request::Txn { then, otherwise, .. }
            if then.iter().all(|o| matches!(o, TxnOp::Put { .. })) && otherwise.iter().all(|o| matches!(o, TxnOp::Range { .. })) =>
        {
            let first = then.iter().find_map(|o| match o {
                TxnOp::Put { value, .. } => delivered.get(value.as_str()),
                _ => None,
            });
            match first {
                Some((revision, t)) => Patch::Happened(Outcome::Ok {
                    response: Response::Txn { succeeded: true, ranges: Vec::new() },
                    revision: *revision,
                    returned: (*t).max(op.invoke),
                }),
                None => Patch::DidNot,
            }
        }
        _ => Patch::Unknown,
    }
}

/// Every acknowledged put (alone or in a transaction) is in the history at its revision.
fn check_writes_in_history(ops: &[Operation], union: &Union, violations: &mut Vec<Violation>) {
    let Some(last) = union.keys().last().copied() else { return };
    for op in ops {
        let Some((resp, revision)) = op.ok() else { continue };
        let puts: Vec<(&str, &str)> = match (&op.request, resp) {
            (Request::Put { key, value, .. }, _) => vec![(key, value)],
            (Request::Txn { then, .. }, Response::Txn { succeeded: true, .. }) => then
                .iter()
                .filter_map(|o| match o {
                    TxnOp::Put { key, value } => Some((key.as_str(), value.as_str())),
                    _ => None,
                })
                .collect(),
            _ => continue,
        };
        for (key, value) in puts {
            if revision > last {
                violations.push(Violation::op(
                    "acknowledged write lost",
                    format!("put {key}={value} was acknowledged at revision {revision}, but the store's history ends at revision {last}"),
                    op,
                ));
                continue;
            }
            let at = union.get(&revision).map(|evs| evs.iter().any(|e| !e.delete && e.key == key && e.value == value));
            if at != Some(true) {
                let found = union.iter().find(|(_, evs)| evs.iter().any(|e| !e.delete && e.value == value)).map(|(r, _)| *r);
                let msg = match found {
                    Some(r) => format!("put {key}={value} was acknowledged at revision {revision}, but the history has it at revision {r}"),
                    None => format!("put {key}={value} was acknowledged at revision {revision}, but it is not in the store's history: an acknowledged write was lost"),
                };
                violations.push(Violation::op(if found.is_some() { "revision mismatch" } else { "acknowledged write lost" }, msg, op));
            }
        }
    }
}

/// Every read returns the key as the history has it at the read's header revision.
fn check_reads_against_history(ops: &[Operation], union: &Union, violations: &mut Vec<Violation>) {
    let Some(first) = union.keys().next().copied() else { return };
    let last = *union.keys().last().expect("non-empty");
    // key → [(revision, value or None for a delete)]
    let mut index: BTreeMap<&str, Vec<(i64, Option<&str>)>> = BTreeMap::new();
    for (rev, evs) in union {
        for e in evs {
            index.entry(e.key.as_str()).or_default().push((*rev, (!e.delete).then_some(e.value.as_str())));
        }
    }
    let at = |key: &str, rev: i64| -> Option<(i64, &str)> {
        let h = index.get(key)?;
        let i = h.partition_point(|(r, _)| *r <= rev);
        let (r, v) = h.get(i.checked_sub(1)?)?;
        v.map(|v| (*r, v))
    };
    for op in ops {
        let Some((resp, revision)) = op.ok() else { continue };
        if revision < first - 1 || revision > last {
            if revision > last {
                violations.push(Violation::op(
                    "read from the future",
                    format!("a read answered at revision {revision}, past the last revision of the store's history ({last})"),
                    op,
                ));
            }
            continue;
        }
        let reads: Vec<(&str, &Option<super::history::KeyValue>)> = match (&op.request, resp) {
            (Request::Range { key, .. }, Response::Range { kv }) => vec![(key, kv)],
            (Request::Txn { then, otherwise, .. }, Response::Txn { succeeded, ranges }) => {
                let branch = if *succeeded { then } else { otherwise };
                branch
                    .iter()
                    .filter_map(|o| match o {
                        TxnOp::Range { key } => Some(key.as_str()),
                        _ => None,
                    })
                    .zip(ranges)
                    .collect()
            }
            _ => continue,
        };
        for (key, kv) in reads {
            let want = at(key, revision);
            let got = kv.as_ref().map(|kv| (kv.mod_revision, kv.value.as_str()));
            if want != got {
                let show = |x: Option<(i64, &str)>| x.map(|(r, v)| format!("{v}@{r}")).unwrap_or_else(|| "<none>".into());
                violations.push(Violation::op(
                    "read disagrees with history",
                    format!("get {key} at revision {revision} returned {}, but the history has {} there", show(got), show(want)),
                    op,
                ));
            }
        }
    }
}

/// A write or linearizable read invoked after a write returned has a revision at least that
/// write's (greater, for a write that made a revision).
fn check_real_time_revisions(ops: &[Operation], violations: &mut Vec<Violation>) {
    let mut writes: Vec<(Time, i64, usize)> = ops
        .iter()
        .filter(|o| o.made_revision())
        .filter_map(|o| Some((o.returned()?, o.ok()?.1, o.id)))
        .collect();
    writes.sort();
    // prefix maximum of revisions by return time
    let mut max_so_far: Vec<(i64, usize)> = Vec::with_capacity(writes.len());
    for (_, rev, id) in &writes {
        let m = match max_so_far.last() {
            Some((r, i)) if *r >= *rev => (*r, *i),
            _ => (*rev, *id),
        };
        max_so_far.push(m);
    }
    for op in ops {
        let Some((_, revision)) = op.ok() else { continue };
        if matches!(op.request, Request::Range { serializable: true, .. }) || matches!(op.request, Request::LeaseGrant { .. } | Request::LeaseRevoke { .. }) {
            continue;
        }
        let n = writes.partition_point(|(t, _, _)| *t < op.invoke);
        let Some(&(before, by)) = n.checked_sub(1).map(|i| &max_so_far[i]) else { continue };
        let bad = if op.made_revision() { revision <= before } else { revision < before };
        if bad {
            let mut v = Violation::op(
                "revision went back",
                format!(
                    "operation #{} was invoked after #{by} returned revision {before}, yet was answered at revision {revision}",
                    op.id
                ),
                op,
            );
            v.ops.push(by);
            violations.push(v);
        }
    }
}
