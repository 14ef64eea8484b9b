//! Membership changes driven by real `etcdctl` (Debian's 3.4): `member list`, `add --learner`,
//! `promote`, `update`, `remove`, and etcd's refusals, while a client keeps writing. The flow is
//! the documented replacement of a member that lost its disk: it is killed and wiped, removed,
//! a new member is added as a learner and started with `--initial-cluster-state existing`,
//! catches up, is promoted, and holds every acknowledged write. `E2E_STORE=etcd` runs the same
//! test against real etcd 3.4, to check that it describes etcd's behaviour.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use e2e::etcdctl::Etcdctl;
use e2e::{StoreCluster, StoreOptions, flavor_from_env, poll_until};

/// One line of `etcdctl member list`: (hex ID, status, name, peer URLs, client URLs, learner).
#[derive(Debug, Clone, PartialEq)]
struct Listed {
    id: String,
    status: String,
    name: String,
    peer_urls: String,
    client_urls: String,
    learner: bool,
}

fn member_list(ctl: &Etcdctl) -> anyhow::Result<Vec<Listed>> {
    let out = ctl.run(&["member", "list"])?.ok()?;
    let mut v = Vec::new();
    for line in out.lines().filter(|l| !l.trim().is_empty()) {
        let f: Vec<&str> = line.split(", ").collect();
        anyhow::ensure!(f.len() == 6, "unexpected member list line {line:?}");
        v.push(Listed {
            id: f[0].into(),
            status: f[1].into(),
            name: f[2].into(),
            peer_urls: f[3].into(),
            client_urls: f[4].into(),
            learner: f[5] == "true",
        });
    }
    Ok(v)
}

/// etcdctl's error for a refused command (its stderr), or a failure if it succeeded.
fn refused(ctl: &Etcdctl, args: &[&str]) -> String {
    let out = ctl.run(args).unwrap();
    assert!(!out.success, "`{}` succeeded: {}", out.command, out.stdout);
    out.stderr
}

/// A client writing one key after another to `endpoint` until stopped; the keys it was told
/// were written.
struct Writer {
    stop: Arc<AtomicBool>,
    acked: Arc<Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Writer {
    async fn start(endpoint: String) -> Writer {
        let stop = Arc::new(AtomicBool::new(false));
        let acked = Arc::new(Mutex::new(Vec::new()));
        let mut c = e2e::connect(&[endpoint], e2e::RPC_TIMEOUT).await.expect("connect the writer");
        let (s, a) = (stop.clone(), acked.clone());
        let task = tokio::spawn(async move {
            let mut n = 0;
            while !s.load(Ordering::Relaxed) {
                let key = format!("/membership/w/{n:05}");
                if c.put(key.clone(), "v", None).await.is_ok() {
                    a.lock().unwrap().push(key);
                }
                n += 1;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        });
        Writer { stop, acked, task }
    }

    fn acked(&self) -> usize {
        self.acked.lock().unwrap().len()
    }

    /// Waits until `more` further writes were acknowledged: the cluster is taking writes.
    async fn wait_for(&self, more: usize, what: &str) {
        let target = self.acked() + more;
        poll_until(what, Duration::from_secs(20), Duration::from_millis(50), || async {
            Ok((self.acked() >= target).then_some(()))
        })
        .await
        .unwrap();
    }

    async fn finish(self) -> Vec<String> {
        self.stop.store(true, Ordering::Relaxed);
        self.task.await.unwrap();
        Arc::try_unwrap(self.acked).unwrap().into_inner().unwrap()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_member_that_lost_its_disk_is_replaced_through_a_learner_while_writes_go_on() {
    let flavor = flavor_from_env();
    // Every member must see the others at the same peer URLs: no proxy mesh.
    let opts = StoreOptions { proxy: false, ..StoreOptions::for_flavor(flavor) };
    let mut c = StoreCluster::start(3, opts).await.expect("start cluster");
    let at = |c: &StoreCluster, i: usize| Etcdctl::new(&[c.endpoint(i)]).unwrap();
    let ctl0 = at(&c, 0);

    // Step 1: `member list` shows the founding members, started voters.
    // Each publishes its name and client URLs through the log once it serves.
    let founding = poll_until("the founding members are started", Duration::from_secs(20), Duration::from_millis(100), || async {
        let l = member_list(&ctl0)?;
        Ok(l.iter().all(|m| m.status == "started").then_some(l))
    })
    .await
    .unwrap();
    assert_eq!(founding.len(), 3, "{founding:?}");
    for (i, name) in ["member-0", "member-1", "member-2"].iter().enumerate() {
        let m = founding.iter().find(|m| m.name == *name).unwrap_or_else(|| panic!("{name} listed: {founding:?}"));
        assert_eq!((m.status.as_str(), m.learner), ("started", false));
        assert_eq!(m.peer_urls, c.peer_url(i));
        assert_eq!(m.client_urls, c.endpoint(i));
    }
    let id = |name: &str| founding.iter().find(|m| m.name == name).unwrap().id.clone();
    let writer = Writer::start(c.endpoint(0)).await;
    writer.wait_for(10, "first writes").await;

    // Step 2: member-2 loses its disk; it is removed (a member that is down may be).
    c.kill9(2);
    std::fs::remove_dir_all(c.member(2).data_dir()).unwrap();
    // (If it led, a request forwarded to it is lost: wait for the others to take writes again.)
    writer.wait_for(5, "writes once member-2 is gone").await;
    let out = ctl0.run(&["member", "remove", &id("member-2")]).unwrap().ok().unwrap();
    assert!(out.contains(&format!("Member {} removed from cluster", id("member-2"))), "{out}");
    assert_eq!(member_list(&ctl0).unwrap().len(), 2);
    let gone = refused(&ctl0, &["member", "remove", &id("member-2")]);
    assert!(gone.contains("etcdserver: member not found"), "{gone}");
    writer.wait_for(10, "writes with two members").await;

    // Step 3: its replacement is added as a learner; etcdctl prints how to start it.
    let new = c.new_member("member-3").unwrap();
    let url = c.peer_url(new);
    // Until member-0 has been connected to every voter for etcd's health interval (5 s), an add
    // is refused as unhealthy.
    let out = poll_until("member-3 is added", Duration::from_secs(30), Duration::from_millis(500), || async {
        let out = ctl0.run(&["member", "add", "member-3", &format!("--peer-urls={url}"), "--learner"])?;
        if out.success {
            return Ok(Some(out.stdout));
        }
        anyhow::ensure!(out.stderr.contains("etcdserver: unhealthy cluster"), "{}", out.stderr);
        Ok(None)
    })
    .await
    .unwrap();
    assert!(out.contains("added to cluster"), "{out}");
    let initial = out
        .lines()
        .find_map(|l| l.strip_prefix("ETCD_INITIAL_CLUSTER=\""))
        .and_then(|l| l.strip_suffix('"'))
        .unwrap_or_else(|| panic!("no ETCD_INITIAL_CLUSTER in {out}"))
        .to_string();
    for want in [format!("member-0={}", c.peer_url(0)), format!("member-1={}", c.peer_url(1)), format!("member-3={url}")] {
        assert!(initial.split(',').any(|p| p == want), "{want} in {initial}");
    }
    let listed = member_list(&ctl0).unwrap();
    let learner = listed.iter().find(|m| m.peer_urls == url).unwrap().clone();
    assert_eq!((learner.status.as_str(), learner.name.as_str(), learner.learner), ("unstarted", "", true), "{listed:?}");
    // etcd's refusals: a peer URL in use, a second learner, promoting a voter.
    let e = refused(&ctl0, &["member", "add", "dup", &format!("--peer-urls={}", c.peer_url(0))]);
    assert!(e.contains("etcdserver: Peer URLs already exists"), "{e}");
    let e = refused(&ctl0, &["member", "add", "second", "--peer-urls=http://127.0.0.1:9", "--learner"]);
    assert!(e.contains("etcdserver: too many learner members in cluster"), "{e}");
    let e = refused(&ctl0, &["member", "promote", &id("member-0")]);
    assert!(e.contains("etcdserver: can only promote a learner member"), "{e}");

    // Step 4: start it with `existing`; it catches up and serves serializable reads, and refuses
    // writes as a learner.
    c.start_added(new, &initial).unwrap();
    let ctl3 = at(&c, new);
    let before = writer.acked.lock().unwrap().clone();
    poll_until("the learner catches up", Duration::from_secs(30), Duration::from_millis(200), || async {
        let out = ctl3.run(&["get", "/membership/w/", "--prefix", "--keys-only", "--consistency=s"])?.ok()?;
        let missing = before.iter().filter(|k| !out.lines().any(|l| l == k.as_str())).count();
        anyhow::ensure!(missing == 0, "{missing} of {} keys missing", before.len());
        Ok(Some(()))
    })
    .await
    .unwrap();
    let e = refused(&ctl3, &["put", "from-learner", "v"]);
    assert!(e.contains("etcdserver: rpc not supported for learner"), "{e}");

    // Step 5: promote it once it is in sync (until then etcd refuses, saying so).
    poll_until("member-3 is promoted", Duration::from_secs(30), Duration::from_millis(200), || async {
        let out = ctl0.run(&["member", "promote", &learner.id])?;
        if out.success {
            return Ok(Some(()));
        }
        anyhow::ensure!(out.stderr.contains("in sync with leader"), "{}", out.stderr);
        Ok(None)
    })
    .await
    .unwrap();
    let listed = member_list(&ctl0).unwrap();
    assert!(listed.iter().all(|m| m.status == "started" && !m.learner), "{listed:?}");
    assert!(listed.iter().any(|m| m.name == "member-3"), "{listed:?}");
    ctl3.run(&["put", "from-member-3", "v"]).unwrap().ok().unwrap();
    writer.wait_for(10, "writes with the new member").await;

    // Step 6: its peer URL is updated (same port, another host name): the others dial it there.
    let renamed = url.replace("127.0.0.1", "localhost");
    let out = ctl0.run(&["member", "update", &learner.id, &format!("--peer-urls={renamed}")]).unwrap().ok().unwrap();
    assert!(out.contains("updated in cluster"), "{out}");
    let listed = member_list(&ctl3).unwrap();
    assert_eq!(listed.iter().find(|m| m.id == learner.id).unwrap().peer_urls, renamed);
    // member-0 stops: member-1 and member-3 are the quorum, so writes through member-3 need
    // its raft traffic at the new URL.
    c.kill9(0);
    poll_until("writes through member-3 with member-0 down", Duration::from_secs(30), Duration::from_millis(200), || async {
        Ok(ctl3.run(&["put", "after-update", "v"])?.success.then_some(()))
    })
    .await
    .unwrap();
    // With a voter down, adding a voter is refused: this member is not connected to all.
    let e = refused(&ctl3, &["member", "add", "member-4", "--peer-urls=http://127.0.0.1:9"]);
    assert!(e.contains("etcdserver: unhealthy cluster"), "{e}");
    c.restart(0).unwrap();
    writer.wait_for(10, "writes once member-0 is back").await;

    // Step 7: every acknowledged write is there, on every member.
    let acked = writer.finish().await;
    assert!(acked.len() >= 50, "{} writes acknowledged", acked.len());
    let all = c.running_endpoints();
    let ctl = Etcdctl::new(&all).unwrap();
    let out = ctl.run(&["get", "/membership/w/", "--prefix", "--keys-only"]).unwrap().ok().unwrap();
    let missing: Vec<&String> = acked.iter().filter(|k| !out.lines().any(|l| l == k.as_str())).collect();
    assert!(missing.is_empty(), "acknowledged writes lost: {missing:?}");

    // Step 8: a running member that is removed learns it and exits, saying so.
    // member-0 came back moments ago: until it has been connected for etcd's health interval
    // (5 s), removing a running voter is refused as unhealthy.
    poll_until("member-1 is removed", Duration::from_secs(30), Duration::from_millis(500), || async {
        let out = ctl3.run(&["member", "remove", &id("member-1")])?;
        if out.success {
            anyhow::ensure!(out.stdout.contains("removed from cluster"), "{}", out.stdout);
            return Ok(Some(()));
        }
        anyhow::ensure!(out.stderr.contains("etcdserver: unhealthy cluster"), "{}", out.stderr);
        Ok(None)
    })
    .await
    .unwrap();
    let deadline = std::time::Instant::now() + e2e::scaled(Duration::from_secs(30));
    while !c.has_exited(1) {
        assert!(std::time::Instant::now() < deadline, "member-1 still runs after its removal:\n{}", c.log_tails(30));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let stderr = std::fs::read_to_string(c.member(1).dir.join("stderr.log")).unwrap();
    assert!(stderr.contains("the member has been permanently removed from the cluster"), "{stderr}");
    poll_until("writes with member-0 and member-3", Duration::from_secs(30), Duration::from_millis(200), || async {
        Ok(ctl3.run(&["put", "after-remove", "v"])?.success.then_some(()))
    })
    .await
    .unwrap();
    let listed = member_list(&ctl3).unwrap();
    assert_eq!(listed.len(), 2, "{listed:?}");
}
