//! Mirrors kube-proxy's pkg/proxy/healthcheck/proxier_health.go: `/healthz` and `/livez` on
//! `--healthz-bind-address` (0.0.0.0:10256).
//!
//! Healthy means the rules were written recently: a successful sync within the health timeout
//! (twice `--iptables-sync-period`, as kube-proxy sets it). Since a sync runs at least once a
//! sync period, a proxy whose syncs keep failing (or that never synced) turns unhealthy. The
//! answer is kube-proxy's JSON: `{"lastUpdated": "...", "currentTime": "..."}`, 200 or 503.
//!
//! The same listener serves `/metrics` ([`crate::metrics`]; kube-proxy has a second listener,
//! `--metrics-bind-address`, 127.0.0.1:10249, for it) and kubelab's
//! `/debug/trace/services/<uid>`.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use axum::Router;
use axum::http::{StatusCode, header};
use axum::routing::get;

use crate::error::{Error, Result};

pub struct ProxierHealth {
    timeout: Duration,
    // Written after each sync, read per request: a plain lock held for a copy.
    last_updated: Mutex<Option<(Instant, SystemTime)>>,
}

impl ProxierHealth {
    pub fn new(timeout: Duration) -> ProxierHealth {
        ProxierHealth { timeout, last_updated: Mutex::new(None) }
    }

    /// A sync succeeded now.
    pub fn updated(&self) {
        *self.last_updated.lock().expect("health lock") = Some((Instant::now(), SystemTime::now()));
    }

    /// The status code and the JSON body.
    pub fn status(&self) -> (StatusCode, String) {
        let last = *self.last_updated.lock().expect("health lock");
        let healthy = last.is_some_and(|(at, _)| at.elapsed() < self.timeout);
        let fmt = |t: SystemTime| chrono::DateTime::<chrono::Utc>::from(t).to_rfc3339_opts(chrono::SecondsFormat::Nanos, true);
        let body = serde_json::json!({
            "lastUpdated": last.map(|(_, t)| fmt(t)).unwrap_or_default(),
            "currentTime": fmt(SystemTime::now()),
        });
        (if healthy { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE }, body.to_string())
    }
}

/// Serves until the task is dropped.
pub async fn serve(addr: SocketAddr, health: Arc<ProxierHealth>, metrics: prometheus::Registry) -> Result<()> {
    let listener = tokio::net::TcpListener::bind(addr).await.map_err(|e| Error::Listen(addr, e))?;
    serve_on(listener, health, metrics).await
}

/// `/healthz`, `/livez`, `/metrics` (the registry in Prometheus' text format) and kubelab's
/// `/debug/trace/services/<uid>` (this proxy's syncs of a Service, which the API server gathers
/// for `kubelab trace svc/<name>`).
pub async fn serve_on(listener: tokio::net::TcpListener, health: Arc<ProxierHealth>, metrics: prometheus::Registry) -> Result<()> {
    let addr = listener.local_addr().map_err(|e| Error::Listen(SocketAddr::from(([0, 0, 0, 0], 0)), e))?;
    let answer = move || {
        let (code, body) = health.status();
        async move { (code, [(header::CONTENT_TYPE, "application/json")], body) }
    };
    let render = move || {
        let text = prometheus::TextEncoder::new().encode_to_string(&metrics.gather()).unwrap_or_default();
        async move { ([(header::CONTENT_TYPE, prometheus::TEXT_FORMAT)], text) }
    };
    let trace = |axum::extract::Path(uid): axum::extract::Path<String>| async move {
        let steps = serde_json::to_string(&podtrace::recorder().steps(&uid, &["proxy"])).unwrap_or_else(|_| "[]".into());
        ([(header::CONTENT_TYPE, "application/json")], steps)
    };
    let app = Router::new()
        .route("/healthz", get(answer.clone()))
        .route("/livez", get(answer))
        .route("/metrics", get(render))
        .route("/debug/trace/services/{uid}", get(trace));
    axum::serve(listener, app).await.map_err(|e| Error::Listen(addr, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unhealthy_before_the_first_sync_and_after_the_timeout() {
        let h = ProxierHealth::new(Duration::from_millis(50));
        let (code, body) = h.status();
        assert_eq!(code, StatusCode::SERVICE_UNAVAILABLE);
        assert!(body.contains("\"lastUpdated\":\"\""), "{body}");
        h.updated();
        assert_eq!(h.status().0, StatusCode::OK);
        std::thread::sleep(Duration::from_millis(60));
        assert_eq!(h.status().0, StatusCode::SERVICE_UNAVAILABLE);
    }

    #[tokio::test]
    async fn serves_healthz_livez_and_metrics() {
        let h = Arc::new(ProxierHealth::new(Duration::from_secs(60)));
        h.updated();
        let metrics = crate::metrics::Metrics::new();
        metrics.service_changes_total.inc_by(3);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(serve_on(listener, h, metrics.registry.clone()));
        let get = |path: &'static str| async move {
            use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
            let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
            s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes()).await.unwrap();
            let mut out = String::new();
            s.read_to_string(&mut out).await.unwrap();
            out
        };
        let out = get("/metrics").await;
        assert!(out.starts_with("HTTP/1.1 200"), "{out}");
        assert!(out.contains("text/plain; version=0.0.4"), "{out}");
        assert!(out.contains("\nkubeproxy_sync_proxy_rules_service_changes_total 3\n"), "{out}");
        assert!(out.contains("# TYPE kubeproxy_sync_proxy_rules_duration_seconds histogram"), "{out}");
        for path in ["/healthz", "/livez"] {
            use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
            let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
            s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes()).await.unwrap();
            let mut out = String::new();
            s.read_to_string(&mut out).await.unwrap();
            assert!(out.starts_with("HTTP/1.1 200"), "{path}: {out}");
            assert!(out.contains("\"currentTime\""), "{path}: {out}");
        }
        podtrace::recorder().record("svc-uid-h", podtrace::Step::now("proxy", "sync"));
        podtrace::recorder().record("svc-uid-h", podtrace::Step::now("apiserver", "request"));
        let out = get("/debug/trace/services/svc-uid-h").await;
        assert!(out.starts_with("HTTP/1.1 200") && out.contains("\"name\":\"sync\"") && !out.contains("request"), "{out}");
    }
}
