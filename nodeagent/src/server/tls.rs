//! Mirrors cmd/kubelet/app/server.go's `InitializeTLS`: what the node agent's port serves TLS
//! with.
//!
//! 1. The serving certificate: `--tls-cert-file` and `--tls-private-key-file`, or else one the
//!    agent signs itself, made once and kept in `--cert-dir` as `kubelet.crt` and `kubelet.key`
//!    (the kubelet's `GenerateSelfSignedCertKey`: a throw-away CA named `<node>-ca@<time>`
//!    signs `<node>@<time>`, valid for the node's name, `localhost` and its addresses).
//! 2. The client CA (`--client-ca-file`): the handshake asks for a certificate it signed and
//!    verifies one that is offered (a certificate of another CA, expired, or not for client
//!    authentication fails the handshake); a client may offer none and go on to the other
//!    authenticators ([`super::auth`]).

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::ServerConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::RootCertStore;

/// The TLS flags.
#[derive(Clone, Debug, Default)]
pub struct TlsOptions {
    /// `--tls-cert-file` and `--tls-private-key-file`.
    pub cert_file: Option<PathBuf>,
    pub private_key_file: Option<PathBuf>,
    /// `--cert-dir` (`<root-dir>/pki`): where the self-signed certificate is kept.
    pub cert_dir: Option<PathBuf>,
    /// `--client-ca-file`.
    pub client_ca_file: Option<PathBuf>,
}

/// Steps 1 and 2. `node` and `addresses` go into a self-signed certificate.
pub(crate) fn server_config(opts: &TlsOptions, root_dir: &Path, node: &str, addresses: &[IpAddr]) -> Result<Arc<ServerConfig>, String> {
    // Step 1.
    let (cert_file, key_file) = match (&opts.cert_file, &opts.private_key_file) {
        (Some(cert), Some(key)) => (cert.clone(), key.clone()),
        (None, None) => {
            let dir = opts.cert_dir.clone().unwrap_or_else(|| root_dir.join("pki"));
            self_signed(&dir, node, addresses)?
        }
        _ => return Err("--tls-cert-file and --tls-private-key-file go together".into()),
    };
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&cert_file)
        .and_then(|certs| certs.collect::<Result<_, _>>())
        .map_err(|e| format!("--tls-cert-file {}: {e}", cert_file.display()))?;
    if chain.is_empty() {
        return Err(format!("--tls-cert-file {}: no certificate in it", cert_file.display()));
    }
    let key = PrivateKeyDer::from_pem_file(&key_file).map_err(|e| format!("--tls-private-key-file {}: {e}", key_file.display()))?;

    // Step 2.
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let verifier = match &opts.client_ca_file {
        Some(path) => {
            let what = |e: &dyn std::fmt::Display| format!("--client-ca-file {}: {e}", path.display());
            let mut roots = RootCertStore::empty();
            for cert in CertificateDer::pem_file_iter(path).map_err(|e| what(&e))? {
                roots.add(cert.map_err(|e| what(&e))?).map_err(|e| what(&e))?;
            }
            if roots.is_empty() {
                return Err(what(&"no certificate in it"));
            }
            WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
                .allow_unauthenticated()
                .build()
                .map_err(|e| what(&e))?
        }
        None => WebPkiClientVerifier::no_client_auth(),
    };
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)
        .map_err(|e| format!("--tls-cert-file {} with --tls-private-key-file {}: {e}", cert_file.display(), key_file.display()))?;
    // exec, attach and port-forward upgrade an HTTP/1.1 connection.
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// `<dir>/kubelet.crt` and `kubelet.key`, made if they are not both there.
fn self_signed(dir: &Path, node: &str, addresses: &[IpAddr]) -> Result<(PathBuf, PathBuf), String> {
    let (crt, key) = pki::paths_for_cert_and_key(dir, "kubelet");
    if crt.exists() && key.exists() {
        return Ok((crt, key));
    }
    std::fs::create_dir_all(dir).map_err(|e| format!("--cert-dir {}: {e}", dir.display()))?;
    let stamp = chrono::Utc::now().timestamp();
    let ca = pki::CertificateAuthority::new(&format!("{node}-ca@{stamp}")).map_err(|e| e.to_string())?;
    let config = pki::Config {
        common_name: format!("{node}@{stamp}"),
        organizations: vec![],
        alt_names: pki::AltNames { dns_names: vec![node.to_string(), "localhost".into()], ips: addresses.to_vec() }.dedup(),
        usages: vec![pki::Usage::ServerAuth],
    };
    let signed = ca.sign(&config).map_err(|e| e.to_string())?;
    signed.write(dir, "kubelet").map_err(|e| e.to_string())?;
    tracing::info!(target: "kubelet::server", cert = %crt.display(), "wrote a self-signed serving certificate");
    Ok((crt, key))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_self_signed_certificate_is_made_once() {
        let dir = tempfile::tempdir().unwrap();
        let opts = TlsOptions::default();
        server_config(&opts, dir.path(), "n1", &["10.0.0.5".parse().unwrap()]).unwrap();
        let crt = dir.path().join("pki/kubelet.crt");
        let info = pki::info_from_file(&crt).unwrap();
        assert!(info.subject.common_name.starts_with("n1@"), "{info:?}");
        assert_eq!(info.alt_names.dns_names, ["localhost", "n1"]);
        assert_eq!(info.alt_names.ips, ["10.0.0.5".parse::<IpAddr>().unwrap()]);
        let first = std::fs::read(&crt).unwrap();
        server_config(&opts, dir.path(), "n1", &[]).unwrap();
        assert_eq!(std::fs::read(&crt).unwrap(), first, "kept");
    }

    #[test]
    fn bad_flags_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let only_cert = TlsOptions { cert_file: Some(dir.path().join("c.crt")), ..Default::default() };
        assert!(server_config(&only_cert, dir.path(), "n1", &[]).unwrap_err().contains("go together"));
        let missing = TlsOptions { cert_file: Some(dir.path().join("c.crt")), private_key_file: Some(dir.path().join("c.key")), ..Default::default() };
        assert!(server_config(&missing, dir.path(), "n1", &[]).unwrap_err().starts_with("--tls-cert-file"));
        let ca = TlsOptions { client_ca_file: Some(dir.path().join("ca.crt")), ..Default::default() };
        assert!(server_config(&ca, dir.path(), "n1", &[]).unwrap_err().starts_with("--client-ca-file"));
    }
}
