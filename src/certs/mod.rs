//! Mirrors kubeadm's `kubeadm init phase certs` and `phase kubeconfig`
//! (cmd/kubeadm/app/phases/certs, phases/kubeconfig): the cluster's PKI, made once and kept.
//!
//! Every component of a cluster proves who it is with a client certificate signed by the
//! cluster CA, and the API server proves what it is with a serving certificate signed by the
//! same CA. [`ensure`] makes all of them in one directory, as `kubeadm init` does in
//! `/etc/kubernetes/pki` (and `/etc/kubernetes` for the kubeconfigs):
//!
//! 1. The certificates of [`certlist`], CA by CA: the Kubernetes CA `ca` and what it signs (the
//!    API server's serving certificate, its client certificate for kubelets, and a serving
//!    certificate per node for its kubelet), the front proxy CA and its client, etcd's CA and its
//!    server, peer and client certificates.
//! 2. The service account key pair, `sa.key` and `sa.pub`.
//! 3. The kubeconfigs of [`kubeconfig`]: the admin's, the controller manager's, the scheduler's,
//!    the proxy's and one per node for its kubelet, each embedding a client certificate
//!    signed by `ca` whose subject is the component's user and group.
//!
//! Each run keeps what is good and makes what is missing or stale ([`pki::Outcome`]): a second
//! run changes nothing, a node added later gets its certificates, and a changed name of the API
//! server gets its serving certificate issued again. `kubelab certs` ([`cmd`]) runs it from
//! flags (`generate`), shows when everything ends (`check-expiration`), and writes a kubeconfig
//! for any user (`kubeconfig`).
//!
//! The layout of the directory:
//!
//! ```text
//! ca.crt ca.key                           the Kubernetes CA
//! apiserver.crt .key                      the API server's serving certificate
//! apiserver-kubelet-client.crt .key       the API server, to kubelets
//! kubelet-<node>.crt .key                 each kubelet's serving certificate
//! front-proxy-ca.crt .key, front-proxy-client.crt .key
//! etcd/ca.crt .key, etcd/server, etcd/peer, etcd/healthcheck-client
//! apiserver-etcd-client.crt .key
//! sa.key sa.pub                           the service account signing key pair
//! admin.conf controller-manager.conf scheduler.conf proxy.conf dns.conf csi-hostpath.conf kubelet-<node>.conf
//! ```
//!
//! Where kubelab differs from kubeadm 1.33:
//! - One directory holds certificates and kubeconfigs alike (kubeadm keeps kubeconfigs one
//!   level up): one directory to mount into each of the lab's containers.
//! - `admin.conf` is in `system:masters`, which is what kubeadm's `super-admin.conf` is;
//!   kubeadm's `admin.conf` and `apiserver-kubelet-client` are in `kubeadm:cluster-admins`, a
//!   group kubeadm binds to `cluster-admin` after `init`. kubelab has no such binding, so both
//!   are in `system:masters`.
//! - The kubelet's serving certificate is signed by the cluster CA, so that the API server can
//!   verify the kubelet it dials (a kubelet self-signs one by default); its subject is what a
//!   kubelet asks for with `serverTLSBootstrap` (`system:node:<node>`, `system:nodes`).
//! - kube-proxy authenticates with a client certificate (`proxy.conf`, user
//!   `system:kube-proxy`, bound to `system:node-proxier` by the default RBAC) rather than a
//!   service account token: kubelab's proxy runs outside any pod. So does `kubelab up`'s cluster
//!   DNS (`dns.conf`, user `system:kube-dns`, which `kubelab up` binds to kubeadm's
//!   `system:coredns` ClusterRole); the lab's runs in pods, as kubeadm's service account. And
//!   `kubelab up`'s CSI driver (`csi-hostpath.conf`, user `system:csi-hostpath`, bound to the
//!   ClusterRoles of the external provisioner and attacher).
//! - The API server's certificate also names `localhost` and `127.0.0.1`, where `kubelab up`
//!   and each of the lab's nodes serve it.
//! - The etcd certificates are made as kubeadm makes them, one set for all members (kubeadm
//!   issues each member its own); `kubelab up` and the lab run their stores on them (client and
//!   peer TLS with client-certificate authentication).
//! - A certificate within `renew_before` of its end ([`pki::DEFAULT_RENEW_BEFORE`], 30 days) is
//!   renewed by the next run; kubeadm renews on `kubeadm certs renew` or an upgrade. And a
//!   certificate that no longer matches the spec is issued again, where kubeadm's init stops.
//! - Files of a node no longer given are left where they are.

pub mod certlist;
pub mod cmd;
pub mod kubeconfig;

use std::net::{IpAddr, Ipv4Addr};
use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use anyhow::Context as _;
use pki::Outcome;

pub use cmd::CertsArgs;

/// `kubelab certs`' default `--cert-dir`: where `kubelab up` keeps the PKI, `<data-dir>/pki`
/// for its default data directory.
pub const DEFAULT_CERT_DIR: &str = "/var/lib/kubelab/pki";

/// What the certificates say about the cluster: kubeadm's InitConfiguration, the part of it
/// the PKI needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterSpec {
    /// The API server's URL, written into every kubeconfig (`https://127.0.0.1:6443`). Its host is
    /// one of the serving certificate's names (kubeadm's `controlPlaneEndpoint`).
    pub server: String,
    /// The control plane node's name (kubeadm's `nodeRegistration.name`): a DNS name of the API
    /// server's and etcd's certificates, and the etcd certificates' common name.
    pub node_name: String,
    /// The addresses the API server is reached at (kubeadm's advertise address): in its
    /// certificate and etcd's.
    pub advertise_addresses: Vec<IpAddr>,
    /// The first address of the Service range: the `kubernetes` Service's cluster IP, where pods
    /// reach the API server.
    pub service_ip: IpAddr,
    /// The cluster domain: `kubernetes.default.svc.<domain>` is one of the API server's names.
    pub dns_domain: String,
    /// More names and addresses for the API server's certificate (kubeadm's
    /// `--apiserver-cert-extra-sans`).
    pub apiserver_cert_extra_sans: Vec<String>,
    /// The nodes: each gets a serving certificate and a kubeconfig for its kubelet.
    pub nodes: Vec<NodeSpec>,
    /// A certificate with less than this left is issued again.
    pub renew_before: Duration,
}

impl ClusterSpec {
    /// A cluster served at `server` from the node `node_name`, with kubeadm's defaults: Services
    /// in 10.96.0.0/12 (so the API server's cluster IP is 10.96.0.1), domain `cluster.local`.
    pub fn new(server: impl Into<String>, node_name: impl Into<String>) -> ClusterSpec {
        ClusterSpec {
            server: server.into(),
            node_name: node_name.into(),
            advertise_addresses: vec![],
            service_ip: IpAddr::V4(Ipv4Addr::new(10, 96, 0, 1)),
            dns_domain: "cluster.local".into(),
            apiserver_cert_extra_sans: vec![],
            nodes: vec![],
            renew_before: pki::DEFAULT_RENEW_BEFORE,
        }
    }

    /// Names that go into file names and kubeconfigs must be DNS names, as Kubernetes'
    /// own validation wants them.
    pub fn validate(&self) -> anyhow::Result<()> {
        server_host(&self.server)?;
        anyhow::ensure!(is_dns1123_subdomain(&self.node_name), "node name {:?} is not a lowercase DNS name", self.node_name);
        anyhow::ensure!(is_dns1123_subdomain(&self.dns_domain), "DNS domain {:?} is not a lowercase DNS name", self.dns_domain);
        for (i, node) in self.nodes.iter().enumerate() {
            anyhow::ensure!(is_dns1123_subdomain(&node.name), "node name {:?} is not a lowercase DNS name", node.name);
            anyhow::ensure!(!self.nodes[..i].iter().any(|n| n.name == node.name), "node {:?} is given twice", node.name);
        }
        for san in &self.apiserver_cert_extra_sans {
            parse_san(san)?;
        }
        Ok(())
    }
}

/// A node of the cluster: its name (the Node object's) and the addresses its kubelet serves on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeSpec {
    pub name: String,
    pub ips: Vec<IpAddr>,
}

impl FromStr for NodeSpec {
    type Err = String;

    /// `NAME`, `NAME=IP` or `NAME=IP,IP…` (`--node`).
    fn from_str(s: &str) -> Result<NodeSpec, String> {
        let (name, ips) = match s.split_once('=') {
            Some((name, ips)) => (name, ips.split(',').map(|ip| ip.trim().parse().map_err(|_| format!("{s:?}: {ip:?} is not an IP address"))).collect::<Result<_, _>>()?),
            None => (s, vec![]),
        };
        if !is_dns1123_subdomain(name) {
            return Err(format!("{s:?}: the node name {name:?} is not a lowercase DNS name"));
        }
        Ok(NodeSpec { name: name.to_string(), ips })
    }
}

/// Makes or keeps the cluster's certificates, keys and kubeconfigs in `cert_dir`, in kubeadm's
/// order; says for each what happened ([`describe`] words it as kubeadm does).
pub fn ensure(cert_dir: &Path, spec: &ClusterSpec) -> anyhow::Result<Vec<(String, Outcome)>> {
    spec.validate()?;
    // Step 1: the CAs and what each signs.
    let certlist::Tree { mut outcomes, cas } = certlist::create_tree(cert_dir, &certlist::cert_list(spec)?, spec.renew_before)?;
    // Step 2: the service account key pair.
    let sa = pki::ensure_service_account_key_pair(cert_dir).context("the service account key pair")?;
    outcomes.push((pki::SERVICE_ACCOUNT_KEY_BASE_NAME.to_string(), sa));
    // Step 3: the kubeconfigs, with client certificates from the Kubernetes CA.
    let ca = cas.get(certlist::CA).context("the Kubernetes CA is not in the certificate list")?;
    for kc in kubeconfig::kubeconfig_specs(spec) {
        let outcome = kubeconfig::ensure_kubeconfig(cert_dir, &kc, ca, &spec.server, spec.renew_before)?;
        outcomes.push((kc.file_name, outcome));
    }
    Ok(outcomes)
}

/// One line of what [`ensure`] did, worded as `kubeadm init` words it.
pub fn describe(name: &str, outcome: &Outcome) -> String {
    let (phase, what) = if name.ends_with(".conf") {
        ("kubeconfig", "kubeconfig file")
    } else if name == pki::SERVICE_ACCOUNT_KEY_BASE_NAME {
        ("certs", "key and public key")
    } else {
        ("certs", "certificate and key")
    };
    match outcome {
        Outcome::Created => format!("[{phase}] Generating {name:?} {what}"),
        Outcome::Renewed(why) => format!("[{phase}] Renewing {name:?} {what}: {why}"),
        Outcome::Kept => format!("[{phase}] Using the existing {name:?} {what}"),
    }
}

/// The host of an `https://` URL, as a certificate name (kubeadm's `ParseHostPort` of the
/// control plane endpoint).
fn server_host(server: &str) -> anyhow::Result<San> {
    // It is written into kubeconfigs as a plain YAML scalar.
    anyhow::ensure!(!server.chars().any(|c| c.is_whitespace() || c.is_control()), "server {server:?}: spaces or control characters in it");
    let rest = server.strip_prefix("https://").with_context(|| format!("server {server:?}: an https:// URL is wanted"))?;
    let authority = rest.split('/').next().unwrap_or_default();
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => authority.rsplit_once(':').map_or(authority, |(host, _port)| host),
    };
    parse_san(host).with_context(|| format!("server {server:?}"))
}

/// A subject alternative name: an address, or a DNS name (a leading `*.` allowed).
#[derive(Clone, Debug, PartialEq, Eq)]
enum San {
    Dns(String),
    Ip(IpAddr),
}

fn parse_san(s: &str) -> anyhow::Result<San> {
    if let Ok(ip) = s.parse() {
        return Ok(San::Ip(ip));
    }
    let name = s.strip_prefix("*.").unwrap_or(s);
    anyhow::ensure!(is_dns1123_subdomain(name), "{s:?} is neither an IP address nor a lowercase DNS name");
    Ok(San::Dns(s.to_string()))
}

/// Kubernetes' `IsDNS1123Subdomain`: dot-separated labels of lowercase letters, digits and
/// inner hyphens, 253 characters at most.
fn is_dns1123_subdomain(s: &str) -> bool {
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && l.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    s.len() <= 253 && s.split('.').all(label_ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> ClusterSpec {
        let mut spec = ClusterSpec::new("https://127.0.0.1:6443", "cp");
        spec.advertise_addresses = vec!["192.168.1.10".parse().unwrap()];
        spec.nodes = vec!["cp=192.168.1.10".parse().unwrap(), "n1=192.168.1.11".parse().unwrap()];
        spec
    }

    fn names(outcomes: &[(String, Outcome)], want: impl Fn(&Outcome) -> bool) -> Vec<&str> {
        outcomes.iter().filter(|(_, o)| want(o)).map(|(n, _)| n.as_str()).collect()
    }

    /// The first run makes everything in kubeadm's order; a second keeps everything; a node
    /// added later gets its two files and nothing else changes; a new name for the API server
    /// reissues its certificate alone.
    #[test]
    fn ensure_is_idempotent_and_follows_the_spec() {
        let dir = tempfile::tempdir().unwrap();
        let pki_dir = dir.path().join("pki");
        let first = ensure(&pki_dir, &spec()).unwrap();
        let all: Vec<&str> = first.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            all,
            [
                "ca", "apiserver", "apiserver-kubelet-client", "kubelet-cp", "kubelet-n1", "front-proxy-ca", "front-proxy-client",
                "etcd-ca", "etcd-server", "etcd-peer", "etcd-healthcheck-client", "apiserver-etcd-client", "sa", "admin.conf",
                "controller-manager.conf", "scheduler.conf", "proxy.conf", "dns.conf", "csi-hostpath.conf", "kubelet-cp.conf", "kubelet-n1.conf",
            ]
        );
        assert!(first.iter().all(|(_, o)| *o == Outcome::Created), "{first:?}");
        for file in ["ca.key", "etcd/ca.key", "etcd/peer.key", "kubelet-n1.crt", "sa.pub", "admin.conf", "kubelet-n1.conf"] {
            assert!(pki_dir.join(file).exists(), "{file}");
        }

        let second = ensure(&pki_dir, &spec()).unwrap();
        assert_eq!(names(&second, |o| *o != Outcome::Kept), Vec::<&str>::new());

        let mut grown = spec();
        grown.nodes.push("n2=192.168.1.12".parse().unwrap());
        let third = ensure(&pki_dir, &grown).unwrap();
        assert_eq!(names(&third, |o| *o == Outcome::Created), ["kubelet-n2", "kubelet-n2.conf"]);
        assert_eq!(names(&third, |o| matches!(o, Outcome::Renewed(_))), Vec::<&str>::new());

        grown.apiserver_cert_extra_sans = vec!["cp.example.com".into()];
        let fourth = ensure(&pki_dir, &grown).unwrap();
        assert_eq!(names(&fourth, |o| *o != Outcome::Kept), ["apiserver"]);
        assert!(matches!(&fourth[1].1, Outcome::Renewed(pki::RenewReason::Mismatch { field: "DNS names", .. })), "{:?}", fourth[1]);
        let served = pki::info_from_file(&pki_dir.join("apiserver.crt")).unwrap();
        assert!(served.alt_names.dns_names.contains(&"cp.example.com".to_string()));

        grown.server = "https://192.168.1.10:6443".into();
        let fifth = ensure(&pki_dir, &grown).unwrap();
        let renewed = names(&fifth, |o| matches!(o, Outcome::Renewed(pki::RenewReason::Mismatch { field: "server", .. })));
        assert_eq!(renewed, ["admin.conf", "controller-manager.conf", "scheduler.conf", "proxy.conf", "dns.conf", "csi-hostpath.conf", "kubelet-cp.conf", "kubelet-n1.conf", "kubelet-n2.conf"]);
        assert_eq!(names(&fifth, |o| *o == Outcome::Created), Vec::<&str>::new());
    }

    /// A new Kubernetes CA (the old one removed) reissues everything it signed, and every
    /// kubeconfig; the other CAs' certificates stay.
    #[test]
    fn a_new_ca_reissues_what_it_signs() {
        let dir = tempfile::tempdir().unwrap();
        let pki_dir = dir.path().join("pki");
        ensure(&pki_dir, &spec()).unwrap();
        std::fs::remove_file(pki_dir.join("ca.crt")).unwrap();
        std::fs::remove_file(pki_dir.join("ca.key")).unwrap();
        let again = ensure(&pki_dir, &spec()).unwrap();
        let not_signed = names(&again, |o| *o == Outcome::Renewed(pki::RenewReason::NotSignedByCa));
        assert_eq!(not_signed, ["apiserver", "apiserver-kubelet-client", "kubelet-cp", "kubelet-n1"]);
        let trusting_the_old = names(&again, |o| matches!(o, Outcome::Renewed(pki::RenewReason::Mismatch { field: "certificate-authority-data", .. })));
        assert_eq!(trusting_the_old, ["admin.conf", "controller-manager.conf", "scheduler.conf", "proxy.conf", "dns.conf", "csi-hostpath.conf", "kubelet-cp.conf", "kubelet-n1.conf"]);
        assert_eq!(names(&again, |o| *o == Outcome::Created), ["ca"]);
        assert!(names(&again, |o| *o == Outcome::Kept).contains(&"etcd-server"));
    }

    /// Half a CA is an error, and nothing is written over it.
    #[test]
    fn half_a_ca_stops_ensure() {
        let dir = tempfile::tempdir().unwrap();
        let pki_dir = dir.path().join("pki");
        ensure(&pki_dir, &spec()).unwrap();
        std::fs::remove_file(pki_dir.join("etcd/ca.key")).unwrap();
        let e = ensure(&pki_dir, &spec()).unwrap_err();
        assert!(format!("{e:#}").contains("etcd/ca.key"), "{e:#}");
    }

    #[test]
    fn node_specs_and_names() {
        let node = |s: &str| s.parse::<NodeSpec>();
        assert_eq!(node("n1"), Ok(NodeSpec { name: "n1".into(), ips: vec![] }));
        assert_eq!(node("n1=10.0.0.2,fd00::2").unwrap().ips, ["10.0.0.2".parse::<IpAddr>().unwrap(), "fd00::2".parse().unwrap()]);
        for bad in ["N1", "n1=10.0.0", "../n1", "", "n1=", "-n1"] {
            assert!(node(bad).is_err(), "{bad:?}");
        }
        assert_eq!(server_host("https://127.0.0.1:6443").unwrap(), San::Ip("127.0.0.1".parse().unwrap()));
        assert_eq!(server_host("https://[fd00::1]:6443/").unwrap(), San::Ip("fd00::1".parse().unwrap()));
        assert_eq!(server_host("https://cp.example:6443").unwrap(), San::Dns("cp.example".into()));
        assert_eq!(server_host("https://cp").unwrap(), San::Dns("cp".into()));
        assert!(server_host("http://cp:8080").is_err());
        assert!(server_host("https://cp\n:6443").is_err(), "what would break the kubeconfig's YAML");
        assert!(server_host("https://cp:6443/a b").is_err());
        assert_eq!(parse_san("*.lab.local").unwrap(), San::Dns("*.lab.local".into()));
        assert!(parse_san("Lab Host").is_err());
        let mut twice = spec();
        twice.nodes.push("n1=10.0.0.9".parse().unwrap());
        assert!(twice.validate().is_err());
    }

    #[test]
    fn describe_words_outcomes_as_kubeadm() {
        assert_eq!(describe("ca", &Outcome::Created), "[certs] Generating \"ca\" certificate and key");
        assert_eq!(describe("sa", &Outcome::Kept), "[certs] Using the existing \"sa\" key and public key");
        assert_eq!(
            describe("admin.conf", &Outcome::Renewed(pki::RenewReason::NotSignedByCa)),
            "[kubeconfig] Renewing \"admin.conf\" kubeconfig file: not signed by the CA"
        );
    }
}
