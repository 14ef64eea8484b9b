//! Mirrors kubeadm's cmd/kubeadm/app/phases/kubeconfig/kubeconfig.go (with
//! util/kubeconfig/kubeconfig.go's `CreateWithCerts`): a kubeconfig per component, each
//! embedding a client certificate signed by the cluster CA whose subject is the component's
//! user and group, the CA to trust, and the API server's URL.

use std::path::Path;
use std::time::Duration;

use anyhow::Context as _;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use chrono::{DateTime, Utc};
use pki::{CertAndKey, CertificateAuthority, Config, Outcome, RenewReason, Usage};

use super::ClusterSpec;
use super::certlist::NODES_GROUP;

/// The cluster's name in every kubeconfig, as kubeadm names it.
pub const CLUSTER_NAME: &str = "kubernetes";

/// One kubeconfig kubelab writes (kubeadm's `kubeConfigSpec` with client certificate auth).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KubeConfigSpec {
    /// `admin.conf`, `kubelet-<node>.conf`, …
    pub file_name: String,
    /// The user: the client certificate's common name, and the kubeconfig's user name.
    pub client_name: String,
    /// The user's groups: the certificate's organizations.
    pub organizations: Vec<String>,
}

impl KubeConfigSpec {
    fn new(file_name: impl Into<String>, client_name: impl Into<String>, organizations: &[&str]) -> KubeConfigSpec {
        KubeConfigSpec {
            file_name: file_name.into(),
            client_name: client_name.into(),
            organizations: organizations.iter().map(|o| o.to_string()).collect(),
        }
    }

    /// The client certificate it embeds.
    pub fn config(&self) -> Config {
        Config {
            common_name: self.client_name.clone(),
            organizations: self.organizations.clone(),
            alt_names: Default::default(),
            usages: vec![Usage::ClientAuth],
        }
    }
}

/// The cluster's kubeconfigs (kubeadm's `getKubeConfigSpecs`, with kubelab's proxy and a
/// kubelet's per node).
pub fn kubeconfig_specs(spec: &ClusterSpec) -> Vec<KubeConfigSpec> {
    let mut specs = vec![
        // kubeadm's super-admin.conf; its admin.conf is in kubeadm:cluster-admins (see the module).
        KubeConfigSpec::new("admin.conf", "kubernetes-admin", &["system:masters"]),
        KubeConfigSpec::new("controller-manager.conf", "system:kube-controller-manager", &[]),
        KubeConfigSpec::new("scheduler.conf", "system:kube-scheduler", &[]),
        // kubeadm gives kube-proxy a service account; kubelab's runs outside any pod, as the
        // user the default RBAC binds to system:node-proxier.
        KubeConfigSpec::new("proxy.conf", "system:kube-proxy", &[]),
        // kubeadm's CoreDNS runs as the service account kube-system/coredns; kubelab's DNS server
        // runs outside any pod, as this user, which `kubelab up` binds to kubeadm's
        // system:coredns ClusterRole.
        KubeConfigSpec::new("dns.conf", "system:kube-dns", &[]),
        // The CSI driver's sidecars (external-provisioner, external-attacher) run as the
        // service account of the driver's pods; `kubelab up`'s driver runs outside any pod, as
        // this user, which `kubelab up` binds to the sidecars' ClusterRoles.
        KubeConfigSpec::new("csi-hostpath.conf", "system:csi-hostpath", &[]),
    ];
    for node in &spec.nodes {
        specs.push(KubeConfigSpec::new(format!("kubelet-{}.conf", node.name), format!("system:node:{}", node.name), &[NODES_GROUP]));
    }
    specs
}

/// What a kubeconfig says, of what kubelab writes into it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Embedded {
    pub server: String,
    /// `certificate-authority-data`, decoded: the CA's PEM.
    pub ca_pem: String,
    /// `client-certificate-data` and `client-key-data`, decoded.
    pub client: CertAndKey,
}

/// `<dir>/<file_name>`: kept when it points at `server`, trusts `ca` and holds a client
/// certificate [`pki::renewal_reason`] finds nothing wrong with; else written again with a new
/// certificate. (kubeadm keeps a kubeconfig with the right CA and server whatever its
/// certificate, and renews only on `kubeadm certs renew`.)
pub fn ensure_kubeconfig(dir: &Path, kc: &KubeConfigSpec, ca: &CertificateAuthority, server: &str, renew_before: Duration) -> anyhow::Result<Outcome> {
    let path = dir.join(&kc.file_name);
    let outcome = if !path.try_exists().with_context(|| format!("looking for {}", path.display()))? {
        Outcome::Created
    } else {
        let reason = match read(&path) {
            Ok(existing) => renewal_reason(&existing, ca, server, &kc.config(), renew_before, Utc::now()),
            Err(e) => Some(RenewReason::Unreadable(format!("{e:#}"))),
        };
        match reason {
            None => return Ok(Outcome::Kept),
            Some(why) => Outcome::Renewed(why),
        }
    };
    let client = ca.sign(&kc.config()).with_context(|| format!("the client certificate of {}", kc.file_name))?;
    let text = render(server, ca.cert_pem(), &kc.client_name, &client);
    // A kubeconfig holds a private key: it is written as a key is, 0600.
    pki::write_key(&path, text.as_bytes())?;
    Ok(outcome)
}

/// Why `existing` cannot stay as the kubeconfig for `server`, `ca` and `config`, or `None`.
pub fn renewal_reason(existing: &Embedded, ca: &CertificateAuthority, server: &str, config: &Config, renew_before: Duration, now: DateTime<Utc>) -> Option<RenewReason> {
    if existing.server != server {
        return Some(RenewReason::Mismatch { field: "server", had: existing.server.clone(), want: server.to_string() });
    }
    let trusted = pki::parse_certs_pem(existing.ca_pem.as_bytes(), "certificate-authority-data");
    if !matches!(&trusted, Ok(certs) if certs.len() == 1 && certs[0] == *ca.cert_der()) {
        let had = match trusted {
            Ok(certs) => pki::parse_der(&certs[0]).map_or_else(|e| e.to_string(), |i| format!("CN={}", i.subject.common_name)),
            Err(e) => e.to_string(),
        };
        return Some(RenewReason::Mismatch { field: "certificate-authority-data", had, want: format!("CN={}", ca.info().subject.common_name) });
    }
    pki::renewal_reason(&existing.client, ca, config, renew_before, now)
}

/// A kubeconfig's current context's server, CA and client certificate, read with the
/// kubeconfig loader every kubelab component uses.
pub fn read(path: &Path) -> anyhow::Result<Embedded> {
    let config = kube::config::Kubeconfig::read_from(path).with_context(|| format!("reading {}", path.display()))?;
    let context_name = config.current_context.as_deref().context("no current-context")?;
    let context = config
        .contexts
        .iter()
        .find(|c| c.name == context_name)
        .and_then(|c| c.context.as_ref())
        .with_context(|| format!("no context {context_name:?}"))?;
    let cluster = config
        .clusters
        .iter()
        .find(|c| c.name == context.cluster)
        .and_then(|c| c.cluster.as_ref())
        .with_context(|| format!("no cluster {:?}", context.cluster))?;
    let user_name = context.user.as_deref().context("the current context names no user")?;
    let user = config.auth_infos.iter().find(|u| u.name == user_name).and_then(|u| u.auth_info.as_ref()).with_context(|| format!("no user {user_name:?}"))?;
    // kube keeps the key out of Debug output; its serializer gives it back as the file had it.
    let user = serde_json::to_value(user).context("the user")?;
    let field = |name: &str| user.get(name).and_then(|v| v.as_str()).with_context(|| format!("user {user_name:?} has no {name}"));
    Ok(Embedded {
        server: cluster.server.clone().context("the cluster has no server")?,
        ca_pem: decode(cluster.certificate_authority_data.as_deref().context("the cluster has no certificate-authority-data")?, "certificate-authority-data")?,
        client: CertAndKey {
            cert_pem: decode(field("client-certificate-data")?, "client-certificate-data")?,
            key_pem: decode(field("client-key-data")?, "client-key-data")?,
        },
    })
}

fn decode(data: &str, what: &str) -> anyhow::Result<String> {
    let bytes = STANDARD.decode(data.trim()).with_context(|| format!("{what}: not base64"))?;
    String::from_utf8(bytes).with_context(|| format!("{what}: not PEM text"))
}

/// The kubeconfig text, laid out as kubeadm's (client-go's `clientcmd.Write`): one cluster named
/// `kubernetes`, one user, the context `<user>@kubernetes`, PEMs as base64. Every value is a
/// plain YAML scalar: the server has no spaces ([`super::ClusterSpec::validate`]), user names
/// are DNS names with `system:` prefixes, and base64 has no YAML specials.
pub fn render(server: &str, ca_pem: &str, user: &str, client: &CertAndKey) -> String {
    let context = format!("{user}@{CLUSTER_NAME}");
    format!(
        "apiVersion: v1
clusters:
- cluster:
    certificate-authority-data: {ca}
    server: {server}
  name: {CLUSTER_NAME}
contexts:
- context:
    cluster: {CLUSTER_NAME}
    user: {user}
  name: {context}
current-context: {context}
kind: Config
preferences: {{}}
users:
- name: {user}
  user:
    client-certificate-data: {cert}
    client-key-data: {key}
",
        ca = STANDARD.encode(ca_pem),
        cert = STANDARD.encode(&client.cert_pem),
        key = STANDARD.encode(&client.key_pem),
    )
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;

    /// A kubeconfig written here is one kube-rs loads — the client every kubelab component
    /// uses — with the certificate, key and CA it was given, and the subject asked for; it is
    /// 0600, and kept on the next run.
    #[test]
    fn a_kubeconfig_kube_rs_loads() {
        let dir = tempfile::tempdir().unwrap();
        let ca = CertificateAuthority::new("kubernetes").unwrap();
        let kc = KubeConfigSpec::new("kubelet-n1.conf", "system:node:n1", &[NODES_GROUP]);
        let server = "https://127.0.0.1:6443";
        let ensure = |ca: &CertificateAuthority, server: &str| ensure_kubeconfig(dir.path(), &kc, ca, server, pki::DEFAULT_RENEW_BEFORE).unwrap();
        assert_eq!(ensure(&ca, server), Outcome::Created);
        let path = dir.path().join("kubelet-n1.conf");
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);

        let loaded = kube::config::Kubeconfig::read_from(&path).unwrap();
        assert_eq!(loaded.current_context.as_deref(), Some("system:node:n1@kubernetes"));
        let options = kube::config::KubeConfigOptions::default();
        let config = futures::executor::block_on(kube::Config::from_custom_kubeconfig(loaded, &options)).expect("kube-rs takes it");
        assert_eq!(config.cluster_url.to_string(), "https://127.0.0.1:6443/");
        assert_eq!(config.root_cert.as_deref(), Some(&[ca.cert_der().to_vec()][..]));

        let embedded = read(&path).unwrap();
        assert_eq!(embedded.server, server);
        assert_eq!(embedded.ca_pem, ca.cert_pem());
        let info = embedded.client.info().unwrap();
        assert_eq!((info.subject.common_name.as_str(), info.subject.organizations.as_slice()), ("system:node:n1", &["system:nodes".to_string()][..]));
        assert!(ca.signed(&embedded.client.cert_der().unwrap()));

        let before = std::fs::read(&path).unwrap();
        assert_eq!(ensure(&ca, server), Outcome::Kept);
        assert_eq!(std::fs::read(&path).unwrap(), before);
        assert!(matches!(ensure(&ca, "https://10.0.0.1:6443"), Outcome::Renewed(RenewReason::Mismatch { field: "server", .. })));
        let other = CertificateAuthority::new("kubernetes").unwrap();
        assert!(matches!(ensure(&other, "https://10.0.0.1:6443"), Outcome::Renewed(RenewReason::Mismatch { field: "certificate-authority-data", .. })));
        std::fs::write(&path, "clusters: [").unwrap();
        assert!(matches!(ensure(&other, "https://10.0.0.1:6443"), Outcome::Renewed(RenewReason::Unreadable(_))));
        assert_eq!(ensure(&other, "https://10.0.0.1:6443"), Outcome::Kept);
    }

    /// The layout is kubeadm's, field for field.
    #[test]
    fn the_layout_is_kubeadms() {
        let client = CertAndKey { cert_pem: "C".into(), key_pem: "K".into() };
        let text = render("https://cp:6443", "A", "kubernetes-admin", &client);
        let want = "apiVersion: v1\nclusters:\n- cluster:\n    certificate-authority-data: QQ==\n    server: https://cp:6443\n  name: kubernetes\n\
                    contexts:\n- context:\n    cluster: kubernetes\n    user: kubernetes-admin\n  name: kubernetes-admin@kubernetes\n\
                    current-context: kubernetes-admin@kubernetes\nkind: Config\npreferences: {}\nusers:\n- name: kubernetes-admin\n  user:\n\
                    \x20   client-certificate-data: Qw==\n    client-key-data: Sw==\n";
        assert_eq!(text, want);
    }

    #[test]
    fn the_specs() {
        let mut spec = ClusterSpec::new("https://127.0.0.1:6443", "cp");
        spec.nodes = vec!["cp".parse().unwrap()];
        let specs = kubeconfig_specs(&spec);
        let users: Vec<(&str, &str, Vec<String>)> = specs.iter().map(|s| (s.file_name.as_str(), s.client_name.as_str(), s.organizations.clone())).collect();
        assert_eq!(
            users,
            [
                ("admin.conf", "kubernetes-admin", vec!["system:masters".to_string()]),
                ("controller-manager.conf", "system:kube-controller-manager", vec![]),
                ("scheduler.conf", "system:kube-scheduler", vec![]),
                ("proxy.conf", "system:kube-proxy", vec![]),
                ("dns.conf", "system:kube-dns", vec![]),
                ("csi-hostpath.conf", "system:csi-hostpath", vec![]),
                ("kubelet-cp.conf", "system:node:cp", vec!["system:nodes".to_string()]),
            ]
        );
    }
}
