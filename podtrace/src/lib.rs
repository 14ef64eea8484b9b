//! A pod's journey, step by step, as each component saw it.
//!
//! Kubernetes answers "what happened to my pod, and how long did each hop take?" with
//! OpenTelemetry traces (component-base/tracing, KEP-647 for the API server, KEP-2831 for the
//! kubelet) and, for slow requests, with k8s.io/utils/trace step logs. kubelab keeps a small,
//! always-on version of both for learners: every component records, per pod UID, the steps it
//! performed with wall-clock start and end times, in a bounded ring of recent pods, and serves
//! them at a debug endpoint; `kubelab trace` merges them into one timeline.
//!
//! The records come from the `tracing` spans the components already open — a span that carries
//! a `pod_uid` field is a step of that pod, and a span opened inside it (a CRI or CSI call)
//! belongs to the same pod — so the code that does the work is not interleaved with bookkeeping.
//! [`layer`] turns closed spans into [`Step`]s; [`Recorder::record`] takes steps that are not
//! spans (a watch event sent, a revision applied, a proxy's sync).
//!
//! A Service is traced the same way, by its UID (`kubelab trace svc/<name>`): the API server's
//! writes of it and of its EndpointSlices ([`trace_uid`] names the UID an object's steps go
//! to), the watch events it sends about them, and each node's proxy sync that wrote the
//! Service's rules. The ring and its sizes are shared: "pods" below means traced objects.
//!
//! Public surface: [`layer`], [`recorder`] and [`Recorder`], [`Step`], [`trace_uid`],
//! [`set_enabled`] / [`enabled`], the span field names ([`KEY_FIELD`], [`ERROR_FIELD`], [`STEP_FIELD`]) and ring
//! sizes, [`component_of`] and [`is_driver_call`]; [`render`] (the table, mermaid and JSON forms of
//! `kubelab trace`) and [`otel`] (export to an OTLP endpoint and the trace-context annotation).

pub mod otel;
pub mod render;

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Metadata, Subscriber};
use tracing_subscriber::layer::{Context, Filter, Layer};
use tracing_subscriber::registry::LookupSpan;

/// The span field that makes a span a step of a pod.
pub const KEY_FIELD: &str = "pod_uid";
/// The span field a step's failure is recorded into (`span.record("error", …)`).
pub const ERROR_FIELD: &str = "error";
/// The span field that names the step when a span's own (static) name cannot: one `cri` span
/// serves every CRI call, each a step named after its operation.
pub const STEP_FIELD: &str = "step";

/// Pods remembered per process; the oldest is forgotten first.
pub const MAX_PODS: usize = 512;
/// Steps remembered per pod. A running pod adds a dozen steps at every periodic resync, forever,
/// while what a learner traces is mostly its journey to Running: the first [`HEAD_STEPS`] steps
/// are kept, and of the rest only the latest.
pub const MAX_STEPS_PER_POD: usize = 150;
/// The steps kept from a pod's beginning, whatever comes after.
pub const HEAD_STEPS: usize = 100;

/// A name that is usually known at compile time (a component, a span's name, a field's name):
/// borrowed then, so that recording a step allocates only for what varies.
pub type Name = Cow<'static, str>;

/// One step a component performed for a pod.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Step {
    /// apiserver, store, scheduler, nodeagent or cri (the container runtime).
    pub component: Name,
    /// The step's name, e.g. `step5_run_pod_sandbox` or `filter NodeResourcesFit`.
    pub name: Name,
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    /// The step's other span fields (container, attempt, node, revision, pod IP, …).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub fields: BTreeMap<Name, String>,
    /// Why the step failed, if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The node whose agent performed the step, filled in by whoever gathered it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
}

impl Step {
    /// A step that took no time: something that happened (an event sent, a pod queued).
    pub fn instant(component: impl Into<Name>, name: impl Into<Name>, at: DateTime<Utc>) -> Step {
        Step { component: component.into(), name: name.into(), start: at, end: at, fields: BTreeMap::new(), error: None, node: None }
    }

    /// A step that happens now and takes no time.
    pub fn now(component: impl Into<Name>, name: impl Into<Name>) -> Step {
        Step::instant(component, name, Utc::now())
    }

    pub fn with_field(mut self, key: impl Into<Name>, value: impl fmt::Display) -> Step {
        self.fields.insert(key.into(), value.to_string());
        self
    }

    pub fn duration(&self) -> chrono::Duration {
        self.end - self.start
    }
}

/// The steps of recent pods, by pod UID.
#[derive(Default)]
pub struct Recorder {
    inner: Mutex<Ring>,
}

#[derive(Default)]
struct Ring {
    /// Pod UIDs from the oldest recorded to the newest (each shared with its key in `steps`).
    order: VecDeque<Arc<str>>,
    steps: HashMap<Arc<str>, VecDeque<Step>>,
}

/// Whether this process records steps at all. On unless turned off (`--record-pod-steps=false`),
/// so that the cost of recording can be measured against its absence in one benchmark run.
static ENABLED: AtomicBool = AtomicBool::new(true);

/// Turns recording on or off for the whole process: [`Recorder::record`] and the store's
/// per-revision record consult it. Call it before [`layer`] is installed; with recording off
/// the layer should not be installed at all, so that spans cost nothing extra.
pub fn set_enabled(on: bool) {
    ENABLED.store(on, Ordering::Relaxed);
}

/// Whether steps are recorded (see [`set_enabled`]).
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

impl Recorder {
    pub fn record(&self, pod_uid: &str, step: Step) {
        self.record_all(pod_uid, [step]);
    }

    /// Records `step` unless the pod already has one just like it (the same component, name and
    /// fields): what many clients of one kind receive (a watch event sent to each of a
    /// controller manager's informers) is one hop of the pod, and a step for each would crowd
    /// the pod's first [`HEAD_STEPS`] with copies.
    pub fn record_once(&self, pod_uid: &str, step: Step) {
        if !enabled() {
            return;
        }
        {
            let ring = self.inner.lock().unwrap_or_else(|p| p.into_inner());
            let seen = ring.steps.get(pod_uid).is_some_and(|steps| {
                steps.iter().any(|s| s.component == step.component && s.name == step.name && s.fields == step.fields)
            });
            if seen {
                return;
            }
        }
        self.record(pod_uid, step);
    }

    /// Records several steps of one pod at once (a span and the steps that waited for it).
    pub fn record_all(&self, pod_uid: &str, new: impl IntoIterator<Item = Step>) {
        if !enabled() {
            return;
        }
        let mut ring = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let ring = &mut *ring;
        let steps = match ring.steps.get_mut(pod_uid) {
            Some(steps) => steps,
            None => {
                if ring.order.len() >= MAX_PODS
                    && let Some(oldest) = ring.order.pop_front()
                {
                    ring.steps.remove(&oldest);
                }
                let uid: Arc<str> = Arc::from(pod_uid);
                ring.order.push_back(uid.clone());
                ring.steps.entry(uid).or_default()
            }
        };
        for step in new {
            if steps.len() >= MAX_STEPS_PER_POD {
                steps.remove(HEAD_STEPS);
            }
            steps.push_back(step);
        }
    }

    /// The steps recorded for a pod by the given components (all when `components` is empty),
    /// in the order they started.
    pub fn steps(&self, pod_uid: &str, components: &[&str]) -> Vec<Step> {
        let ring = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let mut out: Vec<Step> = ring
            .steps
            .get(pod_uid)
            .map(|s| s.iter().filter(|s| components.is_empty() || components.contains(&&*s.component)).cloned().collect())
            .unwrap_or_default();
        out.sort_by_key(|s| s.start);
        out
    }
}

/// This process's recorder. One per process, shared by every component in it (in `kubelab up`
/// all of them): each component serves the steps of its own components from it.
pub fn recorder() -> &'static Recorder {
    static RECORDER: OnceLock<Recorder> = OnceLock::new();
    RECORDER.get_or_init(Recorder::default)
}

/// Which component a span belongs to, from the first segment of its target (components use
/// targets like `kubelet::sync_pod`, `scheduler::schedule_one`, `cri`).
pub fn component_of(target: &str) -> &'static str {
    match target.split("::").next().unwrap_or(target) {
        "kubelet" | "nodeagent" => "nodeagent",
        "cri" => "cri",
        "csi" => "csi",
        "scheduler" => "scheduler",
        "apiserver" => "apiserver",
        "store" => "store",
        "controllers" => "controllers",
        "proxy" => "proxy",
        _ => "other",
    }
}

/// The UID under which an object's writes and watch events are recorded, if `kubelab trace`
/// follows it: a Pod's and a Service's own; an EndpointSlice's is its Service's (the slice is a
/// hop of the Service's journey, as the EndpointSlice controller's write of it). Objects as the
/// API server stores and sends them (with their `kind`).
pub fn trace_uid(obj: &serde_json::Value) -> Option<&str> {
    match obj.get("kind").and_then(serde_json::Value::as_str)? {
        "Pod" | "Service" => obj.pointer("/metadata/uid").and_then(serde_json::Value::as_str),
        "EndpointSlice" => obj
            .pointer("/metadata/ownerReferences")
            .and_then(serde_json::Value::as_array)?
            .iter()
            .find(|r| r.get("kind").and_then(serde_json::Value::as_str) == Some("Service") && r.get("controller").and_then(serde_json::Value::as_bool) == Some(true))
            .and_then(|r| r.get("uid"))
            .and_then(serde_json::Value::as_str),
        _ => None,
    }
}

/// Whether a callsite is a call of the node agent to a driver: a CRI call (target `cri` or
/// `cri::…`) or a CSI call (`csi`, `csi::…`). It names no pod, but runs inside a pod's step when
/// a pod's work makes it.
pub fn is_driver_call(meta: &Metadata<'_>) -> bool {
    let t = meta.target();
    ["cri", "csi"].iter().any(|d| t == *d || t.strip_prefix(d).is_some_and(|rest| rest.starts_with("::")))
}

/// Whether a callsite can produce steps: spans that name a pod, and driver calls.
fn traced(meta: &Metadata<'_>) -> bool {
    meta.is_span() && (meta.fields().field(KEY_FIELD).is_some() || is_driver_call(meta))
}

/// The layer that records closed pod spans into [`recorder`]. It carries its own filter, so it
/// sees pod spans of any level whatever the log filter says, and nothing else costs it anything.
pub fn layer<S>() -> impl Layer<S>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    StepLayer.with_filter(TracedOnly)
}

struct TracedOnly;

impl<S> Filter<S> for TracedOnly {
    fn enabled(&self, meta: &Metadata<'_>, _: &Context<'_, S>) -> bool {
        traced(meta)
    }

    fn callsite_enabled(&self, meta: &'static Metadata<'static>) -> tracing::subscriber::Interest {
        if traced(meta) { tracing::subscriber::Interest::always() } else { tracing::subscriber::Interest::never() }
    }
}

struct StepLayer;

/// A traced span while it is open. Its pod may be unknown when it opens (an API server request
/// learns the pod's UID only when the pod is written), so steps that close before the pod is
/// known wait in their parent's `pending` until it is. The UID is shared by every span of the
/// pod, not copied into each.
struct Open {
    pod_uid: Option<Arc<str>>,
    step: Option<String>,
    start: DateTime<Utc>,
    fields: BTreeMap<Name, String>,
    error: Option<String>,
    pending: Vec<Step>,
}

#[derive(Default)]
struct Fields {
    pod_uid: Option<Arc<str>>,
    step: Option<String>,
    fields: BTreeMap<Name, String>,
    error: Option<String>,
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        match field.name() {
            KEY_FIELD => self.pod_uid = Some(Arc::<str>::from(value)).filter(|v| !v.is_empty()),
            _ => self.put(field, value.to_string()),
        }
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.put(field, value.to_string());
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.put(field, value.to_string());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.put(field, format!("{value:?}"));
    }
}

impl Fields {
    fn put(&mut self, field: &Field, value: String) {
        match field.name() {
            KEY_FIELD => self.pod_uid = Some(Arc::<str>::from(value)).filter(|v| !v.is_empty()),
            ERROR_FIELD => self.error = Some(value),
            STEP_FIELD => self.step = Some(value),
            name => {
                self.fields.insert(Cow::Borrowed(name), value);
            }
        }
    }
}

impl<S> Layer<S> for StepLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let mut f = Fields::default();
        attrs.record(&mut f);
        // A span without a pod of its own belongs to the pod of the nearest enclosing pod span.
        let pod_uid = f.pod_uid.or_else(|| span.scope().skip(1).find_map(|s| s.extensions().get::<Open>().and_then(|o| o.pod_uid.clone())));
        span.extensions_mut().insert(Open { pod_uid, step: f.step, start: Utc::now(), fields: f.fields, error: f.error, pending: Vec::new() });
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let mut ext = span.extensions_mut();
        let Some(open) = ext.get_mut::<Open>() else { return };
        let mut f = Fields::default();
        values.record(&mut f);
        open.fields.extend(f.fields);
        if f.error.is_some() {
            open.error = f.error;
        }
        if f.pod_uid.is_some() {
            open.pod_uid = f.pod_uid;
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(&id) else { return };
        let Some(open) = span.extensions_mut().remove::<Open>() else { return };
        let meta = span.metadata();
        let step = Step {
            component: Cow::Borrowed(component_of(meta.target())),
            name: open.step.map_or(Cow::Borrowed(meta.name()), Cow::Owned),
            start: open.start,
            end: Utc::now(),
            fields: open.fields,
            error: open.error,
            node: None,
        };
        let mut steps = open.pending;
        steps.push(step);
        let ancestors = || span.scope().skip(1).filter(|s| s.extensions().get::<Open>().is_some());
        let pod_uid = open.pod_uid.or_else(|| ancestors().find_map(|s| s.extensions().get::<Open>().and_then(|o| o.pod_uid.clone())));
        match pod_uid {
            Some(uid) => {
                // The enclosing spans did this step for the same pod, even those that did not
                // know it yet.
                for s in ancestors() {
                    if let Some(o) = s.extensions_mut().get_mut::<Open>()
                        && o.pod_uid.is_none()
                    {
                        o.pod_uid = Some(uid.clone());
                    }
                }
                recorder().record_all(&uid, steps);
            }
            None => {
                // Not known yet: the parent may learn the pod later; if nothing does, the steps
                // belonged to no pod (a list, a GET of a node) and go with the outermost span.
                if let Some(parent) = ancestors().next()
                    && let Some(o) = parent.extensions_mut().get_mut::<Open>()
                {
                    o.pending.extend(steps);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracing_subscriber::layer::SubscriberExt;

    #[test]
    fn a_step_like_one_recorded_is_recorded_once() {
        let r = Recorder::default();
        let at = Utc::now();
        let sent = |watcher: &str, revision: i64| Step::instant("apiserver", "watch event sent", at).with_field("watcher", watcher).with_field("revision", revision);
        for _ in 0..12 {
            r.record_once("uid-once", sent("kube-controller-manager", 7));
        }
        r.record_once("uid-once", sent("kubelet", 7));
        r.record_once("uid-once", sent("kube-controller-manager", 8));
        let steps = r.steps("uid-once", &[]);
        let watchers: Vec<_> = steps.iter().map(|s| (s.fields["watcher"].as_str(), s.fields["revision"].as_str())).collect();
        assert_eq!(watchers, [("kube-controller-manager", "7"), ("kubelet", "7"), ("kube-controller-manager", "8")]);
    }

    #[test]
    fn spans_naming_a_pod_become_its_steps_and_children_inherit_the_pod() {
        let subscriber = tracing_subscriber::registry().with(layer());
        tracing::subscriber::with_default(subscriber, || {
            let outer = tracing::debug_span!(target: "kubelet::sync_pod", "step5_run_pod_sandbox", pod_uid = "uid-1", ip = tracing::field::Empty, error = tracing::field::Empty);
            let _g = outer.enter();
            tracing::info_span!(target: "cri", "cri", step = "RunPodSandbox").in_scope(|| {});
            tracing::info_span!(target: "csi", "csi", step = "NodePublishVolume").in_scope(|| {});
            tracing::info_span!(target: "other", "not_a_step").in_scope(|| {});
            tracing::info_span!(target: "csix", "not_a_driver").in_scope(|| {});
            outer.record("ip", "10.244.1.5");
            outer.record("error", "CNI failed");
        });
        let steps = recorder().steps("uid-1", &[]);
        let names: Vec<_> = steps.iter().map(|s| (&*s.component, &*s.name)).collect();
        assert_eq!(names, [("nodeagent", "step5_run_pod_sandbox"), ("cri", "RunPodSandbox"), ("csi", "NodePublishVolume")]);
        assert_eq!(steps[0].fields.get("ip").map(String::as_str), Some("10.244.1.5"));
        assert_eq!(steps[0].error.as_deref(), Some("CNI failed"));
        assert!(steps[0].start <= steps[1].start && steps[1].end <= steps[0].end);
        assert_eq!(recorder().steps("uid-1", &["cri"]).len(), 1);
        assert_eq!(recorder().steps("uid-1", &["csi"]).len(), 1);
    }

    #[test]
    fn a_pod_learned_late_claims_the_steps_that_came_before() {
        let subscriber = tracing_subscriber::registry().with(layer());
        tracing::subscriber::with_default(subscriber, || {
            // A request for no pod at all leaves nothing behind.
            tracing::info_span!(target: "apiserver", "list", pod_uid = tracing::field::Empty).in_scope(|| {});
            let request = tracing::info_span!(target: "apiserver", "create", pod_uid = tracing::field::Empty);
            let _g = request.enter();
            tracing::info_span!(target: "apiserver", "validate", pod_uid = tracing::field::Empty).in_scope(|| {});
            tracing::info_span!(target: "apiserver", "store write", pod_uid = tracing::field::Empty).in_scope(|| {
                tracing::Span::current().record("pod_uid", "uid-late");
            });
        });
        let names: Vec<_> = recorder().steps("uid-late", &[]).into_iter().map(|s| s.name).collect();
        assert_eq!(names, ["create", "validate", "store write"]);
    }

    #[test]
    fn the_ring_forgets_the_oldest_pod_and_the_oldest_steps() {
        let r = Recorder::default();
        let now = Utc::now();
        for i in 0..MAX_PODS + 1 {
            r.record(&format!("p{i}"), Step::instant("apiserver", "create", now));
        }
        assert!(r.steps("p0", &[]).is_empty());
        assert_eq!(r.steps("p1", &[]).len(), 1);
        for i in 0..MAX_STEPS_PER_POD + 5 {
            r.record("busy", Step::instant("nodeagent", format!("s{i}"), now + chrono::Duration::milliseconds(i as i64)));
        }
        let steps = r.steps("busy", &[]);
        assert_eq!(steps.len(), MAX_STEPS_PER_POD);
        // The journey's beginning stays; the oldest of the later steps went.
        assert_eq!(steps[0].name, "s0");
        assert_eq!(steps[HEAD_STEPS - 1].name, format!("s{}", HEAD_STEPS - 1));
        assert_eq!(steps[HEAD_STEPS].name, format!("s{}", HEAD_STEPS + 5));
        assert_eq!(steps[MAX_STEPS_PER_POD - 1].name, format!("s{}", MAX_STEPS_PER_POD + 4));
    }

    #[test]
    fn pods_and_services_are_traced_by_their_uid_and_slices_by_their_services() {
        let pod = serde_json::json!({"kind": "Pod", "metadata": {"uid": "p1"}});
        let svc = serde_json::json!({"kind": "Service", "metadata": {"uid": "s1"}});
        let owner = |kind: &str, controller: bool| serde_json::json!({"kind": kind, "name": "web", "uid": "s1", "controller": controller});
        let slice = serde_json::json!({"kind": "EndpointSlice", "metadata": {"uid": "e1", "ownerReferences": [owner("Deployment", true), owner("Service", true)]}});
        let mirror = serde_json::json!({"kind": "EndpointSlice", "metadata": {"uid": "e2", "ownerReferences": [owner("Service", false)]}});
        let cm = serde_json::json!({"kind": "ConfigMap", "metadata": {"uid": "c1"}});
        assert_eq!([&pod, &svc, &slice, &mirror, &cm].map(trace_uid), [Some("p1"), Some("s1"), Some("s1"), None, None]);
    }
}
