//! Mirrors client-go's transport/token_source.go: a bearer token kept fresh in a shared cell, and
//! a client whose every request carries the token the cell holds at that moment.
//!
//! What kube-controller-manager's dynamic client builder gives each controller (its timing:
//! staging/src/k8s.io/controller-manager/pkg/clientbuilder/client_builder_dynamic.go):
//! 1. [`CachedTokenSource::new`] asks its [`TokenSource`] for a first token; failing that, there
//!    is no client.
//! 2. A background task sleeps until [`REFRESH_FRACTION`] (80 %) of the token's life has passed,
//!    then asks for a new one. When that fails it retries with backoff ([`INITIAL_BACKOFF`],
//!    doubling up to [`MAX_BACKOFF`]) while requests keep the old token — past its expiry they
//!    get 401s until a new token comes.
//! 3. A 401 from the API server wakes the task to ask at once (client-go's
//!    `ResetTokenOlderThan`), unless the token is younger than [`MIN_RESET_AGE`]: a burst of
//!    401s makes one request for a token, not one each.
//! 4. The task ends once the last client holding the cell is gone.
//!
//! [`client_with_token`] builds the client: the root configuration's URL, CA and headers (its
//! User-Agent), none of its credentials, and a tower layer that writes `Authorization: Bearer`
//! from the cell into each request and tells the cell about 401s. Why not kube-rs's
//! `token_file`: it would mean writing a secret to disk for kube-rs to read back at least once a
//! minute; the cell hands the new token to the next request without either.

use std::future::Future;
use std::sync::{Arc, RwLock, Weak};
use std::time::Duration;

use http::HeaderValue;
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::{Error, Result};

/// The share of a token's life after which it is replaced (Kubernetes' dynamic builder refreshes
/// with 20 % of the life left).
pub const REFRESH_FRACTION: f64 = 0.8;
/// The first wait after a failed refresh; each further failure doubles it.
pub const INITIAL_BACKOFF: Duration = Duration::from_millis(500);
/// The longest wait between two attempts to refresh.
pub const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// A 401 does not replace a token younger than this.
pub const MIN_RESET_AGE: Duration = Duration::from_secs(10);

/// A bearer token and how long it is valid from when it was received.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Token {
    pub token: String,
    pub expires_in: Duration,
}

/// Where tokens come from (client-go's `oauth2.TokenSource`): a TokenRequest for a service
/// account in the controller manager.
pub trait TokenSource: Send + Sync + 'static {
    fn token(&self) -> impl Future<Output = Result<Token>> + Send;
}

/// The shared, refreshed token: cloned into every request's layer (client-go's
/// `cachingTokenSource`).
#[derive(Clone)]
pub struct CachedTokenSource {
    shared: Arc<Shared>,
}

struct Shared {
    // A std lock: read for a header clone on every request and never held across an await.
    current: RwLock<Current>,
    wake: Arc<Notify>,
}

impl Drop for Shared {
    fn drop(&mut self) {
        // The refresh task holds the cell weakly: wake it to find the cell gone and end.
        self.wake.notify_one();
    }
}

#[derive(Clone)]
struct Current {
    header: HeaderValue,
    received: Instant,
    expires: Instant,
}

impl CachedTokenSource {
    /// Asks `source` for a first token and starts the task that renews it (steps 1–4 above).
    pub async fn new<S: TokenSource>(source: S) -> Result<CachedTokenSource> {
        let current = fetch(&source).await?;
        let wake = Arc::new(Notify::new());
        let shared = Arc::new(Shared { current: RwLock::new(current), wake: wake.clone() });
        tokio::spawn(refresh_loop(source, Arc::downgrade(&shared), wake));
        Ok(CachedTokenSource { shared })
    }

    /// `Bearer <the current token>`.
    pub fn header(&self) -> HeaderValue {
        self.current().header
    }

    /// The API server refused the token (401): ask for a new one now (step 3).
    pub fn reset(&self) {
        self.shared.wake.notify_one();
    }

    fn current(&self) -> Current {
        // A poisoned lock only means a writer panicked between two whole assignments.
        self.shared.current.read().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

async fn fetch<S: TokenSource>(source: &S) -> Result<Current> {
    let token = source.token().await?;
    let mut header = HeaderValue::from_str(&format!("Bearer {}", token.token))
        .map_err(|e| Error::Config(format!("a bearer token that is no header value: {e}")))?;
    header.set_sensitive(true);
    let received = Instant::now();
    Ok(Current { header, received, expires: received + token.expires_in })
}

/// When a token received at `received` and expiring at `expires` is replaced (step 2).
pub(crate) fn refresh_at(received: Instant, expires: Instant) -> Instant {
    received + expires.saturating_duration_since(received).mul_f64(REFRESH_FRACTION)
}

/// The wait after a failed refresh, given the one before (none after a success).
pub(crate) fn next_backoff(previous: Option<Duration>) -> Duration {
    previous.map_or(INITIAL_BACKOFF, |b| (b * 2).min(MAX_BACKOFF))
}

async fn refresh_loop<S: TokenSource>(source: S, cell: Weak<Shared>, wake: Arc<Notify>) {
    let mut backoff: Option<Duration> = None;
    loop {
        let Some(current) = cell.upgrade().map(|s| s.current.read().unwrap_or_else(|e| e.into_inner()).clone()) else {
            return;
        };
        let deadline = match backoff {
            Some(wait) => Instant::now() + wait,
            None => refresh_at(current.received, current.expires),
        };
        let reset = tokio::select! {
            () = tokio::time::sleep_until(deadline) => false,
            () = wake.notified() => true,
        };
        let Some(shared) = cell.upgrade() else { return };
        if reset && backoff.is_none() && current.received.elapsed() < MIN_RESET_AGE {
            continue;
        }
        match fetch(&source).await {
            Ok(new) => {
                tracing::debug!(target: "client::token_source", expires_in_s = new.expires.duration_since(new.received).as_secs(), reset, "token renewed");
                *shared.current.write().unwrap_or_else(|e| e.into_inner()) = new;
                backoff = None;
            }
            Err(error) => {
                let wait = next_backoff(backoff);
                let expired = Instant::now() >= current.expires;
                tracing::warn!(target: "client::token_source", %error, retry_in_ms = wait.as_millis() as u64, expired, "renewing the token failed; keeping the old one");
                backoff = Some(wait);
            }
        }
    }
}

/// A client for the API server of `config` (its URL, CA, timeouts and headers, such as the
/// User-Agent) that authenticates with `token` only: the configuration's own credentials —
/// client certificate, token, basic auth, exec plugin — are dropped, because the API server's
/// union authenticator tries a client certificate before a bearer token, and the request would
/// be the root's.
pub fn client_with_token(mut config: kube::Config, token: CachedTokenSource) -> Result<kube::Client> {
    config.auth_info = kube::config::AuthInfo::default();
    let builder = kube::client::ClientBuilder::try_from(config).map_err(Error::Kube)?;
    let on_request = token.clone();
    let layer = tower::ServiceBuilder::new()
        .map_request(move |mut req: http::Request<kube::client::Body>| {
            req.headers_mut().insert(http::header::AUTHORIZATION, on_request.header());
            req
        })
        .map_response(move |resp: http::Response<Box<kube::client::DynBody>>| {
            if resp.status() == http::StatusCode::UNAUTHORIZED {
                token.reset();
            }
            resp
        })
        .into_inner();
    Ok(builder.with_layer(&layer).build())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;
    use std::sync::Mutex;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A fake token source: hands out the scripted answers in order ("t1", "t2", … when
    /// scripted `Ok`), and counts the calls.
    #[derive(Clone)]
    struct FakeSource {
        script: Arc<Mutex<VecDeque<Result<Duration, ()>>>>,
        calls: Arc<Mutex<usize>>,
    }

    impl FakeSource {
        fn new(script: Vec<Result<Duration, ()>>) -> FakeSource {
            FakeSource { script: Arc::new(Mutex::new(script.into())), calls: Arc::new(Mutex::new(0)) }
        }
        fn calls(&self) -> usize {
            *self.calls.lock().unwrap()
        }
    }

    impl TokenSource for FakeSource {
        fn token(&self) -> impl Future<Output = Result<Token>> + Send {
            let mut calls = self.calls.lock().unwrap();
            *calls += 1;
            let n = *calls;
            let next = self.script.lock().unwrap().pop_front().unwrap_or(Err(()));
            async move {
                match next {
                    Ok(expires_in) => Ok(Token { token: format!("t{n}"), expires_in }),
                    Err(()) => Err(Error::Config("fake: no token".into())),
                }
            }
        }
    }

    const HOUR: Duration = Duration::from_secs(3600);

    #[test]
    fn refreshes_at_eighty_percent_and_backs_off_doubling() {
        let t0 = Instant::now();
        assert_eq!(refresh_at(t0, t0 + HOUR), t0 + Duration::from_secs(2880));
        assert_eq!(refresh_at(t0, t0), t0, "an expired token is replaced at once");
        let waits: Vec<_> = std::iter::successors(Some(next_backoff(None)), |b| Some(next_backoff(Some(*b)))).take(8).collect();
        let ms: Vec<_> = waits.iter().map(|d| d.as_millis()).collect();
        assert_eq!(ms, [500, 1000, 2000, 4000, 8000, 16000, 30000, 30000]);
    }

    #[tokio::test(start_paused = true)]
    async fn renews_before_expiry_and_keeps_the_old_token_while_renewal_fails() {
        let source = FakeSource::new(vec![Ok(HOUR), Err(()), Err(()), Ok(HOUR)]);
        let cell = CachedTokenSource::new(source.clone()).await.unwrap();
        assert_eq!(cell.header(), "Bearer t1");
        // Just before 80 % of the hour: nothing asked yet.
        tokio::time::sleep(Duration::from_secs(2879)).await;
        assert_eq!(source.calls(), 1);
        // At 48 min the renewal fails, 0.5 s later again: the old token stays.
        tokio::time::sleep(Duration::from_millis(1600)).await;
        assert_eq!(source.calls(), 3);
        assert_eq!(cell.header(), "Bearer t1");
        // 1 s after the second failure the third attempt succeeds.
        tokio::time::sleep(Duration::from_millis(1000)).await;
        assert_eq!(source.calls(), 4);
        assert_eq!(cell.header(), "Bearer t4");
        // The next renewal is 48 min after that one.
        tokio::time::sleep(Duration::from_secs(2870)).await;
        assert_eq!(source.calls(), 4);
    }

    #[tokio::test(start_paused = true)]
    async fn a_401_renews_at_once_unless_the_token_is_fresh() {
        let source = FakeSource::new(vec![Ok(HOUR), Ok(HOUR)]);
        let cell = CachedTokenSource::new(source.clone()).await.unwrap();
        cell.reset();
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(source.calls(), 1, "a token of one second is not replaced for a 401");
        tokio::time::sleep(MIN_RESET_AGE).await;
        cell.reset();
        tokio::time::sleep(Duration::from_millis(1)).await;
        assert_eq!(source.calls(), 2);
        assert_eq!(cell.header(), "Bearer t2");
    }

    #[tokio::test(start_paused = true)]
    async fn no_first_token_no_cell() {
        assert!(CachedTokenSource::new(FakeSource::new(vec![Err(())])).await.is_err());
    }

    /// Accepts one connection on loopback, records the request head, and answers `status` with
    /// an empty JSON list body.
    async fn serve_once(listener: &tokio::net::TcpListener, status: &str) -> String {
        let (mut conn, _) = listener.accept().await.unwrap();
        let mut head = Vec::new();
        let mut buf = [0u8; 4096];
        while !head.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = conn.read(&mut buf).await.unwrap();
            assert!(n > 0, "connection closed before the request head");
            head.extend_from_slice(&buf[..n]);
        }
        let body = r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"fake","reason":"Unauthorized","code":401}"#;
        let answer = format!("HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}", body.len());
        conn.write_all(answer.as_bytes()).await.unwrap();
        String::from_utf8_lossy(&head).to_lowercase()
    }

    #[tokio::test]
    async fn requests_carry_the_cells_token_and_not_the_roots_credentials() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let mut config = kube::Config::new(url.parse().unwrap());
        config.auth_info.token = Some("root-token".to_string().into());
        config.headers.push((http::header::USER_AGENT, HeaderValue::from_static("kube-controller-manager/v0")));
        let source = FakeSource::new(vec![Ok(HOUR), Ok(HOUR)]);
        let cell = CachedTokenSource::new(source.clone()).await.unwrap();
        let client = client_with_token(config, cell.clone()).unwrap();

        let request = tokio::spawn({
            let client = client.clone();
            async move { client.request_text(http::Request::get("/api").body(Vec::new()).unwrap()).await }
        });
        let head = serve_once(&listener, "401 Unauthorized").await;
        assert!(request.await.unwrap().is_err());
        assert!(head.contains("authorization: bearer t1\r\n"), "{head}");
        assert!(!head.contains("root-token"), "{head}");
        assert!(head.contains("user-agent: kube-controller-manager/v0\r\n"), "{head}");
        // The 401 came for a token younger than MIN_RESET_AGE: no new token asked.
        tokio::task::yield_now().await;
        assert_eq!(source.calls(), 1);
    }
}
