//! Mirrors pkg/kubelet/client/kubelet_client.go's `KubeletClientConfig` and `MakeTransport`: how
//! the API server calls node agents (pods/log, pods/exec, pods/attach, pods/portforward,
//! nodes/proxy, `kubelab trace`) — over HTTPS, with its own client certificate
//! (`--kubelet-client-certificate`, `--kubelet-client-key`), checking the agent's serving
//! certificate against `--kubelet-certificate-authority` if given. Where an agent answers is the
//! node registry's (`registry/core/node/kubelet_client.rs`).
//!
//! The agent authenticates the certificate and asks the API server whether its user may act on
//! `nodes/proxy` (kubeadm's certificate is in `system:masters`).

use std::path::Path;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use crate::options::Options;
use crate::proxy::dial::{DIAL_TIMEOUT, Dialer};

/// The API server's connections to node agents: one TLS configuration for its plain requests
/// ([`KubeletClient::http`]) and its upgrades ([`KubeletClient::dialer`]).
#[derive(Clone)]
pub struct KubeletClient {
    pub http: reqwest::Client,
    pub dialer: Dialer,
}

impl KubeletClient {
    /// From the `--kubelet-*` flags: a missing or unreadable file is an error at start.
    pub fn new(opts: &Options) -> std::result::Result<KubeletClient, String> {
        let config = Arc::new(tls_config(opts)?);
        let http = reqwest::Client::builder()
            .use_preconfigured_tls((*config).clone())
            // A proxy passes redirects back to its client (nodes/proxy); logs are never redirected.
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(DIAL_TIMEOUT)
            .build()
            .map_err(|e| format!("the kubelet client: {e}"))?;
        Ok(KubeletClient { http, dialer: Dialer::tls(config) })
    }
}

/// The client side of TLS to the agents (kubelet_client.go's `MakeTransport` with the
/// `KubeletClientConfig`'s TLS files).
fn tls_config(opts: &Options) -> std::result::Result<ClientConfig, String> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone()).with_safe_default_protocol_versions().map_err(|e| e.to_string())?;
    let builder = match &opts.kubelet_certificate_authority {
        Some(ca) => builder.with_root_certificates(roots(ca)?),
        None => builder.dangerous().with_custom_certificate_verifier(Arc::new(InsecureSkipVerify(provider))),
    };
    let mut config = match (&opts.kubelet_client_certificate, &opts.kubelet_client_key) {
        (Some(cert), Some(key)) => {
            let chain = CertificateDer::pem_file_iter(cert)
                .and_then(|certs| certs.collect::<std::result::Result<Vec<_>, _>>())
                .map_err(|e| format!("--kubelet-client-certificate {}: {e}", cert.display()))?;
            if chain.is_empty() {
                return Err(format!("--kubelet-client-certificate {}: no certificate in it", cert.display()));
            }
            let key = PrivateKeyDer::from_pem_file(key).map_err(|e| format!("--kubelet-client-key {}: {e}", key.display()))?;
            builder.with_client_auth_cert(chain, key).map_err(|e| format!("--kubelet-client-certificate {}: {e}", cert.display()))?
        }
        (None, None) => builder.with_no_client_auth(),
        _ => return Err("--kubelet-client-certificate and --kubelet-client-key go together".into()),
    };
    // exec, attach and port-forward upgrade an HTTP/1.1 connection.
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

fn roots(path: &Path) -> std::result::Result<RootCertStore, String> {
    let what = |e: &dyn std::fmt::Display| format!("--kubelet-certificate-authority {}: {e}", path.display());
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(path).map_err(|e| what(&e))? {
        roots.add(cert.map_err(|e| what(&e))?).map_err(|e| what(&e))?;
    }
    if roots.is_empty() {
        return Err(what(&"no certificate in it"));
    }
    Ok(roots)
}

/// Without `--kubelet-certificate-authority` Kubernetes does not verify the agents' serving
/// certificates (they are self-signed by default); the handshake's signature is still checked.
#[derive(Debug)]
struct InsecureSkipVerify(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for InsecureSkipVerify {
    fn verify_server_cert(&self, _: &CertificateDer<'_>, _: &[CertificateDer<'_>], _: &ServerName<'_>, _: &[u8], _: UnixTime) -> std::result::Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(&self, message: &[u8], cert: &CertificateDer<'_>, dss: &DigitallySignedStruct) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(&self, message: &[u8], cert: &CertificateDer<'_>, dss: &DigitallySignedStruct) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}


#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flags_are_checked_at_start() {
        let dir = tempfile::tempdir().unwrap();
        assert!(KubeletClient::new(&Options::default()).is_ok(), "no flags: no certificate, agents unverified");
        let half = Options { kubelet_client_certificate: Some(dir.path().join("c.crt")), ..Default::default() };
        assert_eq!(KubeletClient::new(&half).err().unwrap(), "--kubelet-client-certificate and --kubelet-client-key go together");
        let missing = Options { kubelet_certificate_authority: Some(dir.path().join("ca.crt")), ..Default::default() };
        assert!(KubeletClient::new(&missing).err().unwrap().starts_with("--kubelet-certificate-authority"));
        let missing = Options {
            kubelet_client_certificate: Some(dir.path().join("c.crt")),
            kubelet_client_key: Some(dir.path().join("c.key")),
            ..Default::default()
        };
        assert!(KubeletClient::new(&missing).err().unwrap().starts_with("--kubelet-client-certificate"));
    }
}
