//! A member that falls far behind catches up by snapshot.
//!
//! With a tiny `--snapshot-count` the leader compacts its raft log long before the
//! stopped member comes back, so the only way to catch up is a snapshot install.
//! (Real etcd keeps 5,000 entries after a snapshot for slow followers, so with
//! `E2E_STORE=etcd` this only checks the test unless E2E_SNAPSHOT_KEYS > ~5,100.)

use std::time::Duration;

use e2e::writers::{Writers, wait_member_has};
use e2e::{StoreCluster, StoreOptions, flavor_from_env};

fn keys() -> u64 {
    std::env::var("E2E_SNAPSHOT_KEYS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3000)
}

/// Peers connected directly, as in production: this one is about the snapshot itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn stopped_member_catches_up_by_snapshot() {
    catch_up_by_snapshot(false).await;
}

/// The same through the proxy mesh. While the member is down its proxies accept the peers'
/// connections and close them at once (the target refuses): a peer transport must keep
/// retrying through that and reach the member once it is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn stopped_member_catches_up_by_snapshot_through_proxies() {
    let flavor = flavor_from_env();
    assert!(
        flavor == e2e::Flavor::Kubelab,
        "etcd members cannot run behind the per-pair proxies (E2E_STORE=etcd)"
    );
    catch_up_by_snapshot(true).await;
}

async fn catch_up_by_snapshot(proxy: bool) {
    let opts = StoreOptions {
        snapshot_count: Some(100),
        proxy,
        ..StoreOptions::for_flavor(flavor_from_env())
    };
    let mut c = StoreCluster::start(3, opts).await.expect("start cluster");
    let leader = c.leader().await.expect("leader");
    let behind = (leader + 1) % c.len();
    let others: Vec<String> = (0..c.len())
        .filter(|&i| i != behind)
        .map(|i| c.endpoint(i))
        .collect();

    assert!(
        c.stop(behind),
        "member-{behind} did not stop cleanly on SIGTERM"
    );
    eprintln!(
        "[test] stopped member-{behind}; writing {} keys to {others:?}",
        keys()
    );

    let writers = Writers::start(others, 8, "/snap/");
    writers
        .wait_for_more(keys(), Duration::from_secs(240))
        .await
        .expect("writes while a member is down");
    let (acked, errors) = writers.stop().await;
    eprintln!(
        "[test] {} writes acknowledged ({errors} retried errors)",
        acked.len()
    );

    c.restart(behind).expect("restart");
    wait_member_has(
        &c.endpoint(behind),
        "/snap/",
        &acked,
        Duration::from_secs(120),
    )
    .await
    .expect("the restarted member serves every key");
    c.wait_healthy().await.expect("healthy");

    // It is a full member again: a write through it lands everywhere.
    let mut m = c.client(behind).await.expect("connect");
    e2e::poll_until(
        "a put through the restarted member",
        Duration::from_secs(20),
        Duration::from_millis(200),
        || {
            let mut m = m.clone();
            async move { Ok(m.put("/snap/after", "ok", None).await.map(|_| Some(()))?) }
        },
    )
    .await
    .expect("put through the restarted member");
    let _ = m.status().await;
    let after = std::collections::BTreeMap::from([("/snap/after".to_string(), "ok".to_string())]);
    for i in 0..c.len() {
        wait_member_has(
            &c.endpoint(i),
            "/snap/after",
            &after,
            Duration::from_secs(30),
        )
        .await
        .expect("replicated");
    }
    c.check_alive().expect("no member died on its own");
}
