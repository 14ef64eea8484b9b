//! Mirrors kubeadm's cmd/kubeadm/app/phases/certs/certlist.go: the cluster's certificates as a
//! list — each a name, the files it is kept in, the CA that signs it and what it says — and the
//! walk that makes them, CA by CA (`CreateTree`).

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::Path;
use std::time::Duration;

use anyhow::Context as _;
use pki::{AltNames, CertificateAuthority, Config, Outcome, Usage};

use super::{ClusterSpec, San, parse_san, server_host};

/// The Kubernetes CA's name: it signs the API server's certificates and every client
/// certificate the API server accepts.
pub const CA: &str = "ca";
/// The front proxy CA's name (the aggregation layer's requestheader client CA).
pub const FRONT_PROXY_CA: &str = "front-proxy-ca";
/// etcd's CA's name.
pub const ETCD_CA: &str = "etcd-ca";

/// The group every user in which may do anything, whatever RBAC says.
const MASTERS_GROUP: &str = "system:masters";
/// The group of nodes' users.
pub const NODES_GROUP: &str = "system:nodes";

/// One certificate kubelab makes (kubeadm's `KubeadmCert`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KubeadmCert {
    /// kubeadm's name for it (`etcd-server`): what is logged and what `check-expiration` shows.
    pub name: String,
    /// Its files, `<cert-dir>/<base_name>.crt` and `.key` (`etcd/server`).
    pub base_name: String,
    /// The name of the CA that signs it; empty for a CA, which signs itself.
    pub ca_name: &'static str,
    /// What it says; a CA's is its common name alone.
    pub config: Config,
}

impl KubeadmCert {
    pub fn is_ca(&self) -> bool {
        self.ca_name.is_empty()
    }
}

fn ca(name: &str, base_name: &str, common_name: &str) -> KubeadmCert {
    KubeadmCert {
        name: name.into(),
        base_name: base_name.into(),
        ca_name: "",
        config: Config { common_name: common_name.into(), ..Default::default() },
    }
}

fn signed(name: &str, base_name: &str, ca_name: &'static str, config: Config) -> KubeadmCert {
    KubeadmCert { name: name.into(), base_name: base_name.into(), ca_name, config }
}

fn client(common_name: &str, organizations: &[&str]) -> Config {
    Config {
        common_name: common_name.into(),
        organizations: organizations.iter().map(|o| o.to_string()).collect(),
        alt_names: AltNames::default(),
        usages: vec![Usage::ClientAuth],
    }
}

/// Every certificate of the cluster, each CA before what it signs (kubeadm's
/// `GetDefaultCertList`, with a kubelet serving certificate per node).
pub fn cert_list(spec: &ClusterSpec) -> anyhow::Result<Vec<KubeadmCert>> {
    let mut list = vec![
        ca(CA, "ca", "kubernetes"),
        signed(
            "apiserver",
            "apiserver",
            CA,
            Config { common_name: "kube-apiserver".into(), organizations: vec![], alt_names: apiserver_alt_names(spec)?, usages: vec![Usage::ServerAuth] },
        ),
        // kubeadm 1.33 puts this one in kubeadm:cluster-admins, bound to cluster-admin by a
        // ClusterRoleBinding kubeadm makes after init; kubelab has none, so system:masters.
        signed("apiserver-kubelet-client", "apiserver-kubelet-client", CA, client("kube-apiserver-kubelet-client", &[MASTERS_GROUP])),
    ];
    // kubelab's: each kubelet serves with a certificate the API server can verify, subject as a
    // kubelet's serverTLSBootstrap CSR has it.
    for node in &spec.nodes {
        let alt_names = AltNames { dns_names: vec![node.name.clone()], ips: node.ips.clone() };
        let config = Config { alt_names, usages: vec![Usage::ServerAuth], ..client(&format!("system:node:{}", node.name), &[NODES_GROUP]) };
        list.push(signed(&format!("kubelet-{}", node.name), &format!("kubelet-{}", node.name), CA, config));
    }
    let etcd_serving = |spec: &ClusterSpec| Config {
        common_name: spec.node_name.clone(),
        organizations: vec![],
        alt_names: etcd_alt_names(spec),
        // etcd wants client auth on its serving certificates too (kubeadm's certlist says why).
        usages: vec![Usage::ServerAuth, Usage::ClientAuth],
    };
    list.extend([
        ca(FRONT_PROXY_CA, "front-proxy-ca", "front-proxy-ca"),
        signed("front-proxy-client", "front-proxy-client", FRONT_PROXY_CA, client("front-proxy-client", &[])),
        ca(ETCD_CA, "etcd/ca", "etcd-ca"),
        signed("etcd-server", "etcd/server", ETCD_CA, etcd_serving(spec)),
        signed("etcd-peer", "etcd/peer", ETCD_CA, etcd_serving(spec)),
        signed("etcd-healthcheck-client", "etcd/healthcheck-client", ETCD_CA, client("kube-etcd-healthcheck-client", &[])),
        signed("apiserver-etcd-client", "apiserver-etcd-client", ETCD_CA, client("kube-apiserver-etcd-client", &[])),
    ]);
    Ok(list)
}

/// The API server's names (kubeadm's `GetAPIServerAltNames`): the control plane node's name,
/// the `kubernetes` Service's names and cluster IP, the advertise addresses, the server URL's
/// host, the extra SANs — and `localhost`/`127.0.0.1`, where `kubelab up` serves it.
fn apiserver_alt_names(spec: &ClusterSpec) -> anyhow::Result<AltNames> {
    let mut alt = AltNames {
        dns_names: vec![
            spec.node_name.clone(),
            "kubernetes".into(),
            "kubernetes.default".into(),
            "kubernetes.default.svc".into(),
            format!("kubernetes.default.svc.{}", spec.dns_domain),
            "localhost".into(),
        ],
        ips: vec![spec.service_ip, IpAddr::V4(Ipv4Addr::LOCALHOST)],
    };
    alt.ips.extend(&spec.advertise_addresses);
    let endpoint = std::iter::once(server_host(&spec.server));
    for san in endpoint.chain(spec.apiserver_cert_extra_sans.iter().map(|s| parse_san(s))) {
        match san? {
            San::Dns(name) => alt.dns_names.push(name),
            San::Ip(ip) => alt.ips.push(ip),
        }
    }
    Ok(alt)
}

/// etcd's names (kubeadm's `getAltNames`): the node's name and the addresses it listens on.
fn etcd_alt_names(spec: &ClusterSpec) -> AltNames {
    let mut ips = spec.advertise_addresses.clone();
    ips.extend([IpAddr::V4(Ipv4Addr::LOCALHOST), IpAddr::V6(Ipv6Addr::LOCALHOST)]);
    AltNames { dns_names: vec![spec.node_name.clone(), "localhost".into()], ips }
}

/// What [`create_tree`] did.
pub struct Tree {
    /// What happened to each certificate, in the list's order.
    pub outcomes: Vec<(String, Outcome)>,
    /// The CAs by name, for the kubeconfigs' client certificates.
    pub cas: HashMap<String, CertificateAuthority>,
}

/// Makes or keeps every certificate of `list` under `dir`, each CA before what it signs
/// (kubeadm's `CreateTree`).
pub fn create_tree(dir: &Path, list: &[KubeadmCert], renew_before: Duration) -> anyhow::Result<Tree> {
    let mut cas = HashMap::new();
    let mut outcomes = Vec::with_capacity(list.len());
    for cert in list {
        let outcome = if cert.is_ca() {
            let (ca, outcome) = pki::ensure_ca(dir, &cert.base_name, &cert.config.common_name).with_context(|| format!("the {:?} CA", cert.name))?;
            cas.insert(cert.name.clone(), ca);
            outcome
        } else {
            let ca = cas.get(cert.ca_name).with_context(|| format!("certificate {:?}: its CA {:?} is not before it in the list", cert.name, cert.ca_name))?;
            pki::ensure_cert(dir, &cert.base_name, ca, &cert.config, renew_before).with_context(|| format!("the {:?} certificate", cert.name))?
        };
        outcomes.push((cert.name.clone(), outcome));
    }
    Ok(Tree { outcomes, cas })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    /// The list as kubeadm's, with kubelab's kubelet certificates: each certificate's CA comes
    /// before it, and the subjects and usages are what each component is known by.
    #[test]
    fn the_list() {
        let mut spec = ClusterSpec::new("https://cp.lab:6443", "cp");
        spec.advertise_addresses = vec![ip("172.18.0.2")];
        spec.nodes = vec!["n1=172.18.0.3".parse().unwrap()];
        spec.apiserver_cert_extra_sans = vec!["10.0.0.9".into(), "api.lab".into()];
        let list = cert_list(&spec).unwrap();
        let find = |name: &str| list.iter().find(|c| c.name == name).unwrap_or_else(|| panic!("{name}"));
        for (i, c) in list.iter().enumerate() {
            assert!(c.is_ca() || list[..i].iter().any(|ca| ca.name == c.ca_name), "{} before its CA", c.name);
        }

        let served = &find("apiserver").config;
        assert_eq!(served.usages, [Usage::ServerAuth]);
        let alt = served.alt_names.dedup();
        assert_eq!(
            alt.dns_names,
            ["api.lab", "cp", "cp.lab", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local", "localhost"]
        );
        assert_eq!(alt.ips, [ip("10.96.0.1"), ip("127.0.0.1"), ip("172.18.0.2"), ip("10.0.0.9")]);

        let kubelet = find("kubelet-n1");
        assert_eq!((kubelet.base_name.as_str(), kubelet.ca_name), ("kubelet-n1", CA));
        assert_eq!(kubelet.config.common_name, "system:node:n1");
        assert_eq!(kubelet.config.organizations, [NODES_GROUP]);
        assert_eq!(kubelet.config.alt_names, AltNames { dns_names: vec!["n1".into()], ips: vec![ip("172.18.0.3")] });
        assert_eq!(kubelet.config.usages, [Usage::ServerAuth]);

        assert_eq!(find("apiserver-kubelet-client").config, client("kube-apiserver-kubelet-client", &["system:masters"]));
        let etcd = find("etcd-peer");
        assert_eq!((etcd.base_name.as_str(), etcd.ca_name, etcd.config.common_name.as_str()), ("etcd/peer", ETCD_CA, "cp"));
        assert_eq!(etcd.config.alt_names.ips, [ip("172.18.0.2"), ip("127.0.0.1"), ip("::1")]);
        assert_eq!(find("etcd-ca").base_name, "etcd/ca");
        assert_eq!(find("front-proxy-client").ca_name, FRONT_PROXY_CA);
        let cas: Vec<&str> = list.iter().filter(|c| c.is_ca()).map(|c| c.name.as_str()).collect();
        assert_eq!(cas, [CA, FRONT_PROXY_CA, ETCD_CA]);
    }
}
