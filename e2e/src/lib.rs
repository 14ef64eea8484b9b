//! End-to-end harness: real `kubelab` (and real etcd) processes on loopback, driven by real clients.
//!
//! The tests in `e2e/tests/` and the `store-bench` binary use this crate to
//! stand up small clusters the way an operator would — separate processes,
//! separate data directories, TCP on 127.0.0.1 — and then break them on purpose.
//!
//! # Tour
//! 1. [`ports`] hands out loopback ports that no other test process on the machine is
//!    using (a reservation file per port, outside the kernel's ephemeral range, so a
//!    member restarted after `kill -9` gets its own ports back).
//! 2. [`process`] starts one process with its stdout/stderr in files, and stops it by
//!    PID: SIGKILL for fault tests, SIGTERM (then SIGKILL after a grace period) for a
//!    clean stop. A [`process::Process`] is always killed and reaped on drop, and the
//!    child dies with the thread that spawned it (`PR_SET_PDEATHSIG`) if the test
//!    process itself is killed.
//! 3. [`proxy`] is a TCP proxy mesh: one proxy per ordered member pair `i→j`, so that
//!    [`StoreCluster::partition`] can cut a member off from the others in both directions.
//! 4. [`cluster`] is [`StoreCluster`]: N members of `kubelab store` or of real etcd 3.4
//!    (same flag names), with `kill9`, `restart`, `partition`/`heal`, `replace` (a member that
//!    lost its disk, removed and added back), `power_loss`, `leader` and `wait_healthy`. When
//!    a test panics, dropping the cluster prints the tail of every member's log.
//!    [`lazyfs`] mounts a member's data directory through the `lazyfs` binary
//!    (`src/bin/lazyfs/`, FUSE), which holds unsynced writes in memory and drops them on
//!    command: a power loss, where kill -9 is only a crash.
//! 5. [`etcdctl`] runs Debian's `etcdctl` (API v3) against a cluster.
//! 6. [`apiserver`] is [`apiserver::ApiCluster`]: a store (one kubelab member, or three real
//!    etcd 3.4 members) + `kubelab apiserver` (+ optionally `kubelab controller-manager`),
//!    with the pinned kubectl 1.32 (temporary `$HOME`), a kube-rs client and `restart_store`.
//! 7. [`writers`] are concurrent clients that record exactly which puts were acknowledged,
//!    and check that every member serves them (serializable reads, member by member).
//! 8. [`containerd`] is [`containerd::Containerd`]: a private containerd (own sockets, state and
//!    persistent mount namespace) with a CNI bridge, for the node agent's tests; it imports the
//!    images `make images` builds and tears down every pod, shim and mount it made; its
//!    registry directory (`certs.d`) tells it how to reach a registry.
//!    [`registry`] is [`registry::Registry`]: Debian's distribution registry on loopback with TLS
//!    of its own CA and an htpasswd password, and `skopeo copy` to push image tarballs to it.
//! 9. Time: a test never sleeps to let something happen. [`poll_until`] waits for a condition,
//!    with a deadline and what was last seen when it passes; [`hold_for`] checks, all through a
//!    period, that something does *not* happen (a pod is not restarted, a Lease not renewed).
//!    Every deadline the harness waits on is stretched by [`scaled`] on a slower machine.
//!
//! # Environment
//! - `KUBELAB_BIN`: the kubelab binary (default: next to the test executable).
//! - `KUBELAB_FAILPOINTS_BIN`: kubelab built with failpoints (default: next to the kubelab binary).
//! - `ETCD_BIN`: real etcd 3.4 (default `/var/cache/kubelab/etcd/usr/bin/etcd`, from `make deps`).
//! - `ETCDCTL_BIN`: etcdctl (default `/usr/bin/etcdctl`, Debian's etcd-client).
//! - `LAZYFS_BIN`: the lazyfs binary (default: next to the test executable).
//! - `E2E_STORE=etcd`: run the store tests against real etcd, to check the tests themselves.
//! - `E2E_SLOWDOWN=N`: this machine is about N times slower than a development host (an emulated
//!   guest): every harness deadline is N times longer ([`slowdown`]).
//! - `E2E_PROXY=0`: kubelab members talk to each other directly (the partition test still
//!   uses the proxy, which it needs).
//! - `KUBELAB_IMAGES`: where `pause.tar` and `busybox.tar` are (default
//!   `$CARGO_TARGET_DIR/images`, else `<workspace>/target/images`, as `make images` writes them).
//! - `E2E_KEEP_DIRS=1`: keep each cluster's data and logs after the test.
//! - `E2E_SNAPSHOT_KEYS`: keys written while a member is down in `store_snapshot` (3000).
//!
//! # Implementation caveats
//! - The pairwise proxy relies on kubelab's member IDs depending on name + cluster token
//!   only. etcd derives member IDs from peer URLs, so every etcd member must be given the
//!   same `--initial-cluster`: an etcd cluster runs without the proxy and cannot be
//!   partitioned (starting one with `proxy: true` is an error, not a silent downgrade).
//! - Ports are reserved between cooperating harness processes only; an unrelated program
//!   may still take a port between reservation and bind (unlikely below 32768).
//! - Processes are plain children: no cgroups, no network namespaces.
//! - [`lazyfs`] needs root and `/dev/fuse` (it mounts with mount(2) itself, no `fusermount3`).
//! - [`containerd`] is the exception: it needs root, and leaves a few host-wide traces it cannot
//!   own alone (`/run/containerd` as an empty mount point, `/var/lib/cni/results`,
//!   `net.ipv4.ip_forward=1`); its module docs list them.

pub mod apiserver;
pub mod bench;
pub mod background;
pub mod cluster;
pub mod containerd;
pub mod etcdctl;
pub mod lab;
pub mod lazyfs;
pub mod mermaid;
pub mod nodeagent;
pub mod nodelab;
pub mod ports;
pub mod process;
pub mod proxy;
pub mod registry;
pub mod robustness;
pub mod writers;

use std::path::PathBuf;
use std::time::Duration;

pub use cluster::{Flavor, StoreCluster, StoreOptions, StoreTls};

/// How long a single client RPC may take before the harness gives up on it.
pub const RPC_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a freshly started cluster gets to elect a leader and answer on every member.
pub const HEALTHY_TIMEOUT: Duration = Duration::from_secs(30);
/// Grace period between SIGTERM and SIGKILL on a clean stop.
pub const STOP_GRACE: Duration = Duration::from_secs(10);

/// How many times slower than the machines the harness's deadlines were measured on this one is:
/// `$E2E_SLOWDOWN`, a whole number, 1 when unset. The fresh-machine check sets it in an emulated
/// guest (10-50x slower CPU), where "a healthy cluster within 30 s" would fail for want of time
/// rather than for a fault. Every harness wait (the constants above, [`poll_until`], a kubectl or
/// etcdctl run, containerd's start) goes through [`scaled`]; a test that asserts an upper bound
/// on how long something took decides for itself, since a bound that grows past what it tells
/// apart (a 1 s grace period from a 60 s one) asserts nothing.
pub fn slowdown() -> u32 {
    static SLOWDOWN: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *SLOWDOWN.get_or_init(|| match std::env::var("E2E_SLOWDOWN") {
        Err(_) => 1,
        Ok(v) => match v.trim().parse::<u32>() {
            Ok(n) if n >= 1 => n,
            _ => panic!("E2E_SLOWDOWN={v:?}: expected a whole number of at least 1"),
        },
    })
}

/// A deadline measured on the development machines, stretched by [`slowdown`].
pub fn scaled(d: Duration) -> Duration {
    d * slowdown()
}

/// A client's own `--timeout=<n>s` flag for a wait of `secs` on a development machine, [`scaled`].
pub fn timeout_flag(secs: u64) -> String {
    format!("--timeout={}s", scaled(Duration::from_secs(secs)).as_secs())
}

/// The `kubelab` binary: `$KUBELAB_BIN`, else the one cargo built next to the running
/// executable (`<target>/<profile>/deps/<test>` → `<target>/<profile>/kubelab`;
/// `<target>/<profile>/store-bench` → `<target>/<profile>/kubelab`).
pub fn kubelab_bin() -> anyhow::Result<PathBuf> {
    if let Some(p) = std::env::var_os("KUBELAB_BIN") {
        return Ok(PathBuf::from(p));
    }
    let exe = std::env::current_exe()?;
    let mut dir = exe
        .parent()
        .ok_or_else(|| anyhow::anyhow!("current_exe {} has no parent", exe.display()))?
        .to_path_buf();
    if dir.file_name().is_some_and(|n| n == "deps") {
        dir.pop();
    }
    let bin = dir.join("kubelab");
    anyhow::ensure!(
        bin.exists(),
        "kubelab binary not found at {} (build it with `cargo build --bin kubelab`, or set KUBELAB_BIN)",
        bin.display()
    );
    Ok(bin)
}

/// The store built with failpoints (`kubelab-failpoints`, made by `make build`):
/// `$KUBELAB_FAILPOINTS_BIN`, else next to [`kubelab_bin`].
pub fn kubelab_failpoints_bin() -> anyhow::Result<PathBuf> {
    let bin = match std::env::var_os("KUBELAB_FAILPOINTS_BIN") {
        Some(p) => PathBuf::from(p),
        None => kubelab_bin()?.with_file_name("kubelab-failpoints"),
    };
    anyhow::ensure!(
        bin.exists(),
        "the failpoint build of kubelab was not found at {} (build it with `cargo build -p kubelab --features failpoints --bin kubelab-failpoints`, or set KUBELAB_FAILPOINTS_BIN)",
        bin.display()
    );
    Ok(bin)
}

/// Where `scripts/fetch-etcd.sh` (run by `make deps`) unpacks Debian's etcd-server.
pub const DEFAULT_ETCD_BIN: &str = "/var/cache/kubelab/etcd/usr/bin/etcd";

/// The real etcd 3.4 binary: `$ETCD_BIN`, else [`DEFAULT_ETCD_BIN`].
pub fn etcd_bin() -> anyhow::Result<PathBuf> {
    let bin = std::env::var_os("ETCD_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(DEFAULT_ETCD_BIN));
    anyhow::ensure!(
        bin.exists(),
        "etcd binary not found at {} — run `make deps` (scripts/fetch-etcd.sh) or set ETCD_BIN",
        bin.display()
    );
    Ok(bin)
}

/// Which store the tests run against: `E2E_STORE=etcd` points the fault and snapshot
/// tests at real etcd (useful to check a test itself); anything else means kubelab.
pub fn flavor_from_env() -> Flavor {
    match std::env::var("E2E_STORE").as_deref() {
        Ok("etcd") => Flavor::Etcd,
        _ => Flavor::Kubelab,
    }
}

/// Connects an etcd-client to the given endpoints with the harness's timeouts.
pub async fn connect(
    endpoints: &[String],
    timeout: Duration,
) -> anyhow::Result<etcd_client::Client> {
    connect_tls(endpoints, timeout, None).await
}

/// [`connect`] to `https://` endpoints with `tls` (a CA and a client certificate).
pub async fn connect_tls(
    endpoints: &[String],
    timeout: Duration,
    tls: Option<etcd_client::TlsOptions>,
) -> anyhow::Result<etcd_client::Client> {
    let timeout = scaled(timeout);
    let mut opts = etcd_client::ConnectOptions::new()
        .with_connect_timeout(scaled(Duration::from_secs(2)))
        .with_timeout(timeout);
    if let Some(tls) = tls {
        opts = opts.with_tls(tls);
    }
    let fut = etcd_client::Client::connect(endpoints, Some(opts));
    match tokio::time::timeout(timeout, fut).await {
        Ok(r) => Ok(r?),
        Err(_) => anyhow::bail!("connecting to {endpoints:?} timed out after {timeout:?}"),
    }
}

/// Runs `f` until it returns `Ok(Some(_))`, sleeping `every` between tries, for at most `deadline`:
/// the harness's one way to wait for a condition (never a fixed sleep). `Ok(None)` means "not
/// yet"; an `Err` is retried too, and says what was seen instead, so a check that ends in
/// `anyhow::ensure!(phase == "Running", "phase {phase}")` explains its own timeout: the last
/// error (or "condition not met") is returned with `what` on timeout. `deadline` is [`scaled`].
pub async fn poll_until<T, F, Fut>(
    what: &str,
    deadline: Duration,
    every: Duration,
    mut f: F,
) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<Option<T>>>,
{
    let deadline = scaled(deadline);
    let start = tokio::time::Instant::now();
    let mut last = String::from("condition not met yet");
    loop {
        let remaining = deadline.saturating_sub(start.elapsed());
        match tokio::time::timeout(remaining.max(Duration::from_millis(1)), f()).await {
            Ok(Ok(Some(v))) => return Ok(v),
            Ok(Ok(None)) => {}
            Ok(Err(e)) => last = format!("{e:#}"),
            Err(_) => {
                last = format!(
                    "the last attempt did not finish before the deadline; the one before: {last}"
                )
            }
        }
        if start.elapsed() >= deadline {
            anyhow::bail!("timed out after {deadline:?} waiting for {what}: {last}");
        }
        tokio::time::sleep(every).await;
    }
}

/// Runs `check` every `every` for the whole of `period` (the first time at once, the last time
/// once `period` has passed), failing at the first check that fails. For tests whose point is
/// that something does *not* happen for a while — a container is not restarted, a Lease is not
/// renewed, a second leader does not appear: the period is the assertion, not a wait for
/// something to finish (that is [`poll_until`]), and checking all along also catches a change
/// that comes and goes within it.
pub async fn hold_for<F, Fut>(
    what: &str,
    period: Duration,
    every: Duration,
    mut check: F,
) -> anyhow::Result<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<()>>,
{
    let start = tokio::time::Instant::now();
    loop {
        if let Err(e) = check().await {
            anyhow::bail!(
                "{what}: broken {:?} into the {period:?} it must hold: {e:#}",
                start.elapsed()
            );
        }
        let elapsed = start.elapsed();
        if elapsed >= period {
            return Ok(());
        }
        tokio::time::sleep(every.min(period - elapsed)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[tokio::test]
    async fn hold_for_checks_all_through_the_period_and_once_at_its_end() {
        let checks = AtomicU32::new(0);
        let start = tokio::time::Instant::now();
        hold_for("nothing", Duration::from_millis(50), Duration::from_millis(10), || async {
            checks.fetch_add(1, Ordering::SeqCst);
            Ok(())
        })
        .await
        .expect("holds");
        assert!(start.elapsed() >= Duration::from_millis(50), "{:?}", start.elapsed());
        assert!(checks.load(Ordering::SeqCst) >= 3, "checked {} times", checks.load(Ordering::SeqCst));
    }

    #[tokio::test]
    async fn hold_for_fails_at_the_first_check_that_does_not_hold() {
        let checks = AtomicU32::new(0);
        let err = hold_for("the pod kept", Duration::from_secs(10), Duration::from_millis(1), || async {
            let n = checks.fetch_add(1, Ordering::SeqCst) + 1;
            anyhow::ensure!(n < 3, "restarted at check {n}");
            Ok(())
        })
        .await
        .expect_err("broken at the third check");
        assert_eq!(checks.load(Ordering::SeqCst), 3);
        let msg = format!("{err:#}");
        assert!(msg.starts_with("the pod kept: broken ") && msg.ends_with("restarted at check 3"), "{msg}");
    }

    #[tokio::test]
    async fn poll_until_returns_the_value_or_what_was_last_seen() {
        let tries = AtomicU32::new(0);
        let v = poll_until("three", Duration::from_secs(10), Duration::from_millis(1), || async {
            let n = tries.fetch_add(1, Ordering::SeqCst) + 1;
            Ok((n == 3).then_some(n))
        })
        .await
        .expect("third try");
        assert_eq!(v, 3);

        let err = poll_until::<(), _, _>("Running", Duration::from_millis(20), Duration::from_millis(5), || async {
            anyhow::bail!("phase Pending")
        })
        .await
        .expect_err("never Running");
        let msg = format!("{err:#}");
        assert!(msg.starts_with("timed out after 20ms waiting for Running: phase Pending"), "{msg}");
    }
}
