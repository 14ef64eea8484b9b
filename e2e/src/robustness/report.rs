//! The report a person reads: what ran, which faults were injected, what was checked, and for
//! each violation a timeline of its keys around it. Mirrors etcd's `tests/robustness/report/`
//! (which writes the history and porcupine's visualization); here the timeline is text.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use super::failpoint::Injected;
use super::history::{Operation, Time};
use super::model::describe;
use super::validate::Summary;
use super::violation::Violation;
use super::watch::Union;

fn secs(t: Time) -> String {
    if t == Time::MAX { "never".into() } else { format!("{:.3}s", t as f64 / 1e9) }
}

/// The summary of a run, a few lines.
pub fn summary(s: &Summary, faults: &[Injected], violations: &[Violation]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "operations: {} recorded, {} checked ({} reads, {} writes); failed reads dropped {}; failed writes {} ({} shown by a watch to have happened, {} to have not)",
        s.operations,
        s.reads + s.writes,
        s.reads,
        s.writes,
        s.failed_reads_dropped,
        s.failed_writes,
        s.failed_writes_persisted,
        s.failed_writes_dropped
    );
    let _ = writeln!(out, "watches: {} streams, {} events, {} revisions in the history", s.watch_sessions, s.watch_events, s.revisions);
    let _ = writeln!(
        out,
        "linearizability: {} key groups checked in {:.2?}{}",
        s.partitions,
        s.linearizability_time,
        if s.partitions_timed_out > 0 { format!(", {} timed out (undecided)", s.partitions_timed_out) } else { String::new() }
    );
    let mut kinds: Vec<(String, usize)> = Vec::new();
    for f in faults {
        let k = f.fault.to_string();
        match kinds.iter_mut().find(|(n, _)| *n == k) {
            Some((_, c)) => *c += 1,
            None => kinds.push((k, 1)),
        }
    }
    let _ = writeln!(
        out,
        "faults: {} injected ({})",
        faults.len(),
        kinds.iter().map(|(k, c)| format!("{k} ×{c}")).collect::<Vec<_>>().join(", ")
    );
    let _ = writeln!(out, "violations: {}", violations.len());
    out
}

/// A timeline of the keys of `v`: the operations on them around the violation (marked `>>`),
/// and the history's events for them in the same revisions.
pub fn timeline(v: &Violation, ops: &[Operation], union: &Union) -> String {
    let keys: BTreeSet<&str> = v.keys.iter().map(String::as_str).collect();
    let mut out = String::new();
    let on_keys: Vec<&Operation> = ops.iter().filter(|o| o.request.keys().iter().any(|k| keys.contains(k))).collect();
    let marked: Vec<usize> = on_keys.iter().enumerate().filter(|(_, o)| v.ops.contains(&o.id)).map(|(i, _)| i).collect();
    let (lo, hi) = match (marked.first(), marked.last()) {
        (Some(a), Some(b)) => (a.saturating_sub(12), (b + 8).min(on_keys.len())),
        _ => (on_keys.len().saturating_sub(20), on_keys.len()),
    };
    let mut revs: Vec<i64> = Vec::new();
    let _ = writeln!(out, "  operations on {} (invoked … returned, client → member):", keys.iter().copied().collect::<Vec<_>>().join(", "));
    for o in &on_keys[lo..hi] {
        let mark = if v.ops.contains(&o.id) { ">>" } else { "  " };
        let _ = writeln!(
            out,
            "  {mark} #{:<5} {:>9} … {:<9} c{} → member-{}  {}",
            o.id,
            secs(o.invoke),
            secs(o.returned().unwrap_or(Time::MAX)),
            o.client,
            o.member,
            describe(o)
        );
        if let Some((_, r)) = o.ok() {
            revs.push(r);
        }
    }
    if let (Some(min), Some(max)) = (revs.iter().min(), revs.iter().max()) {
        let _ = writeln!(out, "  the store's history of those keys, revisions {}..={}:", min - 5, max);
        for (rev, evs) in union.range(min - 5..=*max) {
            for e in evs.iter().filter(|e| keys.contains(e.key.as_str())) {
                let _ = writeln!(out, "     rev {rev:<6} {}", if e.delete { format!("DELETE {}", e.key) } else { format!("PUT {}={}", e.key, e.value) });
            }
        }
    }
    out
}

/// The whole report.
pub fn render(title: &str, s: &Summary, faults: &[Injected], violations: &[Violation], ops: &[Operation], union: &Union) -> String {
    let mut out = format!("# {title}\n\n");
    out.push_str(&summary(s, faults, violations));
    out.push_str("\nfaults, in order:\n");
    for f in faults {
        let _ = writeln!(
            out,
            "  {:>9} … {:<9} {} on member-{}{}",
            secs(f.at),
            secs(f.recovered),
            f.fault,
            f.member,
            if f.healthy_after { "" } else { " (not healthy within 30 s after)" }
        );
    }
    for (i, v) in violations.iter().enumerate().take(20) {
        let _ = writeln!(out, "\nviolation {}: {}\n  {}", i + 1, v.kind, v.message);
        out.push_str(&timeline(v, ops, union));
    }
    if violations.len() > 20 {
        let _ = writeln!(out, "\n… and {} more violations", violations.len() - 20);
    }
    out
}
