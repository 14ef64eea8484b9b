//! Mirrors pkg/controller/certificates/approver/sarapprove.go: `csrapproving`, which approves a
//! kubelet's request for a client certificate when its requester may ask for one — the step of
//! TLS bootstrap between the kubelet's CSR (made with a bootstrap token) and the signer.
//!
//! One request ([`SarApprover::handle`], through the shared [`CertificateController`]):
//! 1. Issued, approved or denied already: nothing to do.
//! 2. Parse the request (its self-signature checked).
//! 3. For each recognizer, in order ([`RECOGNIZERS`]): a request for the signer
//!    `kubernetes.io/kube-apiserver-client-kubelet` that is a node client certificate
//!    ([`is_node_client_cert`]) — and for `selfnodeclient`, asked by the node it names
//!    ([`is_self_node_client_cert`]) — is put to a SubjectAccessReview as its requester
//!    (`spec.username`, `groups`, `extra`, `uid`): may it `create`
//!    `certificatesigningrequests/<subresource>` in `certificates.k8s.io`?
//! 4. The first allowed: append the Approved condition (reason `AutoApproved`) and write it
//!    through the `/approval` subresource.
//! 5. Recognized but allowed by none: an ignorable error, so that the request is tried again
//!    later (a role may be bound meanwhile); not recognized: left for a person to judge.

use k8s_openapi::api::authorization::v1::{ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec};
use k8s_openapi::api::certificates::v1::{CertificateSigningRequest, CertificateSigningRequestCondition, CertificateSigningRequestStatus};
use kube::api::{Api, PostParams};
use pki::CertificateRequest;

use crate::certificates::certificate_controller::{CertificateController, CsrHandler, KUBE_APISERVER_CLIENT_KUBELET_SIGNER_NAME, get_cert_approval_condition, has_certificate};
use crate::certificates::helpers::{usages_to_set, validate_kubelet_client_csr};
use crate::error::{Error, Result};

/// The controller's name (kube-controller-manager's `csrapproving`).
pub const NAME: &str = "csrapproving";
const TARGET: &str = "controllers::csrapproving";

/// A kind of request the approver knows, and what its requester must be allowed.
pub struct Recognizer {
    pub recognize: fn(&CertificateSigningRequest, &CertificateRequest) -> bool,
    /// The subresource of `certificatesigningrequests` the SubjectAccessReview asks about.
    pub subresource: &'static str,
    pub success_message: &'static str,
}

/// Step 3's recognizers, in Kubernetes' order: a node renewing its own certificate first.
pub const RECOGNIZERS: [Recognizer; 2] = [
    Recognizer {
        recognize: is_self_node_client_cert,
        subresource: "selfnodeclient",
        success_message: "Auto approving self kubelet client certificate after SubjectAccessReview.",
    },
    Recognizer {
        recognize: is_node_client_cert,
        subresource: "nodeclient",
        success_message: "Auto approving kubelet client certificate after SubjectAccessReview.",
    },
];

/// `isNodeClientCert`: for the kubelet client signer, and a node's client certificate
/// (`O=[system:nodes]`, `CN=system:node:<name>`, no alternative names, the client usages).
pub fn is_node_client_cert(csr: &CertificateSigningRequest, req: &CertificateRequest) -> bool {
    csr.spec.signer_name == KUBE_APISERVER_CLIENT_KUBELET_SIGNER_NAME
        && validate_kubelet_client_csr(req, &usages_to_set(csr.spec.usages.as_deref().unwrap_or_default())).is_ok()
}

/// `isSelfNodeClientCert`: a node client certificate asked for by the node it names.
pub fn is_self_node_client_cert(csr: &CertificateSigningRequest, req: &CertificateRequest) -> bool {
    csr.spec.username.as_deref() == Some(req.subject.common_name.as_str()) && is_node_client_cert(csr, req)
}

/// Step 3's question: may the request's requester create `certificatesigningrequests/<subresource>`?
pub fn subject_access_review(csr: &CertificateSigningRequest, subresource: &str) -> SubjectAccessReview {
    SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: csr.spec.username.clone(),
            uid: csr.spec.uid.clone(),
            groups: csr.spec.groups.clone(),
            extra: csr.spec.extra.clone(),
            resource_attributes: Some(ResourceAttributes {
                group: Some("certificates.k8s.io".into()),
                resource: Some("certificatesigningrequests".into()),
                verb: Some("create".into()),
                subresource: Some(subresource.into()),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// Step 4: the Approved condition appended (the API server stamps its times).
pub fn append_approval_condition(csr: &mut CertificateSigningRequest, message: &str) {
    let status = csr.status.get_or_insert_with(CertificateSigningRequestStatus::default);
    status.conditions.get_or_insert_with(Vec::new).push(CertificateSigningRequestCondition {
        type_: "Approved".into(),
        status: "True".into(),
        reason: Some("AutoApproved".into()),
        message: Some(message.into()),
        ..Default::default()
    });
}

/// The approver: the controller's own client, for SubjectAccessReviews and approvals.
pub struct SarApprover {
    client: kube::Client,
}

impl SarApprover {
    /// The approving controller: the shared loop watching with `informers`, acting with `client`.
    pub fn controller(informers: kube::Client, client: kube::Client) -> CertificateController<SarApprover> {
        CertificateController::new(NAME, informers, SarApprover { client })
    }

    async fn authorize(&self, csr: &CertificateSigningRequest, subresource: &str) -> Result<bool> {
        let api: Api<SubjectAccessReview> = Api::all(self.client.clone());
        let review = api.create(&PostParams::default(), &subject_access_review(csr, subresource)).await.map_err(Error::Kube)?;
        Ok(review.status.is_some_and(|s| s.allowed))
    }
}

impl CsrHandler for SarApprover {
    /// Steps 1–5.
    async fn handle(&self, mut csr: CertificateSigningRequest) -> Result<()> {
        let name = csr.metadata.name.clone().unwrap_or_default();
        // Step 1.
        if has_certificate(&csr) {
            return Ok(());
        }
        if let (true, _) | (_, true) = get_cert_approval_condition(&csr) {
            return Ok(());
        }
        // Step 2.
        let req = pki::parse_csr(&csr.spec.request.0).map_err(|source| Error::Pki { what: format!("unable to parse csr {name:?}"), source })?;
        // Step 3.
        let mut tried = Vec::new();
        for r in &RECOGNIZERS {
            if !(r.recognize)(&csr, &req) {
                continue;
            }
            tried.push(r.subresource);
            if self.authorize(&csr, r.subresource).await? {
                // Step 4.
                append_approval_condition(&mut csr, r.success_message);
                let api: Api<CertificateSigningRequest> = Api::all(self.client.clone());
                api.replace_subresource("approval", &name, &PostParams::default(), &csr)
                    .await
                    .map_err(|e| Error::Message(format!("error updating approval for csr: {e}")))?;
                tracing::info!(target: TARGET, csr = %name, subresource = r.subresource, user = csr.spec.username.as_deref().unwrap_or_default(), "approved");
                return Ok(());
            }
        }
        // Step 5.
        if !tried.is_empty() {
            return Err(Error::Ignorable(format!("recognized csr {name:?} as [{}] but subject access review was not approved", tried.join(" "))));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pki::Subject;
    use serde_json::json;

    fn csr(signer: &str, username: &str, usages: &[&str]) -> CertificateSigningRequest {
        serde_json::from_value(json!({
            "metadata": {"name": "node-csr-1"},
            "spec": {"request": "", "signerName": signer, "username": username, "usages": usages,
                     "groups": ["system:bootstrappers", "system:authenticated"], "uid": "u1", "extra": {"k": ["v"]}},
        }))
        .expect("a CSR")
    }

    fn node_req(cn: &str) -> CertificateRequest {
        CertificateRequest { subject: Subject { common_name: cn.into(), organizations: vec!["system:nodes".into()] }, ..Default::default() }
    }

    /// Which recognizers a request matches: the subresources the approver would ask about, in order.
    fn recognized(csr: &CertificateSigningRequest, req: &CertificateRequest) -> Vec<&'static str> {
        RECOGNIZERS.iter().filter(|r| (r.recognize)(csr, req)).map(|r| r.subresource).collect()
    }

    #[test]
    fn which_requests_are_recognized() {
        let client_usages = ["digital signature", "key encipherment", "client auth"];
        let kubelet = KUBE_APISERVER_CLIENT_KUBELET_SIGNER_NAME;
        // A bootstrap token's user asks for a node's first certificate.
        let first = csr(kubelet, "system:bootstrap:abcdef", &client_usages);
        assert_eq!(recognized(&first, &node_req("system:node:n1")), ["nodeclient"]);
        // The node renews its own.
        let renewal = csr(kubelet, "system:node:n1", &["digital signature", "client auth"]);
        assert_eq!(recognized(&renewal, &node_req("system:node:n1")), ["selfnodeclient", "nodeclient"]);
        // Another node's name: only nodeclient (which nodes are not allowed).
        assert_eq!(recognized(&renewal, &node_req("system:node:n2")), ["nodeclient"]);
        // Another signer, a serving usage, a stranger's subject, a SAN: not the approver's.
        assert!(recognized(&csr("kubernetes.io/kube-apiserver-client", "system:node:n1", &client_usages), &node_req("system:node:n1")).is_empty());
        assert!(recognized(&csr(kubelet, "system:node:n1", &["digital signature", "server auth"]), &node_req("system:node:n1")).is_empty());
        assert!(recognized(&first, &node_req("alice")).is_empty());
        let mut with_san = node_req("system:node:n1");
        with_san.dns_names = vec!["n1".into()];
        assert!(recognized(&first, &with_san).is_empty());
    }

    #[test]
    fn the_review_asks_as_the_requester() {
        let c = csr(KUBE_APISERVER_CLIENT_KUBELET_SIGNER_NAME, "system:bootstrap:abcdef", &[]);
        assert_eq!(
            serde_json::to_value(subject_access_review(&c, "nodeclient")).expect("serializes"),
            json!({
                "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "metadata": {},
                "spec": {
                    "user": "system:bootstrap:abcdef", "uid": "u1", "groups": ["system:bootstrappers", "system:authenticated"],
                    "extra": {"k": ["v"]},
                    "resourceAttributes": {"group": "certificates.k8s.io", "resource": "certificatesigningrequests", "verb": "create", "subresource": "nodeclient"},
                },
            })
        );
    }

    #[test]
    fn approval_appends_a_condition() {
        let mut c = csr(KUBE_APISERVER_CLIENT_KUBELET_SIGNER_NAME, "system:node:n1", &[]);
        append_approval_condition(&mut c, RECOGNIZERS[1].success_message);
        assert_eq!(
            serde_json::to_value(&c.status).expect("serializes"),
            json!({"conditions": [{"type": "Approved", "status": "True", "reason": "AutoApproved",
                                   "message": "Auto approving kubelet client certificate after SubjectAccessReview."}]})
        );
        assert_eq!(get_cert_approval_condition(&c), (true, false));
    }
}
