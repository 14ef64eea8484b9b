//! Mirrors k8s.io/apiserver/pkg/endpoints/metrics: Prometheus metrics with the API server's names
//! (apiserver_request_total, apiserver_request_duration_seconds), recorded by the filter chain
//! once a request is answered.

use std::time::Duration;

use prometheus::{HistogramOpts, HistogramVec, IntCounterVec, Opts, Registry, TextEncoder};

pub struct Metrics {
    registry: Registry,
    requests: IntCounterVec,
    duration: HistogramVec,
}

impl Metrics {
    pub fn new() -> Self {
        let registry = Registry::new();
        let requests = IntCounterVec::new(
            Opts::new("apiserver_request_total", "Counter of apiserver requests broken out for each verb, resource and HTTP response code."),
            &["verb", "resource", "code"],
        )
        .expect("valid metric");
        let duration = HistogramVec::new(
            HistogramOpts::new("apiserver_request_duration_seconds", "Response latency distribution in seconds for each verb and resource.")
                .buckets(vec![0.005, 0.01, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0]),
            &["verb", "resource"],
        )
        .expect("valid metric");
        registry.register(Box::new(requests.clone())).expect("unique metric");
        registry.register(Box::new(duration.clone())).expect("unique metric");
        Self { registry, requests, duration }
    }

    pub fn observe(&self, verb: &str, resource: &str, code: u16, took: Duration) {
        self.requests.with_label_values(&[verb, resource, &code.to_string()]).inc();
        if verb != "WATCH" {
            self.duration.with_label_values(&[verb, resource]).observe(took.as_secs_f64());
        }
    }

    pub fn render(&self) -> String {
        TextEncoder::new().encode_to_string(&self.registry.gather()).unwrap_or_default()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}
