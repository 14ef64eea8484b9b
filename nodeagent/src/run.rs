//! Mirrors cmd/kubelet/app/server.go and kubelet.go's Run: `kubelab nodeagent`'s options, named
//! after the kubelet's flags, and the start-up order of its parts.

use std::collections::{BTreeMap, HashSet};
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use api::pod::kubelet_types::{APISERVER_SOURCE, FILE_SOURCE, HTTP_SOURCE};
use k8s_openapi::api::core::v1::{Pod, Taint};
use tokio::sync::watch;

use crate::cm::PodContainerManager;
use crate::config::PodConfig;
use crate::cri::RemoteRuntime;
use crate::error::{Error, Result};
use crate::events::Recorder;
use crate::images::image_gc_manager::{IMAGE_GC_PERIOD, ImageGcManager};
use crate::kubelet::{Dependencies, Kubelet};
use crate::kuberuntime::RuntimeManager;
use crate::kuberuntime::kuberuntime_gc::{CONTAINER_GC_PERIOD, ContainerGc};
use crate::network::cni;
use crate::nodestatus::{NodeOptions, NodeReadiness};
use crate::status::StatusManager;
use crate::volumemanager::VolumeManager;

/// `kubelab nodeagent`'s options.
#[derive(Clone, Debug)]
pub struct Options {
    /// `--kubeconfig` / `--master`; `None` runs static pods only (standalone mode).
    pub connection: Option<client::Connection>,
    /// `--bootstrap-kubeconfig`: when `--kubeconfig` is missing or its client certificate is
    /// missing or expired, get one with this kubeconfig's bootstrap token (TLS bootstrap,
    /// [`crate::certificate::bootstrap`]) and write `--kubeconfig` for it.
    pub bootstrap_kubeconfig: Option<PathBuf>,
    /// `--node-name` (default: the hostname).
    pub node_name: String,
    /// `--container-runtime-endpoint` (unix:///run/containerd/containerd.sock).
    pub runtime_endpoint: String,
    /// `--root-dir` (/var/lib/kubelab): pod directories, volumes, CNI IPAM state.
    pub root_dir: PathBuf,
    /// `--pod-logs-dir` (/var/log/pods): where containerd writes container logs.
    pub pod_logs_dir: PathBuf,
    /// `--pod-manifest-path`: the static pod directory.
    pub pod_manifest_path: Option<PathBuf>,
    /// `--manifest-url`: static pods fetched over HTTP every 20 s.
    pub manifest_url: Option<String>,
    /// `--pod-cidr`: this node's pod network; the agent writes the CNI config for it.
    pub pod_cidr: Option<String>,
    /// `--cni-conf-dir`: where containerd's CRI plugin reads CNI configs (its `conf_dir`).
    pub cni_conf_dir: PathBuf,
    /// `--address` / `--port`: the agent's HTTPS server (logs, exec, attach, port-forward,
    /// /pods, /healthz, /metrics).
    pub address: IpAddr,
    pub port: u16,
    /// Its serving certificate and client CA (`--tls-cert-file`, `--tls-private-key-file`,
    /// `--cert-dir`, `--client-ca-file`).
    pub tls: crate::server::tls::TlsOptions,
    /// Who may call it (`--anonymous-auth`, `--authentication-token-webhook`,
    /// `--authorization-mode`, and their cache TTLs).
    pub auth: crate::server::auth::AuthOptions,
    /// `--node-ip`: the InternalIP to report (default: the source address of the default route).
    pub node_ip: Option<IpAddr>,
    /// `--max-pods` (110).
    pub max_pods: u32,
    /// `--node-labels`, `--register-with-taints`.
    pub node_labels: BTreeMap<String, String>,
    pub register_with_taints: Vec<Taint>,
    /// `--image-dir`: OCI or docker-archive tarballs imported at start and when they appear.
    pub image_dir: Option<PathBuf>,
    /// `--cgroup-root` (/): the cgroup that `kubepods` is created under.
    pub cgroup_root: String,
    /// `--cgroup-driver` (default: [`crate::cm::CgroupDriver::detect`]); containerd's
    /// `SystemdCgroup` must match it.
    pub cgroup_driver: crate::cm::CgroupDriver,
    /// `--pod-max-pids` (-1): the most processes a pod may run; 0 or negative is no limit.
    pub pod_max_pids: i64,
    /// How often a running pod is synced when nothing happens to it (kubelet: 1 min; kubelab
    /// syncs more often so secret and configMap updates reach files quickly).
    pub resync_interval: Duration,
    /// PLEG relist period (kubelet: 1 s).
    pub relist_period: Duration,
    /// `--host-gw`: keep a route to every other node's pod CIDR via its InternalIP
    /// ([`crate::network::host_gw`]; all nodes on one L2 segment, as in the Compose lab).
    pub host_gw: bool,
    /// `--image-gc-high-threshold` (85), `--image-gc-low-threshold` (80),
    /// `--minimum-image-ttl-duration` (2m).
    pub image_gc: crate::images::image_gc_manager::ImageGcPolicy,
    /// `--serialize-image-pulls` (true) and `--max-parallel-image-pulls` (none).
    pub image_pulls: crate::images::PullOptions,
    /// `--image-credential-provider-config`: a CredentialProviderConfig file (YAML or JSON)
    /// naming the credential provider exec plugins ([`crate::credentialprovider::plugin`]).
    pub image_credential_provider_config: Option<PathBuf>,
    /// `--image-credential-provider-bin-dir`: where those plugins' executables are.
    pub image_credential_provider_bin_dir: Option<PathBuf>,
    /// `--eviction-hard`, `--eviction-pressure-transition-period` (5m) and the monitoring
    /// interval (`--housekeeping-interval`, 10 s).
    pub eviction: crate::eviction::Config,
    /// `--pod-infra-container-image`: the sandbox image, which image GC never removes.
    pub pod_infra_container_image: String,
    /// `--cluster-dns`: the nameservers of ClusterFirst pods (none: they get the node's).
    pub cluster_dns: Vec<IpAddr>,
    /// `--cluster-domain` (cluster.local): the search domains of ClusterFirst pods.
    pub cluster_domain: String,
    /// `--resolv-conf` (/etc/resolv.conf): the node's resolver, for Default pods (and
    /// ClusterFirst ones without `--cluster-dns`); empty: the node's loopback.
    pub resolv_conf: PathBuf,
}

impl Options {
    pub fn new(node_name: String) -> Options {
        Options {
            connection: None,
            bootstrap_kubeconfig: None,
            node_name,
            runtime_endpoint: "unix:///run/containerd/containerd.sock".into(),
            root_dir: crate::kubelet::getters::DEFAULT_ROOT_DIR.into(),
            pod_logs_dir: "/var/log/pods".into(),
            pod_manifest_path: None,
            manifest_url: None,
            pod_cidr: None,
            cni_conf_dir: "/etc/cni/net.d".into(),
            address: IpAddr::from([0, 0, 0, 0]),
            port: 10250,
            tls: Default::default(),
            auth: Default::default(),
            node_ip: None,
            max_pods: 110,
            node_labels: BTreeMap::new(),
            register_with_taints: vec![],
            image_dir: None,
            cgroup_root: "/".into(),
            cgroup_driver: crate::cm::CgroupDriver::detect(),
            pod_max_pids: -1,
            resync_interval: Duration::from_secs(10),
            relist_period: Duration::from_secs(1),
            host_gw: false,
            image_gc: Default::default(),
            image_pulls: Default::default(),
            image_credential_provider_config: None,
            image_credential_provider_bin_dir: None,
            eviction: Default::default(),
            pod_infra_container_image: crate::cri::containerd_config::PAUSE_IMAGE.into(),
            cluster_dns: vec![],
            cluster_domain: "cluster.local".into(),
            resolv_conf: "/etc/resolv.conf".into(),
        }
    }

    /// The checks on flags the kubelet makes at start, with messages naming the flags.
    pub fn validate(&self) -> Result<()> {
        self.image_gc.validate().map_err(Error::InvalidFlag)?;
        self.image_pulls.validate().map_err(Error::InvalidFlag)?;
        register_credential_providers(self.image_credential_provider_config.as_deref(), self.image_credential_provider_bin_dir.as_deref())?;
        if self.eviction.monitoring_interval.is_zero() {
            return Err(Error::InvalidFlag("--housekeeping-interval must be more than zero".into()));
        }
        if self.bootstrap_kubeconfig.is_some() && !matches!(self.connection, Some(client::Connection::Kubeconfig(_))) {
            return Err(Error::InvalidFlag("--bootstrap-kubeconfig needs --kubeconfig (the file it writes)".into()));
        }
        Ok(())
    }
}

/// kubelet's `RegisterCredentialProviderPlugins`, when either flag is given: the plugins of
/// `--image-credential-provider-config` in `--image-credential-provider-bin-dir`, checked (or
/// the reason the agent does not start). Blocking file I/O.
fn register_credential_providers(config: Option<&std::path::Path>, bin_dir: Option<&std::path::Path>) -> Result<crate::credentialprovider::plugin::CredentialProviders> {
    if config.is_none() && bin_dir.is_none() {
        return Ok(Default::default());
    }
    let empty = std::path::Path::new("");
    crate::credentialprovider::plugin::CredentialProviders::register(config.unwrap_or(empty), bin_dir.unwrap_or(empty))
        .map_err(|e| Error::InvalidFlag(format!("failed to register CRI auth plugins: {e}")))
}

/// At most this many threads run the agent's blocking work (cgroup and volume files, pod
/// directories). tokio's default allows 512 and keeps an idle one for 10 s — as long as a pod's
/// resync period — so a burst of pods left dozens of threads alive, each holding its own
/// allocator heap: most of the agent's memory at 100 pods. The work is short and ordered per
/// pod anyway.
pub(crate) const MAX_BLOCKING_THREADS: usize = 4;

/// The actix System the node agent runs in: one thread for the actors and tasks, and a small
/// pool for blocking work (see [`MAX_BLOCKING_THREADS`]).
pub fn system() -> actix_rt::SystemRunner {
    actix_rt::System::with_tokio_rt(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .max_blocking_threads(MAX_BLOCKING_THREADS)
            .build()
            .expect("building the node agent's runtime (threads, timers, I/O driver)")
    })
}

/// Dial the runtime, waiting up to a minute for it to come up (containerd may start after us).
async fn connect_runtime(endpoint: &str) -> Result<RemoteRuntime> {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut warned = false;
    loop {
        let r = async {
            let rt = RemoteRuntime::connect(endpoint).await?;
            rt.version().await?;
            Ok::<_, Error>(rt)
        }
        .await;
        match r {
            Ok(rt) => return Ok(rt),
            Err(e) if Instant::now() < deadline => {
                if !warned {
                    tracing::warn!(target: "kubelet", endpoint, error = %e, "container runtime not answering yet; retrying for up to 60 s");
                    warned = true;
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Err(e) => return Err(Error::RuntimeUnavailable { endpoint: endpoint.to_string(), source: Box::new(e) }),
        }
    }
}

/// The agent's HTTP server sees the kubelet through this.
struct ServerProvider {
    kubelet: Arc<Kubelet>,
    runtime: RemoteRuntime,
    pleg_health: Arc<dyn Fn() -> std::result::Result<(), String> + Send + Sync>,
}

impl crate::server::Provider for ServerProvider {
    fn pods(&self) -> Vec<Pod> {
        self.kubelet.get_pods()
    }
    fn runtime(&self) -> RemoteRuntime {
        self.runtime.clone()
    }
    fn healthz(&self) -> std::result::Result<(), String> {
        (self.pleg_health)()
    }
}

/// Run the node agent until `shutdown` turns true. Must run inside an actix System (the pod
/// workers are actors).
pub async fn run(opts: Options, shutdown: watch::Receiver<bool>) -> Result<()> {
    tracing::info!(target: "kubelet", node = %opts.node_name, endpoint = %opts.runtime_endpoint, root_dir = %opts.root_dir.display(), "starting the node agent");
    opts.validate()?;
    #[cfg(feature = "failpoints")]
    crate::failpoint::init()?;
    // TLS bootstrap comes first: every client below connects with the kubeconfig it writes.
    if let (Some(bootstrap), Some(client::Connection::Kubeconfig(kubeconfig))) = (&opts.bootstrap_kubeconfig, &opts.connection) {
        let cert_dir = opts.tls.cert_dir.clone().unwrap_or_else(|| opts.root_dir.join("pki"));
        crate::certificate::bootstrap::load_client_cert(kubeconfig, bootstrap, &cert_dir, &opts.node_name).await?;
    }
    let cidr = opts.pod_cidr.as_deref().map(cni::PodCidr::parse).transpose()?;
    for d in [&opts.root_dir, &opts.pod_logs_dir] {
        tokio::fs::create_dir_all(d).await.map_err(|e| Error::io(d.clone(), e))?;
    }

    // The runtime, and the images it needs before the first sandbox (pause).
    let cri = connect_runtime(&opts.runtime_endpoint).await?;
    let version = cri.version().await?;
    tracing::info!(target: "kubelet", runtime = %version.runtime_name, version = %version.runtime_version, "container runtime answers");
    if let Some(dir) = &opts.image_dir {
        let mut importer = crate::images::ImageImporter::new(dir.clone(), &opts.runtime_endpoint);
        match importer.import_new().await {
            Ok(names) if !names.is_empty() => tracing::info!(target: "kubelet::images", ?names, "imported images"),
            Ok(_) => {}
            Err(e) => tracing::warn!(target: "kubelet::images", error = %e, dir = %dir.display(), "importing images"),
        }
        tokio::spawn(importer.run(crate::images::IMPORT_PERIOD, shutdown.clone()));
    }

    // The pod network: the CNI config for our pod CIDR, and IPs leaked by sandboxes that died
    // with a previous run.
    if let Some(cidr) = &cidr {
        let (conf_dir, ipam) = (opts.cni_conf_dir.clone(), opts.root_dir.join("cni/ipam"));
        let c = cidr.clone();
        let live: HashSet<String> = cri.list_pod_sandbox(None).await?.into_iter().map(|s| s.id).collect();
        tokio::task::spawn_blocking(move || {
            let p = cni::write_conflist(&conf_dir, &c, &cni::bridge_name(&c), &ipam)?;
            let released = cni::release_leaked_ips(&ipam, &live);
            if !released.is_empty() {
                tracing::info!(target: "kubelet::network", ?released, "released pod IPs of sandboxes that no longer exist");
            }
            Ok::<_, Error>(p)
        })
        .await??;
    }

    let client = match &opts.connection {
        Some(c) => Some(client::client_as(c, "kubelet").await?),
        None => None,
    };
    if let (true, Some(c)) = (opts.host_gw, &client) {
        tokio::spawn(crate::network::host_gw::run(c.clone(), opts.node_name.clone(), shutdown.clone()));
    }
    let recorder = Recorder::new(client.clone().map(|c| client::record::EventRecorder::new(c, "kubelet", Some(opts.node_name.clone()))));

    let cgroups = crate::cm::CgroupManager::new(opts.cgroup_driver, std::path::Path::new(crate::cm::DEFAULT_CGROUP_MOUNT))?;
    tracing::info!(target: "kubelet::cm", version = ?cgroups.version(), driver = %cgroups.driver(), cgroup_root = %opts.cgroup_root, "cgroups");
    let pcm = PodContainerManager::new(cgroups, &opts.cgroup_root).with_pod_pids_limit(opts.pod_max_pids);
    {
        let pcm = pcm.clone();
        tokio::task::spawn_blocking(move || pcm.ensure_qos_cgroups()).await??;
    }

    let status = StatusManager::new(client.clone(), crate::status::status_manager::Options::default());
    tokio::spawn(status.clone().run(until(shutdown.clone())));

    let (node_tx, node_rx) = watch::channel(None);
    let (readiness_tx, readiness_rx) = watch::channel(NodeReadiness::default());
    let node_opts = NodeOptions {
        node_name: opts.node_name.clone(),
        labels: opts.node_labels.clone(),
        taints: opts.register_with_taints.clone(),
        pod_cidr: cidr.as_ref().map(|c| c.to_string()),
        max_pods: opts.max_pods,
        port: opts.port,
        root_dir: opts.root_dir.clone(),
        node_ip: opts.node_ip,
    };
    let host_ip = {
        let o = node_opts.clone();
        tokio::task::spawn_blocking(move || crate::nodestatus::setters::HostInfo::gather(&o).internal_ip)
            .await
            .ok()
            .flatten()
            .map(|ip| ip.to_string())
            .unwrap_or_default()
    };
    // CSI: the drivers registered through the plugin manager, and the volume plugin that uses them.
    let csi_drivers = crate::volumemanager::csi::csi_drivers_store::Drivers::default();
    let csi = client.clone().map(|c| {
        let options = crate::volumemanager::csi::Options::default();
        crate::volumemanager::csi::CsiPlugin::new(opts.root_dir.clone(), opts.node_name.clone(), c, csi_drivers.clone(), options)
    });
    if let Some(client) = &client {
        let volumes_in_use = csi.clone().map(|p| Arc::new(move || p.volumes_in_use()) as crate::nodestatus::VolumesInUse);
        tokio::spawn(crate::nodestatus::run(client.clone(), node_opts, cri.clone(), readiness_rx, node_tx, volumes_in_use, shutdown.clone()));
        tokio::spawn(start_plugin_manager(opts.root_dir.clone(), opts.node_name.clone(), client.clone(), csi_drivers, node_rx.clone(), shutdown.clone()));
    } else {
        // Standalone: admission still needs a node; describe the local one.
        drop(readiness_rx);
        let _ = node_tx.send(None);
    }

    // PLEG, and the readiness the node reports from it and from the runtime.
    let (pleg_tx, pleg_rx) = tokio::sync::mpsc::channel(crate::pleg::CHANNEL_CAPACITY);
    let pleg_opts = crate::pleg::Options { relist_period: opts.relist_period, ..Default::default() };
    let pleg = crate::pleg::GenericPleg::new(cri.clone(), pleg_tx, pleg_opts);
    let pleg_health = {
        let h = pleg.clone();
        Arc::new(move || h.healthy()) as Arc<dyn Fn() -> std::result::Result<(), String> + Send + Sync>
    };
    tokio::spawn(pleg.run(until(shutdown.clone())));
    let (pressure_tx, pressure_rx) = watch::channel(crate::eviction::NodePressure::default());
    {
        let (cri, pleg_health, mut shutdown, mut pressure) = (cri.clone(), pleg_health.clone(), shutdown.clone(), pressure_rx.clone());
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(5));
            loop {
                tokio::select! {
                    _ = tick.tick() => {}
                    // The eviction manager's conditions reach the node status at once.
                    Ok(()) = pressure.changed() => {}
                    _ = shutdown.changed() => return,
                }
                let (runtime_ready, network_ready) = match cri.status().await {
                    Ok(s) => runtime_conditions(&s),
                    Err(e) => (Err(format!("container runtime is down: {e}")), Ok(())),
                };
                let pressure = pressure.borrow_and_update().clone();
                let r = NodeReadiness {
                    runtime_ready,
                    network_ready,
                    pleg_healthy: pleg_health(),
                    memory_pressure: pressure.memory,
                    disk_pressure: pressure.disk,
                    pid_pressure: pressure.pid,
                };
                readiness_tx.send_if_modified(|old| if *old != r { *old = r; true } else { false });
            }
        });
    }

    // The pod sources.
    let mut sources = vec![];
    if client.is_some() {
        sources.push(APISERVER_SOURCE);
    }
    if opts.pod_manifest_path.is_some() {
        sources.push(FILE_SOURCE);
    }
    if opts.manifest_url.is_some() {
        sources.push(HTTP_SOURCE);
    }
    let (config, updates) = PodConfig::new(&sources);
    if let Some(c) = &client {
        tokio::spawn(crate::config::apiserver::run(c.clone(), opts.node_name.clone(), config.sender(), shutdown.clone()));
    }
    if let Some(dir) = &opts.pod_manifest_path {
        tokio::spawn(crate::config::file::run(dir.clone(), opts.node_name.clone(), config.sender(), shutdown.clone()));
    }
    if let Some(url) = &opts.manifest_url {
        tokio::spawn(crate::config::http::run(url.clone(), opts.node_name.clone(), config.sender(), shutdown.clone()));
    }

    // The pods' DNS: the flags, and the node's resolv.conf read once, as the kubelet reads it.
    let host_dns = if opts.resolv_conf.as_os_str().is_empty() {
        None
    } else {
        match tokio::fs::read_to_string(&opts.resolv_conf).await {
            Ok(t) => Some(crate::network::dns::parse_resolv_conf(&t)),
            Err(e) => {
                tracing::warn!(path = %opts.resolv_conf.display(), error = %e, "cannot read the resolv.conf; Default pods get no nameserver");
                Some(Default::default())
            }
        }
    };
    if opts.cluster_dns.is_empty() {
        tracing::warn!("no --cluster-dns: ClusterFirst pods get the node's resolv.conf (MissingClusterDNS events)");
    }
    let pod_dns = crate::network::dns::Configurer {
        cluster_dns: opts.cluster_dns.clone(),
        cluster_domain: opts.cluster_domain.clone(),
        host: host_dns,
        node_ips: host_ip.parse().into_iter().collect(),
    };
    let recorder_for_gc = recorder.clone();
    // Probes: exec through the runtime, HTTP and TCP from the node; results feed the status.
    let prober = crate::prober::Prober::new(cri.clone(), recorder.clone())?;
    let probes = crate::prober::ProberManager::new(Arc::new(prober), status.clone());
    // The HTTPS server's addresses, for a certificate of its own.
    let addresses: Vec<IpAddr> = host_ip.parse().into_iter().chain(opts.node_ip).collect();
    let credential_providers = {
        let (config, bin_dir) = (opts.image_credential_provider_config.clone(), opts.image_credential_provider_bin_dir.clone());
        tokio::task::spawn_blocking(move || register_credential_providers(config.as_deref(), bin_dir.as_deref()))
            .await
            .map_err(|e| Error::InvalidFlag(format!("failed to register CRI auth plugins: {e}")))??
    };
    let kubelet = Arc::new(Kubelet::new(Dependencies {
        node_name: opts.node_name.clone(),
        root_dir: opts.root_dir.clone(),
        client: client.clone(),
        runtime: {
            let mut runtime = RuntimeManager::new(cri.clone(), recorder.clone(), opts.pod_logs_dir.clone(), pod_dns);
            runtime.images.configure(&opts.image_pulls, opts.root_dir.clone(), credential_providers);
            runtime
        },
        volumes: {
            let volumes = VolumeManager::new(opts.root_dir.clone(), client.clone()).with_node(node_rx.clone());
            match csi {
                Some(csi) => volumes.with_csi(csi),
                None => volumes,
            }
        },
        pcm,
        status,
        probes,
        recorder: recorder.clone(),
        node: node_rx,
        host_ip,
        max_pods: opts.max_pods,
        resync_interval: opts.resync_interval,
        pressure: pressure_rx,
    }));

    // The HTTPS server: its certificate (the agent's own unless given one) and who may call it.
    let tls = crate::server::tls::server_config(&opts.tls, &opts.root_dir, &opts.node_name, &addresses).map_err(Error::InvalidFlag)?;
    let reviewer = client.clone().map(|c| Arc::new(crate::server::auth::ApiReviewer(c)) as Arc<dyn crate::server::auth::Reviewer>);
    let auth = crate::server::auth::KubeletAuth::new(opts.auth.clone(), opts.node_name.clone(), reviewer).map_err(Error::InvalidFlag)?;
    let listener = std::net::TcpListener::bind(SocketAddr::new(opts.address, opts.port))
        .map_err(|e| Error::io(format!("{}:{}", opts.address, opts.port), e))?;
    let provider = Arc::new(ServerProvider { kubelet: kubelet.clone(), runtime: cri.clone(), pleg_health });
    tokio::spawn(crate::server::serve(listener, tls, Arc::new(auth), provider, shutdown.clone()));

    let config = Arc::new(config);
    let sources_ready = {
        let c = config.clone();
        Arc::new(move || c.sources_ready()) as Arc<dyn Fn() -> bool + Send + Sync>
    };
    let (kill_tx, kill_rx) = tokio::sync::mpsc::channel(16);
    let (container_gc, image_gc) = start_garbage_collection(&opts, &kubelet, cri, recorder_for_gc, sources_ready.clone(), &shutdown);
    // The eviction manager, which also calls both collectors when the disk runs short.
    let eviction = kubelet.new_eviction_manager(opts.eviction.clone(), container_gc, image_gc, sources_ready.clone(), kill_tx, pressure_tx);
    tokio::spawn(eviction.run(shutdown.clone()));
    crate::kubelet::sync_loop::sync_loop(kubelet, updates, pleg_rx, sources_ready, kill_rx, shutdown).await;
    Ok(())
}

/// Once the Node is registered: its (empty) CSINode, retried until the API server takes it, and
/// the plugin manager, which registers the node's CSI drivers.
async fn start_plugin_manager(
    root_dir: PathBuf,
    node_name: String,
    client: kube::Client,
    drivers: crate::volumemanager::csi::csi_drivers_store::Drivers,
    mut node_rx: watch::Receiver<Option<k8s_openapi::api::core::v1::Node>>,
    shutdown: watch::Receiver<bool>,
) {
    if node_rx.wait_for(Option::is_some).await.is_err() {
        return;
    }
    let nim = crate::volumemanager::csi::nodeinfomanager::NodeInfoManager::new(node_name, client);
    {
        let (nim, mut shutdown) = (nim.clone(), shutdown.clone());
        tokio::spawn(async move {
            let mut warned = false;
            loop {
                match nim.initialize_csi_node().await {
                    Ok(_) => return,
                    Err(e) if !warned => {
                        tracing::warn!(target: "kubelet::csi", error = %e, "cannot create the node's CSINode yet; retrying");
                        warned = true;
                    }
                    Err(_) => {}
                }
                tokio::select! {
                    () = tokio::time::sleep(Duration::from_secs(5)) => {}
                    _ = shutdown.changed() => return,
                }
            }
        });
    }
    let handler = crate::volumemanager::csi::registration_handler::RegistrationHandler::new(drivers, nim);
    crate::pluginmanager::run(root_dir, Arc::new(handler), Default::default(), shutdown).await;
}

/// Container GC every minute, image GC every five (kubelet's StartGarbageCollection). Returns
/// both collectors, for the eviction manager.
fn start_garbage_collection(
    opts: &Options,
    kubelet: &Arc<Kubelet>,
    cri: RemoteRuntime,
    recorder: Recorder,
    sources_ready: Arc<dyn Fn() -> bool + Send + Sync>,
    shutdown: &watch::Receiver<bool>,
) -> (Arc<ContainerGc>, Arc<ImageGcManager>) {
    let pod_exists = {
        let k = kubelet.clone();
        Arc::new(move |uid: &str| k.is_desired(uid))
    };
    let container_gc = Arc::new(ContainerGc::new(cri.clone(), opts.pod_logs_dir.clone(), Default::default(), pod_exists));
    let image_gc = Arc::new(ImageGcManager::new(
        cri,
        recorder.clone(),
        &opts.node_name,
        opts.image_gc,
        opts.pod_infra_container_image.clone(),
        opts.root_dir.clone(),
    ));
    {
        let (gc, ready, recorder, node_name, mut shutdown) =
            (container_gc.clone(), sources_ready.clone(), recorder, opts.node_name.clone(), shutdown.clone());
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(CONTAINER_GC_PERIOD);
            loop {
                tokio::select! {
                    _ = tick.tick() => {}
                    _ = shutdown.changed() => return,
                }
                if let Err(e) = gc.garbage_collect(ready()).await {
                    tracing::warn!(target: "kuberuntime::gc", error = %e, "container garbage collection failed");
                    let node = k8s_openapi::api::core::v1::ObjectReference {
                        kind: Some("Node".into()),
                        name: Some(node_name.clone()),
                        uid: Some(node_name.clone()),
                        ..Default::default()
                    };
                    recorder.object_event(node, crate::events::WARNING, "ContainerGCFailed", e.to_string());
                }
            }
        });
    }
    {
        let (gc, mut shutdown) = (image_gc.clone(), shutdown.clone());
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(IMAGE_GC_PERIOD);
            loop {
                tokio::select! {
                    _ = tick.tick() => {}
                    _ = shutdown.changed() => return,
                }
                let _ = gc.detect_images(chrono::Utc::now()).await;
                if let Err(e) = gc.garbage_collect().await {
                    tracing::warn!(target: "kubelet::image_gc", error = %e, "image garbage collection failed");
                }
            }
        });
    }
    (container_gc, image_gc)
}

/// A future that completes when `shutdown` turns true (or its sender is gone).
async fn until(mut shutdown: watch::Receiver<bool>) {
    let _ = shutdown.wait_for(|s| *s).await;
}

/// RuntimeReady and NetworkReady from the CRI Status call.
fn runtime_conditions(s: &k8s_cri::v1::StatusResponse) -> (std::result::Result<(), String>, std::result::Result<(), String>) {
    let cond = |t: &str| {
        let c = s.status.as_ref().and_then(|st| st.conditions.iter().find(|c| c.r#type == t));
        match c {
            Some(c) if c.status => Ok(()),
            Some(c) => Err(format!("{t}=false reason:{} message:{}", c.reason, c.message)),
            None => Err(format!("{t} missing from the runtime status")),
        }
    };
    let net = cond("NetworkReady").map_err(|e| format!("container runtime network not ready: {e}"));
    (cond("RuntimeReady").map_err(|e| format!("container runtime not ready: {e}")), net)
}
