//! Mirrors kubelet's pkg/kubelet/status/status_manager.go: the source of truth for pod status.
//!
//! The pod workers compute a status after every sync ([`super::generate`]) and hand it to
//! [`StatusManager::set_pod_status`]; everyone else reads it back with
//! [`StatusManager::get_pod_status`]. Writing to the API server happens apart, in [`StatusManager::run`]:
//!
//! 1. Every set that changes a status bumps that pod's **version** and wakes the writer.
//! 2. The writer syncs every pod whose version is newer than the last one the API server
//!    confirmed (a batch: sets made while a batch runs are written by the next one), and every
//!    [`SYNC_PERIOD`](super::SYNC_PERIOD) every pod, which also repairs a status someone else
//!    overwrote.
//! 3. Syncing one pod: GET it (for a static pod, its mirror pod), merge (conditions others own
//!    are kept; a terminal phase waits until the pod's containers have stopped), skip the write
//!    when the API server already has that status, else PATCH `pods/<name>/status`.
//! 4. A pod being deleted whose final status is written and whose resources the agent has
//!    released ([`StatusManager::pod_resources_released`]) is deleted for good, with grace period
//!    0 and a UID precondition. That is what completes `kubectl delete pod`.
//!
//! The write path sits behind [`PodStatusWriter`] so that tests drive it with a fake.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use api::pod::kubelet_types::{CONFIG_HASH_ANNOTATION_KEY, CONFIG_MIRROR_ANNOTATION_KEY};
use api::pod::{is_pod_phase_terminal, is_static_pod};
use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::{ContainerState, ContainerStateTerminated, ContainerStatus, Pod, PodStatus};
use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions};
use serde_json::{Map, Value, json};
use tokio::sync::Notify;

use super::container_statuses::{CONTAINER_STATUS_UNKNOWN, to_time};
use super::generate::{
    self, CONTAINERS_READY, PHASE_FAILED, PHASE_PENDING, PHASE_RUNNING, POD_READY, condition_owned_by_kubelet,
    containers_ready_condition_for_terminal_phase,
};
use crate::error::{Error, Result};

const TARGET: &str = "kubelet::status";

/// Tuning; tests shrink the period.
#[derive(Clone, Debug)]
pub(crate) struct Options {
    /// How often every pod's status is synced, confirmed or not.
    pub(crate) sync_period: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Options { sync_period: super::SYNC_PERIOD }
    }
}

/// How the status manager reaches the API server: three calls. The real one is
/// [`KubeStatusWriter`]; tests use an in-memory fake.
pub(crate) trait PodStatusWriter: Send + Sync + 'static {
    /// The pod named so, or `None` when the API server has none (404).
    fn get_pod<'a>(&'a self, namespace: &'a str, name: &'a str) -> BoxFuture<'a, Result<Option<Pod>>>;
    /// PATCH `pods/<name>/status` with a JSON merge patch (RFC 7386); returns the updated pod.
    fn patch_status<'a>(&'a self, namespace: &'a str, name: &'a str, patch: Value) -> BoxFuture<'a, Result<Pod>>;
    /// DELETE the pod at once (grace period 0) if its UID is still `uid`.
    fn delete_pod<'a>(&'a self, namespace: &'a str, name: &'a str, uid: &'a str) -> BoxFuture<'a, Result<()>>;
}

/// [`PodStatusWriter`] over a kube client.
#[derive(Clone)]
pub(crate) struct KubeStatusWriter {
    client: kube::Client,
}

impl KubeStatusWriter {
    pub(crate) fn new(client: kube::Client) -> Self {
        KubeStatusWriter { client }
    }

    fn pods(&self, namespace: &str) -> Api<Pod> {
        Api::namespaced(self.client.clone(), namespace)
    }
}

impl PodStatusWriter for KubeStatusWriter {
    fn get_pod<'a>(&'a self, namespace: &'a str, name: &'a str) -> BoxFuture<'a, Result<Option<Pod>>> {
        Box::pin(async move { Ok(self.pods(namespace).get_opt(name).await?) })
    }

    fn patch_status<'a>(&'a self, namespace: &'a str, name: &'a str, patch: Value) -> BoxFuture<'a, Result<Pod>> {
        Box::pin(async move { Ok(self.pods(namespace).patch_status(name, &PatchParams::default(), &Patch::Merge(&patch)).await?) })
    }

    fn delete_pod<'a>(&'a self, namespace: &'a str, name: &'a str, uid: &'a str) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let params = DeleteParams {
                grace_period_seconds: Some(0),
                // The UID precondition keeps us from deleting a new pod of the same name.
                preconditions: Some(Preconditions { uid: Some(uid.to_string()), resource_version: None }),
                ..Default::default()
            };
            self.pods(namespace).delete(name, &params).await?;
            Ok(())
        })
    }
}

/// One pod's status as the agent last set it (kubelet's versionedPodStatus).
#[derive(Clone, Debug)]
struct Versioned {
    status: PodStatus,
    /// Bumped by every change; the API server has it once `api_versions` reaches it.
    version: u64,
    name: String,
    namespace: String,
    /// For a static pod, its config hash: the status goes to the mirror pod carrying it.
    static_hash: Option<String>,
    /// [`StatusManager::terminate_pod`] was called: no container runs, a terminal phase may be
    /// reported (kubelet asks the pod workers' PodCouldHaveRunningContainers).
    containers_stopped: bool,
    /// [`StatusManager::pod_resources_released`] was called: the pod may be deleted.
    resources_released: bool,
}

#[derive(Default)]
struct State {
    statuses: HashMap<String, Versioned>,
    /// The version of each pod's status the API server last confirmed (apiStatusVersions).
    api_versions: HashMap<String, u64>,
    /// The last API call failed to reach the API server: warn once per outage, not per pod.
    unreachable: bool,
}

struct Inner {
    /// A std Mutex, not a task owning the map: pod workers set a status and read it back at
    /// once, and the HTTP server reads statuses, all synchronously; every critical section is a
    /// map lookup or insert and never spans an `.await`, so the lock is never held across one.
    state: Mutex<State>,
    /// Wakes the writer; `notify_one` keeps one permit, so sets made during a batch coalesce
    /// into a single next batch (kubelet's podStatusChannel of capacity 1).
    changed: Notify,
    writer: Option<Arc<dyn PodStatusWriter>>,
    options: Options,
}

/// The pod status cache and its writer. Cheap to clone: every clone is the same manager.
#[derive(Clone)]
pub(crate) struct StatusManager {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for StatusManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StatusManager").field("pods", &self.lock().statuses.len()).finish()
    }
}

/// The transitions a status may not make: a container that terminated for good (restart policy
/// Never, or OnFailure with exit code 0) cannot come back (kubelet's checkContainerStateTransition).
fn check_container_state_transition(old: &PodStatus, new: &PodStatus, pod: &Pod) -> Result<(), String> {
    let policy = pod.spec.as_ref().and_then(|s| s.restart_policy.as_deref()).unwrap_or("Always");
    if policy == "Always" {
        return Ok(());
    }
    let pairs = [
        (old.container_statuses.as_deref(), new.container_statuses.as_deref()),
        (old.init_container_statuses.as_deref(), new.init_container_statuses.as_deref()),
    ];
    for (olds, news) in pairs {
        for o in olds.unwrap_or(&[]) {
            let Some(t) = o.state.as_ref().and_then(|s| s.terminated.as_ref()) else { continue };
            if t.exit_code != 0 && policy == "OnFailure" {
                continue;
            }
            if let Some(n) = news.unwrap_or(&[]).iter().find(|n| n.name == o.name && n.state.as_ref().is_none_or(|s| s.terminated.is_none())) {
                return Err(format!("terminated container {} attempted illegal transition to non-terminated state", n.name));
            }
        }
    }
    Ok(())
}

/// Whether the pod ever got past its init containers (kubelet's hasPodInitialized): only then
/// is a missing app container status a failure.
fn has_pod_initialized(pod: &Pod, status: &PodStatus) -> bool {
    let inits = pod.spec.as_ref().and_then(|s| s.init_containers.as_deref()).unwrap_or(&[]);
    if inits.is_empty() {
        return true;
    }
    let left_waiting = |s: &ContainerStatus| {
        s.last_state.as_ref().is_some_and(|l| l.terminated.is_some()) || s.state.as_ref().is_none_or(|st| st.waiting.is_none())
    };
    if status.container_statuses.iter().flatten().any(left_waiting) {
        return true;
    }
    let last_init = inits.last().map(|c| c.name.as_str());
    status.init_container_statuses.iter().flatten().filter(|s| Some(s.name.as_str()) == last_init).any(|s| {
        let ok = |st: &Option<ContainerState>| st.as_ref().and_then(|x| x.terminated.as_ref()).is_some_and(|t| t.exit_code == 0);
        ok(&s.last_state) || ok(&s.state)
    })
}

/// One word for a container's state in a log line: `running`, `waiting(reason)`,
/// `terminated(code,reason)`, or `none`.
fn container_state_word(c: &ContainerStatus) -> String {
    match c.state.as_ref() {
        Some(ContainerState { running: Some(_), .. }) => "running".into(),
        Some(ContainerState { terminated: Some(t), .. }) => format!("terminated({},{})", t.exit_code, t.reason.as_deref().unwrap_or("")),
        Some(ContainerState { waiting: Some(w), .. }) => format!("waiting({})", w.reason.as_deref().unwrap_or("")),
        _ => "none".into(),
    }
}

fn unknown_terminated() -> ContainerState {
    ContainerState {
        terminated: Some(ContainerStateTerminated {
            exit_code: 137,
            reason: Some(CONTAINER_STATUS_UNKNOWN.into()),
            message: Some("The container could not be located when the pod was terminated".into()),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The status to write, from the API server's current one and ours (kubelet's mergePodStatus):
/// conditions others own come from the API server; a terminal phase is held back while the
/// pod's containers may still run (a pod reported Succeeded must have released what it used);
/// a terminal phase makes Ready and ContainersReady False.
pub(crate) fn merge_pod_status(api: &PodStatus, mut new: PodStatus, could_have_running_containers: bool) -> PodStatus {
    let mut conditions: Vec<_> = api.conditions.iter().flatten().filter(|c| !condition_owned_by_kubelet(&c.type_)).cloned().collect();
    conditions.extend(new.conditions.take().into_iter().flatten().filter(|c| condition_owned_by_kubelet(&c.type_)));
    new.conditions = Some(conditions);
    let to_terminal = !is_pod_phase_terminal(api.phase.as_deref()) && is_pod_phase_terminal(new.phase.as_deref());
    if to_terminal && could_have_running_containers {
        new.phase = api.phase.clone();
        new.reason = api.reason.clone();
        new.message = api.message.clone();
    }
    if is_pod_phase_terminal(new.phase.as_deref()) {
        let phase = new.phase.clone().unwrap_or_default();
        for c in new.conditions.iter_mut().flatten() {
            if (c.type_ == POD_READY || c.type_ == CONTAINERS_READY) && c.status == "True" {
                let terminal = containers_ready_condition_for_terminal_phase(&c.type_, &phase);
                c.status = terminal.status;
                c.reason = terminal.reason;
                c.message = None;
            }
        }
    }
    new
}

/// A JSON merge patch (RFC 7386) that turns `old` into `new`: changed keys with their new
/// value, removed keys as `null`, lists whole. Written because the API server compares nothing
/// for us: a patch of just `status` would leave fields we dropped (an old `reason`) in place.
pub(crate) fn create_merge_patch(old: &Value, new: &Value) -> Value {
    match (old, new) {
        (Value::Object(o), Value::Object(n)) => {
            let mut patch = Map::new();
            for (k, nv) in n {
                match o.get(k) {
                    Some(ov) if ov == nv => {}
                    Some(ov) if ov.is_object() && nv.is_object() => {
                        patch.insert(k.clone(), create_merge_patch(ov, nv));
                    }
                    _ => {
                        patch.insert(k.clone(), nv.clone());
                    }
                }
            }
            for k in o.keys().filter(|k| !n.contains_key(*k)) {
                patch.insert(k.clone(), Value::Null);
            }
            Value::Object(patch)
        }
        _ => new.clone(),
    }
}

fn is_conflict(e: &Error) -> bool {
    matches!(e, Error::Kube(kube::Error::Api(s)) if s.code == 409)
}

fn is_mirror_of(api_pod: &Pod, hash: &str) -> bool {
    api_pod.metadata.annotations.as_ref().and_then(|a| a.get(CONFIG_MIRROR_ANNOTATION_KEY)).is_some_and(|m| m == hash)
}

impl StatusManager {
    /// A manager writing through `client`; `None` (no API server, static pods only) keeps
    /// statuses locally and writes nothing.
    pub(crate) fn new(client: Option<kube::Client>, options: Options) -> StatusManager {
        let writer = client.map(|c| Arc::new(KubeStatusWriter::new(c)) as Arc<dyn PodStatusWriter>);
        StatusManager::with_writer(writer, options)
    }

    pub(crate) fn with_writer(writer: Option<Arc<dyn PodStatusWriter>>, options: Options) -> StatusManager {
        StatusManager {
            inner: Arc::new(Inner { state: Mutex::new(State::default()), changed: Notify::new(), writer, options }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic elsewhere while holding the lock leaves whole map entries, never half-written
        // ones: carrying on is safe.
        self.inner.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The status last set for the pod with this UID.
    pub(crate) fn get_pod_status(&self, uid: &str) -> Option<PodStatus> {
        self.lock().statuses.get(uid).map(|v| v.status.clone())
    }

    /// Record a pod's new status (kubelet's SetPodStatus). Refused, with an error logged, when
    /// it would take the pod out of a terminal phase or bring back a container that terminated
    /// for good. Conditions keep their transition times while their status holds, and the start
    /// time never changes once set.
    pub(crate) fn set_pod_status(&self, pod: &Pod, status: PodStatus) {
        self.update_status_internal(pod, status, false);
    }

    /// The pod's containers have all stopped (kubelet's TerminatePod, called from
    /// SyncTerminatedPod; call it once SyncTerminatingPod has killed the pod). Any container
    /// without a terminated state is marked terminated (137, ContainerStatusUnknown) so that a
    /// pod is never reported successful by accident, and a pod not yet terminal becomes Failed
    /// (static pods excepted). From now on a terminal phase is written as soon as it is set.
    pub(crate) fn terminate_pod(&self, pod: &Pod) {
        let Some(uid) = pod.metadata.uid.clone() else { return };
        let mut status = {
            let st = self.lock();
            st.statuses.get(&uid).map(|v| v.status.clone()).or_else(|| pod.status.clone()).unwrap_or_default()
        };
        if has_pod_initialized(pod, &status) {
            for c in status.container_statuses.iter_mut().flatten() {
                if c.state.as_ref().is_none_or(|s| s.terminated.is_none()) {
                    c.state = Some(unknown_terminated());
                }
            }
        }
        // Init containers up to the last one that ever left its wait (at least the first):
        // the ones that never ran stay waiting.
        if let Some(inits) = status.init_container_statuses.as_mut() {
            let started = |s: &ContainerStatus| {
                s.state.as_ref().is_none_or(|st| st.waiting.is_none()) || s.last_state.as_ref().is_some_and(|l| l.terminated.is_some())
            };
            let upto = inits.iter().rposition(started).map_or(inits.len().min(1), |i| i + 1);
            for c in inits.iter_mut().take(upto) {
                if c.state.as_ref().is_none_or(|s| s.terminated.is_none()) {
                    c.state = Some(unknown_terminated());
                }
            }
        }
        if !is_static_pod(pod) && !is_pod_phase_terminal(status.phase.as_deref()) {
            if status.phase.as_deref() == Some(PHASE_RUNNING) {
                tracing::info!(target: TARGET, pod_uid = %uid, "terminated pod was still Running: marking it Failed");
            }
            status.phase = Some(PHASE_FAILED.into());
        }
        self.update_status_internal(pod, status, true);
        if let Some(v) = self.lock().statuses.get_mut(&uid) {
            v.containers_stopped = true;
        }
    }

    /// The agent has released everything the pod held (volumes unmounted, cgroup removed): once
    /// its final status is written, a pod being deleted may be removed from the API server.
    pub(crate) fn pod_resources_released(&self, uid: &str) {
        let mut st = self.lock();
        let Some(v) = st.statuses.get_mut(uid) else {
            tracing::debug!(target: TARGET, pod_uid = %uid, "resources released for a pod without status");
            return;
        };
        v.resources_released = true;
        v.containers_stopped = true;
        // A new version makes the next batch sync it, which deletes it.
        v.version += 1;
        drop(st);
        self.inner.changed.notify_one();
    }

    /// Forget every pod not in `keep` (UIDs of the pods the agent still has).
    pub(crate) fn remove_orphaned_statuses(&self, keep: &HashSet<String>) {
        let mut st = self.lock();
        st.statuses.retain(|uid, _| keep.contains(uid));
        let State { statuses, api_versions, .. } = &mut *st;
        api_versions.retain(|uid, _| statuses.contains_key(uid));
    }

    fn update_status_internal(&self, pod: &Pod, mut status: PodStatus, force: bool) {
        let Some(uid) = pod.metadata.uid.clone() else {
            tracing::warn!(target: TARGET, pod = ?pod.metadata.name, "status for a pod without UID ignored");
            return;
        };
        let pod_key = format!("{}/{}", pod.metadata.namespace.as_deref().unwrap_or(""), pod.metadata.name.as_deref().unwrap_or(""));
        let mut st = self.lock();
        let cached = st.statuses.get(&uid);
        let old = cached.map(|v| v.status.clone()).or_else(|| pod.status.clone()).unwrap_or_default();

        if is_pod_phase_terminal(old.phase.as_deref()) && !is_pod_phase_terminal(status.phase.as_deref()) {
            tracing::error!(target: TARGET, pod = %pod_key, pod_uid = %uid, from = ?old.phase, to = ?status.phase, "status update refused: a pod never leaves a terminal phase");
            return;
        }
        if let Err(e) = check_container_state_transition(&old, &status, pod) {
            tracing::error!(target: TARGET, pod = %pod_key, pod_uid = %uid, error = %e, "status update refused");
            return;
        }
        if is_pod_phase_terminal(status.phase.as_deref()) && !is_pod_phase_terminal(old.phase.as_deref()) {
            // Once terminal a pod never runs again on this node: say what it was computed from.
            let states: Vec<String> = status
                .container_statuses
                .iter()
                .flatten()
                .map(|c| format!("{}={}", c.name, container_state_word(c)))
                .collect();
            tracing::info!(target: TARGET, pod = %pod_key, pod_uid = %uid, from = ?old.phase, to = ?status.phase,
                old_from = if cached.is_some() { "agent" } else { "api" }, old_started = old.start_time.is_some(),
                containers = %states.join(","), reason = ?status.reason, forced = force, "pod phase becomes terminal");
        }
        let now = to_time(chrono::Utc::now());
        generate::update_last_transition_times(&mut status, Some(&old), &now);
        status.start_time = old.start_time.clone().or(status.start_time).or(Some(now));
        if status.phase.is_none() {
            status.phase = Some(PHASE_PENDING.into());
        }

        if let Some(c) = cached
            && c.status == status
            && !force
        {
            return;
        }
        let (version, containers_stopped, resources_released) =
            cached.map_or((0, false, false), |c| (c.version, c.containers_stopped, c.resources_released));
        let static_hash = is_static_pod(pod)
            .then(|| pod.metadata.annotations.as_ref().and_then(|a| a.get(CONFIG_HASH_ANNOTATION_KEY)).cloned())
            .flatten();
        tracing::debug!(target: TARGET, pod = %pod_key, pod_uid = %uid, version = version + 1, phase = ?status.phase, "status set");
        st.statuses.insert(
            uid,
            Versioned {
                status,
                version: version + 1,
                name: pod.metadata.name.clone().unwrap_or_default(),
                namespace: pod.metadata.namespace.clone().unwrap_or_default(),
                static_hash,
                containers_stopped,
                resources_released,
            },
        );
        drop(st);
        self.inner.changed.notify_one();
    }

    fn drop_status(&self, uid: &str) {
        let mut st = self.lock();
        st.statuses.remove(uid);
        st.api_versions.remove(uid);
    }

    fn api_reachable(&self) {
        let mut st = self.lock();
        if st.unreachable {
            st.unreachable = false;
            tracing::info!(target: TARGET, "API server reachable again: writing pod statuses");
        }
    }

    fn api_error(&self, pod_key: &str, uid: &str, e: &Error) {
        if let Error::Kube(kube::Error::Api(s)) = e {
            // The API server answered: this pod's problem, not an outage.
            tracing::warn!(target: TARGET, pod = %pod_key, pod_uid = %uid, code = s.code, error = %s.message, "pod status write failed; retrying");
            return;
        }
        let mut st = self.lock();
        if !st.unreachable {
            st.unreachable = true;
            tracing::warn!(target: TARGET, error = %e, "API server unreachable: keeping pod statuses and retrying");
        } else {
            tracing::debug!(target: TARGET, pod = %pod_key, pod_uid = %uid, error = %e, "API server still unreachable");
        }
    }

    /// One pass of the writer (kubelet's syncBatch): every pod whose status the API server has
    /// not confirmed, or with `all`, every pod. Returns how many pods were synced.
    pub(crate) async fn sync_batch(&self, all: bool) -> usize {
        let Some(writer) = self.inner.writer.clone() else { return 0 };
        let mut work: Vec<(String, Versioned)> = {
            let st = self.lock();
            st.statuses
                .iter()
                .filter(|(uid, v)| all || st.api_versions.get(*uid).is_none_or(|w| *w < v.version))
                .map(|(uid, v)| (uid.clone(), v.clone()))
                .collect()
        };
        work.sort_by(|a, b| a.0.cmp(&b.0));
        for (uid, v) in &work {
            self.sync_pod(writer.as_ref(), uid, v).await;
        }
        work.len()
    }

    /// Write one pod's status (kubelet's syncPod in status_manager.go).
    async fn sync_pod(&self, writer: &dyn PodStatusWriter, uid: &str, v: &Versioned) {
        let pod_key = format!("{}/{}", v.namespace, v.name);
        // Step 1: the pod as the API server has it (for a static pod: its mirror pod).
        let api_pod = match writer.get_pod(&v.namespace, &v.name).await {
            Ok(Some(p)) => p,
            Ok(None) if v.static_hash.is_some() => {
                tracing::debug!(target: TARGET, pod = %pod_key, pod_uid = %uid, "static pod has no mirror pod yet; status kept");
                self.api_reachable();
                return;
            }
            Ok(None) => {
                tracing::info!(target: TARGET, pod = %pod_key, pod_uid = %uid, "pod no longer on the API server; status dropped");
                self.api_reachable();
                self.drop_status(uid);
                return;
            }
            Err(e) => return self.api_error(&pod_key, uid, &e),
        };
        self.api_reachable();

        // Step 2: is that object ours?
        let api_uid = api_pod.metadata.uid.clone().unwrap_or_default();
        match &v.static_hash {
            Some(hash) if !is_mirror_of(&api_pod, hash) => {
                tracing::debug!(target: TARGET, pod = %pod_key, pod_uid = %uid, "no mirror pod of this static pod yet; status kept");
                return;
            }
            None if api_uid != uid => {
                tracing::info!(target: TARGET, pod = %pod_key, pod_uid = %uid, api_uid = %api_uid, "pod was deleted and recreated; status dropped");
                self.drop_status(uid);
                return;
            }
            _ => {}
        }

        // Step 3: merge and write, unless the API server has it already.
        let api_status = api_pod.status.clone().unwrap_or_default();
        let merged = merge_pod_status(&api_status, v.status.clone(), !v.containers_stopped);
        let mut pod_after = api_pod;
        if api_status != merged {
            let (old_v, new_v) = match (serde_json::to_value(&api_status), serde_json::to_value(&merged)) {
                (Ok(o), Ok(n)) => (o, n),
                (Err(e), _) | (_, Err(e)) => {
                    tracing::error!(target: TARGET, pod = %pod_key, pod_uid = %uid, error = %e, "pod status does not serialize");
                    return;
                }
            };
            // The UID makes the write fail on a pod recreated under the same name.
            let patch = json!({"metadata": {"uid": api_uid}, "status": create_merge_patch(&old_v, &new_v)});
            match writer.patch_status(&v.namespace, &v.name, patch).await {
                Ok(p) => {
                    tracing::info!(target: TARGET, pod = %pod_key, pod_uid = %uid, version = v.version, phase = ?merged.phase, "pod status written");
                    pod_after = p;
                }
                Err(e) if e.is_not_found() && v.static_hash.is_none() => {
                    tracing::info!(target: TARGET, pod = %pod_key, pod_uid = %uid, "pod no longer on the API server; status dropped");
                    self.drop_status(uid);
                    return;
                }
                Err(e) => return self.api_error(&pod_key, uid, &e),
            }
        } else {
            tracing::trace!(target: TARGET, pod = %pod_key, pod_uid = %uid, version = v.version, "pod status up to date");
        }
        {
            let mut st = self.lock();
            if st.statuses.contains_key(uid) {
                let w = st.api_versions.entry(uid.to_string()).or_insert(0);
                *w = (*w).max(v.version);
            }
        }

        // Step 4: finish a deletion (kubelet's canBeDeleted): the pod is being deleted, the API
        // server shows its terminal phase, and the agent released its resources. Never a mirror
        // pod: its life follows the manifest, not this status.
        let can_be_deleted = pod_after.metadata.deletion_timestamp.is_some()
            && v.static_hash.is_none()
            && is_pod_phase_terminal(pod_after.status.as_ref().and_then(|s| s.phase.as_deref()))
            && v.resources_released;
        if !can_be_deleted {
            return;
        }
        match writer.delete_pod(&v.namespace, &v.name, &api_uid).await {
            Ok(()) => {
                tracing::info!(target: TARGET, pod = %pod_key, pod_uid = %uid, "pod fully terminated and removed from the API server");
                self.drop_status(uid);
            }
            Err(e) if e.is_not_found() || is_conflict(&e) => self.drop_status(uid),
            Err(e) => self.api_error(&pod_key, uid, &e),
        }
    }

    /// Write statuses until `shutdown` completes: a batch whenever a status changes, and all of
    /// them every `sync_period`. Without an API server it only waits.
    pub(crate) async fn run(self, shutdown: impl Future<Output = ()>) {
        tokio::pin!(shutdown);
        if self.inner.writer.is_none() {
            return shutdown.await;
        }
        let mut ticker = tokio::time::interval(self.inner.options.sync_period);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ticker.tick().await;
        loop {
            let all = tokio::select! {
                () = &mut shutdown => return,
                () = self.inner.changed.notified() => false,
                _ = ticker.tick() => true,
            };
            tokio::select! {
                () = &mut shutdown => return,
                _ = self.sync_batch(all) => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::generate::{PHASE_SUCCEEDED, POD_SCHEDULED};
    use k8s_openapi::api::core::v1::{ContainerStateRunning, PodCondition};

    /// An in-memory API server for pods: applies merge patches as the real one does and records
    /// every write.
    #[derive(Default)]
    struct FakeWriter {
        pods: Mutex<HashMap<String, Value>>,
        writes: Mutex<Vec<String>>,
        down: std::sync::atomic::AtomicBool,
    }

    impl FakeWriter {
        fn put(&self, pod: &Pod) {
            let key = format!("{}/{}", pod.metadata.namespace.as_deref().unwrap_or(""), pod.metadata.name.as_deref().unwrap_or(""));
            self.pods.lock().unwrap().insert(key, serde_json::to_value(pod).unwrap());
        }
        fn pod(&self, key: &str) -> Option<Pod> {
            self.pods.lock().unwrap().get(key).map(|v| serde_json::from_value(v.clone()).unwrap())
        }
        fn take_writes(&self) -> Vec<String> {
            std::mem::take(&mut *self.writes.lock().unwrap())
        }
        fn check(&self) -> Result<()> {
            if self.down.load(std::sync::atomic::Ordering::SeqCst) {
                return Err(Error::NotReady("connection refused".into()));
            }
            Ok(())
        }
    }

    fn api_err(code: u16) -> Error {
        Error::Kube(kube::Error::Api(kube::core::Status::failure("fake", "Fake").with_code(code).boxed()))
    }

    impl PodStatusWriter for FakeWriter {
        fn get_pod<'a>(&'a self, ns: &'a str, name: &'a str) -> BoxFuture<'a, Result<Option<Pod>>> {
            Box::pin(async move {
                self.check()?;
                Ok(self.pod(&format!("{ns}/{name}")))
            })
        }
        fn patch_status<'a>(&'a self, ns: &'a str, name: &'a str, patch: Value) -> BoxFuture<'a, Result<Pod>> {
            Box::pin(async move {
                self.check()?;
                let key = format!("{ns}/{name}");
                let mut pods = self.pods.lock().unwrap();
                let cur = pods.get(&key).cloned().ok_or_else(|| api_err(404))?;
                if patch.pointer("/metadata/uid") != cur.pointer("/metadata/uid") {
                    return Err(api_err(409));
                }
                let mut next = cur.clone();
                next["status"] = apimachinery::patch::merge_patch(&cur["status"], &patch["status"]);
                pods.insert(key.clone(), next.clone());
                self.writes.lock().unwrap().push(format!("patch {key} phase={}", next.pointer("/status/phase").and_then(Value::as_str).unwrap_or("")));
                Ok(serde_json::from_value(next).unwrap())
            })
        }
        fn delete_pod<'a>(&'a self, ns: &'a str, name: &'a str, uid: &'a str) -> BoxFuture<'a, Result<()>> {
            Box::pin(async move {
                self.check()?;
                let key = format!("{ns}/{name}");
                let mut pods = self.pods.lock().unwrap();
                let cur = pods.get(&key).ok_or_else(|| api_err(404))?;
                if cur.pointer("/metadata/uid").and_then(Value::as_str) != Some(uid) {
                    return Err(api_err(409));
                }
                pods.remove(&key);
                self.writes.lock().unwrap().push(format!("delete {key}"));
                Ok(())
            })
        }
    }

    fn pod(uid: &str, policy: &str) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": format!("p-{uid}"), "namespace": "default", "uid": uid},
            "spec": {"restartPolicy": policy, "containers": [{"name": "app", "image": "busybox"}]},
            "status": {"phase": "Pending"}
        }))
        .unwrap()
    }

    fn status(phase: &str, app: ContainerState, ready: bool) -> PodStatus {
        PodStatus {
            phase: Some(phase.into()),
            conditions: Some(vec![PodCondition { type_: POD_READY.into(), status: if ready { "True" } else { "False" }.into(), ..Default::default() }]),
            container_statuses: Some(vec![ContainerStatus { name: "app".into(), state: Some(app), ready, ..Default::default() }]),
            ..Default::default()
        }
    }

    fn running() -> ContainerState {
        ContainerState { running: Some(ContainerStateRunning { started_at: None }), ..Default::default() }
    }

    fn exited(code: i32) -> ContainerState {
        ContainerState { terminated: Some(ContainerStateTerminated { exit_code: code, ..Default::default() }), ..Default::default() }
    }

    fn setup(pods: &[&Pod]) -> (StatusManager, Arc<FakeWriter>) {
        let fake = Arc::new(FakeWriter::default());
        for p in pods {
            fake.put(p);
        }
        (StatusManager::with_writer(Some(fake.clone()), Options::default()), fake)
    }

    fn api_phase(fake: &FakeWriter, key: &str) -> Option<String> {
        fake.pod(key).and_then(|p| p.status).and_then(|s| s.phase)
    }

    #[tokio::test]
    async fn versions_decide_what_is_written() {
        let p = pod("u1", "Always");
        let (m, fake) = setup(&[&p]);
        m.set_pod_status(&p, status(PHASE_RUNNING, running(), true));
        assert_eq!(m.sync_batch(false).await, 1);
        assert_eq!(fake.take_writes(), ["patch default/p-u1 phase=Running"]);
        // Written: nothing to do until a change.
        assert_eq!(m.sync_batch(false).await, 0);
        m.set_pod_status(&p, status(PHASE_RUNNING, running(), true));
        assert_eq!(m.sync_batch(false).await, 0, "the same status is no new version");
        // The periodic pass looks at every pod but writes nothing the API server already has.
        assert_eq!(m.sync_batch(true).await, 1);
        assert!(fake.take_writes().is_empty());
        // Someone else overwrote the status: the periodic pass repairs it.
        let mut other = fake.pod("default/p-u1").unwrap();
        other.status.as_mut().unwrap().phase = Some("Pending".into());
        fake.put(&other);
        m.sync_batch(true).await;
        assert_eq!(fake.take_writes(), ["patch default/p-u1 phase=Running"]);
        // Several sets before a batch: one write, of the last.
        m.set_pod_status(&p, status(PHASE_RUNNING, running(), false));
        m.set_pod_status(&p, status(PHASE_RUNNING, exited(1), false));
        assert_eq!(m.sync_batch(false).await, 1);
        assert_eq!(fake.take_writes().len(), 1);
        let api = fake.pod("default/p-u1").unwrap().status.unwrap();
        assert_eq!(api.container_statuses.unwrap()[0].state, Some(exited(1)));
    }

    #[tokio::test]
    async fn transition_times_and_start_time_are_kept_across_sets() {
        let p = pod("u1", "Always");
        let (m, _fake) = setup(&[&p]);
        m.set_pod_status(&p, status(PHASE_RUNNING, running(), false));
        let first = m.get_pod_status("u1").unwrap();
        let t = |s: &PodStatus| s.conditions.as_ref().unwrap()[0].last_transition_time.clone();
        assert!(t(&first).is_some());
        let mut later = status(PHASE_RUNNING, running(), false);
        later.conditions.as_mut().unwrap()[0].last_transition_time = Some(to_time(chrono::Utc::now() + chrono::Duration::hours(1)));
        later.start_time = Some(to_time(chrono::Utc::now() + chrono::Duration::hours(1)));
        m.set_pod_status(&p, later);
        let second = m.get_pod_status("u1").unwrap();
        assert_eq!(t(&second), t(&first));
        assert_eq!(second.start_time, first.start_time);
    }

    #[tokio::test]
    async fn terminal_phase_is_never_left() {
        let p = pod("u1", "Never");
        let (m, _fake) = setup(&[&p]);
        m.set_pod_status(&p, status(PHASE_SUCCEEDED, exited(0), false));
        m.set_pod_status(&p, status(PHASE_RUNNING, running(), true));
        assert_eq!(m.get_pod_status("u1").unwrap().phase.as_deref(), Some(PHASE_SUCCEEDED));
        // Nor may a container that ended for good run again (Never), even in a Running pod.
        let q = pod("u2", "Never");
        m.set_pod_status(&q, status(PHASE_RUNNING, exited(1), false));
        m.set_pod_status(&q, status(PHASE_RUNNING, running(), true));
        assert_eq!(m.get_pod_status("u2").unwrap().container_statuses.unwrap()[0].state, Some(exited(1)));
        // With Always it may.
        let r = pod("u3", "Always");
        m.set_pod_status(&r, status(PHASE_RUNNING, exited(1), false));
        m.set_pod_status(&r, status(PHASE_RUNNING, running(), true));
        assert_eq!(m.get_pod_status("u3").unwrap().container_statuses.unwrap()[0].state, Some(running()));
    }

    #[tokio::test]
    async fn terminal_phase_waits_for_containers_to_stop() {
        let p = pod("u1", "Never");
        let (m, fake) = setup(&[&p]);
        m.set_pod_status(&p, status(PHASE_RUNNING, running(), true));
        m.sync_batch(false).await;
        m.set_pod_status(&p, status(PHASE_SUCCEEDED, exited(0), false));
        m.sync_batch(false).await;
        assert_eq!(api_phase(&fake, "default/p-u1").as_deref(), Some(PHASE_RUNNING), "held back: containers may run");
        m.terminate_pod(&p);
        m.sync_batch(false).await;
        assert_eq!(api_phase(&fake, "default/p-u1").as_deref(), Some(PHASE_SUCCEEDED));
    }

    #[tokio::test]
    async fn deletion_completes_once_resources_are_released() {
        let mut p = pod("u1", "Always");
        p.metadata.deletion_timestamp = Some(to_time(chrono::Utc::now()));
        let (m, fake) = setup(&[&p]);
        m.set_pod_status(&p, status(PHASE_RUNNING, running(), true));
        m.sync_batch(false).await;
        // The pod workers stopped the containers: TerminatePod marks what is left and fails it.
        m.terminate_pod(&p);
        let s = m.get_pod_status("u1").unwrap();
        assert_eq!(s.phase.as_deref(), Some(PHASE_FAILED));
        let t = s.container_statuses.unwrap()[0].state.clone().unwrap().terminated.unwrap();
        assert_eq!((t.exit_code, t.reason.as_deref()), (137, Some(CONTAINER_STATUS_UNKNOWN)));
        m.sync_batch(false).await;
        assert_eq!(fake.take_writes(), ["patch default/p-u1 phase=Running", "patch default/p-u1 phase=Failed"]);
        assert!(fake.pod("default/p-u1").is_some(), "not deleted before resources are released");
        m.pod_resources_released("u1");
        m.sync_batch(false).await;
        assert_eq!(fake.take_writes(), ["delete default/p-u1"]);
        assert!(fake.pod("default/p-u1").is_none());
        assert!(m.get_pod_status("u1").is_none());
    }

    #[tokio::test]
    async fn pods_gone_or_recreated_lose_their_status() {
        let p = pod("u1", "Always");
        let (m, fake) = setup(&[]);
        m.set_pod_status(&p, status(PHASE_RUNNING, running(), true));
        m.sync_batch(false).await;
        assert!(m.get_pod_status("u1").is_none(), "404: dropped");
        // Same name, new UID: not ours.
        let mut newer = pod("u1", "Always");
        newer.metadata.uid = Some("u9".into());
        fake.put(&newer);
        m.set_pod_status(&p, status(PHASE_RUNNING, running(), true));
        m.sync_batch(false).await;
        assert!(m.get_pod_status("u1").is_none());
        assert!(fake.take_writes().is_empty());
    }

    #[tokio::test]
    async fn static_pod_status_goes_to_its_mirror() {
        let mut p = pod("static-hash", "Always");
        let ann = p.metadata.annotations.get_or_insert_with(Default::default);
        ann.insert("kubernetes.io/config.source".into(), "file".into());
        ann.insert(CONFIG_HASH_ANNOTATION_KEY.into(), "static-hash".into());
        let (m, fake) = setup(&[]);
        m.set_pod_status(&p, status(PHASE_RUNNING, running(), true));
        m.sync_batch(false).await;
        assert!(m.get_pod_status("static-hash").is_some(), "no mirror yet: kept");
        // A pod of that name that is not its mirror: left alone.
        let mut stranger = pod("other", "Always");
        stranger.metadata.name = p.metadata.name.clone();
        fake.put(&stranger);
        m.sync_batch(false).await;
        assert!(fake.take_writes().is_empty());
        // The mirror appears: the next batch writes to it, with the mirror's UID.
        let mut mirror = stranger.clone();
        mirror.metadata.uid = Some("mirror-uid".into());
        mirror.metadata.annotations = Some([(CONFIG_MIRROR_ANNOTATION_KEY.to_string(), "static-hash".to_string())].into());
        fake.put(&mirror);
        m.sync_batch(false).await;
        assert_eq!(fake.take_writes(), ["patch default/p-static-hash phase=Running"]);
    }

    #[tokio::test]
    async fn an_unreachable_api_server_keeps_everything() {
        let p = pod("u1", "Always");
        let (m, fake) = setup(&[&p]);
        fake.down.store(true, std::sync::atomic::Ordering::SeqCst);
        m.set_pod_status(&p, status(PHASE_RUNNING, running(), true));
        m.sync_batch(false).await;
        m.sync_batch(false).await;
        assert!(m.lock().unreachable);
        assert!(m.get_pod_status("u1").is_some());
        fake.down.store(false, std::sync::atomic::Ordering::SeqCst);
        assert_eq!(m.sync_batch(false).await, 1, "still unconfirmed: retried");
        assert_eq!(fake.take_writes(), ["patch default/p-u1 phase=Running"]);
        assert!(!m.lock().unreachable);
    }

    #[tokio::test]
    async fn orphans_are_removed() {
        let (a, b) = (pod("a", "Always"), pod("b", "Always"));
        let (m, _fake) = setup(&[&a, &b]);
        m.set_pod_status(&a, status(PHASE_RUNNING, running(), true));
        m.set_pod_status(&b, status(PHASE_RUNNING, running(), true));
        m.remove_orphaned_statuses(&HashSet::from(["a".to_string()]));
        assert!(m.get_pod_status("a").is_some());
        assert!(m.get_pod_status("b").is_none());
    }

    /// Wait (bounded) until the fake has recorded a write; real time, a short sync period.
    async fn next_writes(fake: &FakeWriter) -> Vec<String> {
        for _ in 0..500 {
            let w = fake.take_writes();
            if !w.is_empty() {
                return w;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        Vec::new()
    }

    #[tokio::test]
    async fn run_writes_on_change_and_periodically() {
        let p = pod("u1", "Always");
        let fake = Arc::new(FakeWriter::default());
        fake.put(&p);
        // The period is long for the first check (a prompt write cannot be the periodic one).
        let m = StatusManager::with_writer(Some(fake.clone()), Options { sync_period: Duration::from_millis(1500) });
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(m.clone().run(async move {
            let _ = stopped.await;
        }));
        let start = std::time::Instant::now();
        m.set_pod_status(&p, status(PHASE_RUNNING, running(), true));
        assert_eq!(next_writes(&fake).await, ["patch default/p-u1 phase=Running"]);
        assert!(start.elapsed() < Duration::from_millis(1500), "written on change, not by the periodic pass");
        // Someone clears the status: no change on our side, the periodic pass repairs it.
        let mut other = fake.pod("default/p-u1").unwrap();
        other.status = None;
        fake.put(&other);
        assert_eq!(next_writes(&fake).await, ["patch default/p-u1 phase=Running"]);
        let _ = stop.send(());
        task.await.unwrap();
    }

    #[test]
    fn merge_keeps_others_conditions_and_holds_terminal_phase() {
        let cond = |t: &str, s: &str| PodCondition { type_: t.into(), status: s.into(), ..Default::default() };
        let api = PodStatus {
            phase: Some(PHASE_RUNNING.into()),
            conditions: Some(vec![cond("DisruptionTarget", "True"), cond(POD_READY, "True")]),
            ..Default::default()
        };
        let ours = PodStatus {
            phase: Some(PHASE_SUCCEEDED.into()),
            conditions: Some(vec![cond("Custom", "True"), cond(POD_READY, "True"), cond(CONTAINERS_READY, "True"), cond(POD_SCHEDULED, "True")]),
            ..Default::default()
        };
        let held = merge_pod_status(&api, ours.clone(), true);
        assert_eq!(held.phase.as_deref(), Some(PHASE_RUNNING));
        let types: Vec<_> = held.conditions.iter().flatten().map(|c| (c.type_.as_str(), c.status.as_str())).collect();
        assert_eq!(types, [("DisruptionTarget", "True"), (POD_READY, "True"), (CONTAINERS_READY, "True"), (POD_SCHEDULED, "True")]);
        let done = merge_pod_status(&api, ours, false);
        assert_eq!(done.phase.as_deref(), Some(PHASE_SUCCEEDED));
        let ready: Vec<_> = done.conditions.iter().flatten().filter(|c| c.type_ == POD_READY || c.type_ == CONTAINERS_READY).map(|c| (c.status.as_str(), c.reason.as_deref())).collect();
        assert_eq!(ready, [("False", Some("PodCompleted")), ("False", Some("PodCompleted"))]);
    }

    #[test]
    fn merge_patch_turns_old_into_new() {
        let cases = [
            (json!({"phase": "Pending", "reason": "X"}), json!({"phase": "Running"})),
            (json!({"conditions": [{"type": "Ready"}]}), json!({"conditions": [{"type": "Ready"}, {"type": "PodScheduled"}]})),
            (json!({"a": {"b": 1, "c": 2}}), json!({"a": {"b": 1}})),
            (json!({}), json!({"podIP": "10.0.0.1", "podIPs": [{"ip": "10.0.0.1"}]})),
            (json!({"a": 1}), json!({"a": {"b": 2}})),
        ];
        for (old, new) in cases {
            let patch = create_merge_patch(&old, &new);
            assert_eq!(apimachinery::patch::merge_patch(&old, &patch), new, "{old} → {new} via {patch}");
        }
        assert_eq!(create_merge_patch(&json!({"a": 1, "b": 2}), &json!({"a": 1, "b": 3})), json!({"b": 3}), "only what changed");
    }
}
