//! Mirrors kubelet's pkg/kubelet/pleg/generic.go: PLEG by periodic relisting.
//!
//! Each relist:
//! 1. lists every sandbox and container (ListPodSandbox + ListContainers, no filter);
//! 2. groups them by the pod UID label into [`PodRecords`] ([`group_pods`]) and updates
//!    `kubelet_running_pods` / `kubelet_running_containers`;
//! 3. compares them with the previous records ([`compute_events`], pure and table-tested);
//! 4. sends the events, dropping (and counting) those that find the channel full;
//! 5. remembers the new records and the time, which [`GenericPleg::healthy`] checks.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use k8s_cri::v1 as api;
use tokio::sync::mpsc;
use tokio::sync::mpsc::error::TrySendError;
use tokio::time::Instant;

use super::Options;
use crate::container::{ContainerState, POD_UID_LABEL, PodLifecycleEvent, PodLifecycleEventType};
use crate::cri::RemoteRuntime;
use crate::metrics::metrics;

const TARGET: &str = "kubelet::pleg";

/// What PLEG remembers of one pod: whether each sandbox is ready, and each container's state,
/// by ID (kubelet keeps whole kubecontainer.Pods; the states are all the comparison needs).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct PodRecord {
    pub(crate) sandboxes: BTreeMap<String, bool>,
    pub(crate) containers: BTreeMap<String, ContainerState>,
}

/// Every pod the runtime has, by pod UID. Sorted, so that events come out in a stable order.
pub(crate) type PodRecords = BTreeMap<String, PodRecord>;

fn container_state(state: i32) -> ContainerState {
    match api::ContainerState::try_from(state) {
        Ok(api::ContainerState::ContainerCreated) => ContainerState::Created,
        Ok(api::ContainerState::ContainerRunning) => ContainerState::Running,
        Ok(api::ContainerState::ContainerExited) => ContainerState::Exited,
        Ok(api::ContainerState::ContainerUnknown) | Err(_) => ContainerState::Unknown,
    }
}

/// Group the runtime's sandboxes and containers by pod UID (kubelet's GetPods). A container
/// without the UID label belongs to the pod of its sandbox; anything without a UID at all was
/// not made by a node agent and is ignored.
pub(crate) fn group_pods(sandboxes: &[api::PodSandbox], containers: &[api::Container]) -> PodRecords {
    let mut records = PodRecords::new();
    let mut sandbox_pod: BTreeMap<&str, &str> = BTreeMap::new();
    for s in sandboxes {
        let uid = s
            .labels
            .get(POD_UID_LABEL)
            .map(String::as_str)
            .or_else(|| s.metadata.as_ref().map(|m| m.uid.as_str()))
            .filter(|u| !u.is_empty());
        let Some(uid) = uid else { continue };
        sandbox_pod.insert(&s.id, uid);
        let ready = s.state == api::PodSandboxState::SandboxReady as i32;
        records.entry(uid.to_string()).or_default().sandboxes.insert(s.id.clone(), ready);
    }
    for c in containers {
        let uid = c
            .labels
            .get(POD_UID_LABEL)
            .map(String::as_str)
            .or_else(|| sandbox_pod.get(c.pod_sandbox_id.as_str()).copied())
            .filter(|u| !u.is_empty());
        let Some(uid) = uid else { continue };
        records.entry(uid.to_string()).or_default().containers.insert(c.id.clone(), container_state(c.state));
    }
    records
}

/// A container's state as PLEG compares it (plegContainerState): the runtime's "created" counts
/// as unknown, as in Kubernetes, since nothing waits for it; absent is a state of its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PlegState {
    Running,
    Exited,
    Unknown,
    NonExistent,
}

fn pleg_state(s: Option<&ContainerState>) -> PlegState {
    match s {
        None => PlegState::NonExistent,
        Some(ContainerState::Running) => PlegState::Running,
        Some(ContainerState::Exited) => PlegState::Exited,
        Some(ContainerState::Created | ContainerState::Unknown) => PlegState::Unknown,
    }
}

fn event(uid: &str, kind: PodLifecycleEventType, data: &str) -> PodLifecycleEvent {
    PodLifecycleEvent { id: uid.to_string(), kind, data: data.to_string() }
}

/// The events of one container between two relists (kubelet's generateEvents).
fn container_events(uid: &str, id: &str, old: PlegState, new: PlegState) -> Vec<PodLifecycleEvent> {
    use PodLifecycleEventType::*;
    if old == new {
        return Vec::new();
    }
    match new {
        PlegState::Running => vec![event(uid, ContainerStarted, id)],
        PlegState::Exited => vec![event(uid, ContainerDied, id)],
        PlegState::Unknown => vec![event(uid, ContainerChanged, id)],
        // Gone: if we never saw it exit, it died first.
        PlegState::NonExistent if old == PlegState::Exited => vec![event(uid, ContainerRemoved, id)],
        PlegState::NonExistent => vec![event(uid, ContainerDied, id), event(uid, ContainerRemoved, id)],
    }
}

/// What changed between two relists, pod by pod: for each sandbox created, changed readiness
/// or removed, a `PodSync`; for each container, the events of its state change. Pods and IDs in
/// sorted order; a pod's sandbox events first.
pub(crate) fn compute_events(old: &PodRecords, new: &PodRecords) -> Vec<PodLifecycleEvent> {
    let empty = PodRecord::default();
    let mut uids: Vec<&String> = old.keys().chain(new.keys()).collect();
    uids.sort();
    uids.dedup();
    let mut events = Vec::new();
    for uid in uids {
        let (o, n) = (old.get(uid).unwrap_or(&empty), new.get(uid).unwrap_or(&empty));
        let mut sandbox_ids: Vec<&String> = o.sandboxes.keys().chain(n.sandboxes.keys()).collect();
        sandbox_ids.sort();
        sandbox_ids.dedup();
        for id in sandbox_ids {
            if o.sandboxes.get(id) != n.sandboxes.get(id) {
                events.push(event(uid, PodLifecycleEventType::PodSync, id));
            }
        }
        let mut container_ids: Vec<&String> = o.containers.keys().chain(n.containers.keys()).collect();
        container_ids.sort();
        container_ids.dedup();
        for id in container_ids {
            events.extend(container_events(uid, id, pleg_state(o.containers.get(id)), pleg_state(n.containers.get(id))));
        }
    }
    events
}

/// Pods with a ready sandbox, and running containers (for kubelet_running_pods and
/// kubelet_running_containers).
fn running_counts(records: &PodRecords) -> (usize, usize) {
    let pods = records.values().filter(|p| p.sandboxes.values().any(|ready| *ready)).count();
    let containers = records.values().flat_map(|p| p.containers.values()).filter(|s| **s == ContainerState::Running).count();
    (pods, containers)
}

/// Send the events worth a sync; a full channel drops the event, as kubelet does, rather than
/// stall relisting (the periodic resync covers the pod). `Err` when the receiver is gone.
fn dispatch(events: Vec<PodLifecycleEvent>, tx: &mpsc::Sender<PodLifecycleEvent>) -> Result<usize, ()> {
    let mut sent = 0;
    for e in events {
        // ContainerChanged (created, or unknown) is not reliable enough to act on: kubelet
        // computes it and sends nothing.
        if e.kind == PodLifecycleEventType::ContainerChanged {
            continue;
        }
        tracing::debug!(target: TARGET, pod_uid = %e.id, event = ?e.kind, id = %e.data, "PLEG event");
        match tx.try_send(e) {
            Ok(()) => sent += 1,
            Err(TrySendError::Full(e)) => {
                metrics().pleg_discard_events.inc();
                tracing::error!(target: TARGET, pod_uid = %e.id, event = ?e.kind, "event channel is full, discarding this relist's event");
            }
            Err(TrySendError::Closed(_)) => return Err(()),
        }
    }
    Ok(sent)
}

/// The health verdict from the time of the last successful relist (kubelet's Healthy).
fn health(last_relist: Option<Instant>, now: Instant, threshold: Duration) -> Result<(), String> {
    let Some(last) = last_relist else {
        return Err("PLEG is not healthy: pleg has yet to be successful".into());
    };
    let elapsed = now.saturating_duration_since(last);
    if elapsed > threshold {
        return Err(format!(
            "PLEG is not healthy: pleg was last seen active {} ago; threshold is {}",
            crate::format::go_duration(elapsed),
            crate::format::go_duration(threshold)
        ));
    }
    Ok(())
}

/// The relisting PLEG. Cheap to clone: clones share the health clock, so the HTTP server and
/// the node status keep one while [`GenericPleg::run`] owns another.
#[derive(Clone)]
pub(crate) struct GenericPleg {
    runtime: RemoteRuntime,
    events: mpsc::Sender<PodLifecycleEvent>,
    options: Options,
    /// When the last successful relist started. A std Mutex: a single `Copy` value read by
    /// `healthy()` (synchronous, called from HTTP handlers) and written once a relist.
    last_relist: Arc<Mutex<Option<Instant>>>,
}

impl GenericPleg {
    /// A PLEG sending to `events` (create it with [`super::CHANNEL_CAPACITY`]).
    pub(crate) fn new(runtime: RemoteRuntime, events: mpsc::Sender<PodLifecycleEvent>, options: Options) -> GenericPleg {
        GenericPleg { runtime, events, options, last_relist: Arc::new(Mutex::new(None)) }
    }

    /// `Ok` while the last successful relist is recent enough; the error is the message the
    /// node's Ready condition and `/healthz` show.
    pub(crate) fn healthy(&self) -> Result<(), String> {
        let last = *self.last_relist.lock().unwrap_or_else(PoisonError::into_inner);
        health(last, Instant::now(), self.options.relist_threshold)
    }

    /// One relist (kubelet's Relist). `Err` only when the event receiver is gone.
    async fn relist(&self, records: &mut PodRecords) -> Result<(), ()> {
        let start = Instant::now();
        // Step 1: list everything.
        let listed = tokio::try_join!(self.runtime.list_pod_sandbox(None), self.runtime.list_containers(None));
        let (sandboxes, containers) = match listed {
            Ok(l) => l,
            Err(e) => {
                tracing::error!(target: TARGET, error = %e, "relist failed: unable to list pods from the runtime");
                metrics().pleg_relist_duration.observe(start.elapsed().as_secs_f64());
                return Ok(());
            }
        };
        *self.last_relist.lock().unwrap_or_else(PoisonError::into_inner) = Some(start);
        // Step 2: group by pod, count what runs.
        let current = group_pods(&sandboxes, &containers);
        let (pods, running) = running_counts(&current);
        metrics().running_pods.set(pods as i64);
        metrics().running_containers.set(running as i64);
        // Step 3 and 4: compare and send.
        let events = compute_events(records, &current);
        let result = dispatch(events, &self.events);
        // Step 5: remember.
        *records = current;
        metrics().pleg_relist_duration.observe(start.elapsed().as_secs_f64());
        result.map(drop)
    }

    /// Relist every period until `shutdown` completes or the event receiver is dropped.
    pub(crate) async fn run(self, shutdown: impl Future<Output = ()>) {
        tokio::pin!(shutdown);
        let mut records = PodRecords::new();
        let mut ticker = tokio::time::interval(self.options.relist_period);
        // A slow relist pushes the next one back rather than causing a burst (wait.Until).
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = &mut shutdown => return,
                _ = ticker.tick() => {}
            }
            let done = tokio::select! {
                () = &mut shutdown => return,
                r = self.relist(&mut records) => r,
            };
            if done.is_err() {
                tracing::info!(target: TARGET, "PLEG event receiver gone; stopping");
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    // Named, not only glob-imported: a glob would leave `api` ambiguous with the `api` crate.
    use super::api;
    use ContainerState::*;
    use PodLifecycleEventType::*;

    /// A pod as a table row: UID, its sandboxes (id, ready), its containers (id, state).
    type Pods<'a> = &'a [(&'a str, &'a [(&'a str, bool)], &'a [(&'a str, ContainerState)])];

    fn records(pods: Pods) -> PodRecords {
        pods.iter()
            .map(|(uid, sandboxes, containers)| {
                let rec = PodRecord {
                    sandboxes: sandboxes.iter().map(|(id, r)| (id.to_string(), *r)).collect(),
                    containers: containers.iter().map(|(id, s)| (id.to_string(), *s)).collect(),
                };
                (uid.to_string(), rec)
            })
            .collect()
    }

    fn ev(uid: &str, kind: PodLifecycleEventType, data: &str) -> PodLifecycleEvent {
        event(uid, kind, data)
    }

    #[test]
    fn compute_events_table() {
        // (name, old, new, events)
        let rows: Vec<(&str, Pods, Pods, Vec<PodLifecycleEvent>)> = vec![
            ("nothing changes", &[("p", &[("s", true)], &[("c", Running)])], &[("p", &[("s", true)], &[("c", Running)])], vec![]),
            ("sandbox created", &[], &[("p", &[("s", true)], &[])], vec![ev("p", PodSync, "s")]),
            ("sandbox not ready", &[("p", &[("s", true)], &[])], &[("p", &[("s", false)], &[])], vec![ev("p", PodSync, "s")]),
            ("sandbox removed", &[("p", &[("s", false)], &[])], &[], vec![ev("p", PodSync, "s")]),
            ("container created: changed (not sent)", &[("p", &[("s", true)], &[])], &[("p", &[("s", true)], &[("c", Created)])], vec![ev("p", ContainerChanged, "c")]),
            ("created → running", &[("p", &[], &[("c", Created)])], &[("p", &[], &[("c", Running)])], vec![ev("p", ContainerStarted, "c")]),
            ("new and running at once", &[("p", &[], &[])], &[("p", &[], &[("c", Running)])], vec![ev("p", ContainerStarted, "c")]),
            ("running → exited", &[("p", &[], &[("c", Running)])], &[("p", &[], &[("c", Exited)])], vec![ev("p", ContainerDied, "c")]),
            ("exited → removed", &[("p", &[], &[("c", Exited)])], &[("p", &[], &[])], vec![ev("p", ContainerRemoved, "c")]),
            (
                "running → removed: died, then removed",
                &[("p", &[], &[("c", Running)])],
                &[("p", &[], &[])],
                vec![ev("p", ContainerDied, "c"), ev("p", ContainerRemoved, "c")],
            ),
            ("created ↔ unknown: no change", &[("p", &[], &[("c", Created)])], &[("p", &[], &[("c", Unknown)])], vec![]),
            (
                "restart: old exited stays, new one runs",
                &[("p", &[("s", true)], &[("c1", Running)])],
                &[("p", &[("s", true)], &[("c1", Exited), ("c2", Running)])],
                vec![ev("p", ContainerDied, "c1"), ev("p", ContainerStarted, "c2")],
            ),
            (
                "whole pod gone: sandbox first, then containers",
                &[("p", &[("s", true)], &[("c", Running)])],
                &[],
                vec![ev("p", PodSync, "s"), ev("p", ContainerDied, "c"), ev("p", ContainerRemoved, "c")],
            ),
            (
                "two pods, sorted by UID",
                &[("b", &[], &[("c", Running)]), ("a", &[], &[])],
                &[("b", &[], &[("c", Exited)]), ("a", &[], &[("d", Running)])],
                vec![ev("a", ContainerStarted, "d"), ev("b", ContainerDied, "c")],
            ),
        ];
        for (name, old, new, want) in rows {
            assert_eq!(compute_events(&records(old), &records(new)), want, "{name}");
        }
    }

    fn sandbox(id: &str, uid: &str, ready: bool) -> api::PodSandbox {
        api::PodSandbox {
            id: id.into(),
            metadata: Some(api::PodSandboxMetadata { name: "p".into(), uid: uid.into(), namespace: "default".into(), attempt: 0 }),
            state: if ready { api::PodSandboxState::SandboxReady } else { api::PodSandboxState::SandboxNotready } as i32,
            labels: [(POD_UID_LABEL.to_string(), uid.to_string())].into(),
            ..Default::default()
        }
    }

    fn container(id: &str, sandbox: &str, uid: Option<&str>, state: api::ContainerState) -> api::Container {
        api::Container {
            id: id.into(),
            pod_sandbox_id: sandbox.into(),
            state: state as i32,
            labels: uid.map(|u| (POD_UID_LABEL.to_string(), u.to_string())).into_iter().collect(),
            ..Default::default()
        }
    }

    #[test]
    fn grouping_from_cri_objects() {
        use api::ContainerState as C;
        let sandboxes = vec![sandbox("s1", "u1", true), sandbox("s2", "u2", false), api::PodSandbox { id: "foreign".into(), ..Default::default() }];
        let containers = vec![
            container("c1", "s1", Some("u1"), C::ContainerRunning),
            container("c2", "s1", None, C::ContainerExited),
            container("c3", "s2", Some("u2"), C::ContainerCreated),
            container("c4", "nowhere", None, C::ContainerRunning),
        ];
        let got = group_pods(&sandboxes, &containers);
        let want = records(&[
            ("u1", &[("s1", true)], &[("c1", Running), ("c2", Exited)]),
            ("u2", &[("s2", false)], &[("c3", Created)]),
        ]);
        assert_eq!(got, want, "unlabelled c2 joins its sandbox's pod; c4 and the foreign sandbox are not ours");
        assert_eq!(running_counts(&got), (1, 1));
    }

    #[test]
    fn dispatch_filters_changed_and_drops_when_full() {
        let (tx, mut rx) = mpsc::channel(2);
        let events = vec![ev("p", ContainerChanged, "c0"), ev("p", ContainerStarted, "c1"), ev("p", ContainerStarted, "c2"), ev("p", ContainerStarted, "c3")];
        let before = metrics().pleg_discard_events.get();
        assert_eq!(dispatch(events, &tx), Ok(2));
        assert!(metrics().pleg_discard_events.get() > before, "the dropped event is counted");
        assert_eq!(rx.try_recv().ok(), Some(ev("p", ContainerStarted, "c1")));
        assert_eq!(rx.try_recv().ok(), Some(ev("p", ContainerStarted, "c2")));
        assert!(rx.try_recv().is_err());
        drop(rx);
        assert_eq!(dispatch(vec![ev("p", ContainerDied, "c1")], &tx), Err(()));
    }

    #[test]
    fn health_threshold() {
        let threshold = Duration::from_secs(180);
        let last = Instant::now();
        assert_eq!(health(None, last, threshold), Err("PLEG is not healthy: pleg has yet to be successful".into()));
        assert_eq!(health(Some(last), last + Duration::from_secs(179), threshold), Ok(()));
        assert_eq!(
            health(Some(last), last + Duration::from_millis(180_500), threshold),
            Err("PLEG is not healthy: pleg was last seen active 3m0.5s ago; threshold is 3m0s".into())
        );
    }
}
