//! Mirrors kube-controller-manager's pkg/controller/certificates/authority (authority.go,
//! policies.go) and the CSR parsing of pkg/apis/certificates/helpers.go (`ParseCSR`): a
//! certificate signing request — PEM `CERTIFICATE REQUEST`, signed with the key it asks a
//! certificate for — read and checked ([`parse_csr`]), and signed by a CA under Kubernetes'
//! permissive signing policy ([`CertificateAuthority::sign_csr`]):
//! 1. Parse the request and verify its self-signature (whoever sent it holds the key).
//! 2. Take its subject, DNS and IP alternative names and public key as they are; nothing else
//!    of what it asks (extensions, key usages) is kept.
//! 3. Apply the policy: the key usages and extended key usages of `usages` (the CSR object's
//!    `spec.usages`, Kubernetes' strings), basicConstraints CA:FALSE, and the validity:
//!    [`boundaries`] (backdated five minutes; `ttl` long, less the backdate unless eight hours or
//!    shorter; never past the CA's own end).
//! 4. Sign with the CA's key; a random 128-bit serial number.

use std::net::IpAddr;
use std::time::Duration;

use chrono::{DateTime, Utc};
use rcgen::{CertificateParams, CertificateSigningRequestParams, ExtendedKeyUsagePurpose, IsCa, KeyUsagePurpose, SerialNumber};
use rustls_pki_types::CertificateSigningRequestDer;
use rustls_pki_types::pem::{PemObject as _, SectionKind};
use x509_parser::extensions::{GeneralName, ParsedExtension};
use x509_parser::prelude::FromDer as _;

use crate::cert::Subject;
use crate::error::{Error, Result};
use crate::pki_helpers::CertificateAuthority;

/// How far back a signed certificate's validity starts (the signing controller's `Backdate`):
/// five minutes, for clocks a little apart.
pub const CSR_BACKDATE: Duration = Duration::from_secs(5 * 60);
/// Below this lifetime a certificate's end is not shortened by the backdate (the signing
/// controller's `Short`: five minutes are about 1 % of eight hours).
pub const SHORT_CERTIFICATE: Duration = Duration::from_secs(8 * 3600);

/// Why a request whose subject has several organizations is not signed (see the crate's
/// caveats).
pub const ONE_ORGANIZATION: &str = "kubelab signs certificates with one subject organization at most";

/// What a certificate signing request asks for, as the approver and the signer judge it (the
/// fields of Go's `x509.CertificateRequest` they read).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CertificateRequest {
    /// All its organizations, however many (a request for `O=[system:nodes, other]` is not a
    /// node's).
    pub subject: Subject,
    pub dns_names: Vec<String>,
    pub ip_addresses: Vec<IpAddr>,
    pub email_addresses: Vec<String>,
    pub uris: Vec<String>,
}

fn csr_error(reason: impl Into<String>) -> Error {
    Error::CertificateRequest { reason: reason.into() }
}

/// The DER of the first PEM block, which must be a `CERTIFICATE REQUEST` (`ParseCSR`).
fn csr_der(pem: &[u8]) -> Result<Vec<u8>> {
    match <(SectionKind, Vec<u8>)>::pem_slice_iter(pem).next() {
        Some(Ok((SectionKind::Csr, der))) => Ok(der),
        _ => Err(csr_error("PEM block type must be CERTIFICATE REQUEST")),
    }
}

/// Step 1: a PEM certificate signing request read and its signature verified (Kubernetes'
/// `ParseCSR` followed by `CheckSignature`).
pub fn parse_csr(pem: &[u8]) -> Result<CertificateRequest> {
    let der = csr_der(pem)?;
    let csr = match x509_parser::certification_request::X509CertificationRequest::from_der(&der) {
        Ok((_, csr)) => csr,
        Err(e) => return Err(csr_error(format!("unable to parse certificate request: {}", crate::error::x509_error(e)))),
    };
    csr.verify_signature().map_err(|e| csr_error(format!("unable to verify certificate request signature: {e}")))?;
    let info = &csr.certification_request_info;
    let bad = |e: x509_parser::error::X509Error| csr_error(format!("unable to parse certificate request: {e}"));
    let common_name = match info.subject.iter_common_name().next() {
        Some(cn) => cn.as_str().map_err(bad)?.to_string(),
        None => String::new(),
    };
    let organizations = info.subject.iter_organization().map(|o| o.as_str().map(String::from)).collect::<Result<_, _>>().map_err(bad)?;
    let mut req = CertificateRequest { subject: Subject { common_name, organizations }, ..Default::default() };
    for ext in csr.requested_extensions().into_iter().flatten() {
        let ParsedExtension::SubjectAlternativeName(san) = ext else { continue };
        for name in &san.general_names {
            match name {
                GeneralName::DNSName(n) => req.dns_names.push(n.to_string()),
                GeneralName::RFC822Name(n) => req.email_addresses.push(n.to_string()),
                GeneralName::URI(n) => req.uris.push(n.to_string()),
                GeneralName::IPAddress(bytes) => match *bytes {
                    [a, b, c, d] => req.ip_addresses.push(IpAddr::from([*a, *b, *c, *d])),
                    bytes => {
                        let v6: [u8; 16] = bytes.try_into().map_err(|_| csr_error("unable to parse certificate request: a bad IP address"))?;
                        req.ip_addresses.push(IpAddr::from(v6));
                    }
                },
                _ => {}
            }
        }
    }
    Ok(req)
}

/// The key usages of Kubernetes' `spec.usages` strings (policies.go's `keyUsageDict`).
fn key_usage(usage: &str) -> Option<KeyUsagePurpose> {
    Some(match usage {
        "signing" | "digital signature" => KeyUsagePurpose::DigitalSignature,
        "content commitment" => KeyUsagePurpose::ContentCommitment,
        "key encipherment" => KeyUsagePurpose::KeyEncipherment,
        "key agreement" => KeyUsagePurpose::KeyAgreement,
        "data encipherment" => KeyUsagePurpose::DataEncipherment,
        "cert sign" => KeyUsagePurpose::KeyCertSign,
        "crl sign" => KeyUsagePurpose::CrlSign,
        "encipher only" => KeyUsagePurpose::EncipherOnly,
        "decipher only" => KeyUsagePurpose::DecipherOnly,
        _ => return None,
    })
}

/// The extended key usages (`extKeyUsageDict`), with Go's `x509.ExtKeyUsage` number, by which
/// they are sorted in the certificate.
fn ext_key_usage(usage: &str) -> Option<(u8, ExtendedKeyUsagePurpose)> {
    let pkix = |n: u64| ExtendedKeyUsagePurpose::Other(vec![1, 3, 6, 1, 5, 5, 7, 3, n]);
    Some(match usage {
        "any" => (0, ExtendedKeyUsagePurpose::Any),
        "server auth" => (1, ExtendedKeyUsagePurpose::ServerAuth),
        "client auth" => (2, ExtendedKeyUsagePurpose::ClientAuth),
        "code signing" => (3, ExtendedKeyUsagePurpose::CodeSigning),
        "email protection" | "s/mime" => (4, ExtendedKeyUsagePurpose::EmailProtection),
        "ipsec end system" => (5, pkix(5)),
        "ipsec tunnel" => (6, pkix(6)),
        "ipsec user" => (7, pkix(7)),
        "timestamping" => (8, ExtendedKeyUsagePurpose::TimeStamping),
        "ocsp signing" => (9, ExtendedKeyUsagePurpose::OcspSigning),
        "microsoft sgc" => (10, ExtendedKeyUsagePurpose::Other(vec![1, 3, 6, 1, 4, 1, 311, 10, 3, 3])),
        "netscape sgc" => (11, ExtendedKeyUsagePurpose::Other(vec![2, 16, 840, 1, 113730, 4, 1])),
        _ => return None,
    })
}

/// policies.go's `keyUsagesFromStrings`: the key usages and the extended key usages (without
/// repeats, in Go's order) of `usages`; any string it does not know is an error naming them all.
pub fn key_usages_from_strings<S: AsRef<str>>(usages: &[S]) -> Result<(Vec<KeyUsagePurpose>, Vec<ExtendedKeyUsagePurpose>)> {
    let (mut keys, mut exts, mut unrecognized) = (Vec::new(), Vec::new(), Vec::new());
    for usage in usages.iter().map(AsRef::as_ref) {
        if let Some(k) = key_usage(usage) {
            if !keys.contains(&k) {
                keys.push(k);
            }
        } else if let Some(e) = ext_key_usage(usage) {
            if !exts.contains(&e) {
                exts.push(e);
            }
        } else {
            unrecognized.push(format!("{usage:?}"));
        }
    }
    if !unrecognized.is_empty() {
        return Err(csr_error(format!("unrecognized usage values: [{}]", unrecognized.join(" "))));
    }
    exts.sort_by_key(|(n, _)| *n);
    Ok((keys, exts.into_iter().map(|(_, e)| e).collect()))
}

/// policies.go's `boundaries`: NotBefore is `now - backdate`; NotAfter `now + ttl` for a
/// certificate of `horizon` or less, else `now + ttl - backdate` (so a long one lasts `ttl` in
/// all); neither past the signer's own NotAfter.
pub fn boundaries(now: DateTime<Utc>, ttl: Duration, backdate: Duration, horizon: Duration, signer_not_after: DateTime<Utc>) -> (DateTime<Utc>, DateTime<Utc>) {
    let chrono_of = |d: Duration| chrono::Duration::from_std(d).unwrap_or(chrono::Duration::MAX);
    let not_before = now - chrono_of(backdate);
    let not_after = if ttl <= horizon { now + chrono_of(ttl) } else { now + chrono_of(ttl) - chrono_of(backdate) };
    (not_before, not_after.min(signer_not_after))
}

impl CertificateAuthority {
    /// Signs a PEM certificate signing request for `usages` (Kubernetes' strings, such as
    /// `"client auth"`) and a lifetime of `ttl`, and returns the certificate as PEM (the
    /// signing controller's `sign`, steps 1–4 above).
    pub fn sign_csr<S: AsRef<str>>(&self, csr_pem: &[u8], usages: &[S], ttl: Duration) -> Result<String> {
        self.sign_csr_at(csr_pem, usages, ttl, Utc::now())
    }

    fn sign_csr_at<S: AsRef<str>>(&self, csr_pem: &[u8], usages: &[S], ttl: Duration, now: DateTime<Utc>) -> Result<String> {
        // Step 1.
        let request = parse_csr(csr_pem)?;
        if request.subject.organizations.len() > 1 {
            // rcgen would keep only the last one: a user would silently lose groups.
            return Err(csr_error(ONE_ORGANIZATION));
        }
        let cn = request.subject.common_name.clone();
        let sign_err = |source| Error::Sign { what: format!("certificate request {cn:?}"), source };
        // Step 2: rcgen reads the request again for what it signs (subject, names, key).
        let der = CertificateSigningRequestDer::from(csr_der(csr_pem)?);
        let asked = CertificateSigningRequestParams::from_der(&der).map_err(sign_err)?;
        let mut params = CertificateParams::default();
        params.distinguished_name = asked.params.distinguished_name;
        params.subject_alt_names = asked.params.subject_alt_names;
        // Step 3.
        let (key_usages, ext_key_usages) = key_usages_from_strings(usages)?;
        params.key_usages = key_usages;
        params.extended_key_usages = ext_key_usages;
        params.is_ca = IsCa::ExplicitNoCa;
        params.use_authority_key_identifier_extension = true;
        let (not_before, not_after) = boundaries(now, ttl, CSR_BACKDATE, SHORT_CERTIFICATE, self.info.not_after);
        let date = |t: DateTime<Utc>| {
            x509_parser::time::ASN1Time::from_timestamp(t.timestamp()).map(|t| t.to_datetime()).map_err(|source| Error::Certificate { what: format!("certificate {cn:?}"), source })
        };
        params.not_before = date(not_before)?;
        params.not_after = date(not_after)?;
        // Step 4: Go draws a serial below 2^128; the first bit cleared keeps the INTEGER positive.
        let mut serial: [u8; 16] = rand::random();
        serial[0] &= 0x7f;
        params.serial_number = Some(SerialNumber::from_slice(&serial));
        let cert = params.signed_by(&asked.public_key, &self.issuer).map_err(sign_err)?;
        if !self.issuer_matches(cert.der()) {
            return Err(Error::IssuerMismatch { common_name: cn });
        }
        Ok(cert.pem())
    }
}

#[cfg(test)]
mod tests {
    use rcgen::{DistinguishedName, DnType, KeyPair, PKCS_ECDSA_P256_SHA256, SanType};
    use rustls_pki_types::{CertificateDer, ServerName, UnixTime};

    use super::*;
    use crate::cert::{self, Usage};
    use crate::pki_helpers::tests::{provider, roots};

    /// A CSR as the kubelet makes one (client-go's `MakeCSR`): subject and names, signed with
    /// its new key; and that key.
    fn csr(cn: &str, orgs: &[&str], dns: &[&str], ips: &[&str]) -> (String, KeyPair) {
        let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).unwrap();
        let mut params = CertificateParams::default();
        params.distinguished_name = DistinguishedName::new();
        for o in orgs {
            params.distinguished_name.push(DnType::OrganizationName, *o);
        }
        params.distinguished_name.push(DnType::CommonName, cn);
        params.subject_alt_names = dns.iter().map(|d| SanType::DnsName((*d).try_into().unwrap())).collect();
        params.subject_alt_names.extend(ips.iter().map(|i| SanType::IpAddress(i.parse().unwrap())));
        (params.serialize_request(&key).unwrap().pem().unwrap(), key)
    }

    fn der_of(pem: &str) -> CertificateDer<'static> {
        cert::parse_certs_pem(pem.as_bytes(), "signed").unwrap().swap_remove(0)
    }

    /// A kubelet's client CSR comes back as a certificate the API server's verifier accepts for
    /// client auth (and for nothing else), with the CSR's subject and key and the usages asked.
    #[test]
    fn a_node_client_csr_is_signed_for_client_auth() {
        let ca = CertificateAuthority::new("kubernetes").unwrap();
        let (pem, key) = csr("system:node:n1", &["system:nodes"], &[], &[]);
        let request = parse_csr(pem.as_bytes()).unwrap();
        assert_eq!(request.subject, Subject { common_name: "system:node:n1".into(), organizations: vec!["system:nodes".into()] });
        let signed = ca.sign_csr(pem.as_bytes(), &["digital signature", "key encipherment", "client auth"], Duration::from_secs(365 * 24 * 3600)).unwrap();
        let der = der_of(&signed);
        assert!(ca.signed(&der));
        let info = cert::parse_der(&der).unwrap();
        assert_eq!(info.subject, request.subject);
        assert_eq!(info.usages, [Usage::ClientAuth]);
        assert!(!info.is_ca);
        let parsed = cert::parse_full(&der, "signed").unwrap();
        assert_eq!(parsed.public_key().subject_public_key.data.as_ref(), key.public_key_raw(), "the CSR's key");
        let ku = parsed.key_usage().unwrap().expect("a keyUsage extension").value;
        assert!(ku.digital_signature() && ku.key_encipherment() && !ku.key_cert_sign());
        let bc = parsed.basic_constraints().unwrap().expect("basicConstraints").value;
        assert!(!bc.ca);

        let now = UnixTime::now();
        let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(roots(&ca), provider()).build().unwrap();
        verifier.verify_client_cert(&der, &[], now).expect("webpki accepts it as a client certificate");
        use rustls::client::danger::ServerCertVerifier as _;
        let server = rustls::client::WebPkiServerVerifier::builder_with_provider(roots(&ca), provider()).build().unwrap();
        assert!(server.verify_server_cert(&der, &[], &ServerName::try_from("n1").unwrap(), &[], now).is_err());
        let stranger = rustls::server::WebPkiClientVerifier::builder_with_provider(roots(&CertificateAuthority::new("kubernetes").unwrap()), provider())
            .build()
            .unwrap();
        assert!(stranger.verify_client_cert(&der, &[], now).is_err(), "another CA's roots");
    }

    /// A serving CSR keeps its DNS names and addresses: webpki accepts it for them.
    #[test]
    fn a_serving_csr_keeps_its_names() {
        use rustls::client::danger::ServerCertVerifier as _;
        let ca = CertificateAuthority::new("kubernetes").unwrap();
        let (pem, _) = csr("system:node:n1", &["system:nodes"], &["n1.example"], &["10.0.0.7"]);
        let request = parse_csr(pem.as_bytes()).unwrap();
        assert_eq!(request.dns_names, ["n1.example"]);
        assert_eq!(request.ip_addresses, ["10.0.0.7".parse::<IpAddr>().unwrap()]);
        let der = der_of(&ca.sign_csr(pem.as_bytes(), &["digital signature", "server auth"], Duration::from_secs(24 * 3600)).unwrap());
        let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(roots(&ca), provider()).build().unwrap();
        for name in ["n1.example", "10.0.0.7"] {
            verifier.verify_server_cert(&der, &[], &ServerName::try_from(name).unwrap(), &[], UnixTime::now()).unwrap_or_else(|e| panic!("{name}: {e}"));
        }
        assert!(verifier.verify_server_cert(&der, &[], &ServerName::try_from("n2.example").unwrap(), &[], UnixTime::now()).is_err());
    }

    /// Backdated five minutes; a long certificate lasts its TTL in all, a short one its TTL
    /// from now; none outlives its CA.
    #[test]
    fn the_validity_follows_the_policy() {
        let now = DateTime::from_timestamp(1_800_000_000, 0).unwrap();
        let h = |n: i64| chrono::Duration::hours(n);
        let far = now + h(100_000);
        let m5 = chrono::Duration::minutes(5);
        assert_eq!(boundaries(now, Duration::from_secs(8760 * 3600), CSR_BACKDATE, SHORT_CERTIFICATE, far), (now - m5, now + h(8760) - m5));
        assert_eq!(boundaries(now, Duration::from_secs(3600), CSR_BACKDATE, SHORT_CERTIFICATE, far), (now - m5, now + h(1)));
        assert_eq!(boundaries(now, Duration::from_secs(8 * 3600), CSR_BACKDATE, SHORT_CERTIFICATE, far), (now - m5, now + h(8)));
        assert_eq!(boundaries(now, Duration::from_secs(8760 * 3600), CSR_BACKDATE, SHORT_CERTIFICATE, now + h(10)), (now - m5, now + h(10)));

        // Signed: a CA that ends in ten years caps a twenty-year request.
        let ca = CertificateAuthority::new("kubernetes").unwrap();
        let (pem, _) = csr("alice", &[], &[], &[]);
        let info = cert::parse_der(&der_of(&ca.sign_csr(pem.as_bytes(), &["client auth"], Duration::from_secs(20 * 365 * 24 * 3600)).unwrap())).unwrap();
        assert_eq!(info.not_after, ca.info().not_after);
        let info = cert::parse_der(&der_of(&ca.sign_csr_at(pem.as_bytes(), &["client auth"], Duration::from_secs(3600), now).unwrap())).unwrap();
        assert_eq!((info.not_before, info.not_after), (now - m5, now + h(1)));
    }

    #[test]
    fn usages_as_kubernetes_maps_them() {
        let (keys, exts) = key_usages_from_strings(&["client auth", "signing", "server auth", "digital signature", "any"]).unwrap();
        assert_eq!(keys, [KeyUsagePurpose::DigitalSignature]);
        assert_eq!(exts, [ExtendedKeyUsagePurpose::Any, ExtendedKeyUsagePurpose::ServerAuth, ExtendedKeyUsagePurpose::ClientAuth]);
        let err = key_usages_from_strings(&["client auth", "flying", "Server Auth"]).unwrap_err();
        assert_eq!(err.to_string(), r#"unrecognized usage values: ["flying" "Server Auth"]"#);
        let ca = CertificateAuthority::new("kubernetes").unwrap();
        let (pem, _) = csr("alice", &[], &[], &[]);
        assert!(ca.sign_csr(pem.as_bytes(), &["flying"], Duration::from_secs(3600)).is_err());
    }

    /// Not a CSR, a garbled one, or one whose signature is not its key's: refused with
    /// Kubernetes' words.
    #[test]
    fn bad_requests() {
        let err = |pem: &[u8]| parse_csr(pem).unwrap_err().to_string();
        let ca = CertificateAuthority::new("kubernetes").unwrap();
        assert_eq!(err(ca.cert_pem().as_bytes()), "PEM block type must be CERTIFICATE REQUEST");
        assert_eq!(err(b"hello"), "PEM block type must be CERTIFICATE REQUEST");
        let garbled = "-----BEGIN CERTIFICATE REQUEST-----\nMIIBAAAA\n-----END CERTIFICATE REQUEST-----\n";
        assert!(err(garbled.as_bytes()).starts_with("unable to parse certificate request"), "{}", err(garbled.as_bytes()));
        // Flip a bit of the signature (the last bytes of the DER).
        let (pem, _) = csr("alice", &[], &[], &[]);
        let mut der = csr_der(pem.as_bytes()).unwrap();
        let last = der.len() - 2;
        der[last] ^= 1;
        let forged = pem_of_csr(&der);
        assert!(err(forged.as_bytes()).starts_with("unable to verify certificate request signature"), "{}", err(forged.as_bytes()));
        assert!(ca.sign_csr(forged.as_bytes(), &["client auth"], Duration::from_secs(3600)).is_err());
    }

    fn pem_of_csr(der: &[u8]) -> String {
        use base64::Engine as _;
        let b64 = base64::engine::general_purpose::STANDARD.encode(der);
        format!("-----BEGIN CERTIFICATE REQUEST-----\n{b64}\n-----END CERTIFICATE REQUEST-----\n")
    }
}
