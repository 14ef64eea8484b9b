//! Mirrors pkg/controller/certificates/rootcacertpublisher: the root CA certificate publisher
//! ([`publisher`]), which keeps the ConfigMap `kube-root-ca.crt` in every namespace; and, here,
//! where the CA it publishes comes from, as cmd/kube-controller-manager/app/certificates.go
//! (`startRootCACertificatePublisherController`, `readCA`) finds it:
//! 1. `--root-ca-file`, read once at start: a file that cannot be read, or holds no PEM
//!    certificate, stops the controller manager with an error naming it.
//! 2. Without the flag, the `certificate-authority-data` of the cluster the kubeconfig's current
//!    context names (Kubernetes takes its client configuration's `CAData`).
//! 3. Neither (a `--master` URL, or a kubeconfig whose cluster has no CA data): the publisher is
//!    not started (Kubernetes would publish an empty bundle).

pub mod publisher;

use std::path::Path;

use client::Connection;
use kube::config::Kubeconfig;

use crate::error::{Error, Result};

pub use publisher::Publisher;

/// Steps 1–3: the PEM bundle to publish, or `None` when there is none.
pub async fn root_ca(root_ca_file: Option<&Path>, connection: &Connection) -> Result<Option<String>> {
    let config = |what: String| Error::Client(client::Error::Config(what));
    // Step 1.
    if let Some(path) = root_ca_file {
        let bytes = tokio::fs::read(path).await.map_err(|e| config(format!("--root-ca-file {}: {e}", path.display())))?;
        return check_pem(bytes).map(Some).map_err(|e| config(format!("--root-ca-file {}: {e}", path.display())));
    }
    // Steps 2 and 3.
    let Connection::Kubeconfig(path) = connection else { return Ok(None) };
    let text = tokio::fs::read_to_string(path).await.map_err(|e| config(format!("--kubeconfig {}: {e}", path.display())))?;
    let kubeconfig = Kubeconfig::from_yaml(&text).map_err(|e| config(format!("--kubeconfig {}: {e}", path.display())))?;
    ca_from_kubeconfig(&kubeconfig).map_err(|e| config(format!("--kubeconfig {}: certificate-authority-data: {e}", path.display())))
}

/// Step 2: the CA data of the current context's cluster, decoded, if it has any.
pub fn ca_from_kubeconfig(kubeconfig: &Kubeconfig) -> Result<Option<String>, String> {
    let current = kubeconfig.current_context.as_deref().unwrap_or_default();
    let cluster_name = kubeconfig.contexts.iter().find(|c| c.name == current).and_then(|c| c.context.as_ref()).map(|c| c.cluster.as_str());
    let cluster = kubeconfig.clusters.iter().find(|c| Some(c.name.as_str()) == cluster_name).and_then(|c| c.cluster.as_ref());
    let Some(data) = cluster.and_then(|c| c.certificate_authority_data.as_deref()).filter(|d| !d.is_empty()) else { return Ok(None) };
    // The field is a Go []byte, which JSON (and so YAML) carries as base64: a ByteString.
    let bytes: k8s_openapi::ByteString = serde_json::from_value(serde_json::Value::String(data.to_string())).map_err(|e| e.to_string())?;
    check_pem(bytes.0).map(Some)
}

/// `readCA`'s check, lighter: UTF-8 text (a ConfigMap's data is text) holding at least one PEM
/// `CERTIFICATE` block. The certificates themselves are not parsed.
pub fn check_pem(bytes: Vec<u8>) -> Result<String, String> {
    let pem = String::from_utf8(bytes).map_err(|_| "not PEM: the data is not text".to_string())?;
    let has_certificate = pem.find("-----BEGIN CERTIFICATE-----").is_some_and(|begin| pem[begin..].contains("-----END CERTIFICATE-----"));
    if !has_certificate {
        return Err("holds no PEM certificate (-----BEGIN CERTIFICATE----- … -----END CERTIFICATE-----)".into());
    }
    Ok(pem)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CA: &str = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
    /// `CA`, base64-encoded.
    const CA_DATA: &str = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUIKLS0tLS1FTkQgQ0VSVElGSUNBVEUtLS0tLQo=";

    fn kubeconfig(current: &str, clusters: &str) -> Kubeconfig {
        let text = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n{clusters}\ncontexts:\n- name: admin\n  context:\n    cluster: kubernetes\n    user: admin\n\
             - name: other\n  context:\n    cluster: elsewhere\n    user: admin\ncurrent-context: {current}\nusers:\n- name: admin\n  user:\n    token: t\n"
        );
        Kubeconfig::from_yaml(&text).expect("a kubeconfig")
    }

    #[test]
    fn the_current_clusters_ca_data() {
        let both = format!(
            "- name: kubernetes\n  cluster:\n    server: https://127.0.0.1:6443\n    certificate-authority-data: {CA_DATA}\n\
             - name: elsewhere\n  cluster:\n    server: https://10.0.0.1:6443\n    certificate-authority: /etc/ca.crt"
        );
        assert_eq!(ca_from_kubeconfig(&kubeconfig("admin", &both)), Ok(Some(CA.to_string())));
        // A CA file is not CA data (Kubernetes' CAData stays empty too).
        assert_eq!(ca_from_kubeconfig(&kubeconfig("other", &both)), Ok(None));
        assert_eq!(ca_from_kubeconfig(&kubeconfig("nobody", &both)), Ok(None));
        let insecure = "- name: kubernetes\n  cluster:\n    server: http://127.0.0.1:8080";
        assert_eq!(ca_from_kubeconfig(&kubeconfig("admin", insecure)), Ok(None));
        let garbled = "- name: kubernetes\n  cluster:\n    server: https://127.0.0.1:6443\n    certificate-authority-data: '%%%'";
        assert!(ca_from_kubeconfig(&kubeconfig("admin", garbled)).is_err());
    }

    #[test]
    fn a_bundle_must_hold_a_pem_certificate() {
        assert_eq!(check_pem(CA.as_bytes().to_vec()), Ok(CA.to_string()));
        let two = format!("# the old CA and the new\n{CA}{CA}");
        assert_eq!(check_pem(two.clone().into_bytes()), Ok(two));
        assert!(check_pem(b"".to_vec()).is_err());
        assert!(check_pem(b"-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----\n".to_vec()).is_err());
        assert!(check_pem(b"-----BEGIN CERTIFICATE-----\nMIIB\n".to_vec()).is_err());
        assert!(check_pem(vec![0x30, 0x82, 0xff, 0xfe]).is_err());
    }
}
