//! Mirrors etcd's `client/pkg/transport/listener.go` (`TLSInfo`): the certificate, key and
//! trusted CA of one side of a member (its client port, or its peer port and the peer dialer),
//! read from the files etcd's flags name, and the TLS configurations made from them.
//!
//! 1. [`TlsInfo`] holds the paths as the flags gave them: `--cert-file`, `--key-file`,
//!    `--trusted-ca-file`, `--client-cert-auth` for clients, `--peer-*` for peers.
//! 2. [`TlsInfo::server_config`] serves with the certificate; with client certificate
//!    authentication it asks every client for a certificate and refuses, during the handshake,
//!    one without a certificate the trusted CA signed (etcd's `RequireAndVerifyClientCert`).
//! 3. [`TlsInfo::client_config`] dials with the same certificate (a member presents its peer
//!    certificate to the peers it dials) and verifies the server against the trusted CA.
//!
//! Both speak only HTTP/2 (ALPN `h2`): the client and peer ports are gRPC. Every error names the
//! flag and the file it is about. Certificates are read once, at start (etcd reloads them on
//! every handshake, so that a renewed certificate takes effect without a restart).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, RootCertStore, ServerConfig};

use crate::error::{Error, Result};

/// Which side of the member a [`TlsInfo`] is for: it decides the flag names of its errors.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Side {
    /// The client port: `--cert-file`, `--key-file`, `--trusted-ca-file`, `--client-cert-auth`.
    #[default]
    Client,
    /// The peer port and the peer dialer: the same flags with `--peer-`.
    Peer,
}

impl Side {
    fn flag(self, name: &str) -> String {
        match self {
            Side::Client => format!("--{name}"),
            Side::Peer => format!("--peer-{name}"),
        }
    }
}

/// etcd's `TLSInfo`: where one side's certificate, key and trusted CA are.
#[derive(Clone, Debug, Default)]
pub struct TlsInfo {
    pub side: Side,
    pub cert_file: Option<PathBuf>,
    pub key_file: Option<PathBuf>,
    pub trusted_ca_file: Option<PathBuf>,
    /// Clients must present a certificate the trusted CA signed.
    pub client_cert_auth: bool,
}

impl TlsInfo {
    /// No TLS on the peer side (what [`Default`] is for the client side).
    pub fn peer() -> Self {
        Self { side: Side::Peer, ..Self::default() }
    }

    /// etcd's `TLSInfo.Empty`: no certificate or no key, so nothing can be served over TLS.
    pub fn is_empty(&self) -> bool {
        self.cert_file.is_none() || self.key_file.is_none()
    }

    fn error(&self, flag: &str, path: &Path, reason: impl std::fmt::Display) -> Error {
        Error::Tls { flag: self.side.flag(flag), path: path.display().to_string(), reason: reason.to_string() }
    }

    /// The certificate chain and its key.
    fn identity(&self) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)> {
        let (Some(cert_file), Some(key_file)) = (&self.cert_file, &self.key_file) else {
            return Err(Error::Config(format!(
                "TLS needs both {} and {}",
                self.side.flag("cert-file"),
                self.side.flag("key-file")
            )));
        };
        let chain = CertificateDer::pem_file_iter(cert_file)
            .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
            .map_err(|e| self.error("cert-file", cert_file, e))?;
        if chain.is_empty() {
            return Err(self.error("cert-file", cert_file, "no certificate in it"));
        }
        let key = PrivateKeyDer::from_pem_file(key_file).map_err(|e| self.error("key-file", key_file, e))?;
        Ok((chain, key))
    }

    /// The certificates of `--trusted-ca-file` (or `--peer-trusted-ca-file`).
    fn roots(&self) -> Result<RootCertStore> {
        let Some(path) = &self.trusted_ca_file else {
            return Err(Error::Config(format!(
                "{} is needed to verify the other side's certificate",
                self.side.flag("trusted-ca-file")
            )));
        };
        let mut roots = RootCertStore::empty();
        let certs = CertificateDer::pem_file_iter(path).map_err(|e| self.error("trusted-ca-file", path, e))?;
        for cert in certs {
            let cert = cert.map_err(|e| self.error("trusted-ca-file", path, e))?;
            roots.add(cert).map_err(|e| self.error("trusted-ca-file", path, e))?;
        }
        if roots.is_empty() {
            return Err(self.error("trusted-ca-file", path, "no certificate in it"));
        }
        Ok(roots)
    }

    /// Step 2: what a TLS listener of this side serves with.
    pub fn server_config(&self) -> Result<Arc<ServerConfig>> {
        let (chain, key) = self.identity()?;
        let builder = ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| Error::Config(format!("TLS: {e}")))?;
        let builder = if self.client_cert_auth {
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(self.roots()?), provider())
                .build()
                .map_err(|e| Error::Config(format!("{}: {e}", self.side.flag("trusted-ca-file"))))?;
            builder.with_client_cert_verifier(verifier)
        } else {
            builder.with_no_client_auth()
        };
        let mut config = builder.with_single_cert(chain, key).map_err(|e| self.mismatch(e))?;
        config.alpn_protocols = vec![b"h2".to_vec()];
        Ok(Arc::new(config))
    }

    /// Step 3: what this side dials with (the peer transport): its certificate as the client's,
    /// the trusted CA for the server's.
    pub fn client_config(&self) -> Result<Arc<ClientConfig>> {
        let (chain, key) = self.identity()?;
        let mut config = ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| Error::Config(format!("TLS: {e}")))?
            .with_root_certificates(self.roots()?)
            .with_client_auth_cert(chain, key)
            .map_err(|e| self.mismatch(e))?;
        config.alpn_protocols = vec![b"h2".to_vec()];
        Ok(Arc::new(config))
    }

    /// A certificate and key that do not go together (or a key rustls cannot use).
    fn mismatch(&self, e: rustls::Error) -> Error {
        let cert = self.cert_file.as_deref().unwrap_or(Path::new(""));
        let key = self.key_file.as_deref().unwrap_or(Path::new(""));
        Error::Tls {
            flag: format!("{} with {}", self.side.flag("cert-file"), self.side.flag("key-file")),
            path: format!("{} and {}", cert.display(), key.display()),
            reason: e.to_string(),
        }
    }
}

/// The crypto of every TLS configuration here: aws-lc-rs, the one backend of the workspace
/// (rustls panics when a process has two and names neither).
fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::aws_lc_rs::default_provider())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A CA and a certificate for 127.0.0.1 it signed, written as PEM files in `dir`.
    pub(crate) fn write_pki(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let ca = ca_params.self_signed(&ca_key).unwrap();
        let issuer = rcgen::Issuer::new(ca_params, ca_key);
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap();
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth, rcgen::ExtendedKeyUsagePurpose::ClientAuth];
        let cert = params.signed_by(&key, &issuer).unwrap();
        let paths = (dir.join("ca.crt"), dir.join("server.crt"), dir.join("server.key"));
        std::fs::write(&paths.0, ca.pem()).unwrap();
        std::fs::write(&paths.1, cert.pem()).unwrap();
        std::fs::write(&paths.2, key.serialize_pem()).unwrap();
        paths
    }

    #[test]
    fn configs_load_and_errors_name_the_flag_and_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let (ca, cert, key) = write_pki(dir.path());
        let info = TlsInfo {
            side: Side::Peer,
            cert_file: Some(cert.clone()),
            key_file: Some(key.clone()),
            trusted_ca_file: Some(ca.clone()),
            client_cert_auth: true,
        };
        assert_eq!(info.server_config().unwrap().alpn_protocols, [b"h2".to_vec()]);
        info.client_config().unwrap();

        let missing = dir.path().join("nope.crt");
        let err = TlsInfo { cert_file: Some(missing.clone()), ..info.clone() }.server_config().unwrap_err().to_string();
        assert!(err.contains("--peer-cert-file") && err.contains(&missing.display().to_string()), "{err}");

        let err = TlsInfo { side: Side::Client, trusted_ca_file: Some(key.clone()), ..info.clone() }.server_config().unwrap_err().to_string();
        assert!(err.starts_with("--trusted-ca-file") && err.contains("no certificate"), "{err}");

        let err = TlsInfo { key_file: Some(ca.clone()), ..info.clone() }.server_config().unwrap_err().to_string();
        assert!(err.contains("--peer-key-file"), "{err}");

        let err = TlsInfo { trusted_ca_file: None, ..info.clone() }.server_config().unwrap_err().to_string();
        assert!(err.contains("--peer-trusted-ca-file"), "{err}");
        // Without client certificate authentication no CA is needed to serve.
        TlsInfo { trusted_ca_file: None, client_cert_auth: false, ..info }.server_config().unwrap();
        assert!(TlsInfo::peer().is_empty());
    }
}
