//! Mirrors kube-controller-manager's pkg/controller/client_builder.go and controller-manager's
//! clientbuilder/client_builder_dynamic.go: the client each controller talks to the API server
//! with, for everything but its watches (those use the controller manager's own client, see
//! [`crate::controller_context`]).
//!
//! Without `--use-service-account-credentials` every controller shares the controller manager's
//! own client ([`ControllerClientBuilder::Simple`]). With it, each controller is a user of its own
//! ([`ControllerClientBuilder::ServiceAccount`], Kubernetes' `DynamicControllerClientBuilder`):
//! 1. With the root client (the controller manager's credentials), make sure a ServiceAccount
//!    named after the controller exists in `kube-system` (AlreadyExists is as good as created).
//! 2. Ask for a token of it by TokenRequest (`POST .../serviceaccounts/<name>/token`), valid
//!    for [`TOKEN_EXPIRATION_SECONDS`] (an hour), with no audience (the API server's own).
//! 3. Build a client with the root's URL, CA and User-Agent but none of its credentials, whose
//!    requests carry `Authorization: Bearer <token>` from a cell that a background task renews
//!    at 80 % of the token's life, at once after a 401 ([`client::token_source`]). Each renewal
//!    repeats steps 1 and 2, so a deleted service account comes back.
//!
//! Until steps 1 and 2 first succeed (the API server starting, its RBAC policy not loaded yet)
//! they are retried, from half a second doubling to 30 s: the controller waits for its identity.
//!
//! The API server's RBAC bootstrap policy binds each such account, `kube-system/<name>`, to
//! the ClusterRole `system:controller:<name>`: a controller may then do only what its role says.

use std::time::Duration;

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::{Api, ObjectMeta, PostParams};

use crate::Result;

/// The namespace of the controllers' service accounts (Kubernetes' `metav1.NamespaceSystem`).
pub(crate) const SERVICE_ACCOUNT_NAMESPACE: &str = "kube-system";
/// How long a controller's token is asked to last (the dynamic builder's
/// `defaultExpirationSeconds`).
pub(crate) const TOKEN_EXPIRATION_SECONDS: i64 = 3600;
/// A token that the API server says lives less than this is taken to live this long: a shorter
/// life read from its expiration time is a clock skew between the two (as Kubernetes does).
pub(crate) const MIN_TOKEN_LIFETIME: Duration = Duration::from_secs(600);

/// How controllers get their clients (Kubernetes' `ControllerClientBuilder` interface).
pub(crate) enum ControllerClientBuilder {
    /// Every controller uses the controller manager's own client
    /// (`SimpleControllerClientBuilder`).
    Simple(kube::Client),
    /// Each controller authenticates as the service account `kube-system/<name>`
    /// (`DynamicControllerClientBuilder`); `root` and `config` are the controller manager's own.
    ServiceAccount { root: kube::Client, config: kube::Config },
}

impl ControllerClientBuilder {
    /// The client of the controller `name` (steps 1–3 above for [`Self::ServiceAccount`]).
    pub(crate) async fn client(&self, name: &str) -> Result<kube::Client> {
        match self {
            ControllerClientBuilder::Simple(client) => Ok(client.clone()),
            ControllerClientBuilder::ServiceAccount { root, config } => {
                let source = ServiceAccountTokenSource {
                    service_accounts: Api::namespaced(root.clone(), SERVICE_ACCOUNT_NAMESPACE),
                    name: name.to_string(),
                };
                // Until the account and its first token can be had (the API server may still be
                // starting, or its RBAC policy not loaded): the controller cannot run without.
                let mut wait = FIRST_TOKEN_RETRY;
                let token = loop {
                    match client::token_source::CachedTokenSource::new(source.clone()).await {
                        Ok(token) => break token,
                        Err(e) => {
                            tracing::warn!(target: "controllers", controller = name, error = %e, retry_in = ?wait, "cannot get the service account's token yet");
                            tokio::time::sleep(wait).await;
                            wait = (wait * 2).min(FIRST_TOKEN_RETRY_MAX);
                        }
                    }
                };
                tracing::info!(target: "controllers", controller = name, service_account = %format!("{SERVICE_ACCOUNT_NAMESPACE}/{name}"), "using service account credentials");
                Ok(client::token_source::client_with_token(config.clone(), token)?)
            }
        }
    }
}

/// The first wait when a controller's first token cannot be had; doubled up to the maximum.
const FIRST_TOKEN_RETRY: Duration = Duration::from_millis(500);
const FIRST_TOKEN_RETRY_MAX: Duration = Duration::from_secs(30);

/// Tokens of one controller's service account (the dynamic builder's `tokenSourceImpl`).
#[derive(Clone)]
struct ServiceAccountTokenSource {
    service_accounts: Api<ServiceAccount>,
    name: String,
}

impl client::token_source::TokenSource for ServiceAccountTokenSource {
    async fn token(&self) -> client::Result<client::token_source::Token> {
        // Step 1 (getOrCreateServiceAccount).
        if self.service_accounts.get_opt(&self.name).await.map_err(client::Error::Kube)?.is_none() {
            let sa = ServiceAccount {
                metadata: ObjectMeta { name: Some(self.name.clone()), namespace: Some(SERVICE_ACCOUNT_NAMESPACE.into()), ..ObjectMeta::default() },
                ..ServiceAccount::default()
            };
            let created = self.service_accounts.create(&PostParams::default(), &sa).await.map(|_| ());
            created_or_exists(created).map_err(client::Error::Kube)?;
            tracing::info!(target: "controllers", service_account = %format!("{SERVICE_ACCOUNT_NAMESPACE}/{}", self.name), "created service account");
        }
        // Step 2.
        let request = TokenRequest {
            spec: Some(TokenRequestSpec { expiration_seconds: Some(TOKEN_EXPIRATION_SECONDS), ..TokenRequestSpec::default() }),
            ..TokenRequest::default()
        };
        let answer = self
            .service_accounts
            .create_token_request(&self.name, &PostParams::default(), &request)
            .await
            .map_err(client::Error::Kube)?;
        token_of(&self.name, answer, jiff::Timestamp::now())
    }
}

/// A create that lost a race to another creator counts as done (Kubernetes' `getOrCreateServiceAccount`
/// then reads the account back; nothing here needs it).
fn created_or_exists(result: Result<(), kube::Error>) -> Result<(), kube::Error> {
    match result {
        Err(kube::Error::Api(status)) if status.code == 409 && status.reason == "AlreadyExists" => Ok(()),
        other => other,
    }
}

/// The token of a TokenRequest's answer and how long it lives from `now`, at least
/// [`MIN_TOKEN_LIFETIME`].
fn token_of(name: &str, answer: TokenRequest, now: jiff::Timestamp) -> client::Result<client::token_source::Token> {
    let status = answer.status.unwrap_or_default();
    let (Some(token), Some(expiration)) = (status.token, status.expiration_timestamp) else {
        return Err(client::Error::Config(format!("TokenRequest for {SERVICE_ACCOUNT_NAMESPACE}/{name}: no token or expiration in the answer")));
    };
    let lifetime = Duration::try_from(expiration.0.duration_since(now)).unwrap_or(Duration::ZERO).max(MIN_TOKEN_LIFETIME);
    Ok(client::token_source::Token { token, expires_in: lifetime })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::authentication::v1::TokenRequestStatus;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn api_error(code: u16, reason: &str) -> kube::Error {
        kube::Error::Api(Box::new(kube::core::Status { code, reason: reason.into(), ..kube::core::Status::default() }))
    }

    #[test]
    fn already_exists_counts_as_created() {
        assert!(created_or_exists(Ok(())).is_ok());
        assert!(created_or_exists(Err(api_error(409, "AlreadyExists"))).is_ok());
        assert!(created_or_exists(Err(api_error(409, "Conflict"))).is_err());
        assert!(created_or_exists(Err(api_error(403, "Forbidden"))).is_err());
    }

    fn answer(token: Option<&str>, expires: Option<jiff::Timestamp>) -> TokenRequest {
        TokenRequest {
            status: Some(TokenRequestStatus { token: token.map(String::from), expiration_timestamp: expires.map(Time) }),
            ..TokenRequest::default()
        }
    }

    #[test]
    fn token_lifetime_is_read_from_the_expiration_at_least_ten_minutes() {
        let now: jiff::Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let hour = now + jiff::SignedDuration::from_secs(3600);
        let got = token_of("job-controller", answer(Some("abc"), Some(hour)), now).unwrap();
        assert_eq!(got, client::token_source::Token { token: "abc".into(), expires_in: Duration::from_secs(3600) });
        // A clock skew: the token seems to expire in a minute, or to have expired already.
        for expires in [now + jiff::SignedDuration::from_secs(60), now - jiff::SignedDuration::from_secs(60)] {
            assert_eq!(token_of("x", answer(Some("abc"), Some(expires)), now).unwrap().expires_in, MIN_TOKEN_LIFETIME);
        }
        assert!(token_of("x", answer(None, Some(hour)), now).is_err());
        assert!(token_of("x", answer(Some("abc"), None), now).is_err());
        assert!(token_of("x", TokenRequest::default(), now).is_err());
    }

    #[tokio::test]
    async fn the_simple_builder_hands_out_the_root_client() {
        let root = kube::Client::try_from(kube::Config::new("http://127.0.0.1:1".parse().unwrap())).unwrap();
        let builder = ControllerClientBuilder::Simple(root);
        assert!(builder.client("job-controller").await.is_ok());
    }
}
