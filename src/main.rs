//! `kubelab`: one binary, a subcommand per component, with flags named as the Kubernetes (and
//! etcd) components name theirs.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use clap::{Args, Parser, Subcommand};

mod addons;
mod certs;
mod csi_hostpath;
mod otel;
mod registry;
mod service;
mod trace;
mod token;
mod up;

/// Every component allocates and frees many small JSON values per request; mimalloc does that
/// with less CPU than glibc's allocator (measured with scheduler-bench: see BENCHMARKS.md).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(name = "kubelab", version, about = "A Kubernetes-compatible mini-cluster, small enough to read and real enough to run.")]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Record each pod's steps for `kubelab trace` (a bounded ring per component). Off, this
    /// process records nothing: for measuring what recording costs (BENCHMARKS.md).
    #[arg(long, global = true, default_value_t = true, action = clap::ArgAction::Set, env = "KUBELAB_RECORD_POD_STEPS")]
    record_pod_steps: bool,
}

#[derive(Subcommand)]
enum Command {
    /// The store: kubelab's etcd (raft-replicated, etcd v3 API).
    Store(StoreArgs),
    /// The API server: kubectl-compatible REST API over the store (or a real etcd).
    Apiserver(ApiserverArgs),
    /// The controller manager: the namespace, node lifecycle, workload, endpoint, certificate and
    /// other controllers (leader-elected).
    ControllerManager(ControllerManagerArgs),
    /// The scheduler: binds each pending pod to a node (filter and score plugins).
    Scheduler(SchedulerArgs),
    /// The node agent (kubelab's kubelet): runs the pods bound to this node on containerd.
    Nodeagent(NodeagentArgs),
    /// The cluster DNS (kubelab's CoreDNS): Services and pods by name, other names forwarded
    /// to the node's resolvers.
    Dns(DnsArgs),
    /// The proxy (kubelab's kube-proxy, iptables mode): Services and EndpointSlices as this
    /// node's nat and filter rules; --cleanup removes them.
    Proxy(ProxyArgs),
    /// The hostpath CSI driver (hostpath.csi.kubelab.io) with its node-driver-registrar, and with
    /// an API server its external-provisioner and external-attacher: one per node.
    CsiHostpath(CsiHostpathArgs),
    /// The whole cluster on this machine: store, API server, scheduler, controller manager,
    /// node agent and a private containerd (Ctrl-C stops it; run again to resume).
    Up(up::UpArgs),
    /// A pod's journey through the components, step by step with real timings (a table,
    /// --mermaid or --json), gathered by the API server; --follow shows the next pod live.
    Trace(trace::TraceArgs),
    /// Prints the containerd config.toml a node agent's containerd runs with: a machine's layout
    /// (the lab's nodes), or with --dir the one-directory layout of `kubelab up`.
    ContainerdConfig(ContainerdConfigArgs),
    /// The cluster's certificates, keys and kubeconfigs, as kubeadm makes them: `generate` makes
    /// or renews them, `check-expiration` shows when each ends.
    Certs(certs::CertsArgs),
    /// Bootstrap tokens, with which a new node's agent asks for its client certificate
    /// (kubeadm token): create, list, delete, generate.
    Token(token::TokenArgs),
}

/// Flags as containerd names its own (`containerd --root --state --address`), each overriding
/// what the layout says.
#[derive(Args)]
struct ContainerdConfigArgs {
    /// Everything under this directory, as `kubelab up` lays out `<data-dir>/containerd`
    /// (default: a machine's layout: /var/lib/containerd, /run/containerd, /etc/cni/net.d).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// containerd's root: content, snapshots, metadata.
    #[arg(long)]
    root: Option<PathBuf>,
    /// containerd's state directory: task bundles, pod network namespaces.
    #[arg(long)]
    state: Option<PathBuf>,
    /// containerd's gRPC socket (the CRI endpoint); its ttrpc socket goes next to it, <address>.ttrpc.
    #[arg(long)]
    address: Option<PathBuf>,
    /// Where the CRI plugin reads CNI network configs (the node agent's --cni-conf-dir).
    #[arg(long)]
    cni_conf_dir: Option<PathBuf>,
    /// The CRI streaming server's port on 127.0.0.1 (exec, attach, port-forward); 0 is any free port.
    #[arg(long, default_value_t = 0)]
    stream_port: u16,
    /// The sandbox (pause) image; it must be imported, as no registry is reachable.
    #[arg(long, default_value = nodeagent::cri::containerd_config::PAUSE_IMAGE)]
    sandbox_image: String,
    /// The node agent's --cgroup-driver, which runc's SystemdCgroup must match (default: the
    /// agent's default for this host).
    #[arg(long)]
    cgroup_driver: Option<nodeagent::cm::CgroupDriver>,
    /// Print instead the hosts.toml for this registry (host[:port], as images name it), to go in
    /// <certs.d>/<host>/hosts.toml: containerd pulls from it over HTTPS, checking --registry-ca.
    #[arg(long, requires = "registry_ca")]
    registry_host: Option<String>,
    /// The CA the --registry-host's certificate is signed by.
    #[arg(long, requires = "registry_host")]
    registry_ca: Option<PathBuf>,
}

impl ContainerdConfigArgs {
    fn into_config(self) -> nodeagent::cri::containerd_config::ContainerdConfig {
        use nodeagent::cri::containerd_config::{ContainerdConfig, ttrpc_address_for};
        let mut c = match self.dir {
            Some(dir) => ContainerdConfig::private(dir, self.stream_port),
            None => ContainerdConfig::node(),
        };
        c.stream_server_port = self.stream_port;
        c.sandbox_image = self.sandbox_image;
        if let Some(driver) = self.cgroup_driver {
            c.systemd_cgroup = driver == nodeagent::cm::CgroupDriver::Systemd;
        }
        if let Some(root) = self.root {
            c.root = root;
        }
        if let Some(state) = self.state {
            c.state = state;
        }
        if let Some(address) = self.address {
            c.ttrpc_address = ttrpc_address_for(&address);
            c.address = address;
        }
        if let Some(dir) = self.cni_conf_dir {
            c.cni_conf_dir = dir;
        }
        c
    }
}

/// Flags as the kubelet names them.
#[derive(Args)]
struct NodeagentArgs {
    /// Path to a kubeconfig file for reaching the API server. Without it (and without
    /// --master) the agent runs static pods only.
    #[arg(long, conflicts_with = "master")]
    kubeconfig: Option<PathBuf>,
    /// A kubeconfig with a bootstrap token: when --kubeconfig is missing or its client
    /// certificate is missing or expired, the agent asks the API server for a certificate with a
    /// CertificateSigningRequest, keeps it in --cert-dir and writes --kubeconfig for it.
    #[arg(long, requires = "kubeconfig")]
    bootstrap_kubeconfig: Option<PathBuf>,
    /// The API server's URL (overrides any kubeconfig).
    #[arg(long)]
    master: Option<String>,
    /// The name of this node (default: the hostname).
    #[arg(long)]
    node_name: Option<String>,
    /// The CRI endpoint of the container runtime.
    #[arg(long, default_value = "unix:///run/containerd/containerd.sock")]
    container_runtime_endpoint: String,
    /// Directory for pod data, volumes and network state.
    #[arg(long, default_value = "/var/lib/kubelab")]
    root_dir: PathBuf,
    /// Directory containerd writes container logs to.
    #[arg(long, default_value = "/var/log/pods")]
    pod_logs_dir: PathBuf,
    /// Directory of static pod manifests (YAML or JSON), run with or without an API server.
    #[arg(long)]
    pod_manifest_path: Option<PathBuf>,
    /// URL of static pod manifests, fetched every 20 s.
    #[arg(long)]
    manifest_url: Option<String>,
    /// This node's pod network (e.g. 10.244.1.0/24); the agent writes the CNI config for it.
    #[arg(long)]
    pod_cidr: Option<String>,
    /// Where the runtime reads CNI network configs (containerd's CRI conf_dir).
    #[arg(long, default_value = "/etc/cni/net.d")]
    cni_conf_dir: PathBuf,
    /// Address of the agent's HTTPS server (logs, exec, attach, port-forward, /pods, /healthz, /metrics).
    #[arg(long, default_value = "0.0.0.0")]
    address: std::net::IpAddr,
    /// Port of the agent's HTTPS server.
    #[arg(long, default_value_t = 10250)]
    port: u16,
    /// The serving certificate (PEM). Without it and --tls-private-key-file, the agent signs one
    /// itself and keeps it in --cert-dir.
    #[arg(long)]
    tls_cert_file: Option<PathBuf>,
    /// The serving certificate's private key (PEM).
    #[arg(long)]
    tls_private_key_file: Option<PathBuf>,
    /// Where the self-signed serving certificate, and the client certificate of TLS bootstrap
    /// (kubelet-client-current.pem), are kept (default: <root-dir>/pki).
    #[arg(long)]
    cert_dir: Option<PathBuf>,
    /// Client certificates signed by a CA in this bundle authenticate their subject (CN the user,
    /// O the groups).
    #[arg(long)]
    client_ca_file: Option<PathBuf>,
    /// Requests without credentials go on as system:anonymous (else they get 401).
    #[arg(long, default_value_t = true, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    anonymous_auth: bool,
    /// Bearer tokens are authenticated by the API server (TokenReview).
    #[arg(long)]
    authentication_token_webhook: bool,
    /// How long a TokenReview's answer is kept.
    #[arg(long, default_value = "2m", value_parser = parse_duration)]
    authentication_token_webhook_cache_ttl: Duration,
    /// AlwaysAllow, or Webhook: each request is authorized by a SubjectAccessReview on
    /// nodes/<subresource> (proxy, log, stats, metrics, spec).
    #[arg(long, default_value = "AlwaysAllow")]
    authorization_mode: nodeagent::server::auth::AuthorizationMode,
    /// How long an allowed SubjectAccessReview answer is kept.
    #[arg(long, default_value = "5m", value_parser = parse_duration)]
    authorization_webhook_cache_authorized_ttl: Duration,
    /// How long a denied SubjectAccessReview answer is kept.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    authorization_webhook_cache_unauthorized_ttl: Duration,
    /// The IP address the node reports (default: the source address of the default route).
    #[arg(long)]
    node_ip: Option<std::net::IpAddr>,
    /// The most pods this node runs.
    #[arg(long, default_value_t = 110)]
    max_pods: u32,
    /// Labels of the Node, key=value,…
    #[arg(long, value_delimiter = ',')]
    node_labels: Vec<String>,
    /// Taints of the Node when it registers, key=value:Effect,…
    #[arg(long, value_delimiter = ',')]
    register_with_taints: Vec<String>,
    /// Directory of image tarballs (OCI or docker-archive) to import into the runtime.
    #[arg(long)]
    image_dir: Option<PathBuf>,
    /// The cgroup pods go under (`<cgroup-root>/kubepods/…`; with the systemd driver, slices named
    /// after it).
    #[arg(long, default_value = "/")]
    cgroup_root: String,
    /// Who creates the pods' cgroups: cgroupfs (the agent writes them) or systemd (slices asked of
    /// systemd over D-Bus). Default: systemd on a cgroup v2 host systemd booted, else cgroupfs.
    /// containerd's SystemdCgroup must match (`kubelab containerd-config` picks the same default).
    #[arg(long)]
    cgroup_driver: Option<nodeagent::cm::CgroupDriver>,
    /// The most processes a pod may run (its cgroup's pids.max); -1 is no limit.
    #[arg(long, default_value_t = -1, allow_hyphen_values = true)]
    pod_max_pids: i64,
    /// Route every other node's pod CIDR via its InternalIP (flannel's host-gw; nodes on one L2 network).
    #[arg(long)]
    host_gw: bool,
    /// Percent of image filesystem usage at or above which image garbage collection runs.
    #[arg(long, default_value_t = 85)]
    image_gc_high_threshold: u8,
    /// Percent of image filesystem usage image garbage collection frees down to.
    #[arg(long, default_value_t = 80)]
    image_gc_low_threshold: u8,
    /// Minimum age of an unused image before garbage collection may remove it.
    #[arg(long, default_value = "2m", value_parser = parse_duration)]
    minimum_image_ttl_duration: Duration,
    /// Pull images one at a time (false: several at once, see --max-parallel-image-pulls).
    #[arg(long, default_value_t = true, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    serialize_image_pulls: bool,
    /// With --serialize-image-pulls=false, the most pulls at once (default: no limit).
    #[arg(long)]
    max_parallel_image_pulls: Option<u32>,
    /// A CredentialProviderConfig file (kubelet.config.k8s.io/v1, YAML or JSON) naming the
    /// credential provider exec plugins asked for registry credentials of matching images.
    #[arg(long)]
    image_credential_provider_config: Option<PathBuf>,
    /// The directory of the credential provider plugins' executables.
    #[arg(long)]
    image_credential_provider_bin_dir: Option<PathBuf>,
    /// Hard eviction thresholds, signal<quantity or signal<percent%, comma-separated (signals:
    /// memory.available, nodefs.available, nodefs.inodesFree, imagefs.available, imagefs.inodesFree, pid.available).
    #[arg(long, default_value = nodeagent::eviction::DEFAULT_EVICTION_HARD)]
    eviction_hard: String,
    /// How long a pressure condition stays after its threshold was last met.
    #[arg(long, default_value = "5m", value_parser = parse_duration)]
    eviction_pressure_transition_period: Duration,
    /// How often the eviction manager observes the node.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    housekeeping_interval: Duration,
    /// The sandbox (pause) image; image garbage collection never removes it.
    #[arg(long, default_value = nodeagent::cri::containerd_config::PAUSE_IMAGE)]
    pod_infra_container_image: String,
    /// IP addresses of the cluster DNS (`kubelab dns`), comma-separated: the nameservers of
    /// ClusterFirst pods. Without it they get the node's resolv.conf.
    #[arg(long, value_delimiter = ',')]
    cluster_dns: Vec<std::net::IpAddr>,
    /// The cluster domain: ClusterFirst pods search `<ns>.svc.<domain> svc.<domain> <domain>`.
    #[arg(long, default_value = "cluster.local")]
    cluster_domain: String,
    /// The node's resolv.conf, which Default pods get ("" for the node's loopback resolver).
    #[arg(long, default_value = "/etc/resolv.conf")]
    resolv_conf: String,
    #[command(flatten)]
    otlp: otel::OtlpArgs,
}

impl NodeagentArgs {
    fn into_options(self) -> anyhow::Result<nodeagent::Options> {
        let node_name = self.node_name.unwrap_or_else(client::hostname).to_lowercase();
        let mut o = nodeagent::Options::new(node_name);
        o.connection = match (self.master, self.kubeconfig) {
            (None, None) => None,
            (m, k) => Some(client::Connection::from_flags(m, k)?),
        };
        o.bootstrap_kubeconfig = self.bootstrap_kubeconfig;
        o.runtime_endpoint = self.container_runtime_endpoint;
        o.root_dir = self.root_dir;
        o.pod_logs_dir = self.pod_logs_dir;
        o.pod_manifest_path = self.pod_manifest_path;
        o.manifest_url = self.manifest_url;
        o.pod_cidr = self.pod_cidr;
        o.cni_conf_dir = self.cni_conf_dir;
        o.address = self.address;
        o.port = self.port;
        o.tls = nodeagent::server::tls::TlsOptions {
            cert_file: self.tls_cert_file,
            private_key_file: self.tls_private_key_file,
            cert_dir: self.cert_dir,
            client_ca_file: self.client_ca_file,
        };
        o.auth = nodeagent::server::auth::AuthOptions {
            anonymous: self.anonymous_auth,
            token_webhook: self.authentication_token_webhook,
            token_webhook_cache_ttl: self.authentication_token_webhook_cache_ttl,
            mode: self.authorization_mode,
            authorized_ttl: self.authorization_webhook_cache_authorized_ttl,
            unauthorized_ttl: self.authorization_webhook_cache_unauthorized_ttl,
        };
        o.node_ip = self.node_ip;
        o.max_pods = self.max_pods;
        for l in self.node_labels {
            let (k, v) = l.split_once('=').with_context(|| format!("--node-labels {l:?}: want key=value"))?;
            o.node_labels.insert(k.to_string(), v.to_string());
        }
        for t in self.register_with_taints {
            o.register_with_taints.push(parse_taint(&t)?);
        }
        o.image_dir = self.image_dir;
        o.cgroup_root = self.cgroup_root;
        if let Some(driver) = self.cgroup_driver {
            o.cgroup_driver = driver;
        }
        o.pod_max_pids = self.pod_max_pids;
        o.host_gw = self.host_gw;
        o.image_gc = nodeagent::images::ImageGcPolicy {
            high_threshold_percent: self.image_gc_high_threshold,
            low_threshold_percent: self.image_gc_low_threshold,
            min_age: self.minimum_image_ttl_duration,
        };
        o.image_pulls = nodeagent::images::PullOptions { serialize: self.serialize_image_pulls, max_parallel: self.max_parallel_image_pulls };
        o.image_credential_provider_config = self.image_credential_provider_config;
        o.image_credential_provider_bin_dir = self.image_credential_provider_bin_dir;
        o.eviction = nodeagent::eviction::Config {
            thresholds: nodeagent::eviction::parse_threshold_config(&self.eviction_hard)
                .map_err(|e| anyhow::anyhow!("--eviction-hard: {e}"))?,
            pressure_transition_period: self.eviction_pressure_transition_period,
            monitoring_interval: self.housekeeping_interval,
        };
        o.pod_infra_container_image = self.pod_infra_container_image;
        o.cluster_dns = self.cluster_dns;
        o.cluster_domain = self.cluster_domain;
        o.resolv_conf = self.resolv_conf.into();
        o.validate()?;
        Ok(o)
    }
}

/// `key[=value]:Effect`, as kubectl taint and the kubelet write taints.
fn parse_taint(s: &str) -> anyhow::Result<k8s_openapi::api::core::v1::Taint> {
    let (kv, effect) = s.rsplit_once(':').with_context(|| format!("taint {s:?}: want key[=value]:Effect"))?;
    anyhow::ensure!(
        ["NoSchedule", "PreferNoSchedule", "NoExecute"].contains(&effect),
        "taint {s:?}: effect must be NoSchedule, PreferNoSchedule or NoExecute"
    );
    let (key, value) = match kv.split_once('=') {
        Some((k, v)) => (k.to_string(), Some(v.to_string())),
        None => (kv.to_string(), None),
    };
    Ok(k8s_openapi::api::core::v1::Taint { key, value, effect: effect.to_string(), time_added: None })
}

/// Flags as kube-proxy names them.
#[derive(Args)]
struct ProxyArgs {
    /// Path to a kubeconfig file for reaching the API server.
    #[arg(long, conflicts_with = "master")]
    kubeconfig: Option<PathBuf>,
    /// The API server's URL (overrides any kubeconfig).
    #[arg(long)]
    master: Option<String>,
    /// This node's name, as the node agent registered it (default: the hostname).
    #[arg(long)]
    hostname_override: Option<String>,
    /// The pods' range (e.g. 10.244.0.0/16): traffic to cluster IPs from outside it is masqueraded.
    #[arg(long)]
    cluster_cidr: Option<String>,
    /// The Services' range, as the API server's flag: any packet to it that no Service rule
    /// translated is refused instead of routed (the safety net, kept until --cleanup).
    #[arg(long)]
    service_cluster_ip_range: Option<String>,
    /// CIDRs whose interface addresses answer node ports, comma-separated (default: the
    /// Node's InternalIP and ExternalIP).
    #[arg(long, value_delimiter = ',')]
    nodeport_addresses: Vec<String>,
    /// Masquerade all traffic to cluster IPs.
    #[arg(long, default_value_t = false, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    masquerade_all: bool,
    /// The least time between two syncs of the rules (changes in between wait and are folded).
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    iptables_min_sync_period: Duration,
    /// The most time between two syncs of the rules, changes or not, and between two full syncs.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    iptables_sync_period: Duration,
    /// Where /healthz, /livez and /metrics are served.
    #[arg(long, default_value = proxy::DEFAULT_HEALTHZ_BIND_ADDRESS)]
    healthz_bind_address: std::net::SocketAddr,
    /// How Services become rules: `iptables` (chains in the nat and filter tables) or
    /// `nftables` (one table, ip kube-proxy, with verdict maps).
    #[arg(long, default_value = "iptables")]
    proxy_mode: proxy::ProxyMode,
    /// Remove every chain, table and rule the proxy made in either mode (the safety net
    /// included), then exit.
    #[arg(long)]
    cleanup: bool,
}

impl ProxyArgs {
    fn into_options(self) -> anyhow::Result<proxy::Options> {
        let cidr = |flag: &str, s: &str| proxy::Ipv4Cidr::parse(s).map_err(|e| anyhow::anyhow!("--{flag}: {e}"));
        let mut o = proxy::Options::new(client::Connection::from_flags(self.master, self.kubeconfig)?);
        o.hostname_override = self.hostname_override;
        o.cluster_cidr = self.cluster_cidr.as_deref().map(|s| cidr("cluster-cidr", s)).transpose()?;
        o.service_cluster_ip_range = self.service_cluster_ip_range.as_deref().map(|s| cidr("service-cluster-ip-range", s)).transpose()?;
        o.nodeport_addresses = self.nodeport_addresses.iter().map(|s| cidr("nodeport-addresses", s)).collect::<anyhow::Result<_>>()?;
        o.masquerade_all = self.masquerade_all;
        anyhow::ensure!(
            self.iptables_min_sync_period <= self.iptables_sync_period,
            "--iptables-min-sync-period must not be longer than --iptables-sync-period"
        );
        o.min_sync_period = self.iptables_min_sync_period;
        o.sync_period = self.iptables_sync_period;
        o.healthz_bind_address = self.healthz_bind_address;
        o.proxy_mode = self.proxy_mode;
        Ok(o)
    }
}

/// Flags as kube-scheduler names them.
#[derive(Args)]
struct SchedulerArgs {
    /// Path to a kubeconfig file for reaching the API server.
    #[arg(long, conflicts_with = "master")]
    kubeconfig: Option<PathBuf>,
    /// The API server's URL (overrides any kubeconfig).
    #[arg(long)]
    master: Option<String>,
    /// A KubeSchedulerConfiguration file (plugins, weights, scoring strategy).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Schedule only pods whose spec.schedulerName is this (default: the profile's, default-scheduler).
    #[arg(long)]
    scheduler_name: Option<String>,
    /// Run several replicas with one active, elected through a Lease.
    #[arg(long, default_value_t = false, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    leader_elect: bool,
    /// Namespace of the leader election Lease.
    #[arg(long, default_value = "kube-system")]
    leader_elect_resource_namespace: String,
    /// Name of the leader election Lease.
    #[arg(long, default_value = "kube-scheduler")]
    leader_elect_resource_name: String,
    /// Address to serve /healthz and /metrics on.
    #[arg(long, default_value = "0.0.0.0")]
    bind_address: String,
    /// Port to serve /healthz and /metrics on (plain HTTP).
    #[arg(long, default_value_t = 10251)]
    port: u16,
    #[command(flatten)]
    otlp: otel::OtlpArgs,
}

/// Flags as kube-apiserver names them.
#[derive(Args)]
struct ApiserverArgs {
    /// The store (or etcd) servers to connect to, comma-separated.
    #[arg(long, default_value = "http://127.0.0.1:2379")]
    etcd_servers: String,
    /// SSL Certificate Authority file used to secure etcd communication (https:// servers).
    #[arg(long)]
    etcd_cafile: Option<PathBuf>,
    /// SSL certification file used to secure etcd communication.
    #[arg(long)]
    etcd_certfile: Option<PathBuf>,
    /// SSL key file used to secure etcd communication.
    #[arg(long)]
    etcd_keyfile: Option<PathBuf>,
    /// The prefix of every key in the store.
    #[arg(long, default_value = "/registry")]
    etcd_prefix: String,
    /// The address the secure port listens on.
    #[arg(long, default_value = "0.0.0.0")]
    bind_address: String,
    /// The port to serve HTTPS on, with authentication and authorization; 0 turns it off.
    #[arg(long, default_value_t = 6443)]
    secure_port: u16,
    /// The serving certificate (PEM: the certificate, then its chain).
    #[arg(long)]
    tls_cert_file: Option<PathBuf>,
    /// The serving certificate's private key (PEM).
    #[arg(long)]
    tls_private_key_file: Option<PathBuf>,
    /// Client certificates signed by a CA in this bundle authenticate their subject: the common
    /// name is the user, the organizations its groups.
    #[arg(long)]
    client_ca_file: Option<PathBuf>,
    /// The client certificate presented to node agents (PEM), for logs, exec, attach,
    /// port-forward and nodes/proxy.
    #[arg(long)]
    kubelet_client_certificate: Option<PathBuf>,
    /// The key of --kubelet-client-certificate (PEM).
    #[arg(long)]
    kubelet_client_key: Option<PathBuf>,
    /// The CA bundle the node agents' serving certificates are verified with (unverified without it).
    #[arg(long)]
    kubelet_certificate_authority: Option<PathBuf>,
    /// Requests without credentials go on as system:anonymous (else they get 401).
    #[arg(long, default_value_t = true, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    anonymous_auth: bool,
    /// Static bearer tokens, a CSV file of `token,user,uid,"group1,group2"` lines (for teaching).
    #[arg(long)]
    token_auth_file: Option<PathBuf>,
    /// Bootstrap tokens (`bootstrap.kubernetes.io/token` Secrets of kube-system, `kubeadm token
    /// create`) authenticate as system:bootstrap:<token-id> in system:bootstrappers.
    #[arg(long)]
    enable_bootstrap_token_auth: bool,
    /// The issuer (`iss`) of the service account tokens this server issues; repeat to also
    /// accept tokens of other issuers (the first is the one it signs as).
    #[arg(long)]
    service_account_issuer: Vec<String>,
    /// The private key service account tokens are signed with (PKCS#8 PEM, ECDSA P-256: sa.key).
    #[arg(long)]
    service_account_signing_key_file: Option<PathBuf>,
    /// Public keys service account tokens are verified with (PEM: sa.pub); repeatable. Default:
    /// the signing key's.
    #[arg(long)]
    service_account_key_file: Vec<PathBuf>,
    /// Who a token must be for to authenticate to this server (comma-separated). Default: the
    /// service account issuers.
    #[arg(long, value_delimiter = ',')]
    api_audiences: Vec<String>,
    /// The longest life a TokenRequest may give a token (e.g. 24h); 0 for no limit.
    #[arg(long, default_value = "0s", value_parser = parse_duration)]
    service_account_max_token_expiration: Duration,
    /// The audit policy (an audit.k8s.io/v1 Policy, YAML): which requests are audited, and how much.
    #[arg(long)]
    audit_policy_file: Option<PathBuf>,
    /// Where audit events are appended, a JSON line each ("-": standard output).
    #[arg(long)]
    audit_log_path: Option<PathBuf>,
    /// Which resources are encrypted in the store, and with which keys: an
    /// apiserver.config.k8s.io/v1 EncryptionConfiguration (YAML; aescbc, secretbox, identity).
    #[arg(long)]
    encryption_provider_config: Option<PathBuf>,
    /// The authorizers, in order (comma-separated): AlwaysAllow, AlwaysDeny, RBAC, Node
    /// (usually `Node,RBAC`).
    #[arg(long, default_value = "AlwaysAllow", value_delimiter = ',')]
    authorization_mode: Vec<String>,
    /// The port to serve plain HTTP on, where every request acts as a superuser (kube-apiserver's
    /// removed insecure port, kept for teaching); 0 (the default) turns it off.
    #[arg(long, alias = "port", default_value_t = 0)]
    insecure_port: u16,
    /// The address the insecure port listens on.
    #[arg(long, default_value = "127.0.0.1")]
    insecure_bind_address: String,
    /// The largest request body accepted (413 beyond).
    #[arg(long, default_value_t = 3 * 1024 * 1024)]
    max_request_bytes: usize,
    /// How long events are kept (e.g. 1h, 30m).
    #[arg(long, default_value = "1h", value_parser = parse_duration)]
    event_ttl: Duration,
    /// How often the store's history is compacted to what it was one interval ago; 0 never.
    #[arg(long, default_value = "5m", value_parser = parse_duration)]
    etcd_compaction_interval: Duration,
    /// The tolerationSeconds of the not-ready toleration added to every pod that has none.
    #[arg(long, default_value_t = 300)]
    default_not_ready_toleration_seconds: i64,
    /// The tolerationSeconds of the unreachable toleration added to every pod that has none.
    #[arg(long, default_value_t = 300)]
    default_unreachable_toleration_seconds: i64,
    /// The range Services' cluster IPs are allocated from (IPv4 CIDR; its first address is the
    /// `default/kubernetes` Service's).
    #[arg(long, default_value = "10.96.0.0/12")]
    service_cluster_ip_range: String,
    /// The range NodePort Services' node ports are allocated from.
    #[arg(long, default_value = "30000-32767")]
    service_node_port_range: String,
    /// The address the `default/kubernetes` Service's endpoints name for this server (default:
    /// --bind-address — or --insecure-bind-address without a secure port — unless it is 0.0.0.0
    /// or loopback).
    #[arg(long)]
    advertise_address: Option<std::net::IpAddr>,
    /// The port each node's proxy serves `/debug/trace/services/<uid>` on, at the node's
    /// InternalIP (for `kubelab trace svc/<name>`): the proxies' --healthz-bind-address port.
    #[arg(long, default_value_t = 10256)]
    proxy_healthz_port: u16,
    #[command(flatten)]
    otlp: otel::OtlpArgs,
}

/// Flags as kube-controller-manager names them.
#[derive(Args)]
struct ControllerManagerArgs {
    /// Path to a kubeconfig file for reaching the API server.
    #[arg(long, conflicts_with = "master")]
    kubeconfig: Option<PathBuf>,
    /// The API server's URL (overrides any kubeconfig).
    #[arg(long)]
    master: Option<String>,
    /// Run several replicas with one active, elected through a Lease.
    #[arg(long, default_value_t = false, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    leader_elect: bool,
    /// Namespace of the leader election Lease.
    #[arg(long, default_value = controllers::DEFAULT_LEASE_NAMESPACE)]
    leader_elect_resource_namespace: String,
    /// Name of the leader election Lease.
    #[arg(long, default_value = controllers::DEFAULT_LEASE_NAME)]
    leader_elect_resource_name: String,
    /// How often the node lifecycle controller checks node health (e.g. 5s).
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    node_monitor_period: Duration,
    /// How long a node may go without renewing its Lease or posting its status before it is
    /// marked unreachable (e.g. 40s).
    #[arg(long, default_value = "40s", value_parser = parse_duration)]
    node_monitor_grace_period: Duration,
    /// Nodes per second that may get a NoExecute taint (and so lose their pods) in a healthy zone.
    #[arg(long, default_value_t = controllers::zone_disruption::DEFAULT_NODE_EVICTION_RATE)]
    node_eviction_rate: f64,
    /// The same in a partially disrupted zone larger than --large-cluster-size-threshold.
    #[arg(long, default_value_t = controllers::zone_disruption::DEFAULT_SECONDARY_NODE_EVICTION_RATE)]
    secondary_node_eviction_rate: f64,
    /// The share of not-Ready nodes (more than two) that makes a zone partially disrupted.
    #[arg(long, default_value_t = controllers::zone_disruption::DEFAULT_UNHEALTHY_ZONE_THRESHOLD)]
    unhealthy_zone_threshold: f64,
    /// Above this many nodes, a partially disrupted zone keeps the secondary rate (else none).
    #[arg(long, default_value_t = controllers::zone_disruption::DEFAULT_LARGE_CLUSTER_SIZE_THRESHOLD)]
    large_cluster_size_threshold: usize,
    /// If set, this root certificate authority (a PEM-encoded CA bundle) is published in every
    /// namespace as the ConfigMap kube-root-ca.crt. Without it, the kubeconfig's
    /// certificate-authority-data.
    #[arg(long)]
    root_ca_file: Option<PathBuf>,
    /// If true, each controller authenticates as its own service account kube-system/<name>
    /// (a TokenRequest token, renewed before it expires) for all but its watches, and is allowed
    /// what its role system:controller:<name> allows; else all use the controller manager's
    /// credentials.
    #[arg(long, default_value_t = false, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    use_service_account_credentials: bool,
    /// A list of controllers to enable. '*' enables all on-by-default controllers, 'foo'
    /// enables the controller named 'foo', '-foo' disables the controller named 'foo'.
    /// Off by default: bootstrapsigner (not implemented), tokencleaner.
    #[arg(long, value_delimiter = ',', default_value = "*")]
    controllers: Vec<String>,
    /// Filename containing a PEM-encoded X509 CA certificate used to issue cluster-scoped
    /// certificates. Without it and --cluster-signing-key-file, the CSR signer does not run.
    #[arg(long)]
    cluster_signing_cert_file: Option<PathBuf>,
    /// Filename containing a PEM-encoded private key used to sign cluster-scoped certificates.
    #[arg(long)]
    cluster_signing_key_file: Option<PathBuf>,
    /// The max length of duration signed certificates will be given. Individual CSRs may request
    /// shorter certs by setting spec.expirationSeconds.
    #[arg(long, default_value = "8760h", value_parser = parse_duration)]
    cluster_signing_duration: Duration,
    #[command(flatten)]
    otlp: otel::OtlpArgs,
}

/// Flags for the cluster DNS (CoreDNS takes a Corefile: each flag stands for one of its lines).
#[derive(Args)]
struct DnsArgs {
    /// Path to a kubeconfig file for reaching the API server. With neither this nor --master, in
    /// a pod: as the pod's service account (CoreDNS's kubernetes plugin does the same).
    #[arg(long, conflicts_with = "master")]
    kubeconfig: Option<PathBuf>,
    /// The API server's URL (overrides any kubeconfig).
    #[arg(long)]
    master: Option<String>,
    /// Where DNS is served, over UDP and TCP.
    #[arg(long, default_value = "0.0.0.0:53")]
    listen: std::net::SocketAddr,
    /// Where /health, /ready and /metrics are served.
    #[arg(long, default_value = "127.0.0.1:8181")]
    health_listen: std::net::SocketAddr,
    /// The cluster domain (the kubelet's --cluster-domain must match).
    #[arg(long, default_value = dns::DEFAULT_CLUSTER_DOMAIN)]
    cluster_domain: String,
    /// The TTL of the cluster's records, in seconds.
    #[arg(long, default_value_t = dns::DEFAULT_TTL)]
    ttl: u32,
    /// The resolv.conf whose nameservers answer names outside the cluster domain.
    #[arg(long, default_value = "/etc/resolv.conf")]
    resolv_conf: PathBuf,
    /// Upstream resolvers as ip:port, instead of the resolv.conf's (comma-separated).
    #[arg(long, value_delimiter = ',')]
    upstream: Vec<std::net::SocketAddr>,
}

/// Flags as csi-driver-host-path (`--endpoint`, `--nodeid`, `--state-dir`, `--max-volumes-per-node`)
/// and node-driver-registrar (`--kubelet-registration-path`) name theirs; the sidecars reach the
/// API server as every component does.
#[derive(Args)]
struct CsiHostpathArgs {
    /// Path to a kubeconfig file for the external-provisioner and external-attacher. With neither
    /// this nor --master (outside a pod), only the driver and the registrar run.
    #[arg(long, conflicts_with = "master")]
    kubeconfig: Option<PathBuf>,
    /// The API server's URL (instead of a kubeconfig).
    #[arg(long)]
    master: Option<String>,
    /// The driver's CSI socket, unix:///path (default: <kubelet-root-dir>/plugins/hostpath.csi.kubelab.io/csi.sock).
    #[arg(long)]
    endpoint: Option<String>,
    /// This node's id in the driver, and the node whose claims and attachments the sidecars handle
    /// (default: the hostname; must be the node agent's node name).
    #[arg(long)]
    nodeid: Option<String>,
    /// The node agent's root directory (its --root-dir): the registration socket goes to its plugins_registry/.
    #[arg(long, default_value = csi::DEFAULT_KUBELET_ROOT_DIR)]
    kubelet_root_dir: PathBuf,
    /// The CSI socket's path as the node agent reaches it (default: the --endpoint path).
    #[arg(long)]
    kubelet_registration_path: Option<PathBuf>,
    /// Where volumes (directories) and the driver's state file are kept.
    #[arg(long, alias = "statedir", default_value = csi::DEFAULT_STATE_DIR)]
    state_dir: PathBuf,
    /// The most volumes the node may have attached, reported in NodeGetInfo (0: unlimited).
    #[arg(long, alias = "maxvolumespernode", default_value_t = 0)]
    max_volumes_per_node: i64,
}

impl CsiHostpathArgs {
    fn into_options(self) -> anyhow::Result<csi::Options> {
        // The default is the node agent's default node name (the hostname, lowercased).
        let mut o = csi::Options::new(self.nodeid.unwrap_or_else(|| client::hostname().to_lowercase()));
        o.kubelet_root_dir = self.kubelet_root_dir;
        o.endpoint = match &self.endpoint {
            Some(e) => csi::connection::parse_endpoint(e)?,
            None => csi::registrar::default_csi_socket_path(&o.kubelet_root_dir, csi::DRIVER_NAME),
        };
        o.kubelet_registration_path = self.kubelet_registration_path;
        o.state_dir = self.state_dir;
        o.max_volumes_per_node = self.max_volumes_per_node;
        o.connection = match (self.master, self.kubeconfig) {
            (None, None) if std::env::var_os("KUBERNETES_SERVICE_HOST").is_none_or(|v| v.is_empty()) => None,
            (m, k) => Some(client::Connection::from_flags(m, k)?),
        };
        Ok(o)
    }
}

/// Flags as etcd names them.
#[derive(Args)]
struct StoreArgs {
    /// Human-readable name of this member.
    #[arg(long, default_value = "default")]
    name: String,
    /// Path to the data directory (default: <name>.kubelab).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// URLs to listen on for client traffic (comma-separated).
    #[arg(long, default_value = "http://127.0.0.1:2379")]
    listen_client_urls: String,
    /// Client URLs of this member to advertise to the cluster (default: --listen-client-urls).
    #[arg(long)]
    advertise_client_urls: Option<String>,
    /// URLs to listen on for peer traffic (comma-separated).
    #[arg(long, default_value = "http://127.0.0.1:2380")]
    listen_peer_urls: String,
    /// This member's peer URLs to advertise (default: --listen-peer-urls).
    #[arg(long)]
    initial_advertise_peer_urls: Option<String>,
    /// Initial cluster configuration for bootstrapping: name=peer-url,... (default: this member alone).
    #[arg(long)]
    initial_cluster: Option<String>,
    /// Initial cluster state: `new` to bootstrap, `existing` to join (and take a snapshot from the leader).
    #[arg(long, default_value = "new", value_parser = ["new", "existing"])]
    initial_cluster_state: String,
    /// Initial cluster token; member and cluster ids derive from it and the member names.
    #[arg(long, default_value = "etcd-cluster")]
    initial_cluster_token: String,
    /// Number of committed entries between log compactions (snapshots).
    #[arg(long, default_value_t = 100_000)]
    snapshot_count: u64,
    /// Maximum client request size in bytes the server will accept.
    #[arg(long, default_value_t = store::v3rpc::DEFAULT_MAX_REQUEST_BYTES)]
    max_request_bytes: usize,
    /// URLs to serve /health and /metrics on (comma-separated).
    #[arg(long, default_value = "")]
    listen_metrics_urls: String,
    /// Time (in milliseconds) of a heartbeat interval.
    #[arg(long, default_value_t = 100)]
    heartbeat_interval: u64,
    /// Time (in milliseconds) for an election to timeout.
    #[arg(long, default_value_t = 1000)]
    election_timeout: u64,
    /// Duration of periodic watch progress notifications (e.g. 10m, 5s).
    #[arg(long = "experimental-watch-progress-notify-interval", default_value = "10m", value_parser = parse_duration)]
    watch_progress_notify_interval: Duration,
    /// Path to the client server TLS cert file (served on https:// client URLs).
    #[arg(long)]
    cert_file: Option<PathBuf>,
    /// Path to the client server TLS key file.
    #[arg(long)]
    key_file: Option<PathBuf>,
    /// Path to the client server TLS trusted CA cert file.
    #[arg(long)]
    trusted_ca_file: Option<PathBuf>,
    /// Enable client cert authentication: clients need a certificate the trusted CA signed.
    #[arg(long)]
    client_cert_auth: bool,
    /// Path to the peer server TLS cert file (served on https:// peer URLs, presented to peers).
    #[arg(long)]
    peer_cert_file: Option<PathBuf>,
    /// Path to the peer server TLS key file.
    #[arg(long)]
    peer_key_file: Option<PathBuf>,
    /// Path to the peer server TLS trusted CA file.
    #[arg(long)]
    peer_trusted_ca_file: Option<PathBuf>,
    /// Enable peer client cert authentication: peers need a certificate the peer CA signed.
    #[arg(long)]
    peer_client_cert_auth: bool,
    /// Raise the NOSPACE alarm, and refuse writes that grow the database, once the backend
    /// passes this many bytes (0: the default, 2 GiB; negative: no quota).
    #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
    quota_backend_bytes: i64,
    /// Interpret --auto-compaction-retention as a period ("periodic") or a number of
    /// revisions ("revision").
    #[arg(long, default_value = store::config::DEFAULT_AUTO_COMPACTION_MODE, value_parser = ["periodic", "revision"])]
    auto_compaction_mode: String,
    /// Auto compaction retention: for periodic mode a duration (e.g. 30m, 1h30m) or a number of
    /// hours, for revision mode a number of revisions; 0 disables auto compaction.
    #[arg(long, default_value = store::config::DEFAULT_AUTO_COMPACTION_RETENTION)]
    auto_compaction_retention: String,
    #[command(flatten)]
    otlp: otel::OtlpArgs,
    #[command(subcommand)]
    command: Option<StoreCommand>,
}

/// `kubelab store`'s offline tools, as etcdutl has them.
#[derive(Subcommand)]
enum StoreCommand {
    /// Snapshot files that `etcdctl snapshot save` took from a member.
    #[command(subcommand)]
    Snapshot(StoreSnapshotCommand),
}

#[derive(Subcommand)]
enum StoreSnapshotCommand {
    /// Restores a snapshot file into a fresh data directory for one member of a new cluster
    /// (etcdutl snapshot restore): run it for every member, with the same file and flags.
    Restore(StoreRestoreArgs),
}

/// Flags as etcdutl names them.
#[derive(Args)]
struct StoreRestoreArgs {
    /// The snapshot file (from `etcdctl snapshot save`).
    file: PathBuf,
    /// Human-readable name for this member.
    #[arg(long, default_value = "default")]
    name: String,
    /// Path to the output data directory (default: <name>.kubelab); must be empty or missing.
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Initial cluster configuration for restore bootstrap: name=peer-url,...
    #[arg(long, default_value = "default=http://localhost:2380")]
    initial_cluster: String,
    /// Initial cluster token for the etcd cluster during restore bootstrap.
    #[arg(long, default_value = "etcd-cluster")]
    initial_cluster_token: String,
    /// List of this member's peer URLs to advertise to the rest of the cluster.
    #[arg(long, default_value = "http://localhost:2380")]
    initial_advertise_peer_urls: String,
    /// Ignore snapshot integrity hash value (required if copied from a data directory).
    #[arg(long)]
    skip_hash_check: bool,
}

impl StoreRestoreArgs {
    fn run(self) -> anyhow::Result<()> {
        let data_dir = self.data_dir.unwrap_or_else(|| PathBuf::from(format!("{}.kubelab", self.name)));
        let r = store::snapshot_restore::restore(&store::snapshot_restore::RestoreConfig {
            snapshot_path: self.file.clone(),
            name: self.name,
            output_data_dir: data_dir.clone(),
            initial_cluster: self.initial_cluster,
            initial_cluster_token: self.initial_cluster_token,
            peer_urls: store::config::split_urls(&self.initial_advertise_peer_urls),
            skip_hash_check: self.skip_hash_check,
        })?;
        println!(
            "restored snapshot {} into {}: member {:x} of new cluster {:x}, revision {} ({} keys), raft index {}",
            self.file.display(),
            data_dir.display(),
            r.member_id,
            r.cluster_id,
            r.revision,
            r.keys,
            r.index
        );
        Ok(())
    }
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    let (num, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len()));
    let n: u64 = num.parse().map_err(|_| format!("{s:?} is not a duration like 500ms, 5s or 10m"))?;
    match unit {
        "ms" => Ok(Duration::from_millis(n)),
        "s" | "" => Ok(Duration::from_secs(n)),
        "m" => Ok(Duration::from_secs(n * 60)),
        "h" => Ok(Duration::from_secs(n * 3600)),
        _ => Err(format!("{s:?} is not a duration like 500ms, 5s or 10m")),
    }
}

impl StoreArgs {
    fn into_config(self) -> anyhow::Result<store::Config> {
        use store::config::{parse_initial_cluster, split_urls};
        let listen_peer_urls = split_urls(&self.listen_peer_urls);
        let advertise_peer = self.initial_advertise_peer_urls.map(|s| split_urls(&s)).unwrap_or_else(|| listen_peer_urls.clone());
        let initial_cluster = self
            .initial_cluster
            .unwrap_or_else(|| advertise_peer.iter().map(|u| format!("{}={u}", self.name)).collect::<Vec<_>>().join(","));
        let listen_client_urls = split_urls(&self.listen_client_urls);
        Ok(store::Config {
            data_dir: self.data_dir.unwrap_or_else(|| PathBuf::from(format!("{}.kubelab", self.name))),
            advertise_client_urls: self.advertise_client_urls.map(|s| split_urls(&s)).unwrap_or_else(|| listen_client_urls.clone()),
            listen_client_urls,
            listen_peer_urls,
            initial_cluster: parse_initial_cluster(&initial_cluster, &self.initial_cluster_token)?,
            new_cluster: self.initial_cluster_state == "new",
            cluster_token: self.initial_cluster_token,
            snapshot_count: self.snapshot_count,
            max_request_bytes: self.max_request_bytes,
            listen_metrics_urls: split_urls(&self.listen_metrics_urls),
            heartbeat_interval: Duration::from_millis(self.heartbeat_interval),
            election_timeout: Duration::from_millis(self.election_timeout),
            watch_progress_notify_interval: self.watch_progress_notify_interval,
            client_tls_info: store::tlsinfo::TlsInfo {
                side: store::tlsinfo::Side::Client,
                cert_file: self.cert_file,
                key_file: self.key_file,
                trusted_ca_file: self.trusted_ca_file,
                client_cert_auth: self.client_cert_auth,
            },
            peer_tls_info: store::tlsinfo::TlsInfo {
                side: store::tlsinfo::Side::Peer,
                cert_file: self.peer_cert_file,
                key_file: self.peer_key_file,
                trusted_ca_file: self.peer_trusted_ca_file,
                client_cert_auth: self.peer_client_cert_auth,
            },
            quota_backend_bytes: self.quota_backend_bytes,
            auto_compaction_mode: self.auto_compaction_mode,
            auto_compaction_retention: self.auto_compaction_retention,
            name: self.name,
        })
    }
}

/// Completes on Ctrl-C or SIGTERM.
async fn shutdown_signal() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).expect("install SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    tracing::info!("shutting down");
}

impl Command {
    /// `--otlp-endpoint` and the components this process runs, for the components that have it.
    fn otlp(&self) -> Option<(&str, &'static [otel::Component])> {
        use otel::Component as C;
        let (args, components): (&otel::OtlpArgs, &'static [C]) = match self {
            Command::Store(a) => (&a.otlp, &[C::Store]),
            Command::Apiserver(a) => (&a.otlp, &[C::Apiserver]),
            Command::ControllerManager(a) => (&a.otlp, &[C::ControllerManager]),
            Command::Scheduler(a) => (&a.otlp, &[C::Scheduler]),
            Command::Nodeagent(a) => (&a.otlp, &[C::Nodeagent]),
            Command::Up(a) => (&a.otlp, C::ALL),
            Command::Trace(_) | Command::ContainerdConfig(_) | Command::Certs(_) | Command::Token(_) | Command::Dns(_) | Command::Proxy(_) | Command::CsiHostpath(_) => return None,
        };
        Some((args.otlp_endpoint.as_deref()?, components))
    }
}

/// The process's subscriber: logs as `log_filter` says, pod steps for `kubelab trace`, and spans
/// for an OTLP endpoint; each layer carries its own filter.
///
/// Only the layers in use are installed. An absent layer given as `Option::None` answers "always"
/// for every callsite, which next to the per-layer filters turns each of them into "sometimes":
/// every trace-level span of h2 and hyper would then be created and filtered at run time — a
/// third more CPU per write in the store, as `make bench-trace` measured.
fn subscriber(log_filter: tracing_subscriber::EnvFilter, record_pod_steps: bool, exporting: Option<&otel::Exporting>) -> impl tracing::Subscriber + Send + Sync {
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::Layer as _;
    let mut layers: Vec<Box<dyn tracing_subscriber::Layer<tracing_subscriber::Registry> + Send + Sync>> =
        vec![tracing_subscriber::fmt::layer().with_writer(std::io::stderr).with_filter(log_filter).boxed()];
    if record_pod_steps {
        layers.push(podtrace::layer().boxed());
    }
    if let Some(e) = exporting {
        layers.push(e.layer().boxed());
    }
    tracing_subscriber::registry().with(layers)
}

/// The level up to which `log` records are made. They only reach the log output (the step
/// recorder and the exporter take spans); left at the subscriber's overall level (trace, since
/// the step recorder takes every span), each of sled's trace records for every page it touches
/// was turned into a tracing event and offered to every layer: 2 % of the store's CPU under load.
/// The log filter without RUST_LOG.
const DEFAULT_LOG_FILTER: &str = "info,hickory_server=warn";

fn log_max_level(log_filter: &tracing_subscriber::EnvFilter) -> log::LevelFilter {
    use tracing::Level;
    let Some(hint) = log_filter.max_level_hint() else { return log::LevelFilter::Trace };
    match hint.into_level() {
        None => log::LevelFilter::Off,
        Some(l) if l == Level::ERROR => log::LevelFilter::Error,
        Some(l) if l == Level::WARN => log::LevelFilter::Warn,
        Some(l) if l == Level::INFO => log::LevelFilter::Info,
        Some(l) if l == Level::DEBUG => log::LevelFilter::Debug,
        Some(_) => log::LevelFilter::Trace,
    }
}

/// Turns transparent huge pages off for the whole process (`PR_SET_THP_DISABLE`), before it
/// allocates in earnest. mimalloc asks for huge pages on the arenas it reserves; on a kernel in
/// THP `madvise` mode it gets them, and it pays for them twice:
/// - in CPU: it returns freed memory to the kernel (`MADV_DONTNEED`), and the next touch of an
///   emptied 2 MiB range faults in a whole new huge page that the kernel zeroes (a tenth of the
///   store's CPU at 64 clients: BENCHMARKS.md has the before and after of each component);
/// - in memory: each huge page is 2 MiB resident however little of it is used.
///
/// mimalloc is built not to ask (its `no_thp` feature), which is enough on a kernel in `madvise`
/// mode even for what it allocates before `main`; the flag covers kernels in `always` mode.
/// Children inherit it: `kubelab up` clears it again for containerd and its containers.
fn no_huge_pages() -> std::io::Result<()> {
    // SAFETY: prctl with PR_SET_THP_DISABLE only sets a flag on this process's memory map.
    if unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

fn main() -> anyhow::Result<()> {
    use tracing_subscriber::util::SubscriberInitExt as _;
    let huge_pages = no_huge_pages();
    // The flags come first: --otlp-endpoint decides whether spans are exported, and
    // --record-pod-steps whether they are recorded.
    let cli = Cli::parse();
    // Declared before everything it traces, so dropped after: the last spans go out at exit.
    let exporting = cli.command.otlp().map(|(endpoint, components)| otel::Exporting::start(endpoint, components)).transpose()?;
    // hickory-server logs every DNS query it answers at info; CoreDNS logs queries only with its
    // `log` plugin, so the cluster DNS's are left out unless RUST_LOG asks for them.
    let log_filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(DEFAULT_LOG_FILTER));
    // Logs go to stderr as RUST_LOG says; pod steps go to the trace recorder whatever it says
    // (`kubelab trace`), and with --otlp-endpoint to OpenTelemetry: each layer carries its own filter.
    podtrace::set_enabled(cli.record_pod_steps);
    let log_max = log_max_level(&log_filter);
    subscriber(log_filter, cli.record_pod_steps, exporting.as_ref()).init();
    log::set_max_level(log_max);
    if let Err(e) = huge_pages {
        tracing::warn!(error = %e, "could not turn transparent huge pages off; kubelab will use more CPU and memory");
    }
    // `up` enters a private mount namespace before any thread exists: handled before the runtime.
    if let Command::Up(args) = cli.command {
        return up::run(args);
    }
    if let Command::ContainerdConfig(args) = cli.command {
        use std::io::Write as _;
        let text = match (&args.registry_host, &args.registry_ca) {
            (Some(host), Some(ca)) => nodeagent::cri::containerd_config::registry_host_toml(host, ca).context("kubelab containerd-config --registry-host")?,
            _ => args.into_config().render(),
        };
        return std::io::stdout().lock().write_all(text.as_bytes()).context("kubelab containerd-config: writing to stdout");
    }
    if let Command::Certs(args) = cli.command {
        return certs::cmd::run(args).context("kubelab certs");
    }
    if let Command::Token(args) = cli.command {
        return token::run(args).context("kubelab token");
    }
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().context("start the async runtime")?;
    match cli.command {
        Command::Store(mut args) => {
            if let Some(StoreCommand::Snapshot(StoreSnapshotCommand::Restore(restore))) = args.command.take() {
                return restore.run().context("kubelab store snapshot restore");
            }
            let cfg = args.into_config()?;
            rt.block_on(store::run(cfg, shutdown_signal())).context("kubelab store")?;
        }
        Command::Apiserver(args) => {
            drop(rt);
            let opts = apiserver::Options {
                etcd_servers: store::config::split_urls(&args.etcd_servers),
                etcd_transport: apiserver::storage::store::TransportConfig {
                    trusted_ca_file: args.etcd_cafile,
                    cert_file: args.etcd_certfile,
                    key_file: args.etcd_keyfile,
                },
                etcd_prefix: args.etcd_prefix,
                bind_address: args.bind_address,
                secure_port: args.secure_port,
                tls_cert_file: args.tls_cert_file,
                tls_private_key_file: args.tls_private_key_file,
                client_ca_file: args.client_ca_file,
                kubelet_client_certificate: args.kubelet_client_certificate,
                kubelet_client_key: args.kubelet_client_key,
                kubelet_certificate_authority: args.kubelet_certificate_authority,
                anonymous_auth: args.anonymous_auth,
                token_auth_file: args.token_auth_file,
                enable_bootstrap_token_auth: args.enable_bootstrap_token_auth,
                audit_policy_file: args.audit_policy_file,
                audit_log_path: args.audit_log_path,
                encryption_provider_config: args.encryption_provider_config,
                service_account_issuer: args.service_account_issuer,
                service_account_signing_key_file: args.service_account_signing_key_file,
                service_account_key_file: args.service_account_key_file,
                api_audiences: args.api_audiences,
                service_account_max_token_expiration: args.service_account_max_token_expiration,
                authorization_mode: args.authorization_mode,
                insecure_port: args.insecure_port,
                insecure_bind_address: args.insecure_bind_address,
                max_request_bytes: args.max_request_bytes,
                event_ttl: args.event_ttl,
                etcd_compaction_interval: args.etcd_compaction_interval,
                default_toleration_seconds: apiserver::admission::default_toleration_seconds::DefaultTolerationSeconds {
                    not_ready_seconds: args.default_not_ready_toleration_seconds,
                    unreachable_seconds: args.default_unreachable_toleration_seconds,
                },
                service_cluster_ip_range: args.service_cluster_ip_range,
                service_node_port_range: args.service_node_port_range,
                advertise_address: args.advertise_address,
                proxy_healthz_port: args.proxy_healthz_port,
                ..Default::default()
            };
            // actix-web runs on its own system of single-threaded runtimes.
            actix_web::rt::System::new().block_on(apiserver::run(opts, shutdown_signal())).context("kubelab apiserver")?;
        }
        Command::ControllerManager(args) => {
            let conn = client::Connection::from_flags(args.master, args.kubeconfig).context("kubelab controller-manager")?;
            let opts = controllers::Options {
                leader_elect: args.leader_elect,
                lease_namespace: args.leader_elect_resource_namespace,
                lease_name: args.leader_elect_resource_name,
                node_lifecycle: controllers::nodelifecycle::Options {
                    node_monitor_period: args.node_monitor_period,
                    node_monitor_grace_period: args.node_monitor_grace_period,
                    rates: controllers::zone_disruption::Rates {
                        node_eviction_rate: args.node_eviction_rate,
                        secondary_node_eviction_rate: args.secondary_node_eviction_rate,
                        unhealthy_zone_threshold: args.unhealthy_zone_threshold,
                        large_cluster_size_threshold: args.large_cluster_size_threshold,
                    },
                },
                root_ca_file: args.root_ca_file,
                use_service_account_credentials: args.use_service_account_credentials,
                controllers: args.controllers,
                cluster_signing_cert_file: args.cluster_signing_cert_file,
                cluster_signing_key_file: args.cluster_signing_key_file,
                cluster_signing_duration: args.cluster_signing_duration,
                ..controllers::Options::new(conn)
            };
            rt.block_on(controllers::run(opts, shutdown_signal())).context("kubelab controller-manager")?;
        }
        Command::Scheduler(args) => {
            let opts = scheduler::Options {
                connection: client::Connection::from_flags(args.master, args.kubeconfig).context("kubelab scheduler")?,
                config: args.config,
                scheduler_name: args.scheduler_name,
                leader_elect: args.leader_elect,
                lease_namespace: args.leader_elect_resource_namespace,
                lease_name: args.leader_elect_resource_name,
                listen: format!("{}:{}", args.bind_address, args.port)
                    .parse()
                    .with_context(|| format!("--bind-address {} --port {}", args.bind_address, args.port))?,
            };
            rt.block_on(scheduler::run(opts, shutdown_signal())).context("kubelab scheduler")?;
        }
        Command::Dns(args) => {
            let conn = client::Connection::from_flags(args.master, args.kubeconfig).context("kubelab dns")?;
            let opts = dns::Options {
                listen: args.listen,
                health_listen: args.health_listen,
                cluster_domain: args.cluster_domain,
                ttl: args.ttl,
                resolv_conf: args.resolv_conf,
                upstreams: args.upstream,
                ..Default::default()
            };
            rt.block_on(dns::run(opts, conn, shutdown_signal())).context("kubelab dns")?;
        }
        Command::Up(_) | Command::ContainerdConfig(_) | Command::Certs(_) | Command::Token(_) => unreachable!("handled above"),
        Command::Proxy(args) if args.cleanup => {
            let (chains, table) = proxy::cleanup().context("kubelab proxy --cleanup")?;
            tracing::info!(target: "proxy", chains, nftables_table = table, "cleanup: every chain, table and jump rule removed");
        }
        Command::Proxy(args) => {
            let opts = args.into_options().context("kubelab proxy")?;
            rt.block_on(proxy::run(opts, shutdown_signal())).context("kubelab proxy")?;
        }
        Command::CsiHostpath(args) => {
            let opts = args.into_options().context("kubelab csi-hostpath")?;
            rt.block_on(csi::run(opts, shutdown_signal())).context("kubelab csi-hostpath")?;
        }
        Command::Trace(args) => rt.block_on(trace::run(args))?,
        Command::Nodeagent(args) => {
            drop(rt);
            let opts = args.into_options().context("kubelab nodeagent")?;
            // Pod workers are actix actors: the agent runs inside an actix System.
            nodeagent::system()
                .block_on(async move {
                    let (tx, rx) = tokio::sync::watch::channel(false);
                    actix_rt::spawn(async move {
                        shutdown_signal().await;
                        let _ = tx.send(true);
                    });
                    nodeagent::run(opts, rx).await
                })
                .context("kubelab nodeagent")?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    /// Spans that neither the log filter nor the step recorder wants are not even created (h2
    /// opens a trace-level span per frame), while pod spans are, at any level.
    #[test]
    fn unwanted_spans_are_never_created() {
        for record in [true, false] {
            let subscriber = super::subscriber(tracing_subscriber::EnvFilter::new("info"), record, None);
            tracing::subscriber::with_default(subscriber, || {
                assert!(tracing::trace_span!(target: "h2::codec", "poll").is_disabled());
                assert!(tracing::debug_span!(target: "hyper", "parse").is_disabled());
                let pod = tracing::trace_span!(target: "kubelet::sync_pod", "step2_data_dir", pod_uid = "u");
                assert_eq!(pod.is_disabled(), !record, "a pod span with recording {record}");
            });
        }
    }

    /// `kubelab containerd-config` without flags prints the node layout, which the lab's nodes
    /// run; with --dir, `kubelab up`'s.
    #[test]
    fn containerd_config_prints_the_layout_asked_for() {
        use clap::Parser as _;
        use nodeagent::cri::containerd_config::ContainerdConfig;
        let config = |args: &[&str]| match super::Cli::try_parse_from(args) {
            Ok(super::Cli { command: super::Command::ContainerdConfig(a), .. }) => a.into_config(),
            Ok(_) => panic!("{args:?}: another subcommand"),
            Err(e) => panic!("{args:?}: {e}"),
        };
        assert_eq!(config(&["kubelab", "containerd-config"]), ContainerdConfig::node());
        assert_eq!(
            config(&["kubelab", "containerd-config", "--dir", "/d", "--stream-port", "10010"]),
            ContainerdConfig::private("/d", 10010)
        );
        let c = config(&[
            "kubelab", "containerd-config", "--root", "/r", "--state", "/s", "--address", "/a/c.sock",
            "--cni-conf-dir", "/n", "--stream-port", "7", "--sandbox-image", "example.com/pause:1",
        ]);
        let want = ContainerdConfig {
            root: "/r".into(),
            state: "/s".into(),
            address: "/a/c.sock".into(),
            ttrpc_address: "/a/c.sock.ttrpc".into(),
            cni_conf_dir: "/n".into(),
            stream_server_port: 7,
            sandbox_image: "example.com/pause:1".into(),
            ..ContainerdConfig::node()
        };
        assert_eq!(c, want);
    }

    /// `--registry-host` and `--registry-ca` go together.
    #[test]
    fn registry_flags_come_in_pairs() {
        use clap::Parser as _;
        let parse = |args: &[&str]| super::Cli::try_parse_from(args);
        assert!(parse(&["kubelab", "containerd-config", "--registry-host", "r:5000", "--registry-ca", "/ca.crt"]).is_ok());
        assert!(parse(&["kubelab", "containerd-config", "--registry-host", "r:5000"]).is_err());
        assert!(parse(&["kubelab", "containerd-config", "--registry-ca", "/ca.crt"]).is_err());
    }

    /// The lab starts `kubelab nodeagent` without --container-runtime-endpoint or
    /// --cni-conf-dir: their defaults must be where the node layout puts the socket and the
    /// CNI configs.
    #[test]
    fn the_node_agents_defaults_meet_the_node_layout() {
        use clap::Parser as _;
        let node = nodeagent::cri::containerd_config::ContainerdConfig::node();
        let Ok(super::Cli { command: super::Command::Nodeagent(a), .. }) = super::Cli::try_parse_from(["kubelab", "nodeagent"]) else {
            panic!("kubelab nodeagent without flags does not parse");
        };
        assert_eq!(a.container_runtime_endpoint, node.endpoint());
        assert_eq!(a.cni_conf_dir, node.cni_conf_dir);
    }

    /// `kubelab dns` defaults to CoreDNS's addresses and the kubelet's cluster domain; the node
    /// agent's DNS flags reach its options.
    #[test]
    fn dns_flags() {
        use clap::Parser as _;
        let Ok(super::Cli { command: super::Command::Dns(d), .. }) = super::Cli::try_parse_from(["kubelab", "dns", "--master", "http://a"]) else {
            panic!("kubelab dns does not parse");
        };
        assert_eq!((d.listen.to_string(), d.health_listen.to_string()), ("0.0.0.0:53".into(), "127.0.0.1:8181".into()));
        assert_eq!((d.cluster_domain.as_str(), d.ttl), ("cluster.local", 5));
        let Ok(super::Cli { command: super::Command::Nodeagent(a), .. }) =
            super::Cli::try_parse_from(["kubelab", "nodeagent", "--cluster-dns", "10.96.0.10,fd00::a", "--cluster-domain", "lab.local", "--resolv-conf", ""])
        else {
            panic!("kubelab nodeagent with DNS flags does not parse");
        };
        let o = a.into_options().expect("options");
        assert_eq!(o.cluster_dns, ["10.96.0.10".parse::<std::net::IpAddr>().unwrap(), "fd00::a".parse().unwrap()]);
        assert_eq!(o.cluster_domain, "lab.local");
        assert_eq!(o.resolv_conf, std::path::PathBuf::new());
    }

    /// `kubelab csi-hostpath` takes the driver's and the registrar's flag names (and the driver's
    /// old spellings); without an API server only the driver and the registrar run.
    #[test]
    fn csi_hostpath_flags() {
        use clap::Parser as _;
        let args = |v: &[&str]| match super::Cli::try_parse_from(v) {
            Ok(super::Cli { command: super::Command::CsiHostpath(a), .. }) => a,
            Ok(_) => panic!("{v:?}: another subcommand"),
            Err(e) => panic!("{v:?}: {e}"),
        };
        let o = args(&["kubelab", "csi-hostpath", "--nodeid", "n1", "--kubelet-root-dir", "/r"]).into_options().unwrap();
        assert_eq!(o.node_id, "n1");
        assert_eq!(o.endpoint, std::path::Path::new("/r/plugins/hostpath.csi.kubelab.io/csi.sock"));
        assert_eq!((o.state_dir.to_str(), o.max_volumes_per_node), (Some(csi::DEFAULT_STATE_DIR), 0));
        let o = args(&[
            "kubelab", "csi-hostpath", "--endpoint", "unix:///csi/csi.sock", "--nodeid", "n1", "--statedir", "/data",
            "--maxvolumespernode", "3", "--kubelet-registration-path", "/k/csi.sock", "--master", "http://127.0.0.1:8080",
        ])
        .into_options()
        .unwrap();
        assert_eq!(o.endpoint, std::path::Path::new("/csi/csi.sock"));
        assert_eq!((o.state_dir.to_str(), o.max_volumes_per_node), (Some("/data"), 3));
        assert_eq!(o.kubelet_registration_path.as_deref(), Some(std::path::Path::new("/k/csi.sock")));
        assert!(matches!(o.connection, Some(client::Connection::Master(_))));
        assert!(args(&["kubelab", "csi-hostpath", "--endpoint", "tcp://1.2.3.4:1"]).into_options().is_err());
    }

    /// `kubelab proxy` takes kube-proxy's flags with kube-proxy's defaults; `--cleanup` needs no
    /// API server.
    #[test]
    fn the_proxys_flags_and_defaults() {
        use clap::Parser as _;
        let args = |v: &[&str]| match super::Cli::try_parse_from(v) {
            Ok(super::Cli { command: super::Command::Proxy(a), .. }) => a,
            Ok(_) => panic!("{v:?}: another subcommand"),
            Err(e) => panic!("{v:?}: {e}"),
        };
        let o = args(&["kubelab", "proxy", "--master", "http://127.0.0.1:8080"]).into_options().unwrap();
        assert_eq!((o.min_sync_period.as_secs(), o.sync_period.as_secs()), (1, 30));
        assert_eq!(o.healthz_bind_address.to_string(), "0.0.0.0:10256");
        assert!(o.service_cluster_ip_range.is_none() && o.nodeport_addresses.is_empty() && !o.masquerade_all);
        let o = args(&[
            "kubelab", "proxy", "--master", "http://127.0.0.1:8080", "--hostname-override", "n1",
            "--cluster-cidr", "10.244.0.0/16", "--service-cluster-ip-range", "10.96.0.0/12",
            "--nodeport-addresses", "172.18.0.0/16,10.0.0.0/8", "--masquerade-all",
            "--iptables-min-sync-period", "500ms", "--iptables-sync-period", "1m", "--healthz-bind-address", "127.0.0.1:0",
        ])
        .into_options()
        .unwrap();
        assert_eq!(o.hostname_override.as_deref(), Some("n1"));
        assert_eq!(o.service_cluster_ip_range.unwrap().to_string(), "10.96.0.0/12");
        assert_eq!(o.nodeport_addresses.len(), 2);
        assert!(o.masquerade_all);
        assert_eq!(o.min_sync_period.as_millis(), 500);
        assert!(args(&["kubelab", "proxy", "--master", "x", "--cluster-cidr", "10.244.0.0"]).into_options().is_err());
        assert!(args(&["kubelab", "proxy", "--cleanup"]).cleanup);
        assert_eq!(o.proxy_mode, proxy::ProxyMode::Iptables);
        let o = args(&["kubelab", "proxy", "--master", "x", "--proxy-mode", "nftables"]).into_options().unwrap();
        assert_eq!(o.proxy_mode, proxy::ProxyMode::Nftables);
        assert!(super::Cli::try_parse_from(["kubelab", "proxy", "--proxy-mode", "ipvs"]).is_err());
    }

    /// `log` records are made up to the log filter's level, and no further.
    #[test]
    fn log_records_stop_at_the_log_filters_level() {
        use tracing_subscriber::EnvFilter;
        assert_eq!(super::log_max_level(&EnvFilter::new("info")), log::LevelFilter::Info);
        assert_eq!(super::log_max_level(&EnvFilter::new("warn,apiserver=debug")), log::LevelFilter::Debug);
        assert_eq!(super::log_max_level(&EnvFilter::new("info,sled=trace")), log::LevelFilter::Trace);
        assert_eq!(super::log_max_level(&EnvFilter::new("off")), log::LevelFilter::Off);
    }
}
