//! Mirrors pkg/controller/certificates/certificate_controller.go and
//! certificate_controller_utils.go: the loop the CSR approver and signer share, and the
//! questions they ask of a request's conditions.
//!
//! A CertificateSigningRequest added or updated queues its name; one sync
//! ([`CertificateController::sync`]):
//! 1. Read the request from the cache; gone: nothing to do.
//! 2. It already holds a certificate: nothing to do.
//! 3. Hand (a copy of) it to the controller's [`CsrHandler`]. An error queues it again with
//!    backoff; an [`Error::Ignorable`] one (the approver's "not allowed") quietly.

use std::future::Future;

use futures::StreamExt;
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use kube::api::Api;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};

use crate::error::{Error, Result};
use crate::workqueue::WorkQueue;

const TARGET: &str = "controllers::certificates";
/// Workers syncing at once (kube-controller-manager starts the approver and signers with five).
pub const WORKERS: usize = 5;

/// The signers built into Kubernetes (`certificates.k8s.io/v1`'s well-known signer names).
pub const KUBE_APISERVER_CLIENT_SIGNER_NAME: &str = "kubernetes.io/kube-apiserver-client";
pub const KUBE_APISERVER_CLIENT_KUBELET_SIGNER_NAME: &str = "kubernetes.io/kube-apiserver-client-kubelet";
pub const KUBELET_SERVING_SIGNER_NAME: &str = "kubernetes.io/kubelet-serving";
pub const LEGACY_UNKNOWN_SIGNER_NAME: &str = "kubernetes.io/legacy-unknown";

/// What a controller built on [`CertificateController`] does with one request.
pub trait CsrHandler {
    fn handle(&self, csr: CertificateSigningRequest) -> impl Future<Output = Result<()>>;
}

/// The shared loop: a CSR watch (the controller manager's own client) into a cache, a queue of
/// names, [`WORKERS`] workers calling the handler.
pub struct CertificateController<H> {
    /// The controller's name in logs (`csrapproving`, `csrsigning-kubelet-client`, ...).
    name: &'static str,
    informers: kube::Client,
    handler: H,
}

impl<H: CsrHandler> CertificateController<H> {
    pub fn new(name: &'static str, informers: kube::Client, handler: H) -> Self {
        Self { name, informers, handler }
    }

    pub async fn run(self) -> Result<()> {
        let (csrs, csrs_w) = reflector::store::<CertificateSigningRequest>();
        let queue: WorkQueue<String> = WorkQueue::new();
        let informer = async {
            let api = Api::<CertificateSigningRequest>::all(self.informers.clone());
            let mut stream = std::pin::pin!(reflector::reflector(csrs_w, watcher(api, watcher::Config::default())).default_backoff());
            while let Some(ev) = stream.next().await {
                match ev {
                    Ok(watcher::Event::Apply(csr) | watcher::Event::InitApply(csr)) => queue.add(csr.metadata.name.unwrap_or_default()),
                    Ok(_) => {}
                    Err(e) => tracing::warn!(target: TARGET, controller = self.name, error = %e, "watch failed; retrying"),
                }
            }
        };
        let work = async {
            if csrs.wait_until_ready().await.is_err() {
                return;
            }
            let worker = || async {
                while let Some(name) = queue.get().await {
                    match self.sync(&csrs, &name).await {
                        Ok(()) => queue.forget(&name),
                        Err(Error::Ignorable(reason)) => {
                            tracing::debug!(target: TARGET, controller = self.name, csr = %name, reason, "will retry");
                            queue.add_rate_limited(name.clone());
                        }
                        Err(e) => {
                            tracing::warn!(target: TARGET, controller = self.name, csr = %name, error = %e, "sync failed; will retry");
                            queue.add_rate_limited(name.clone());
                        }
                    }
                    queue.done(&name);
                }
            };
            futures::future::join_all((0..WORKERS).map(|_| worker())).await;
        };
        tokio::select! {
            () = informer => {}
            () = work => {}
        }
        Ok(())
    }

    /// Steps 1–3 for one request.
    async fn sync(&self, csrs: &Store<CertificateSigningRequest>, name: &str) -> Result<()> {
        // Step 1.
        let Some(csr) = csrs.get(&ObjectRef::new(name)) else { return Ok(()) };
        // Step 2.
        if has_certificate(&csr) {
            return Ok(());
        }
        // Step 3.
        self.handler.handle(CertificateSigningRequest::clone(&csr)).await
    }
}

/// Whether `status.certificate` is set and not empty (kubectl shows the request as Issued).
pub fn has_certificate(csr: &CertificateSigningRequest) -> bool {
    csr.status.as_ref().and_then(|s| s.certificate.as_ref()).is_some_and(|c| !c.0.is_empty())
}

/// `GetCertApprovalCondition`: whether the request carries an Approved and a Denied condition
/// (any status: the API server accepts only True ones).
pub fn get_cert_approval_condition(csr: &CertificateSigningRequest) -> (bool, bool) {
    let conditions = csr.status.as_ref().and_then(|s| s.conditions.as_deref()).unwrap_or_default();
    (conditions.iter().any(|c| c.type_ == "Approved"), conditions.iter().any(|c| c.type_ == "Denied"))
}

/// `IsCertificateRequestApproved`: approved and not denied.
pub fn is_certificate_request_approved(csr: &CertificateSigningRequest) -> bool {
    let (approved, denied) = get_cert_approval_condition(csr);
    approved && !denied
}

/// `HasTrueCondition`: a condition of `type_` with status True.
pub fn has_true_condition(csr: &CertificateSigningRequest, type_: &str) -> bool {
    csr.status.as_ref().and_then(|s| s.conditions.as_deref()).unwrap_or_default().iter().any(|c| c.type_ == type_ && c.status == "True")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn csr(status: serde_json::Value) -> CertificateSigningRequest {
        serde_json::from_value(json!({"metadata": {"name": "r"}, "spec": {"request": "", "signerName": "x"}, "status": status})).expect("a CSR")
    }

    #[test]
    fn conditions() {
        let pending = csr(json!({}));
        assert_eq!(get_cert_approval_condition(&pending), (false, false));
        assert!(!is_certificate_request_approved(&pending) && !has_certificate(&pending));
        let approved = csr(json!({"conditions": [{"type": "Approved", "status": "True"}]}));
        assert!(is_certificate_request_approved(&approved));
        let both = csr(json!({"conditions": [{"type": "Approved", "status": "True"}, {"type": "Denied", "status": "True"}]}));
        assert!(!is_certificate_request_approved(&both));
        let failed = csr(json!({"conditions": [{"type": "Approved", "status": "True"}, {"type": "Failed", "status": "True"}]}));
        assert!(has_true_condition(&failed, "Failed") && !has_true_condition(&approved, "Failed"));
        assert!(has_certificate(&csr(json!({"certificate": "QUJD"}))));
        assert!(!has_certificate(&csr(json!({"certificate": ""}))));
    }
}
