//! Mirrors plugin/pkg/admission/certificates: who may take a CertificateSigningRequest down each
//! of its paths. The authorizers decide, asked about the `signers` resource of
//! `certificates.k8s.io` named after the request's signer ([`util::is_authorized_for_signer_name`]):
//!
//! 1. [`approval`] (CertificateApproval): an update of `/approval` needs `approve` on the signer;
//! 2. [`signing`] (CertificateSigning): an update of `/status` that changes the certificate or
//!    the conditions needs `sign` on the signer;
//! 3. [`subjectrestriction`] (CertificateSubjectRestriction): no request to the
//!    `kubernetes.io/kube-apiserver-client` signer for a certificate in `system:masters`.
//!
//! Kubernetes runs all three in the validating phase. kubelab runs the first two on the request
//! (`admit`, as NodeRestriction: the one step that sees updates), from the object the client
//! sent or the patch makes and the stored one; the third on the object about to be written.

pub mod approval;
pub mod signing;
pub mod subjectrestriction;
pub mod util;

use crate::admission::interfaces::Attributes;
use crate::registry::certificates::certificatesigningrequest::strategy::GROUP;

/// Whether the request is for CertificateSigningRequests' `subresource` (`csrGroupResource`).
fn is_csr(a: &Attributes<'_>, subresource: &str) -> bool {
    a.is_for(GROUP, "certificatesigningrequests") && a.subresource == subresource
}
