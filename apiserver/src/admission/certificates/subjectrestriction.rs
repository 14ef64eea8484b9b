//! Mirrors plugin/pkg/admission/certificates/subjectrestriction/admission.go
//! (CertificateSubjectRestriction): a request to the `kubernetes.io/kube-apiserver-client`
//! signer may not ask for `O=system:masters` — a certificate in that group would pass every
//! authorizer. Refused on create: 403, `... is forbidden: use of
//! kubernetes.io/kube-apiserver-client signer with system:masters group is not allowed`.

use serde_json::Value;

use super::is_csr;
use crate::admission::interfaces::{Attributes, Operation, ValidationInterface};
use crate::authentication::user::SYSTEM_PRIVILEGED_GROUP;
use crate::error::Result;
use api::certificates::helpers::{KUBE_API_SERVER_CLIENT_SIGNER_NAME, bytes_field, parse_csr};

pub const NAME: &str = "CertificateSubjectRestriction";

pub struct CertificateSubjectRestriction;

impl ValidationInterface for CertificateSubjectRestriction {
    fn name(&self) -> &'static str {
        NAME
    }

    fn handles(&self, a: &Attributes<'_>) -> bool {
        a.operation == Operation::Create && is_csr(a, "")
    }

    fn validate(&self, a: &Attributes<'_>, csr: &Value) -> Result<()> {
        let signer_name = csr.pointer("/spec/signerName").and_then(Value::as_str).unwrap_or("");
        if signer_name != KUBE_API_SERVER_CLIENT_SIGNER_NAME {
            return Ok(());
        }
        let parsed = parse_csr(&bytes_field(csr, "/spec/request")).map_err(|e| a.forbidden(&format!("failed to parse CSR: {e}")))?;
        if parsed.organizations.iter().any(|o| o == SYSTEM_PRIVILEGED_GROUP) {
            return Err(a.forbidden(&format!("use of {signer_name} signer with {SYSTEM_PRIVILEGED_GROUP} group is not allowed")));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use base64::Engine;
    use serde_json::json;

    use super::*;
    use crate::admission::certificates::util::testing::user;
    use crate::registry::certificates::certificatesigningrequest::strategy::CERTIFICATESIGNINGREQUESTS;

    fn csr(signer: &str, org: &str) -> Value {
        let key = rcgen::KeyPair::generate().expect("key");
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
        params.distinguished_name.push(rcgen::DnType::CommonName, "jane");
        params.distinguished_name.push(rcgen::DnType::OrganizationName, org);
        let pem = params.serialize_request(&key).expect("request").pem().expect("pem");
        let request = base64::engine::general_purpose::STANDARD.encode(pem);
        json!({"metadata": {"name": "c1"}, "spec": {"signerName": signer, "request": request}})
    }

    #[test]
    fn no_system_masters_from_the_client_signer() {
        let jane = user("jane");
        let check = |obj: &Value| {
            let a = Attributes {
                operation: Operation::Create,
                user: &jane,
                resource: &CERTIFICATESIGNINGREQUESTS,
                subresource: "",
                namespace: None,
                name: "c1",
                dry_run: false,
                object: Some(obj),
                old_object: None,
            };
            assert!(CertificateSubjectRestriction.handles(&a));
            CertificateSubjectRestriction.validate(&a, obj)
        };
        let err = check(&csr(KUBE_API_SERVER_CLIENT_SIGNER_NAME, "system:masters")).expect_err("refused");
        assert_eq!(
            err.to_string(),
            "certificatesigningrequests.certificates.k8s.io \"c1\" is forbidden: use of kubernetes.io/kube-apiserver-client signer with system:masters group is not allowed"
        );
        check(&csr(KUBE_API_SERVER_CLIENT_SIGNER_NAME, "dev")).expect("another group");
        check(&csr("example.com/signer", "system:masters")).expect("another signer");
    }
}
