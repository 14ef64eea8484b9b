//! Mirrors k8s.io/apiserver/pkg/authentication/request/x509/x509.go: a client certificate signed
//! by `--client-ca-file` is a user: its subject's common name is the user's name, its
//! organizations the user's groups (`CN=jane,O=devs`). kubelab's kubeconfigs and components
//! authenticate this way.
//!
//! As kube-apiserver does, the TLS handshake asks for a certificate but takes any (or none), and
//! the authenticator verifies it: a certificate from an unknown CA, expired, or not meant for
//! client authentication is a 401 with a reason in the log, not a failed handshake the client
//! cannot explain. The chain is verified once per connection, when it is made
//! (`authenticate_chain`); a request on it checks only that the certificate has not expired since
//! (`X509User::user_at`).

use std::fmt;
use std::path::Path;
use std::sync::Arc;

use rustls::client::danger::HandshakeSignatureValid;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::WebPkiClientVerifier;
use rustls::{DigitallySignedStruct, DistinguishedName, RootCertStore, SignatureScheme};

use crate::authentication::user::UserInfo;

/// The client CA (`--client-ca-file`) and what verifies chains against it.
#[derive(Clone)]
pub struct Verifier {
    webpki: Arc<dyn ClientCertVerifier>,
}

impl Verifier {
    /// The CA bundle at `path` (PEM, one or more certificates).
    pub fn from_ca_file(path: &Path) -> Result<Self, String> {
        let mut roots = RootCertStore::empty();
        let certs = CertificateDer::pem_file_iter(path).map_err(|e| format!("--client-ca-file {}: {e}", path.display()))?;
        for cert in certs {
            let cert = cert.map_err(|e| format!("--client-ca-file {}: {e}", path.display()))?;
            roots.add(cert).map_err(|e| format!("--client-ca-file {}: {e}", path.display()))?;
        }
        if roots.is_empty() {
            return Err(format!("--client-ca-file {}: no certificate in it", path.display()));
        }
        let webpki = WebPkiClientVerifier::builder(Arc::new(roots)).allow_unauthenticated().build().map_err(|e| format!("--client-ca-file {}: {e}", path.display()))?;
        Ok(Verifier { webpki })
    }

    /// What the TLS handshake uses: it asks for a certificate, naming the CA, and takes any
    /// chain whose holder proves it has the key; [`Verifier::authenticate_chain`] judges the rest.
    pub fn handshake_verifier(&self) -> Arc<dyn ClientCertVerifier> {
        Arc::new(RequestClientCert(self.webpki.clone()))
    }

    /// The user a verified chain names, when it was made (once per connection). `Ok(None)`: a
    /// certificate without a common name, which names nobody (the request goes on as anonymous).
    pub fn authenticate_chain(&self, chain: &[CertificateDer<'static>]) -> Result<Option<X509User>, String> {
        let Some((leaf, intermediates)) = chain.split_first() else { return Ok(None) };
        self.webpki.verify_client_cert(leaf, intermediates, UnixTime::now()).map_err(|e| format!("verifying certificate {}: {e}", describe(leaf)))?;
        let (_, cert) = x509_parser::parse_x509_certificate(leaf).map_err(|e| format!("parsing a client certificate: {e}"))?;
        let subject = cert.subject();
        let name = subject.iter_common_name().next().and_then(|cn| cn.as_str().ok()).unwrap_or("");
        if name.is_empty() {
            return Ok(None);
        }
        let groups = subject.iter_organization().filter_map(|o| o.as_str().ok()).map(String::from).collect();
        let user = UserInfo { name: name.to_string(), groups, ..Default::default() }.with_authenticated_group();
        Ok(Some(X509User { user, not_after: cert.validity().not_after.timestamp() }))
    }
}

/// The user of a verified client certificate (with `system:authenticated`), and when the
/// certificate expires.
#[derive(Clone, Debug)]
pub struct X509User {
    user: UserInfo,
    /// Seconds since the epoch.
    not_after: i64,
}

impl X509User {
    /// The user, unless the certificate has expired since the connection was made.
    pub fn user_at(&self, now: i64) -> Result<&UserInfo, String> {
        if now > self.not_after {
            return Err(format!("the client certificate of {:?} expired during the connection", self.user.name));
        }
        Ok(&self.user)
    }
}

/// A certificate's subject, for the log.
fn describe(der: &CertificateDer<'_>) -> String {
    match x509_parser::parse_x509_certificate(der) {
        Ok((_, c)) => format!("{:?} issued by {:?}", c.subject().to_string(), c.issuer().to_string()),
        Err(_) => "(unparsable)".into(),
    }
}

/// Go's `tls.RequestClientCert`: ask, accept anything whose signature over the handshake
/// verifies (the client holds the certificate's key), decide later.
struct RequestClientCert(Arc<dyn ClientCertVerifier>);

impl fmt::Debug for RequestClientCert {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("RequestClientCert")
    }
}

impl ClientCertVerifier for RequestClientCert {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        false
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        // Go's client sends a certificate only when its issuer is among these.
        self.0.root_hint_subjects()
    }

    fn verify_client_cert(&self, _: &CertificateDer<'_>, _: &[CertificateDer<'_>], _: UnixTime) -> Result<ClientCertVerified, rustls::Error> {
        Ok(ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(&self, message: &[u8], cert: &CertificateDer<'_>, dss: &DigitallySignedStruct) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(&self, message: &[u8], cert: &CertificateDer<'_>, dss: &DigitallySignedStruct) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}
