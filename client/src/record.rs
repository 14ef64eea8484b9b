//! Mirrors client-go's tools/record: components report what they did to an object as core/v1
//! Events, without ever waiting for the API server.
//!
//! `EventRecorder::event` puts the event on a bounded queue and returns; one task writes the
//! queue out. The same event (object, type, reason, message) seen again within ten minutes bumps
//! the existing Event's `count` and `lastTimestamp` instead of creating another (client-go's
//! EventCorrelator, without its spam filter). When the queue is full the event is dropped with a
//! log line, as client-go drops them: events are advisory, scheduling must not wait on them.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, Time};
use kube::api::{Api, Patch, PatchParams, PostParams};
use tokio::sync::mpsc;

pub const NORMAL: &str = "Normal";
pub const WARNING: &str = "Warning";

/// How long a repeated event keeps folding into the first one.
const CORRELATION_WINDOW: Duration = Duration::from_secs(600);
const QUEUE: usize = 1000;
const PRUNE_INTERVAL: Duration = Duration::from_secs(60);

struct Pending {
    object: ObjectReference,
    type_: &'static str,
    reason: String,
    message: String,
}

/// Cheap to clone; every clone feeds the same writer task.
#[derive(Clone)]
pub struct EventRecorder {
    tx: mpsc::Sender<Pending>,
}

impl EventRecorder {
    /// Starts the writer task. `component` is the event source (`default-scheduler`, `kubelet`);
    /// `host` the node it runs on, if any.
    pub fn new(client: kube::Client, component: &str, host: Option<String>) -> EventRecorder {
        let (tx, rx) = mpsc::channel(QUEUE);
        let source = EventSource { component: Some(component.to_string()), host };
        tokio::spawn(write_events(client, source, rx));
        EventRecorder { tx }
    }

    /// Records an event about `object` (type [`NORMAL`] or [`WARNING`]); never blocks.
    pub fn event(&self, object: ObjectReference, type_: &'static str, reason: &str, message: impl Into<String>) {
        let p = Pending { object, type_, reason: reason.to_string(), message: message.into() };
        if let Err(mpsc::error::TrySendError::Full(p)) = self.tx.try_send(p) {
            tracing::warn!(target: "record", reason = p.reason, "event queue full; dropping the event: {}", p.message);
        }
    }
}

/// The object reference of a pod, as events name it.
pub fn pod_reference(pod: &k8s_openapi::api::core::v1::Pod) -> ObjectReference {
    object_reference("v1", "Pod", &pod.metadata)
}

/// The object reference of any object (`ref.GetReference`), as events name it.
pub fn object_reference(api_version: &str, kind: &str, meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> ObjectReference {
    ObjectReference {
        api_version: Some(api_version.into()),
        kind: Some(kind.into()),
        namespace: meta.namespace.clone(),
        name: meta.name.clone(),
        uid: meta.uid.clone(),
        resource_version: meta.resource_version.clone(),
        ..Default::default()
    }
}

type Key = (Option<String>, &'static str, String, String);

async fn write_events(client: kube::Client, source: EventSource, mut rx: mpsc::Receiver<Pending>) {
    // Key → (namespace, event name, count, first seen).
    let mut seen: HashMap<Key, (String, String, i32, Instant)> = HashMap::new();
    let mut pruned = Instant::now();
    while let Some(p) = rx.recv().await {
        // Forget events older than the window: once a minute, not per event (a scheduler records
        // one per pod, thousands a second).
        if pruned.elapsed() >= PRUNE_INTERVAL {
            seen.retain(|_, (_, _, _, at)| at.elapsed() < CORRELATION_WINDOW);
            pruned = Instant::now();
        }
        let namespace = p.object.namespace.clone().unwrap_or_else(|| "default".into());
        let key: Key = (p.object.uid.clone().or(p.object.name.clone()), p.type_, p.reason.clone(), p.message.clone());
        let stamp = Time(k8s_openapi::jiff::Timestamp::now());
        if let Some((ns, name, count, _)) = seen.get_mut(&key).filter(|(_, _, _, at)| at.elapsed() < CORRELATION_WINDOW) {
            *count += 1;
            let patch = serde_json::json!({"count": *count, "lastTimestamp": stamp});
            let api: Api<Event> = Api::namespaced(client.clone(), ns);
            match api.patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await {
                Ok(_) => continue,
                Err(e) => tracing::debug!(target: "record", "could not update event {ns}/{name}: {e}; creating a new one"),
            }
        }
        let name = format!(
            "{}.{:x}",
            p.object.name.as_deref().unwrap_or("unknown"),
            k8s_openapi::jiff::Timestamp::now().as_nanosecond()
        );
        let event = Event {
            metadata: ObjectMeta { name: Some(name.clone()), namespace: Some(namespace.clone()), ..Default::default() },
            involved_object: p.object,
            reason: Some(p.reason),
            message: Some(p.message),
            type_: Some(p.type_.to_string()),
            source: Some(source.clone()),
            reporting_component: source.component.clone(),
            reporting_instance: source.host.clone().or_else(|| source.component.clone()),
            first_timestamp: Some(stamp.clone()),
            last_timestamp: Some(stamp),
            event_time: Some(MicroTime(k8s_openapi::jiff::Timestamp::now())),
            count: Some(1),
            action: None,
            ..Default::default()
        };
        let api: Api<Event> = Api::namespaced(client.clone(), &namespace);
        match api.create(&PostParams::default(), &event).await {
            Ok(_) => {
                seen.insert(key, (namespace, name, 1, Instant::now()));
            }
            Err(e) => tracing::warn!(target: "record", "could not write event {namespace}/{name}: {e}"),
        }
    }
}
