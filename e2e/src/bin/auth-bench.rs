//! auth-bench: what the API server's secure port costs (issue 25) — TLS, x509 client-certificate
//! authentication and RBAC — against its plain insecure port, in one run on one machine.
//! (Long on purpose: a benchmark reads best top to bottom, each workload beside the figure it prints.)
//!
//! One `kubelab store` member and one `kubelab apiserver` run on loopback. The API server serves
//! both ports: `--insecure-port` (plain HTTP; every request is a superuser's, with neither
//! authentication nor authorization) and `--secure-port` with the PKI `kubelab certs generate`
//! makes (`--tls-cert-file`, `--tls-private-key-file`, `--client-ca-file`, `--authorization-mode
//! RBAC`). The bench is an HTTP/1.1 JSON client (reqwest with rustls, trusting the cluster's CA
//! only), with one shared connection pool per identity, as kubectl is. Three identities:
//! - HTTP: the insecure port;
//! - HTTPS as system:masters: admin.conf's client certificate (O=system:masters), which the
//!   privileged-group authorizer allows before RBAC is asked: TLS and authentication, no RBAC;
//! - HTTPS as an RBAC user: a certificate from `kubelab certs kubeconfig` for `bench-user`
//!   (O=bench-group), allowed by a RoleBinding of its namespace to the ClusterRole `edit`, named
//!   `zz-bench-user` so that it sorts after every other RoleBinding there.
//!
//! Setup (untimed): the PKI; the API server; the controller manager only until the ClusterRole
//! aggregation controller has filled `edit` with its rules, then stopped (so it takes no CPU
//! from the workloads); namespaces `bench` and `bench-bindings`, the user's RoleBinding in each,
//! and a pod `target` in each.
//!
//! Workloads, in order, each batch bounded by a count and by `--max-seconds`:
//! 1. the API server's resident memory (VmRSS, settled) at rest; `--role-bindings` RoleBindings
//!    created in `bench-bindings` binding other users (`user-0000`, …) to `edit`; VmRSS again;
//! 2. pod creates (POST) from `--clients` concurrent clients in namespace `bench`, over HTTP, HTTPS
//!    as system:masters and HTTPS as the RBAC user, in alternating batches (HTTP, masters, user,
//!    user, masters, HTTP, …) so that a machine faster or slower for a while weighs on every side
//!    alike; each side's pool is opened by an untimed warm-up first, so no timed create pays for a
//!    TCP or TLS handshake;
//! 3. GET of one pod, one client, sequential, alternating the same way over HTTP, HTTPS as
//!    system:masters, HTTPS as the RBAC user in `bench` (its RoleBinding the only one there) and in
//!    `bench-bindings` (the RBAC authorizer walks the 1,000 other RoleBindings before its own);
//!    the differences of the means are the authorizer's cost per request, end to end;
//! 4. GET of one pod on a new connection each time, HTTP and HTTPS as the RBAC user: what a TCP
//!    connect and a TLS handshake with a client certificate cost, which the workloads above pay
//!    only when a pool opens a connection.
//!
//! `cargo run --release -p e2e --bin auth-bench -- --help` (or `make bench-auth`)

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use base64::Engine as _;
use clap::Parser;
use e2e::bench::{cpu_time, machine, ms, percentile};
use e2e::process::Process;
use e2e::{StoreCluster, StoreOptions};
use serde_json::{Value, json};

#[derive(Parser, Debug, Clone)]
#[command(about = "Benchmark kubelab's API server over HTTPS with client certificates and RBAC against its plain HTTP port")]
struct Args {
    /// Concurrent clients in the create workload.
    #[arg(long, env = "BENCH_CLIENTS", default_value_t = 32)]
    clients: usize,
    /// Creates in the create workload, per identity (HTTP, HTTPS as masters, HTTPS as the user).
    #[arg(long, env = "BENCH_CONCURRENT_CREATES", default_value_t = 4000)]
    creates: u64,
    /// Batches each create workload is cut into, per identity, alternating between them.
    #[arg(long, env = "BENCH_CREATE_BATCHES", default_value_t = 4)]
    create_batches: u64,
    /// GETs of one pod, per side (HTTP, masters, the user with 0 and with 1,000 other bindings).
    #[arg(long, env = "BENCH_GETS", default_value_t = 3000)]
    gets: u64,
    /// Batches the GETs are cut into, per side, alternating between the sides.
    #[arg(long, env = "BENCH_GET_BATCHES", default_value_t = 10)]
    get_batches: u64,
    /// RoleBindings of other users created in the namespace the authorizer must walk.
    #[arg(long, env = "BENCH_ROLE_BINDINGS", default_value_t = 1000)]
    role_bindings: u64,
    /// GETs on a new connection each, per side (HTTP, HTTPS).
    #[arg(long, env = "BENCH_CONNECTS", default_value_t = 500)]
    connects: u64,
    /// Time cap per batch, in seconds.
    #[arg(long, env = "BENCH_MAX_SECONDS", default_value_t = 20)]
    max_seconds: u64,
}

/// How long a single request may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the API server gets to answer /readyz and bootstrap the `default` namespace.
const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the controller manager gets to aggregate `edit`'s rules.
const AGGREGATION_TIMEOUT: Duration = Duration::from_secs(60);
/// The RBAC user's name (the certificate's CN) and group (its O).
const USER: &str = "bench-user";
const USER_GROUP: &str = "bench-group";
/// Its RoleBinding: `zz-` sorts it after every `user-NNNN`, last in the authorizer's walk.
const USER_BINDING: &str = "zz-bench-user";
/// The ClusterRole every binding refers to (aggregated by the controller manager).
const ROLE: &str = "edit";
/// Where the creates go, and the namespace whose only RoleBinding is the user's.
const NS: &str = "bench";
/// The namespace with `--role-bindings` other RoleBindings before the user's.
const NS_BINDINGS: &str = "bench-bindings";
/// The pod every GET reads, in both namespaces.
const TARGET_POD: &str = "target";
/// Warm-up creates per identity, per client: enough that every client has opened its connection.
const WARMUP_CREATES_PER_CLIENT: u64 = 4;
/// Untimed GETs per side before the timed ones.
const WARMUP_GETS: u64 = 100;

/// One way of reaching the API server: a URL and a client with its own connection pool.
struct Endpoint {
    /// What the figures call it.
    label: &'static str,
    base: String,
    http: reqwest::Client,
}

/// One measured workload: latencies of the operations that succeeded, and the failures.
#[derive(Clone, Debug, Default)]
struct Row {
    elapsed: Duration,
    /// Sorted.
    lat: Vec<Duration>,
    errors: u64,
    first_error: Option<String>,
}

impl Row {
    /// The batches of one workload as one row: their operations over their summed time.
    fn merge(rows: Vec<Row>) -> Self {
        let mut lat = Vec::new();
        let (mut elapsed, mut errors, mut first_error) = (Duration::ZERO, 0, None);
        for r in rows {
            lat.extend(r.lat);
            elapsed += r.elapsed;
            errors += r.errors;
            first_error = first_error.or(r.first_error);
        }
        Self::new(lat, elapsed, errors, first_error)
    }
    fn new(mut lat: Vec<Duration>, elapsed: Duration, errors: u64, first_error: Option<String>) -> Self {
        lat.sort();
        Self {
            elapsed,
            lat,
            errors,
            first_error,
        }
    }
    fn ops(&self) -> u64 {
        self.lat.len() as u64
    }
    fn throughput(&self) -> f64 {
        self.ops() as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
    fn pct(&self, p: f64) -> Duration {
        percentile(&self.lat, p)
    }
    fn mean(&self) -> Duration {
        if self.lat.is_empty() {
            return Duration::ZERO;
        }
        self.lat.iter().sum::<Duration>() / self.lat.len() as u32
    }
}

/// One identity's creates, with the CPU the API server and the bench spent in its batches.
#[derive(Default)]
struct Creates {
    row: Row,
    api_cpu_per_create: Duration,
    bench_cpu_per_create: Duration,
}

/// What the authorizer walks for the RBAC user, read back from the server.
#[derive(Default)]
struct Walk {
    cluster_role_bindings: usize,
    /// Those whose subjects name the user or one of its groups (their roles' rules are tried).
    cluster_role_bindings_applying: usize,
    role_bindings_in_ns: usize,
    role_bindings_in_ns_bindings: usize,
    /// The user's binding's place among the RoleBindings of `bench-bindings`, from 1.
    user_binding_position: usize,
    edit_rules: usize,
}

/// Everything the run measured, for the tables.
#[derive(Default)]
struct Report {
    rss_before: Option<u64>,
    rss_after: Option<u64>,
    bindings_created: u64,
    bindings_elapsed: Duration,
    walk: Walk,
    /// HTTP, HTTPS as masters, HTTPS as the user.
    creates: Vec<Creates>,
    /// HTTP, masters, user with 0 other bindings, user with 1,000.
    gets: Vec<Row>,
    /// HTTP, HTTPS as the user, a new connection each.
    connects: Vec<Row>,
}

/// Where a GET goes and who sends it.
struct GetSide<'a> {
    label: String,
    ep: &'a Endpoint,
    url: String,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let started = Instant::now();

    eprintln!("[bench] starting a one-member kubelab store");
    let opts = StoreOptions {
        proxy: false,
        ..StoreOptions::default()
    };
    let cluster = StoreCluster::start(1, opts).await.context("starting the store")?;
    let store_url = cluster.endpoint(0);

    // The cluster's PKI, for an API server at the secure port.
    let bin = e2e::kubelab_bin()?;
    let insecure = e2e::ports::reserve()?;
    let secure = e2e::ports::reserve()?;
    let secure_base = format!("https://127.0.0.1:{}", secure.port);
    let pki = cluster.root().join("pki");
    let pki_arg = pki.display().to_string();
    certs(&bin, &["generate", "--cert-dir", &pki_arg, "--server", &secure_base])?;
    let user_kubeconfig = certs(
        &bin,
        &["kubeconfig", "--cert-dir", &pki_arg, "--client-name", USER, "--org", USER_GROUP, "--server", &secure_base],
    )?;
    let admin_kubeconfig = std::fs::read_to_string(pki.join("admin.conf")).context("reading admin.conf")?;
    let ca = reqwest::Certificate::from_pem(&std::fs::read(pki.join("ca.crt"))?)?;

    let file = |name: &str| pki.join(name).display().to_string();
    let apiserver_args: Vec<String> = vec![
        "apiserver".into(),
        "--etcd-servers".into(),
        store_url.clone(),
        "--insecure-port".into(),
        insecure.port.to_string(),
        "--bind-address".into(),
        "127.0.0.1".into(),
        "--secure-port".into(),
        secure.port.to_string(),
        "--tls-cert-file".into(),
        file("apiserver.crt"),
        "--tls-private-key-file".into(),
        file("apiserver.key"),
        "--client-ca-file".into(),
        file("ca.crt"),
        "--authorization-mode".into(),
        "RBAC".into(),
    ];
    let log_dir = cluster.root().join("apiserver");
    let mut apiserver = Process::spawn(
        "apiserver",
        &bin,
        &apiserver_args,
        &log_dir,
        &[("NO_COLOR".into(), "1".into())],
    )?;
    let command_line = format!("{} {}", bin.display(), apiserver_args.join(" "));
    eprintln!("[bench] started apiserver pid {}: {command_line}", apiserver.pid());

    let pool = args.clients * 2;
    let plain = Endpoint {
        label: "HTTP (insecure port: no authentication, no authorization)",
        base: format!("http://127.0.0.1:{}", insecure.port),
        http: client_builder(pool).build()?,
    };
    let masters = Endpoint {
        label: "HTTPS as system:masters (TLS, client certificate; RBAC not asked)",
        base: secure_base.clone(),
        http: https_client(&ca, &identity(&admin_kubeconfig).context("admin.conf")?, pool)?,
    };
    let user_identity = identity(&user_kubeconfig).context("the user's kubeconfig")?;
    let user = Endpoint {
        label: "HTTPS as an RBAC user (TLS, client certificate, RBAC)",
        base: secure_base.clone(),
        http: https_client(&ca, &user_identity, pool)?,
    };
    // A new connection for every request: the pool keeps none.
    let plain_fresh = Endpoint {
        label: "HTTP, a new connection each (TCP connect, request)",
        base: plain.base.clone(),
        http: client_builder(0).build()?,
    };
    let user_fresh = Endpoint {
        label: "HTTPS as the RBAC user, a new connection each (TCP connect, TLS handshake with the client certificate, request)",
        base: secure_base.clone(),
        http: https_client(&ca, &user_identity, 0)?,
    };

    let result = async {
        wait_ready(&plain, &masters, &mut apiserver).await?;
        setup(&plain, &user, &bin, &cluster).await?;
        run_workloads(&plain, &masters, &user, &plain_fresh, &user_fresh, apiserver.pid(), &args).await
    }
    .await;
    let died = apiserver.exited();
    let report = match (result, died) {
        (Ok(r), None) => r,
        (r, died) => {
            eprintln!("{}", apiserver.log_tail(40));
            eprintln!("[bench] apiserver: {command_line}");
            if let Some(st) = died {
                bail!("the API server exited during the benchmark ({st}); its log tail is above");
            }
            return r.map(|_| ()).context("benchmarking the API server (its log tail is above)");
        }
    };
    apiserver.terminate();
    drop(cluster);
    print_tables(&args, &report, [&plain, &masters, &user], [&plain_fresh, &user_fresh]);
    eprintln!("[bench] total {:.1}s", started.elapsed().as_secs_f64());
    Ok(())
}

/// `kubelab certs <args>`, which must succeed: its stdout.
fn certs(bin: &std::path::Path, args: &[&str]) -> anyhow::Result<String> {
    let out = std::process::Command::new(bin).arg("certs").args(args).output()?;
    anyhow::ensure!(
        out.status.success(),
        "kubelab certs {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(String::from_utf8(out.stdout)?)
}

/// The client certificate and key of a kubeconfig's (only) user, as one PEM, which is what
/// `reqwest::Identity::from_pem` reads.
fn identity(kubeconfig: &str) -> anyhow::Result<Vec<u8>> {
    let config: Value = serde_norway::from_str(kubeconfig).context("parsing the kubeconfig")?;
    let user = config.pointer("/users/0/user").context("the kubeconfig has no user")?;
    let mut pem = Vec::new();
    for field in ["client-certificate-data", "client-key-data"] {
        let data = user.get(field).and_then(Value::as_str).with_context(|| format!("the user has no {field}"))?;
        let mut decoded = base64::engine::general_purpose::STANDARD
            .decode(data.trim())
            .with_context(|| format!("{field}: not base64"))?;
        if !decoded.ends_with(b"\n") {
            decoded.push(b'\n');
        }
        pem.extend(decoded);
    }
    Ok(pem)
}

/// HTTP/1.1 JSON with a shared pool keeping up to `pool` idle connections, as kubectl is; no
/// proxy from the environment (everything stays on loopback).
fn client_builder(pool: usize) -> reqwest::ClientBuilder {
    reqwest::Client::builder()
        .http1_only()
        .no_proxy()
        .connect_timeout(Duration::from_secs(2))
        .timeout(REQUEST_TIMEOUT)
        .pool_max_idle_per_host(pool)
}

/// Trusts the cluster's CA only (no built-in roots) and presents `identity_pem`.
fn https_client(ca: &reqwest::Certificate, identity_pem: &[u8], pool: usize) -> anyhow::Result<reqwest::Client> {
    Ok(client_builder(pool)
        .tls_certs_only([ca.clone()])
        .identity(reqwest::Identity::from_pem(identity_pem).context("the client certificate and key")?)
        .build()?)
}

/// A request that must answer `want`: the body.
async fn call(ep: &Endpoint, method: reqwest::Method, path: &str, body: Option<Value>, want: u16) -> anyhow::Result<Value> {
    let url = format!("{}{path}", ep.base);
    let mut req = ep.http.request(method.clone(), &url);
    if let Some(b) = body {
        req = req.json(&b);
    }
    let resp = req.send().await.with_context(|| format!("{method} {url}"))?;
    let status = resp.status();
    let text = resp.bytes().await?;
    anyhow::ensure!(
        status.as_u16() == want,
        "{method} {url} as {}: {status} (wanted {want}): {}",
        ep.label,
        String::from_utf8_lossy(&text[..text.len().min(300)])
    );
    Ok(serde_json::from_slice(&text).unwrap_or(Value::Null))
}

/// Waits for /readyz and the bootstrapped `default` namespace on the insecure port, then for
/// /readyz on the secure one; a server that exits explains itself.
async fn wait_ready(plain: &Endpoint, masters: &Endpoint, p: &mut Process) -> anyhow::Result<()> {
    let start = Instant::now();
    loop {
        if let Some(st) = p.exited() {
            bail!("the API server exited at startup ({st})");
        }
        let last = match (
            call(plain, reqwest::Method::GET, "/readyz", None, 200).await,
            call(plain, reqwest::Method::GET, "/api/v1/namespaces/default", None, 200).await,
            call(masters, reqwest::Method::GET, "/readyz", None, 200).await,
        ) {
            (Ok(_), Ok(_), Ok(_)) => return Ok(()),
            (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => format!("{e:#}"),
        };
        if start.elapsed() > READY_TIMEOUT {
            bail!("the API server was not ready within {READY_TIMEOUT:?}: {last}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `edit` with rules (the aggregation controller's work), the namespaces, the user's
/// RoleBindings, the pods the GETs read; checks that the user is who RBAC sees.
async fn setup(plain: &Endpoint, user: &Endpoint, bin: &std::path::Path, cluster: &StoreCluster) -> anyhow::Result<()> {
    // `edit` is an aggregated ClusterRole: the API server creates it without rules and the
    // controller manager's ClusterRole aggregation controller fills them in. It runs only for
    // that, so that no controller takes CPU from the workloads.
    eprintln!("[bench] starting the controller manager until ClusterRole {ROLE} has its rules");
    let cm_args: Vec<String> = vec!["controller-manager".into(), "--master".into(), plain.base.clone()];
    let mut cm = Process::spawn(
        "controller-manager",
        bin,
        &cm_args,
        &cluster.root().join("controller-manager"),
        &[("NO_COLOR".into(), "1".into())],
    )?;
    let start = Instant::now();
    loop {
        let role = call(plain, reqwest::Method::GET, &format!("/apis/rbac.authorization.k8s.io/v1/clusterroles/{ROLE}"), None, 200).await?;
        let creates_pods = role.get("rules").and_then(Value::as_array).is_some_and(|rules| {
            rules.iter().any(|r| {
                let has = |f: &str, x: &str| r.get(f).and_then(Value::as_array).is_some_and(|l| l.iter().any(|v| v == x));
                has("resources", "pods") && has("verbs", "create")
            })
        });
        if creates_pods {
            break;
        }
        if let Some(st) = cm.exited() {
            bail!("the controller manager exited ({st}):\n{}", cm.log_tail(40));
        }
        if start.elapsed() > AGGREGATION_TIMEOUT {
            bail!("ClusterRole {ROLE} had no rule to create pods after {AGGREGATION_TIMEOUT:?}:\n{}", cm.log_tail(40));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    cm.terminate();
    eprintln!("[bench]   aggregated after {:.1}s; controller manager stopped", start.elapsed().as_secs_f64());

    for ns in [NS, NS_BINDINGS] {
        let body = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
        call(plain, reqwest::Method::POST, "/api/v1/namespaces", Some(body), 201).await?;
        call(plain, reqwest::Method::POST, &format!("/api/v1/namespaces/{ns}/pods"), Some(pod(TARGET_POD, ns)), 201).await?;
    }
    // The user's binding in `bench` now; in `bench-bindings` after the others (workload 1).
    call(plain, reqwest::Method::POST, &role_bindings_path(NS), Some(role_binding(USER_BINDING, NS, USER)), 201).await?;
    let start = Instant::now();
    let list = format!("/api/v1/namespaces/{NS}/pods?limit=1");
    while let Err(e) = call(user, reqwest::Method::GET, &list, None, 200).await {
        if start.elapsed() > READY_TIMEOUT {
            bail!("the RBAC user could not list pods in {NS} within {READY_TIMEOUT:?}: {e:#}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The user is not a superuser: RBAC refuses it what `edit` does not give.
    call(user, reqwest::Method::GET, "/api/v1/nodes", None, 403).await.context("the RBAC user must not list nodes")?;
    Ok(())
}

fn role_bindings_path(ns: &str) -> String {
    format!("/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings")
}

/// A RoleBinding of [`ROLE`] to one user, as `kubectl create rolebinding --clusterrole=edit --user=…` sends it.
fn role_binding(name: &str, ns: &str, user: &str) -> Value {
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": name, "namespace": ns},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": ROLE},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
    })
}

/// A small busybox pod, as `kubectl run` would send it.
fn pod(name: &str, ns: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": {"app": "bench"}},
        "spec": {
            "containers": [{
                "name": "busybox",
                "image": "busybox:1.36",
                "command": ["sleep", "3600"],
            }],
            "restartPolicy": "Never",
        },
    })
}

/// The VmRSS of `pid` in bytes.
fn rss(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// The VmRSS of `pid` once it has settled: sampled every 500 ms after a first pause of a second,
/// until two samples in a row are within 1 % of each other (at most 20 samples).
async fn settled_rss(pid: u32) -> Option<u64> {
    tokio::time::sleep(Duration::from_secs(1)).await;
    let mut last = rss(pid)?;
    for _ in 0..20 {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let now = rss(pid)?;
        if now.abs_diff(last) * 100 <= last {
            return Some(now);
        }
        last = now;
    }
    eprintln!("[bench] warning: the API server's RSS did not settle within 10 s");
    Some(last)
}

/// Sends `body_for(i)` with `method` to `path_for(i)` for i in `indexes`, from `clients`
/// concurrent clients sharing `ep`'s pool, at most `cap`; each must answer `want`.
async fn send_many(
    ep: &Endpoint,
    indexes: std::ops::Range<u64>,
    clients: usize,
    cap: Duration,
    want: u16,
    request: impl Fn(u64) -> (String, Value) + Send + Sync + 'static,
) -> anyhow::Result<Row> {
    let end = indexes.end;
    let next = Arc::new(AtomicU64::new(indexes.start));
    let errors = Arc::new(AtomicU64::new(0));
    let first_error = Arc::new(std::sync::Mutex::new(None::<String>));
    let request = Arc::new(request);
    let start = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..clients {
        let (next, errors, first_error, request) = (next.clone(), errors.clone(), first_error.clone(), request.clone());
        let (http, base) = (ep.http.clone(), ep.base.clone());
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= end || start.elapsed() > cap {
                    break;
                }
                let (path, body) = request(i);
                // Encoded outside the timing, as each side's is.
                let body = serde_json::to_vec(&body).unwrap_or_default();
                let t = Instant::now();
                let r: anyhow::Result<()> = async {
                    let resp = http
                        .post(format!("{base}{path}"))
                        .header("content-type", "application/json")
                        .body(body)
                        .send()
                        .await?;
                    let status = resp.status();
                    let text = resp.bytes().await?;
                    anyhow::ensure!(
                        status.as_u16() == want,
                        "POST {path}: {status}: {}",
                        String::from_utf8_lossy(&text[..text.len().min(300)])
                    );
                    Ok(())
                }
                .await;
                match r {
                    Ok(()) => lat.push(t.elapsed()),
                    Err(e) => {
                        if errors.fetch_add(1, Ordering::Relaxed) == 0
                            && let Ok(mut f) = first_error.lock()
                        {
                            *f = Some(format!("{e:#}"));
                        }
                    }
                }
            }
            lat
        }));
    }
    let mut lat = Vec::new();
    for t in tasks {
        lat.extend(t.await?);
    }
    let first = first_error.lock().ok().and_then(|f| f.clone());
    let row = Row::new(lat, start.elapsed(), errors.load(Ordering::Relaxed), first);
    if let Some(e) = &row.first_error {
        eprintln!("[bench]     {} errors; the first: {e}", row.errors);
    }
    Ok(row)
}

/// Creates pods `<prefix>-<i>` in [`NS`] for i in `indexes` from `clients` concurrent clients.
async fn create_pods(ep: &Endpoint, prefix: &str, indexes: std::ops::Range<u64>, clients: usize, cap: Duration) -> anyhow::Result<Row> {
    let prefix = prefix.to_string();
    let row = send_many(ep, indexes, clients, cap, 201, move |i| {
        (format!("/api/v1/namespaces/{NS}/pods"), pod(&format!("{prefix}-{i}"), NS))
    })
    .await?;
    eprintln!(
        "[bench]     {} creates in {:.2}s: {:.0}/s, p50 {}, p99 {}",
        row.ops(),
        row.elapsed.as_secs_f64(),
        row.throughput(),
        ms(row.pct(0.5)),
        ms(row.pct(0.99))
    );
    Ok(row)
}

/// `n` sequential GETs of `side.url`, at most `cap`.
async fn get_seq(side: &GetSide<'_>, n: u64, cap: Duration) -> Row {
    let mut lat = Vec::new();
    let (mut errors, mut first) = (0, None);
    let start = Instant::now();
    for _ in 0..n {
        if start.elapsed() > cap {
            break;
        }
        let t = Instant::now();
        let r = async {
            let resp = side.ep.http.get(&side.url).send().await?;
            let status = resp.status();
            resp.bytes().await?;
            anyhow::ensure!(status.is_success(), "GET {}: {status}", side.url);
            Ok(())
        }
        .await;
        match r {
            Ok(()) => lat.push(t.elapsed()),
            Err(e) => {
                errors += 1;
                first.get_or_insert(format!("{e:#}"));
            }
        }
    }
    Row::new(lat, start.elapsed(), errors, first)
}

/// The sides in batch `b`'s order: as given in even batches, reversed in odd ones
/// (A B C, C B A, A B C, …), so that no side always follows the same one.
fn batch_order(sides: usize, b: u64) -> Vec<usize> {
    let mut order: Vec<usize> = (0..sides).collect();
    if b % 2 == 1 {
        order.reverse();
    }
    order
}

/// Runs `n` sequential GETs per side in `batches` alternating batches (after an untimed warm-up
/// of each side); one merged row per side.
async fn alternate_gets(sides: &[GetSide<'_>], n: u64, batches: u64, warmup: u64, cap: Duration) -> Vec<Row> {
    for side in sides {
        let _ = get_seq(side, warmup, cap).await;
    }
    let batches = batches.max(1);
    let mut rows: Vec<Vec<Row>> = sides.iter().map(|_| Vec::new()).collect();
    for b in 0..batches {
        let count = (b + 1) * n / batches - b * n / batches;
        for s in batch_order(sides.len(), b) {
            rows[s].push(get_seq(&sides[s], count, cap).await);
        }
    }
    let merged: Vec<Row> = rows.into_iter().map(Row::merge).collect();
    for (side, row) in sides.iter().zip(&merged) {
        if let Some(e) = &row.first_error {
            eprintln!("[bench]     {}: {} errors; the first: {e}", side.label, row.errors);
        }
        eprintln!(
            "[bench]     {}: {} GETs, mean {}, p50 {}, p99 {}",
            side.label,
            row.ops(),
            us(row.mean()),
            us(row.pct(0.5)),
            us(row.pct(0.99))
        );
    }
    merged
}

/// What the RBAC authorizer walks for the user in `bench-bindings`, read back over HTTP.
async fn read_walk(plain: &Endpoint) -> anyhow::Result<Walk> {
    let items = |v: Value| v.get("items").and_then(Value::as_array).cloned().unwrap_or_default();
    let names_user = |b: &Value| {
        b.get("subjects").and_then(Value::as_array).is_some_and(|subjects| {
            subjects.iter().any(|s| {
                let name = s.get("name").and_then(Value::as_str).unwrap_or("");
                match s.get("kind").and_then(Value::as_str) {
                    Some("User") => name == USER,
                    Some("Group") => [USER_GROUP, "system:authenticated"].contains(&name),
                    _ => false,
                }
            })
        })
    };
    let crbs = items(call(plain, reqwest::Method::GET, "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", None, 200).await?);
    let in_ns = items(call(plain, reqwest::Method::GET, &role_bindings_path(NS), None, 200).await?);
    let mut in_bindings = items(call(plain, reqwest::Method::GET, &role_bindings_path(NS_BINDINGS), None, 200).await?);
    // The watch cache visits a namespace's bindings in key order, that is by name.
    in_bindings.sort_by_key(|b| b.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("").to_string());
    let position = in_bindings
        .iter()
        .position(|b| b.pointer("/metadata/name").and_then(Value::as_str) == Some(USER_BINDING))
        .map_or(0, |p| p + 1);
    let edit = call(plain, reqwest::Method::GET, &format!("/apis/rbac.authorization.k8s.io/v1/clusterroles/{ROLE}"), None, 200).await?;
    Ok(Walk {
        cluster_role_bindings: crbs.len(),
        cluster_role_bindings_applying: crbs.iter().filter(|b| names_user(b)).count(),
        role_bindings_in_ns: in_ns.len(),
        role_bindings_in_ns_bindings: in_bindings.len(),
        user_binding_position: position,
        edit_rules: edit.get("rules").and_then(Value::as_array).map_or(0, Vec::len),
    })
}

async fn run_workloads(
    plain: &Endpoint,
    masters: &Endpoint,
    user: &Endpoint,
    plain_fresh: &Endpoint,
    user_fresh: &Endpoint,
    api_pid: u32,
    a: &Args,
) -> anyhow::Result<Report> {
    let cap = Duration::from_secs(a.max_seconds);
    let mut rep = Report::default();

    // 1. RSS at rest, the RoleBindings of other users, RSS again.
    eprintln!("[bench] API server RSS at rest (settling)");
    rep.rss_before = settled_rss(api_pid).await;
    eprintln!("[bench] creating {} RoleBindings of other users in {NS_BINDINGS} from {} clients", a.role_bindings, a.clients);
    let row = send_many(plain, 0..a.role_bindings, a.clients, cap.max(Duration::from_secs(120)), 201, |i| {
        (role_bindings_path(NS_BINDINGS), role_binding(&format!("user-{i:04}"), NS_BINDINGS, &format!("user-{i:04}")))
    })
    .await?;
    anyhow::ensure!(row.errors == 0, "{} RoleBindings failed; the first: {:?}", row.errors, row.first_error);
    (rep.bindings_created, rep.bindings_elapsed) = (row.ops(), row.elapsed);
    // The user's own binding last: once the user is allowed there, the watch cache (which applies
    // events in revision order) holds every binding before it too.
    call(plain, reqwest::Method::POST, &role_bindings_path(NS_BINDINGS), Some(role_binding(USER_BINDING, NS_BINDINGS, USER)), 201).await?;
    let start = Instant::now();
    let target_in_bindings = format!("/api/v1/namespaces/{NS_BINDINGS}/pods/{TARGET_POD}");
    while let Err(e) = call(user, reqwest::Method::GET, &target_in_bindings, None, 200).await {
        if start.elapsed() > READY_TIMEOUT {
            bail!("the RBAC user could not read {target_in_bindings} within {READY_TIMEOUT:?}: {e:#}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    eprintln!("[bench] API server RSS with the RoleBindings (settling)");
    rep.rss_after = settled_rss(api_pid).await;
    rep.walk = read_walk(plain).await?;

    // 2. Creates from N clients, alternating HTTP, masters, user, user, masters, HTTP, …
    let sides = [(plain, "http"), (masters, "masters"), (user, "user")];
    let warmup = a.clients as u64 * WARMUP_CREATES_PER_CLIENT;
    for (ep, tag) in sides {
        eprintln!("[bench] warm-up: {warmup} creates, {}", ep.label);
        create_pods(ep, &format!("warm-{tag}"), 0..warmup, a.clients, cap).await?;
    }
    let batches = a.create_batches.max(1);
    eprintln!("[bench] pod creates from {} clients, {} per identity in {batches} alternating batches", a.clients, a.creates);
    let mut rows: Vec<Vec<Row>> = vec![Vec::new(); sides.len()];
    let mut api_cpu = vec![Duration::ZERO; sides.len()];
    let mut bench_cpu = vec![Duration::ZERO; sides.len()];
    let me = std::process::id();
    for b in 0..batches {
        let indexes = b * a.creates / batches..(b + 1) * a.creates / batches;
        for s in batch_order(sides.len(), b) {
            let (ep, tag) = sides[s];
            eprintln!("[bench]   batch {b}, {}", ep.label);
            let (api0, me0) = (cpu_time(api_pid).unwrap_or_default(), cpu_time(me).unwrap_or_default());
            rows[s].push(create_pods(ep, tag, indexes.clone(), a.clients, cap).await?);
            api_cpu[s] += cpu_time(api_pid).unwrap_or_default().saturating_sub(api0);
            bench_cpu[s] += cpu_time(me).unwrap_or_default().saturating_sub(me0);
        }
    }
    for (s, rows) in rows.into_iter().enumerate() {
        let row = Row::merge(rows);
        let n = row.ops().max(1) as u32;
        rep.creates.push(Creates {
            api_cpu_per_create: api_cpu[s] / n,
            bench_cpu_per_create: bench_cpu[s] / n,
            row,
        });
    }

    // 3. GET of one pod, sequential, alternating.
    eprintln!("[bench] GET of one pod, 1 client, {} per side in {} alternating batches", a.gets, a.get_batches);
    let pod_url = |ep: &Endpoint, ns: &str| format!("{}/api/v1/namespaces/{ns}/pods/{TARGET_POD}", ep.base);
    let get_sides = [
        GetSide {
            label: format!("{}, namespace {NS}", plain.label),
            ep: plain,
            url: pod_url(plain, NS),
        },
        GetSide {
            label: format!("{}, namespace {NS}", masters.label),
            ep: masters,
            url: pod_url(masters, NS),
        },
        GetSide {
            label: format!("{}, namespace {NS}: its RoleBinding the only one", user.label),
            ep: user,
            url: pod_url(user, NS),
        },
        GetSide {
            label: format!(
                "{}, namespace {NS_BINDINGS}: {} RoleBindings of other users before its own",
                user.label, rep.walk.user_binding_position.saturating_sub(1)
            ),
            ep: user,
            url: pod_url(user, NS_BINDINGS),
        },
    ];
    rep.gets = alternate_gets(&get_sides, a.gets, a.get_batches, WARMUP_GETS, cap).await;

    // 4. GET of one pod on a new connection each time.
    eprintln!("[bench] GET of one pod on a new connection each, {} per side", a.connects);
    let connect_sides = [
        GetSide {
            label: plain_fresh.label.to_string(),
            ep: plain_fresh,
            url: pod_url(plain_fresh, NS),
        },
        GetSide {
            label: user_fresh.label.to_string(),
            ep: user_fresh,
            url: pod_url(user_fresh, NS),
        },
    ];
    rep.connects = alternate_gets(&connect_sides, a.connects, a.get_batches, WARMUP_GETS / 10, cap).await;
    Ok(rep)
}

/// A latency in microseconds.
fn us(d: Duration) -> String {
    format!("{:.0} µs", d.as_secs_f64() * 1e6)
}

/// `a − b` in microseconds, signed.
fn diff(a: Duration, b: Duration) -> String {
    let d = (a.as_secs_f64() - b.as_secs_f64()) * 1e6;
    if d < 0.0 { format!("−{:.0} µs", -d) } else { format!("+{d:.0} µs") }
}

fn mib(b: Option<u64>) -> String {
    b.map(|b| format!("{:.1} MiB", b as f64 / (1024.0 * 1024.0)))
        .unwrap_or_else(|| "n/a".into())
}

fn errors(r: &Row) -> String {
    if r.errors > 0 {
        format!(" ({} errors)", r.errors)
    } else {
        String::new()
    }
}

fn print_tables(a: &Args, r: &Report, creators: [&Endpoint; 3], fresh: [&Endpoint; 2]) {
    let w = &r.walk;
    println!();
    println!("Machine: {}.", machine());
    println!(
        "One `kubelab store` member (fsync per write batch) and one `kubelab apiserver` on 127.0.0.1 serving plain HTTP (--insecure-port) and HTTPS (--secure-port, --client-ca-file, --authorization-mode RBAC); the bench client (reqwest with rustls trusting the cluster CA only, HTTP/1.1 JSON, one shared pool per identity) runs on the same machine. Cap {} s per batch.",
        a.max_seconds
    );
    println!(
        "Identities: system:masters is admin.conf's client certificate (CN=kubernetes-admin, O=system:masters), allowed by the privileged-group authorizer before RBAC; the RBAC user is CN={USER}, O={USER_GROUP}, allowed by RoleBinding {USER_BINDING:?} of ClusterRole {ROLE:?} ({} rules, aggregated) in its namespace.",
        w.edit_rules
    );
    println!(
        "The RBAC walk for it: {} ClusterRoleBindings first ({} of them name system:authenticated or the user, so their roles' rules are tried), then the namespace's RoleBindings by name: in {NS} {} (its own), in {NS_BINDINGS} {} of which its own is number {}.",
        w.cluster_role_bindings, w.cluster_role_bindings_applying, w.role_bindings_in_ns, w.role_bindings_in_ns_bindings, w.user_binding_position
    );
    println!(
        "Connections: each identity's pool is opened by an untimed warm-up ({} creates from {} clients), so the timed creates and GETs reuse pooled connections and hold no TCP or TLS handshake; the last table measures one.",
        a.clients as u64 * WARMUP_CREATES_PER_CLIENT,
        a.clients
    );

    // 1. Creates.
    println!();
    println!("| pod creates, {} concurrent clients, alternating batches | result | p50 | p99 | goal | |", a.clients);
    println!("| --- | ---: | ---: | ---: | --- | --- |");
    for (ep, c) in creators.iter().zip(&r.creates) {
        println!(
            "| {} (POST, {} pods) | {:.0}/s{} | {} | {} | | |",
            ep.label,
            c.row.ops(),
            c.row.throughput(),
            errors(&c.row),
            ms(c.row.pct(0.5)),
            ms(c.row.pct(0.99))
        );
    }
    let tput = |i: usize| r.creates.get(i).map_or(0.0, |c| c.row.throughput());
    let ratio = |x: usize, y: usize| tput(x) / tput(y).max(1e-9);
    let rbac_vs_http = ratio(2, 0);
    println!(
        "| creates/s, HTTPS as the RBAC user / HTTP | {rbac_vs_http:.2}× ({:+.1} %) | | | ≥ 0.85× (at most 15 % fewer) | {} |",
        (rbac_vs_http - 1.0) * 100.0,
        if rbac_vs_http >= 0.85 { "met" } else { "missed" }
    );
    println!(
        "| … HTTPS as system:masters / HTTP (TLS and authentication, no RBAC) | {:.2}× ({:+.1} %) | | | | |",
        ratio(1, 0),
        (ratio(1, 0) - 1.0) * 100.0
    );
    println!(
        "| … HTTPS as the RBAC user / HTTPS as system:masters (RBAC alone) | {:.2}× ({:+.1} %) | | | | |",
        ratio(2, 1),
        (ratio(2, 1) - 1.0) * 100.0
    );
    let cpu = |f: fn(&Creates) -> Duration| r.creates.iter().map(|c| f(c).as_micros().to_string()).collect::<Vec<_>>().join(" / ");
    println!(
        "| … the API server's CPU per create (user + system), HTTP / masters / RBAC user | {} µs | | | | |",
        cpu(|c| c.api_cpu_per_create)
    );
    println!(
        "| … the bench client's CPU per create (user + system), HTTP / masters / RBAC user | {} µs | | | | |",
        cpu(|c| c.bench_cpu_per_create)
    );

    // 2. GETs and the authorizer's cost.
    println!();
    println!("| GET of one pod, 1 client, sequential, alternating batches | mean | p50 | p99 | GETs |");
    println!("| --- | ---: | ---: | ---: | ---: |");
    let get_labels = [
        format!("{}, namespace {NS}", creators[0].label),
        format!("{}, namespace {NS}", creators[1].label),
        format!("{}, namespace {NS}: 0 other RoleBindings", creators[2].label),
        format!(
            "{}, namespace {NS_BINDINGS}: {} other RoleBindings walked before its own",
            creators[2].label,
            w.user_binding_position.saturating_sub(1)
        ),
    ];
    for (label, g) in get_labels.iter().zip(&r.gets) {
        println!(
            "| {label} | {} | {} | {} | {}{} |",
            us(g.mean()),
            us(g.pct(0.5)),
            us(g.pct(0.99)),
            g.ops(),
            errors(g)
        );
    }
    if let [http, masters, user0, user_n] = &r.gets[..] {
        let row = |label: String, x: &Row, y: &Row| {
            println!(
                "| {label} | {} | {} | {} | |",
                diff(x.mean(), y.mean()),
                diff(x.pct(0.5), y.pct(0.5)),
                diff(x.pct(0.99), y.pct(0.99))
            );
        };
        let n = w.user_binding_position.saturating_sub(1);
        row(format!("the authorizer's cost per request: RBAC user with {n} other RoleBindings − system:masters"), user_n, masters);
        row("… RBAC user with 0 other RoleBindings − system:masters".into(), user0, masters);
        row(format!("… the walk over {n} RoleBindings alone ({n} − 0)"), user_n, user0);
        row("HTTPS as system:masters − HTTP (TLS on a pooled connection, authentication)".into(), masters, http);
    }

    // 3. RSS.
    println!();
    println!("| API server RSS (VmRSS, settled) | |");
    println!("| --- | ---: |");
    println!("| at rest, before the RoleBindings | {} |", mib(r.rss_before));
    println!(
        "| after {} RoleBindings of other users (created in {:.1} s through the API) | {} |",
        r.bindings_created,
        r.bindings_elapsed.as_secs_f64(),
        mib(r.rss_after)
    );
    if let (Some(b), Some(af)) = (r.rss_before, r.rss_after) {
        let d = af as f64 - b as f64;
        println!("| difference | {:+.1} MiB |", d / (1024.0 * 1024.0));
    }

    // 4. New connections.
    println!();
    println!("| GET of one pod on a new connection each, 1 client, alternating batches | mean | p50 | p99 | GETs |");
    println!("| --- | ---: | ---: | ---: | ---: |");
    for (ep, g) in fresh.iter().zip(&r.connects) {
        println!(
            "| {} | {} | {} | {} | {}{} |",
            ep.label,
            us(g.mean()),
            us(g.pct(0.5)),
            us(g.pct(0.99)),
            g.ops(),
            errors(g)
        );
    }
    if let [http, https] = &r.connects[..] {
        println!(
            "| a new HTTPS connection with a client certificate − a new plain one | {} | {} | {} | |",
            diff(https.mean(), http.mean()),
            diff(https.pct(0.5), http.pct(0.5)),
            diff(https.pct(0.99), http.pct(0.99))
        );
    }
    println!();
    println!("Differences are of end-to-end means (and percentiles) of requests sent alternately over the same loopback path, not a profile of the authorizer.");
    let all = r.creates.iter().map(|c| &c.row).chain(&r.gets).chain(&r.connects);
    for e in all.filter_map(|x| x.first_error.clone()) {
        println!("<!-- first error: {e} -->");
    }
}
