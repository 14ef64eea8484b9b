//! Mirrors pkg/serviceaccount: service account tokens — JWTs the API server signs for a service
//! account ([`jwt`]), with Kubernetes' private claims: the namespace, the account, and the object
//! the token is bound to, a pod or a secret ([`claims`]) — and how it checks them when a request
//! presents one: the signature, the issuer, the audience, the expiry, and that the account and
//! the bound object still exist as they were ([`tokengetter`], over the server's watch caches).
//!
//! A token is issued through TokenRequest (`POST .../serviceaccounts/<name>/token`, `kubectl
//! create token`: registry/core/serviceaccount/token.rs) and authenticates its request as
//! `system:serviceaccount:<namespace>:<name>` in `system:serviceaccounts` and
//! `system:serviceaccounts:<namespace>`.
//!
//! Implementation caveats:
//! - ES256 only (the P-256 key `kubelab certs` makes, `sa.key`); kube-apiserver also takes RSA
//!   keys. No legacy tokens (the `kubernetes.io/service-account-token` secrets and their
//!   controller), no extended expiry for the node agent's tokens (`warnafter`), no OIDC
//!   discovery documents (`/.well-known/openid-configuration`).

pub mod claims;
pub mod jwt;
pub mod tokengetter;

/// The issuer kubeadm gives a cluster's tokens (`--service-account-issuer`), which `kubelab up`
/// and the lab use: the API server's name inside the cluster.
pub const DEFAULT_ISSUER: &str = "https://kubernetes.default.svc.cluster.local";

/// `system:serviceaccount:<namespace>:<name>` (`MakeUsername`).
pub fn make_username(namespace: &str, name: &str) -> String {
    format!("system:serviceaccount:{namespace}:{name}")
}

/// The groups of every service account of `namespace` (`MakeGroupNames`).
pub fn make_group_names(namespace: &str) -> Vec<String> {
    vec!["system:serviceaccounts".into(), format!("system:serviceaccounts:{namespace}")]
}
