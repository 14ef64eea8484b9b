//! Deterministic three-member clusters: real `RaftNode`s over a WAL and sled in temporary directories,
//! connected by `FakeNetwork`, an in-process network under the test's control that drops, delays
//! and partitions messages. Time is logical (ticks); randomness comes from a fixed seed.

use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, RwLock, mpsc};
use std::time::{Duration, Instant};

use prost::Message as _;
use proto::etcd::{PbPutRequest, PbRangeRequest};
use raft::StateRole;
use raft::eraftpb::Message;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use store::apply::{Applied, InternalRaftRequest, Request, StateMachine};
use store::engine::{BackgroundWrites, Engine, SledEngine};
use store::metrics::Metrics;
use store::raft_node::{RaftNode, RaftOptions, ReadySink, logger, read_context, read_context_number};
use store::raft_storage::PeerStorage;
use store::wal::Written;

/// A fake network: messages wait a random number of ticks, may be dropped, and never cross a
/// partition. Clearly a test double; the real transport is `store::transport`.
struct FakeNetwork {
    rng: StdRng,
    in_flight: Vec<(u64, Message)>,
    /// Members cut off from everyone else.
    isolated: HashSet<u64>,
    drop_rate: f64,
    max_delay: u64,
}

impl FakeNetwork {
    fn send(&mut self, now: u64, m: Message) {
        if self.isolated.contains(&m.from) || self.isolated.contains(&m.to) {
            return;
        }
        if self.drop_rate > 0.0 && self.rng.random_bool(self.drop_rate) {
            return;
        }
        let delay = if self.max_delay > 0 { self.rng.random_range(0..=self.max_delay) } else { 0 };
        self.in_flight.push((now + delay, m));
    }

    fn due(&mut self, now: u64) -> Vec<Message> {
        let (due, later): (Vec<_>, Vec<_>) = std::mem::take(&mut self.in_flight).into_iter().partition(|(at, _)| *at <= now);
        self.in_flight = later;
        due.into_iter()
            .filter(|(_, m)| !self.isolated.contains(&m.from) && !self.isolated.contains(&m.to))
            .map(|(_, m)| m)
            .collect()
    }
}

/// Takes a member's outgoing messages into the fake network and its results into the cluster's.
struct Sink<'a> {
    net: &'a mut FakeNetwork,
    tick: u64,
    results: &'a mut BTreeMap<u64, Applied>,
}

impl ReadySink for Sink<'_> {
    fn send(&mut self, msgs: Vec<Message>) {
        for m in msgs {
            self.net.send(self.tick, m);
        }
    }

    fn applied(&mut self, seq: u64, result: store::Result<Applied>) {
        self.results.insert(seq, result.expect("apply"));
    }
}

struct Member {
    raft: RaftNode,
    sm: Arc<RwLock<StateMachine>>,
    /// With a WAL writer thread (as the server runs): its reports.
    written: Option<mpsc::Receiver<store::Result<Written>>>,
    /// The contexts of the ReadIndex requests answered so far.
    reads_answered: Vec<Vec<u8>>,
}

impl Member {
    /// Runs the Ready loop until the member has nothing left to do. With a WAL writer thread,
    /// that includes waiting for it to report what it was given, so that a step ends in the same
    /// state as with synchronous writes.
    fn settle(&mut self, sink: &mut Sink) {
        for _ in 0..100 {
            if self.raft.has_ready() {
                let out = self.raft.on_ready(Instant::now(), sink).expect("ready");
                self.reads_answered.extend(out.read_states.into_iter().map(|rs| rs.request_ctx));
                continue;
            }
            if !self.raft.persisting() {
                return;
            }
            let rx = self.written.as_ref().expect("only a writer thread leaves Readies unwritten");
            let w = rx.recv_timeout(Duration::from_secs(10)).expect("the WAL writer reports").expect("WAL write");
            sink.send(w.messages);
            self.raft.on_persisted(w.number, w.fsync);
        }
        panic!("member {} did not settle", self.raft.id);
    }
}

struct Cluster {
    ids: Vec<u64>,
    dirs: BTreeMap<u64, PathBuf>,
    members: BTreeMap<u64, Option<Member>>,
    net: FakeNetwork,
    opts: RaftOptions,
    tick: u64,
    seq: u64,
    /// Results of proposals, by sequence number.
    results: BTreeMap<u64, Applied>,
    /// Whether members write their WAL and their engine on threads of their own, as the server
    /// does.
    background_wal: bool,
    _tmp: tempfile::TempDir,
}

fn open_member(id: u64, voters: Vec<u64>, dir: &PathBuf, opts: &RaftOptions, background_wal: bool) -> Member {
    let mut engine: Arc<dyn Engine> = Arc::new(SledEngine::open(&dir.join("db")).expect("open engine"));
    if background_wal {
        engine = Arc::new(BackgroundWrites::start(engine, |_| {}).expect("start the engine writer"));
    }
    let sm = Arc::new(RwLock::new(StateMachine::load(engine.clone(), 2, 1024).expect("load state machine")));
    let storage = PeerStorage::open(&dir.join("wal"), engine, sm.clone()).expect("replay the WAL");
    let mut raft = RaftNode::open(id, voters, storage, sm.clone(), opts.clone(), Metrics::new(), &logger()).expect("open raft node");
    let written = background_wal.then(|| {
        let (tx, rx) = mpsc::channel();
        raft.persist_in_background(move |w| {
            let _ = tx.send(w);
        })
        .expect("start the WAL writer");
        rx
    });
    Member { raft, sm, written, reads_answered: Vec::new() }
}

impl Cluster {
    fn new(seed: u64, opts: RaftOptions) -> Self {
        Self::with_wal(seed, opts, false)
    }

    fn with_wal(seed: u64, opts: RaftOptions, background_wal: bool) -> Self {
        let tmp = tempfile::tempdir().expect("tempdir");
        let ids = vec![1, 2, 3];
        let mut dirs = BTreeMap::new();
        let mut members = BTreeMap::new();
        for id in &ids {
            let dir = tmp.path().join(format!("m{id}"));
            members.insert(*id, Some(open_member(*id, ids.clone(), &dir, &opts, background_wal)));
            dirs.insert(*id, dir);
        }
        let net = FakeNetwork {
            rng: StdRng::seed_from_u64(seed),
            in_flight: Vec::new(),
            isolated: HashSet::new(),
            drop_rate: 0.0,
            max_delay: 0,
        };
        Self { ids, dirs, members, net, opts, tick: 0, seq: 1, results: BTreeMap::new(), background_wal, _tmp: tmp }
    }

    /// One logical tick: every live member ticks, receives what is due, and runs its Ready loop.
    fn step(&mut self) {
        self.tick += 1;
        for m in self.net.due(self.tick) {
            if let Some(Some(member)) = self.members.get_mut(&m.to) {
                let _ = member.raft.step(m);
            }
        }
        for id in self.ids.clone() {
            let Some(Some(member)) = self.members.get_mut(&id) else { continue };
            member.raft.tick();
            member.settle(&mut Sink { net: &mut self.net, tick: self.tick, results: &mut self.results });
        }
    }

    fn run(&mut self, ticks: u64) {
        for _ in 0..ticks {
            self.step();
        }
    }

    fn member(&self, id: u64) -> &Member {
        self.members[&id].as_ref().expect("member is running")
    }

    /// The leader all live members agree on, if any.
    fn leader(&self) -> Option<u64> {
        let leaders: Vec<u64> = self
            .members
            .iter()
            .filter_map(|(id, m)| m.as_ref().filter(|m| m.raft.role() == StateRole::Leader).map(|_| *id))
            .filter(|id| !self.net.isolated.contains(id))
            .collect();
        match leaders.as_slice() {
            [one] => Some(*one),
            _ => None,
        }
    }

    /// Waits until one leader exists and every live, connected member knows it.
    fn wait_leader(&mut self, max_ticks: u64) -> u64 {
        for _ in 0..max_ticks {
            self.step();
            if let Some(l) = self.leader() {
                let known = self
                    .members
                    .iter()
                    .filter(|(id, _)| !self.net.isolated.contains(id))
                    .filter_map(|(_, m)| m.as_ref())
                    .all(|m| m.raft.leader() == l);
                if known {
                    return l;
                }
            }
        }
        panic!("no single leader after {max_ticks} ticks");
    }

    fn propose_put(&mut self, on: u64, key: &str, value: &str) -> u64 {
        let seq = self.seq;
        self.seq += 1;
        let req = InternalRaftRequest {
            origin: on,
            seq,
            request: Some(Request::Put(PbPutRequest { key: key.into(), value: value.into(), ..Default::default() })),
        };
        let member = self.members.get_mut(&on).and_then(|m| m.as_mut()).expect("member is running");
        let _ = member.raft.propose(req.encode_to_vec());
        seq
    }

    fn wait_applied(&mut self, seq: u64, max_ticks: u64) {
        for _ in 0..max_ticks {
            if self.results.contains_key(&seq) {
                return;
            }
            self.step();
        }
        panic!("proposal {seq} not applied after {max_ticks} ticks");
    }

    fn crash(&mut self, id: u64) {
        self.members.insert(id, None);
    }

    fn restart(&mut self, id: u64) {
        let m = open_member(id, self.ids.clone(), &self.dirs[&id], &self.opts, self.background_wal);
        self.members.insert(id, Some(m));
    }

    fn get(&self, id: u64, key: &str) -> Option<String> {
        let sm = self.member(id).sm.read().unwrap();
        let r = sm.range(&PbRangeRequest { key: key.into(), ..Default::default() }).unwrap();
        r.kvs.first().map(|kv| String::from_utf8_lossy(&kv.value).into_owned())
    }

    fn state(&self, id: u64) -> Vec<u8> {
        self.member(id).sm.read().unwrap().snapshot_data()
    }

    fn assert_converged(&mut self, max_ticks: u64) {
        for _ in 0..max_ticks {
            self.step();
            let live: Vec<u64> = self.members.iter().filter(|(_, m)| m.is_some()).map(|(id, _)| *id).collect();
            let states: Vec<Vec<u8>> = live.iter().map(|id| self.state(*id)).collect();
            if states.windows(2).all(|w| w[0] == w[1]) {
                return;
            }
        }
        panic!("members did not converge after {max_ticks} ticks");
    }
}

fn small_log() -> RaftOptions {
    RaftOptions { snapshot_count: 20, catchup_entries: 5, ..Default::default() }
}

#[test]
fn three_members_elect_one_leader_and_replicate() {
    let mut c = Cluster::new(1, RaftOptions::default());
    let leader = c.wait_leader(100);
    let follower = c.ids.iter().copied().find(|id| *id != leader).unwrap();
    // A proposal on a follower is forwarded to the leader and answered on the follower.
    let seq = c.propose_put(follower, "k", "v");
    c.run(10);
    assert!(matches!(c.results.get(&seq), Some(Applied::Put(_))), "the follower's proposal was answered");
    c.assert_converged(20);
    for id in c.ids.clone() {
        assert_eq!(c.get(id, "k").as_deref(), Some("v"));
    }
}

#[test]
fn reads_numbered_alike_on_every_member_are_all_answered() {
    let mut c = Cluster::new(4, RaftOptions::default());
    let leader = c.wait_leader(100);
    // raft-rs answers no ReadIndex before the leader has committed an entry of its term.
    let seq = c.propose_put(leader, "k", "v");
    c.wait_applied(seq, 20);
    // Every member asks with its own first number, as each server numbers its reads from 1.
    for id in c.ids.clone() {
        c.members.get_mut(&id).and_then(|m| m.as_mut()).expect("running").raft.read_index(read_context(id, 1));
    }
    // A forwarded read, a heartbeat round and the answer: a few ticks, far from a retry.
    c.run(8);
    for id in c.ids.clone() {
        let answered = &c.member(id).reads_answered;
        assert!(answered.contains(&read_context(id, 1)), "member {id}'s read was answered: {answered:?}");
        assert!(answered.iter().all(|ctx| read_context_number(id, ctx).is_some()), "member {id} got only its own reads");
    }
    // The same number on another member is not this member's read.
    assert_eq!(read_context_number(1, &read_context(2, 1)), None);
    assert_eq!(read_context_number(2, &read_context(2, 7)), Some(7));
}

#[test]
fn losing_the_leader_elects_another_and_nothing_committed_is_lost() {
    lose_the_leader(false);
}

#[test]
fn losing_the_leader_elects_another_and_nothing_committed_is_lost_with_wal_writer_threads() {
    lose_the_leader(true);
}

fn lose_the_leader(background_wal: bool) {
    let mut c = Cluster::with_wal(2, RaftOptions::default(), background_wal);
    let old = c.wait_leader(100);
    let mut acked = Vec::new();
    for i in 0..10 {
        let seq = c.propose_put(old, &format!("k{i}"), "before");
        acked.push((seq, format!("k{i}")));
    }
    c.run(5);
    assert!(acked.iter().all(|(s, _)| c.results.contains_key(s)));
    c.crash(old);
    let new = c.wait_leader(100);
    assert_ne!(new, old);
    let mut last = 0;
    for i in 10..20 {
        last = c.propose_put(new, &format!("k{i}"), "after");
    }
    c.wait_applied(last, 20);
    c.restart(old);
    c.assert_converged(100);
    for i in 0..20 {
        assert!(c.get(old, &format!("k{i}")).is_some(), "k{i} reached the restarted member");
    }
}

#[test]
fn a_partitioned_minority_commits_nothing_and_catches_up_after_healing() {
    let mut c = Cluster::new(3, RaftOptions::default());
    let leader = c.wait_leader(100);
    let minority = c.ids.iter().copied().find(|id| *id != leader).unwrap();
    c.net.isolated.insert(minority);
    let lost = c.propose_put(minority, "minority", "x");
    let ok = c.propose_put(leader, "majority", "y");
    c.run(50);
    assert!(!c.results.contains_key(&lost), "a write through the minority must not commit");
    assert!(c.results.contains_key(&ok), "the majority keeps committing");
    assert_eq!(c.get(minority, "majority"), None);
    // The isolated member campaigns in vain (pre-vote keeps it from disrupting the others).
    assert_ne!(c.member(minority).raft.role(), StateRole::Leader);
    c.net.isolated.clear();
    c.assert_converged(100);
    assert_eq!(c.get(minority, "majority").as_deref(), Some("y"));
    assert_eq!(c.leader(), Some(leader), "healing did not disturb the leader");
}

#[test]
fn a_member_behind_the_compacted_log_catches_up_by_snapshot() {
    catch_up_by_snapshot(false);
}

#[test]
fn a_member_behind_the_compacted_log_catches_up_by_snapshot_with_wal_writer_threads() {
    catch_up_by_snapshot(true);
}

fn catch_up_by_snapshot(background_wal: bool) {
    let mut c = Cluster::with_wal(4, small_log(), background_wal);
    let leader = c.wait_leader(100);
    let behind = c.ids.iter().copied().find(|id| *id != leader).unwrap();
    c.crash(behind);
    for i in 0..200 {
        c.propose_put(leader, &format!("key{i:03}"), &format!("v{i}"));
        if i % 10 == 0 {
            c.step();
        }
    }
    c.run(10);
    assert!(c.member(leader).raft.first_index() > 100, "the leader compacted its log");
    c.restart(behind);
    for _ in 0..200 {
        c.step();
        if c.get(behind, "key199").is_some() {
            break;
        }
    }
    c.assert_converged(200);
    assert!(c.member(behind).raft.first_index() > 100, "the member was restored from a snapshot");
    assert_eq!(c.get(behind, "key199").as_deref(), Some("v199"));
    // And it keeps following afterwards.
    let seq = c.propose_put(leader, "after", "snapshot");
    c.wait_applied(seq, 20);
    c.assert_converged(20);
    assert_eq!(c.get(behind, "after").as_deref(), Some("snapshot"));
}

#[test]
fn progress_despite_dropped_and_delayed_messages() {
    let mut c = Cluster::new(5, RaftOptions::default());
    c.net.drop_rate = 0.2;
    c.net.max_delay = 3;
    let mut pending: Vec<(u64, String)> = Vec::new();
    let mut done = Vec::new();
    for round in 0..300 {
        if round % 3 == 0
            && let Some(l) = c.leader()
        {
            let key = format!("k{round}");
            let seq = c.propose_put(l, &key, "v");
            pending.push((seq, key));
        }
        c.step();
        pending.retain(|(s, k)| {
            if c.results.contains_key(s) {
                done.push(k.clone());
                false
            } else {
                true
            }
        });
    }
    assert!(done.len() > 20, "only {} of the proposals committed under loss", done.len());
    c.net.drop_rate = 0.0;
    c.assert_converged(300);
    for id in c.ids.clone() {
        for k in &done {
            assert!(c.get(id, k).is_some(), "acknowledged {k} missing on member {id}");
        }
    }
}

#[test]
fn restarting_every_member_keeps_what_was_committed() {
    restart_everyone(false);
}

#[test]
fn restarting_every_member_keeps_what_was_committed_with_wal_writer_threads() {
    restart_everyone(true);
}

fn restart_everyone(background_wal: bool) {
    let mut c = Cluster::with_wal(6, small_log(), background_wal);
    let leader = c.wait_leader(100);
    let mut last = 0;
    for i in 0..50 {
        last = c.propose_put(leader, &format!("k{i}"), "v");
    }
    c.wait_applied(last, 20);
    let before = c.state(leader);
    for id in c.ids.clone() {
        c.crash(id);
    }
    for id in c.ids.clone() {
        c.restart(id);
    }
    c.wait_leader(200);
    c.assert_converged(50);
    for id in c.ids.clone() {
        let sm = c.member(id).sm.read().unwrap();
        assert_eq!(sm.kv.current_revision(), 50);
        drop(sm);
        assert_eq!(c.state(id), before);
    }
}
