//! Mirrors kubeadm's cmd/kubeadm/app/util/pkiutil/pki_helpers.go: a CA made or loaded,
//! certificates and keys made from a [`Config`] and signed by it, and where they are kept.

use std::fmt;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, PKCS_ECDSA_P256_SHA256, SanType,
};
use rustls_pki_types::CertificateDer;

use crate::cert::{self, CertInfo, Config, Usage};
use crate::error::{Error, Result};
use crate::keyutil;
use crate::{CA_CERTIFICATE_VALIDITY, CERTIFICATE_BACKDATE, CERTIFICATE_VALIDITY};

/// `<dir>/<name>.crt` and `<dir>/<name>.key` (kubeadm's `PathsForCertAndKey`); a name may hold
/// a directory, as `etcd/ca` does.
pub fn paths_for_cert_and_key(dir: &Path, name: &str) -> (PathBuf, PathBuf) {
    (dir.join(format!("{name}.crt")), dir.join(format!("{name}.key")))
}

/// A certificate and its private key, PEM-encoded: what [`CertificateAuthority::sign`] makes,
/// what is kept as `<name>.crt` and `<name>.key`, and what a kubeconfig embeds.
#[derive(Clone, PartialEq, Eq)]
pub struct CertAndKey {
    pub cert_pem: String,
    /// PKCS#8 for the keys kubelab makes.
    pub key_pem: String,
}

impl fmt::Debug for CertAndKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CertAndKey").field("cert_pem", &self.cert_pem).field("key_pem", &"[elided]").finish()
    }
}

impl CertAndKey {
    /// `<dir>/<name>.crt` and `<dir>/<name>.key`, read as they are (checked when used).
    pub fn load(dir: &Path, name: &str) -> Result<CertAndKey> {
        let (crt, key) = paths_for_cert_and_key(dir, name);
        let cert_pem = std::fs::read_to_string(&crt).map_err(Error::io("reading", &crt))?;
        let key_pem = std::fs::read_to_string(&key).map_err(Error::io("reading", &key))?;
        Ok(CertAndKey { cert_pem, key_pem })
    }

    /// Writes the key (0600) then the certificate (0644), each atomically (kubeadm's
    /// `WriteCertAndKey`). Between the two a crash leaves a new key beside the old
    /// certificate, which [`crate::renewal_reason`] sees as a key mismatch and mends.
    pub fn write(&self, dir: &Path, name: &str) -> Result<()> {
        let (crt, key) = paths_for_cert_and_key(dir, name);
        keyutil::write_key(&key, self.key_pem.as_bytes())?;
        keyutil::write_cert(&crt, self.cert_pem.as_bytes())
    }

    /// The first certificate (the leaf) as DER.
    pub fn cert_der(&self) -> Result<CertificateDer<'static>> {
        let mut certs = cert::parse_certs_pem(self.cert_pem.as_bytes(), "certificate")?;
        Ok(certs.swap_remove(0))
    }

    /// The leaf's fields.
    pub fn info(&self) -> Result<CertInfo> {
        cert::info_of(&self.cert_der()?, "certificate")
    }
}

/// A certificate authority: its certificate and the key that signs with it.
pub struct CertificateAuthority {
    cert_pem: String,
    cert_der: CertificateDer<'static>,
    pub(crate) info: CertInfo,
    /// rcgen's signer. It is built from the certificate's own DER, so the issuer name of what it
    /// signs is the CA's subject as encoded there (see [`CertificateAuthority::sign`]).
    pub(crate) issuer: Issuer<'static, KeyPair>,
}

impl fmt::Debug for CertificateAuthority {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CertificateAuthority").field("info", &self.info).finish_non_exhaustive()
    }
}

impl CertificateAuthority {
    /// A new self-signed CA with an ECDSA P-256 key, valid for ten years from five minutes ago
    /// (kubeadm's `NewCertificateAuthority`).
    pub fn new(common_name: &str) -> Result<CertificateAuthority> {
        if common_name.is_empty() {
            return Err(Error::config(common_name, "a CA needs a common name"));
        }
        let sign_err = |source| Error::Sign { what: format!("CA {common_name:?}"), source };
        let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).map_err(sign_err)?;
        let mut params = CertificateParams::default();
        params.distinguished_name = DistinguishedName::new();
        params.distinguished_name.push(DnType::CommonName, common_name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        // Go's certutil adds keyEncipherment, which only means something for RSA keys.
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyCertSign];
        set_validity(&mut params, Utc::now(), CA_CERTIFICATE_VALIDITY, common_name)?;
        let cert = params.self_signed(&key).map_err(sign_err)?;
        let cert_pem = cert.pem();
        CertificateAuthority::from_parts(cert_pem, cert.der().clone(), key, common_name)
    }

    /// `<dir>/<name>.crt` and `<dir>/<name>.key` (kubeadm's `TryLoadCertAndKeyFromDisk`), which
    /// must be a CA and its key. kubeadm's RSA CAs load too.
    pub fn load(dir: &Path, name: &str) -> Result<CertificateAuthority> {
        let (crt, key_path) = paths_for_cert_and_key(dir, name);
        CertificateAuthority::load_files(&crt, &key_path)
    }

    /// A CA from a certificate file and a key file named as they are (kube-controller-manager's
    /// `--cluster-signing-cert-file` and `--cluster-signing-key-file`), checked as [`Self::load`].
    pub fn load_files(crt: &Path, key_path: &Path) -> Result<CertificateAuthority> {
        let (crt, key_path) = (crt.to_path_buf(), key_path.to_path_buf());
        let certs = cert::certs_from_file(&crt)?;
        let cert_der = certs.into_iter().next().expect("certs_from_file returns at least one");
        let key = keyutil::private_key_from_file(&key_path)?;
        let what = crt.display().to_string();
        let parsed = cert::parse_full(&cert_der, &what)?;
        if !parsed.is_ca() {
            return Err(Error::NotCa { path: crt });
        }
        if parsed.public_key().subject_public_key.data.as_ref() != keyutil::public_key_bits(&key) {
            return Err(Error::KeyMismatch { cert: crt, key: key_path });
        }
        let cert_pem = pem_of(&cert_der);
        CertificateAuthority::from_parts(cert_pem, cert_der, key, &what)
    }

    fn from_parts(cert_pem: String, cert_der: CertificateDer<'static>, key: KeyPair, what: &str) -> Result<CertificateAuthority> {
        let info = cert::info_of(&cert_der, what)?;
        // rcgen refuses a subject with several attributes in one RDN, which kubelab never makes.
        let issuer = Issuer::from_ca_cert_der(&cert_der, key).map_err(|source| Error::Sign { what: format!("{what} as an issuer"), source })?;
        Ok(CertificateAuthority { cert_pem, cert_der, info, issuer })
    }

    /// Writes `<dir>/<name>.key` (0600) and `<dir>/<name>.crt` (0644), atomically.
    pub fn write(&self, dir: &Path, name: &str) -> Result<()> {
        CertAndKey { cert_pem: self.cert_pem.clone(), key_pem: self.issuer.key().serialize_pem() }.write(dir, name)
    }

    /// The CA's certificate, PEM: what clients trust (a kubeconfig's
    /// `certificate-authority-data`, the API server's `--client-ca-file`).
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    pub fn cert_der(&self) -> &CertificateDer<'static> {
        &self.cert_der
    }

    pub fn info(&self) -> &CertInfo {
        &self.info
    }

    /// A new ECDSA P-256 key and a certificate for it made from `config`, signed by this CA,
    /// valid for a year from five minutes ago (kubeadm's `NewCertAndKey`).
    pub fn sign(&self, config: &Config) -> Result<CertAndKey> {
        let cn = config.common_name.as_str();
        validate(config)?;
        let sign_err = |source| Error::Sign { what: format!("certificate {cn:?}"), source };
        let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).map_err(sign_err)?;
        let mut params = CertificateParams::default();
        // Go's pkix.Name puts O before CN, so kubeadm's subjects read `O = …, CN = …`.
        params.distinguished_name = DistinguishedName::new();
        for o in &config.organizations {
            params.distinguished_name.push(DnType::OrganizationName, o.as_str());
        }
        params.distinguished_name.push(DnType::CommonName, cn);
        let alt = config.alt_names.dedup();
        for name in &alt.dns_names {
            let ia5 = name.as_str().try_into().map_err(|_| Error::config(cn, format!("{name:?} is not a DNS name")))?;
            params.subject_alt_names.push(SanType::DnsName(ia5));
        }
        params.subject_alt_names.extend(alt.ips.iter().map(|ip| SanType::IpAddress(*ip)));
        params.is_ca = IsCa::ExplicitNoCa;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        let mut usages = config.usages.clone();
        usages.sort();
        usages.dedup();
        params.extended_key_usages = usages
            .iter()
            .map(|u| match u {
                Usage::ServerAuth => ExtendedKeyUsagePurpose::ServerAuth,
                Usage::ClientAuth => ExtendedKeyUsagePurpose::ClientAuth,
            })
            .collect();
        params.use_authority_key_identifier_extension = true;
        set_validity(&mut params, Utc::now(), CERTIFICATE_VALIDITY, cn)?;
        let cert = params.signed_by(&key, &self.issuer).map_err(sign_err)?;
        if !self.issuer_matches(cert.der()) {
            return Err(Error::IssuerMismatch { common_name: cn.to_string() });
        }
        Ok(CertAndKey { cert_pem: cert.pem(), key_pem: key.serialize_pem() })
    }

    /// Whether this CA signed `cert_der` (Go's `CheckSignatureFrom`): its issuer name is this
    /// CA's subject, byte for byte, and its signature verifies with this CA's key.
    pub fn signed(&self, cert_der: &[u8]) -> bool {
        let (Ok(cert), Ok(ca)) = (cert::parse_full(cert_der, "certificate"), cert::parse_full(&self.cert_der, "CA")) else {
            return false;
        };
        cert.issuer().as_raw() == ca.subject().as_raw() && cert.verify_signature(Some(ca.public_key())).is_ok()
    }

    pub(crate) fn issuer_matches(&self, cert_der: &[u8]) -> bool {
        match (cert::parse_full(cert_der, "certificate"), cert::parse_full(&self.cert_der, "CA")) {
            (Ok(cert), Ok(ca)) => cert.issuer().as_raw() == ca.subject().as_raw(),
            _ => false,
        }
    }
}

/// PEM text of one DER certificate (client-go's `EncodeCertPEM`), 64 base64 characters a line.
fn pem_of(der: &[u8]) -> String {
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD.encode(der);
    let mut out = String::from("-----BEGIN CERTIFICATE-----\n");
    for line in b64.as_bytes().chunks(64) {
        // base64 is ASCII: every chunk is valid UTF-8.
        out.push_str(&String::from_utf8_lossy(line));
        out.push('\n');
    }
    out.push_str("-----END CERTIFICATE-----\n");
    out
}

/// What kubeadm refuses to sign (`NewSignedCert`, `NewCertAndKey`), and what rcgen cannot
/// express.
fn validate(config: &Config) -> Result<()> {
    let cn = config.common_name.as_str();
    if cn.is_empty() {
        return Err(Error::config(cn, "must specify a CommonName"));
    }
    if config.usages.is_empty() {
        return Err(Error::config(cn, "must specify at least one usage"));
    }
    if config.organizations.len() > 1 {
        return Err(Error::config(cn, format!("{} organizations: kubelab signs certificates with one at most", config.organizations.len())));
    }
    Ok(())
}

/// `not_before` five minutes before `now` (kubeadm's backdate, for clocks a little apart) and
/// `not_after` `validity` after `now`.
fn set_validity(params: &mut CertificateParams, now: DateTime<Utc>, validity: std::time::Duration, cn: &str) -> Result<()> {
    let start = now.timestamp() - CERTIFICATE_BACKDATE.as_secs() as i64;
    let end = now.timestamp() + validity.as_secs() as i64;
    // rcgen takes the `time` crate's dates; x509-parser's ASN1Time makes them from a Unix time,
    // so the crate needs no `time` of its own.
    let date = |secs| x509_parser::time::ASN1Time::from_timestamp(secs).map_err(|source| Error::Certificate { what: format!("certificate {cn:?}"), source });
    params.not_before = date(start)?.to_datetime();
    params.not_after = date(end)?.to_datetime();
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use std::net::IpAddr;
    use std::sync::Arc;

    use rustls_pki_types::pem::PemObject as _;
    use rustls_pki_types::{PrivateKeyDer, ServerName, UnixTime};

    use super::*;
    use crate::cert::AltNames;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn apiserver_config() -> Config {
        Config {
            common_name: "kube-apiserver".into(),
            organizations: vec![],
            alt_names: AltNames {
                dns_names: vec!["kubernetes".into(), "kubernetes.default.svc".into(), "localhost".into(), "kubernetes".into()],
                ips: vec![ip("10.96.0.1"), ip("127.0.0.1"), ip("10.96.0.1")],
            },
            usages: vec![Usage::ServerAuth],
        }
    }

    fn admin_config() -> Config {
        Config {
            common_name: "kubernetes-admin".into(),
            organizations: vec!["system:masters".into()],
            usages: vec![Usage::ClientAuth],
            ..Default::default()
        }
    }

    /// What the CA signs reads back with the subject, names and usages asked for, issued by the
    /// CA's subject byte for byte, with a signature the CA's key verifies and no other CA's does.
    #[test]
    fn a_ca_signs_what_x509_parser_reads_back() {
        let ca = CertificateAuthority::new("kubernetes").unwrap();
        assert!(ca.info().is_ca);
        assert_eq!(ca.info().subject.common_name, "kubernetes");
        let ca_days = (ca.info().not_after - ca.info().not_before).num_days();
        assert_eq!(ca_days, 3650, "ten years and five minutes");

        let served = ca.sign(&apiserver_config()).unwrap();
        let info = served.info().unwrap();
        assert_eq!(info.subject, cert::Subject { common_name: "kube-apiserver".into(), organizations: vec![] });
        assert_eq!(info.issuer_common_name, "kubernetes");
        assert_eq!(info.alt_names.dns_names, ["kubernetes", "kubernetes.default.svc", "localhost"], "sorted, without repeats");
        assert_eq!(info.alt_names.ips, [ip("10.96.0.1"), ip("127.0.0.1")]);
        assert_eq!(info.usages, [Usage::ServerAuth]);
        assert!(!info.is_ca);
        let backdate = Utc::now().signed_duration_since(info.not_before).num_seconds();
        assert!((300..360).contains(&backdate), "valid from five minutes ago, not {backdate} s");
        assert_eq!((info.not_after - info.not_before).num_days(), 365);

        let admin = ca.sign(&admin_config()).unwrap();
        let info = admin.info().unwrap();
        assert_eq!(info.subject.organizations, ["system:masters"]);
        assert_eq!(info.usages, [Usage::ClientAuth]);
        assert!(admin.key_pem.starts_with("-----BEGIN PRIVATE KEY-----"), "PKCS#8");

        let der = admin.cert_der().unwrap();
        let (leaf, root) = (cert::parse_full(&der, "admin").unwrap(), cert::parse_full(ca.cert_der(), "ca").unwrap());
        assert_eq!(leaf.issuer().as_raw(), root.subject().as_raw(), "Go's client compares these bytes");
        leaf.verify_signature(Some(root.public_key())).expect("the CA's key verifies the signature");
        assert!(ca.signed(&der));
        let other = CertificateAuthority::new("kubernetes").unwrap();
        assert!(!other.signed(&der), "same name, another key");
        assert!(leaf.verify_signature(Some(cert::parse_full(other.cert_der(), "other").unwrap().public_key())).is_err());
    }

    /// kubeadm refuses a certificate without a common name or usages; kubelab also refuses
    /// what rcgen cannot encode (a second organization, a DNS name with a space).
    #[test]
    fn configs_that_cannot_be_signed() {
        let ca = CertificateAuthority::new("kubernetes").unwrap();
        let refused = |c: Config| match ca.sign(&c) {
            Err(Error::Config { reason, .. }) => reason,
            other => panic!("{c:?}: {other:?}"),
        };
        assert!(refused(Config { common_name: String::new(), ..admin_config() }).contains("CommonName"));
        assert!(refused(Config { usages: vec![], ..admin_config() }).contains("usage"));
        assert!(refused(Config { organizations: vec!["a".into(), "b".into()], ..admin_config() }).contains("one at most"));
        let bad_name = Config { alt_names: AltNames { dns_names: vec!["ä b".into()], ips: vec![] }, ..apiserver_config() };
        assert!(refused(bad_name).contains("not a DNS name"));
    }

    fn key_der(c: &CertAndKey) -> PrivateKeyDer<'static> {
        PrivateKeyDer::from_pem_slice(c.key_pem.as_bytes()).unwrap()
    }

    /// The crypto backend rustls verifies with here (shared with authority.rs's tests).
    pub(crate) fn provider() -> Arc<rustls::crypto::CryptoProvider> {
        Arc::new(rustls::crypto::aws_lc_rs::default_provider())
    }

    /// A root store holding `ca` alone.
    pub(crate) fn roots(ca: &CertificateAuthority) -> Arc<rustls::RootCertStore> {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(ca.cert_der().clone()).unwrap();
        Arc::new(roots)
    }

    /// rustls's webpki — what the API server verifies client certificates with, and what
    /// kube-rs clients verify the API server with — accepts the chains: the serving certificate
    /// for its DNS names and addresses only, the client certificate for client auth only.
    #[test]
    fn webpki_verifies_the_chains() {
        use rustls::client::danger::ServerCertVerifier as _;
        let ca = CertificateAuthority::new("kubernetes").unwrap();
        let served = ca.sign(&apiserver_config()).unwrap().cert_der().unwrap();
        let admin = ca.sign(&admin_config()).unwrap().cert_der().unwrap();
        let now = UnixTime::now();

        let server_verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(roots(&ca), provider()).build().unwrap();
        for name in ["kubernetes.default.svc", "localhost", "10.96.0.1", "127.0.0.1"] {
            let name = ServerName::try_from(name).unwrap();
            server_verifier.verify_server_cert(&served, &[], &name, &[], now).unwrap_or_else(|e| panic!("{name:?}: {e}"));
        }
        for name in ["example.com", "10.96.0.2"] {
            assert!(server_verifier.verify_server_cert(&served, &[], &ServerName::try_from(name).unwrap(), &[], now).is_err(), "{name}");
        }
        let as_server = server_verifier.verify_server_cert(&admin, &[], &ServerName::try_from("localhost").unwrap(), &[], now);
        assert!(as_server.is_err(), "a client certificate does not serve");

        let client_verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(roots(&ca), provider()).build().unwrap();
        client_verifier.verify_client_cert(&admin, &[], now).unwrap();
        assert!(client_verifier.verify_client_cert(&served, &[], now).is_err(), "a serving certificate is no client's");
        let stranger = CertificateAuthority::new("kubernetes").unwrap().sign(&admin_config()).unwrap().cert_der().unwrap();
        assert!(client_verifier.verify_client_cert(&stranger, &[], now).is_err(), "another CA's");
        // The CA names the server sends in its CertificateRequest: Go's client offers a
        // certificate only if its issuer is one of them.
        let hints: Vec<&[u8]> = client_verifier.root_hint_subjects().iter().map(|dn| dn.as_ref()).collect();
        let leaf = cert::parse_full(&admin, "admin").unwrap();
        assert_eq!(hints, [leaf.issuer().as_raw()]);
    }

    /// A whole TLS handshake in memory, as the API server's secure port will do it: the client
    /// checks the serving certificate for the name it dialled, the server asks for a client
    /// certificate and verifies it, and the subject it reads off it is the user and groups.
    #[test]
    fn a_tls_handshake_with_client_certificates() {
        let ca = CertificateAuthority::new("kubernetes").unwrap();
        let served = ca.sign(&apiserver_config()).unwrap();
        let admin = ca.sign(&admin_config()).unwrap();

        let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(roots(&ca), provider()).build().unwrap();
        let server_config = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_client_cert_verifier(verifier)
            .with_single_cert(vec![served.cert_der().unwrap()], key_der(&served))
            .unwrap();
        let client_config = rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots(&ca))
            .with_client_auth_cert(vec![admin.cert_der().unwrap()], key_der(&admin))
            .unwrap();
        let name = ServerName::try_from("kubernetes.default.svc").unwrap();
        let mut client = rustls::ClientConnection::new(Arc::new(client_config), name).unwrap();
        let mut server = rustls::ServerConnection::new(Arc::new(server_config)).unwrap();
        for _ in 0..10 {
            if !client.is_handshaking() && !server.is_handshaking() {
                break;
            }
            let mut wire = Vec::new();
            client.write_tls(&mut wire).unwrap();
            server.read_tls(&mut wire.as_slice()).unwrap();
            server.process_new_packets().expect("the server accepts the client");
            wire.clear();
            server.write_tls(&mut wire).unwrap();
            client.read_tls(&mut wire.as_slice()).unwrap();
            client.process_new_packets().expect("the client accepts the server");
        }
        assert!(!client.is_handshaking() && !server.is_handshaking());
        let chain = server.peer_certificates().expect("the client sent its certificate");
        let user = cert::subject_from_der(&chain[0]).unwrap();
        assert_eq!(user, cert::Subject { common_name: "kubernetes-admin".into(), organizations: vec!["system:masters".into()] });
    }

    /// A CA goes to disk and comes back the same; a CA whose key is not its own, or a
    /// certificate that is no CA, is refused.
    #[test]
    fn a_ca_round_trips_through_its_files() {
        let dir = tempfile::tempdir().unwrap();
        let ca = CertificateAuthority::new("etcd-ca").unwrap();
        ca.write(dir.path(), "etcd/ca").unwrap();
        let loaded = CertificateAuthority::load(dir.path(), "etcd/ca").unwrap();
        assert_eq!(loaded.cert_der(), ca.cert_der());
        assert_eq!(loaded.cert_pem(), ca.cert_pem(), "PEM written again from DER, as it was made");
        assert!(loaded.signed(&ca.sign(&admin_config()).unwrap().cert_der().unwrap()), "the loaded key signs as the CA");

        let other = CertificateAuthority::new("etcd-ca").unwrap();
        let (_, key) = paths_for_cert_and_key(dir.path(), "etcd/ca");
        std::fs::write(&key, other.issuer.key().serialize_pem()).unwrap();
        assert!(matches!(CertificateAuthority::load(dir.path(), "etcd/ca"), Err(Error::KeyMismatch { .. })));

        ca.sign(&admin_config()).unwrap().write(dir.path(), "admin").unwrap();
        assert!(matches!(CertificateAuthority::load(dir.path(), "admin"), Err(Error::NotCa { .. })));
        let missing = CertificateAuthority::load(dir.path(), "nothing").unwrap_err();
        assert!(missing.is_not_found(), "{missing}");
    }

    /// kubeadm's CAs are RSA: one loads and signs (its certificates still get ECDSA keys).
    #[test]
    fn an_rsa_ca_signs() {
        let key = KeyPair::generate_rsa_for(&rcgen::PKCS_RSA_SHA256, rcgen::RsaKeySize::_2048).unwrap();
        let mut params = CertificateParams::default();
        params.distinguished_name = DistinguishedName::new();
        params.distinguished_name.push(DnType::CommonName, "kubernetes");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let cert = params.self_signed(&key).unwrap();
        let dir = tempfile::tempdir().unwrap();
        CertAndKey { cert_pem: cert.pem(), key_pem: key.serialize_pem() }.write(dir.path(), "ca").unwrap();
        let ca = CertificateAuthority::load(dir.path(), "ca").unwrap();
        let signed = ca.sign(&admin_config()).unwrap().cert_der().unwrap();
        assert!(ca.signed(&signed));
    }
}
