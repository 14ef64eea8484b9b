//! Mirrors CoreDNS's prometheus, health and ready plugins: request counts and latencies under
//! CoreDNS's metric names, `/health` (the process is up: CoreDNS serves it on 8080) and `/ready`
//! (the watches have listed everything: CoreDNS serves it on 8181), here on one address.

use std::sync::Arc;

use prometheus::{HistogramOpts, HistogramVec, IntCounterVec, Opts, Registry, TextEncoder};

pub struct Metrics {
    pub registry: Registry,
    /// coredns_dns_requests_total{proto,type}.
    pub requests: IntCounterVec,
    /// coredns_dns_responses_total{rcode,plugin}: plugin is `kubernetes` or `forward`.
    pub responses: IntCounterVec,
    /// coredns_dns_request_duration_seconds{type}: from the decoded request to the answer sent.
    pub request_duration: HistogramVec,
}

impl Metrics {
    pub fn new() -> Arc<Metrics> {
        let registry = Registry::new();
        // 100 µs to 6.5 s: a cluster answer takes microseconds, a forwarded one milliseconds.
        let buckets = prometheus::exponential_buckets(0.0001, 2.0, 17).expect("valid buckets");
        macro_rules! reg {
            ($m:expr) => {{
                let m = $m.expect("valid metric");
                registry.register(Box::new(m.clone())).expect("unique metric");
                m
            }};
        }
        Arc::new(Metrics {
            requests: reg!(IntCounterVec::new(
                Opts::new("coredns_dns_requests_total", "Counter of DNS requests made per protocol and type."),
                &["proto", "type"]
            )),
            responses: reg!(IntCounterVec::new(
                Opts::new("coredns_dns_responses_total", "Counter of response status codes, by the plugin that answered."),
                &["rcode", "plugin"]
            )),
            request_duration: reg!(HistogramVec::new(
                HistogramOpts::new("coredns_dns_request_duration_seconds", "Histogram of the time (in seconds) each request took per type.")
                    .buckets(buckets),
                &["type"]
            )),
            registry,
        })
    }

    pub fn render(&self) -> String {
        TextEncoder::new().encode_to_string(&self.registry.gather()).unwrap_or_default()
    }
}

/// Serves `/health`, `/ready` and `/metrics` on `listener` until the task is dropped. `ready`
/// turns true once the watches have listed every Service and EndpointSlice.
pub async fn serve(listener: tokio::net::TcpListener, metrics: Arc<Metrics>, ready: tokio::sync::watch::Receiver<bool>) -> std::io::Result<()> {
    use axum::http::StatusCode;
    use axum::routing::get;
    let app = axum::Router::new()
        .route("/health", get(|| async { "OK" }))
        .route(
            "/ready",
            get(move || {
                let ready = *ready.borrow();
                async move { if ready { (StatusCode::OK, "OK") } else { (StatusCode::SERVICE_UNAVAILABLE, "kubernetes") } }
            }),
        )
        .route("/metrics", get(move || async move { metrics.render() }));
    axum::serve(listener, app).await
}
