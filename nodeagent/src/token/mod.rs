//! Mirrors pkg/kubelet/token/token_manager.go: the service account tokens the node agent asks the
//! API server for (`TokenRequest`, `POST …/serviceaccounts/<name>/token`) and writes into the
//! projected volumes of its pods.
//!
//! 1. A projected `serviceAccountToken` source becomes a TokenRequest bound to the pod (name and
//!    UID), for the source's audience and `expirationSeconds` ([`crate::volumemanager`]).
//! 2. [`Manager::get_service_account_token`] answers it from its cache while the cached token is
//!    fresh, and asks the API server otherwise. A token needs a refresh once it is older than
//!    24 hours or has less than a fifth of its lifetime left, each moved earlier by a jitter of
//!    up to 10 s so that the tokens of many pods do not all come due on the same sync.
//! 3. When the API server cannot be asked (down, partitioned), a cached token that has not
//!    expired yet is returned as it is: the pod keeps a working token for the rest of its life.
//! 4. The volume manager calls it on every sync of the pod, so a token is rewritten (atomically,
//!    by the atomic writer) on the first sync after it came due — within the resync period.
//! 5. [`Manager::delete_service_account_token`] forgets a pod's tokens when its volumes are torn
//!    down; expired tokens are dropped at most once a minute (kubelet's cleanup loop).
//!
//! The cache key is the account, its namespace, the audiences, the lifetime and the bound pod,
//! as kubelet's `keyFunc`: two volumes asking the same get the same token.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::Api;
use kube::api::PostParams;
use tracing::{debug, warn};

use crate::error::{Error, Result};

/// A token this old is refreshed, whatever its lifetime (kubelet's `maxTTL`).
const MAX_TTL: Duration = Duration::from_secs(24 * 3600);
/// Refreshes come up to this much earlier, at random (kubelet's `maxJitter`).
const MAX_JITTER: Duration = Duration::from_secs(10);
/// Expired tokens are dropped at most this often (kubelet's `gcPeriod`).
const GC_PERIOD: Duration = Duration::from_secs(60);

/// Asks the API server for a token: `(namespace, service account, request) → the answered request`.
pub(crate) type Fetch = Arc<dyn Fn(String, String, TokenRequest) -> BoxFuture<'static, Result<TokenRequest>> + Send + Sync>;
/// The current time; a test moves it.
pub(crate) type Clock = Arc<dyn Fn() -> Timestamp + Send + Sync>;

/// The node agent's service account tokens, cached; cheap to clone (one cache).
#[derive(Clone)]
pub(crate) struct Manager {
    cache: Arc<Mutex<Cache>>,
    fetch: Fetch,
    clock: Clock,
    /// The jitter, as a fraction of [`MAX_JITTER`]; a test fixes it.
    jitter: Arc<dyn Fn() -> f64 + Send + Sync>,
}

#[derive(Default)]
struct Cache {
    tokens: HashMap<String, TokenRequest>,
    last_cleanup: Option<Timestamp>,
}

impl Manager {
    /// Tokens from the API server `client` talks to (kubelet's `NewManager`).
    pub(crate) fn new(client: kube::Client) -> Self {
        let fetch: Fetch = Arc::new(move |namespace: String, name: String, request: TokenRequest| {
            let api = Api::<ServiceAccount>::namespaced(client.clone(), &namespace);
            Box::pin(async move { Ok(api.create_token_request(&name, &PostParams::default(), &request).await?) })
        });
        Self::with(fetch, Arc::new(Timestamp::now), Arc::new(rand::random::<f64>))
    }

    pub(crate) fn with(fetch: Fetch, clock: Clock, jitter: Arc<dyn Fn() -> f64 + Send + Sync>) -> Self {
        Manager { cache: Arc::default(), fetch, clock, jitter }
    }

    /// A token for service account `namespace/name` as `request` asks, from the cache while it is
    /// fresh (kubelet's `GetServiceAccountToken`).
    pub(crate) async fn get_service_account_token(&self, namespace: &str, name: &str, request: &TokenRequest) -> Result<TokenRequest> {
        let key = key(namespace, name, request);
        let cached = {
            let mut cache = self.lock();
            self.cleanup(&mut cache);
            cache.tokens.get(&key).cloned()
        };
        if let Some(token) = &cached
            && !self.requires_refresh(token)
        {
            return Ok(token.clone());
        }
        match (self.fetch)(namespace.to_string(), name.to_string(), request.clone()).await {
            Ok(token) => {
                if expiration(&token).is_none() {
                    return Err(Error::Invalid(format!(
                        "the token request for service account {namespace}/{name} was answered without an expiration time"
                    )));
                }
                debug!(target: "kubelet::token", namespace, service_account = name, expires = ?expiration(&token), "fetched a service account token");
                self.lock().tokens.insert(key, token.clone());
                Ok(token)
            }
            Err(e) => match cached {
                Some(token) if !self.expired(&token) => {
                    warn!(target: "kubelet::token", namespace, service_account = name, error = %e,
                        "could not refresh the service account token; the cached one has not expired and is kept");
                    Ok(token)
                }
                _ => Err(e),
            },
        }
    }

    /// Forgets every token bound to pod `pod_uid` (kubelet's `DeleteServiceAccountToken`).
    pub(crate) fn delete_service_account_token(&self, pod_uid: &str) {
        self.lock().tokens.retain(|_, token| bound_uid(token) != Some(pod_uid));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Cache> {
        self.cache.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Drops expired tokens, at most once per [`GC_PERIOD`].
    fn cleanup(&self, cache: &mut Cache) {
        let now = (self.clock)();
        if cache.last_cleanup.is_some_and(|last| now < last + signed(GC_PERIOD)) {
            return;
        }
        cache.last_cleanup = Some(now);
        cache.tokens.retain(|_, token| expiration(token).is_some_and(|exp| now <= exp));
    }

    fn expired(&self, token: &TokenRequest) -> bool {
        expiration(token).is_none_or(|exp| (self.clock)() > exp)
    }

    /// Older than 24 h, or within a fifth of its lifetime of expiring, each less a jitter.
    fn requires_refresh(&self, token: &TokenRequest) -> bool {
        let (Some(exp), Some(seconds)) = (expiration(token), token.spec.as_ref().and_then(|s| s.expiration_seconds)) else {
            return true;
        };
        let now = (self.clock)();
        let issued = exp - SignedDuration::from_secs(seconds);
        let jitter = SignedDuration::from_secs_f64((self.jitter)().clamp(0.0, 1.0) * MAX_JITTER.as_secs_f64());
        now > issued + signed(MAX_TTL) - jitter || now > exp - SignedDuration::from_secs(seconds * 20 / 100) - jitter
    }
}

fn signed(d: Duration) -> SignedDuration {
    SignedDuration::from_secs(d.as_secs() as i64)
}

fn expiration(token: &TokenRequest) -> Option<Timestamp> {
    token.status.as_ref().and_then(|s| s.expiration_timestamp.as_ref()).map(|t| t.0)
}

fn bound_uid(token: &TokenRequest) -> Option<&str> {
    token.spec.as_ref().and_then(|s| s.bound_object_ref.as_ref()).and_then(|r| r.uid.as_deref())
}

/// kubelet's `keyFunc`: account, namespace, audiences, lifetime, bound object.
fn key(namespace: &str, name: &str, request: &TokenRequest) -> String {
    let spec = request.spec.clone().unwrap_or_default();
    let bound = spec.bound_object_ref.as_ref().map(|r| {
        format!(
            "{}/{}/{}/{}",
            r.api_version.as_deref().unwrap_or_default(),
            r.kind.as_deref().unwrap_or_default(),
            r.name.as_deref().unwrap_or_default(),
            r.uid.as_deref().unwrap_or_default()
        )
    });
    format!("{name:?}/{namespace:?}/{:?}/{:?}/{bound:?}", spec.audiences.unwrap_or_default(), spec.expiration_seconds)
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};

    use k8s_openapi::api::authentication::v1::{BoundObjectReference, TokenRequestSpec, TokenRequestStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    use super::*;

    /// A fake API server: counts requests, answers with a token named after the count that
    /// expires `expirationSeconds` from the clock, or fails while `down` is set.
    struct Server {
        calls: AtomicUsize,
        down: std::sync::atomic::AtomicBool,
        now: AtomicI64,
    }

    fn manager() -> (Manager, Arc<Server>) {
        let server = Arc::new(Server { calls: AtomicUsize::new(0), down: false.into(), now: AtomicI64::new(1_000_000) });
        let s = server.clone();
        let fetch: Fetch = Arc::new(move |_ns, _name, mut request: TokenRequest| {
            let s = s.clone();
            Box::pin(async move {
                if s.down.load(Ordering::SeqCst) {
                    return Err(Error::NotReady("connection refused".into()));
                }
                let n = s.calls.fetch_add(1, Ordering::SeqCst) + 1;
                let spec = request.spec.get_or_insert_default();
                let seconds = *spec.expiration_seconds.get_or_insert(3600);
                let now = Timestamp::from_second(s.now.load(Ordering::SeqCst)).expect("time");
                request.status = Some(TokenRequestStatus {
                    token: Some(format!("token-{n}")),
                    expiration_timestamp: Some(Time(now + SignedDuration::from_secs(seconds))),
                });
                Ok(request)
            })
        });
        let c = server.clone();
        let clock: Clock = Arc::new(move || Timestamp::from_second(c.now.load(Ordering::SeqCst)).expect("time"));
        (Manager::with(fetch, clock, Arc::new(|| 0.0)), server)
    }

    fn request(pod_uid: &str, seconds: i64) -> TokenRequest {
        TokenRequest {
            spec: Some(TokenRequestSpec {
                expiration_seconds: Some(seconds),
                bound_object_ref: Some(BoundObjectReference {
                    api_version: Some("v1".into()),
                    kind: Some("Pod".into()),
                    name: Some("web".into()),
                    uid: Some(pod_uid.into()),
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    async fn token(m: &Manager, r: &TokenRequest) -> String {
        m.get_service_account_token("default", "default", r).await.expect("token").status.and_then(|s| s.token).expect("token")
    }

    #[tokio::test]
    async fn cached_until_a_fifth_of_the_lifetime_is_left() {
        let (m, server) = manager();
        let r = request("u1", 3600);
        assert_eq!(token(&m, &r).await, "token-1");
        server.now.fetch_add(2879, Ordering::SeqCst);
        assert_eq!(token(&m, &r).await, "token-1", "80 % of 3600 s is 2880 s");
        server.now.fetch_add(2, Ordering::SeqCst);
        assert_eq!(token(&m, &r).await, "token-2");
        assert_eq!(server.calls.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_long_token_is_refreshed_after_a_day() {
        let (m, server) = manager();
        let r = request("u1", 7 * 24 * 3600);
        assert_eq!(token(&m, &r).await, "token-1");
        server.now.fetch_add(24 * 3600 - 1, Ordering::SeqCst);
        assert_eq!(token(&m, &r).await, "token-1");
        server.now.fetch_add(2, Ordering::SeqCst);
        assert_eq!(token(&m, &r).await, "token-2");
    }

    #[tokio::test]
    async fn jitter_moves_the_refresh_earlier() {
        let (m, server) = manager();
        let m = Manager { jitter: Arc::new(|| 1.0), ..m };
        let r = request("u1", 3600);
        assert_eq!(token(&m, &r).await, "token-1");
        server.now.fetch_add(2871, Ordering::SeqCst);
        assert_eq!(token(&m, &r).await, "token-2", "10 s of jitter before 2880 s");
    }

    #[tokio::test]
    async fn an_unexpired_token_survives_a_failed_refresh() {
        let (m, server) = manager();
        let r = request("u1", 3600);
        assert_eq!(token(&m, &r).await, "token-1");
        server.down.store(true, Ordering::SeqCst);
        server.now.fetch_add(3000, Ordering::SeqCst);
        assert_eq!(token(&m, &r).await, "token-1", "due, not expired: kept");
        server.now.fetch_add(601, Ordering::SeqCst);
        let err = m.get_service_account_token("default", "default", &r).await.expect_err("expired");
        assert_eq!(err.to_string(), "connection refused");
        server.down.store(false, Ordering::SeqCst);
        assert_eq!(token(&m, &r).await, "token-2");
    }

    #[tokio::test]
    async fn requests_differ_by_pod_audience_and_lifetime() {
        let (m, _server) = manager();
        let a = request("u1", 3600);
        let b = request("u2", 3600);
        let mut c = request("u1", 3600);
        c.spec.get_or_insert_default().audiences = Some(vec!["vault".into()]);
        let d = request("u1", 7200);
        assert_eq!(token(&m, &a).await, "token-1");
        assert_eq!(token(&m, &b).await, "token-2");
        assert_eq!(token(&m, &c).await, "token-3");
        assert_eq!(token(&m, &d).await, "token-4");
        assert_eq!(token(&m, &a).await, "token-1");
        let other = m.get_service_account_token("default", "robot", &a).await.expect("token");
        assert_eq!(other.status.and_then(|s| s.token).as_deref(), Some("token-5"));
    }

    #[tokio::test]
    async fn a_pods_tokens_are_forgotten_with_it() {
        let (m, _server) = manager();
        let (a, b) = (request("u1", 3600), request("u2", 3600));
        token(&m, &a).await;
        token(&m, &b).await;
        m.delete_service_account_token("u1");
        assert_eq!(token(&m, &a).await, "token-3");
        assert_eq!(token(&m, &b).await, "token-2");
    }

    #[tokio::test]
    async fn expired_tokens_are_dropped_by_the_cleanup() {
        let (m, server) = manager();
        token(&m, &request("u1", 600)).await;
        server.now.fetch_add(601, Ordering::SeqCst);
        token(&m, &request("u2", 3600)).await;
        let keys: Vec<_> = m.lock().tokens.values().filter_map(|t| bound_uid(t).map(str::to_string)).collect();
        assert_eq!(keys, ["u2"]);
    }
}
