//! Mirrors k8s.io/apiserver/pkg/authentication: who a request comes from.
//!
//! A request on the secure port is authenticated by the first authenticator that recognizes its
//! credentials (Kubernetes' union authenticator), in this order:
//! 1. [`request::x509`]: a client certificate signed by `--client-ca-file` (verified once per
//!    connection, when it is made).
//! 2. [`token`]: a bearer token (`Authorization: Bearer …`): a static token of
//!    `--token-auth-file`, or a service account token ([`crate::serviceaccount`]) for one of the
//!    API's audiences (`--api-audiences`, by default the issuers). A bearer token that none of
//!    them recognizes is a 401. With `--enable-bootstrap-token-auth`, a bootstrap token
//!    (`<id>.<secret>`, [`token::bootstrap`]) is the user `system:bootstrap:<id>` of its
//!    `kube-system` Secret `bootstrap-token-<id>`: how a joining node asks for its certificate.
//! 3. Anonymous (`--anonymous-auth`, on by default): a request with no credentials is
//!    `system:anonymous` in `system:unauthenticated`, which the default RBAC policy lets read
//!    only `/healthz`, `/livez`, `/readyz` and `/version`. Credentials that are wrong are never
//!    anonymous: they are a 401.
//!
//! A request on the insecure port (`--insecure-port`, for teaching) is not authenticated: it acts
//! as `system:unsecured` in `system:masters`, as kube-apiserver's insecure port did until it was
//! removed. Every authenticated user gets the group `system:authenticated` ([`user`]).

pub mod request;
pub mod token;
pub mod user;

/// What authenticates a request that its connection does not (Kubernetes'
/// `DelegatingAuthenticatorConfig` as kube-apiserver builds it): the bearer token authenticators,
/// the audiences a token must be for, and whether a request without credentials is anonymous.
#[derive(Default)]
pub struct Authenticator {
    pub tokens: token::Union,
    /// `--api-audiences`.
    pub audiences: Vec<String>,
    /// `--anonymous-auth`.
    pub anonymous: bool,
}
