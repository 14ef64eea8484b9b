//! Mirrors the container half of kubelet's status generation in kubelet_pods.go:
//! `convertToAPIContainerStatuses` and `convertContainerStatus` — what the runtime reports of a
//! pod's containers (their attempts) as the API's container statuses — with the probe results
//! the prober manager adds to them (`UpdatePodStatus`). Pure: [`super::generate`] calls it for
//! step 1 and step 3 of a pod's status, and its table tests cover it there.

use std::collections::HashMap;

use api::pod::restart_policy;
use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::{
    Container, ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStateWaiting, ContainerStatus, Pod,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use crate::container::{self as kc, ContainerState as RuntimeState};

/// The scheme of container IDs in the API (`containerd://<id>`): which runtime ran it.
pub(crate) const CONTAINER_ID_SCHEME: &str = "containerd";

// Waiting reasons the agent sets itself (kubelet's ContainerCreating, PodInitializing).
pub(crate) const CONTAINER_CREATING: &str = "ContainerCreating";
pub(crate) const POD_INITIALIZING: &str = "PodInitializing";
/// A container the runtime lost track of: reported as terminated with 137 (kubecontainer's
/// ContainerReasonStatusUnknown), so that a pod never looks successful by accident.
pub(crate) const CONTAINER_STATUS_UNKNOWN: &str = "ContainerStatusUnknown";

/// A time as the API holds it: whole seconds (the wire format has no fraction, and a status
/// compared before and after a round trip must be equal).
pub(crate) fn to_time(t: DateTime<Utc>) -> Time {
    Time(Timestamp::from_second(t.timestamp()).unwrap_or(Timestamp::UNIX_EPOCH))
}

/// `containerd://<id>`, the container ID as the API shows it.
pub(crate) fn container_id(id: &str) -> String {
    format!("{CONTAINER_ID_SCHEME}://{id}")
}

/// The CRI ID inside an API container ID (`containerd://abc` → `abc`).
pub(crate) fn parse_container_id(id: &str) -> &str {
    id.split_once("://").map_or(id, |(_, rest)| rest)
}

fn waiting(reason: Option<&str>, message: Option<&str>) -> ContainerState {
    ContainerState {
        waiting: Some(ContainerStateWaiting {
            reason: reason.filter(|r| !r.is_empty()).map(String::from),
            message: message.filter(|m| !m.is_empty()).map(String::from),
        }),
        ..Default::default()
    }
}

fn unknown_terminated(message: &str) -> ContainerState {
    ContainerState {
        terminated: Some(ContainerStateTerminated {
            exit_code: 137,
            reason: Some(CONTAINER_STATUS_UNKNOWN.into()),
            message: Some(message.into()),
            ..Default::default()
        }),
        ..Default::default()
    }
}

pub(super) fn state_of(s: &ContainerStatus) -> (bool, bool, bool) {
    let st = s.state.as_ref();
    (
        st.is_some_and(|s| s.waiting.is_some()),
        st.is_some_and(|s| s.running.is_some()),
        st.is_some_and(|s| s.terminated.is_some()),
    )
}

pub(super) fn last_terminated(s: &ContainerStatus) -> Option<&ContainerStateTerminated> {
    s.last_state.as_ref().and_then(|l| l.terminated.as_ref())
}

pub(super) fn terminated(s: &ContainerStatus) -> Option<&ContainerStateTerminated> {
    s.state.as_ref().and_then(|l| l.terminated.as_ref())
}

/// Whether the next sync will start this container (again) — kubecontainer's
/// ShouldContainerBeRestarted. The runtime manager's `compute_pod_actions` asks the same
/// question; it lives here because the status needs it too.
pub(crate) fn should_container_be_restarted(container: &Container, pod: &Pod, runtime: &kc::PodStatus) -> bool {
    // A pod being deleted is never restarted.
    if pod.metadata.deletion_timestamp.is_some() {
        return false;
    }
    let Some(status) = runtime.find_container(&container.name) else {
        // Never started (or every attempt was garbage-collected): start it.
        return true;
    };
    match status.state {
        RuntimeState::Running => false,
        RuntimeState::Unknown | RuntimeState::Created => true,
        RuntimeState::Exited => match restart_policy(pod) {
            "Never" => false,
            "OnFailure" => status.exit_code != 0,
            _ => true,
        },
    }
}

/// One runtime attempt as an API container status (kubelet's convertContainerStatus).
fn convert_container_status(cs: &kc::ContainerStatus, spec_image: &str, old: Option<&ContainerStatus>) -> ContainerStatus {
    let cid = container_id(&cs.id);
    let mut status = ContainerStatus {
        name: cs.name.clone(),
        restart_count: cs.restart_count,
        image: if cs.image.is_empty() { spec_image.to_string() } else { cs.image.clone() },
        image_id: cs.image_ref.clone(),
        container_id: Some(cid.clone()),
        last_state: Some(ContainerState::default()),
        ..Default::default()
    };
    let state = match cs.state {
        RuntimeState::Running => ContainerState {
            running: Some(ContainerStateRunning { started_at: cs.started_at.map(to_time) }),
            ..Default::default()
        },
        // Created but not started: waiting to run, no reason of its own.
        RuntimeState::Created => waiting(None, None),
        RuntimeState::Exited => ContainerState {
            terminated: Some(ContainerStateTerminated {
                exit_code: cs.exit_code,
                reason: Some(cs.reason.clone()).filter(|r| !r.is_empty()),
                message: Some(cs.message.clone()).filter(|m| !m.is_empty()),
                started_at: cs.started_at.map(to_time),
                finished_at: cs.finished_at.map(to_time),
                container_id: Some(cid),
                signal: None,
            }),
            ..Default::default()
        },
        // It ran before and the runtime no longer knows its state: it stopped, we do not know
        // how. "Container ran and failed" differs from "never ran" (a run-once pod must not run
        // twice), so this is terminated rather than waiting.
        RuntimeState::Unknown if old.is_some_and(|o| state_of(o).1) => {
            status.restart_count = old.map_or(0, |o| o.restart_count) + 1;
            unknown_terminated("The container could not be located when the pod was terminated")
        }
        RuntimeState::Unknown => waiting(None, None),
    };
    status.state = Some(state);
    status
}

/// The API statuses of one list of containers (init or app), kubelet's
/// convertToAPIContainerStatuses. Init containers come back in spec order, app containers
/// sorted by name (as Kubernetes: clients expect a deterministic order).
pub(super) fn convert_to_api_container_statuses(
    pod: &Pod,
    runtime: &kc::PodStatus,
    waiting_reasons: &HashMap<String, (String, String)>,
    previous: &[ContainerStatus],
    containers: &[Container],
    has_init_containers: bool,
    is_init: bool,
) -> Vec<ContainerStatus> {
    let old: HashMap<&str, &ContainerStatus> = previous.iter().map(|s| (s.name.as_str(), s)).collect();
    let default_reason = if has_init_containers { POD_INITIALIZING } else { CONTAINER_CREATING };

    // Step 1: every container starts waiting; a terminated old status is kept whole, otherwise
    // the old restart count and last state are the defaults.
    let mut statuses: HashMap<&str, ContainerStatus> = HashMap::new();
    for c in containers {
        let mut s = ContainerStatus {
            name: c.name.clone(),
            image: c.image.clone().unwrap_or_default(),
            state: Some(waiting(Some(default_reason), None)),
            last_state: Some(ContainerState::default()),
            ..Default::default()
        };
        if let Some(o) = old.get(c.name.as_str()) {
            if state_of(o).2 {
                s = (*o).clone();
            } else {
                s.restart_count = o.restart_count;
                s.last_state = o.last_state.clone();
            }
        }
        statuses.insert(c.name.as_str(), s);
    }

    // Step 2: a container that was running and that the runtime no longer reports at all
    // (removed behind our back) shows a last termination, not a plain wait: a default wait
    // would push the pod back to Pending.
    for c in containers {
        if runtime.find_container(&c.name).is_some() {
            continue;
        }
        let Some(o) = old.get(c.name.as_str()) else { continue };
        let (_, was_running, was_terminated) = state_of(o);
        if was_terminated || !was_running {
            continue;
        }
        let Some(s) = statuses.get_mut(c.name.as_str()) else { continue };
        let is_default_wait = s.state.as_ref().and_then(|st| st.waiting.as_ref()).is_some_and(|w| w.reason.as_deref() == Some(default_reason));
        if !is_default_wait || last_terminated(s).is_some() {
            continue;
        }
        s.last_state = Some(unknown_terminated("The container could not be located when the pod was deleted.  The container used to be Running"));
        if pod.metadata.deletion_timestamp.is_none() {
            s.restart_count += 1;
        }
    }

    // Step 3: the newest attempt is the state, the one before it the last state.
    for c in containers {
        let mut attempts = runtime.containers_named(&c.name);
        let Some(newest) = attempts.next() else { continue };
        let o = old.get(c.name.as_str()).copied();
        let mut s = convert_container_status(newest, c.image.as_deref().unwrap_or(""), o);
        if let Some(previous) = attempts.next() {
            s.last_state = convert_container_status(previous, "", o).state;
        } else if let Some(o) = o {
            // The previous attempt is gone from the runtime (garbage-collected): carry what the
            // last status knew. Same attempt → its last state; a newer attempt → the old
            // status's terminated state is the previous attempt's end.
            if o.container_id == s.container_id {
                s.last_state = o.last_state.clone();
            } else if state_of(o).2 && s.restart_count > o.restart_count {
                s.last_state = o.state.clone();
            }
        }
        statuses.insert(c.name.as_str(), s);
    }

    // Step 4: a container the next sync will (re)start is waiting, with the reason its last
    // start failed; its terminated state moves to lastState.
    for c in containers {
        if is_init
            && let Some(s) = runtime.find_container(&c.name)
            && s.state == RuntimeState::Exited
            && s.exit_code == 0
        {
            // A succeeded init container is never run again.
            continue;
        }
        if !should_container_be_restarted(c, pod, runtime) {
            continue;
        }
        let Some((reason, message)) = waiting_reasons.get(&c.name) else { continue };
        let Some(s) = statuses.get_mut(c.name.as_str()) else { continue };
        if state_of(s).2 {
            s.last_state = s.state.clone();
        }
        s.state = Some(waiting(Some(reason), Some(message)));
    }

    let mut out: Vec<ContainerStatus> = containers.iter().filter_map(|c| statuses.remove(c.name.as_str())).collect();
    if !is_init {
        out.sort_by(|a, b| a.name.cmp(&b.name));
    }
    out
}

/// The prober's part (prober_manager.go UpdatePodStatus): `started` from the startup probe,
/// `ready` from the readiness probe; an init container is ready once it exited 0.
pub(super) fn apply_probe_results(
    statuses: &mut [ContainerStatus],
    readiness: &HashMap<String, bool>,
    startup: &HashMap<String, bool>,
    is_init: bool,
) {
    for s in statuses {
        let running = state_of(s).1;
        let id = s.container_id.as_deref().map(parse_container_id);
        let lookup = |m: &HashMap<String, bool>| id.and_then(|id| m.get(id)).copied().unwrap_or(true);
        let started = running && lookup(startup);
        s.started = Some(started);
        s.ready = if is_init { terminated(s).is_some_and(|t| t.exit_code == 0) } else { started && lookup(readiness) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn container_ids() {
        assert_eq!(container_id("abc"), "containerd://abc");
        assert_eq!(parse_container_id("containerd://abc"), "abc");
        assert_eq!(parse_container_id("abc"), "abc");
    }
}
