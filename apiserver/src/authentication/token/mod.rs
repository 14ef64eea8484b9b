//! Mirrors k8s.io/apiserver/pkg/authentication/authenticator (`Token`) and
//! `token/union/union.go`: the authenticators of a bearer token, tried in order. One that does
//! not know the token says nothing (another may); one that knows it and finds it bad says why; the
//! first that finds a user wins.
//!
//! - [`tokenfile`]: `--token-auth-file`, static tokens for teaching.
//! - [`bootstrap`]: `--enable-bootstrap-token-auth`, the bootstrap tokens of `kube-system`'s
//!   `bootstrap.kubernetes.io/token` Secrets, with which a joining node asks for its certificate.
//! - Service account tokens: [`crate::serviceaccount::jwt::JwtTokenAuthenticator`].

pub mod bootstrap;
pub mod tokenfile;

use apimachinery::error::aggregate;

use crate::authentication::user::UserInfo;

/// What authenticates a bearer token.
pub trait TokenAuthenticator: Send + Sync {
    /// The token's user; None when this authenticator does not know such a token; an error when
    /// it does and the token is not (or no longer) good. `audiences`: who the token must be for.
    fn authenticate_token(&self, token: &str, audiences: &[String]) -> Result<Option<UserInfo>, String>;
}

/// The token authenticators, in order (`unionAuthTokenHandler`).
#[derive(Default)]
pub struct Union(pub Vec<Box<dyn TokenAuthenticator>>);

impl TokenAuthenticator for Union {
    fn authenticate_token(&self, token: &str, audiences: &[String]) -> Result<Option<UserInfo>, String> {
        let mut errors = Vec::new();
        for authenticator in &self.0 {
            match authenticator.authenticate_token(token, audiences) {
                Ok(Some(user)) => return Ok(Some(user)),
                Ok(None) => {}
                Err(e) => errors.push(e),
            }
        }
        if errors.is_empty() { Ok(None) } else { Err(aggregate(&errors)) }
    }
}
