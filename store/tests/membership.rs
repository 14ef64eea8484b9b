//! Membership changes on members run in-process, driven by the `etcd-client` crate: a learner
//! added, started with `--initial-cluster-state existing`, caught up from the leader's snapshot,
//! promoted, restarted, then removed (it stops, saying why); and etcd's refusals on the way.

use std::time::Duration;

use etcd_client::{Client, GetOptions, MemberAddOptions};

mod common;
use common::{Member, Ready, free_port, start};

const TOKEN: &str = "membership";

/// A member's flags: `peers` is `--initial-cluster` (name, peer URL), `existing` its state.
fn config(name: &str, client: u16, peers: &[(&str, String)], existing: bool, dir: &std::path::Path) -> store::Config {
    common::config(name, dir, client, peers, existing, TOKEN)
}

/// A client once the member's port is open.
async fn client(m: &mut Member) -> Client {
    m.client_when(Ready::Listening).await
}

fn status_of(e: etcd_client::Error) -> (tonic::Code, String) {
    match e {
        etcd_client::Error::GRpcStatus(s) => (s.code(), s.message().to_string()),
        other => panic!("not a gRPC status: {other:?}"),
    }
}

/// Retries `f` until it succeeds (or 20 s pass): a member that is starting, a learner catching up.
async fn eventually<T, F: std::future::Future<Output = Result<T, etcd_client::Error>>>(
    what: &str,
    c: &Client,
    f: impl Fn(Client) -> F,
) -> T {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        match f(c.clone()).await {
            Ok(v) => return v,
            Err(e) if tokio::time::Instant::now() > deadline => panic!("{what}: {e:?}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_learner_is_added_catches_up_is_promoted_and_removed() {
    let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (client_a, client_b) = (free_port(), free_port());
    let (peer_a, peer_b) = (format!("http://127.0.0.1:{}", free_port()), format!("http://127.0.0.1:{}", free_port()));
    let mut a = start(config("a", client_a, &[("a", peer_a.clone())], false, dir_a.path()));
    let mut ca = client(&mut a).await;
    eventually("a serves", &ca, |mut c| async move { c.put("before/0", "v", None).await }).await;
    for i in 1..50 {
        ca.put(format!("before/{i}"), "v", None).await.unwrap();
    }
    // The member publishes its name through the log once it serves.
    let list = eventually("a publishes its name", &ca, |mut c| async move {
        let l = c.member_list().await?;
        match l.members().iter().all(|m| !m.name().is_empty()) {
            true => Ok(l),
            false => Err(etcd_client::Error::InvalidArgs("unstarted".into())),
        }
    })
    .await;
    assert_eq!(list.members().len(), 1);
    let id_a = list.members()[0].id();
    assert_eq!((list.members()[0].name(), list.members()[0].peer_urls()), ("a", &[peer_a.clone()][..]));

    // etcd's refusals, before anything is proposed.
    let e = status_of(ca.member_add([peer_a.clone()], None).await.unwrap_err());
    assert_eq!(e, (tonic::Code::FailedPrecondition, "etcdserver: Peer URLs already exists".into()));
    let e = status_of(ca.member_add(["http://127.0.0.1"], None).await.unwrap_err());
    assert_eq!(e.0, tonic::Code::InvalidArgument, "{e:?}");
    let e = status_of(ca.member_promote(id_a).await.unwrap_err());
    assert_eq!(e, (tonic::Code::FailedPrecondition, "etcdserver: can only promote a learner member".into()));
    let e = status_of(ca.member_remove(12345).await.unwrap_err());
    assert_eq!(e, (tonic::Code::NotFound, "etcdserver: member not found".into()));

    // Step 1: add b as a learner. It is listed, unstarted: no name, no client URLs.
    let added = ca.member_add([peer_b.clone()], Some(MemberAddOptions::new().with_is_learner())).await.unwrap();
    let b_member = added.member().unwrap();
    let id_b = b_member.id();
    assert!(b_member.is_learner());
    assert_eq!(added.member_list().len(), 2);
    let listed = ca.member_list().await.unwrap();
    let b_listed = listed.members().iter().find(|m| m.id() == id_b).unwrap();
    assert_eq!((b_listed.name(), b_listed.client_urls().len(), b_listed.is_learner()), ("", 0, true));
    let e = status_of(ca.member_add(["http://127.0.0.1:9"], Some(MemberAddOptions::new().with_is_learner())).await.unwrap_err());
    assert_eq!(e, (tonic::Code::FailedPrecondition, "etcdserver: too many learner members in cluster".into()));

    // Step 2: start b with `existing`; it finds its ID by its peer URL and catches up.
    let peers = [("a", peer_a.clone()), ("b", peer_b.clone())];
    let mut b = start(config("b", client_b, &peers, true, dir_b.path()));
    let mut cb = client(&mut b).await;
    let serializable = || GetOptions::new().with_prefix().with_serializable();
    let caught_up = eventually("b catches up", &cb, |mut cb| {
        async move {
            let r = cb.get("before/", Some(serializable())).await?;
            if r.count() < 50 { Err(etcd_client::Error::InvalidArgs(format!("{} keys", r.count()))) } else { Ok(r) }
        }
    })
    .await;
    assert_eq!(caught_up.count(), 50);
    assert_eq!(cb.status().await.unwrap().header().unwrap().member_id(), id_b);
    // A learner serves serializable reads and Status, nothing else.
    let e = status_of(cb.put("from-learner", "v", None).await.unwrap_err());
    assert_eq!(e, (tonic::Code::Unavailable, "etcdserver: rpc not supported for learner".into()));
    let e = status_of(cb.get("before/0", None).await.unwrap_err());
    assert_eq!(e.1, "etcdserver: rpc not supported for learner");
    // It published its name.
    eventually("b publishes its name", &ca, |mut ca| {
        async move {
            let l = ca.member_list().await?;
            match l.members().iter().any(|m| m.id() == id_b && m.name() == "b") {
                true => Ok(()),
                false => Err(etcd_client::Error::InvalidArgs("unstarted".into())),
            }
        }
    })
    .await;

    // Step 3: promote it; it then takes writes and linearizable reads.
    let promoted = eventually("promote b", &ca, |mut c| async move { c.member_promote(id_b).await }).await;
    assert!(promoted.members().iter().all(|m| !m.is_learner()));
    eventually("b takes writes", &cb, |mut c| async move { c.put("from-b", "v", None).await }).await;
    assert_eq!(ca.get("from-b", None).await.unwrap().count(), 1);

    // Step 4: both restart on their data directories and keep the two-member configuration.
    a.stop().await;
    b.stop().await;
    let mut a = start(config("a", client_a, &[("a", peer_a.clone())], false, dir_a.path()));
    let mut b = start(config("b", client_b, &peers, true, dir_b.path()));
    let mut ca = client(&mut a).await;
    eventually("the two restart and agree", &ca, |mut c| async move { c.put("after-restart", "v", None).await }).await;
    let cb = client(&mut b).await;
    assert_eq!(eventually("b serves after restart", &cb, |mut c| async move { c.get("after-restart", None).await }).await.count(), 1);
    assert_eq!(ca.member_list().await.unwrap().members().len(), 2);

    // Step 5: remove b; it learns it was removed and stops, saying so.
    let removed = eventually("remove b", &ca, |mut c| async move { c.member_remove(id_b).await }).await;
    assert_eq!(removed.members().iter().map(|m| m.id()).collect::<Vec<_>>(), vec![id_a]);
    let ended = tokio::time::timeout(Duration::from_secs(10), b.task).await.expect("b stops").unwrap();
    assert!(matches!(ended, Err(store::Error::MemberRemoved)), "{ended:?}");
    // A single member again: a quorum of one (once it has a leader: b may have been it, and a
    // proposal forwarded to a leader that stops is lost, as in etcd, so the client retries).
    eventually("a alone takes writes", &ca, |mut c| async move { c.put("after-remove", "v", None).await }).await;
    let e = status_of(ca.member_remove(id_b).await.unwrap_err());
    assert_eq!(e, (tonic::Code::NotFound, "etcdserver: member not found".into()), "a removed ID is gone for good");
    a.stop().await;
}
