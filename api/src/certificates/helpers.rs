//! Mirrors pkg/apis/certificates/helpers.go: `ParseCSR` — the PKCS#10 request a
//! CertificateSigningRequest carries in `spec.request`, read from its first PEM block — and the
//! names of the signers and conditions every component shares.

use base64::Engine;
use serde_json::Value;
use x509_parser::pem::Pem;
use x509_parser::prelude::FromDer;
use x509_parser::x509::X509Name;

/// The signer of client certificates for the API server (`KubeAPIServerClientSignerName`).
pub const KUBE_API_SERVER_CLIENT_SIGNER_NAME: &str = "kubernetes.io/kube-apiserver-client";
/// The signer of kubelets' client certificates (`KubeAPIServerClientKubeletSignerName`).
pub const KUBE_API_SERVER_CLIENT_KUBELET_SIGNER_NAME: &str = "kubernetes.io/kube-apiserver-client-kubelet";
/// The signer of kubelets' serving certificates (`KubeletServingSignerName`).
pub const KUBELET_SERVING_SIGNER_NAME: &str = "kubernetes.io/kubelet-serving";
/// The v1beta1 signer of old requests, refused by v1 (`LegacyUnknownSignerName`).
pub const LEGACY_UNKNOWN_SIGNER_NAME: &str = "kubernetes.io/legacy-unknown";

/// The condition types (`RequestConditionType`).
pub const CERTIFICATE_APPROVED: &str = "Approved";
pub const CERTIFICATE_DENIED: &str = "Denied";
pub const CERTIFICATE_FAILED: &str = "Failed";

/// The PEM block type of a request (`CertificateRequestBlockType`) and of a certificate.
pub const CERTIFICATE_REQUEST_BLOCK_TYPE: &str = "CERTIFICATE REQUEST";
pub const CERTIFICATE_BLOCK_TYPE: &str = "CERTIFICATE";

/// What the server reads of a parsed request: its subject.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ParsedCsr {
    pub common_name: String,
    /// `O=`: the groups a client certificate made from it would carry.
    pub organizations: Vec<String>,
}

/// ParseCSR (and, as validation's `validateCSR` goes on to, `CheckSignature`): the first PEM
/// block of `pem` must be a CERTIFICATE REQUEST whose DER parses and whose signature is made
/// by the key it holds. The error is the one Kubernetes shows under `spec.request`.
pub fn parse_csr(pem: &[u8]) -> Result<ParsedCsr, String> {
    let block = match Pem::iter_from_buffer(pem).next() {
        Some(Ok(block)) if block.label == CERTIFICATE_REQUEST_BLOCK_TYPE => block,
        _ => return Err(format!("PEM block type must be {CERTIFICATE_REQUEST_BLOCK_TYPE}")),
    };
    let (_, csr) = x509_parser::certification_request::X509CertificationRequest::from_der(&block.contents)
        .map_err(|e| format!("x509: malformed certificate request: {e}"))?;
    csr.verify_signature().map_err(|e| format!("x509: signature verification failure: {e}"))?;
    let subject = &csr.certification_request_info.subject;
    let common_name = subject.iter_common_name().next().and_then(|a| a.as_str().ok()).unwrap_or("").to_string();
    Ok(ParsedCsr { common_name, organizations: organizations(subject) })
}

fn organizations(name: &X509Name<'_>) -> Vec<String> {
    name.iter_organization().filter_map(|a| a.as_str().ok()).map(String::from).collect()
}

/// The bytes of a `[]byte` field as JSON holds it (base64); none when absent or not base64 (the
/// typed decoding refuses the latter before validation runs).
pub fn bytes_field(obj: &Value, pointer: &str) -> Vec<u8> {
    obj.pointer(pointer).and_then(Value::as_str).and_then(|s| base64::engine::general_purpose::STANDARD.decode(s).ok()).unwrap_or_default()
}

/// The request's conditions of type `t` (`findConditions`).
pub fn find_conditions<'a>(csr: &'a Value, t: &str) -> Vec<&'a Value> {
    conditions(csr).iter().filter(|c| c.get("type").and_then(Value::as_str).unwrap_or("") == t).collect()
}

/// `status.conditions`, none when unset.
pub fn conditions(csr: &Value) -> &[Value] {
    csr.pointer("/status/conditions").and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[])
}

/// Whether the request has a condition of type `t` (`IsCertificateRequestApproved` and kin).
pub fn has_condition(csr: &Value, t: &str) -> bool {
    !find_conditions(csr, t).is_empty()
}
