//! # pki — the cluster's certificates, as kubeadm makes them
//!
//! A Kubernetes cluster trusts by certificate. One CA signs the API server's serving
//! certificate, so clients can check whom they talk to, and a client certificate for each
//! component and user, so the API server can tell who is talking: a client certificate's
//! subject common name is the user's name and its organizations are the user's groups
//! (`CN=system:node:n1, O=system:nodes`). This crate makes and checks those certificates and
//! keys. It mirrors client-go's `util/cert` and `util/keyutil` ([`cert`], [`keyutil`]) and
//! kubeadm's `pkiutil` ([`pki_helpers`]) and `phases/certs/certs.go` ([`certs`]), and
//! kube-controller-manager's certificate authority ([`authority`]); which
//! certificates a cluster has is the caller's list (kubelab's is in `src/certs/`, as kubeadm's
//! is in `certlist.go`).
//!
//! ## The flow
//! 1. A CA: [`ensure_ca`] loads `<dir>/<name>.crt` and `<name>.key`, or makes a self-signed CA
//!    valid for ten years ([`CertificateAuthority::new`]) when neither exists.
//! 2. A certificate is described by a [`Config`]: common name, organizations, usages (server
//!    auth, client auth, or both) and alternative names (DNS names, IP addresses).
//!    [`CertificateAuthority::sign`] makes a new key and a certificate for it, valid for a year.
//! 3. [`ensure_cert`] keeps the certificate already on disk when [`renewal_reason`] finds nothing
//!    wrong with it — signed by this CA, holding its key, matching the config, not within
//!    `renew_before` of its end — and otherwise issues it again; the [`Outcome`] says which and
//!    why, for the caller to log. Files are written atomically (a temporary file renamed into
//!    place), keys with mode 0600.
//! 4. [`ensure_service_account_key_pair`] makes `sa.key` and `sa.pub` once; the API server
//!    signs service account tokens with the first and verifies them with the second.
//! 5. Asking for a certificate ([`csr`], client-go's `util/cert/csr.go`): [`make_private_key_pem`]
//!    makes a key and [`make_csr`] a PKCS#10 request for `CN=…, O=…` signed by it — what a node
//!    agent sends in a `CertificateSigningRequest` when it bootstraps with a token.
//! 6. Signing a request ([`authority`], kube-controller-manager's signer): [`parse_csr`] checks
//!    its self-signature and reads it, [`CertificateAuthority::sign_csr`] issues a certificate
//!    for its subject and key with the usages and lifetime asked, within the CA's own.
//! 7. Reading: [`subject_from_der`] is what the node agent calls on every TLS client
//!    certificate, for the user and groups; [`parse_der`], [`info_from_file`] and
//!    [`CertAndKey::info`] give the rest (`kubelab certs check-expiration`).
//!
//! ## Implementation caveats
//! - ECDSA P-256 keys everywhere. kubeadm's default is RSA 2048 (ECDSA P-256 is its
//!   `encryptionAlgorithm` option): rcgen generates P-256 keys natively on aws-lc-rs, they sign
//!   in microseconds rather than generating in a noticeable fraction of a second, and Go,
//!   OpenSSL (curl) and rustls all take them. A kubeadm RSA CA can still be loaded and sign.
//! - Private keys are written as PKCS#8 (`PRIVATE KEY`); kubeadm writes `EC PRIVATE KEY`
//!   (SEC1). Both are read by everything above, and this crate reads PKCS#8, SEC1 and PKCS#1.
//! - At most one organization in a certificate this crate signs: rcgen's `DistinguishedName`
//!   holds one value per attribute type. Certificates made elsewhere with several are read in
//!   full ([`Subject::organizations`] has them all).
//! - Subjects are encoded as UTF8String (Go uses PrintableString where it can). The issuer
//!   name of a signed certificate is copied from the CA certificate's own encoding and checked
//!   byte for byte ([`Error::IssuerMismatch`]), because that is what Go's TLS client compares
//!   against the CA names a server sends when deciding whether to offer its certificate.
//! - A leaf's keyUsage is digitalSignature alone (kubeadm adds keyEncipherment, an RSA usage).
//!   Serial numbers are derived from the certificate's public key (rcgen's default; each
//!   certificate has a fresh key, so they differ); kubeadm draws random ones.
//! - Fixed validity: a year for certificates, ten for CAs (kubeadm's defaults, which its
//!   ClusterConfiguration can change). CAs are never renewed automatically, nor by kubeadm.
//! - Certificate signing requests are made ([`make_csr`], without alternative names or
//!   extensions: a client certificate's request needs none) and signed ([`authority`]).
//!   rcgen holds one value per subject attribute type, so a request with several
//!   organizations (a user in several groups) is neither made nor signed
//!   ([`ONE_ORGANIZATION`]), where Kubernetes signs it; a request with extensions other than
//!   alternative names, key usages and basic constraints is refused (rcgen cannot read them;
//!   Go ignores them).
//! - No external-CA mode, no intermediate CAs, no encrypted keys.
//!
//! ## Public surface
//! - Making and keeping: [`ensure_ca`], [`ensure_cert`], [`ensure_service_account_key_pair`],
//!   [`renewal_reason`], [`Outcome`], [`RenewReason`]; [`CertificateAuthority`] (new, load,
//!   load_files, sign, write, signed), [`CertAndKey`], [`paths_for_cert_and_key`], [`write_key`].
//! - Describing and reading: [`Config`], [`AltNames`], [`Usage`], [`Subject`], [`CertInfo`],
//!   [`subject_from_der`], [`parse_der`], [`parse_certs_pem`], [`certs_from_file`],
//!   [`info_from_file`].
//! - Certificate signing requests: [`make_private_key_pem`], [`make_csr`] (requesting);
//!   [`parse_csr`], [`CertificateRequest`], [`CertificateAuthority::sign_csr`],
//!   [`key_usages_from_strings`], [`boundaries`], [`ONE_ORGANIZATION`], [`CSR_BACKDATE`],
//!   [`SHORT_CERTIFICATE`] (signing).
//! - [`Error`], [`Result`], and the constants below.
#![allow(rustdoc::private_intra_doc_links)] // the tour names private modules; read it in the source

mod authority;
mod cert;
mod certs;
mod csr;
pub mod error;
mod keyutil;
mod pki_helpers;

use std::time::Duration;

pub use authority::{CSR_BACKDATE, CertificateRequest, ONE_ORGANIZATION, SHORT_CERTIFICATE, boundaries, key_usages_from_strings, parse_csr};
pub use cert::{AltNames, CertInfo, Config, Subject, Usage, certs_from_file, info_from_file, parse_certs_pem, parse_der, subject_from_der};
pub use certs::{
    Outcome, RenewReason, SERVICE_ACCOUNT_KEY_BASE_NAME, ensure_ca, ensure_cert, ensure_service_account_key_pair, renewal_reason,
};
pub use csr::{make_csr, make_private_key_pem};
pub use error::{Error, Result};
pub use keyutil::write_key;
pub use pki_helpers::{CertAndKey, CertificateAuthority, paths_for_cert_and_key};

const DAY: u64 = 24 * 3600;

/// How long a certificate is valid: a year (kubeadm's `CertificateValidityPeriod`).
pub const CERTIFICATE_VALIDITY: Duration = Duration::from_secs(365 * DAY);

/// How long a CA is valid: ten years (kubeadm's `CACertificateValidityPeriod`).
pub const CA_CERTIFICATE_VALIDITY: Duration = Duration::from_secs(10 * 365 * DAY);

/// How far back a certificate's validity starts: five minutes, so that a machine whose clock is
/// a little behind the one that signed still accepts it (kubeadm's `CertificateBackdate`).
pub const CERTIFICATE_BACKDATE: Duration = Duration::from_secs(5 * 60);

/// The renewal window [`ensure_cert`] is usually given: a certificate with less than 30 days
/// left is issued again. kubeadm renews only when asked (`kubeadm certs renew`, or
/// `kubeadm upgrade apply`), while the kubelet rotates its own client certificate at a random
/// point between 70 % and 90 % of its lifetime — 110 to 36 days before a one-year certificate
/// ends. A month is a little after the kubelet's latest point and leaves a cluster that is
/// restarted now and then (each start runs `ensure`) weeks of warning.
pub const DEFAULT_RENEW_BEFORE: Duration = Duration::from_secs(30 * DAY);

