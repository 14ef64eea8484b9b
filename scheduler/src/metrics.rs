//! Mirrors kube-scheduler's metrics package (the figures kube-scheduler exports under the same
//! names) and serves `/healthz` and `/metrics`.

use std::sync::Arc;

use prometheus::{HistogramOpts, HistogramVec, IntCounterVec, IntGaugeVec, Opts, Registry, TextEncoder};

use crate::scheduling_queue::Pending;

pub struct Metrics {
    pub registry: Registry,
    /// scheduler_schedule_attempts_total{result="scheduled|unschedulable|error",profile}.
    pub schedule_attempts: IntCounterVec,
    /// scheduler_e2e_scheduling_duration_seconds{result,profile}: one attempt, from pop to the
    /// binding (or the failure).
    pub e2e_scheduling_duration: HistogramVec,
    /// scheduler_pod_scheduling_duration_seconds{attempts}: from first enqueue to bound.
    pub pod_scheduling_duration: HistogramVec,
    /// scheduler_pending_pods{queue="active|backoff|unschedulable|gated"}.
    pub pending_pods: IntGaugeVec,
}

impl Metrics {
    pub fn new() -> Arc<Metrics> {
        let registry = Registry::new();
        let buckets = prometheus::exponential_buckets(0.001, 2.0, 15).expect("valid buckets");
        macro_rules! reg {
            ($m:expr) => {{
                let m = $m.expect("valid metric");
                registry.register(Box::new(m.clone())).expect("unique metric");
                m
            }};
        }
        Arc::new(Metrics {
            schedule_attempts: reg!(IntCounterVec::new(
                Opts::new("scheduler_schedule_attempts_total", "Number of attempts to schedule pods, by the result."),
                &["result", "profile"]
            )),
            e2e_scheduling_duration: reg!(HistogramVec::new(
                HistogramOpts::new("scheduler_e2e_scheduling_duration_seconds", "E2e scheduling latency in seconds (scheduling algorithm + binding).")
                    .buckets(buckets.clone()),
                &["result", "profile"]
            )),
            pod_scheduling_duration: reg!(HistogramVec::new(
                HistogramOpts::new("scheduler_pod_scheduling_duration_seconds", "E2e latency for a pod being scheduled, from entering the queue, which may include multiple scheduling attempts.")
                    .buckets(buckets),
                &["attempts"]
            )),
            pending_pods: reg!(IntGaugeVec::new(
                Opts::new("scheduler_pending_pods", "Number of pending pods, by the queue type."),
                &["queue"]
            )),
            registry,
        })
    }

    pub fn set_pending(&self, p: Pending) {
        self.pending_pods.with_label_values(&["active"]).set(p.active as i64);
        self.pending_pods.with_label_values(&["backoff"]).set(p.backoff as i64);
        self.pending_pods.with_label_values(&["unschedulable"]).set(p.unschedulable as i64);
        self.pending_pods.with_label_values(&["gated"]).set(p.gated as i64);
    }

    pub fn render(&self) -> String {
        TextEncoder::new().encode_to_string(&self.registry.gather()).unwrap_or_default()
    }
}

/// Serves `/healthz`, `/metrics` and `/debug/trace/pods/<uid>` (the scheduler's steps for a
/// pod, which the API server gathers for `kubelab trace`) on `listener` until the task is dropped.
pub async fn serve(listener: tokio::net::TcpListener, metrics: Arc<Metrics>) -> std::io::Result<()> {
    use axum::routing::get;
    let app = axum::Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/metrics", get(move || async move { metrics.render() }))
        .route(
            "/debug/trace/pods/{uid}",
            get(|axum::extract::Path(uid): axum::extract::Path<String>| async move {
                let steps = serde_json::to_string(&podtrace::recorder().steps(&uid, &["scheduler"])).unwrap_or_else(|_| "[]".into());
                ([(axum::http::header::CONTENT_TYPE, "application/json")], steps)
            }),
        );
    axum::serve(listener, app).await
}
