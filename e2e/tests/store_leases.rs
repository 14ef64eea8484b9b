//! Lease expiry under faults: the promises of etcd's lessor (`server/lease/lessor.go`), held to
//! while the leader is killed and paused. The counterpart of etcd's lease tests
//! (`tests/integration/v3_lease_test.go`: `TestV3LeaseExpire`, `TestV3LeaseKeepAlive`,
//! `TestV3LeaseFailover`, `TestV3LeaseRevoke`), which check each promise once on a quiet
//! cluster; here every lease of a run is checked against a recorded history, as the store's
//! robustness suite (`e2e/src/robustness/`) does for keys. That suite grants leases with TTLs
//! longer than its runs: expiry is checked here.
//!
//! The promises (etcd's, so real etcd 3.4 must keep them too):
//! 1. **No early expiry.** A lease lives at least its TTL after its last successful renewal (the
//!    grant or a keep-alive answered with a TTL). The leader renews somewhere between the
//!    client's call and the answer, so the lease's keys may go only after (the call of the last
//!    successful renewal) + TTL. A renewal with no answer may have taken effect: it can only
//!    push expiry later, and counts for nothing here.
//! 2. **A kept-alive lease never expires.** A lease renewed with every gap between successful
//!    renewals (and from the last one to the end) below TTL − [`MARGIN`] still exists at the end:
//!    its keys are there, TimeToLive answers a TTL, and no DELETE of its keys was ever seen. A
//!    new leader extends every lease when it takes over (the lessor's `Promote`), so a leader
//!    change does not expire them. A lease with a longer gap is not claimed (counted, printed).
//! 3. **An abandoned lease expires.** A lease whose keep-alives stopped, or that was never
//!    renewed, is gone within TTL + [`EXPIRY_BOUND`] after the later of its last renewal and the
//!    end of the faults: a DELETE of each key seen, TimeToLive answering -1. A revoked lease is
//!    gone at once: when the revoke is answered, TimeToLive says -1, its keys are gone, and their
//!    DELETE is at or before the revoke's revision.
//! 4. **A lease's keys go together.** All the keys of a lease are deleted in one revision, and
//!    no key of a lease alive at the end is deleted.
//!
//! How:
//! 1. Three members, election timeout 1 s: etcd's minimum TTL is 1.5 election timeouts (2 s),
//!    so the TTLs (3–6 s) are taken as asked.
//! 2. Sixteen leases, each with one or two keys and a client of its own, which starts on a
//!    member of its own and moves to the next member when a call goes unanswered. Kept-alive
//!    leases renew every TTL/4 until the end; others stop partway, are never renewed, or are
//!    revoked partway. Every call is recorded with its call and answer times.
//! 3. A watcher follows the prefix from revision 1, resuming from its last revision + 1 on
//!    another member when its stream breaks or falls silent, and records when each event
//!    arrived. A reader lists the prefix (linearizable) every 200 ms: when a key is first seen
//!    gone is more evidence of when a lease expired.
//! 4. Faults, one at a time, each followed by a healthy cluster, about 28 s of them: kill -9 of
//!    the leader (then restarted), SIGSTOP of the leader for 2.5 s (then SIGCONT), kill -9 of a
//!    follower, the leader paused again, and killed again. kubelab's second pause lasts 5 s,
//!    past most of every TTL: the leader wakes to find every lease expired by its own clock, and
//!    must not revoke them, since the new leader has been renewing them. Real etcd 3.4.23 fails
//!    that one (etcd issue 15247; see [`LONG_PAUSE_HOLD`]).
//! 5. The run waits for the abandoned leases to go, reads the final state (keys, every lease's
//!    TimeToLive) while the kept-alive clients still renew, then stops everything.
//! 6. Checks, all times on the test process's one monotonic clock. A key's deletion is placed
//!    no later than the first evidence of it (the DELETE event's arrival, or the answer of the
//!    first list without it), so an early deletion the checks report really was early.
//!
//! Run twice: `store_leases::kubelab` on three kubelab members and `store_leases::etcd` on
//! three real etcd 3.4 members. The checker's own tests (`checker_*`) show that each check
//! fails on a history that breaks its promise.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use e2e::{Flavor, StoreCluster, StoreOptions};
use etcd_client::{Client, ConnectOptions, EventType, GetOptions, LeaseGrantOptions, LeaseKeepAliveStream, LeaseKeeper, PutOptions, WatchOptions};
use tokio::sync::watch;

mod store_leases {
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn kubelab() {
        super::leases_under_faults(e2e::Flavor::Kubelab).await
    }
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn etcd() {
        super::leases_under_faults(e2e::Flavor::Etcd).await
    }
}

/// Every key of the run is under this prefix.
const PREFIX: &str = "/leases/";
/// How long past its TTL an abandoned lease may live, counted from the later of its last
/// renewal and the end of the faults. What it covers: the leader's expiry loop (etcd: every
/// 500 ms; kubelab: every 250 ms), the revocation's commit, the extension a new leader gives
/// every lease (etcd: TTL + an election timeout), a renewal that went unanswered but was
/// applied later, and the watch's delivery. Observed: under 0.5 s of it used.
const EXPIRY_BOUND: Duration = Duration::from_secs(10);
/// A kept-alive lease is claimed only if every gap between its successful renewals is below its
/// TTL less this much, in seconds: room for a renewal's own time in flight and a timer's tick.
const MARGIN: f64 = 0.5;
/// A keep-alive or a list with no answer in this long is given up, and the client moves on.
const RENEW_TIMEOUT: Duration = Duration::from_secs(1);
/// A grant, put, revoke or TimeToLive with no answer in this long is given up.
const CALL_TIMEOUT: Duration = Duration::from_secs(2);
/// A watch stream silent this long is resumed on another member.
const WATCH_SILENCE: Duration = Duration::from_secs(2);
/// Between faults: the cluster is healthy, leases are renewed normally.
const QUIET: Duration = Duration::from_secs(2);
/// How long a killed member stays down.
const KILL_HOLD: Duration = Duration::from_millis(2500);
/// How long the leader stays stopped: longer than an election (1–2 s), and shorter than 3/4 of
/// the shortest TTL of a renewed lease (4 s), so that the stopped leader, when it wakes, finds no
/// lease expired by its own clock.
const PAUSE_HOLD: Duration = Duration::from_millis(2500);
/// kubelab's long pause: past 3/4 of every renewed lease's TTL. The stopped leader wakes up
/// finding every lease expired by its clock, while the new leader has been renewing them; it
/// must not revoke them. etcd 3.4.23 (Debian's) does (etcd issue 15247, fixed in 3.4.28 by
/// checking leadership before revoking), so its run has short pauses only.
const LONG_PAUSE_HOLD: Duration = Duration::from_secs(5);

/// Seconds since the run began, on one monotonic clock for every task.
#[derive(Clone, Copy)]
struct Clock(Instant);

impl Clock {
    fn now(&self) -> f64 {
        self.0.elapsed().as_secs_f64()
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    /// Renewed until the end of the run.
    Kept,
    /// Renewed until this time, then abandoned.
    Stops { at: f64 },
    /// Granted at `grant_at` and never renewed.
    Never,
    /// Renewed until this time, then revoked.
    Revoked { at: f64 },
}

#[derive(Clone, Debug)]
struct Plan {
    name: String,
    id: i64,
    ttl: i64,
    kind: Kind,
    grant_at: f64,
    keys: usize,
    /// The member its client starts on.
    member: usize,
}

impl Plan {
    fn key(&self, j: usize) -> String {
        format!("{PREFIX}{}/k{j}", self.name)
    }
    fn describe(&self) -> String {
        format!("lease {} (id {:#x}, TTL {} s)", self.name, self.id, self.ttl)
    }
}

/// The leases of a run: six kept alive, four abandoned partway, four never renewed (granted at
/// different times), two revoked. A renewed lease's TTL is at least 4 s (see [`PAUSE_HOLD`]).
/// Explicit ids, so that a grant that went unanswered can be retried and recognised ("lease
/// already exists").
fn plans() -> Vec<Plan> {
    let mut v: Vec<(String, i64, Kind, f64)> = Vec::new();
    for (i, ttl) in [4, 5, 6, 4, 5, 6].into_iter().enumerate() {
        v.push((format!("kept-{i}"), ttl, Kind::Kept, 0.0));
    }
    for (i, (ttl, at)) in [(4, 5.0), (5, 11.0), (4, 17.0), (6, 23.0)].into_iter().enumerate() {
        v.push((format!("stops-{i}"), ttl, Kind::Stops { at }, 0.0));
    }
    for (i, (ttl, grant_at)) in [(3, 0.0), (4, 8.0), (5, 15.0), (3, 22.0)].into_iter().enumerate() {
        v.push((format!("never-{i}"), ttl, Kind::Never, grant_at));
    }
    for (i, (ttl, at)) in [(5, 9.0), (4, 19.0)].into_iter().enumerate() {
        v.push((format!("revoked-{i}"), ttl, Kind::Revoked { at }, 0.0));
    }
    v.into_iter()
        .enumerate()
        .map(|(i, (name, ttl, kind, grant_at))| Plan { name, id: 0x1ea5_e000 + i as i64, ttl, kind, grant_at, keys: 1 + i % 2, member: i % 3 })
        .collect()
}

#[derive(Clone, Debug, PartialEq)]
enum Outcome {
    /// Answered: the lease lives (a grant or keep-alive) or is gone (a revoke).
    Ok,
    /// Answered: no such lease.
    NotFound,
    /// An error or no answer: it may or may not have taken effect.
    Unknown(String),
}

/// One call of a lease's client.
#[derive(Clone, Debug)]
struct Call {
    invoke: f64,
    /// When it was answered or given up.
    ret: f64,
    outcome: Outcome,
    member: usize,
    /// The answer's header revision (revokes).
    revision: i64,
}

/// What a lease's client did.
#[derive(Debug)]
struct LeaseRecord {
    plan: Plan,
    /// The grant attempts, then every keep-alive, in order.
    renewals: Vec<Call>,
    /// Whether a grant took effect (answered, or refused as already existing).
    granted: bool,
    revokes: Vec<Call>,
    /// Asked right after the revoke was answered: TimeToLive's TTL and how many of the lease's
    /// keys a linearizable read still found.
    after_revoke: Option<(i64, usize)>,
    /// Keys never put (every attempt failed).
    puts_failed: usize,
    /// How often the client moved to another member.
    moves: usize,
}

/// One watch event, as it arrived.
#[derive(Clone, Debug)]
struct Event {
    at: f64,
    revision: i64,
    key: String,
    delete: bool,
    lease: i64,
}

/// One linearizable list of the prefix.
#[derive(Clone, Debug, Default)]
struct Listing {
    ret: f64,
    revision: i64,
    /// Key → its lease.
    present: BTreeMap<String, i64>,
}

#[derive(Clone, Copy, Debug)]
enum Fault {
    KillLeader,
    /// SIGSTOP of the leader for this long, then SIGCONT.
    PauseLeader(Duration),
    KillFollower,
}

/// Step 4's faults: about 28 s of them. kubelab's second pause is the long one.
fn faults_for(flavor: Flavor) -> Vec<Fault> {
    let second_pause = match flavor {
        Flavor::Kubelab => LONG_PAUSE_HOLD,
        Flavor::Etcd => PAUSE_HOLD,
    };
    vec![Fault::KillLeader, Fault::PauseLeader(PAUSE_HOLD), Fault::KillFollower, Fault::PauseLeader(second_pause), Fault::KillLeader]
}

#[derive(Clone, Debug)]
struct FaultRecord {
    fault: Fault,
    member: usize,
    /// Injected.
    from: f64,
    /// The cluster healthy again.
    to: f64,
}

/// The state at the end, read while the kept-alive clients still renew.
#[derive(Debug, Default)]
struct Final {
    listing: Listing,
    /// Lease id → (when answered, TTL).
    ttl: BTreeMap<i64, (f64, i64)>,
}

/// Everything a run recorded.
struct Run {
    leases: Vec<LeaseRecord>,
    events: Vec<Event>,
    listings: Vec<Listing>,
    faults: Vec<FaultRecord>,
    faults_end: f64,
    fin: Final,
    bound: f64,
}

async fn connect(endpoint: &str) -> anyhow::Result<Client> {
    let opts = ConnectOptions::new().with_connect_timeout(e2e::scaled(Duration::from_secs(1))).with_require_leader(true);
    Ok(tokio::time::timeout(e2e::scaled(CALL_TIMEOUT), Client::connect([endpoint], Some(opts))).await??)
}

/// etcd's "lease not found" error, as a grant's, put's or revoke's answer.
fn is_not_found(e: &etcd_client::Error) -> bool {
    matches!(e, etcd_client::Error::GRpcStatus(s) if s.message().contains("requested lease not found"))
}

/// A lease client's connection to one member, and its keep-alive stream there.
struct Conn {
    endpoints: Vec<String>,
    member: usize,
    client: Option<Client>,
    keeper: Option<(LeaseKeeper, LeaseKeepAliveStream)>,
    moves: usize,
}

impl Conn {
    async fn client(&mut self) -> anyhow::Result<&mut Client> {
        if self.client.is_none() {
            self.client = Some(connect(&self.endpoints[self.member]).await?);
        }
        Ok(self.client.as_mut().expect("just connected"))
    }

    /// The member did not answer: the next call goes to the next member.
    fn move_on(&mut self) {
        self.member = (self.member + 1) % self.endpoints.len();
        self.client = None;
        self.keeper = None;
        self.moves += 1;
    }

    /// One keep-alive on the stream (opened on first use, which is itself a keep-alive).
    async fn renew(&mut self, id: i64) -> Outcome {
        let timeout = e2e::scaled(RENEW_TIMEOUT);
        if let Some((keeper, stream)) = self.keeper.as_mut() {
            if let Err(e) = keeper.keep_alive().await {
                return Outcome::Unknown(format!("send: {e}"));
            }
            return match tokio::time::timeout(timeout, stream.message()).await {
                Ok(Ok(Some(r))) if r.ttl() > 0 => Outcome::Ok,
                Ok(Ok(Some(_))) => Outcome::NotFound,
                Ok(Ok(None)) => Outcome::Unknown("stream closed".into()),
                Ok(Err(e)) => Outcome::Unknown(e.to_string()),
                Err(_) => Outcome::Unknown("no answer".into()),
            };
        }
        let client = match self.client().await {
            Ok(c) => c,
            Err(e) => return Outcome::Unknown(format!("connect: {e:#}")),
        };
        match tokio::time::timeout(timeout, client.lease_keep_alive(id)).await {
            Ok(Ok(k)) => {
                self.keeper = Some(k);
                Outcome::Ok
            }
            Ok(Err(etcd_client::Error::LeaseKeepAliveError(m))) if m == "lease not found" => Outcome::NotFound,
            Ok(Err(e)) => Outcome::Unknown(e.to_string()),
            Err(_) => Outcome::Unknown("no answer".into()),
        }
    }
}

/// Waits `d`, or less if the run ends first.
async fn nap(d: Duration, stop: &mut watch::Receiver<bool>) {
    if *stop.borrow() {
        return;
    }
    tokio::select! {
        _ = tokio::time::sleep(d) => {}
        _ = stop.changed() => {}
    }
}

/// Step 2: one lease's client.
async fn lease_client(plan: Plan, endpoints: Vec<String>, clock: Clock, rec: Arc<Mutex<LeaseRecord>>, mut stop: watch::Receiver<bool>) {
    let mut conn = Conn { endpoints, member: plan.member, client: None, keeper: None, moves: 0 };
    let call_timeout = e2e::scaled(CALL_TIMEOUT);
    let wait = plan.grant_at - clock.now();
    if wait > 0.0 {
        tokio::time::sleep(Duration::from_secs_f64(wait)).await;
    }
    // The grant, until it takes effect (an unanswered one may have: "already exists").
    let give_up = clock.now() + 15.0;
    while clock.now() < give_up {
        let invoke = clock.now();
        let member = conn.member;
        let r = match conn.client().await {
            Ok(c) => tokio::time::timeout(call_timeout, c.lease_grant(plan.ttl, Some(LeaseGrantOptions::new().with_id(plan.id)))).await,
            Err(e) => Ok(Err(etcd_client::Error::InvalidArgs(format!("connect: {e:#}")))),
        };
        let (outcome, granted) = match r {
            Ok(Ok(_)) => (Outcome::Ok, true),
            Ok(Err(e)) if e.to_string().contains("lease already exists") => (Outcome::Unknown(e.to_string()), true),
            Ok(Err(e)) => (Outcome::Unknown(e.to_string()), false),
            Err(_) => (Outcome::Unknown("no answer".into()), false),
        };
        rec.lock().unwrap().renewals.push(Call { invoke, ret: clock.now(), outcome, member, revision: 0 });
        if granted {
            rec.lock().unwrap().granted = true;
            break;
        }
        conn.move_on();
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    if !rec.lock().unwrap().granted {
        return;
    }
    // Its keys, each put until answered (or the lease is gone).
    for j in 0..plan.keys {
        let mut put = false;
        for _ in 0..10 {
            let r = match conn.client().await {
                Ok(c) => tokio::time::timeout(call_timeout, c.put(plan.key(j), format!("{}-{j}", plan.name), Some(PutOptions::new().with_lease(plan.id)))).await.ok(),
                Err(_) => None,
            };
            match r {
                Some(Ok(_)) => {
                    put = true;
                    break;
                }
                Some(Err(e)) if is_not_found(&e) => break,
                _ => {
                    conn.move_on();
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
        if !put {
            rec.lock().unwrap().puts_failed += 1;
        }
    }
    let until = match plan.kind {
        Kind::Never => return,
        Kind::Kept => f64::INFINITY,
        Kind::Stops { at } | Kind::Revoked { at } => at,
    };
    // Keep-alives every TTL/4 (etcd's client: TTL/3), until `until` or the end of the run.
    let interval = Duration::from_secs_f64(plan.ttl as f64 / 4.0);
    while clock.now() < until && !*stop.borrow() {
        let invoke = clock.now();
        let member = conn.member;
        let outcome = conn.renew(plan.id).await;
        let ret = clock.now();
        let next = outcome.clone();
        rec.lock().unwrap().renewals.push(Call { invoke, ret, outcome, member, revision: 0 });
        match next {
            Outcome::Ok => nap(interval, &mut stop).await,
            // The lease is gone: nothing left to renew.
            Outcome::NotFound => break,
            Outcome::Unknown(_) => {
                conn.move_on();
                nap(Duration::from_millis(100), &mut stop).await;
            }
        }
    }
    rec.lock().unwrap().moves = conn.moves;
    if !matches!(plan.kind, Kind::Revoked { .. }) {
        return;
    }
    // The revoke, until answered; then at once: TimeToLive -1 and no key left.
    conn.keeper = None;
    let give_up = clock.now() + 15.0;
    while clock.now() < give_up {
        let invoke = clock.now();
        let member = conn.member;
        let r = match conn.client().await {
            Ok(c) => tokio::time::timeout(call_timeout, c.lease_revoke(plan.id)).await,
            Err(e) => Ok(Err(etcd_client::Error::InvalidArgs(format!("connect: {e:#}")))),
        };
        let (outcome, revision) = match r {
            Ok(Ok(resp)) => (Outcome::Ok, resp.header().map_or(0, |h| h.revision())),
            Ok(Err(e)) if is_not_found(&e) => (Outcome::NotFound, 0),
            Ok(Err(e)) => (Outcome::Unknown(e.to_string()), 0),
            Err(_) => (Outcome::Unknown("no answer".into()), 0),
        };
        let answered = !matches!(outcome, Outcome::Unknown(_));
        rec.lock().unwrap().revokes.push(Call { invoke, ret: clock.now(), outcome, member, revision });
        if answered {
            break;
        }
        conn.move_on();
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for _ in 0..10 {
        let Ok(c) = conn.client().await else {
            conn.move_on();
            continue;
        };
        let ttl = tokio::time::timeout(call_timeout, c.lease_time_to_live(plan.id, None)).await;
        let keys = tokio::time::timeout(call_timeout, c.get(format!("{PREFIX}{}/", plan.name), Some(GetOptions::new().with_prefix()))).await;
        if let (Ok(Ok(ttl)), Ok(Ok(keys))) = (ttl, keys) {
            rec.lock().unwrap().after_revoke = Some((ttl.ttl(), keys.kvs().len()));
            break;
        }
        conn.move_on();
    }
}

fn watch_target_reached(target: &watch::Receiver<Option<i64>>, next: i64) -> bool {
    target.borrow().is_some_and(|t| next > t)
}

/// Step 3: the watcher. Returns how many streams it opened.
async fn watcher(endpoints: Vec<String>, clock: Clock, events: Arc<Mutex<Vec<Event>>>, count: watch::Sender<usize>, mut target: watch::Receiver<Option<i64>>) -> usize {
    let mut next = 1;
    let mut streams = 0;
    let mut turn = 0;
    while !watch_target_reached(&target, next) {
        let endpoint = &endpoints[turn % endpoints.len()];
        turn += 1;
        let Ok(mut client) = connect(endpoint).await else {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        let opts = WatchOptions::new().with_prefix().with_start_revision(next);
        let Ok(Ok(mut stream)) = tokio::time::timeout(e2e::scaled(CALL_TIMEOUT), client.watch(PREFIX, Some(opts))).await else {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        streams += 1;
        while !watch_target_reached(&target, next) {
            let msg = tokio::select! {
                m = stream.message() => m,
                _ = target.changed() => continue,
                _ = tokio::time::sleep(e2e::scaled(WATCH_SILENCE)) => break,
            };
            let Ok(Some(resp)) = msg else { break };
            if resp.canceled() || resp.compact_revision() > 0 {
                break;
            }
            let at = clock.now();
            let mut evs = events.lock().unwrap();
            for e in resp.events() {
                let Some(kv) = e.kv() else { continue };
                next = next.max(kv.mod_revision() + 1);
                evs.push(Event {
                    at,
                    revision: kv.mod_revision(),
                    key: String::from_utf8_lossy(kv.key()).into_owned(),
                    delete: e.event_type() == EventType::Delete,
                    lease: kv.lease(),
                });
            }
            count.send_replace(evs.len());
        }
    }
    streams
}

async fn list(client: &mut Client, clock: Clock, timeout: Duration) -> anyhow::Result<Listing> {
    let r = tokio::time::timeout(timeout, client.get(PREFIX, Some(GetOptions::new().with_prefix()))).await??;
    Ok(Listing {
        ret: clock.now(),
        revision: r.header().map_or(0, |h| h.revision()),
        present: r.kvs().iter().map(|kv| (String::from_utf8_lossy(kv.key()).into_owned(), kv.lease())).collect(),
    })
}

/// Step 3: the reader, listing through each member in turn until the run ends.
async fn reader(endpoints: Vec<String>, clock: Clock, mut stop: watch::Receiver<bool>) -> Vec<Listing> {
    let mut listings = Vec::new();
    let mut clients: Vec<Option<Client>> = vec![None; endpoints.len()];
    let mut turn = 0;
    while !*stop.borrow() {
        let i = turn % endpoints.len();
        turn += 1;
        if clients[i].is_none() {
            clients[i] = connect(&endpoints[i]).await.ok();
        }
        if let Some(c) = clients[i].as_mut() {
            match list(c, clock, e2e::scaled(RENEW_TIMEOUT)).await {
                Ok(l) => listings.push(l),
                Err(_) => clients[i] = None,
            }
        }
        nap(Duration::from_millis(200), &mut stop).await;
    }
    listings
}

/// Step 4: the faults, one at a time, each until the cluster is healthy again.
async fn inject_faults(c: &mut StoreCluster, clock: Clock) -> Vec<FaultRecord> {
    let mut out = Vec::new();
    for fault in faults_for(c.opts.flavor) {
        tokio::time::sleep(QUIET).await;
        let leader = c.leader().await.expect("a leader before the fault");
        let member = match fault {
            Fault::KillFollower => (leader + 1) % c.len(),
            Fault::KillLeader | Fault::PauseLeader(_) => leader,
        };
        let from = clock.now();
        match fault {
            Fault::KillLeader | Fault::KillFollower => {
                c.kill9(member);
                tokio::time::sleep(KILL_HOLD).await;
                c.restart(member).expect("restart the killed member");
            }
            Fault::PauseLeader(hold) => {
                c.pause(member);
                tokio::time::sleep(hold).await;
                c.resume(member);
            }
        }
        c.wait_healthy().await.expect("a healthy cluster after the fault");
        out.push(FaultRecord { fault, member, from, to: clock.now() });
    }
    out
}

/// The keys each lease was attached to, from the PUT events.
fn keys_of(events: &[Event], id: i64) -> BTreeSet<String> {
    events.iter().filter(|e| !e.delete && e.lease == id).map(|e| e.key.clone()).collect()
}

/// When the run may stop waiting for lease `r` to go: never for a kept lease.
fn deadline(r: &LeaseRecord, faults_end: f64, bound: f64) -> f64 {
    let last = r.renewals.iter().chain(&r.revokes).map(|c| c.ret).fold(faults_end, f64::max);
    last + r.plan.ttl as f64 + bound
}

/// Step 5: waits until every lease that is not kept alive has finished with its client and had
/// all its keys deleted, or its deadline has passed.
async fn wait_abandoned_gone(recs: &[Arc<Mutex<LeaseRecord>>], tasks: &[tokio::task::JoinHandle<()>], events: &Mutex<Vec<Event>>, mut count: watch::Receiver<usize>, clock: Clock, faults_end: f64, bound: f64) {
    loop {
        let now = clock.now();
        let pending = {
            let evs = events.lock().unwrap();
            recs.iter().zip(tasks).any(|(r, t)| {
                let r = r.lock().unwrap();
                if r.plan.kind == Kind::Kept || now > deadline(&r, faults_end, bound) {
                    return false;
                }
                let deleted: BTreeSet<&str> = evs.iter().filter(|e| e.delete).map(|e| e.key.as_str()).collect();
                !t.is_finished() || keys_of(&evs, r.plan.id).iter().any(|k| !deleted.contains(k.as_str()))
            })
        };
        if !pending {
            return;
        }
        let _ = tokio::time::timeout(Duration::from_millis(250), count.changed()).await;
    }
}

/// Step 5: the final state, through whichever member answers.
async fn read_final(endpoints: &[String], ids: &[i64], clock: Clock) -> Final {
    let mut fin = Final::default();
    let mut turn = 0;
    let timeout = e2e::scaled(CALL_TIMEOUT);
    let mut client: Option<Client> = None;
    let mut todo: Vec<i64> = ids.to_vec();
    let mut listed = false;
    for _ in 0..30 {
        if client.is_none() {
            client = connect(&endpoints[turn % endpoints.len()]).await.ok();
            turn += 1;
        }
        let Some(c) = client.as_mut() else { continue };
        if !listed {
            match list(c, clock, timeout).await {
                Ok(l) => {
                    fin.listing = l;
                    listed = true;
                }
                Err(_) => {
                    client = None;
                    continue;
                }
            }
        }
        while let Some(&id) = todo.last() {
            match tokio::time::timeout(timeout, c.lease_time_to_live(id, None)).await {
                Ok(Ok(r)) => {
                    fin.ttl.insert(id, (clock.now(), r.ttl()));
                    todo.pop();
                }
                _ => break,
            }
        }
        if todo.is_empty() {
            return fin;
        }
        client = None;
    }
    panic!("could not read the final state of the store (leases left: {todo:x?})");
}

async fn leases_under_faults(flavor: Flavor) {
    let started = Instant::now();
    let mut c = StoreCluster::start(3, StoreOptions::for_flavor(flavor)).await.expect("start the cluster");
    let endpoints = c.client_endpoints();
    let clock = Clock(Instant::now());
    let bound = e2e::scaled(EXPIRY_BOUND).as_secs_f64();

    let events = Arc::new(Mutex::new(Vec::new()));
    let (count_tx, count_rx) = watch::channel(0usize);
    let (target_tx, target_rx) = watch::channel(None::<i64>);
    let watcher = tokio::spawn(watcher(endpoints.clone(), clock, events.clone(), count_tx, target_rx));
    let (stop_tx, stop_rx) = watch::channel(false);
    let reader = tokio::spawn(reader(endpoints.clone(), clock, stop_rx.clone()));
    let plans = plans();
    let recs: Vec<Arc<Mutex<LeaseRecord>>> = plans
        .iter()
        .map(|p| Arc::new(Mutex::new(LeaseRecord { plan: p.clone(), renewals: Vec::new(), granted: false, revokes: Vec::new(), after_revoke: None, puts_failed: 0, moves: 0 })))
        .collect();
    let tasks: Vec<_> = plans.iter().zip(&recs).map(|(p, r)| tokio::spawn(lease_client(p.clone(), endpoints.clone(), clock, r.clone(), stop_rx.clone()))).collect();

    let faults = inject_faults(&mut c, clock).await;
    let faults_end = clock.now();
    wait_abandoned_gone(&recs, &tasks, &events, count_rx, clock, faults_end, bound).await;
    let ids: Vec<i64> = plans.iter().map(|p| p.id).collect();
    let fin = read_final(&endpoints, &ids, clock).await;

    stop_tx.send_replace(true);
    for t in tasks {
        t.await.expect("a lease client panicked");
    }
    let listings = reader.await.expect("the reader panicked");
    target_tx.send_replace(Some(fin.listing.revision));
    let streams = tokio::time::timeout(e2e::scaled(Duration::from_secs(30)), watcher)
        .await
        .expect("the watcher caught up with the final revision")
        .expect("the watcher panicked");
    c.check_alive().expect("no member died on its own");

    let leases = recs.into_iter().map(|r| Arc::try_unwrap(r).expect("clients are done").into_inner().unwrap()).collect();
    let events = std::mem::take(&mut *events.lock().unwrap());
    let run = Run { leases, events, listings, faults, faults_end, fin, bound };
    let (summary, violations) = check(&run);
    eprintln!("[leases] {flavor}: run of {:.1} s ({:.1} s with the cluster's start), watch streams opened: {streams}", clock.now(), started.elapsed().as_secs_f64());
    eprintln!("{summary}");
    assert!(violations.is_empty(), "{flavor}: {} lease promise(s) broken:\n- {}", violations.len(), violations.join("\n- "));
}

fn fmt_calls(calls: &[&Call]) -> String {
    let shown: Vec<String> = calls.iter().map(|c| format!("{:.2}–{:.2} (member-{})", c.invoke, c.ret, c.member)).collect();
    if shown.len() > 6 {
        format!("…{} earlier, {}", shown.len() - 6, shown[shown.len() - 6..].join(", "))
    } else {
        shown.join(", ")
    }
}

/// Step 6: the checks. Returns a summary to print and the violations, each naming its lease.
fn check(run: &Run) -> (String, Vec<String>) {
    let mut v = Vec::new();
    let mut s = String::new();
    let fin_rev = run.fin.listing.revision;
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    let (mut ok, mut unknown, mut not_found, mut moves) = (0, 0, 0, 0);
    let mut claimed = 0;
    let mut unclaimed = Vec::new();
    let mut expiries = Vec::new();

    for r in &run.leases {
        let p = &r.plan;
        let ttl = p.ttl as f64;
        let what = p.describe();
        *counts.entry(match p.kind {
            Kind::Kept => "kept alive",
            Kind::Stops { .. } => "abandoned partway",
            Kind::Never => "never renewed",
            Kind::Revoked { .. } => "revoked",
        })
        .or_default() += 1;
        for c in &r.renewals {
            match c.outcome {
                Outcome::Ok => ok += 1,
                Outcome::NotFound => not_found += 1,
                Outcome::Unknown(_) => unknown += 1,
            }
        }
        moves += r.moves;
        if !r.granted {
            v.push(format!("{what}: no grant took effect in 15 s ({})", fmt_calls(&r.renewals.iter().collect::<Vec<_>>())));
            continue;
        }

        let keys = keys_of(&run.events, p.id);
        let first_put: BTreeMap<&str, i64> = keys.iter().map(|k| (k.as_str(), run.events.iter().filter(|e| !e.delete && &e.key == k).map(|e| e.revision).min().unwrap_or(0))).collect();
        let dels: Vec<&Event> = run.events.iter().filter(|e| e.delete && keys.contains(&e.key)).collect();
        // The first evidence of a deletion: a DELETE's arrival, or a list without the key.
        let del_seen = dels.iter().map(|e| e.at).reduce(f64::min);
        let absent_seen = run
            .listings
            .iter()
            .filter(|l| keys.iter().any(|k| l.revision >= first_put[k.as_str()] && !l.present.contains_key(k)))
            .map(|l| l.ret)
            .reduce(f64::min);
        let gone_at = match (del_seen, absent_seen) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let evidence = |g: f64| {
            let del = dels.iter().find(|e| e.at == g).map(|e| format!("DELETE of {} at revision {} arrived at {g:.2} s", e.key, e.revision));
            del.unwrap_or_else(|| format!("a linearizable list answered at {g:.2} s no longer had its key"))
        };
        let successes: Vec<&Call> = r.renewals.iter().filter(|c| c.outcome == Outcome::Ok).collect();
        let last_ok = successes.iter().copied().max_by(|a, b| a.invoke.total_cmp(&b.invoke));
        let first_revoke = r.revokes.first().map(|c| c.invoke);
        let gone_after_revoke = first_revoke.is_some_and(|t| gone_at.is_some_and(|g| g >= t));
        let final_ttl = run.fin.ttl.get(&p.id).copied();

        // 1. No early expiry (a deletion after a revoke was called is the revoke's).
        if let (Some(g), Some(last)) = (gone_at, last_ok)
            && !gone_after_revoke
            && g < last.invoke + ttl
        {
            v.push(format!(
                "{what} expired early: {}, {:.2} s before TTL after its last successful renewal (invoked {:.2} s, answered {:.2} s through member-{}); successful renewals: {}",
                evidence(g),
                last.invoke + ttl - g,
                last.invoke,
                last.ret,
                last.member,
                fmt_calls(&successes)
            ));
        }

        // 4. Keys go together, and never those of a lease alive at the end.
        let revs: BTreeSet<i64> = dels.iter().map(|e| e.revision).collect();
        if revs.len() > 1 {
            v.push(format!("{what}: its keys were deleted at different revisions {revs:?}: {:?}", dels.iter().map(|e| (&e.key, e.revision)).collect::<Vec<_>>()));
        }
        let deleted: BTreeSet<&str> = dels.iter().map(|e| e.key.as_str()).collect();
        if !dels.is_empty() && deleted.len() < keys.len() {
            v.push(format!("{what}: only {deleted:?} of its keys {keys:?} were deleted"));
        }
        if final_ttl.is_some_and(|(_, t)| t > 0) {
            for e in dels.iter().filter(|e| e.revision <= fin_rev) {
                v.push(format!(
                    "{what} is alive at the end (TimeToLive {} s at {:.2} s) but its key {} was deleted at revision {} (event at {:.2} s)",
                    final_ttl.map_or(0, |(_, t)| t),
                    final_ttl.map_or(0.0, |(at, _)| at),
                    e.key,
                    e.revision,
                    e.at
                ));
            }
        }

        match p.kind {
            // 2. Kept alive: never expires.
            Kind::Kept => {
                let end = final_ttl.map_or(run.fin.listing.ret, |(at, _)| at);
                let mut gaps: Vec<(f64, f64, f64)> = successes.windows(2).map(|w| (w[1].ret - w[0].invoke, w[0].invoke, w[1].ret)).collect();
                if let Some(last) = successes.last() {
                    gaps.push((end - last.invoke, last.invoke, end));
                }
                let widest = gaps.iter().copied().max_by(|a, b| a.0.total_cmp(&b.0));
                let grant_answered = r.renewals.first().is_some_and(|c| c.outcome == Outcome::Ok);
                match widest {
                    Some((gap, from, to)) if grant_answered && gap < ttl - MARGIN => {
                        claimed += 1;
                        let mut broken = Vec::new();
                        if let Some(g) = gone_at {
                            broken.push(evidence(g));
                        }
                        if let Some(c) = r.renewals.iter().find(|c| c.outcome == Outcome::NotFound) {
                            broken.push(format!("a keep-alive invoked at {:.2} s was answered \"not found\"", c.invoke));
                        }
                        match final_ttl {
                            Some((at, t)) if t <= 0 => broken.push(format!("TimeToLive answered {t} at {at:.2} s")),
                            None => broken.push("TimeToLive never answered at the end".into()),
                            _ => {}
                        }
                        for k in &keys {
                            if run.fin.listing.present.get(k) != Some(&p.id) {
                                broken.push(format!("{k} is not on it in the final list (revision {fin_rev})"));
                            }
                        }
                        if keys.len() + r.puts_failed < p.keys {
                            broken.push(format!("only {} of its {} keys were ever seen put", keys.len(), p.keys));
                        }
                        if !broken.is_empty() {
                            v.push(format!(
                                "{what} was kept alive (widest gap {gap:.2} s < TTL − {MARGIN} s, from {from:.2} to {to:.2} s) but expired: {}; successful renewals: {}",
                                broken.join("; "),
                                fmt_calls(&successes)
                            ));
                        }
                    }
                    Some((gap, from, to)) => unclaimed.push(format!("{} (gap {gap:.2} s from {from:.2} to {to:.2} s)", p.name)),
                    None => unclaimed.push(format!("{} (no renewal answered)", p.name)),
                }
            }
            // 3. Abandoned: gone in time, for good.
            Kind::Stops { .. } | Kind::Never => {
                let due = deadline(r, run.faults_end, run.bound);
                let last_deletion = dels.iter().map(|e| e.at).reduce(f64::max);
                let missing: Vec<&String> = keys.iter().filter(|k| !deleted.contains(k.as_str())).collect();
                if !missing.is_empty() {
                    v.push(format!("{what} was abandoned but {missing:?} never saw a DELETE (waited until {due:.2} s: TTL + {:.0} s after {:.2} s)", run.bound, due - ttl - run.bound));
                } else if let Some(l) = last_deletion.filter(|l| *l > due) {
                    v.push(format!("{what} was abandoned but its keys went only at {l:.2} s, after the bound {due:.2} s"));
                }
                match final_ttl {
                    Some((_, -1)) => {}
                    Some((at, t)) => v.push(format!("{what} was abandoned but TimeToLive answered {t} at {at:.2} s (bound {due:.2} s)")),
                    None => v.push(format!("{what}: TimeToLive never answered at the end")),
                }
                for k in &keys {
                    if run.fin.listing.present.contains_key(k) {
                        v.push(format!("{what} was abandoned but {k} is still in the final list (revision {fin_rev})"));
                    }
                }
                if let (Some(g), Some(last)) = (gone_at, last_ok) {
                    expiries.push(format!(
                        "{:<9} TTL {} s: last renewal {:>5.2} s, gone {:>5.2} s: {:+.2} s after its TTL, {:.2} s inside the bound",
                        p.name,
                        p.ttl,
                        last.invoke,
                        g,
                        g - (last.invoke + ttl),
                        due - last_deletion.unwrap_or(g)
                    ));
                }
            }
            // 3. Revoked: gone at once.
            Kind::Revoked { .. } => {
                let answered = r.revokes.iter().find(|c| !matches!(c.outcome, Outcome::Unknown(_)));
                match answered {
                    None => v.push(format!("{what}: no revoke was answered ({})", fmt_calls(&r.revokes.iter().collect::<Vec<_>>()))),
                    Some(c) => {
                        match r.after_revoke {
                            Some((-1, 0)) => {}
                            Some((t, n)) => v.push(format!("{what}: right after its revoke was answered at {:.2} s, TimeToLive answered {t} and {n} of its keys were still there", c.ret)),
                            None => v.push(format!("{what}: could not read it after its revoke")),
                        }
                        if c.outcome == Outcome::Ok {
                            for e in dels.iter().filter(|e| e.revision > c.revision) {
                                v.push(format!("{what}: its revoke was answered at revision {} but {} was deleted at revision {}", c.revision, e.key, e.revision));
                            }
                        }
                        let missing: Vec<&String> = keys.iter().filter(|k| !deleted.contains(k.as_str())).collect();
                        if !missing.is_empty() {
                            v.push(format!("{what} was revoked at {:.2} s but {missing:?} never saw a DELETE", c.ret));
                        }
                        if final_ttl.is_none_or(|(_, t)| t != -1) {
                            v.push(format!("{what} was revoked at {:.2} s but TimeToLive at the end answered {final_ttl:?}", c.ret));
                        }
                        expiries.push(format!(
                            "{:<9} TTL {} s: revoke {:.2}–{:.2} s ({:?}), gone {}",
                            p.name,
                            p.ttl,
                            c.invoke,
                            c.ret,
                            c.outcome,
                            gone_at.map_or("-".into(), |g| format!("{g:.2} s")),
                        ));
                    }
                }
            }
        }
    }

    let _ = writeln!(s, "[leases] {} leases: {counts:?}", run.leases.len());
    let _ = writeln!(s, "[leases] calls: {ok} grants and keep-alives answered, {unknown} unanswered or failed, {not_found} answered \"not found\"; clients moved to another member {moves} times");
    let faults: Vec<String> = run.faults.iter().map(|f| format!("{:?} member-{} {:.1}–{:.1} s", f.fault, f.member, f.from, f.to)).collect();
    let _ = writeln!(s, "[leases] faults (until healthy again): {}; faults ended {:.1} s", faults.join(", "), run.faults_end);
    let deletes = run.events.iter().filter(|e| e.delete).count();
    let _ = writeln!(s, "[leases] watch: {} events ({deletes} DELETE), {} lists; final revision {fin_rev}", run.events.len(), run.listings.len());
    let _ = writeln!(s, "[leases] kept alive: {claimed} claimed and alive; {} not claimed (a gap reached TTL − {MARGIN} s): {unclaimed:?}", unclaimed.len());
    let _ = writeln!(s, "[leases] expiries (bound: TTL + {:.0} s after the later of the last renewal and the faults' end):", run.bound);
    for e in expiries {
        let _ = writeln!(s, "[leases]   {e}");
    }
    (s, v)
}

/// The checker fails on histories that break each promise (and passes the one that keeps them).
mod checker {
    use super::*;

    fn call(invoke: f64, outcome: Outcome) -> Call {
        Call { invoke, ret: invoke + 0.01, outcome, member: 0, revision: 0 }
    }

    /// A lease renewed successfully at each of `renewed` (the first is its grant).
    fn lease(i: i64, kind: Kind, ttl: i64, keys: usize, renewed: &[f64]) -> LeaseRecord {
        let plan = Plan { name: format!("l{i}"), id: 100 + i, ttl, kind, grant_at: 0.0, keys, member: 0 };
        LeaseRecord { plan, renewals: renewed.iter().map(|t| call(*t, Outcome::Ok)).collect(), granted: true, revokes: Vec::new(), after_revoke: None, puts_failed: 0, moves: 0 }
    }

    fn event(at: f64, revision: i64, key: &str, delete: bool, lease: i64) -> Event {
        Event { at, revision, key: key.into(), delete, lease }
    }

    fn every(from: f64, to: f64, step: f64) -> Vec<f64> {
        (0..).map(|i| from + step * i as f64).take_while(|t| *t <= to).collect()
    }

    /// A history that keeps every promise: `l0` kept alive (TTL 5 s, renewed every second until
    /// 20 s), `l1` abandoned at 10 s (TTL 4 s) and gone at 14.5 s with both its keys at once.
    fn clean() -> Run {
        let leases = vec![lease(0, Kind::Kept, 5, 1, &every(0.0, 20.0, 1.0)), lease(1, Kind::Stops { at: 10.0 }, 4, 2, &every(0.0, 10.0, 1.0))];
        let events = vec![
            event(0.1, 2, "/leases/l0/k0", false, 100),
            event(0.1, 3, "/leases/l1/k0", false, 101),
            event(0.1, 4, "/leases/l1/k1", false, 101),
            event(14.5, 5, "/leases/l1/k0", true, 0),
            event(14.5, 5, "/leases/l1/k1", true, 0),
        ];
        let fin = Final {
            listing: Listing { ret: 20.4, revision: 5, present: [("/leases/l0/k0".to_string(), 100)].into() },
            ttl: [(100, (20.5, 5)), (101, (20.5, -1))].into(),
        };
        Run { leases, events, listings: Vec::new(), faults: Vec::new(), faults_end: 8.0, fin, bound: 10.0 }
    }

    fn violations(run: &Run) -> Vec<String> {
        check(run).1
    }

    fn assert_caught(run: &Run, what: &str) {
        let v = violations(run);
        assert!(v.iter().any(|m| m.contains(what)), "expected a violation with {what:?}, got {v:#?}");
    }

    #[test]
    fn checker_passes_a_history_that_keeps_every_promise() {
        assert_eq!(violations(&clean()), Vec::<String>::new());
    }

    #[test]
    fn checker_catches_an_expiry_before_ttl_after_the_last_renewal() {
        let mut run = clean();
        // Abandoned after its renewal at 10 s, TTL 4 s: gone at 13.5 s is 0.5 s early.
        for e in run.events.iter_mut().filter(|e| e.delete) {
            e.at = 13.5;
        }
        assert_caught(&run, "lease l1 (id 0x65, TTL 4 s) expired early: DELETE of /leases/l1/k0 at revision 5 arrived at 13.50 s, 0.50 s before TTL");
        // A list that no longer has the key is evidence too.
        let mut run = clean();
        run.listings.push(Listing { ret: 12.0, revision: 5, present: [("/leases/l0/k0".to_string(), 100)].into() });
        assert_caught(&run, "a linearizable list answered at 12.00 s no longer had its key");
    }

    #[test]
    fn checker_does_not_count_an_unanswered_renewal() {
        let mut run = clean();
        // A keep-alive at 12 s without an answer may have renewed l1 (then it goes by 16 s),
        // or not (then 14.5 s is right): no violation either way.
        run.leases[1].renewals.push(Call { invoke: 12.0, ret: 13.0, outcome: Outcome::Unknown("no answer".into()), member: 1, revision: 0 });
        assert_eq!(violations(&run), Vec::<String>::new());
        // Answered, it must count.
        run.leases[1].renewals.last_mut().unwrap().outcome = Outcome::Ok;
        assert_caught(&run, "expired early");
    }

    #[test]
    fn checker_catches_a_kept_lease_that_expired() {
        let mut run = clean();
        run.fin.ttl.insert(100, (20.5, -1));
        run.fin.listing.present.clear();
        assert_caught(&run, "lease l0 (id 0x64, TTL 5 s) was kept alive (widest gap 1.01 s < TTL − 0.5 s, from 19.00 to 20.01 s) but expired: TimeToLive answered -1 at 20.50 s; /leases/l0/k0 is not on it in the final list");
        // A kept lease with a gap of its TTL is not claimed.
        let mut run = clean();
        run.leases[0].renewals.retain(|c| !(12.0..17.0).contains(&c.invoke));
        run.fin.ttl.insert(100, (20.5, -1));
        run.fin.listing.present.clear();
        assert_eq!(violations(&run), Vec::<String>::new());
        assert!(check(&run).0.contains("1 not claimed"), "{}", check(&run).0);
    }

    #[test]
    fn checker_catches_an_abandoned_lease_that_lives_on() {
        let mut run = clean();
        run.events.retain(|e| !e.delete);
        run.fin.ttl.insert(101, (20.5, 2));
        run.fin.listing.present.insert("/leases/l1/k0".into(), 101);
        let v = violations(&run);
        assert_caught(&run, "lease l1 (id 0x65, TTL 4 s) was abandoned but [\"/leases/l1/k0\", \"/leases/l1/k1\"] never saw a DELETE (waited until 24.01 s: TTL + 10 s after 10.01 s)");
        assert!(v.iter().any(|m| m.contains("TimeToLive answered 2 at 20.50 s")), "{v:#?}");
        assert!(v.iter().any(|m| m.contains("/leases/l1/k0 is still in the final list")), "{v:#?}");
        // Gone, but after the bound.
        let mut run = clean();
        for e in run.events.iter_mut().filter(|e| e.delete) {
            e.at = 24.5;
        }
        assert_caught(&run, "its keys went only at 24.50 s, after the bound 24.01 s");
    }

    #[test]
    fn checker_catches_keys_deleted_apart_and_keys_of_a_live_lease_deleted() {
        let mut run = clean();
        run.events[4].revision = 6;
        assert_caught(&run, "lease l1 (id 0x65, TTL 4 s): its keys were deleted at different revisions {5, 6}");
        let mut run = clean();
        run.events.pop();
        assert_caught(&run, "only {\"/leases/l1/k0\"} of its keys");
        let mut run = clean();
        run.events.push(event(19.0, 5, "/leases/l0/k0", true, 0));
        assert_caught(&run, "lease l0 (id 0x64, TTL 5 s) is alive at the end (TimeToLive 5 s at 20.50 s) but its key /leases/l0/k0 was deleted at revision 5");
    }

    #[test]
    fn checker_catches_a_revoke_that_did_not_take_effect_at_once() {
        let mut run = clean();
        let mut r = lease(2, Kind::Revoked { at: 6.0 }, 5, 1, &every(0.0, 6.0, 1.0));
        r.revokes.push(Call { invoke: 6.5, ret: 6.6, outcome: Outcome::Ok, member: 2, revision: 7 });
        r.after_revoke = Some((-1, 0));
        run.leases.push(r);
        run.events.push(event(0.1, 6, "/leases/l2/k0", false, 102));
        run.events.push(event(6.6, 7, "/leases/l2/k0", true, 0));
        run.fin.ttl.insert(102, (20.5, -1));
        assert_eq!(violations(&run), Vec::<String>::new());
        run.leases[2].after_revoke = Some((3, 1));
        run.events.last_mut().unwrap().revision = 8;
        let v = violations(&run);
        assert!(v.iter().any(|m| m.contains("right after its revoke was answered at 6.60 s, TimeToLive answered 3 and 1 of its keys were still there")), "{v:#?}");
        assert!(v.iter().any(|m| m.contains("its revoke was answered at revision 7 but /leases/l2/k0 was deleted at revision 8")), "{v:#?}");
    }
}
