//! Mirrors plugin/pkg/admission/certificates/approval/admission.go (CertificateApproval): an
//! update of `certificatesigningrequests/approval` — `kubectl certificate approve` or `deny` —
//! needs the `approve` verb on the request's signer (`signers`, named after it or its domain's
//! `*`). Refused: 403, `certificatesigningrequests.certificates.k8s.io "<name>" is forbidden:
//! user not permitted to approve requests with signerName "<signer>"`.

use std::sync::Arc;

use futures::future::LocalBoxFuture;
use serde_json::Value;

use super::is_csr;
use super::util::is_authorized_for_signer_name;
use crate::admission::interfaces::{Attributes, MutationInterface, Operation};
use crate::authorization::authorizer::Authorizer;
use crate::error::Result;

pub const NAME: &str = "CertificateApproval";

pub struct CertificateApproval {
    authorizer: Arc<dyn Authorizer>,
}

impl CertificateApproval {
    pub fn new(authorizer: Arc<dyn Authorizer>) -> Self {
        Self { authorizer }
    }

    /// Validate: the signer is the stored request's (the approval strategy keeps the spec, so a
    /// signerName changed on the way in is not the one approved).
    fn check(&self, a: &Attributes<'_>) -> Result<()> {
        let signer_name = a.old_object.or(a.object).and_then(|csr| csr.pointer("/spec/signerName")).and_then(Value::as_str).unwrap_or("");
        if !is_authorized_for_signer_name(self.authorizer.as_ref(), a.user, "approve", signer_name) {
            return Err(a.forbidden(&format!("user not permitted to approve requests with signerName {signer_name:?}")));
        }
        Ok(())
    }
}

impl MutationInterface for CertificateApproval {
    fn name(&self) -> &'static str {
        NAME
    }

    fn handles(&self, a: &Attributes<'_>) -> bool {
        a.operation == Operation::Update && is_csr(a, "approval")
    }

    fn admit<'a>(&'a self, a: &'a Attributes<'a>) -> LocalBoxFuture<'a, Result<()>> {
        Box::pin(std::future::ready(self.check(a)))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::admission::certificates::util::testing::{Grants, user};
    use crate::registry::certificates::certificatesigningrequest::strategy::CERTIFICATESIGNINGREQUESTS;

    #[test]
    fn approving_needs_approve_on_the_stored_signer() {
        let plugin = CertificateApproval::new(Arc::new(Grants(vec![("admin", "approve", "example.com/*")])));
        let old = json!({"metadata": {"name": "c1"}, "spec": {"signerName": "example.com/s"}});
        let sent = json!({"metadata": {"name": "c1"}, "spec": {"signerName": "other.io/s"}, "status": {"conditions": [{"type": "Approved"}]}});
        let (admin, jane) = (user("admin"), user("jane"));
        let attributes = |u| Attributes {
            operation: Operation::Update,
            user: u,
            resource: &CERTIFICATESIGNINGREQUESTS,
            subresource: "approval",
            namespace: None,
            name: "c1",
            dry_run: false,
            object: Some(&sent),
            old_object: Some(&old),
        };
        assert!(plugin.handles(&attributes(&admin)));
        assert!(!plugin.handles(&Attributes { subresource: "status", ..attributes(&admin) }));
        futures::executor::block_on(plugin.admit(&attributes(&admin))).expect("admin approves");
        let err = futures::executor::block_on(plugin.admit(&attributes(&jane))).expect_err("jane may not");
        assert_eq!(
            err.to_string(),
            "certificatesigningrequests.certificates.k8s.io \"c1\" is forbidden: user not permitted to approve requests with signerName \"example.com/s\""
        );
    }
}
