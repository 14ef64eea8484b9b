//! One trace per pod across components, when spans go to OpenTelemetry (`--otlp-endpoint`).
//!
//! Kubernetes' components trace on their own: kube-apiserver's request spans (KEP-647) and the
//! kubelet's CRI spans (KEP-2831) never meet, because nothing carries the API server's trace
//! context from a request to the controllers and the kubelet that act on the object it wrote
//! (Kubernetes keeps no trace context in objects). kubelab carries it the simplest way: when the
//! API server creates a pod, it writes the W3C `traceparent` of the create request into the
//! pod's [`ANNOTATION`]; the scheduler and the node agent make that the parent of the spans they
//! open for the pod, so Jaeger or Tempo shows the create, the scheduling and the start-up as one
//! trace.
//!
//! Everything here does nothing unless an OpenTelemetry layer is installed (the binary installs
//! one only with `--otlp-endpoint`): pods stay unchanged and spans keep their own roots.

use std::collections::{BTreeMap, HashMap};

use opentelemetry::Context;
use opentelemetry::propagation::TextMapPropagator as _;
use opentelemetry::trace::TraceContextExt as _;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use tracing_opentelemetry::{OpenTelemetrySpanExt as _, SetParentError};

/// The annotation that carries the W3C trace context of the request that created a pod.
pub const ANNOTATION: &str = "kubelab.io/trace-context";

/// W3C Trace Context's header, the annotation's value (`00-<trace id>-<span id>-<flags>`).
const TRACEPARENT: &str = "traceparent";

/// The `traceparent` of `span`, if it is exported (None without an OpenTelemetry layer, or for a
/// span its filter leaves out).
pub fn traceparent(span: &tracing::Span) -> Option<String> {
    // Without the layer the context is empty, and not valid.
    let cx = span.context();
    if !cx.span().span_context().is_valid() {
        return None;
    }
    let mut carrier = HashMap::new();
    TraceContextPropagator::new().inject_context(&cx, &mut carrier);
    carrier.remove(TRACEPARENT)
}

/// The remote parent a `traceparent` names; None if it is malformed (a user may write the
/// annotation too).
pub fn context_from(traceparent: &str) -> Option<Context> {
    let traceparent = traceparent.trim();
    if !well_formed(traceparent) {
        return None;
    }
    let carrier = HashMap::from([(TRACEPARENT.to_string(), traceparent.to_string())]);
    let cx = TraceContextPropagator::new().extract(&carrier);
    cx.span().span_context().is_valid().then_some(cx)
}

/// `version-traceid-parentid-flags` with the field widths W3C Trace Context fixes (2, 32, 16 and 2
/// lowercase hex digits). The SDK's propagator takes shorter ids too (`00-abc-def-01`), which no
/// tracer wrote.
fn well_formed(traceparent: &str) -> bool {
    let widths = [2, 32, 16, 2];
    let parts: Vec<&str> = traceparent.split('-').collect();
    parts.len() == widths.len()
        && parts.iter().zip(widths).all(|(p, w)| p.len() == w && p.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
}

/// Writes the current span's trace context into the object's annotations, unless the object
/// already carries one (a client that traces may set its own). Call inside the create request's
/// span; does nothing when spans are not exported.
pub fn annotate(obj: &mut serde_json::Value) {
    let Some(value) = traceparent(&tracing::Span::current()) else { return };
    let Some(meta) = obj.get_mut("metadata").and_then(|m| m.as_object_mut()) else { return };
    let annotations = meta.entry("annotations").or_insert_with(|| serde_json::json!({}));
    if annotations.is_null() {
        *annotations = serde_json::json!({});
    }
    if let Some(a) = annotations.as_object_mut() {
        a.entry(ANNOTATION).or_insert(serde_json::Value::String(value));
    }
}

/// Makes the trace context in a pod's annotations the parent of `span`, which must be new (not
/// yet entered): the span then belongs to the trace of the request that created the pod.
pub fn set_parent_from(span: &tracing::Span, annotations: Option<&BTreeMap<String, String>>) {
    let Some(value) = annotations.and_then(|a| a.get(ANNOTATION)) else { return };
    match context_from(value) {
        Some(cx) => match span.set_parent(cx) {
            // This component does not export: nothing to join.
            Ok(()) | Err(SetParentError::LayerNotFound) => {}
            Err(e) => tracing::debug!(error = %e, "setting a span's parent from the pod's trace context"),
        },
        None => tracing::debug!(annotation = ANNOTATION, value = %value, "not a W3C traceparent; the span starts its own trace"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry::trace::TracerProvider as _;
    use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider};
    use tracing_subscriber::layer::SubscriberExt as _;

    #[test]
    fn without_an_opentelemetry_layer_pods_are_left_alone() {
        let subscriber = tracing_subscriber::registry().with(crate::layer());
        tracing::subscriber::with_default(subscriber, || {
            let span = tracing::info_span!(target: "apiserver", "request", pod_uid = tracing::field::Empty);
            let _g = span.enter();
            let mut pod = serde_json::json!({"metadata": {"name": "p"}});
            annotate(&mut pod);
            assert_eq!(pod, serde_json::json!({"metadata": {"name": "p"}}));
        });
    }

    #[test]
    fn malformed_trace_contexts_are_refused() {
        for bad in ["", "hello", "00-00000000000000000000000000000000-0000000000000000-01", "00-abc-def-01"] {
            assert!(context_from(bad).is_none(), "{bad:?}");
        }
        assert!(context_from("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01").is_some());
    }

    /// The API server's create span writes the annotation; a span another component opens from
    /// the annotation lands in the same trace, as the create span's child.
    #[test]
    fn the_annotation_carries_the_create_span_to_the_next_component() {
        let exporter = InMemorySpanExporter::default();
        let provider = SdkTracerProvider::builder().with_simple_exporter(exporter.clone()).build();
        let subscriber = tracing_subscriber::registry().with(tracing_opentelemetry::layer().with_tracer(provider.tracer("test")));
        let pod = tracing::subscriber::with_default(subscriber, || {
            let request = tracing::info_span!(target: "apiserver", "request", pod_uid = tracing::field::Empty);
            let _g = request.enter();
            let mut pod = serde_json::json!({"metadata": {"name": "p", "annotations": {"keep": "me"}}});
            annotate(&mut pod);
            pod
        });
        let annotations: BTreeMap<String, String> = serde_json::from_value(pod["metadata"]["annotations"].clone()).expect("string annotations");
        assert_eq!(annotations.get("keep").map(String::as_str), Some("me"));
        assert!(annotations.get(ANNOTATION).is_some_and(|v| v.starts_with("00-")), "{annotations:?}");

        let subscriber = tracing_subscriber::registry().with(tracing_opentelemetry::layer().with_tracer(provider.tracer("test")));
        tracing::subscriber::with_default(subscriber, || {
            let span = tracing::info_span!(target: "kubelet::sync_pod", "sync_pod", pod_uid = "u");
            set_parent_from(&span, Some(&annotations));
            span.in_scope(|| tracing::info_span!(target: "cri", "cri").in_scope(|| {}));
        });
        let spans = exporter.get_finished_spans().expect("finished spans");
        let by_name = |n: &str| spans.iter().find(|s| s.name == n).unwrap_or_else(|| panic!("no span {n}: {spans:?}"));
        let (request, sync, cri) = (by_name("request"), by_name("sync_pod"), by_name("cri"));
        assert_eq!(sync.span_context.trace_id(), request.span_context.trace_id());
        assert_eq!(sync.parent_span_id, request.span_context.span_id());
        assert_eq!(cri.span_context.trace_id(), request.span_context.trace_id());
        assert_eq!(cri.parent_span_id, sync.span_context.span_id());
    }

    #[test]
    fn an_annotation_the_client_set_is_kept() {
        let provider = SdkTracerProvider::builder().build();
        let subscriber = tracing_subscriber::registry().with(tracing_opentelemetry::layer().with_tracer(provider.tracer("test")));
        tracing::subscriber::with_default(subscriber, || {
            let span = tracing::info_span!("request");
            let _g = span.enter();
            let theirs = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
            let mut pod = serde_json::json!({"metadata": {"annotations": {ANNOTATION: theirs}}});
            annotate(&mut pod);
            assert_eq!(pod["metadata"]["annotations"][ANNOTATION], theirs);
            let mut bare = serde_json::json!({"metadata": {"annotations": null}});
            annotate(&mut bare);
            assert!(bare["metadata"]["annotations"][ANNOTATION].is_string());
        });
    }
}
