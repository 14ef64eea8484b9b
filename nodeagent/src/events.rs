//! Mirrors kubelet's pkg/kubelet/events/event.go: the reasons the node agent gives its Events,
//! and a recorder that also works with no API server (static pods at bootstrap): every event is
//! logged, and sent when a client exists.

use k8s_openapi::api::core::v1::{ObjectReference, Pod};

pub(crate) const NORMAL: &str = "Normal";
pub(crate) const WARNING: &str = "Warning";

// Container events.
pub(crate) const CREATED_CONTAINER: &str = "Created";
pub(crate) const STARTED_CONTAINER: &str = "Started";
pub(crate) const FAILED_TO_CREATE_CONTAINER: &str = "Failed";
pub(crate) const FAILED_TO_START_CONTAINER: &str = "Failed";
pub(crate) const KILLING_CONTAINER: &str = "Killing";
pub(crate) const BACK_OFF_START_CONTAINER: &str = "BackOff";
pub(crate) const FAILED_POST_START_HOOK: &str = "FailedPostStartHook";
pub(crate) const FAILED_PRE_STOP_HOOK: &str = "FailedPreStopHook";
// Image events.
pub(crate) const PULLING_IMAGE: &str = "Pulling";
pub(crate) const PULLED_IMAGE: &str = "Pulled";
pub(crate) const FAILED_TO_PULL_IMAGE: &str = "Failed";
pub(crate) const BACK_OFF_PULL_IMAGE: &str = "BackOff";
pub(crate) const ERR_IMAGE_NEVER_PULL_POLICY: &str = "ErrImageNeverPull";
// Pod events.
pub(crate) const FAILED_MOUNT_VOLUME: &str = "FailedMount";
pub(crate) const FAILED_CREATE_POD_SANDBOX: &str = "FailedCreatePodSandBox";
pub(crate) const SANDBOX_CHANGED: &str = "SandboxChanged";
pub(crate) const FAILED_SYNC: &str = "FailedSync";
// Probe events.
pub(crate) const CONTAINER_UNHEALTHY: &str = "Unhealthy";
pub(crate) const CONTAINER_PROBE_WARNING: &str = "ProbeWarning";

/// Events about pods and the node, with a log line for each (also when there is no API server).
#[derive(Clone, Default)]
pub(crate) struct Recorder {
    inner: Option<client::record::EventRecorder>,
}

impl Recorder {
    pub(crate) fn new(inner: Option<client::record::EventRecorder>) -> Recorder {
        Recorder { inner }
    }

    /// An event on a pod; for a container, `field_path` is `spec.containers{name}`.
    pub(crate) fn pod_event(&self, pod: &Pod, field_path: Option<String>, type_: &'static str, reason: &str, message: impl Into<String>) {
        let message = message.into();
        let uid = pod.metadata.uid.as_deref().unwrap_or_default();
        let name = pod.metadata.name.as_deref().unwrap_or_default();
        if type_ == WARNING {
            tracing::warn!(target: "kubelet::events", pod = name, pod_uid = uid, reason, %message, "event");
        } else {
            tracing::info!(target: "kubelet::events", pod = name, pod_uid = uid, reason, %message, "event");
        }
        if let Some(r) = &self.inner {
            let mut object = client::record::pod_reference(pod);
            object.field_path = field_path;
            r.event(object, type_, reason, message);
        }
    }

    pub(crate) fn object_event(&self, object: ObjectReference, type_: &'static str, reason: &str, message: impl Into<String>) {
        let message = message.into();
        tracing::info!(target: "kubelet::events", kind = object.kind.as_deref().unwrap_or_default(), name = object.name.as_deref().unwrap_or_default(), reason, %message, "event");
        if let Some(r) = &self.inner {
            r.event(object, type_, reason, message);
        }
    }
}

/// The field path Kubernetes gives a container's events (`spec.containers{app}`).
pub(crate) fn container_field_path(pod: &Pod, container: &str) -> String {
    let is_init = pod
        .spec
        .as_ref()
        .and_then(|s| s.init_containers.as_ref())
        .is_some_and(|ics| ics.iter().any(|c| c.name == container));
    if is_init { format!("spec.initContainers{{{container}}}") } else { format!("spec.containers{{{container}}}") }
}
