//! Mirrors pkg/registry/certificates/certificates: CertificateSigningRequests — a client asks
//! for a certificate (`kubectl create -f csr.yaml`, a kubelet's TLS bootstrap), someone with
//! `approve` on the signer approves or denies it (`/approval`: `kubectl certificate approve`),
//! and the signer writes the certificate (`/status`). Each of the three paths writes only its
//! part ([`strategy`]); the admission plugins `CertificateApproval`, `CertificateSigning` and
//! `CertificateSubjectRestriction` decide who may take them.

pub mod printer;
pub mod strategy;
