//! `kubelab up`: the whole cluster on one machine, in one process — what kind and minikube do for
//! Kubernetes, in the way `kubeadm init` orders it: the store first, then the API server, then the
//! scheduler and the controller manager, the cluster DNS add-on ([`crate::addons`]) and the
//! proxy, the storage add-on (a CSI driver and the default StorageClass, [`crate::csi_hostpath`]),
//! then a node agent with its container runtime.
//!
//! Everything runs in this process (each component on threads of its own, as separate binaries
//! would run) except containerd, a child process. The process first moves into a private mount
//! namespace, and containerd inherits it: the tmpfs the node agent mounts for secrets is what
//! containerd bind-mounts into containers, the shim sockets containerd 1.6 always puts under
//! `/run/containerd` go to a directory of ours (never a system containerd's), and when the
//! cluster stops, every mount it made disappears with the namespace.
//!
//! With `--registry`, an image registry runs beside containerd, a child process too
//! ([`crate::registry`], kind's local registry: HTTPS with a certificate of the cluster CA, a
//! password, the project's images pushed to it, the pull secret `default/registry-credentials`),
//! and stops right after containerd; `--registry-host` makes containerd trust a registry the user
//! runs instead.
//!
//! Stop with Ctrl-C (or SIGTERM): the node agent stops, every pod sandbox is stopped and removed
//! through the CRI (so CNI releases its addresses), containerd stops, then the control plane, and
//! last the proxy's rules are removed (its iptables chains, or its nftables table: what `kubelab proxy --cleanup` does).
//! Objects stay in the store under `--data-dir`: `kubelab up` again resumes the same cluster and
//! the node agent starts its pods again.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Args;
use k8s_openapi::api::core::v1::Node;
use nodeagent::cri::RemoteRuntime;
use nodeagent::cri::containerd_config::{self, ContainerdConfig};
use tokio::sync::watch;

/// Writes a new file only its owner may read (mode 0600 from its creation, never wider).
fn write_private(path: &Path, text: &str) -> anyhow::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut f = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(path).with_context(|| format!("creating {}", path.display()))?;
    f.write_all(text.as_bytes()).with_context(|| format!("writing {}", path.display()))
}

/// The audit policy `kubelab up` (and the lab) start with (`<data>/audit-policy.yaml`, from
/// deploy/audit-policy.yaml): the users' requests,
/// writes with their bodies, secrets and config maps without theirs; not the cluster's own
/// components (the node agent as `system:node:<name>`, the scheduler, the proxy, the DNS, the CSI
/// driver and the controller manager as theirs, the controllers as their service accounts in kube-system, and
/// `system:unsecured` on the insecure port if it is opened), nor health checks and discovery.
const AUDIT_POLICY: &str = include_str!("../deploy/audit-policy.yaml");

/// `kubelab up`'s flags.
#[derive(Args, Clone, Debug)]
pub struct UpArgs {
    /// Where the cluster keeps its state (store, containerd, pods, logs, kubeconfig).
    #[arg(long, default_value = "/var/lib/kubelab")]
    pub data_dir: PathBuf,
    /// The API server's HTTPS port, on every address of the machine (kube-apiserver's
    /// default): the kubeconfig names 127.0.0.1, pods the `kubernetes` Service, which leads to
    /// the pods' bridge.
    #[arg(long, default_value_t = 6443)]
    pub secure_port: u16,
    /// The API server's insecure port on 127.0.0.1 (plain HTTP, where every request is a
    /// superuser's), for teaching only: 0, the default, leaves it closed. Nothing of the cluster
    /// uses it: every component has an identity of its own on the secure port.
    #[arg(long, default_value_t = 0)]
    pub port: u16,
    /// The store's client port on 127.0.0.1: HTTPS, for clients with a certificate of the etcd
    /// CA (etcdctl with pki/etcd/healthcheck-client.crt, as kubeadm's etcd probe uses it).
    #[arg(long, default_value_t = 2379)]
    pub store_port: u16,
    /// The store's peer port on 127.0.0.1.
    #[arg(long, default_value_t = 2380)]
    pub store_peer_port: u16,
    /// The node agent's port on 127.0.0.1 (container logs, /pods, /metrics).
    #[arg(long, default_value_t = 10250)]
    pub agent_port: u16,
    /// containerd's CRI streaming port on 127.0.0.1.
    #[arg(long, default_value_t = 10010)]
    pub stream_port: u16,
    /// The cluster DNS's /health, /ready and /metrics port on 127.0.0.1.
    #[arg(long, default_value_t = 8181)]
    pub dns_health_port: u16,
    /// The proxy's /healthz, /livez and /metrics port on 127.0.0.1.
    #[arg(long, default_value_t = 10256)]
    pub proxy_healthz_port: u16,
    /// How the proxy writes Services' rules: `iptables` or `nftables`.
    #[arg(long, default_value = "iptables")]
    pub proxy_mode: proxy::ProxyMode,
    /// The node's name (default: the hostname).
    #[arg(long)]
    pub node_name: Option<String>,
    /// The node's pod network.
    #[arg(long, default_value = "10.244.0.0/24")]
    pub pod_cidr: String,
    /// The image tarballs to import (default: the `images` directory next to the binary's
    /// build directory, where `make images` puts them).
    #[arg(long)]
    pub image_dir: Option<PathBuf>,
    /// The cgroup the node's pods go under.
    #[arg(long, default_value = "/kubelab")]
    pub cgroup_root: String,
    /// The node agent's cgroup driver, and containerd's (SystemdCgroup): cgroupfs or systemd.
    /// Default: systemd on a cgroup v2 host systemd booted, else cgroupfs.
    #[arg(long)]
    pub cgroup_driver: Option<nodeagent::cm::CgroupDriver>,
    /// Instead of running here, install and start `kubelab up` (with the other flags given) as
    /// the systemd service kubelab.service, with Delegate=yes.
    #[arg(long)]
    pub install_service: bool,
    // --otlp-endpoint: every component exports its pod spans (one process, one pipeline; each
    // span under its own component's service name).
    #[command(flatten)]
    pub otlp: crate::otel::OtlpArgs,
    // --registry, --registry-port, --registry-host, --registry-ca (src/registry.rs).
    #[command(flatten)]
    pub registry: crate::registry::RegistryArgs,
}

/// One line of start-up progress.
/// `--eviction-hard` of `kubelab up`'s node: memory only (see where it is used).
const UP_EVICTION_HARD: &str = "memory.available<100Mi,nodefs.available<0%,nodefs.inodesFree<0%,imagefs.available<0%";

fn step(started: Instant, what: &str) {
    println!("  ✓ {what:<44} {:>6.1} s", started.elapsed().as_secs_f64());
}

fn default_image_dir() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    // target/debug/kubelab → target/images
    let dir = exe.parent()?.parent()?.join("images");
    dir.is_dir().then_some(dir)
}

fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?.to_str()?.split(':').map(|d| Path::new(d).join(name)).find(|p| p.is_file())
}

/// `--cgroup-driver`, or the host's default.
fn cgroup_driver(args: &UpArgs) -> nodeagent::cm::CgroupDriver {
    args.cgroup_driver.unwrap_or_else(nodeagent::cm::CgroupDriver::detect)
}

/// Every prerequisite, checked before anything starts; the first missing one is one message
/// naming the fix.
fn check_prerequisites(args: &UpArgs, image_dir: &Path) -> anyhow::Result<()> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        bail!("kubelab up must run as root: it starts containerd and manages cgroups, mounts and network namespaces (try: sudo kubelab up)");
    }
    if which("containerd").is_none() {
        bail!("containerd is not installed: run `make deps` (or apt-get install containerd)");
    }
    if !Path::new(containerd_config::RUNC).is_file() {
        bail!("runc is not installed at {}: run `make deps` (or apt-get install runc)", containerd_config::RUNC);
    }
    if !Path::new(containerd_config::CNI_BIN_DIR).join("bridge").is_file() {
        bail!("the CNI plugins are not installed in {}: run `make deps` (or apt-get install containernetworking-plugins)", containerd_config::CNI_BIN_DIR);
    }
    nodeagent::cm::check_host(cgroup_driver(args)).context("the node agent cannot manage this host's cgroups")?;
    if !image_dir.join("pause.tar").is_file() {
        bail!("no pause image in {}: run `make images` (or pass --image-dir)", image_dir.display());
    }
    let insecure = (args.port != 0).then_some((args.port, "--port"));
    for (port, flag) in insecure.into_iter().chain([

        (args.store_port, "--store-port"),
        (args.store_peer_port, "--store-peer-port"),
        (args.agent_port, "--agent-port"),
        (args.stream_port, "--stream-port"),
    ]) {
        if let Err(e) = TcpListener::bind(("127.0.0.1", port)) {
            bail!("port {port} on 127.0.0.1 is not free ({e}): is another cluster running? Choose another with {flag}");
        }
    }
    Ok(())
}

/// Move this process into a private mount namespace, and give containerd's hard-coded
/// `/run/containerd` a directory of ours. Must run before any thread starts (unshare of the
/// mount namespace is refused to a multi-threaded process).
fn enter_private_mount_namespace(data: &Path) -> anyhow::Result<()> {
    let run = data.join("run-containerd");
    std::fs::create_dir_all(&run)?;
    std::fs::create_dir_all("/run/containerd")?;
    // SAFETY: plain syscalls on valid, NUL-terminated paths; nothing else runs yet.
    unsafe {
        if libc::unshare(libc::CLONE_NEWNS) != 0 {
            bail!("unshare(CLONE_NEWNS): {}", std::io::Error::last_os_error());
        }
        let root = c"/";
        if libc::mount(std::ptr::null(), root.as_ptr(), std::ptr::null(), libc::MS_REC | libc::MS_PRIVATE, std::ptr::null()) != 0 {
            bail!("making / private in the new mount namespace: {}", std::io::Error::last_os_error());
        }
        let src = std::ffi::CString::new(run.as_os_str().as_encoded_bytes())?;
        let dst = c"/run/containerd";
        if libc::mount(src.as_ptr(), dst.as_ptr(), std::ptr::null(), libc::MS_BIND, std::ptr::null()) != 0 {
            bail!("bind-mounting {} over /run/containerd: {}", run.display(), std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The API server's default Service range, which the proxy guards.
const SERVICE_CLUSTER_IP_RANGE: &str = "10.96.0.0/12";

/// Wait until `GET http://127.0.0.1:<port><path>` answers 200.
async fn wait_healthy(port: u16, path: &str, timeout: Duration) -> anyhow::Result<()> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let deadline = Instant::now() + timeout;
    let mut last = String::new();
    while Instant::now() < deadline {
        if let Ok(mut c) = tokio::net::TcpStream::connect(("127.0.0.1", port)).await {
            let mut out = Vec::new();
            let r = async {
                c.write_all(format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").as_bytes()).await?;
                c.read_to_end(&mut out).await
            };
            if tokio::time::timeout(Duration::from_secs(2), r).await.is_ok_and(|r| r.is_ok()) {
                last = String::from_utf8_lossy(&out).lines().next().unwrap_or_default().to_string();
                if last.split_whitespace().nth(1) == Some("200") {
                    return Ok(());
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    bail!("127.0.0.1:{port}{path} did not answer 200 within {timeout:?} (last: {last:?})")
}

/// Whether `kube`'s user may list pods (a SelfSubjectAccessReview; false when it cannot be asked).
async fn may_list_pods(kube: &kube::Client) -> bool {
    use k8s_openapi::api::authorization::v1::{ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec};
    let review = SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(ResourceAttributes { verb: Some("list".into()), resource: Some("pods".into()), ..Default::default() }),
            ..Default::default()
        },
        ..Default::default()
    };
    let answer = kube::Api::<SelfSubjectAccessReview>::all(kube.clone()).create(&kube::api::PostParams::default(), &review).await;
    answer.ok().and_then(|r| r.status).is_some_and(|s| s.allowed)
}

/// A future that completes when `rx` turns true.
async fn until(mut rx: watch::Receiver<bool>) {
    let _ = rx.wait_for(|s| *s).await;
}

/// Each component's thread gets a main thread's stack: the futures of a whole component are
/// large in a debug build, and std's 2 MiB default overflowed (the controller manager did).
const STACK_SIZE: usize = 8 << 20;

/// Run `f` on a thread of its own with a tokio runtime, as its own binary would.
fn spawn_tokio<F>(name: &str, f: impl FnOnce() -> F + Send + 'static) -> std::thread::JoinHandle<()>
where
    F: std::future::Future<Output = anyhow::Result<()>>,
{
    let n = name.to_string();
    std::thread::Builder::new()
        .name(name.to_string())
        .stack_size(STACK_SIZE)
        .spawn(move || {
            let rt = match tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .thread_stack_size(STACK_SIZE)
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => return eprintln!("{n}: starting its runtime: {e}"),
            };
            if let Err(e) = rt.block_on(f()) {
                eprintln!("{n} stopped with an error: {e:#}");
            }
        })
        .expect("spawn thread")
}

/// Run `f` on a thread of its own inside an actix System (actors, actix-web), made by `system`.
fn spawn_actix<F>(
    name: &str,
    system: fn() -> actix_rt::SystemRunner,
    f: impl FnOnce() -> F + Send + 'static,
) -> std::thread::JoinHandle<()>
where
    F: std::future::Future<Output = anyhow::Result<()>> + 'static,
{
    let n = name.to_string();
    std::thread::Builder::new()
        .name(name.to_string())
        .stack_size(STACK_SIZE)
        .spawn(move || {
            if let Err(e) = system().block_on(f()) {
                eprintln!("{n} stopped with an error: {e:#}");
            }
        })
        .expect("spawn thread")
}

struct Containerd {
    child: Child,
    config: ContainerdConfig,
}

impl Containerd {
    fn start(config: ContainerdConfig, config_path: &Path, log: &Path) -> anyhow::Result<Containerd> {
        std::fs::create_dir_all(&config.cni_conf_dir)?;
        std::fs::write(config_path, config.render())?;
        let log = std::fs::File::options().create(true).append(true).open(log)?;
        let mut cmd = Command::new("containerd");
        cmd.arg("--config").arg(config_path).stdin(Stdio::null()).stdout(log.try_clone()?).stderr(log);
        // SAFETY: prctl in the child before exec; no allocation.
        unsafe {
            use std::os::unix::process::CommandExt;
            cmd.pre_exec(|| {
                // If kubelab up dies, containerd follows (its containers are stopped at the next start).
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
                // kubelab gave up transparent huge pages (main.rs); containerd and the containers
                // it starts get the machine's setting back.
                libc::prctl(libc::PR_SET_THP_DISABLE, 0, 0, 0, 0);
                Ok(())
            });
        }
        let child = cmd.spawn().context("starting containerd")?;
        Ok(Containerd { child, config })
    }

    async fn wait_ready(&mut self) -> anyhow::Result<RemoteRuntime> {
        // ~0.1 s here; an emulated machine (the fresh-host check) took 11 s.
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            if let Some(st) = self.child.try_wait()? {
                bail!("containerd exited ({st}); see its log");
            }
            if let Ok(rt) = RemoteRuntime::connect(&self.config.endpoint()).await
                && rt.version().await.is_ok()
            {
                return Ok(rt);
            }
            if Instant::now() > deadline {
                bail!("containerd did not answer within 120 s");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// SIGTERM, then SIGKILL after 10 s.
    fn stop(&mut self) {
        // SAFETY: kill on the PID of our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Stop and remove every pod sandbox (and so every container) through the CRI.
async fn remove_all_pods(rt: &RemoteRuntime) -> usize {
    let Ok(sandboxes) = rt.list_pod_sandbox(None).await else { return 0 };
    for s in &sandboxes {
        if let Err(e) = rt.stop_pod_sandbox(&s.id).await {
            tracing::warn!(sandbox = %s.id, error = %e, "stopping a pod sandbox");
        }
        if let Err(e) = rt.remove_pod_sandbox(&s.id).await {
            tracing::warn!(sandbox = %s.id, error = %e, "removing a pod sandbox");
        }
    }
    sandboxes.len()
}

/// Completes on Ctrl-C or SIGTERM.
async fn signal() {
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(t) => t,
        Err(_) => return std::future::pending().await,
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

pub fn run(args: UpArgs) -> anyhow::Result<()> {
    let started = Instant::now();
    let image_dir = args
        .image_dir
        .clone()
        .or_else(default_image_dir)
        .context("no image directory: run `make images`, or pass --image-dir")?;
    if args.install_service {
        return crate::service::install(&args.data_dir, &image_dir, args.image_dir.is_some());
    }
    check_prerequisites(&args, &image_dir)?;
    let data = args.data_dir.clone();
    std::fs::create_dir_all(data.join("logs")).with_context(|| format!("creating {}", data.display()))?;
    let data = data.canonicalize()?;
    enter_private_mount_namespace(&data)?;
    println!("kubelab up: the cluster's state is in {}", data.display());

    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    rt.block_on(supervise(args, data, image_dir, started))
}

/// What has been started so far, for the shutdown to stop in reverse order.
#[derive(Default)]
struct Started {
    /// Whether the proxy ran: its rules are removed at the end (`kubelab proxy --cleanup`).
    proxy: bool,
    containerd: Option<Containerd>,
    /// `--registry`'s registry (stopped after containerd), or the user's (`--registry-host`).
    registry: Option<crate::registry::Registry>,
    cri: Option<RemoteRuntime>,
    agent: Option<std::thread::JoinHandle<()>>,
    control_plane: Vec<std::thread::JoinHandle<()>>,
}

async fn supervise(args: UpArgs, data: PathBuf, image_dir: PathBuf, started: Instant) -> anyhow::Result<()> {
    let (cp_tx, cp_rx) = watch::channel(false);
    let (agent_tx, agent_rx) = watch::channel(false);
    let mut s = Started::default();
    // Ctrl-C or SIGTERM at any time, even half-way through the start, stops what has started.
    let stop = signal();
    tokio::pin!(stop);
    let result = tokio::select! {
        r = start(&args, &data, &image_dir, started, &mut s, cp_rx, agent_rx) => match r {
            Ok(()) => {
                (&mut stop).await;
                Ok(())
            }
            Err(e) => Err(e),
        },
        _ = &mut stop => Ok(()),
    };
    println!("\nstopping kubelab: the node agent, pods, containerd, then the control plane");
    let _ = agent_tx.send(true);
    if let Some(agent) = s.agent.take() {
        let _ = tokio::task::spawn_blocking(move || agent.join()).await;
    }
    let removed = match &s.cri {
        Some(cri) => remove_all_pods(cri).await,
        None => 0,
    };
    if let Some(mut c) = s.containerd.take() {
        tokio::task::spawn_blocking(move || c.stop()).await?;
    }
    if let Some(mut r) = s.registry.take() {
        tokio::task::spawn_blocking(move || r.stop()).await?;
    }
    let _ = cp_tx.send(true);
    let threads = std::mem::take(&mut s.control_plane);
    tokio::task::spawn_blocking(move || {
        for t in threads {
            let _ = t.join();
        }
    })
    .await?;
    if s.proxy {
        match tokio::task::spawn_blocking(proxy::cleanup).await? {
            Ok((n, table)) => println!("the proxy's rules removed ({n} iptables chains{})", if table { ", the ip kube-proxy table" } else { "" }),
            Err(e) => eprintln!("removing the proxy's rules: {e} (run `kubelab proxy --cleanup`)"),
        }
    }
    result?;
    println!("stopped ({removed} pod sandboxes removed); `kubelab up` again resumes the cluster");
    Ok(())
}

async fn start(
    args: &UpArgs,
    data: &Path,
    image_dir: &Path,
    started: Instant,
    s: &mut Started,
    cp_rx: watch::Receiver<bool>,
    agent_rx: watch::Receiver<bool>,
) -> anyhow::Result<()> {
    let node_name = args.node_name.clone().unwrap_or_else(client::hostname).to_lowercase();

    // The cluster's PKI (kubeadm's certs and kubeconfig phases): made once, kept, renewed when
    // near expiry or when what it names changed.
    let pki = data.join("pki");
    // Pods reach the API server through the `kubernetes` Service at the pod network's gateway
    // (this machine's address on the pods' bridge): it is the advertise address, and the
    // serving certificate names it beside 127.0.0.1, kubernetes.default.svc and 10.96.0.1.
    let cidr = nodeagent::network::cni::PodCidr::parse(&args.pod_cidr)?;
    let mut spec = crate::certs::ClusterSpec::new(format!("https://127.0.0.1:{}", args.secure_port), node_name.clone());
    spec.advertise_addresses = vec![cidr.gateway().into()];
    spec.nodes = vec![crate::certs::NodeSpec { name: node_name.clone(), ips: vec![std::net::Ipv4Addr::LOCALHOST.into()] }];
    let made = tokio::task::spawn_blocking({
        let pki = pki.clone();
        move || crate::certs::ensure(&pki, &spec)
    })
    .await
    .context("making the cluster's certificates")?
    .context("the cluster's certificates")?;
    for (name, outcome) in made {
        if !matches!(outcome, pki::Outcome::Kept) {
            println!("{}", crate::certs::describe(&name, &outcome));
        }
    }
    step(started, "certificates");

    // The audit policy (kept if the user edited it) and the log it writes to.
    let audit_policy = data.join("audit-policy.yaml");
    if !audit_policy.exists() {
        std::fs::write(&audit_policy, AUDIT_POLICY).with_context(|| format!("writing {}", audit_policy.display()))?;
    }

    // Secrets are encrypted in the store (kube-apiserver's --encryption-provider-config): a random
    // aescbc key made the first time, kept beside the data it protects, readable by root only.
    let encryption_config = data.join("encryption-config.yaml");
    if !encryption_config.exists() {
        write_private(&encryption_config, &apiserver::server::encryptionconfig::generate_aescbc("key1").map_err(anyhow::Error::msg)?)?;
        println!("encryption at rest: secrets are encrypted with a new aescbc key (key1) in {}", encryption_config.display());
    }

    // containerd, a child process in our mount namespace.
    let containerd_dir = data.join("containerd");
    let driver = cgroup_driver(args);
    let containerd = s.containerd.insert(Containerd::start(
        ContainerdConfig { systemd_cgroup: driver == nodeagent::cm::CgroupDriver::Systemd, ..ContainerdConfig::private(&containerd_dir, args.stream_port) },
        &containerd_dir.join("config.toml"),
        &data.join("logs/containerd.log"),
    )?);
    let cri = containerd.wait_ready().await?;
    let (endpoint, cni_conf_dir) = (containerd.config.endpoint(), containerd.config.cni_conf_dir.clone());
    s.cri = Some(cri.clone());
    // Pods a killed cluster left behind are restarted from their objects by the node agent.
    let leftovers = remove_all_pods(&cri).await;
    step(started, &format!("containerd{}", if leftovers > 0 { format!(" ({leftovers} old sandboxes removed)") } else { String::new() }));
    // An image registry (src/registry.rs): `--registry` runs one, `--registry-host` trusts the user's.
    let certs_d = &s.containerd.as_ref().context("containerd")?.config.registry_config_path;
    s.registry = crate::registry::start(&args.registry, data, image_dir, certs_d).await?;
    if let Some(r) = &s.registry {
        step(started, &r.to_string());
    }

    // The store: one member, embedded, on HTTPS with client certificate authentication on both
    // ports, with kubeadm's etcd certificates (as kubeadm's etcd static pod runs etcd).
    let store_url = format!("https://127.0.0.1:{}", args.store_port);
    let store_cfg = store::Config {
        name: "kubelab".into(),
        data_dir: data.join("store"),
        listen_client_urls: vec![store_url.clone()],
        advertise_client_urls: vec![store_url.clone()],
        listen_peer_urls: vec![format!("https://127.0.0.1:{}", args.store_peer_port)],
        initial_cluster: store::config::parse_initial_cluster(&format!("kubelab=https://127.0.0.1:{}", args.store_peer_port), "kubelab-up")?,
        new_cluster: true,
        cluster_token: "kubelab-up".into(),
        snapshot_count: 100_000,
        max_request_bytes: 1_572_864,
        listen_metrics_urls: vec![],
        heartbeat_interval: Duration::from_millis(100),
        election_timeout: Duration::from_millis(1000),
        watch_progress_notify_interval: Duration::from_secs(600),
        client_tls_info: store::tlsinfo::TlsInfo {
            side: store::tlsinfo::Side::Client,
            cert_file: Some(pki.join("etcd/server.crt")),
            key_file: Some(pki.join("etcd/server.key")),
            trusted_ca_file: Some(pki.join("etcd/ca.crt")),
            client_cert_auth: true,
        },
        peer_tls_info: store::tlsinfo::TlsInfo {
            side: store::tlsinfo::Side::Peer,
            cert_file: Some(pki.join("etcd/peer.crt")),
            key_file: Some(pki.join("etcd/peer.key")),
            trusted_ca_file: Some(pki.join("etcd/ca.crt")),
            client_cert_auth: true,
        },
        quota_backend_bytes: 0,
        auto_compaction_mode: store::config::DEFAULT_AUTO_COMPACTION_MODE.into(),
        auto_compaction_retention: store::config::DEFAULT_AUTO_COMPACTION_RETENTION.into(),
    };
    {
        let rx = cp_rx.clone();
        s.control_plane.push(spawn_tokio("store", move || async move { store::run(store_cfg, until(rx)).await.map_err(Into::into) }));
    }
    // The API server.
    let api_opts = apiserver::Options {
        etcd_servers: vec![store_url],
        // kube-apiserver's flags as kubeadm writes them: the etcd CA, and the client certificate
        // the etcd CA signed for the API server.
        etcd_transport: apiserver::storage::store::TransportConfig {
            trusted_ca_file: Some(pki.join("etcd/ca.crt")),
            cert_file: Some(pki.join("apiserver-etcd-client.crt")),
            key_file: Some(pki.join("apiserver-etcd-client.key")),
        },
        // kube-apiserver's default: every address of the machine, so that the pods' bridge is
        // one (callers are authenticated there as anywhere).
        bind_address: "0.0.0.0".into(),
        advertise_address: Some(cidr.gateway().into()),
        secure_port: args.secure_port,
        tls_cert_file: Some(pki.join("apiserver.crt")),
        tls_private_key_file: Some(pki.join("apiserver.key")),
        client_ca_file: Some(pki.join("ca.crt")),
        // kubeadm's: the API server calls node agents as kube-apiserver-kubelet-client, and checks
        // their serving certificates (kubelab signs them with the cluster CA).
        kubelet_client_certificate: Some(pki.join("apiserver-kubelet-client.crt")),
        kubelet_client_key: Some(pki.join("apiserver-kubelet-client.key")),
        kubelet_certificate_authority: Some(pki.join("ca.crt")),
        service_account_issuer: vec![apiserver::serviceaccount::DEFAULT_ISSUER.into()],
        service_account_signing_key_file: Some(pki.join("sa.key")),
        service_account_key_file: vec![pki.join("sa.pub")],
        audit_policy_file: Some(audit_policy.clone()),
        audit_log_path: Some(data.join("logs/audit.log")),
        encryption_provider_config: Some(encryption_config),
        // kubeadm's: a node may join with a bootstrap token (`kubelab token create`).
        enable_bootstrap_token_auth: true,
        authorization_mode: vec!["Node".into(), "RBAC".into()],
        insecure_bind_address: "127.0.0.1".into(),
        insecure_port: args.port,
        proxy_healthz_port: args.proxy_healthz_port,
        ..Default::default()
    };
    {
        let rx = cp_rx.clone();
        s.control_plane.push(spawn_actix("apiserver", actix_rt::System::new, move || async move { apiserver::run(api_opts, until(rx)).await.map_err(Into::into) }));
    }
    // Every component reaches the API server with a kubeconfig of its own identity (pki/*.conf).
    let connect_as = |file: &str| client::Connection::Kubeconfig(pki.join(file));
    // kubelab up's own requests (waiting for the server, the DNS add-on, the node's readiness)
    // are the administrator's.
    let kube = client::client(&connect_as("admin.conf")).await?;
    let deadline = Instant::now() + Duration::from_secs(60);
    while kube.apiserver_version().await.is_err() {
        if Instant::now() > deadline {
            bail!("the API server did not answer within 60 s; see {}", data.join("logs").display());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The default RBAC policy in the authorizer (what /readyz waits for), or every component's
    // first requests would be refused: asked as the scheduler whether it may list pods, which
    // answers 403 until the policy is there, then yes (a SelfSubjectAccessReview).
    let scheduler = client::client(&connect_as("scheduler.conf")).await?;
    while !may_list_pods(&scheduler).await {
        if Instant::now() > deadline {
            bail!("the API server's RBAC policy was not in place within 60 s; see {}", data.join("logs").display());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // kubeadm's TLS bootstrap RBAC: a node with a bootstrap token of `kubelab token create` may
    // ask for its client certificate, which the controller manager approves and signs.
    crate::token::apply_tls_bootstrap_rbac(&kube).await?;
    step(started, "store and API server");

    // The scheduler (as system:kube-scheduler over HTTPS, scheduler.conf) and the controller
    // manager.
    {
        let opts = scheduler::Options {
            connection: connect_as("scheduler.conf"),
            config: None,
            scheduler_name: None,
            leader_elect: false,
            lease_namespace: "kube-system".into(),
            lease_name: "kube-scheduler".into(),
            listen: "127.0.0.1:0".parse()?,
        };
        let rx = cp_rx.clone();
        s.control_plane.push(spawn_tokio("scheduler", move || async move { scheduler::run(opts, until(rx)).await.map_err(Into::into) }));
        // As kubeadm runs it: system:kube-controller-manager (controller-manager.conf) for its
        // watches, leader lease and the controllers' service accounts, and each controller as
        // its own service account kube-system/<controller>; the token cleaner on, and the CSR
        // signer signing with the cluster CA (--controllers=*,bootstrapsigner,tokencleaner,
        // --cluster-signing-cert-file/--cluster-signing-key-file).
        let opts = controllers::Options {
            root_ca_file: Some(pki.join("ca.crt")),
            use_service_account_credentials: true,
            controllers: ["*", "bootstrapsigner", "tokencleaner"].map(String::from).to_vec(),
            cluster_signing_cert_file: Some(pki.join("ca.crt")),
            cluster_signing_key_file: Some(pki.join("ca.key")),
            ..controllers::Options::new(connect_as("controller-manager.conf"))
        };
        let rx = cp_rx.clone();
        s.control_plane.push(spawn_tokio("controller-manager", move || async move { controllers::run(opts, until(rx)).await.map_err(Into::into) }));
    }
    step(started, "scheduler and controller manager");

    // The cluster DNS, on the pods' bridge, behind the kube-dns Service (src/addons.rs).
    crate::addons::ensure_bridge(&nodeagent::network::cni::bridge_name(&cidr), cidr.gateway(), cidr.prefix())?;
    {
        let opts = dns::Options {
            listen: (cidr.gateway(), 53).into(),
            health_listen: ([127, 0, 0, 1], args.dns_health_port).into(),
            ..Default::default()
        };
        // As system:kube-dns over HTTPS (dns.conf), with what kubeadm's CoreDNS may read.
        crate::addons::apply_dns_rbac(&kube).await?;
        let (conn, rx) = (connect_as("dns.conf"), cp_rx.clone());
        s.control_plane.push(spawn_tokio("dns", move || async move { dns::run(opts, conn, until(rx)).await.map_err(Into::into) }));
    }
    crate::addons::apply_kube_dns(&kube, &node_name, cidr.gateway()).await?;
    step(started, &format!("cluster DNS on {}:53, Service kube-system/kube-dns {}", cidr.gateway(), crate::addons::KUBE_DNS_IP));

    // The proxy: Services as this machine's iptables rules (or nftables table, with
    // --proxy-mode nftables), and the Service range caught here
    // (refused) rather than routed out. Node ports answer on the pods' bridge only, not on the
    // machine's other interfaces. It has synced once before any pod starts.
    {
        // As system:kube-proxy over HTTPS (proxy.conf), which the default policy makes a
        // system:node-proxier.
        let mut opts = proxy::Options::new(connect_as("proxy.conf"));
        opts.hostname_override = Some(node_name.clone());
        opts.cluster_cidr = Some(proxy::Ipv4Cidr::parse(&cidr.to_string()).map_err(anyhow::Error::msg)?);
        opts.service_cluster_ip_range = Some(proxy::Ipv4Cidr::parse(SERVICE_CLUSTER_IP_RANGE).map_err(anyhow::Error::msg)?);
        opts.nodeport_addresses = vec![proxy::Ipv4Cidr::parse(&cidr.to_string()).map_err(anyhow::Error::msg)?];
        opts.healthz_bind_address = ([127, 0, 0, 1], args.proxy_healthz_port).into();
        opts.proxy_mode = args.proxy_mode;
        let rx = cp_rx.clone();
        s.proxy = true;
        s.control_plane.push(spawn_tokio("proxy", move || async move { proxy::run(opts, until(rx)).await.map_err(Into::into) }));
    }
    wait_healthy(args.proxy_healthz_port, "/healthz", Duration::from_secs(60)).await.context("the proxy's first sync")?;
    let mode = if args.proxy_mode == proxy::ProxyMode::Nftables { "the ip kube-proxy nftables table" } else { "iptables" };
    step(started, &format!("proxy: Services in {mode}, {SERVICE_CLUSTER_IP_RANGE} refused unless a Service's"));

    // The storage add-on (src/csi_hostpath.rs): the CSIDriver, the default StorageClass, and
    // `kubelab csi-hostpath` — the driver, its node-driver-registrar (which tells the node agent
    // where the driver's socket is), external-provisioner and external-attacher — as
    // system:csi-hostpath over HTTPS (csi-hostpath.conf). Volumes live under <data>/csi-hostpath.
    crate::csi_hostpath::apply_rbac(&kube).await?;
    crate::csi_hostpath::apply_driver_info(&kube).await?;
    {
        let mut opts = csi::Options::new(node_name.clone());
        opts.kubelet_root_dir = data.join("kubelet");
        opts.endpoint = csi::registrar::default_csi_socket_path(&opts.kubelet_root_dir, csi::DRIVER_NAME);
        opts.state_dir = data.join("csi-hostpath");
        opts.connection = Some(connect_as("csi-hostpath.conf"));
        let rx = cp_rx.clone();
        s.control_plane.push(spawn_tokio("csi-hostpath", move || async move { csi::run(opts, until(rx)).await.map_err(Into::into) }));
    }
    step(started, &format!("CSI driver {} (StorageClass standard, the default)", csi::DRIVER_NAME));

    // The node agent, as its node (system:node:<name> in system:nodes, over HTTPS): the Node
    // authorizer and NodeRestriction give it its own pods' objects and nothing else.
    let mut opts = nodeagent::Options::new(node_name.clone());
    opts.connection = Some(connect_as(&format!("kubelet-{node_name}.conf")));
    opts.runtime_endpoint = endpoint;
    opts.root_dir = data.join("kubelet");
    opts.pod_logs_dir = data.join("pod-logs");
    opts.cni_conf_dir = cni_conf_dir;
    opts.pod_cidr = Some(args.pod_cidr.clone());
    opts.cluster_dns = vec![crate::addons::KUBE_DNS_IP.into()];
    opts.address = [127, 0, 0, 1].into();
    opts.port = args.agent_port;
    // As kubeadm's KubeletConfiguration: serving with its certificate of the cluster CA, callers
    // authenticated by client certificate or TokenReview (no anonymous) and authorized by a
    // SubjectAccessReview on nodes/<subresource>.
    opts.tls = nodeagent::server::tls::TlsOptions {
        cert_file: Some(pki.join(format!("kubelet-{node_name}.crt"))),
        private_key_file: Some(pki.join(format!("kubelet-{node_name}.key"))),
        cert_dir: None,
        client_ca_file: Some(pki.join("ca.crt")),
    };
    opts.auth = nodeagent::server::auth::AuthOptions {
        anonymous: false,
        token_webhook: true,
        mode: nodeagent::server::auth::AuthorizationMode::Webhook,
        ..Default::default()
    };
    opts.node_ip = Some([127, 0, 0, 1].into());
    opts.image_dir = Some(image_dir.to_path_buf());
    opts.cgroup_root = args.cgroup_root.clone();
    opts.cgroup_driver = driver;
    // As kind's nodes: this cluster shares the machine's disk with everything else on it, and
    // its images come from tarballs with no registry to pull them again, so neither disk pressure
    // nor image GC may take pods or images away. Memory pressure still evicts.
    opts.image_gc.high_threshold_percent = 100;
    opts.eviction.thresholds = nodeagent::eviction::parse_threshold_config(UP_EVICTION_HARD).map_err(|e| anyhow::anyhow!(e))?;
    let agent = s.agent.insert(spawn_actix("nodeagent", nodeagent::system, move || async move { nodeagent::run(opts, agent_rx).await.map_err(Into::into) }));

    let nodes: kube::Api<Node> = kube::Api::all(kube.clone());
    // Generous: an emulated machine (the fresh-host check) needs far more than the ~2 s here.
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let ready = nodes.get_opt(&node_name).await.ok().flatten().is_some_and(|n| {
            n.status.and_then(|s| s.conditions).unwrap_or_default().iter().any(|c| c.type_ == "Ready" && c.status == "True")
        });
        if ready {
            break;
        }
        if agent.is_finished() {
            bail!("the node agent stopped; see the messages above");
        }
        if Instant::now() > deadline {
            bail!("node {node_name} did not turn Ready within 300 s");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    step(started, &format!("node agent: node {node_name} Ready"));
    if let Some(r) = &s.registry
        && let Some(done) = r.apply_pull_secret(&kube).await?
    {
        step(started, &done);
    }

    // The user's kubeconfig: the administrator's (O=system:masters) over HTTPS.
    let kubeconfig = data.join("kubeconfig");
    std::fs::copy(pki.join("admin.conf"), &kubeconfig).with_context(|| format!("writing {}", kubeconfig.display()))?;
    println!();
    println!("kubelab is running. In another shell:");
    println!();
    println!("  export KUBECONFIG={}", kubeconfig.display());
    println!("  kubectl run hello --image=docker.io/library/busybox:1.36 -- sh -c 'while true; do date; sleep 1; done'");
    println!("  kubectl get pods -o wide");
    println!("  kubectl logs -f hello");
    println!();
    println!("Who did what: {} (one JSON line per request; the policy is {}).", data.join("logs/audit.log").display(), audit_policy.display());
    let etcd = pki.join("etcd");
    println!(
        "etcdctl --endpoints=127.0.0.1:{} --cacert={} --cert={} --key={} talks to the store. Ctrl-C stops the cluster (its state stays in {}).",
        args.store_port,
        etcd.join("ca.crt").display(),
        etcd.join("healthcheck-client.crt").display(),
        etcd.join("healthcheck-client.key").display(),
        data.display()
    );

    Ok(())
}
