//! A cluster of store members — `kubelab store` or real etcd 3.4 — on loopback.
//!
//! Both take the same flags (kubelab copies etcd's names), so one type starts either.
//! Layout on disk: `<tmp>/member-<i>/{data/,stdout.log,stderr.log}`; on lazyfs, `data/` is the
//! mount and `data.backing/` what it holds.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use etcd_client::StatusResponse;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::lazyfs::Lazyfs;
use crate::ports::{self, Port};
use crate::process::{Process, log_tail};
use crate::proxy::ProxyMesh;
use crate::{HEALTHY_TIMEOUT, RPC_TIMEOUT};

/// Which server binary the members run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavor {
    /// `kubelab store` ([`crate::kubelab_bin`]).
    Kubelab,
    /// Debian's etcd-server 3.4 ([`crate::etcd_bin`]).
    Etcd,
}

impl std::fmt::Display for Flavor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Flavor::Kubelab => "kubelab",
            Flavor::Etcd => "etcd",
        })
    }
}

/// How to start a [`StoreCluster`]. `Default` is a kubelab cluster behind the proxy mesh.
#[derive(Clone, Debug)]
pub struct StoreOptions {
    pub flavor: Flavor,
    /// Route peer traffic through per-pair proxies so members can be partitioned.
    /// Kubelab only (see the crate's implementation caveats).
    pub proxy: bool,
    /// `--snapshot-count`; None leaves the server's default.
    pub snapshot_count: Option<u64>,
    /// `--heartbeat-interval` in ms.
    pub heartbeat_interval_ms: u64,
    /// `--election-timeout` in ms.
    pub election_timeout_ms: u64,
    /// `--initial-cluster-token`.
    pub token: String,
    /// Wait for [`StoreCluster::wait_healthy`] at the end of [`StoreCluster::start`].
    pub wait_healthy: bool,
    /// Appended to every member's command line.
    pub extra_args: Vec<String>,
    /// Extra environment for every member.
    pub env: Vec<(String, String)>,
    /// Serve clients and peers over TLS with client certificate authentication on both.
    pub tls: Option<StoreTls>,
    /// Run the store built with failpoints ([`crate::kubelab_failpoints_bin`]), each member
    /// serving its failpoints over HTTP ([`StoreCluster::set_failpoint`]). Kubelab only.
    pub failpoints: bool,
    /// Put each member's data directory on lazyfs ([`crate::lazyfs`]), so that
    /// [`StoreCluster::power_loss`] can drop what it wrote and never fsynced.
    pub lazyfs: bool,
}

/// The etcd certificates of a PKI `kubelab certs generate` made (kubeadm's layout): what a TLS
/// store serves and dials with, and the client certificate the harness presents.
#[derive(Clone, Debug)]
pub struct StoreTls {
    /// The `--cert-dir` (`etcd/ca.crt`, `etcd/server.*`, `etcd/peer.*`, …).
    pub pki: PathBuf,
}

impl StoreTls {
    /// `<pki>/etcd/<name>`.
    pub fn etcd(&self, name: &str) -> PathBuf {
        self.pki.join("etcd").join(name)
    }

    /// etcd's TLS flags as kubeadm's etcd static pod gives them.
    fn flags(&self) -> Vec<String> {
        let f = |name: &str| self.etcd(name).display().to_string();
        [
            ("--cert-file", f("server.crt")),
            ("--key-file", f("server.key")),
            ("--trusted-ca-file", f("ca.crt")),
            ("--client-cert-auth", String::new()),
            ("--peer-cert-file", f("peer.crt")),
            ("--peer-key-file", f("peer.key")),
            ("--peer-trusted-ca-file", f("ca.crt")),
            ("--peer-client-cert-auth", String::new()),
        ]
        .into_iter()
        .flat_map(|(k, v)| if v.is_empty() { vec![k.to_string()] } else { vec![k.to_string(), v] })
        .collect()
    }

    /// etcd-client's TLS: the etcd CA, and the healthcheck client's certificate.
    pub fn client_tls(&self) -> anyhow::Result<etcd_client::TlsOptions> {
        let read = |name: &str| std::fs::read(self.etcd(name)).with_context(|| format!("reading {}", self.etcd(name).display()));
        Ok(etcd_client::TlsOptions::new()
            .ca_certificate(etcd_client::Certificate::from_pem(read("ca.crt")?))
            .identity(etcd_client::Identity::from_pem(read("healthcheck-client.crt")?, read("healthcheck-client.key")?)))
    }
}

impl Default for StoreOptions {
    fn default() -> Self {
        Self {
            flavor: Flavor::Kubelab,
            proxy: true,
            snapshot_count: None,
            heartbeat_interval_ms: 100,
            election_timeout_ms: 1000,
            token: "kubelab-e2e".into(),
            wait_healthy: true,
            extra_args: Vec::new(),
            // Logs go to files: no ANSI colour codes in them (tracing-subscriber honours NO_COLOR).
            env: vec![("NO_COLOR".into(), "1".into())],
            tls: None,
            failpoints: false,
            lazyfs: false,
        }
    }
}

impl StoreOptions {
    /// Defaults for `flavor`: the proxy is on for kubelab (unless `E2E_PROXY=0`) and off for etcd.
    pub fn for_flavor(flavor: Flavor) -> Self {
        let proxy = flavor == Flavor::Kubelab && std::env::var("E2E_PROXY").as_deref() != Ok("0");
        Self {
            flavor,
            proxy,
            ..Self::default()
        }
    }

    /// A real etcd 3.4 cluster, no proxy.
    pub fn etcd() -> Self {
        Self::for_flavor(Flavor::Etcd)
    }
}

/// One member: its ports, directory, command line, and (while running) its process.
pub struct Member {
    pub name: String,
    pub client_port: u16,
    pub peer_port: u16,
    pub metrics_port: u16,
    /// Where the member serves its failpoints ([`StoreOptions::failpoints`]).
    pub failpoint_port: Option<u16>,
    /// `<root>/<name>`: holds `data/` and the logs.
    pub dir: PathBuf,
    /// `http` or `https`.
    scheme: &'static str,
    args: Vec<String>,
    /// The environment of this member alone (added to [`StoreOptions::env`]).
    env: Vec<(String, String)>,
    process: Option<Process>,
    /// Stopped with SIGSTOP ([`StoreCluster::pause`]).
    paused: bool,
    /// The lazyfs `data/` is mounted through ([`StoreOptions::lazyfs`]); dropped after the
    /// process, so the mount outlives the member.
    lazyfs: Option<Lazyfs>,
    _ports: Vec<Port>,
}

impl Member {
    pub fn endpoint(&self) -> String {
        format!("{}://127.0.0.1:{}", self.scheme, self.client_port)
    }
    pub fn data_dir(&self) -> PathBuf {
        self.dir.join("data")
    }
    /// The PID of the running process, if any.
    pub fn pid(&self) -> Option<u32> {
        self.process.as_ref().map(|p| p.pid())
    }

    pub fn is_running(&self) -> bool {
        self.process.is_some()
    }

    /// Gives `flag` of the command line the member is (re)started with the value `value`.
    fn set_arg(&mut self, flag: &str, value: &str) -> anyhow::Result<()> {
        let pos = self.args.iter().position(|a| a == flag).with_context(|| format!("{} has no {flag} flag", self.name))?;
        self.args[pos + 1] = value.to_string();
        Ok(())
    }
}

/// N store members on loopback. Dropping it kills every member (and prints their log
/// tails if the thread is panicking, i.e. a test failed).
pub struct StoreCluster {
    pub opts: StoreOptions,
    bin: PathBuf,
    members: Vec<Member>,
    proxy: Option<ProxyMesh>,
    root: Option<tempfile::TempDir>,
}

impl StoreCluster {
    /// Starts `n` members (and waits until healthy unless `opts.wait_healthy` is false).
    pub async fn start(n: usize, opts: StoreOptions) -> anyhow::Result<Self> {
        let mut c = Self::spawn(n, opts)?;
        if c.opts.wait_healthy {
            c.wait_healthy().await?;
        }
        Ok(c)
    }

    /// Starts the processes without waiting for them.
    pub fn spawn(n: usize, opts: StoreOptions) -> anyhow::Result<Self> {
        anyhow::ensure!(n > 0, "a cluster needs at least one member");
        if opts.proxy && opts.flavor == Flavor::Etcd {
            bail!(
                "etcd derives member IDs from peer URLs, so its members cannot each get their own proxied --initial-cluster; start etcd with proxy: false"
            );
        }
        anyhow::ensure!(!(opts.failpoints && opts.flavor == Flavor::Etcd), "failpoints are kubelab's: etcd 3.4 from Debian is not built with gofail");
        let bin = match opts.flavor {
            Flavor::Kubelab if opts.failpoints => crate::kubelab_failpoints_bin()?,
            Flavor::Kubelab => crate::kubelab_bin()?,
            Flavor::Etcd => crate::etcd_bin()?,
        };
        let root = tempfile::Builder::new()
            .prefix(&format!("kubelab-e2e-{}-", opts.flavor))
            .tempdir()?;
        let mut ports_of = Vec::new();
        for _ in 0..n {
            ports_of.push(ports::reserve_n(if opts.failpoints { 4 } else { 3 })?);
        }
        let peer_ports: Vec<u16> = ports_of.iter().map(|p| p[1].port).collect();
        let proxy = if opts.proxy {
            Some(ProxyMesh::start(&peer_ports)?)
        } else {
            None
        };
        let names: Vec<String> = (0..n).map(|i| format!("member-{i}")).collect();
        let scheme = if opts.tls.is_some() { "https" } else { "http" };

        let mut members = Vec::new();
        for (i, ps) in ports_of.into_iter().enumerate() {
            let (client_port, peer_port, metrics_port) = (ps[0].port, ps[1].port, ps[2].port);
            let failpoint_port = ps.get(3).map(|p| p.port);
            let initial_cluster = (0..n)
                .map(|j| {
                    let port = match &proxy {
                        Some(p) if j != i => p.port(i, j),
                        _ => peer_ports[j],
                    };
                    format!("{}={scheme}://127.0.0.1:{port}", names[j])
                })
                .collect::<Vec<_>>()
                .join(",");
            let dir = root.path().join(&names[i]);
            std::fs::create_dir_all(&dir)?;
            let client = format!("{scheme}://127.0.0.1:{client_port}");
            let peer = format!("{scheme}://127.0.0.1:{peer_port}");
            let mut args = Vec::new();
            if opts.flavor == Flavor::Kubelab {
                args.push("store".to_string());
            }
            let mut flag = |k: &str, v: String| {
                args.push(format!("--{k}"));
                args.push(v);
            };
            flag("name", names[i].clone());
            flag("data-dir", dir.join("data").display().to_string());
            flag("listen-client-urls", client.clone());
            flag("advertise-client-urls", client);
            flag("listen-peer-urls", peer.clone());
            flag("initial-advertise-peer-urls", peer);
            flag("initial-cluster", initial_cluster);
            flag("initial-cluster-state", "new".into());
            flag("initial-cluster-token", opts.token.clone());
            flag(
                "listen-metrics-urls",
                format!("http://127.0.0.1:{metrics_port}"),
            );
            flag("heartbeat-interval", opts.heartbeat_interval_ms.to_string());
            flag("election-timeout", opts.election_timeout_ms.to_string());
            if let Some(s) = opts.snapshot_count {
                flag("snapshot-count", s.to_string());
            }
            if opts.flavor == Flavor::Etcd {
                // etcd 3.4's default capnslog logger is deprecated and noisy about it.
                flag("logger", "zap".into());
                flag("log-outputs", "stderr".into());
            }
            if let Some(tls) = &opts.tls {
                args.extend(tls.flags());
            }
            args.extend(opts.extra_args.iter().cloned());
            let env = failpoint_port.map(|p| ("KUBELAB_FAILPOINTS_HTTP".to_string(), format!("127.0.0.1:{p}"))).into_iter().collect();
            members.push(Member {
                name: names[i].clone(),
                client_port,
                peer_port,
                metrics_port,
                failpoint_port,
                dir,
                scheme,
                args,
                env,
                process: None,
                paused: false,
                lazyfs: None,
                _ports: ps,
            });
        }
        let mut c = Self {
            opts,
            bin,
            members,
            proxy,
            root: Some(root),
        };
        if c.opts.lazyfs {
            for m in &mut c.members {
                let (data, backing) = (m.data_dir(), m.dir.join("data.backing"));
                std::fs::create_dir_all(&data)?;
                std::fs::create_dir_all(&backing)?;
                m.lazyfs = Some(Lazyfs::start(&backing, &data, &m.dir.join("lazyfs.sock"), &m.dir.join("lazyfs"))?);
            }
        }
        for i in 0..n {
            c.restart(i)?;
        }
        Ok(c)
    }

    pub fn len(&self) -> usize {
        self.members.len()
    }

    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    pub fn member(&self, i: usize) -> &Member {
        &self.members[i]
    }

    pub fn root(&self) -> &Path {
        self.root
            .as_ref()
            .map(|r| r.path())
            .unwrap_or(Path::new("/"))
    }

    /// The command line member `i` is (re)started with.
    pub fn command_line(&self, i: usize) -> String {
        format!("{} {}", self.bin.display(), self.members[i].args.join(" "))
    }

    /// Every member's client URL, in member order.
    pub fn client_endpoints(&self) -> Vec<String> {
        self.members.iter().map(|m| m.endpoint()).collect()
    }

    /// Client URLs of the members that are running.
    pub fn running_endpoints(&self) -> Vec<String> {
        self.members
            .iter()
            .filter(|m| m.is_running())
            .map(|m| m.endpoint())
            .collect()
    }

    pub fn endpoint(&self, i: usize) -> String {
        self.members[i].endpoint()
    }

    /// (Re)starts member `i` with its original command line: same data dir, same ports.
    pub fn restart(&mut self, i: usize) -> anyhow::Result<()> {
        let m = &mut self.members[i];
        anyhow::ensure!(m.process.is_none(), "{} is still running", m.name);
        let env: Vec<(String, String)> = self.opts.env.iter().chain(&m.env).cloned().collect();
        let p = Process::spawn(&m.name, &self.bin, &m.args, &m.dir, &env)?;
        m.paused = false;
        eprintln!(
            "[e2e] started {} pid {} client {}",
            m.name,
            p.pid(),
            m.endpoint()
        );
        m.process = Some(p);
        Ok(())
    }

    /// SIGKILL member `i`: a crash.
    pub fn kill9(&mut self, i: usize) {
        let m = &mut self.members[i];
        if let Some(mut p) = m.process.take() {
            eprintln!("[e2e] kill -9 {} pid {}", m.name, p.pid());
            p.kill9();
        }
    }

    /// SIGSTOP member `i`: it stops answering anyone, without losing a byte (a long GC pause,
    /// a VM stall).
    pub fn pause(&mut self, i: usize) {
        self.signal(i, libc::SIGSTOP, "pause");
        self.members[i].paused = true;
    }

    /// SIGCONT member `i` after [`pause`](Self::pause).
    pub fn resume(&mut self, i: usize) {
        self.signal(i, libc::SIGCONT, "resume");
        self.members[i].paused = false;
    }

    fn signal(&mut self, i: usize, sig: i32, what: &str) {
        let m = &mut self.members[i];
        if let Some(p) = m.process.as_mut() {
            if p.exited().is_none() {
                eprintln!("[e2e] {what} {} pid {}", m.name, p.pid());
                // The PID is our unreaped child, so it cannot have been recycled.
                unsafe {
                    libc::kill(p.pid() as i32, sig);
                }
            }
        }
    }

    /// Whether member `i` was started and has exited by itself (a failpoint's `panic`, a crash).
    pub fn has_exited(&mut self, i: usize) -> bool {
        self.members[i].process.as_mut().is_some_and(|p| p.exited().is_some())
    }

    /// Member `i` loses its disk: killed, its data directory removed, and started again with
    /// `--initial-cluster-state existing` to rejoin the cluster it was in.
    pub fn wipe_and_rejoin(&mut self, i: usize) -> anyhow::Result<()> {
        self.kill9(i);
        let m = &mut self.members[i];
        let data = m.data_dir();
        eprintln!("[e2e] wipe {} ({})", m.name, data.display());
        empty_dir(&data)?;
        m.set_arg("--initial-cluster-state", "existing")?;
        self.restart(i)
    }

    /// Member `i` loses power: killed (kill -9), and everything it wrote without fsyncing it is
    /// lost, as the page cache is in a power cut (needs [`StoreOptions::lazyfs`]). Returns how
    /// many bytes were dropped. Start it again with [`restart`](Self::restart).
    pub fn power_loss(&mut self, i: usize) -> anyhow::Result<u64> {
        anyhow::ensure!(self.members[i].lazyfs.is_some(), "{} is not on lazyfs", self.members[i].name);
        self.kill9(i);
        let m = &self.members[i];
        let dropped = m.lazyfs.as_ref().expect("checked").clear_cache()?;
        eprintln!("[e2e] {} lost power: {dropped} unsynced bytes dropped", m.name);
        Ok(dropped)
    }

    /// Member `i` loses its disk and is replaced, as etcd's robustness suite does it
    /// (`memberReplace` in `tests/robustness/failpoint/cluster.go`) and as an operator must: it
    /// is killed and its data directory removed; another member removes it from the cluster
    /// (`member remove`) and adds it back under the same name and peer URL (`member add`, a new
    /// member ID); it starts on the empty directory with `--initial-cluster-state existing`
    /// and the `--initial-cluster` the add answered with, and catches up from the leader. Same
    /// slot, same ports: whoever was pinned to member `i` talks to the replacement. Not with
    /// the proxy mesh: an added member has one peer URL for everyone, so it could not be given
    /// a proxy per peer.
    pub async fn replace(&mut self, i: usize) -> anyhow::Result<()> {
        anyhow::ensure!(self.proxy.is_none(), "a member cannot be replaced behind the proxy mesh (one peer URL for every peer)");
        let other = (0..self.len()).find(|j| *j != i && self.members[*j].is_running()).context("no other member running")?;
        self.kill9(i);
        let (name, data) = (self.members[i].name.clone(), self.members[i].data_dir());
        eprintln!("[e2e] {name} loses its disk ({})", data.display());
        empty_dir(&data)?;
        let peer = self.peer_url(i);
        let c = self.client(other).await?;
        let (deadline, call) = (Duration::from_secs(30), crate::scaled(RPC_TIMEOUT));
        // Both calls are refused ("unhealthy cluster") until the members left have been
        // connected for a while, and may fail while a new leader is elected: ask again.
        crate::poll_until(&format!("{name} removed"), deadline, Duration::from_millis(300), || {
            let (mut c, name, peer) = (c.clone(), name.clone(), peer.clone());
            async move {
                let list = tokio::time::timeout(call, c.member_list()).await??;
                let Some(id) = list.members().iter().find(|m| m.name() == name || m.peer_urls().iter().any(|u| *u == peer)).map(|m| m.id()) else {
                    return Ok(Some(())); // an earlier attempt went through
                };
                tokio::time::timeout(call, c.member_remove(id)).await??;
                Ok(Some(()))
            }
        })
        .await?;
        let added = crate::poll_until(&format!("{name} added back"), deadline, Duration::from_millis(300), || {
            let mut c = c.clone();
            let peer = peer.clone();
            async move {
                // An earlier attempt whose answer was lost may have gone through.
                let list = tokio::time::timeout(call, c.member_list()).await??;
                if list.members().iter().any(|m| m.peer_urls().iter().any(|u| *u == peer)) {
                    return Ok(Some(list.members().to_vec()));
                }
                Ok(Some(tokio::time::timeout(call, c.member_add([peer.as_str()], None)).await??.member_list().to_vec()))
            }
        })
        .await?;
        let initial = added
            .iter()
            .filter_map(|m| {
                let url = m.peer_urls().first()?;
                let n = if *url == peer { name.as_str() } else { m.name() };
                Some(format!("{n}={url}"))
            })
            .collect::<Vec<_>>()
            .join(",");
        self.members[i].set_arg("--initial-cluster-state", "existing")?;
        self.start_added(i, &initial)
    }

    /// A member to add at runtime (`member add`), not started yet: its ports reserved and its
    /// directory made. Its peer URL is [`peer_url`](Self::peer_url); start it with
    /// [`start_added`](Self::start_added). Kubelab members of a proxied cluster are not proxied.
    pub fn new_member(&mut self, name: &str) -> anyhow::Result<usize> {
        let ps = ports::reserve_n(3)?;
        let (client_port, peer_port, metrics_port) = (ps[0].port, ps[1].port, ps[2].port);
        let scheme = if self.opts.tls.is_some() { "https" } else { "http" };
        let dir = self.root().join(name);
        std::fs::create_dir_all(&dir)?;
        let client = format!("{scheme}://127.0.0.1:{client_port}");
        let peer = format!("{scheme}://127.0.0.1:{peer_port}");
        let mut args = Vec::new();
        if self.opts.flavor == Flavor::Kubelab {
            args.push("store".to_string());
        }
        let mut flag = |k: &str, v: String| {
            args.push(format!("--{k}"));
            args.push(v);
        };
        flag("name", name.to_string());
        flag("data-dir", dir.join("data").display().to_string());
        flag("listen-client-urls", client.clone());
        flag("advertise-client-urls", client);
        flag("listen-peer-urls", peer.clone());
        flag("initial-advertise-peer-urls", peer);
        // Set by `start_added`.
        flag("initial-cluster", String::new());
        flag("initial-cluster-state", "existing".into());
        flag("initial-cluster-token", self.opts.token.clone());
        flag("listen-metrics-urls", format!("http://127.0.0.1:{metrics_port}"));
        flag("heartbeat-interval", self.opts.heartbeat_interval_ms.to_string());
        flag("election-timeout", self.opts.election_timeout_ms.to_string());
        if let Some(n) = self.opts.snapshot_count {
            flag("snapshot-count", n.to_string());
        }
        if self.opts.flavor == Flavor::Etcd {
            flag("logger", "zap".into());
            flag("log-outputs", "stderr".into());
        }
        if let Some(tls) = &self.opts.tls {
            args.extend(tls.flags());
        }
        args.extend(self.opts.extra_args.iter().cloned());
        self.members.push(Member {
            name: name.to_string(),
            client_port,
            peer_port,
            metrics_port,
            failpoint_port: None,
            dir,
            scheme,
            args,
            env: Vec::new(),
            process: None,
            paused: false,
            lazyfs: None,
            _ports: ps,
        });
        Ok(self.members.len() - 1)
    }

    /// Member `i`'s peer URL (not proxied).
    pub fn peer_url(&self, i: usize) -> String {
        let m = &self.members[i];
        format!("{}://127.0.0.1:{}", m.scheme, m.peer_port)
    }

    /// Starts member `i` made by [`new_member`](Self::new_member) with
    /// `--initial-cluster-state existing` and `--initial-cluster initial_cluster` (what
    /// `member add` printed).
    pub fn start_added(&mut self, i: usize, initial_cluster: &str) -> anyhow::Result<()> {
        self.members[i].set_arg("--initial-cluster", initial_cluster)?;
        self.restart(i)
    }

    /// Sets failpoint `name` of member `i` to `term` (gofail's syntax: `panic`, `sleep(100)`,
    /// `return`, `off`, with `N*` or `P%` before), through the member's failpoint endpoint.
    pub async fn set_failpoint(&self, i: usize, name: &str, term: &str) -> anyhow::Result<()> {
        let port = self.members[i].failpoint_port.context("the cluster was started without failpoints")?;
        eprintln!("[e2e] failpoint {}: {name}={term}", self.members[i].name);
        let resp = reqwest::Client::new()
            .put(format!("http://127.0.0.1:{port}/{name}"))
            .body(term.to_string())
            .timeout(crate::scaled(Duration::from_secs(5)))
            .send()
            .await
            .with_context(|| format!("setting failpoint {name} on {}", self.members[i].name))?;
        anyhow::ensure!(resp.status().is_success(), "setting failpoint {name}={term}: HTTP {}", resp.status());
        Ok(())
    }

    /// Drops every message member `i` sends to the others, but not those it receives (needs
    /// the proxy).
    pub fn cut_outbound(&self, i: usize) -> anyhow::Result<()> {
        let p = self.proxy.as_ref().context("a one-way cut needs StoreOptions::proxy")?;
        eprintln!("[e2e] cut {} → others", self.members[i].name);
        p.cut_from(i);
        Ok(())
    }

    /// Drops every message the others send to member `i`, but not those it sends (needs the
    /// proxy).
    pub fn cut_inbound(&self, i: usize) -> anyhow::Result<()> {
        let p = self.proxy.as_ref().context("a one-way cut needs StoreOptions::proxy")?;
        eprintln!("[e2e] cut others → {}", self.members[i].name);
        p.cut_to(i);
        Ok(())
    }

    /// Whether peer traffic can be cut ([`partition`](Self::partition), the one-way cuts).
    pub fn has_proxy(&self) -> bool {
        self.proxy.is_some()
    }

    /// SIGTERM member `i` and wait for it (SIGKILL after the grace period). Returns
    /// whether it exited by itself.
    pub fn stop(&mut self, i: usize) -> bool {
        if self.members[i].paused {
            self.resume(i);
        }
        let m = &mut self.members[i];
        match m.process.take() {
            Some(mut p) => {
                eprintln!("[e2e] stopping {} pid {}", m.name, p.pid());
                p.terminate().is_some()
            }
            None => true,
        }
    }

    /// Cleanly stops every member.
    pub fn stop_all(&mut self) {
        for i in 0..self.members.len() {
            self.stop(i);
        }
    }

    /// Cuts member `i` off from every other member (needs the proxy).
    pub fn partition(&self, i: usize) -> anyhow::Result<()> {
        let p = self
            .proxy
            .as_ref()
            .context("partition needs StoreOptions::proxy")?;
        eprintln!("[e2e] partition {}", self.members[i].name);
        p.partition(i);
        Ok(())
    }

    /// Reconnects member `i`.
    pub fn heal(&self, i: usize) -> anyhow::Result<()> {
        let p = self
            .proxy
            .as_ref()
            .context("heal needs StoreOptions::proxy")?;
        eprintln!("[e2e] heal {}", self.members[i].name);
        p.heal(i);
        Ok(())
    }

    /// Checks that no member died on its own; returns a description of those that did.
    pub fn check_alive(&mut self) -> anyhow::Result<()> {
        let mut dead = Vec::new();
        for m in &mut self.members {
            if let Some(st) = m.process.as_mut().and_then(|p| p.exited()) {
                dead.push(format!("{} exited unexpectedly: {st}", m.name));
            }
        }
        anyhow::ensure!(dead.is_empty(), "{}", dead.join("; "));
        Ok(())
    }

    /// A client connected to member `i` only.
    pub async fn client(&self, i: usize) -> anyhow::Result<etcd_client::Client> {
        match &self.opts.tls {
            None => crate::connect(&[self.endpoint(i)], RPC_TIMEOUT).await,
            Some(tls) => crate::connect_tls(&[self.endpoint(i)], RPC_TIMEOUT, Some(tls.client_tls()?)).await,
        }
    }

    /// Maintenance.Status of member `i`, asked of member `i` alone.
    pub async fn status(&self, i: usize) -> anyhow::Result<StatusResponse> {
        let mut c = self.client(i).await?;
        match tokio::time::timeout(crate::scaled(RPC_TIMEOUT), c.status()).await {
            Ok(r) => r.with_context(|| format!("status of {}", self.members[i].name)),
            Err(_) => bail!("status of {} timed out", self.members[i].name),
        }
    }

    /// The index of the current leader: a running member whose own Status names itself
    /// leader (`status.leader() == header.member_id`); the highest raft term wins if a
    /// stale leader still believes it leads.
    pub async fn leader(&self) -> anyhow::Result<usize> {
        let mut best: Option<(u64, usize)> = None;
        let mut seen = Vec::new();
        for i in 0..self.members.len() {
            if !self.members[i].is_running() {
                continue;
            }
            match self.status(i).await {
                Ok(s) => {
                    let id = s.header().map(|h| h.member_id()).unwrap_or(0);
                    seen.push(format!(
                        "{}: id {id:x} leader {:x} term {}",
                        self.members[i].name,
                        s.leader(),
                        s.raft_term()
                    ));
                    if id != 0 && s.leader() == id && best.is_none_or(|(t, _)| s.raft_term() > t) {
                        best = Some((s.raft_term(), i));
                    }
                }
                Err(e) => seen.push(format!("{}: {e:#}", self.members[i].name)),
            }
        }
        best.map(|(_, i)| i)
            .with_context(|| format!("no member claims leadership ({})", seen.join("; ")))
    }

    /// Waits until a leader other than `old` is in place (after killing or cutting off `old`).
    pub async fn wait_new_leader(&self, old: usize, deadline: Duration) -> anyhow::Result<usize> {
        crate::poll_until(
            "a new leader",
            deadline,
            Duration::from_millis(100),
            || async {
                let l = self.leader().await?;
                Ok((l != old).then_some(l))
            },
        )
        .await
    }

    /// Waits until every running member answers Status and all of them name the same
    /// leader, which is one of them.
    pub async fn wait_healthy(&mut self) -> anyhow::Result<()> {
        let deadline = HEALTHY_TIMEOUT;
        let r = crate::poll_until("a healthy cluster", deadline, Duration::from_millis(100), || async {
            let mut leaders = BTreeMap::new();
            let mut ids = Vec::new();
            for i in 0..self.members.len() {
                if !self.members[i].is_running() {
                    continue;
                }
                let s = self.status(i).await?;
                ids.push(s.header().map(|h| h.member_id()).unwrap_or(0));
                leaders.insert(s.leader(), i);
            }
            if leaders.len() == 1 && leaders.keys().all(|l| *l != 0 && ids.contains(l)) {
                return Ok(Some(()));
            }
            bail!("members disagree on the leader or have none: leaders {:x?}, member ids {ids:x?}", leaders.keys().collect::<Vec<_>>())
        })
        .await;
        if r.is_err() {
            // A member that crashed at startup explains itself better than a timeout.
            self.check_alive()?;
        }
        r
    }

    /// GET `path` on member `i`'s metrics listener: (status code, body).
    pub async fn metrics_get(&self, i: usize, path: &str) -> anyhow::Result<(u16, String)> {
        http_get(self.members[i].metrics_port, path).await
    }

    /// The tails of every member's logs.
    pub fn log_tails(&self, lines: usize) -> String {
        let mut s = String::new();
        for m in &self.members {
            let state = match &m.process {
                Some(p) => format!("running, pid {}", p.pid()),
                None => "not running".into(),
            };
            s.push_str(&format!(
                "===== {} ({state}) {} =====\n",
                m.name,
                m.endpoint()
            ));
            s.push_str(&log_tail(
                &m.name,
                &m.dir.join("stdout.log"),
                &m.dir.join("stderr.log"),
                lines,
            ));
        }
        s
    }
}

/// Removes everything in `dir` but `dir` itself, which may be a mount point.
fn empty_dir(dir: &Path) -> anyhow::Result<()> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Ok(()) };
    for e in entries {
        let p = e?.path();
        let r = if p.is_dir() && !p.is_symlink() { std::fs::remove_dir_all(&p) } else { std::fs::remove_file(&p) };
        r.with_context(|| format!("removing {}", p.display()))?;
    }
    Ok(())
}

impl Drop for StoreCluster {
    fn drop(&mut self) {
        for m in &mut self.members {
            if let Some(mut p) = m.process.take() {
                p.kill9();
            }
            m.lazyfs = None;
        }
        self.proxy = None;
        let keep = std::env::var_os("E2E_KEEP_DIRS").is_some();
        if std::thread::panicking() {
            eprintln!(
                "\n[e2e] test failed; {} cluster in {}:",
                self.opts.flavor,
                self.root().display()
            );
            for (i, m) in self.members.iter().enumerate() {
                eprintln!(
                    "[e2e]   {}",
                    format_args!("{}: {}", m.name, self.command_line(i))
                );
            }
            eprintln!("{}", self.log_tails(40));
        }
        if let Some(r) = self.root.take().filter(|_| keep) {
            eprintln!("[e2e] keeping {}", r.keep().display());
        }
    }
}

/// A bare HTTP/1.0 GET on 127.0.0.1:`port` (no client library needed for /health).
pub async fn http_get(port: u16, path: &str) -> anyhow::Result<(u16, String)> {
    let fut = async {
        let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
        s.write_all(
            format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n")
                .as_bytes(),
        )
        .await?;
        let mut buf = Vec::new();
        s.read_to_end(&mut buf).await?;
        let text = String::from_utf8_lossy(&buf).into_owned();
        let code = text
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse::<u16>().ok())
            .with_context(|| format!("not an HTTP response: {text:.200}"))?;
        let body = text
            .split_once("\r\n\r\n")
            .map(|(_, b)| b.to_string())
            .unwrap_or_default();
        anyhow::Ok((code, body))
    };
    tokio::time::timeout(RPC_TIMEOUT, fut)
        .await
        .with_context(|| format!("GET {path} on port {port} timed out"))?
}
