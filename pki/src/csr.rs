//! Mirrors client-go's util/cert/csr.go (`MakeCSR`, `MakeCSRFromTemplate`) and util/keyutil's
//! `MakeEllipticPrivateKeyPEM`: a PKCS#10 certificate signing request, signed by the key it asks
//! a certificate for — what a kubelet sends in a `CertificateSigningRequest` when it bootstraps.

use rcgen::{CertificateParams, DistinguishedName, DnType, KeyPair, PKCS_ECDSA_P256_SHA256};

use crate::error::{Error, Result};
use crate::keyutil::private_key_from_pem;

/// `MakeEllipticPrivateKeyPEM`: a new ECDSA P-256 private key, as PEM (PKCS#8; client-go writes
/// SEC1, see the crate's caveats).
pub fn make_private_key_pem() -> Result<String> {
    let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).map_err(|source| Error::Sign { what: "a private key".into(), source })?;
    Ok(key.serialize_pem())
}

/// `MakeCSR`: a PEM `CERTIFICATE REQUEST` for the subject `CN=<common_name>, O=<organizations>`,
/// with the public key of `key_pem` and signed by it (so the signer knows the requester holds
/// the key). No alternative names: a client certificate's request names none.
///
/// At most one organization (rcgen's `DistinguishedName` holds one value per attribute type).
pub fn make_csr(key_pem: &str, common_name: &str, organizations: &[&str]) -> Result<String> {
    let config_err = |reason: &str| Error::Config { common_name: common_name.to_string(), reason: reason.to_string() };
    if common_name.is_empty() {
        return Err(config_err("a certificate signing request needs a common name"));
    }
    if organizations.len() > 1 {
        return Err(config_err("at most one organization can be requested"));
    }
    let key = private_key_from_pem(key_pem, "the key of a certificate signing request")?;
    let mut params = CertificateParams::default();
    params.distinguished_name = DistinguishedName::new();
    // Go's pkix.Name puts O before CN, as the certificates this crate signs do.
    if let Some(o) = organizations.first() {
        params.distinguished_name.push(DnType::OrganizationName, *o);
    }
    params.distinguished_name.push(DnType::CommonName, common_name);
    let sign_err = |source| Error::Sign { what: format!("the certificate signing request of {common_name:?}"), source };
    let csr = params.serialize_request(&key).map_err(sign_err)?;
    csr.pem().map_err(sign_err)
}

#[cfg(test)]
mod tests {
    use rustls_pki_types::CertificateSigningRequestDer;
    use rustls_pki_types::pem::PemObject as _;
    use x509_parser::certification_request::X509CertificationRequest;
    use x509_parser::prelude::FromDer as _;

    use super::*;

    #[test]
    fn a_csr_parses_back_with_its_subject_and_a_valid_self_signature() {
        let key_pem = make_private_key_pem().expect("a key");
        let pem = make_csr(&key_pem, "system:node:n1", &["system:nodes"]).expect("a CSR");
        assert!(pem.starts_with("-----BEGIN CERTIFICATE REQUEST-----"), "{pem}");
        let der = CertificateSigningRequestDer::from_pem_slice(pem.as_bytes()).expect("PEM");
        let (rest, csr) = X509CertificationRequest::from_der(der.as_ref()).expect("a PKCS#10 request");
        assert!(rest.is_empty());
        csr.verify_signature().expect("signed by its own key");
        let subject = &csr.certification_request_info.subject;
        let cn: Vec<_> = subject.iter_common_name().map(|a| a.as_str().expect("a string")).collect();
        let o: Vec<_> = subject.iter_organization().map(|a| a.as_str().expect("a string")).collect();
        assert_eq!((cn.as_slice(), o.as_slice()), (&["system:node:n1"][..], &["system:nodes"][..]));
        // The public key requested is the key's.
        let key = KeyPair::from_pem(&key_pem).expect("the key");
        assert_eq!(csr.certification_request_info.subject_pki.subject_public_key.data.as_ref(), rcgen::PublicKeyData::der_bytes(&key));
        // Tampering breaks the signature.
        let mut forged = der.as_ref().to_vec();
        let at = forged.windows(6).position(|w| w == b"node:n").expect("the name in the DER");
        forged[at + 5] = b'm';
        let (_, csr) = X509CertificationRequest::from_der(&forged).expect("still parses");
        assert!(csr.verify_signature().is_err());
    }

    #[test]
    fn what_cannot_be_requested() {
        let key_pem = make_private_key_pem().expect("a key");
        assert!(matches!(make_csr(&key_pem, "", &[]), Err(Error::Config { .. })));
        assert!(matches!(make_csr(&key_pem, "u", &["a", "b"]), Err(Error::Config { .. })));
        assert!(matches!(make_csr("not a key", "u", &[]), Err(Error::Key { .. })));
        let pem = make_csr(&key_pem, "jane", &[]).expect("no organization is fine");
        let der = CertificateSigningRequestDer::from_pem_slice(pem.as_bytes()).expect("PEM");
        let (_, csr) = X509CertificationRequest::from_der(der.as_ref()).expect("parses");
        assert_eq!(csr.certification_request_info.subject.iter_organization().count(), 0);
    }
}
