//! Mirrors pkg/controller/certificates: the controllers of certificate signing requests and the
//! root CA publisher.
//! - [`approver`]: `csrapproving` approves kubelets' client certificate requests their
//!   requester may make (a SubjectAccessReview).
//! - [`signer`]: `csrsigning` signs approved requests for Kubernetes' built-in signers with the
//!   cluster CA (only when `--cluster-signing-cert-file`/`--cluster-signing-key-file` are given).
//! - [`cleaner`]: `csrcleaner` deletes requests once handled or stale.
//! - [`rootcacertpublisher`]: puts the cluster's CA bundle in every namespace.
//!
//! The approver and signer share one loop ([`certificate_controller`]) and the kubelet request
//! rules of [`helpers`].

pub mod approver;
pub mod certificate_controller;
pub mod cleaner;
pub mod helpers;
pub mod rootcacertpublisher;
pub mod signer;
