//! Mirrors plugin/pkg/admission/certificates/approval/admission.go (CertificateApproval): an
//! update of `certificatesigningrequests/approval` — `kubectl certificate approve` or `deny` —
//! needs the `approve` verb on the request's signer (`signers`, named after it or its domain's
//! `*`). Refused: 403, `certificatesigningrequests.certificates.k8s.io "<name>" is forbidden:
//! user not permitted to approve requests with signerName "<signer>"`.

use std::sync::Arc;

use futures::future::LocalBoxFuture;
use super::is_csr;
use super::util::check_signer_permission;
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

    /// Validate: `approve` on the stored request's signer.
    fn check(&self, a: &Attributes<'_>) -> Result<()> {
        check_signer_permission(self.authorizer.as_ref(), a, "approve")
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
