//! Mirrors kubelet's pkg/kubelet/metrics: the node agent's Prometheus metrics, with Kubernetes' names.

use std::sync::OnceLock;

use prometheus::{Encoder, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, Opts, Registry};

pub(crate) struct Metrics {
    pub(crate) registry: Registry,
    /// From the pod's creation timestamp (or first sight) to all its containers running.
    pub(crate) pod_start_duration: Histogram,
    pub(crate) pleg_relist_duration: Histogram,
    /// PLEG events dropped because the event channel was full (the pod is synced on its next
    /// periodic resync instead).
    pub(crate) pleg_discard_events: IntCounter,
    pub(crate) running_pods: IntGauge,
    pub(crate) running_containers: IntGauge,
    /// Every CRI call, by operation (kubelet_runtime_operations_duration_seconds).
    pub(crate) runtime_operations_duration: HistogramVec,
    pub(crate) runtime_operations_errors: IntCounterVec,
}

pub(crate) fn metrics() -> &'static Metrics {
    static METRICS: OnceLock<Metrics> = OnceLock::new();
    METRICS.get_or_init(|| {
        let registry = Registry::new();
        let buckets = vec![0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0];
        let pod_start_duration = Histogram::with_opts(
            HistogramOpts::new("kubelet_pod_start_duration_seconds", "Duration in seconds from the node agent seeing a pod for the first time to the pod starting to run")
                .buckets(buckets.clone()),
        )
        .expect("metric");
        let pleg_relist_duration = Histogram::with_opts(
            HistogramOpts::new("kubelet_pleg_relist_duration_seconds", "Duration in seconds for relisting pods in PLEG.")
                .buckets(vec![0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1.0, 5.0]),
        )
        .expect("metric");
        let pleg_discard_events =
            IntCounter::new("kubelet_pleg_discard_events", "The number of discard events in PLEG.").expect("metric");
        let running_pods = IntGauge::new("kubelet_running_pods", "Number of pods that have a running pod sandbox").expect("metric");
        let running_containers =
            IntGauge::new("kubelet_running_containers", "Number of containers currently running").expect("metric");
        let runtime_operations_duration = HistogramVec::new(
            HistogramOpts::new("kubelet_runtime_operations_duration_seconds", "Duration in seconds of runtime operations. Broken down by operation type.")
                .buckets(vec![0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0]),
            &["operation_type"],
        )
        .expect("metric");
        let runtime_operations_errors = IntCounterVec::new(
            Opts::new("kubelet_runtime_operations_errors_total", "Cumulative number of runtime operation errors by operation type."),
            &["operation_type"],
        )
        .expect("metric");
        for c in [
            Box::new(pod_start_duration.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(pleg_relist_duration.clone()),
            Box::new(pleg_discard_events.clone()),
            Box::new(running_pods.clone()),
            Box::new(running_containers.clone()),
            Box::new(runtime_operations_duration.clone()),
            Box::new(runtime_operations_errors.clone()),
        ] {
            registry.register(c).expect("metric registered once");
        }
        Metrics {
            registry,
            pod_start_duration,
            pleg_relist_duration,
            pleg_discard_events,
            running_pods,
            running_containers,
            runtime_operations_duration,
            runtime_operations_errors,
        }
    })
}

/// The Prometheus text exposition of every metric above.
pub(crate) fn render() -> String {
    let mut buf = Vec::new();
    let _ = prometheus::TextEncoder::new().encode(&metrics().registry.gather(), &mut buf);
    String::from_utf8(buf).unwrap_or_default()
}
