//! Mirrors plugin/pkg/admission/certificates/signing/admission.go (CertificateSigning): an
//! update of `certificatesigningrequests/status` that changes `status.certificate` or the
//! conditions needs the `sign` verb on the request's signer. Refused: 403, `... is forbidden:
//! user not permitted to sign requests with signerName "<signer>"`. An update that changes
//! neither (a label through /status) passes.

use std::sync::Arc;

use futures::future::LocalBoxFuture;
use serde_json::Value;

use super::is_csr;
use super::util::check_signer_permission;
use crate::admission::interfaces::{Attributes, MutationInterface, Operation};
use crate::authorization::authorizer::Authorizer;
use crate::error::Result;

pub const NAME: &str = "CertificateSigning";

pub struct CertificateSigning {
    authorizer: Arc<dyn Authorizer>,
}

impl CertificateSigning {
    pub fn new(authorizer: Arc<dyn Authorizer>) -> Self {
        Self { authorizer }
    }

    fn check(&self, a: &Attributes<'_>) -> Result<()> {
        let field = |obj: Option<&Value>, pointer: &str| obj.and_then(|o| o.pointer(pointer)).filter(|v| !v.is_null()).cloned();
        let unchanged = |pointer: &str| field(a.object, pointer) == field(a.old_object, pointer);
        if unchanged("/status/certificate") && unchanged("/status/conditions") {
            return Ok(());
        }
        check_signer_permission(self.authorizer.as_ref(), a, "sign")
    }
}

impl MutationInterface for CertificateSigning {
    fn name(&self) -> &'static str {
        NAME
    }

    fn handles(&self, a: &Attributes<'_>) -> bool {
        a.operation == Operation::Update && is_csr(a, "status")
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
    fn writing_the_certificate_needs_sign() {
        let plugin = CertificateSigning::new(Arc::new(Grants(vec![("signer", "sign", "example.com/s")])));
        let old = json!({"metadata": {"name": "c1"}, "spec": {"signerName": "example.com/s"}, "status": {"conditions": [{"type": "Approved"}]}});
        let mut issued = old.clone();
        issued["status"]["certificate"] = json!("Y2VydA==");
        let mut labelled = old.clone();
        labelled["metadata"]["labels"] = json!({"a": "b"});
        let (signer, jane) = (user("signer"), user("jane"));
        let attributes = |u, obj| Attributes {
            operation: Operation::Update,
            user: u,
            resource: &CERTIFICATESIGNINGREQUESTS,
            subresource: "status",
            namespace: None,
            name: "c1",
            dry_run: false,
            object: Some(obj),
            old_object: Some(&old),
        };
        futures::executor::block_on(plugin.admit(&attributes(&signer, &issued))).expect("the signer signs");
        futures::executor::block_on(plugin.admit(&attributes(&jane, &labelled))).expect("nothing signed");
        let err = futures::executor::block_on(plugin.admit(&attributes(&jane, &issued))).expect_err("jane may not");
        assert_eq!(
            err.to_string(),
            "certificatesigningrequests.certificates.k8s.io \"c1\" is forbidden: user not permitted to sign requests with signerName \"example.com/s\""
        );
    }
}
