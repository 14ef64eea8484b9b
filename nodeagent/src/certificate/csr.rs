//! Mirrors client-go's util/certificate/csr/csr.go: `RequestCertificate` creates a
//! `certificates.k8s.io/v1` CertificateSigningRequest, `WaitForCertificate` watches it until a
//! signer has written `status.certificate` — or a Denied or Failed condition, its deletion or a
//! timeout ends the wait with an error.

use std::time::Duration;

use futures::StreamExt as _;
use k8s_openapi::ByteString;
use k8s_openapi::api::certificates::v1::{CertificateSigningRequest, CertificateSigningRequestSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, PostParams};
use kube::runtime::{WatchStreamExt as _, watcher};

use crate::error::{Error, Result};

/// `certificatesv1.KubeAPIServerClientKubeletSignerName`: client certificates for kubelets, which
/// the controller manager's approver approves for `system:bootstrappers` and the nodes themselves.
pub(crate) const KUBE_APISERVER_CLIENT_KUBELET_SIGNER_NAME: &str = "kubernetes.io/kube-apiserver-client-kubelet";
/// `certificatesv1.UsageDigitalSignature` and `UsageClientAuth` (`UsageKeyEncipherment`, "key
/// encipherment", is asked for RSA keys only; kubelab's are ECDSA).
pub(crate) const USAGE_DIGITAL_SIGNATURE: &str = "digital signature";
pub(crate) const USAGE_CLIENT_AUTH: &str = "client auth";

/// `RequestCertificate` with no name: creates the request with `generateName` and returns its
/// name and UID (the UID tells it from a later request of the same name).
pub(crate) async fn request_certificate(
    client: kube::Client,
    csr_pem: &str,
    generate_name: &str,
    signer_name: &str,
    usages: &[&str],
) -> Result<(String, String)> {
    let csr = CertificateSigningRequest {
        metadata: ObjectMeta { generate_name: Some(generate_name.to_string()), ..Default::default() },
        spec: CertificateSigningRequestSpec {
            request: ByteString(csr_pem.as_bytes().to_vec()),
            signer_name: signer_name.to_string(),
            usages: Some(usages.iter().map(|u| u.to_string()).collect()),
            ..Default::default()
        },
        status: None,
    };
    let created = Api::<CertificateSigningRequest>::all(client).create(&PostParams::default(), &csr).await?;
    let name = created.metadata.name.ok_or_else(|| Error::Invalid("the created CertificateSigningRequest has no name".into()))?;
    Ok((name, created.metadata.uid.unwrap_or_default()))
}

/// `WaitForCertificate`: the PEM certificate the signer issued for the request `name` of `uid`,
/// watched for (a list, then a watch, restarted as needed) until `timeout`.
pub(crate) async fn wait_for_certificate(client: kube::Client, name: &str, uid: &str, timeout: Duration) -> Result<Vec<u8>> {
    let api = Api::<CertificateSigningRequest>::all(client);
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let mut events = watcher(api, config).default_backoff().boxed();
    let wait = async {
        while let Some(event) = events.next().await {
            let csr = match event {
                Ok(watcher::Event::Apply(csr) | watcher::Event::InitApply(csr)) => csr,
                Ok(watcher::Event::Delete(_)) => return Err(format!("csr {name:?} was deleted")),
                Ok(watcher::Event::Init | watcher::Event::InitDone) => continue,
                Err(e) => {
                    tracing::warn!(target: "kubelet::certificate", csr = name, error = %e, "watching the certificate signing request; retrying");
                    continue;
                }
            };
            if let Some(cert) = issued_certificate(&csr, uid)? {
                tracing::info!(target: "kubelet::certificate", csr = name, "certificate signing request is issued");
                return Ok(cert);
            }
        }
        Err(format!("the watch of csr {name:?} ended"))
    };
    match tokio::time::timeout(timeout, wait).await {
        Ok(Ok(cert)) => Ok(cert),
        Ok(Err(e)) => Err(Error::CertificateBootstrap(e)),
        Err(_) => Err(Error::CertificateBootstrap(format!("timed out waiting for the condition on certificate signing request {name:?}"))),
    }
}

/// One look at the request (the condition function of `WaitForCertificate`): its certificate once
/// approved and issued, None while waiting, an error once denied or failed (or replaced by
/// another request of the same name).
pub(crate) fn issued_certificate(csr: &CertificateSigningRequest, uid: &str) -> Result<Option<Vec<u8>>, String> {
    let name = csr.metadata.name.as_deref().unwrap_or_default();
    if csr.metadata.uid.as_deref().unwrap_or_default() != uid {
        return Err(format!("csr {name:?} changed UIDs"));
    }
    let Some(status) = &csr.status else { return Ok(None) };
    let mut approved = false;
    for c in status.conditions.iter().flatten() {
        let (reason, message) = (c.reason.as_deref().unwrap_or_default(), c.message.as_deref().unwrap_or_default());
        match c.type_.as_str() {
            "Denied" => return Err(format!("certificate signing request is denied, reason: {reason}, message: {message}")),
            "Failed" => return Err(format!("certificate signing request failed, reason: {reason}, message: {message}")),
            "Approved" => approved = true,
            _ => {}
        }
    }
    match &status.certificate {
        Some(cert) if approved && !cert.0.is_empty() => Ok(Some(cert.0.clone())),
        _ => {
            if approved {
                tracing::debug!(target: "kubelet::certificate", csr = name, "certificate signing request is approved, waiting to be issued");
            }
            Ok(None)
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::certificates::v1::{CertificateSigningRequestCondition, CertificateSigningRequestStatus};

    use super::*;

    fn csr(uid: &str, conditions: &[(&str, &str)], certificate: Option<&str>) -> CertificateSigningRequest {
        let conditions = conditions
            .iter()
            .map(|(t, reason)| CertificateSigningRequestCondition {
                type_: t.to_string(),
                status: "True".into(),
                reason: Some(reason.to_string()),
                message: Some(format!("{reason} by a test")),
                ..Default::default()
            })
            .collect();
        CertificateSigningRequest {
            metadata: ObjectMeta { name: Some("node-csr-x".into()), uid: Some(uid.into()), ..Default::default() },
            spec: CertificateSigningRequestSpec::default(),
            status: Some(CertificateSigningRequestStatus { conditions: Some(conditions), certificate: certificate.map(|c| ByteString(c.as_bytes().to_vec())) }),
        }
    }

    #[test]
    fn the_wait_ends_when_issued_denied_or_failed() {
        assert_eq!(issued_certificate(&csr("u1", &[], None), "u1"), Ok(None), "pending");
        assert_eq!(issued_certificate(&csr("u1", &[("Approved", "AutoApproved")], None), "u1"), Ok(None), "approved, not yet signed");
        assert_eq!(issued_certificate(&csr("u1", &[("Approved", "AutoApproved")], Some("PEM")), "u1"), Ok(Some(b"PEM".to_vec())));
        assert_eq!(
            issued_certificate(&csr("u1", &[("Denied", "NotMine")], None), "u1"),
            Err("certificate signing request is denied, reason: NotMine, message: NotMine by a test".into())
        );
        assert_eq!(
            issued_certificate(&csr("u1", &[("Approved", "AutoApproved"), ("Failed", "SignerError")], None), "u1"),
            Err("certificate signing request failed, reason: SignerError, message: SignerError by a test".into())
        );
        assert_eq!(issued_certificate(&csr("u2", &[], None), "u1"), Err("csr \"node-csr-x\" changed UIDs".into()));
    }
}
