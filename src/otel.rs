//! `--otlp-endpoint`: the components' pod spans, exported with OpenTelemetry to Jaeger, Tempo or
//! an OpenTelemetry Collector. Mirrors component-base/tracing (`tracing.NewProvider` in
//! kube-apiserver's `--tracing-config-file` and the kubelet's `tracing:` settings), with one flag
//! where Kubernetes takes a TracingConfiguration file.
//!
//! Why a flag and not the file: Kubernetes' file holds an endpoint and a sampling rate, and
//! kubelab samples nothing away (a learner traces one pod, and wants that pod's trace whole),
//! so an endpoint is all that is left to say. The flag takes OTLP/HTTP's base URL, as
//! `OTEL_EXPORTER_OTLP_ENDPOINT` does (`http://127.0.0.1:4318`; `/v1/traces` is added); Kubernetes
//! speaks OTLP/gRPC on 4317 instead, and every receiver that takes one takes the other.
//!
//! What is exported is what `kubelab trace` records ([`podtrace`]): spans that name a pod (the
//! API server's request spans, the scheduler's `schedule_one`, `filter`, `bind`, the node agent's
//! `sync_pod` and its steps) and the CRI calls made inside them, not every span a debug log
//! shows, and no log events. Each component reports under the service name Kubernetes gives it
//! ([`Component::service_name`]); `kubelab up` runs them all in one process and still reports
//! each span under its own component's name, chosen by the span's target.
//!
//! Spans are batched in memory and sent from the SDK's own thread, off every component's runtime;
//! [`Exporting`] sends what is left when it is dropped, at the end of `main`, after the component
//! returned on SIGTERM. Without the flag none of this exists: no layer, no thread, no cost.

use std::time::Duration;

use anyhow::Context as _;
use opentelemetry::KeyValue;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::WithExportConfig as _;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::{OTelSdkError, OTelSdkResult};
use opentelemetry_sdk::trace::{BatchSpanProcessor, SdkTracerProvider, SpanData, SpanExporter};
use tracing::subscriber::Interest;
use tracing::{Metadata, Subscriber};
use tracing_subscriber::Layer;
use tracing_subscriber::layer::{Context, Filter};
use tracing_subscriber::registry::LookupSpan;

/// How long one export may take before it is abandoned (the spans are dropped).
const EXPORT_TIMEOUT: Duration = Duration::from_secs(3);
/// How long the exit waits for the last spans to go out.
const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(5);

/// `--otlp-endpoint`, on every long-running component.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct OtlpArgs {
    /// Export pod spans with OpenTelemetry (OTLP over HTTP/protobuf) to this base URL, e.g.
    /// http://127.0.0.1:4318 for Jaeger, Tempo or an OpenTelemetry Collector. Off by default.
    #[arg(long, value_name = "URL", value_parser = traces_url)]
    pub otlp_endpoint: Option<String>,
}

/// A component whose spans may be exported.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Component {
    Store,
    Apiserver,
    Scheduler,
    ControllerManager,
    Nodeagent,
}

impl Component {
    /// Every component, for `kubelab up`.
    pub const ALL: &[Component] = &[Component::Apiserver, Component::Store, Component::Scheduler, Component::ControllerManager, Component::Nodeagent];

    /// The OpenTelemetry `service.name`. Where Kubernetes traces a component, its name: kube-apiserver
    /// reports as `apiserver`, the kubelet as `kubelet`, etcd as `etcd` — so a trace of kubelab
    /// reads like one of Kubernetes. The scheduler and the controller manager export no traces in
    /// Kubernetes; they take their binaries' names.
    pub fn service_name(self) -> &'static str {
        match self {
            Component::Store => "etcd",
            Component::Apiserver => "apiserver",
            Component::Scheduler => "kube-scheduler",
            Component::ControllerManager => "kube-controller-manager",
            Component::Nodeagent => "kubelet",
        }
    }

    /// The component a span target belongs to (the CRI and CSI calls are the node agent's).
    fn of_target(target: &str) -> Option<Component> {
        match podtrace::component_of(target) {
            "store" => Some(Component::Store),
            "apiserver" => Some(Component::Apiserver),
            "scheduler" => Some(Component::Scheduler),
            "controllers" => Some(Component::ControllerManager),
            "nodeagent" | "cri" | "csi" => Some(Component::Nodeagent),
            _ => None,
        }
    }
}

/// `/v1/traces` under the base URL, unless the URL names it already (clap checks the flag with it).
fn traces_url(endpoint: &str) -> Result<String, String> {
    let base = endpoint.trim().trim_end_matches('/');
    let want = "want an http:// or https:// URL with a host, like http://127.0.0.1:4318";
    let uri: http::Uri = base.parse().map_err(|e| format!("{e}: {want}"))?;
    if !matches!(uri.scheme_str(), Some("http" | "https")) || uri.host().is_none_or(str::is_empty) {
        return Err(want.into());
    }
    Ok(if base.ends_with("/v1/traces") { base.to_string() } else { format!("{base}/v1/traces") })
}

/// The OpenTelemetry pipeline of this process; dropping it sends the spans still queued.
pub struct Exporting {
    provider: SdkTracerProvider,
}

impl Exporting {
    /// Builds the pipeline for the components this process runs (the first is the one that owns
    /// spans no component claims).
    /// `url` is the flag's value: the full URL spans are posted to.
    pub fn start(url: &str, components: &[Component]) -> anyhow::Result<Exporting> {
        let url = url.to_string();
        let mut exporters = Vec::new();
        for &c in components {
            let e = opentelemetry_otlp::SpanExporter::builder()
                .with_http()
                .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
                .with_endpoint(url.clone())
                .with_timeout(EXPORT_TIMEOUT)
                .build()
                .with_context(|| format!("the OTLP exporter for {url}"))?;
            exporters.push((c, e));
        }
        let exporter = ByComponent { exporters, url, failing: Default::default() };
        let provider = SdkTracerProvider::builder().with_span_processor(BatchSpanProcessor::builder(exporter).build()).build();
        Ok(Exporting { provider })
    }

    /// The layer that hands exported spans to the pipeline.
    pub fn layer<S>(&self) -> impl Layer<S> + use<S>
    where
        S: Subscriber + for<'a> LookupSpan<'a>,
    {
        tracing_opentelemetry::layer().with_tracer(self.provider.tracer("kubelab")).with_filter(PodSpans)
    }
}

impl Drop for Exporting {
    fn drop(&mut self) {
        if let Err(e) = self.provider.shutdown_with_timeout(SHUTDOWN_TIMEOUT) {
            eprintln!("sending the last spans to the OTLP endpoint: {e}");
        }
    }
}

/// The spans that are exported: spans that name a pod, and CRI calls inside one. A CRI call
/// outside every pod (PLEG's relist every second, image GC) would be a trace of its own each
/// time, and tell nothing about a pod.
struct PodSpans;

impl<S> Filter<S> for PodSpans
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn enabled(&self, meta: &Metadata<'_>, cx: &Context<'_, S>) -> bool {
        // The context sees only the spans this filter let through: a current span is a pod's.
        meta.is_span() && (meta.fields().field(podtrace::KEY_FIELD).is_some() || (podtrace::is_driver_call(meta) && cx.lookup_current().is_some()))
    }

    fn callsite_enabled(&self, meta: &'static Metadata<'static>) -> Interest {
        if !meta.is_span() {
            Interest::never()
        } else if meta.fields().field(podtrace::KEY_FIELD).is_some() {
            Interest::always()
        } else if podtrace::is_driver_call(meta) {
            Interest::sometimes()
        } else {
            Interest::never()
        }
    }
}

/// An exporter that reports each span under its component's service name: one OTLP exporter per
/// component, each with its own resource. A process that runs one component has one.
#[derive(Debug)]
struct ByComponent {
    exporters: Vec<(Component, opentelemetry_otlp::SpanExporter)>,
    url: String,
    /// Whether the last export failed: a failure is reported once, not every few seconds.
    failing: std::sync::atomic::AtomicBool,
}

impl ByComponent {
    fn index_of(&self, span: &SpanData) -> usize {
        let component = span.attributes.iter().find(|kv| kv.key.as_str() == "target").and_then(|kv| Component::of_target(kv.value.as_str().as_ref()));
        component.and_then(|c| self.exporters.iter().position(|(e, _)| *e == c)).unwrap_or(0)
    }
}

impl SpanExporter for ByComponent {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let mut parts: Vec<Vec<SpanData>> = self.exporters.iter().map(|_| Vec::new()).collect();
        for span in batch {
            let i = self.index_of(&span);
            parts[i].push(span);
        }
        let mut result = Ok(());
        for ((_, exporter), part) in self.exporters.iter().zip(parts) {
            if !part.is_empty()
                && let Err(e) = exporter.export(part).await
            {
                result = Err(e);
            }
        }
        use std::sync::atomic::Ordering;
        match &result {
            Err(e) if !self.failing.swap(true, Ordering::Relaxed) => tracing::warn!(endpoint = %self.url, error = %e, "exporting spans failed; dropping them until the endpoint answers"),
            Ok(()) if self.failing.swap(false, Ordering::Relaxed) => tracing::info!(endpoint = %self.url, "exporting spans again"),
            _ => {}
        }
        result
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        let errors: Vec<String> = self.exporters.iter().filter_map(|(_, e)| e.shutdown_with_timeout(timeout).err()).map(|e| e.to_string()).collect();
        if errors.is_empty() { Ok(()) } else { Err(OTelSdkError::InternalFailure(errors.join("; "))) }
    }

    fn set_resource(&mut self, resource: &Resource) {
        let host = client::hostname();
        for (component, exporter) in &mut self.exporters {
            let r = Resource::builder_empty()
                .with_attributes(resource.iter().map(|(k, v)| KeyValue::new(k.clone(), v.clone())))
                .with_service_name(component.service_name())
                .with_attribute(KeyValue::new("host.name", host.clone()))
                .build();
            exporter.set_resource(&r);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_endpoint_is_a_base_url() {
        assert_eq!(traces_url("http://127.0.0.1:4318").ok().as_deref(), Some("http://127.0.0.1:4318/v1/traces"));
        assert_eq!(traces_url("http://jaeger:4318/").ok().as_deref(), Some("http://jaeger:4318/v1/traces"));
        assert_eq!(traces_url("https://tempo/otlp/v1/traces").ok().as_deref(), Some("https://tempo/otlp/v1/traces"));
        for bad in ["", "127.0.0.1:4318", "grpc://x:4317", "http://"] {
            assert!(traces_url(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn spans_go_to_the_component_of_their_target() {
        assert_eq!(Component::of_target("kubelet::sync_pod"), Some(Component::Nodeagent));
        assert_eq!(Component::of_target("cri"), Some(Component::Nodeagent));
        assert_eq!(Component::of_target("scheduler::framework"), Some(Component::Scheduler));
        assert_eq!(Component::of_target("apiserver::storage"), Some(Component::Apiserver));
        assert_eq!(Component::of_target("hyper"), None);
    }
}
