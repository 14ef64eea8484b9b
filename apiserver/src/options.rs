//! Mirrors cmd/kube-apiserver/app/options: what `kubelab apiserver` runs with, named as
//! kube-apiserver names its flags.

use std::path::PathBuf;
use std::time::Duration;

use crate::admission::default_toleration_seconds::DefaultTolerationSeconds;

/// Flags as kube-apiserver names them.
#[derive(Clone, Debug)]
pub struct Options {
    pub etcd_servers: Vec<String>,
    /// `--etcd-cafile`, `--etcd-certfile`, `--etcd-keyfile`: TLS to `https://` etcd servers.
    pub etcd_transport: crate::storage::store::TransportConfig,
    pub etcd_prefix: String,
    /// `--bind-address`: where the secure port listens.
    pub bind_address: String,
    /// `--secure-port`: HTTPS, with authentication and authorization; 0 turns it off.
    pub secure_port: u16,
    /// `--tls-cert-file` and `--tls-private-key-file`: the serving certificate (PEM; the chain,
    /// then the key). Required with a secure port.
    pub tls_cert_file: Option<PathBuf>,
    pub tls_private_key_file: Option<PathBuf>,
    /// `--client-ca-file`: client certificates signed by it authenticate their subject (CN the
    /// user, O the groups). Without it, no client certificate is asked for.
    pub client_ca_file: Option<PathBuf>,
    /// `--kubelet-client-certificate` and `--kubelet-client-key`: what the API server presents
    /// to the node agents it calls (logs, exec, attach, port-forward, `nodes/proxy`); without
    /// them it calls them as nobody.
    pub kubelet_client_certificate: Option<PathBuf>,
    pub kubelet_client_key: Option<PathBuf>,
    /// `--kubelet-certificate-authority`: verifies the node agents' serving certificates; without
    /// it they are not verified (Kubernetes' default too).
    pub kubelet_certificate_authority: Option<PathBuf>,
    /// `--anonymous-auth`: a request without credentials goes on as `system:anonymous` (true, as
    /// Kubernetes' default), or is a 401.
    pub anonymous_auth: bool,
    /// `--token-auth-file`: static bearer tokens (CSV: `token,user,uid,"group1,group2"`).
    pub token_auth_file: Option<PathBuf>,
    /// `--enable-bootstrap-token-auth`: bootstrap tokens (`bootstrap.kubernetes.io/token` Secrets
    /// of `kube-system`) authenticate as `system:bootstrap:<token-id>` (off, as Kubernetes' default).
    pub enable_bootstrap_token_auth: bool,
    /// `--service-account-issuer`: the `iss` of the service account tokens this server issues
    /// (the first) and accepts (any). Empty: no service account tokens.
    pub service_account_issuer: Vec<String>,
    /// `--service-account-signing-key-file`: the key tokens are signed with (`sa.key`).
    pub service_account_signing_key_file: Option<PathBuf>,
    /// `--service-account-key-file`: the public keys tokens are verified with (`sa.pub`); empty:
    /// the signing key's.
    pub service_account_key_file: Vec<PathBuf>,
    /// `--api-audiences`: who a token must be for to authenticate to this server; empty: the
    /// issuers.
    pub api_audiences: Vec<String>,
    /// `--service-account-max-token-expiration`: the longest life a TokenRequest may give a
    /// token; zero: no limit.
    pub service_account_max_token_expiration: Duration,
    /// `--audit-policy-file`: which requests are audited, at which level; none: no audit.
    pub audit_policy_file: Option<PathBuf>,
    /// `--audit-log-path`: where audit Events go, a JSON line each (`-`: standard output).
    pub audit_log_path: Option<PathBuf>,
    /// `--authorization-mode`: the authorizers, in order (`AlwaysAllow`, `AlwaysDeny`, `RBAC`,
    /// `Node`).
    pub authorization_mode: Vec<String>,
    /// `--insecure-port` (kubelab keeps kube-apiserver's removed flag, for teaching): plain HTTP,
    /// where every request acts as a superuser; 0 turns it off.
    pub insecure_port: u16,
    /// `--insecure-bind-address`: where the insecure port listens.
    pub insecure_bind_address: String,
    pub max_request_bytes: usize,
    pub event_ttl: Duration,
    /// Events kept in each watch cache for watchers that resume.
    pub watch_cache_size: usize,
    /// How often the store's history is compacted ([`crate::storage::compact`]); zero never.
    pub etcd_compaction_interval: Duration,
    /// `--request-timeout`: how long a request that is not long-running may take before it is
    /// answered 504 (a shorter `?timeout=` wins; [`crate::filters::timeout`]).
    pub request_timeout: Duration,
    /// `--default-not-ready-toleration-seconds`, `--default-unreachable-toleration-seconds`: the
    /// DefaultTolerationSeconds admission plugin's seconds (300 each).
    pub default_toleration_seconds: DefaultTolerationSeconds,
    /// `--service-cluster-ip-range`: where Services' cluster IPs come from (IPv4; the first
    /// address is the `default/kubernetes` Service's, the tenth by convention the cluster DNS').
    pub service_cluster_ip_range: String,
    /// `--service-node-port-range`: where NodePort Services' node ports come from.
    pub service_node_port_range: String,
    /// `--advertise-address`: the address the `default/kubernetes` Service's endpoints name for
    /// this server. Unset: the bind address, unless that is unspecified or loopback (then the
    /// Service has no endpoint for this server: nothing in a pod could reach it there).
    pub advertise_address: Option<std::net::IpAddr>,
    /// `--proxy-healthz-port` (kubelab's): where each node's proxy serves its steps for `kubelab
    /// trace svc/<name>`, on the node's InternalIP (kube-proxy's health port, 10256, by default).
    pub proxy_healthz_port: u16,
    /// `--encryption-provider-config`: an `apiserver.config.k8s.io/v1` EncryptionConfiguration
    /// saying which resources are encrypted in the store, and with which keys
    /// ([`crate::server::encryptionconfig`]); none: everything is stored as it is.
    pub encryption_provider_config: Option<PathBuf>,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            etcd_servers: vec!["http://127.0.0.1:2379".into()],
            etcd_transport: Default::default(),
            etcd_prefix: "/registry".into(),
            bind_address: "0.0.0.0".into(),
            secure_port: 6443,
            tls_cert_file: None,
            tls_private_key_file: None,
            client_ca_file: None,
            kubelet_client_certificate: None,
            kubelet_client_key: None,
            kubelet_certificate_authority: None,
            anonymous_auth: true,
            token_auth_file: None,
            enable_bootstrap_token_auth: false,
            audit_policy_file: None,
            audit_log_path: None,
            service_account_issuer: Vec::new(),
            service_account_signing_key_file: None,
            service_account_key_file: Vec::new(),
            api_audiences: Vec::new(),
            service_account_max_token_expiration: Duration::ZERO,
            authorization_mode: vec!["AlwaysAllow".into()],
            insecure_port: 0,
            insecure_bind_address: "127.0.0.1".into(),
            max_request_bytes: 3 * 1024 * 1024,
            event_ttl: Duration::from_secs(3600),
            watch_cache_size: 10_000,
            etcd_compaction_interval: Duration::from_secs(300),
            request_timeout: Duration::from_secs(60),
            default_toleration_seconds: DefaultTolerationSeconds::default(),
            service_cluster_ip_range: "10.96.0.0/12".into(),
            service_node_port_range: "30000-32767".into(),
            advertise_address: None,
            proxy_healthz_port: 10256,
            encryption_provider_config: None,
        }
    }
}

impl Options {
    /// Where the `default/kubernetes` Service sends pods: the secure port and its address, or,
    /// when it is off, the insecure port and its address.
    pub fn service_endpoint(&self) -> (&str, u16) {
        if self.secure_port != 0 { (&self.bind_address, self.secure_port) } else { (&self.insecure_bind_address, self.insecure_port) }
    }
}
