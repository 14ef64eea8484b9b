//! Mirrors kubelet's pkg/kubelet/server/auth.go (with the filter of server.go's
//! `InstallAuthFilter` and cmd/kubelet/app/auth.go's `BuildAuth`): who may call the node agent's
//! API, asked of the API server.
//!
//! One request, step by step:
//! 1. Authenticate. A client certificate the TLS handshake verified against `--client-ca-file`
//!    names the user (CN) and its groups (O); else a bearer token is reviewed by the API server
//!    (`--authentication-token-webhook`: a TokenReview, its answer cached for
//!    `--authentication-token-webhook-cache-ttl`); else the caller is `system:anonymous` if
//!    `--anonymous-auth`. Anything else — a token the API server does not take included — is
//!    401 `Unauthorized`.
//! 2. The request's attributes ([`request_attributes`]): the verb from the method, the resource
//!    `nodes` with a subresource from the path (`/stats` → stats, `/metrics` → metrics, `/logs` →
//!    log, `/spec` → spec, `/checkpoint` → checkpoint, anything else — exec, attach,
//!    port-forward, container logs, `/pods`, `/healthz` — proxy), the name this node's.
//! 3. Authorize: `--authorization-mode=AlwaysAllow`, or `Webhook`: a SubjectAccessReview the API
//!    server answers (RBAC: `system:kubelet-api-admin` has nodes/proxy; `system:masters` has
//!    everything), allowed answers cached for `--authorization-webhook-cache-authorized-ttl`,
//!    denied ones for `--authorization-webhook-cache-unauthorized-ttl`. Denied is 403
//!    `Forbidden (user=…, verb=…, resource=nodes, subresource=…)`; a review that fails is 500.
//!
//! The defaults are the kubelet's flags' (anonymous, AlwaysAllow); `kubelab up` runs its agent as
//! kubeadm configures a kubelet: a client CA, no anonymous, webhook authentication and
//! authorization.

use std::collections::{BTreeMap, HashMap};
use std::hash::Hash;
use std::str::FromStr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec, UserInfo};
use k8s_openapi::api::authorization::v1::{ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec};
use kube::Api;
use kube::api::PostParams;

/// The most answers a cache keeps; a full cache drops what has expired, then everything.
const CACHE_CAPACITY: usize = 4096;

/// `--authorization-mode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AuthorizationMode {
    /// Every authenticated (or anonymous) caller may do anything: the kubelet's default.
    AlwaysAllow,
    /// Ask the API server with a SubjectAccessReview.
    Webhook,
}

impl FromStr for AuthorizationMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "AlwaysAllow" => Ok(AuthorizationMode::AlwaysAllow),
            "Webhook" => Ok(AuthorizationMode::Webhook),
            other => Err(format!("unknown authorization mode {other:?}: AlwaysAllow or Webhook")),
        }
    }
}

/// The authentication and authorization flags (the kubelet's `authentication` and
/// `authorization` configuration).
#[derive(Clone, Debug)]
pub struct AuthOptions {
    /// `--anonymous-auth` (true): a caller without credentials is `system:anonymous`.
    pub anonymous: bool,
    /// `--authentication-token-webhook` (false): bearer tokens are reviewed by the API server.
    pub token_webhook: bool,
    /// `--authentication-token-webhook-cache-ttl` (2m).
    pub token_webhook_cache_ttl: Duration,
    /// `--authorization-mode` (AlwaysAllow).
    pub mode: AuthorizationMode,
    /// `--authorization-webhook-cache-authorized-ttl` (5m) and `…-unauthorized-ttl` (30s).
    pub authorized_ttl: Duration,
    pub unauthorized_ttl: Duration,
}

impl Default for AuthOptions {
    fn default() -> Self {
        AuthOptions {
            anonymous: true,
            token_webhook: false,
            token_webhook_cache_ttl: Duration::from_secs(120),
            mode: AuthorizationMode::AlwaysAllow,
            authorized_ttl: Duration::from_secs(300),
            unauthorized_ttl: Duration::from_secs(30),
        }
    }
}

/// What the API server is asked (a trait so the unit tests can answer instead).
pub(crate) trait Reviewer: Send + Sync {
    /// A TokenReview: the token's user, `Ok(None)` if the API server does not take it.
    fn review_token(&self, token: String) -> BoxFuture<'static, Result<Option<UserInfo>, String>>;
    /// A SubjectAccessReview: allowed or not.
    fn review_access(&self, review: SubjectAccessReview) -> BoxFuture<'static, Result<bool, String>>;
}

/// The API server answers, through the agent's own credentials (the `system:node` role may
/// create both reviews).
pub(crate) struct ApiReviewer(pub(crate) kube::Client);

impl Reviewer for ApiReviewer {
    fn review_token(&self, token: String) -> BoxFuture<'static, Result<Option<UserInfo>, String>> {
        let api = Api::<TokenReview>::all(self.0.clone());
        Box::pin(async move {
            let review = TokenReview { spec: TokenReviewSpec { token, audiences: None }, ..Default::default() };
            let answer = api.create(&PostParams::default(), &review).await.map_err(|e| format!("TokenReview: {e}"))?;
            let status = answer.status.unwrap_or_default();
            if let Some(error) = status.error.filter(|e| !e.is_empty()) {
                tracing::debug!(target: "kubelet::server", error, "token not authenticated");
            }
            Ok(status.authenticated.unwrap_or(false).then(|| status.user.unwrap_or_default()))
        })
    }

    fn review_access(&self, review: SubjectAccessReview) -> BoxFuture<'static, Result<bool, String>> {
        let api = Api::<SubjectAccessReview>::all(self.0.clone());
        Box::pin(async move {
            let answer = api.create(&PostParams::default(), &review).await.map_err(|e| format!("SubjectAccessReview: {e}"))?;
            Ok(answer.status.is_some_and(|s| s.allowed))
        })
    }
}

/// What a request's credentials are (step 1's input).
pub(crate) enum Credentials {
    /// The verified client certificate's subject.
    Certificate(pki::Subject),
    Bearer(String),
    None,
}

/// Why a request is refused: the status and the kubelet's words.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Refusal {
    pub(crate) status: u16,
    pub(crate) message: String,
}

/// The attributes a request is authorized on (step 2).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Attributes {
    pub(crate) verb: &'static str,
    pub(crate) subresource: &'static str,
}

/// Step 2 (auth.go's `GetRequestAttributes`): the verb from the method, the subresource of
/// `nodes` from the path.
pub(crate) fn request_attributes(method: &str, path: &str) -> Attributes {
    let verb = match method {
        "POST" => "create",
        "GET" | "HEAD" => "get",
        "PUT" => "update",
        "PATCH" => "patch",
        "DELETE" => "delete",
        _ => "",
    };
    let is_subpath = |prefix: &str| path == prefix || path.starts_with(&format!("{}/", prefix.trim_end_matches('/')));
    let subresource = [("/stats", "stats"), ("/metrics", "metrics"), ("/logs", "log"), ("/checkpoint", "checkpoint"), ("/spec", "spec")]
        .into_iter()
        .find(|(prefix, _)| is_subpath(prefix))
        .map_or("proxy", |(_, sub)| sub);
    Attributes { verb, subresource }
}

/// Answers kept until they expire.
struct TtlCache<K, V> {
    entries: Mutex<HashMap<K, (V, Instant)>>,
}

impl<K: Eq + Hash, V: Clone> TtlCache<K, V> {
    fn new() -> Self {
        TtlCache { entries: Mutex::new(HashMap::new()) }
    }

    fn get(&self, key: &K) -> Option<V> {
        let entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        entries.get(key).filter(|(_, until)| *until > Instant::now()).map(|(v, _)| v.clone())
    }

    fn insert(&self, key: K, value: V, ttl: Duration) {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        if entries.len() >= CACHE_CAPACITY {
            let now = Instant::now();
            entries.retain(|_, (_, until)| *until > now);
            if entries.len() >= CACHE_CAPACITY {
                entries.clear();
            }
        }
        entries.insert(key, (value, Instant::now() + ttl));
    }
}

/// A user and attributes, as the authorization cache knows them.
type AccessKey = (String, String, Vec<String>, BTreeMap<String, Vec<String>>, Attributes);

/// The node agent's authenticator and authorizer (kubelet's `KubeletAuth`).
pub(crate) struct KubeletAuth {
    options: AuthOptions,
    node_name: String,
    /// The API server; `None` in standalone mode, where only certificates, anonymous and
    /// AlwaysAllow can work.
    reviewer: Option<Arc<dyn Reviewer>>,
    tokens: TtlCache<String, Option<UserInfo>>,
    decisions: TtlCache<AccessKey, bool>,
}

impl KubeletAuth {
    /// Fails as the kubelet does when webhook modes are asked for without an API server.
    pub(crate) fn new(options: AuthOptions, node_name: String, reviewer: Option<Arc<dyn Reviewer>>) -> Result<KubeletAuth, String> {
        if reviewer.is_none() {
            if options.token_webhook {
                return Err("no client provided, cannot use webhook authentication (--authentication-token-webhook needs --kubeconfig)".into());
            }
            if options.mode == AuthorizationMode::Webhook {
                return Err("no client provided, cannot use webhook authorization (--authorization-mode=Webhook needs --kubeconfig)".into());
            }
        }
        Ok(KubeletAuth { options, node_name, reviewer, tokens: TtlCache::new(), decisions: TtlCache::new() })
    }

    /// Steps 1 to 3 for one request: `Ok` with the caller if it may go on.
    pub(crate) async fn check(&self, credentials: Credentials, method: &str, path: &str) -> Result<UserInfo, Refusal> {
        // Step 1.
        let user = self.authenticate(credentials).await?;
        // Step 2.
        let attrs = request_attributes(method, path);
        // Step 3.
        let describe = || {
            format!("user={}, verb={}, resource=nodes, subresource={}", user.username.as_deref().unwrap_or(""), attrs.verb, attrs.subresource)
        };
        match self.authorize(&user, &attrs).await {
            Ok(true) => Ok(user),
            Ok(false) => {
                tracing::info!(target: "kubelet::server", user = user.username.as_deref().unwrap_or(""), verb = attrs.verb, subresource = attrs.subresource, path, "forbidden");
                Err(Refusal { status: 403, message: format!("Forbidden ({})", describe()) })
            }
            Err(e) => {
                tracing::warn!(target: "kubelet::server", error = %e, path, "authorization failed");
                Err(Refusal { status: 500, message: format!("Authorization error ({})", describe()) })
            }
        }
    }

    async fn authenticate(&self, credentials: Credentials) -> Result<UserInfo, Refusal> {
        let unauthorized = || Refusal { status: 401, message: "Unauthorized".into() };
        match credentials {
            Credentials::Certificate(subject) if !subject.common_name.is_empty() => {
                let mut groups = subject.organizations;
                groups.push("system:authenticated".into());
                Ok(UserInfo { username: Some(subject.common_name), groups: Some(groups), ..Default::default() })
            }
            Credentials::Bearer(token) => {
                let Some(reviewer) = self.reviewer.as_ref().filter(|_| self.options.token_webhook) else {
                    return Err(unauthorized());
                };
                let user = match self.tokens.get(&token) {
                    Some(user) => user,
                    None => {
                        let user = reviewer.review_token(token.clone()).await.map_err(|e| {
                            tracing::warn!(target: "kubelet::server", error = %e, "token review failed");
                            unauthorized()
                        })?;
                        self.tokens.insert(token, user.clone(), self.options.token_webhook_cache_ttl);
                        user
                    }
                };
                user.ok_or_else(unauthorized)
            }
            Credentials::Certificate(_) | Credentials::None if self.options.anonymous => Ok(UserInfo {
                username: Some("system:anonymous".into()),
                groups: Some(vec!["system:unauthenticated".into()]),
                ..Default::default()
            }),
            Credentials::Certificate(_) | Credentials::None => Err(unauthorized()),
        }
    }

    async fn authorize(&self, user: &UserInfo, attrs: &Attributes) -> Result<bool, String> {
        let Some(reviewer) = self.reviewer.as_ref().filter(|_| self.options.mode == AuthorizationMode::Webhook) else {
            return Ok(true);
        };
        let extra: BTreeMap<String, Vec<String>> = user.extra.clone().unwrap_or_default().into_iter().collect();
        let key = (
            user.username.clone().unwrap_or_default(),
            user.uid.clone().unwrap_or_default(),
            user.groups.clone().unwrap_or_default(),
            extra.clone(),
            attrs.clone(),
        );
        if let Some(allowed) = self.decisions.get(&key) {
            return Ok(allowed);
        }
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: user.username.clone(),
                uid: user.uid.clone(),
                groups: user.groups.clone(),
                extra: user.extra.clone(),
                resource_attributes: Some(ResourceAttributes {
                    verb: Some(attrs.verb.into()),
                    group: Some(String::new()),
                    version: Some("v1".into()),
                    resource: Some("nodes".into()),
                    subresource: Some(attrs.subresource.into()),
                    name: Some(self.node_name.clone()),
                    ..Default::default()
                }),
                ..Default::default()
            },
            ..Default::default()
        };
        let allowed = reviewer.review_access(review).await?;
        let ttl = if allowed { self.options.authorized_ttl } else { self.options.unauthorized_ttl };
        self.decisions.insert(key, allowed, ttl);
        Ok(allowed)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    #[test]
    fn attributes_follow_the_kubelets_table() {
        let cases = [
            ("GET", "/stats/summary", "get", "stats"),
            ("GET", "/stats", "get", "stats"),
            ("GET", "/metrics", "get", "metrics"),
            ("GET", "/metrics/cadvisor", "get", "metrics"),
            ("GET", "/logs/syslog", "get", "log"),
            ("GET", "/spec/", "get", "spec"),
            ("POST", "/checkpoint/ns/pod/c", "create", "checkpoint"),
            ("POST", "/exec/ns/pod/c", "create", "proxy"),
            ("GET", "/exec/ns/pod/c", "get", "proxy"),
            ("GET", "/containerLogs/ns/pod/c", "get", "proxy"),
            ("POST", "/portForward/ns/pod", "create", "proxy"),
            ("GET", "/pods", "get", "proxy"),
            ("HEAD", "/healthz", "get", "proxy"),
            ("PUT", "/x", "update", "proxy"),
            ("PATCH", "/x", "patch", "proxy"),
            ("DELETE", "/x", "delete", "proxy"),
            // Only whole path segments match: /statsfoo is not /stats.
            ("GET", "/statsfoo", "get", "proxy"),
            ("GET", "/metricsx/y", "get", "proxy"),
        ];
        for (method, path, verb, subresource) in cases {
            assert_eq!(request_attributes(method, path), Attributes { verb, subresource }, "{method} {path}");
        }
    }

    /// The API server, as far as these tests go: one good token, and jane may act on
    /// nodes/proxy. It counts its answers.
    #[derive(Default)]
    struct FakeApi {
        token_reviews: AtomicUsize,
        access_reviews: AtomicUsize,
        asked: Mutex<Vec<SubjectAccessReview>>,
    }

    impl Reviewer for FakeApi {
        fn review_token(&self, token: String) -> BoxFuture<'static, Result<Option<UserInfo>, String>> {
            self.token_reviews.fetch_add(1, Ordering::SeqCst);
            let user = (token == "good").then(|| UserInfo {
                username: Some("system:serviceaccount:default:robot".into()),
                uid: Some("u-1".into()),
                groups: Some(vec!["system:serviceaccounts".into(), "system:authenticated".into()]),
                extra: None,
            });
            Box::pin(async move { if token == "broken" { Err("connection refused".into()) } else { Ok(user) } })
        }

        fn review_access(&self, review: SubjectAccessReview) -> BoxFuture<'static, Result<bool, String>> {
            self.access_reviews.fetch_add(1, Ordering::SeqCst);
            let allowed = review.spec.user.as_deref() == Some("jane")
                && review.spec.resource_attributes.as_ref().and_then(|a| a.subresource.as_deref()) == Some("proxy");
            self.asked.lock().unwrap().push(review);
            Box::pin(async move { Ok(allowed) })
        }
    }

    fn kubeadm() -> AuthOptions {
        AuthOptions { anonymous: false, token_webhook: true, mode: AuthorizationMode::Webhook, ..Default::default() }
    }

    fn subject(name: &str, groups: &[&str]) -> Credentials {
        Credentials::Certificate(pki::Subject { common_name: name.into(), organizations: groups.iter().map(|g| g.to_string()).collect() })
    }

    #[tokio::test]
    async fn kubeadms_settings_refuse_the_anonymous_and_ask_the_api_server() {
        let api = Arc::new(FakeApi::default());
        let auth = KubeletAuth::new(kubeadm(), "n1".into(), Some(api.clone())).unwrap();
        let unauthorized = Refusal { status: 401, message: "Unauthorized".into() };
        assert_eq!(auth.check(Credentials::None, "POST", "/exec/d/web/app").await.unwrap_err(), unauthorized);
        assert_eq!(auth.check(Credentials::Bearer("bad".into()), "GET", "/pods").await.unwrap_err(), unauthorized);
        assert_eq!(auth.check(Credentials::Bearer("broken".into()), "GET", "/pods").await.unwrap_err(), unauthorized);

        let user = auth.check(subject("jane", &["devs"]), "POST", "/exec/d/web/app").await.unwrap();
        assert_eq!(user.groups.unwrap(), ["devs", "system:authenticated"]);
        let asked = api.asked.lock().unwrap()[0].clone();
        let attrs = asked.spec.resource_attributes.unwrap();
        assert_eq!(
            (attrs.verb.as_deref(), attrs.resource.as_deref(), attrs.subresource.as_deref(), attrs.name.as_deref()),
            (Some("create"), Some("nodes"), Some("proxy"), Some("n1"))
        );

        let refused = auth.check(Credentials::Bearer("good".into()), "GET", "/metrics").await.unwrap_err();
        assert_eq!(
            refused,
            Refusal {
                status: 403,
                message: "Forbidden (user=system:serviceaccount:default:robot, verb=get, resource=nodes, subresource=metrics)".into()
            }
        );
    }

    #[tokio::test]
    async fn answers_are_cached() {
        let api = Arc::new(FakeApi::default());
        let auth = KubeletAuth::new(kubeadm(), "n1".into(), Some(api.clone())).unwrap();
        for _ in 0..3 {
            assert_eq!(auth.check(Credentials::Bearer("good".into()), "GET", "/pods").await.unwrap_err().status, 403);
            assert!(auth.check(subject("jane", &[]), "GET", "/pods").await.is_ok());
        }
        assert_eq!(api.token_reviews.load(Ordering::SeqCst), 1, "one TokenReview for three requests");
        assert_eq!(api.access_reviews.load(Ordering::SeqCst), 2, "one review per user and attributes");
        // Other attributes are another question.
        assert!(auth.check(subject("jane", &[]), "POST", "/exec/d/web/app").await.is_ok());
        assert_eq!(api.access_reviews.load(Ordering::SeqCst), 3);

        let short = AuthOptions { unauthorized_ttl: Duration::ZERO, ..kubeadm() };
        let auth = KubeletAuth::new(short, "n1".into(), Some(api.clone())).unwrap();
        for _ in 0..2 {
            assert!(auth.check(subject("bob", &[]), "GET", "/pods").await.is_err());
        }
        assert_eq!(api.access_reviews.load(Ordering::SeqCst), 5, "a denial past its TTL is asked again");
    }

    #[tokio::test]
    async fn the_kubelets_defaults_let_anyone_in() {
        let auth = KubeletAuth::new(AuthOptions::default(), "n1".into(), None).unwrap();
        let user = auth.check(Credentials::None, "POST", "/exec/d/web/app").await.unwrap();
        assert_eq!((user.username.as_deref(), user.groups.unwrap()), (Some("system:anonymous"), vec!["system:unauthenticated".to_string()]));
        // Without the token webhook a bearer token authenticates nobody.
        assert_eq!(auth.check(Credentials::Bearer("good".into()), "GET", "/pods").await.unwrap_err().status, 401);
        assert!(KubeletAuth::new(kubeadm(), "n1".into(), None).err().is_some_and(|e| e.contains("no client provided")));
    }
}
