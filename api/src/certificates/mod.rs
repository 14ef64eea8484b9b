//! Mirrors pkg/apis/certificates: the `certificates.k8s.io/v1` CertificateSigningRequest — how its
//! request is read ([`helpers`]) and what makes one valid ([`validation`]). v1 has no defaulting
//! of its own (its `defaults.go` registers none): usages and signerName are the client's to give.

pub mod helpers;
pub mod validation;
