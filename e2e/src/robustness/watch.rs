//! Watches under test: recording every response a watch stream delivers, and checking the
//! streams against each other and against the operations. Mirrors etcd's
//! `tests/robustness/client/watch.go` (watchers that resume from the last revision seen) and
//! `tests/robustness/validate/watch.go` (ordered, unique, gap-free, atomic, equal to history).
//!
//! A watcher is pinned to one member and resumes from `last revision + 1` whenever its stream
//! breaks (the member crashed, was paused or cut off), and every [`REWATCH_EVERY`] anyway, as a
//! reflector re-watches when its watch times out; each stream is a [`WatchSession`]. Every event
//! is checked, never sampled.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::Duration;

use etcd_client::{EventType, WatchOptions};

use super::history::{Clock, Operation, Time, writers_of_values};
use super::violation::Violation;

/// One event as a watch delivered it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WatchEvent {
    pub revision: i64,
    pub key: String,
    pub delete: bool,
    pub value: String,
}

/// One response of a stream.
#[derive(Clone, Debug)]
pub struct WatchResponse {
    pub time: Time,
    pub header_revision: i64,
    pub events: Vec<WatchEvent>,
}

/// One Watch stream, from its creation to its end.
#[derive(Clone, Debug)]
pub struct WatchSession {
    pub watcher: String,
    pub member: usize,
    /// The revision asked for; 0 means "from now".
    pub start_revision: i64,
    /// The header revision of the "created" response: a watch from now sees events after it.
    pub created_revision: Option<i64>,
    pub responses: Vec<WatchResponse>,
    /// Set when the store answered that `start_revision` was compacted: the earliest revision
    /// it still has.
    pub compacted: Option<i64>,
    /// This stream resumed at the compaction revision the previous one was refused with. That
    /// revision's own events may be gone: a deletion at exactly the compaction revision leaves
    /// no tombstone (etcd 3.4 drops it), so the stream answers for the revisions after it.
    pub after_compaction: bool,
    pub ended: Option<String>,
}

impl WatchSession {
    /// The first revision this stream must deliver every event of.
    pub fn from_revision(&self) -> Option<i64> {
        if self.compacted.is_some() {
            return None;
        }
        match self.start_revision {
            0 => self.created_revision.map(|r| r + 1),
            r if self.after_compaction => Some(r + 1),
            r => Some(r),
        }
    }

    /// The revision of the last event delivered.
    pub fn last_revision(&self) -> Option<i64> {
        self.responses.iter().rev().flat_map(|r| r.events.last()).map(|e| e.revision).next()
    }

    pub fn events(&self) -> impl Iterator<Item = &WatchEvent> {
        self.responses.iter().flat_map(|r| r.events.iter())
    }
}

/// Where a watcher connects: one member (pinned) or any of them (the history watcher).
#[derive(Clone)]
pub struct WatchTarget {
    pub name: String,
    /// (member index, endpoint) pairs, tried in turn.
    pub endpoints: Vec<(usize, String)>,
    /// 0: from now; otherwise the first revision wanted.
    pub start_revision: i64,
}

/// How long one stream lasts before the watcher ends it and watches again from its last
/// revision + 1, as a reflector does when its watch times out: every resumption is a watch from a
/// past revision, caught up from the store's history.
pub const REWATCH_EVERY: Duration = Duration::from_secs(3);

/// Runs one watcher on `prefix` until `stop`, then until it has seen `final_revision` (set once
/// the traffic ended) or `catch_up` passed. `progress` is the last revision seen.
pub async fn watch_loop(
    target: WatchTarget,
    prefix: String,
    clock: Clock,
    stop: Arc<AtomicBool>,
    final_revision: Arc<AtomicI64>,
    progress: Arc<AtomicI64>,
    catch_up: Duration,
) -> Vec<WatchSession> {
    let mut sessions = Vec::new();
    let mut next = target.start_revision;
    let mut after_compaction = false;
    let mut turn = 0usize;
    let mut stopped_at: Option<std::time::Instant> = None;
    let done = |next: i64, stopped_at: &mut Option<std::time::Instant>| {
        if !stop.load(Ordering::SeqCst) {
            return false;
        }
        let at = *stopped_at.get_or_insert_with(std::time::Instant::now);
        let fin = final_revision.load(Ordering::SeqCst);
        (fin > 0 && next > fin) || at.elapsed() > catch_up
    };
    while !done(next, &mut stopped_at) {
        let (member, endpoint) = target.endpoints[turn % target.endpoints.len()].clone();
        turn += 1;
        let mut session = WatchSession {
            watcher: target.name.clone(),
            member,
            start_revision: next,
            created_revision: None,
            responses: Vec::new(),
            compacted: None,
            after_compaction,
            ended: None,
        };
        let client = match tokio::time::timeout(Duration::from_secs(2), etcd_client::Client::connect([endpoint.as_str()], None)).await {
            Ok(Ok(c)) => c,
            _ => {
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
        };
        let mut client = client;
        let mut opts = WatchOptions::new().with_prefix().with_progress_notify();
        if next > 0 {
            opts = opts.with_start_revision(next);
        }
        let stream = tokio::time::timeout(Duration::from_secs(2), client.watch(prefix.as_str(), Some(opts))).await;
        let mut stream = match stream {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => {
                session.ended = Some(format!("watch: {e}"));
                sessions.push(session);
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
        };
        let opened = std::time::Instant::now();
        loop {
            if done(next, &mut stopped_at) {
                session.ended = Some("stopped".into());
                break;
            }
            if opened.elapsed() > REWATCH_EVERY && next > 0 {
                session.ended = Some("rewatch".into());
                break;
            }
            // A paused or cut-off member sends nothing: give up on a silent stream after a
            // while and try again (from the same revision), as a client's keepalive would.
            let msg = match tokio::time::timeout(Duration::from_secs(3), stream.message()).await {
                Err(_) => {
                    session.ended = Some("no response in 3 s".into());
                    break;
                }
                Ok(Err(e)) => {
                    session.ended = Some(format!("stream: {e}"));
                    break;
                }
                Ok(Ok(None)) => {
                    session.ended = Some("stream closed".into());
                    break;
                }
                Ok(Ok(Some(m))) => m,
            };
            let header_revision = msg.header().map(|h| h.revision()).unwrap_or(0);
            if msg.created() && session.created_revision.is_none() {
                session.created_revision = Some(header_revision);
            }
            if msg.compact_revision() > 0 {
                session.compacted = Some(msg.compact_revision());
                session.ended = Some(format!("compacted: required revision {next}, earliest {}", msg.compact_revision()));
                next = msg.compact_revision();
                after_compaction = true;
                break;
            }
            if msg.canceled() {
                session.ended = Some(format!("canceled: {}", msg.cancel_reason()));
                break;
            }
            let events: Vec<WatchEvent> = msg
                .events()
                .iter()
                .filter_map(|e| {
                    let kv = e.kv()?;
                    Some(WatchEvent {
                        revision: kv.mod_revision(),
                        key: String::from_utf8_lossy(kv.key()).into_owned(),
                        delete: e.event_type() == EventType::Delete,
                        value: String::from_utf8_lossy(kv.value()).into_owned(),
                    })
                })
                .collect();
            if let Some(last) = events.last() {
                next = last.revision + 1;
                after_compaction = false;
                progress.fetch_max(last.revision, Ordering::SeqCst);
            }
            if !events.is_empty() {
                session.responses.push(WatchResponse { time: clock.now(), header_revision, events });
            }
        }
        sessions.push(session);
    }
    sessions
}

/// The history every watch agreed on: revision → its events, from the first stream that
/// delivered it.
pub type Union = BTreeMap<i64, Vec<WatchEvent>>;

/// Checks each stream and builds the [`Union`]:
/// 1. within a stream, revisions never go back, and no (revision, key) comes twice;
/// 2. every stream delivers a revision's events all at once and exactly as every other stream
///    did (atomic, identical);
/// 3. the union has no hole: every revision from its first to its last has events (every write
///    of the run is under the watched prefix, so every revision is one);
/// 4. a stream delivers every revision of the union from its start to its last event (no gap);
/// 5. every event's value was written by some operation (none made up);
/// 6. a stream refused as compacted was refused honestly: the earliest revision the store
///    still has is past the one asked for.
pub fn check(sessions: &[WatchSession], ops: &[Operation], violations: &mut Vec<Violation>) -> Union {
    let mut union: Union = BTreeMap::new();
    let mut from: BTreeMap<i64, String> = BTreeMap::new();
    for s in sessions {
        let mut last: Option<(i64, String)> = None;
        let mut per_rev: BTreeMap<i64, Vec<WatchEvent>> = BTreeMap::new();
        for e in s.events() {
            if let Some((lr, lk)) = &last {
                if e.revision < *lr || (e.revision == *lr && e.key == *lk) {
                    violations.push(Violation::watch(
                        "watch order",
                        format!("{} (on member-{}): event {}@{} after {}@{} — revisions went back or repeated", s.watcher, s.member, e.key, e.revision, lk, lr),
                        vec![e.key.clone()],
                    ));
                }
            }
            if per_rev.get(&e.revision).is_some_and(|evs| evs.iter().any(|x| x.key == e.key)) {
                violations.push(Violation::watch(
                    "watch duplicate",
                    format!("{} (on member-{}): {} at revision {} delivered twice", s.watcher, s.member, e.key, e.revision),
                    vec![e.key.clone()],
                ));
            }
            per_rev.entry(e.revision).or_default().push(e.clone());
            last = Some((e.revision, e.key.clone()));
        }
        for (rev, evs) in per_rev {
            match union.get(&rev) {
                None => {
                    union.insert(rev, evs);
                    from.insert(rev, format!("{} on member-{}", s.watcher, s.member));
                }
                Some(u) if *u != evs => violations.push(Violation::watch(
                    "watch disagreement",
                    format!(
                        "revision {rev}: {} (on member-{}) delivered {} but {} delivered {}",
                        s.watcher,
                        s.member,
                        show(&evs),
                        from[&rev],
                        show(u)
                    ),
                    evs.iter().chain(u).map(|e| e.key.clone()).collect(),
                )),
                Some(_) => {}
            }
        }
    }
    // 3.
    if let (Some(first), Some(last)) = (union.keys().next().copied(), union.keys().last().copied()) {
        let holes: Vec<i64> = (first..=last).filter(|r| !union.contains_key(r)).collect();
        if !holes.is_empty() {
            violations.push(Violation::watch(
                "watch history hole",
                format!("no watch delivered revision(s) {} (of {first}..={last})", brief(&holes)),
                Vec::new(),
            ));
        }
    }
    // 4.
    for s in sessions {
        let (Some(start), Some(end)) = (s.from_revision(), s.last_revision()) else { continue };
        let mut have: Vec<i64> = s.events().map(|e| e.revision).collect();
        have.dedup();
        let missing: Vec<i64> = union.range(start..=end).map(|(r, _)| *r).filter(|r| have.binary_search(r).is_err()).collect();
        if !missing.is_empty() {
            let keys = missing.iter().flat_map(|r| union[r].iter().map(|e| e.key.clone())).collect();
            let shown = s.responses.iter().find(|r| r.events.iter().any(|e| e.revision > missing[0])).map(|r| r.time);
            let v = Violation::watch(
                "watch gap",
                format!(
                    "{} (on member-{}, watching from revision {start}) skipped revision(s) {} before delivering up to {end}",
                    s.watcher,
                    s.member,
                    brief(&missing)
                ),
                keys,
            );
            violations.push(match shown {
                Some(t) => v.at(t),
                None => v,
            });
        }
    }
    // 5.
    let written = writers_of_values(ops);
    for (rev, evs) in &union {
        for e in evs.iter().filter(|e| !e.delete) {
            if !written.contains_key(e.value.as_str()) {
                violations.push(Violation::watch(
                    "watch made-up value",
                    format!("revision {rev}: {}={} was never written by any client", e.key, e.value),
                    vec![e.key.clone()],
                ));
            }
        }
    }
    // 6.
    for s in sessions {
        if let Some(earliest) = s.compacted {
            if earliest <= s.start_revision {
                violations.push(Violation::watch(
                    "watch false compaction",
                    format!(
                        "{} (on member-{}): a watch from revision {} was refused as compacted, though the earliest revision kept is {earliest}",
                        s.watcher, s.member, s.start_revision
                    ),
                    Vec::new(),
                ));
            }
        }
    }
    union
}

fn show(evs: &[WatchEvent]) -> String {
    evs.iter()
        .map(|e| if e.delete { format!("DELETE {}", e.key) } else { format!("PUT {}={}", e.key, e.value) })
        .collect::<Vec<_>>()
        .join(", ")
}

/// A list of revisions, shortened.
fn brief(revs: &[i64]) -> String {
    let shown: Vec<String> = revs.iter().take(10).map(|r| r.to_string()).collect();
    if revs.len() > 10 { format!("{} … ({} in all)", shown.join(", "), revs.len()) } else { shown.join(", ") }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(revision: i64, key: &str, value: &str) -> WatchEvent {
        WatchEvent { revision, key: key.into(), delete: false, value: value.into() }
    }

    fn session(name: &str, start: i64, revs: &[(i64, &str, &str)]) -> WatchSession {
        WatchSession {
            watcher: name.into(),
            member: 0,
            start_revision: start,
            created_revision: Some(start - 1),
            responses: revs
                .iter()
                .map(|(r, k, v)| WatchResponse { time: 0, header_revision: *r, events: vec![ev(*r, k, v)] })
                .collect(),
            compacted: None,
            after_compaction: false,
            ended: None,
        }
    }

    fn ops_writing(values: &[&str]) -> Vec<Operation> {
        use crate::robustness::history::{Outcome, Request, Response};
        values
            .iter()
            .enumerate()
            .map(|(i, v)| Operation {
                id: i,
                client: 0,
                member: 0,
                request: Request::Put { key: "k".into(), value: (*v).into(), lease: 0 },
                invoke: 0,
                outcome: Outcome::Ok { response: Response::Put, revision: i as i64 + 2, returned: 1 },
            })
            .collect()
    }

    #[test]
    fn agreeing_streams_pass() {
        let ops = ops_writing(&["a", "b", "c"]);
        let full = session("w0", 2, &[(2, "k", "a"), (3, "k", "b"), (4, "k", "c")]);
        let late = session("w1", 3, &[(3, "k", "b"), (4, "k", "c")]);
        let mut v = Vec::new();
        let union = check(&[full, late], &ops, &mut v);
        assert!(v.is_empty(), "{v:?}");
        assert_eq!(union.len(), 3);
    }

    #[test]
    fn a_skipped_revision_is_a_gap() {
        let ops = ops_writing(&["a", "b", "c"]);
        let full = session("w0", 2, &[(2, "k", "a"), (3, "k", "b"), (4, "k", "c")]);
        let skipping = session("w1", 2, &[(3, "k", "b"), (4, "k", "c")]);
        let mut v = Vec::new();
        check(&[full, skipping], &ops, &mut v);
        assert_eq!(v.len(), 1, "{v:?}");
        assert_eq!(v[0].kind, "watch gap");
        assert!(v[0].message.contains("skipped revision(s) 2"), "{}", v[0].message);
    }

    #[test]
    fn a_stream_resumed_at_the_compaction_revision_answers_for_what_follows_it() {
        let ops = ops_writing(&["a", "b", "c"]);
        let full = session("w0", 2, &[(2, "k", "a"), (3, "k", "b"), (4, "k", "c")]);
        let mut resumed = session("w1", 2, &[(3, "k", "b"), (4, "k", "c")]);
        resumed.after_compaction = true;
        let mut v = Vec::new();
        check(&[full.clone(), resumed.clone()], &ops, &mut v);
        assert!(v.is_empty(), "{v:?}");
        resumed.responses.remove(0);
        check(&[full, resumed], &ops, &mut v);
        assert_eq!(v.len(), 1, "revision 3 is still owed: {v:?}");
    }

    #[test]
    fn duplicates_disagreements_holes_and_made_up_values_are_caught() {
        let ops = ops_writing(&["a", "b", "c"]);
        let dup = session("w0", 2, &[(2, "k", "a"), (2, "k", "a"), (3, "k", "b")]);
        let mut v = Vec::new();
        check(&[dup], &ops, &mut v);
        assert!(v.iter().any(|v| v.kind == "watch order"), "{v:?}");
        assert!(v.iter().any(|v| v.kind == "watch duplicate"), "{v:?}");

        let a = session("w0", 2, &[(2, "k", "a"), (4, "k", "c")]);
        let b = session("w1", 2, &[(2, "k", "b")]);
        let mut v = Vec::new();
        check(&[a, b], &ops, &mut v);
        assert!(v.iter().any(|v| v.kind == "watch disagreement"), "{v:?}");
        assert!(v.iter().any(|v| v.kind == "watch history hole"), "{v:?}");

        let mut v = Vec::new();
        check(&[session("w0", 2, &[(2, "k", "zzz")])], &ops, &mut v);
        assert!(v.iter().any(|v| v.kind == "watch made-up value"), "{v:?}");
    }
}
