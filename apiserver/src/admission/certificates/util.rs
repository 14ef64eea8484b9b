//! Mirrors plugin/pkg/admission/certificates/util.go: `IsAuthorizedForSignerName` — whether a
//! user may `verb` (approve, sign) requests for a signer: allowed on the resource `signers` of
//! `certificates.k8s.io` named after the signer, or after its domain and `*`
//! (`kubernetes.io/*`), as an RBAC rule with `resourceNames` grants it.

use serde_json::Value;

use crate::admission::interfaces::Attributes as AdmissionAttributes;
use crate::authentication::user::UserInfo;
use crate::authorization::authorizer::{Attributes, Authorizer, Decision};
use crate::error::Result;
use crate::registry::certificates::certificatesigningrequest::strategy::GROUP;

/// What CertificateApproval and CertificateSigning both ask of an update: may its user `verb`
/// requests of the request's signer — the stored one, which the approval and status strategies
/// keep, so a signerName changed on the way in is not the one checked? Refused: the 403
/// `user not permitted to <verb> requests with signerName "<signer>"`.
pub fn check_signer_permission(authorizer: &dyn Authorizer, a: &AdmissionAttributes<'_>, verb: &str) -> Result<()> {
    let signer_name = a.old_object.or(a.object).and_then(|csr| csr.pointer("/spec/signerName")).and_then(Value::as_str).unwrap_or("");
    if !is_authorized_for_signer_name(authorizer, a.user, verb, signer_name) {
        return Err(a.forbidden(&format!("user not permitted to {verb} requests with signerName {signer_name:?}")));
    }
    Ok(())
}

/// IsAuthorizedForSignerName: the signer itself first, then its domain's wildcard.
pub fn is_authorized_for_signer_name(authorizer: &dyn Authorizer, user: &UserInfo, verb: &str, signer_name: &str) -> bool {
    let domain = signer_name.split('/').next().unwrap_or("");
    [signer_name.to_string(), format!("{domain}/*")].iter().any(|name| {
        let (decision, reason) = authorizer.authorize(&attributes(user, verb, name));
        tracing::debug!(target: "apiserver::admission", user = %user.name, verb, signer = %name, ?decision, reason, "signer authorization");
        decision == Decision::Allow
    })
}

/// buildAttributes: `verb` on `signers/<name>` in `certificates.k8s.io`, any version.
fn attributes<'a>(user: &'a UserInfo, verb: &'a str, name: &'a str) -> Attributes<'a> {
    Attributes { user, verb, resource_request: true, api_group: GROUP, api_version: "*", resource: "signers", name, ..Default::default() }
}

#[cfg(test)]
pub mod testing {
    use crate::authentication::user::UserInfo;
    use crate::authorization::authorizer::{Attributes, Authorizer, Decision};

    /// An authorizer that allows exactly `(user, verb, signers/<name>)` triples.
    pub struct Grants(pub Vec<(&'static str, &'static str, &'static str)>);

    impl Authorizer for Grants {
        fn authorize(&self, a: &Attributes<'_>) -> (Decision, String) {
            let allowed = a.api_group == "certificates.k8s.io"
                && a.resource == "signers"
                && self.0.iter().any(|(u, v, n)| *u == a.user.name && *v == a.verb && *n == a.name);
            (if allowed { Decision::Allow } else { Decision::NoOpinion }, String::new())
        }
    }

    pub fn user(name: &str) -> UserInfo {
        UserInfo { name: name.into(), ..Default::default() }
    }
}

#[cfg(test)]
mod tests {
    use super::testing::{Grants, user};
    use super::*;

    #[test]
    fn the_signer_or_its_domains_wildcard() {
        let grants = Grants(vec![("jane", "approve", "example.com/a"), ("ops", "approve", "kubernetes.io/*")]);
        let ask = |u: &str, verb: &str, signer: &str| is_authorized_for_signer_name(&grants, &user(u), verb, signer);
        assert!(ask("jane", "approve", "example.com/a"));
        assert!(!ask("jane", "approve", "example.com/b"));
        assert!(!ask("jane", "sign", "example.com/a"), "approve is not sign");
        assert!(ask("ops", "approve", "kubernetes.io/kube-apiserver-client"));
        assert!(!ask("ops", "approve", "example.com/a"));
    }
}
