//! Mirrors pkg/controller/certificates/signer/signer.go: `csrsigning`, which issues the
//! certificates of approved requests for Kubernetes' built-in signers with the cluster's CA
//! (`--cluster-signing-cert-file`, `--cluster-signing-key-file`).
//!
//! One request ([`Signer::handle`], through the shared [`CertificateController`]):
//! 1. Not approved (or denied too), or Failed: nothing to do.
//! 2. A signer name this controller does not sign for: nothing to do.
//! 3. Parse the request (its self-signature checked).
//! 4. Check it against its signer's rules ([`validate_for_signer`]); one it breaks gets the
//!    Failed condition (reason `SignerValidationFailure`, the rule's message) through `/status`,
//!    and is never signed.
//! 5. Sign it ([`pki::CertificateAuthority::sign_csr`]) for its usages and [`duration`], and
//!    write the PEM certificate to `status.certificate` through `/status`.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::certificates::v1::{CertificateSigningRequest, CertificateSigningRequestCondition, CertificateSigningRequestStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};
use pki::{CertificateAuthority, CertificateRequest};

use crate::certificates::certificate_controller::{
    CertificateController, CsrHandler, KUBE_APISERVER_CLIENT_KUBELET_SIGNER_NAME, KUBE_APISERVER_CLIENT_SIGNER_NAME, KUBELET_SERVING_SIGNER_NAME,
    LEGACY_UNKNOWN_SIGNER_NAME, has_true_condition, is_certificate_request_approved,
};
use crate::certificates::helpers::{usages_to_set, valid_api_server_client_usages, validate_kubelet_client_csr, validate_kubelet_serving_csr};
use crate::error::{Error, Result};

/// The controller's name (kube-controller-manager's `csrsigning`).
pub const NAME: &str = "csrsigning";
const TARGET: &str = "controllers::csrsigning";
/// `--cluster-signing-duration`'s default: a year.
pub const DEFAULT_CLUSTER_SIGNING_DURATION: Duration = Duration::from_secs(8760 * 3600);
/// The shortest certificate issued whatever `spec.expirationSeconds` asks: twice the backdate.
pub const MIN_DURATION: Duration = Duration::from_secs(10 * 60);

/// The signer names this controller signs for.
pub const SIGNER_NAMES: [&str; 4] =
    [KUBE_APISERVER_CLIENT_KUBELET_SIGNER_NAME, KUBELET_SERVING_SIGNER_NAME, KUBE_APISERVER_CLIENT_SIGNER_NAME, LEGACY_UNKNOWN_SIGNER_NAME];

/// Step 4, `getCSRVerificationFuncForSignerName` and its checks: `None` for a signer name not
/// signed here; otherwise whether the request may be signed, or why not.
/// kubelab adds one rule for all: one subject organization at most ([`pki::ONE_ORGANIZATION`]).
pub fn validate_for_signer(signer_name: &str, req: &CertificateRequest, usages: &[String]) -> Option<Result<(), String>> {
    let checked = match signer_name {
        KUBELET_SERVING_SIGNER_NAME => validate_kubelet_serving_csr(req, &usages_to_set(usages)),
        KUBE_APISERVER_CLIENT_KUBELET_SIGNER_NAME => validate_kubelet_client_csr(req, &usages_to_set(usages)),
        KUBE_APISERVER_CLIENT_SIGNER_NAME => valid_api_server_client_usages(usages),
        // No restrictions, for compatibility with certificates.k8s.io/v1beta1.
        LEGACY_UNKNOWN_SIGNER_NAME => Ok(()),
        _ => return None,
    };
    if checked.is_ok() && req.subject.organizations.len() > 1 {
        return Some(Err(pki::ONE_ORGANIZATION.to_string()));
    }
    Some(checked)
}

/// The signer's `duration`: `--cluster-signing-duration` unless `spec.expirationSeconds` asks
/// for less, and never less than ten minutes.
pub fn duration(cert_ttl: Duration, expiration_seconds: Option<i32>) -> Duration {
    let Some(seconds) = expiration_seconds else { return cert_ttl };
    let requested = Duration::from_secs(seconds.max(0) as u64);
    if requested > cert_ttl {
        cert_ttl
    } else if requested < MIN_DURATION {
        MIN_DURATION
    } else {
        requested
    }
}

/// Step 4's Failed condition.
pub fn append_failed_condition(csr: &mut CertificateSigningRequest, message: String, now: Timestamp) {
    let status = csr.status.get_or_insert_with(CertificateSigningRequestStatus::default);
    status.conditions.get_or_insert_with(Vec::new).push(CertificateSigningRequestCondition {
        type_: "Failed".into(),
        status: "True".into(),
        reason: Some("SignerValidationFailure".into()),
        message: Some(message),
        last_update_time: Some(Time(now)),
        ..Default::default()
    });
}

/// The signer: the CA, the longest lifetime it gives, and the controller's own client.
pub struct Signer {
    client: kube::Client,
    ca: Arc<CertificateAuthority>,
    cert_ttl: Duration,
}

impl Signer {
    /// Loads the CA from `--cluster-signing-cert-file` and `--cluster-signing-key-file` (an
    /// error names the file), as kube-controller-manager does before starting the controller.
    pub fn load_ca(cert_file: &Path, key_file: &Path) -> Result<CertificateAuthority> {
        CertificateAuthority::load_files(cert_file, key_file).map_err(|source| Error::Pki { what: "--cluster-signing-cert-file/--cluster-signing-key-file".into(), source })
    }

    /// The signing controller: the shared loop watching with `informers`, acting with `client`.
    pub fn controller(informers: kube::Client, client: kube::Client, ca: Arc<CertificateAuthority>, cert_ttl: Duration) -> CertificateController<Signer> {
        CertificateController::new(NAME, informers, Signer { client, ca, cert_ttl })
    }
}

impl CsrHandler for Signer {
    /// Steps 1–5.
    async fn handle(&self, mut csr: CertificateSigningRequest) -> Result<()> {
        let name = csr.metadata.name.clone().unwrap_or_default();
        // Step 1.
        if !is_certificate_request_approved(&csr) || has_true_condition(&csr, "Failed") {
            return Ok(());
        }
        // Step 2.
        if !SIGNER_NAMES.contains(&csr.spec.signer_name.as_str()) {
            return Ok(());
        }
        // Step 3.
        let req = pki::parse_csr(&csr.spec.request.0).map_err(|source| Error::Pki { what: format!("unable to parse csr {name:?}"), source })?;
        let usages = csr.spec.usages.clone().unwrap_or_default();
        let api: Api<CertificateSigningRequest> = Api::all(self.client.clone());
        // Step 4.
        match validate_for_signer(&csr.spec.signer_name, &req, &usages) {
            None => return Ok(()),
            Some(Err(message)) => {
                tracing::info!(target: TARGET, csr = %name, signer = csr.spec.signer_name, reason = message, "refused");
                append_failed_condition(&mut csr, message, Timestamp::now());
                api.replace_status(&name, &PostParams::default(), &csr)
                    .await
                    .map_err(|e| Error::Message(format!("error adding failure condition for csr: {e}")))?;
                return Ok(());
            }
            Some(Ok(())) => {}
        }
        // Step 5.
        let ttl = duration(self.cert_ttl, csr.spec.expiration_seconds);
        let cert = self.ca.sign_csr(&csr.spec.request.0, &usages, ttl).map_err(|source| Error::Pki { what: "error auto signing csr".into(), source })?;
        csr.status.get_or_insert_with(CertificateSigningRequestStatus::default).certificate = Some(ByteString(cert.into_bytes()));
        api.replace_status(&name, &PostParams::default(), &csr).await.map_err(|e| Error::Message(format!("error updating signature for csr: {e}")))?;
        tracing::info!(target: TARGET, csr = %name, signer = csr.spec.signer_name, subject = req.subject.common_name, ttl_seconds = ttl.as_secs(), "signed");
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pki::Subject;
    use serde_json::json;

    fn usages(u: &[&str]) -> Vec<String> {
        u.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn each_signer_has_its_rules() {
        let node = CertificateRequest { subject: Subject { common_name: "system:node:n1".into(), organizations: vec!["system:nodes".into()] }, ..Default::default() };
        let alice = CertificateRequest { subject: Subject { common_name: "alice".into(), organizations: vec!["dev".into()] }, ..Default::default() };
        let client = usages(&["digital signature", "client auth"]);
        let serving = usages(&["digital signature", "server auth"]);
        assert_eq!(validate_for_signer(KUBE_APISERVER_CLIENT_KUBELET_SIGNER_NAME, &node, &client), Some(Ok(())));
        assert_eq!(validate_for_signer(KUBE_APISERVER_CLIENT_KUBELET_SIGNER_NAME, &alice, &client), Some(Err("subject organization is not system:nodes".into())));
        // A serving certificate needs a name to serve.
        assert_eq!(validate_for_signer(KUBELET_SERVING_SIGNER_NAME, &node, &serving), Some(Err("DNS or IP subjectAltName is required".into())));
        let mut served = node.clone();
        served.dns_names = vec!["n1".into()];
        assert_eq!(validate_for_signer(KUBELET_SERVING_SIGNER_NAME, &served, &serving), Some(Ok(())));
        assert_eq!(validate_for_signer(KUBELET_SERVING_SIGNER_NAME, &served, &client), Some(Err("usages did not match [digital signature key encipherment server auth]".into())));
        // Any subject for a client of the API server, but client usages only.
        assert_eq!(validate_for_signer(KUBE_APISERVER_CLIENT_SIGNER_NAME, &alice, &client), Some(Ok(())));
        assert_eq!(validate_for_signer(KUBE_APISERVER_CLIENT_SIGNER_NAME, &alice, &serving), Some(Err("invalid usage for client certificate: server auth".into())));
        assert_eq!(validate_for_signer(LEGACY_UNKNOWN_SIGNER_NAME, &alice, &serving), Some(Ok(())));
        let mut two_groups = alice.clone();
        two_groups.subject.organizations.push("ops".into());
        assert_eq!(validate_for_signer(KUBE_APISERVER_CLIENT_SIGNER_NAME, &two_groups, &client), Some(Err(pki::ONE_ORGANIZATION.into())));
        assert_eq!(validate_for_signer("example.com/mine", &alice, &client), None);
    }

    #[test]
    fn the_duration_asked_is_honoured_within_bounds() {
        let year = DEFAULT_CLUSTER_SIGNING_DURATION;
        assert_eq!(duration(year, None), year);
        assert_eq!(duration(year, Some(3600)), Duration::from_secs(3600));
        assert_eq!(duration(year, Some(60)), MIN_DURATION);
        assert_eq!(duration(year, Some(i32::MAX)), year);
        assert_eq!(duration(Duration::from_secs(7200), Some(86400)), Duration::from_secs(7200));
    }

    #[test]
    fn a_refused_request_fails_with_the_reason() {
        let mut csr: CertificateSigningRequest =
            serde_json::from_value(json!({"metadata": {"name": "r"}, "spec": {"request": "", "signerName": KUBELET_SERVING_SIGNER_NAME},
                                          "status": {"conditions": [{"type": "Approved", "status": "True"}]}}))
            .expect("a CSR");
        let now = Timestamp::from_second(1_800_000_000).expect("t");
        append_failed_condition(&mut csr, "DNS or IP subjectAltName is required".into(), now);
        assert_eq!(
            serde_json::to_value(&csr.status).expect("serializes")["conditions"][1],
            json!({"type": "Failed", "status": "True", "reason": "SignerValidationFailure",
                   "message": "DNS or IP subjectAltName is required", "lastUpdateTime": "2027-01-15T08:00:00Z"})
        );
        assert!(has_true_condition(&csr, "Failed"));
    }
}
