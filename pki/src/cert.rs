//! Mirrors client-go's util/cert (cert.go, pem.go): what a certificate is asked to be
//! ([`Config`]) and what one is ([`CertInfo`]), read from PEM files or DER bytes.

use std::fmt;
use std::net::IpAddr;
use std::path::Path;

use chrono::{DateTime, Utc};
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;
use x509_parser::certificate::{X509Certificate, X509CertificateParser};
use x509_parser::error::X509Error;
use x509_parser::extensions::GeneralName;
use x509_parser::nom::Parser as _;
use x509_parser::x509::X509Name;

use crate::error::{Error, Result, x509_error};

/// What a certificate may be used for: its extended key usages (Go's `x509.ExtKeyUsage`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Usage {
    /// A TLS server's certificate (`serverAuth`).
    ServerAuth,
    /// A TLS client's certificate (`clientAuth`): what the API server authenticates.
    ClientAuth,
}

impl fmt::Display for Usage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Usage::ServerAuth => "server auth",
            Usage::ClientAuth => "client auth",
        })
    }
}

/// The subject alternative names a certificate is valid for: what a TLS client checks the host
/// it dialled against (the common name is not looked at).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AltNames {
    pub dns_names: Vec<String>,
    pub ips: Vec<IpAddr>,
}

impl AltNames {
    /// Without repeats: DNS names sorted, addresses in the order given (kubeadm's
    /// `RemoveDuplicateAltNames`).
    pub fn dedup(&self) -> AltNames {
        let mut dns_names = self.dns_names.clone();
        dns_names.sort();
        dns_names.dedup();
        let mut ips: Vec<IpAddr> = Vec::with_capacity(self.ips.len());
        for ip in &self.ips {
            if !ips.contains(ip) {
                ips.push(*ip);
            }
        }
        AltNames { dns_names, ips }
    }
}

/// What a certificate is asked to be (client-go's `cert.Config`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Config {
    /// The subject's CN: the user name, to the API server.
    pub common_name: String,
    /// The subject's O attributes: the user's groups, to the API server. At most one (see the
    /// crate's caveats).
    pub organizations: Vec<String>,
    pub alt_names: AltNames,
    /// At least one.
    pub usages: Vec<Usage>,
}

/// A certificate's subject as the API server reads it: the common name is the user's name, the
/// organizations its groups.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Subject {
    /// Empty when the subject has no CN.
    pub common_name: String,
    pub organizations: Vec<String>,
}

/// What a certificate is: the fields kubelab looks at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CertInfo {
    pub subject: Subject,
    pub issuer_common_name: String,
    pub not_before: DateTime<Utc>,
    pub not_after: DateTime<Utc>,
    /// basicConstraints CA:TRUE.
    pub is_ca: bool,
    pub alt_names: AltNames,
    /// The extended key usages kubelab knows; none when the certificate has no such extension.
    pub usages: Vec<Usage>,
}

/// The subject of a DER certificate, and nothing else: what the API server calls on each TLS
/// client certificate for the user (CN) and groups (O), after the handshake has verified its
/// chain. Extensions are not parsed, only skipped over.
pub fn subject_from_der(der: &[u8]) -> Result<Subject> {
    let cert = parse_shallow(der, "client certificate")?;
    subject_of(cert.subject()).map_err(|source| Error::Certificate { what: "client certificate".into(), source })
}

/// The fields of a DER certificate.
pub fn parse_der(der: &[u8]) -> Result<CertInfo> {
    info_of(der, "certificate")
}

/// The first certificate in a PEM file (kubeadm's `TryLoadCertFromDisk`: a chain's leaf
/// comes first).
pub fn info_from_file(path: &Path) -> Result<CertInfo> {
    let certs = certs_from_file(path)?;
    info_of(&certs[0], &path.display().to_string())
}

/// Every certificate in a PEM file, at least one (client-go's `CertsFromFile`).
pub fn certs_from_file(path: &Path) -> Result<Vec<CertificateDer<'static>>> {
    let pem = std::fs::read(path).map_err(Error::io("reading", path))?;
    parse_certs_pem(&pem, &path.display().to_string())
}

/// Every CERTIFICATE block of PEM text, at least one (client-go's `ParseCertsPEM`); `what` names
/// where the text came from, for errors.
pub fn parse_certs_pem(pem: &[u8], what: &str) -> Result<Vec<CertificateDer<'static>>> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|source| Error::Pem { what: what.to_string(), source })?;
    if certs.is_empty() {
        return Err(Error::NoPemBlock { what: what.to_string(), block: "CERTIFICATE" });
    }
    Ok(certs)
}

pub(crate) fn info_of(der: &[u8], what: &str) -> Result<CertInfo> {
    let cert = parse_full(der, what)?;
    cert_info(&cert).map_err(|source| Error::Certificate { what: what.to_string(), source })
}

/// Parses every extension: what [`CertInfo`] reads, and what signature checks need.
pub(crate) fn parse_full<'a>(der: &'a [u8], what: &str) -> Result<X509Certificate<'a>> {
    match x509_parser::parse_x509_certificate(der) {
        Ok((_, cert)) => Ok(cert),
        Err(e) => Err(Error::Certificate { what: what.to_string(), source: x509_error(e) }),
    }
}

fn parse_shallow<'a>(der: &'a [u8], what: &str) -> Result<X509Certificate<'a>> {
    match X509CertificateParser::new().with_deep_parse_extensions(false).parse(der) {
        Ok((_, cert)) => Ok(cert),
        Err(e) => Err(Error::Certificate { what: what.to_string(), source: x509_error(e) }),
    }
}

fn subject_of(name: &X509Name<'_>) -> Result<Subject, X509Error> {
    let common_name = match name.iter_common_name().next() {
        Some(cn) => cn.as_str()?.to_string(),
        None => String::new(),
    };
    let organizations = name.iter_organization().map(|o| o.as_str().map(String::from)).collect::<Result<_, _>>()?;
    Ok(Subject { common_name, organizations })
}

pub(crate) fn cert_info(cert: &X509Certificate<'_>) -> Result<CertInfo, X509Error> {
    let time = |t: x509_parser::time::ASN1Time| DateTime::from_timestamp(t.timestamp(), 0).ok_or(X509Error::InvalidDate);
    let mut alt_names = AltNames::default();
    if let Some(san) = cert.subject_alternative_name()? {
        for name in &san.value.general_names {
            match name {
                GeneralName::DNSName(dns) => alt_names.dns_names.push(dns.to_string()),
                GeneralName::IPAddress(bytes) => match *bytes {
                    [a, b, c, d] => alt_names.ips.push(IpAddr::from([*a, *b, *c, *d])),
                    bytes => {
                        let v6: [u8; 16] = bytes.try_into().map_err(|_| X509Error::InvalidExtensions)?;
                        alt_names.ips.push(IpAddr::from(v6));
                    }
                },
                _ => {}
            }
        }
    }
    let mut usages = Vec::new();
    if let Some(eku) = cert.extended_key_usage()? {
        if eku.value.server_auth {
            usages.push(Usage::ServerAuth);
        }
        if eku.value.client_auth {
            usages.push(Usage::ClientAuth);
        }
    }
    let issuer = subject_of(cert.issuer())?;
    Ok(CertInfo {
        subject: subject_of(cert.subject())?,
        issuer_common_name: issuer.common_name,
        not_before: time(cert.validity().not_before)?,
        not_after: time(cert.validity().not_after)?,
        is_ca: cert.is_ca(),
        alt_names,
        usages,
    })
}

#[cfg(test)]
mod tests {
    use rcgen::{CertificateParams, DistinguishedName, DnType, KeyPair};

    use super::*;

    /// A certificate made elsewhere with two organizations (a user in two groups) gives both,
    /// through the cheap path and the full one; one without a CN gives an empty name.
    #[test]
    fn subjects_with_several_organizations() {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::default();
        params.distinguished_name = DistinguishedName::new();
        params.distinguished_name.push(DnType::OrganizationName, "devs");
        // rcgen keeps one value per attribute type; the same OID under another key is a second O.
        params.distinguished_name.push(DnType::CustomDnType(vec![2, 5, 4, 10]), "ops");
        params.distinguished_name.push(DnType::CommonName, "jane");
        let der = params.self_signed(&key).unwrap().der().to_vec();
        let want = Subject { common_name: "jane".into(), organizations: vec!["devs".into(), "ops".into()] };
        assert_eq!(subject_from_der(&der).unwrap(), want);
        assert_eq!(parse_der(&der).unwrap().subject, want);

        params.distinguished_name = DistinguishedName::new();
        params.distinguished_name.push(DnType::OrganizationName, "devs");
        let der = params.self_signed(&key).unwrap().der().to_vec();
        assert_eq!(subject_from_der(&der).unwrap().common_name, "");
    }

    /// Bytes that are not a certificate, and PEM without one, are errors that say what was read.
    #[test]
    fn garbage_is_an_error() {
        assert!(matches!(subject_from_der(b"not DER"), Err(Error::Certificate { .. })));
        let e = parse_certs_pem(b"-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n", "sa.pub").unwrap_err();
        assert_eq!(e.to_string(), "sa.pub: no CERTIFICATE in it");
        let e = certs_from_file(Path::new("/nonexistent/ca.crt")).unwrap_err();
        assert!(e.is_not_found() && e.to_string().starts_with("reading /nonexistent/ca.crt: "), "{e}");
    }
}
