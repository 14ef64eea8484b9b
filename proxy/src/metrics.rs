//! Mirrors kube-proxy's pkg/proxy/metrics/metrics.go: the sync metrics, under kube-proxy's names.
//! kube-proxy serves them on `--metrics-bind-address` (127.0.0.1:10249); kubelab serves
//! `/metrics` on the health server's listener (`--healthz-bind-address`, 10256).

use prometheus::{Histogram, HistogramOpts, IntCounter, IntGauge, Opts, Registry, TextEncoder};

pub struct Metrics {
    pub registry: Registry,
    /// kubeproxy_sync_proxy_rules_duration_seconds: every sync, full or partial.
    pub sync_proxy_rules_latency: Histogram,
    /// kubeproxy_sync_full_proxy_rules_duration_seconds.
    pub sync_full_proxy_rules_latency: Histogram,
    /// kubeproxy_sync_partial_proxy_rules_duration_seconds.
    pub sync_partial_proxy_rules_latency: Histogram,
    /// kubeproxy_sync_proxy_rules_last_timestamp_seconds: the last successful sync.
    pub sync_proxy_rules_last_timestamp: IntGauge,
    /// kubeproxy_sync_proxy_rules_iptables_total{table}: rules in use after the last sync
    /// (written or, in a partial sync, left in place).
    pub iptables_rules_total: prometheus::IntGaugeVec,
    /// kubeproxy_sync_proxy_rules_iptables_partial_restore_failures_total.
    pub iptables_partial_restore_failures_total: IntCounter,
    /// kubeproxy_sync_proxy_rules_nftables_sync_failures_total: nftables-mode syncs whose
    /// transaction failed (full or partial).
    pub nftables_sync_failures_total: IntCounter,
    /// kubeproxy_sync_proxy_rules_endpoint_changes_total: EndpointSlice events handled.
    pub endpoint_changes_total: IntCounter,
    /// kubeproxy_sync_proxy_rules_service_changes_total: Service events handled.
    pub service_changes_total: IntCounter,
}

impl Default for Metrics {
    fn default() -> Metrics {
        Metrics::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let registry = Registry::new();
        // kube-proxy's buckets: 1 ms doubling to about 16 s.
        let buckets = || prometheus::exponential_buckets(0.001, 2.0, 15).expect("valid buckets");
        macro_rules! reg {
            ($m:expr) => {{
                let m = $m.expect("valid metric");
                registry.register(Box::new(m.clone())).expect("unique metric");
                m
            }};
        }
        let histogram = |name: &str, help: &str| Histogram::with_opts(HistogramOpts::new(name, help).buckets(buckets()));
        Metrics {
            sync_proxy_rules_latency: reg!(histogram("kubeproxy_sync_proxy_rules_duration_seconds", "SyncProxyRules latency in seconds")),
            sync_full_proxy_rules_latency: reg!(histogram(
                "kubeproxy_sync_full_proxy_rules_duration_seconds",
                "SyncProxyRules latency in seconds for full resyncs"
            )),
            sync_partial_proxy_rules_latency: reg!(histogram(
                "kubeproxy_sync_partial_proxy_rules_duration_seconds",
                "SyncProxyRules latency in seconds for partial resyncs"
            )),
            sync_proxy_rules_last_timestamp: reg!(IntGauge::new(
                "kubeproxy_sync_proxy_rules_last_timestamp_seconds",
                "The last time proxy rules were successfully synced"
            )),
            iptables_rules_total: reg!(prometheus::IntGaugeVec::new(
                Opts::new("kubeproxy_sync_proxy_rules_iptables_total", "Total number of iptables rules owned by kube-proxy"),
                &["table"]
            )),
            iptables_partial_restore_failures_total: reg!(IntCounter::new(
                "kubeproxy_sync_proxy_rules_iptables_partial_restore_failures_total",
                "Cumulative proxy iptables partial restore failures"
            )),
            nftables_sync_failures_total: reg!(IntCounter::new(
                "kubeproxy_sync_proxy_rules_nftables_sync_failures_total",
                "Cumulative proxy nftables sync failures"
            )),
            endpoint_changes_total: reg!(IntCounter::new(
                "kubeproxy_sync_proxy_rules_endpoint_changes_total",
                "Cumulative proxy rules EndpointSlice changes"
            )),
            service_changes_total: reg!(IntCounter::new("kubeproxy_sync_proxy_rules_service_changes_total", "Cumulative proxy rules Service changes")),
            registry,
        }
    }

    /// The Prometheus text format.
    pub fn render(&self) -> String {
        TextEncoder::new().encode_to_string(&self.registry.gather()).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_metric_renders_under_kube_proxys_name() {
        let m = Metrics::new();
        m.sync_proxy_rules_latency.observe(0.02);
        m.sync_partial_proxy_rules_latency.observe(0.02);
        m.iptables_rules_total.with_label_values(&["nat"]).set(12);
        m.endpoint_changes_total.inc();
        let text = m.render();
        for line in [
            "kubeproxy_sync_proxy_rules_duration_seconds_count 1",
            "kubeproxy_sync_partial_proxy_rules_duration_seconds_bucket{le=\"0.032\"} 1",
            "kubeproxy_sync_full_proxy_rules_duration_seconds_count 0",
            "kubeproxy_sync_proxy_rules_last_timestamp_seconds 0",
            "kubeproxy_sync_proxy_rules_iptables_total{table=\"nat\"} 12",
            "kubeproxy_sync_proxy_rules_iptables_partial_restore_failures_total 0",
            "kubeproxy_sync_proxy_rules_nftables_sync_failures_total 0",
            "kubeproxy_sync_proxy_rules_endpoint_changes_total 1",
            "kubeproxy_sync_proxy_rules_service_changes_total 0",
        ] {
            assert!(text.lines().any(|l| l == line), "missing {line:?} in\n{text}");
        }
    }
}
