//! The API server's watch promise under faults: a watch started from a resourceVersion delivers
//! every later change exactly once and in order, or says `410 Gone` — while the store's leader is
//! killed, a member pauses, the whole store restarts, and the API server itself is stopped and
//! killed (its watch cache rebuilt from nothing). And resourceVersions never go back: whatever
//! the API server lists after a restart is at or past every version it had acknowledged before.
//!
//! How (the API server's counterpart of the store's robustness checks, `e2e/src/robustness/`):
//! 1. One writer creates, updates and deletes ConfigMaps (each name used once), recording what
//!    was acknowledged: the resourceVersion of each create and update; for a delete, the versions
//!    of the acknowledged writes just before and after it, between which its event must fall.
//! 2. Three watchers follow `configmaps` in `default` from a list, as a reflector does: on a
//!    stream's end or error each watches again from the last version it saw; on `410 Gone` it
//!    lists again, which starts a new *segment* (the only place a watcher may miss changes).
//! 3. Faults, one after the other, while both run.
//! 4. After the faults, late watchers start from old versions the writer was given: each
//!    delivers everything after its version or answers 410 at once.
//! 5. Checks, per segment: versions strictly increasing; every acknowledged write inside the
//!    segment's range delivered exactly once with its type and name; every acknowledged delete
//!    inside it delivered once, between its neighbours; and all watchers agree on the event at
//!    each version.
//!
//! Run twice: `apiserver_watch_faults::kubelab` on three kubelab store members,
//! `apiserver_watch_faults::etcd` on three real etcd 3.4 members.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use e2e::Flavor;
use e2e::apiserver::{ApiCluster, ApiOptions};
use futures::StreamExt;
use serde_json::{Value, json};

mod apiserver_watch_faults {
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn kubelab() {
        super::watch_under_faults(e2e::Flavor::Kubelab).await
    }
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn etcd() {
        super::watch_under_faults(e2e::Flavor::Etcd).await
    }
}

const NS_PATH: &str = "/api/v1/namespaces/default/configmaps";
/// Each request of the writer and each list gets this long.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// What the writer was told happened.
#[derive(Debug, Clone)]
enum Acked {
    /// A create or update answered with this version.
    Write { rv: u64, kind: &'static str, name: String },
    /// A delete: its event lies after `after` and before `before` (the neighbouring
    /// acknowledged versions; `before` is filled in by the next acknowledged write).
    Delete { name: String, after: u64, before: Option<u64> },
}

/// One event as a watcher received it.
#[derive(Debug, Clone, PartialEq)]
struct Event {
    rv: u64,
    kind: String,
    name: String,
}

/// A stretch of one watcher's stream with no `410` inside: it must hold every change after
/// `from` up to its last event (or `caught_up`, the version it was known to have reached).
#[derive(Debug, Default, Clone)]
struct Segment {
    from: u64,
    events: Vec<Event>,
    /// Versions the segment reached without an event at them (bookmarks).
    reached: u64,
}

impl Segment {
    /// Takes an event or a bookmark (not an error); returns its version.
    fn add(&mut self, line: Line) -> u64 {
        match line {
            Line::Event(e) => {
                let rv = e.rv;
                self.events.push(e);
                rv
            }
            Line::Bookmark(rv) => {
                self.reached = self.reached.max(rv);
                rv
            }
            Line::Error(_) => unreachable!("errors end a stream before they reach a segment"),
        }
    }

    fn end(&self) -> u64 {
        self.events.last().map_or(self.from, |e| e.rv).max(self.reached).max(self.from)
    }
}

#[derive(Debug, Default)]
struct Watched {
    segments: Vec<Segment>,
    gone: usize,
    resumed: usize,
}

fn rv_of(obj: &Value) -> Option<u64> {
    obj["metadata"]["resourceVersion"].as_str()?.parse().ok()
}

/// One line of a watch stream, read.
enum Line {
    Event(Event),
    Bookmark(u64),
    /// An ERROR event's Status.
    Error(Value),
}

/// A watch line; `None` when it is not JSON or its object has no resourceVersion.
fn parse_line(line: &[u8]) -> Option<Line> {
    let ev: Value = serde_json::from_slice(line).ok()?;
    let kind = ev["type"].as_str().unwrap_or_default().to_string();
    if kind == "ERROR" {
        return Some(Line::Error(ev["object"].clone()));
    }
    let rv = rv_of(&ev["object"])?;
    if kind == "BOOKMARK" {
        return Some(Line::Bookmark(rv));
    }
    let name = ev["object"]["metadata"]["name"].as_str().unwrap_or_default().to_string();
    Some(Line::Event(Event { rv, kind, name }))
}

async fn list(http: &reqwest::Client, base: &str) -> anyhow::Result<u64> {
    let resp = http.get(format!("{base}{NS_PATH}")).timeout(REQUEST_TIMEOUT).send().await?;
    anyhow::ensure!(resp.status().is_success(), "list: {}", resp.status());
    let v: Value = resp.json().await?;
    v["metadata"]["resourceVersion"].as_str().and_then(|s| s.parse().ok()).ok_or_else(|| anyhow::anyhow!("list without resourceVersion"))
}

/// Step 2: a reflector's loop, until `stop` and caught up with `target` (once set).
async fn watcher(base: String, stop: Arc<AtomicBool>, target: Arc<Mutex<Option<u64>>>, out: Arc<Mutex<Watched>>) {
    let http = reqwest::Client::new();
    let mut from: Option<u64> = None;
    loop {
        let reached = out.lock().unwrap().segments.last().map_or(0, Segment::end);
        if stop.load(Ordering::SeqCst) && target.lock().unwrap().is_some_and(|t| from.is_some() && reached >= t) {
            return;
        }
        let start = match from {
            Some(rv) => rv,
            None => match list(&http, &base).await {
                Ok(rv) => {
                    out.lock().unwrap().segments.push(Segment { from: rv, ..Default::default() });
                    from = Some(rv);
                    rv
                }
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    continue;
                }
            },
        };
        let url = format!("{base}{NS_PATH}?watch=true&allowWatchBookmarks=true&timeoutSeconds=4&resourceVersion={start}");
        let resp = match http.get(&url).send().await {
            Ok(r) => r,
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
        };
        if resp.status().as_u16() == 410 {
            out.lock().unwrap().gone += 1;
            from = None;
            continue;
        }
        if !resp.status().is_success() {
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        }
        let mut body = resp.bytes_stream();
        let mut buf = Vec::new();
        let mut gone = false;
        'stream: while let Ok(Some(chunk)) = tokio::time::timeout(Duration::from_secs(10), body.next()).await {
            let Ok(chunk) = chunk else { break };
            buf.extend_from_slice(&chunk);
            while let Some(i) = buf.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = buf.drain(..=i).collect();
                let rv = match parse_line(&line) {
                    None => continue,
                    Some(Line::Error(status)) => {
                        gone = status["code"] == 410;
                        break 'stream;
                    }
                    Some(line) => out.lock().unwrap().segments.last_mut().expect("a segment").add(line),
                };
                from = Some(rv.max(from.unwrap_or(0)));
            }
        }
        let mut w = out.lock().unwrap();
        if gone {
            w.gone += 1;
            from = None;
        } else {
            w.resumed += 1;
        }
    }
}

/// Step 1: one writer, until `stop`.
async fn writer(base: String, stop: Arc<AtomicBool>, acked: Arc<Mutex<Vec<Acked>>>, failed: Arc<Mutex<usize>>) {
    let http = reqwest::Client::new();
    let mut live: Vec<(String, usize)> = Vec::new();
    let mut next = 0usize;
    let mut last_rv = 0u64;
    let mut step = 0u64;
    while !stop.load(Ordering::SeqCst) {
        step += 1;
        // Creates while few objects live, then mostly updates, with a delete every fifth step.
        let op = if live.len() < 3 || step % 7 == 0 { 0 } else if step % 5 == 0 { 2 } else { 1 };
        let (req, kind, name) = match op {
            0 => {
                next += 1;
                let name = format!("w{next}");
                let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"n": "0"}});
                (http.post(format!("{base}{NS_PATH}")).json(&body), "ADDED", name)
            }
            1 => {
                let i = (step as usize) % live.len();
                live[i].1 += 1;
                let (name, n) = live[i].clone();
                let body = json!({"data": {"n": n.to_string()}});
                let req = http
                    .patch(format!("{base}{NS_PATH}/{name}"))
                    .header("Content-Type", "application/merge-patch+json")
                    .body(body.to_string());
                (req, "MODIFIED", name)
            }
            _ => {
                let (name, _) = live.remove(0);
                (http.delete(format!("{base}{NS_PATH}/{name}")), "DELETED", name)
            }
        };
        let answer = async {
            let resp = req.timeout(REQUEST_TIMEOUT).send().await?;
            let status = resp.status().as_u16();
            let body: Value = resp.json().await.unwrap_or(Value::Null);
            anyhow::Ok((status, body))
        }
        .await;
        match answer {
            Ok((200 | 201, body)) => {
                let mut a = acked.lock().unwrap();
                if kind == "DELETED" {
                    a.push(Acked::Delete { name, after: last_rv, before: None });
                } else {
                    let rv = rv_of(&body).expect("an acknowledged write has a resourceVersion");
                    for d in a.iter_mut().rev() {
                        match d {
                            Acked::Delete { before: b @ None, .. } => *b = Some(rv),
                            _ => break,
                        }
                    }
                    a.push(Acked::Write { rv, kind, name: name.clone() });
                    last_rv = rv;
                    if kind == "ADDED" {
                        live.push((name, 0));
                    }
                }
            }
            // Unknown outcome (a fault cut the request): the name is never used again, and
            // its events, if any, are checked only for agreement between watchers.
            _ => {
                *failed.lock().unwrap() += 1;
                if kind == "MODIFIED" {
                    live.retain(|(n, _)| *n != name);
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Step 5 for one segment; returns the violations found.
fn check_segment(who: &str, seg: &Segment, acked: &[Acked]) -> Vec<String> {
    let mut bad = Vec::new();
    for w in seg.events.windows(2) {
        if w[1].rv <= w[0].rv {
            bad.push(format!("{who}: version went from {} to {} ({:?} after {:?})", w[0].rv, w[1].rv, w[1], w[0]));
        }
    }
    if let Some(first) = seg.events.first()
        && first.rv <= seg.from
    {
        bad.push(format!("{who}: watch from {} delivered {:?}, not after it", seg.from, first));
    }
    let end = seg.end();
    for a in acked {
        match a {
            Acked::Write { rv, kind, name } if *rv > seg.from && *rv <= end => {
                let got: Vec<&Event> = seg.events.iter().filter(|e| e.rv == *rv).collect();
                match got.as_slice() {
                    [e] if e.kind == *kind && e.name == *name => {}
                    [] => bad.push(format!("{who}: segment ({}, {end}] is missing {kind} {name} at {rv}", seg.from)),
                    other => bad.push(format!("{who}: at {rv} expected {kind} {name}, got {other:?}")),
                }
            }
            Acked::Delete { name, after, before: Some(before) } if *after >= seg.from && *before <= end => {
                let got = seg.events.iter().filter(|e| e.kind == "DELETED" && e.name == *name && e.rv > *after && e.rv < *before).count();
                if got != 1 {
                    bad.push(format!("{who}: segment ({}, {end}] has {got} DELETED {name} between {after} and {before} (want 1)", seg.from));
                }
            }
            _ => {}
        }
    }
    bad
}

async fn watch_under_faults(flavor: Flavor) {
    let mut c = ApiCluster::start(ApiOptions { store_members: Some(3), ..ApiOptions::for_flavor(flavor) }).await.expect("cluster");
    let base = c.url();
    let stop = Arc::new(AtomicBool::new(false));
    let acked = Arc::new(Mutex::new(Vec::new()));
    let failed = Arc::new(Mutex::new(0usize));
    let target = Arc::new(Mutex::new(None));
    let writer_task = tokio::spawn(writer(base.clone(), stop.clone(), acked.clone(), failed.clone()));
    let watched: Vec<Arc<Mutex<Watched>>> = (0..3).map(|_| Arc::new(Mutex::new(Watched::default()))).collect();
    let watchers: Vec<_> = watched.iter().map(|w| tokio::spawn(watcher(base.clone(), stop.clone(), target.clone(), w.clone()))).collect();
    let max_acked = |a: &Arc<Mutex<Vec<Acked>>>| {
        a.lock().unwrap().iter().filter_map(|x| if let Acked::Write { rv, .. } = x { Some(*rv) } else { None }).max().unwrap_or(0)
    };
    let pause = || tokio::time::sleep(Duration::from_secs(3));
    pause().await;

    // Step 3: the faults, each followed by quiet time for the writer and the watchers.
    let mut faults = Vec::new();
    let leader = c.store.leader().await.expect("store leader");
    c.store.kill9(leader);
    faults.push(format!("kill -9 of store leader {leader}"));
    c.store.wait_new_leader(leader, Duration::from_secs(20)).await.expect("new leader");
    pause().await;
    c.store.restart(leader).expect("restart the killed member");
    c.store.wait_healthy().await.expect("store healthy");
    pause().await;

    let follower = (c.store.leader().await.expect("leader") + 1) % 3;
    c.store.pause(follower);
    faults.push(format!("SIGSTOP of store follower {follower} for 3 s"));
    pause().await;
    c.store.resume(follower);
    pause().await;

    for (how, kill) in [("stopped (SIGTERM)", false), ("killed (SIGKILL)", true)] {
        let before = max_acked(&acked);
        if kill { c.kill_apiserver() } else { c.stop_apiserver() }
        faults.push(format!("API server {how} and started"));
        tokio::time::sleep(Duration::from_millis(500)).await;
        c.start_apiserver().await.expect("API server back");
        let listed = list(&reqwest::Client::new(), &base).await.expect("list after the restart");
        assert!(listed >= before, "after the API server was {how}, a list is at {listed}, before the last acknowledged write ({before})");
        pause().await;
    }

    c.restart_store().await.expect("restart the whole store");
    faults.push("whole store stopped and started".into());
    pause().await;

    // Step 4: late watchers from versions the writer was given (oldest, middle, recent).
    let rvs: Vec<u64> = acked.lock().unwrap().iter().filter_map(|x| if let Acked::Write { rv, .. } = x { Some(*rv) } else { None }).collect();
    assert!(rvs.len() > 20, "the writer made too little progress: {} acknowledged writes", rvs.len());
    stop.store(true, Ordering::SeqCst);
    writer_task.await.expect("writer");
    let last = max_acked(&acked);
    *target.lock().unwrap() = Some(last);
    let mut late = Vec::new();
    for from in [rvs[0], rvs[rvs.len() / 2], rvs[rvs.len() - 5]] {
        late.push((from, late_watch(&base, from, last).await));
    }

    let caught_up = tokio::time::timeout(Duration::from_secs(60), futures::future::join_all(watchers)).await;
    let acked = acked.lock().unwrap().clone();
    let mut bad = Vec::new();
    if caught_up.is_err() {
        bad.push(format!("the watchers did not reach the last acknowledged version {last} within 60 s"));
    }
    // Step 5.
    let mut at: HashMap<u64, (String, Event)> = HashMap::new();
    let mut summary = Vec::new();
    let mut events = 0;
    for (i, w) in watched.iter().enumerate() {
        let w = w.lock().unwrap();
        for (j, seg) in w.segments.iter().enumerate() {
            let who = format!("watcher {i} segment {j}");
            bad.extend(check_segment(&who, seg, &acked));
            for e in &seg.events {
                events += 1;
                match at.get(&e.rv) {
                    Some((other, prev)) if prev != e => bad.push(format!("{who} and {other} disagree at {}: {e:?} vs {prev:?}", e.rv)),
                    _ => {
                        at.insert(e.rv, (who.clone(), e.clone()));
                    }
                }
            }
        }
        summary.push(format!("watcher {i}: {} segments, {} resumptions, {} × 410", w.segments.len(), w.resumed, w.gone));
    }
    for (from, result) in &late {
        match result {
            Ok(Some(seg)) => {
                bad.extend(check_segment(&format!("late watch from {from}"), seg, &acked));
                summary.push(format!("late watch from {from}: {} events", seg.events.len()));
            }
            Ok(None) => summary.push(format!("late watch from {from}: 410 Gone")),
            Err(e) => bad.push(format!("late watch from {from}: {e:#}")),
        }
    }
    let writes = acked.iter().filter(|a| matches!(a, Acked::Write { .. })).count();
    println!(
        "watch under faults ({flavor}): {writes} acknowledged writes, {} deletes, {} unknown outcomes, {events} events checked; faults: {}; {}",
        acked.len() - writes,
        *failed.lock().unwrap(),
        faults.join(", "),
        summary.join("; ")
    );
    if !bad.is_empty() {
        c.fail(&format!("{} violations:\n{}", bad.len(), bad.iter().take(30).cloned().collect::<Vec<_>>().join("\n")));
    }
}

/// A watch from `from` until it reaches `last`: the segment it delivered, or `None` for an
/// honest 410 (as the first answer: a watch that starts must then deliver everything).
async fn late_watch(base: &str, from: u64, last: u64) -> anyhow::Result<Option<Segment>> {
    let http = reqwest::Client::new();
    let url = format!("{base}{NS_PATH}?watch=true&resourceVersion={from}");
    let resp = http.get(&url).send().await?;
    if resp.status().as_u16() == 410 {
        return Ok(None);
    }
    anyhow::ensure!(resp.status().is_success(), "GET {url}: {}", resp.status());
    let mut seg = Segment { from, ..Default::default() };
    let mut body = resp.bytes_stream();
    let mut buf = Vec::new();
    let started = Instant::now();
    while seg.end() < last {
        anyhow::ensure!(started.elapsed() < Duration::from_secs(30), "reached only {} of {last} in 30 s", seg.end());
        let Ok(Some(chunk)) = tokio::time::timeout(Duration::from_secs(10), body.next()).await else {
            anyhow::bail!("the stream ended at {} before {last}", seg.end());
        };
        buf.extend_from_slice(&chunk?);
        while let Some(i) = buf.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = buf.drain(..=i).collect();
            match parse_line(&line) {
                None => anyhow::bail!("not a watch event with a resourceVersion: {}", String::from_utf8_lossy(&line)),
                Some(Line::Error(status)) => {
                    anyhow::ensure!(status["code"] == 410 && seg.events.is_empty(), "error after {} events: {status}", seg.events.len());
                    return Ok(None);
                }
                Some(line) => {
                    seg.add(line);
                }
            }
        }
    }
    Ok(Some(seg))
}
