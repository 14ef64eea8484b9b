//! Mirrors kubelet's kubelet_pods.go (`generateAPIPodStatus`, `getPhase`) and
//! pkg/kubelet/status/generate.go (the pod conditions the node agent owns); the container
//! statuses it starts from are [`super::container_statuses`].
//!
//! One pure function, [`generate_api_pod_status`], turns what the runtime reports about a pod
//! ([`crate::container::PodStatus`]: sandboxes and container attempts) into the API's
//! `PodStatus`. It is pure so that every rule below has a table test; the status manager stores
//! and writes what it returns. The steps, in Kubernetes' order:
//!
//! 1. Container statuses ([`super::container_statuses`]), init containers and app containers
//!    apart: a default waiting state, the newest runtime attempt as `state`, the one before it as
//!    `lastState`, and the last sync's failure reason (ErrImagePull, CrashLoopBackOff, …) for a
//!    container that will be started again.
//! 2. The phase ([`get_phase`]), which never leaves Succeeded or Failed once reached.
//! 3. Probe results: `started` and `ready`.
//! 4. Conditions: those the agent does not own are kept; PodReadyToStartContainers,
//!    Initialized, Ready, ContainersReady and PodScheduled are generated, each keeping its
//!    `lastTransitionTime` while its status does not change.
//! 5. IPs, QoS class and start time.

use std::collections::HashMap;

use api::pod::{app_containers, init_containers, is_pod_phase_terminal, is_static_pod, restart_policy};
use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::{ContainerStatus, HostIP, Pod, PodCondition, PodIP, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::container_statuses::{
    apply_probe_results, convert_to_api_container_statuses, last_terminated, state_of, terminated, to_time,
};
use crate::container as kc;

// Pod phases (v1.PodPhase).
pub(crate) const PHASE_PENDING: &str = "Pending";
pub(crate) const PHASE_RUNNING: &str = "Running";
pub(crate) const PHASE_SUCCEEDED: &str = "Succeeded";
pub(crate) const PHASE_FAILED: &str = "Failed";

// Pod condition types the node agent owns (kubetypes.PodConditionsByKubelet).
pub(crate) const POD_SCHEDULED: &str = "PodScheduled";
pub(crate) const POD_READY_TO_START_CONTAINERS: &str = "PodReadyToStartContainers";
pub(crate) const POD_INITIALIZED: &str = "Initialized";
pub(crate) const POD_READY: &str = "Ready";
pub(crate) const CONTAINERS_READY: &str = "ContainersReady";

// Condition reasons (status/generate.go).
pub(crate) const POD_COMPLETED: &str = "PodCompleted";
pub(crate) const POD_FAILED: &str = "PodFailed";
pub(crate) const CONTAINERS_NOT_READY: &str = "ContainersNotReady";
pub(crate) const CONTAINERS_NOT_INITIALIZED: &str = "ContainersNotInitialized";
pub(crate) const READINESS_GATES_NOT_READY: &str = "ReadinessGatesNotReady";

/// Everything the status of one pod is computed from. The caller gathers it; the function
/// reads nothing else, so a test states every input.
pub(crate) struct StatusInputs<'a> {
    /// The pod as the agent has it (defaulted spec; `status` is the API server's last copy,
    /// which holds the conditions other components own and a terminal phase already reported).
    pub(crate) pod: &'a Pod,
    /// What the runtime reports about the pod's sandboxes and containers.
    pub(crate) runtime: &'a kc::PodStatus,
    /// The last status the agent set (the status manager's copy); `None` falls back to
    /// `pod.status`. It keeps startTime, transition times, restart counts and last states.
    pub(crate) old: Option<&'a PodStatus>,
    /// Container name → (reason, message) of the last sync's failure to start it: ErrImagePull,
    /// ImagePullBackOff, CrashLoopBackOff, CreateContainerConfigError, … (kubelet's reasonCache).
    pub(crate) waiting_reasons: &'a HashMap<String, (String, String)>,
    /// CRI container ID (no scheme) → readiness probe result. Absent means no result, taken as
    /// ready once the container runs (as with no readiness probe). When probes land the prober
    /// must report `false` for a probed container until its first success.
    pub(crate) readiness: &'a HashMap<String, bool>,
    /// CRI container ID → startup probe result; absent means started once running.
    pub(crate) startup: &'a HashMap<String, bool>,
    /// The node's addresses, first the primary (hostIP); empty when unknown.
    pub(crate) host_ips: &'a [String],
    /// The pod's QoS class ("Guaranteed", "Burstable", "BestEffort"), computed by the caller.
    pub(crate) qos_class: &'a str,
    /// The pod is being terminated, or has been: its containers will not be restarted, so all
    /// of them exited decides Succeeded/Failed whatever the restart policy.
    pub(crate) pod_is_terminal: bool,
    /// The clock, for startTime and transition times.
    pub(crate) now: DateTime<Utc>,
}

/// The conditions this agent writes; every other condition belongs to someone else and is kept.
pub(crate) fn condition_owned_by_kubelet(type_: &str) -> bool {
    matches!(type_, POD_SCHEDULED | POD_READY_TO_START_CONTAINERS | POD_INITIALIZED | POD_READY | CONTAINERS_READY)
}

/// The pod's phase from its container statuses (kubelet's getPhase).
///
/// - Pending: an init container has not succeeded yet, or an app container has not started.
/// - Running: every app container started and one runs (or, with Always/OnFailure, they are
///   all about to be restarted).
/// - Succeeded / Failed: every app container exited and none will be restarted: Never, or
///   OnFailure with all 0 (Succeeded), or the pod is terminal. A failed init container fails
///   the pod at once with Never.
pub(crate) fn get_phase(pod: &Pod, init_statuses: &[ContainerStatus], app_statuses: &[ContainerStatus], pod_is_terminal: bool) -> &'static str {
    let find = |list: &[ContainerStatus], name: &str| list.iter().find(|s| s.name == name).cloned();
    let mut pending_initialization = 0;
    let mut failed_initialization = 0;
    for c in init_containers(pod) {
        let Some(s) = find(init_statuses, &c.name) else {
            pending_initialization += 1;
            continue;
        };
        let (is_waiting, is_running, _) = state_of(&s);
        if is_running {
            pending_initialization += 1;
        } else if let Some(t) = terminated(&s) {
            if t.exit_code != 0 {
                failed_initialization += 1;
            }
        } else if is_waiting {
            match last_terminated(&s) {
                Some(t) if t.exit_code != 0 => failed_initialization += 1,
                Some(_) => {}
                None => pending_initialization += 1,
            }
        } else {
            pending_initialization += 1;
        }
    }

    let (mut unknown, mut running, mut waiting_count, mut stopped, mut succeeded) = (0, 0, 0, 0, 0);
    for c in app_containers(pod) {
        let Some(s) = find(app_statuses, &c.name) else {
            unknown += 1;
            continue;
        };
        let (is_waiting, is_running, _) = state_of(&s);
        if is_running {
            running += 1;
        } else if let Some(t) = terminated(&s) {
            stopped += 1;
            if t.exit_code == 0 {
                succeeded += 1;
            }
        } else if is_waiting {
            if last_terminated(&s).is_some() {
                stopped += 1;
            } else {
                waiting_count += 1;
            }
        } else {
            unknown += 1;
        }
    }

    let policy = restart_policy(pod);
    if failed_initialization > 0 && policy == "Never" {
        return PHASE_FAILED;
    }
    if pending_initialization > 0 || waiting_count > 0 {
        return PHASE_PENDING;
    }
    if running > 0 && unknown == 0 {
        return PHASE_RUNNING;
    }
    if running == 0 && stopped > 0 && unknown == 0 {
        // A terminal pod restarts nothing, whatever its policy (static pods excepted, as in
        // Kubernetes: their phase is left to the policy).
        if pod_is_terminal && !is_static_pod(pod) {
            return if stopped == succeeded { PHASE_SUCCEEDED } else { PHASE_FAILED };
        }
        if policy == "Always" {
            return PHASE_RUNNING;
        }
        if stopped == succeeded {
            return PHASE_SUCCEEDED;
        }
        if policy == "Never" {
            return PHASE_FAILED;
        }
        // OnFailure with a failure: being restarted.
        return PHASE_RUNNING;
    }
    PHASE_PENDING
}

fn condition(type_: &str, status: bool, reason: Option<&str>, message: Option<String>) -> PodCondition {
    PodCondition {
        type_: type_.into(),
        status: if status { "True" } else { "False" }.into(),
        reason: reason.map(String::from),
        message,
        ..Default::default()
    }
}

/// Go prints a list of names as `[a b]`; the messages keep that shape because users grep for it.
fn go_list(names: &[&str]) -> String {
    format!("[{}]", names.join(" "))
}

/// PodReadyToStartContainers: True once a ready sandbox with its network exists (the runtime
/// manager would not need to create a new one).
pub(crate) fn pod_ready_to_start_containers_condition(runtime: &kc::PodStatus) -> PodCondition {
    let ready = runtime
        .sandboxes
        .iter()
        .max_by_key(|s| (s.created_at, s.attempt))
        .is_some_and(|s| s.ready && (s.host_network || !s.ips.is_empty() || !runtime.ips.is_empty()));
    condition(POD_READY_TO_START_CONTAINERS, ready, None, None)
}

/// Initialized: every init container exited 0 (or an app container has already started).
pub(crate) fn pod_initialized_condition(pod: &Pod, init_statuses: &[ContainerStatus], app_statuses: &[ContainerStatus], phase: &str) -> PodCondition {
    let mut unknown = Vec::new();
    let mut incomplete = Vec::new();
    for c in init_containers(pod) {
        match init_statuses.iter().find(|s| s.name == c.name) {
            None => unknown.push(c.name.as_str()),
            Some(s) if terminated(s).is_none_or(|t| t.exit_code != 0) => incomplete.push(c.name.as_str()),
            Some(_) => {}
        }
    }
    if phase == PHASE_SUCCEEDED && unknown.is_empty() {
        return condition(POD_INITIALIZED, true, Some(POD_COMPLETED), None);
    }
    // An app container that has left its first wait means the pod initialized before.
    let any_app_started = app_statuses.iter().any(|s| !state_of(s).0 || last_terminated(s).is_some());
    if any_app_started {
        return condition(POD_INITIALIZED, true, None, None);
    }
    let mut messages = Vec::new();
    if !unknown.is_empty() {
        messages.push(format!("containers with unknown status: {}", go_list(&unknown)));
    }
    if !incomplete.is_empty() {
        messages.push(format!("containers with incomplete status: {}", go_list(&incomplete)));
    }
    if messages.is_empty() {
        condition(POD_INITIALIZED, true, None, None)
    } else {
        condition(POD_INITIALIZED, false, Some(CONTAINERS_NOT_INITIALIZED), Some(messages.join(", ")))
    }
}

/// ContainersReady in a terminal phase: False, PodCompleted or PodFailed.
pub(crate) fn containers_ready_condition_for_terminal_phase(type_: &str, phase: &str) -> PodCondition {
    let reason = if phase == PHASE_FAILED { POD_FAILED } else { POD_COMPLETED };
    condition(type_, false, Some(reason), None)
}

/// ContainersReady: every app container is ready.
pub(crate) fn containers_ready_condition(pod: &Pod, app_statuses: &[ContainerStatus], phase: &str) -> PodCondition {
    let mut unknown = Vec::new();
    let mut unready = Vec::new();
    for c in app_containers(pod) {
        match app_statuses.iter().find(|s| s.name == c.name) {
            None => unknown.push(c.name.as_str()),
            Some(s) if !s.ready => unready.push(c.name.as_str()),
            Some(_) => {}
        }
    }
    if (phase == PHASE_SUCCEEDED && unknown.is_empty()) || phase == PHASE_FAILED {
        return containers_ready_condition_for_terminal_phase(CONTAINERS_READY, phase);
    }
    let mut messages = Vec::new();
    if !unknown.is_empty() {
        messages.push(format!("containers with unknown status: {}", go_list(&unknown)));
    }
    if !unready.is_empty() {
        messages.push(format!("containers with unready status: {}", go_list(&unready)));
    }
    if messages.is_empty() {
        condition(CONTAINERS_READY, true, None, None)
    } else {
        condition(CONTAINERS_READY, false, Some(CONTAINERS_NOT_READY), Some(messages.join(", ")))
    }
}

/// Ready: ContainersReady, and every readiness gate's condition True.
pub(crate) fn pod_ready_condition(pod: &Pod, conditions: &[PodCondition], app_statuses: &[ContainerStatus], phase: &str) -> PodCondition {
    let containers_ready = containers_ready_condition(pod, app_statuses, phase);
    if containers_ready.status != "True" {
        return PodCondition { type_: POD_READY.into(), ..containers_ready };
    }
    let gates = pod.spec.as_ref().and_then(|s| s.readiness_gates.as_deref()).unwrap_or(&[]);
    let mut messages = Vec::new();
    for g in gates {
        match conditions.iter().find(|c| c.type_ == g.condition_type) {
            None => messages.push(format!("corresponding condition of pod readiness gate {:?} does not exist.", g.condition_type)),
            Some(c) if c.status != "True" => {
                messages.push(format!("the status of pod readiness gate {:?} is not \"True\", but {}", g.condition_type, c.status))
            }
            Some(_) => {}
        }
    }
    if messages.is_empty() {
        condition(POD_READY, true, None, None)
    } else {
        condition(POD_READY, false, Some(READINESS_GATES_NOT_READY), Some(messages.join(", ")))
    }
}

/// Give each agent-owned condition its `lastTransitionTime`: the old one while the status is
/// unchanged, `now` when it flips (the status manager's updateLastTransitionTime).
pub(crate) fn update_last_transition_times(status: &mut PodStatus, old: Option<&PodStatus>, now: &Time) {
    let old_conditions = old.and_then(|o| o.conditions.as_deref()).unwrap_or(&[]);
    for c in status.conditions.iter_mut().flatten() {
        if !condition_owned_by_kubelet(&c.type_) {
            continue;
        }
        c.last_transition_time = match old_conditions.iter().find(|o| o.type_ == c.type_) {
            Some(o) if o.status == c.status && o.last_transition_time.is_some() => o.last_transition_time.clone(),
            _ => Some(now.clone()),
        };
    }
}

/// The API status of a pod (kubelet's generateAPIPodStatus). See the module docs for the steps.
pub(crate) fn generate_api_pod_status(i: &StatusInputs) -> PodStatus {
    let pod = i.pod;
    let api_status = pod.status.as_ref();
    let old = i.old.or(api_status);
    let now = to_time(i.now);
    let has_init = !init_containers(pod).is_empty();
    let mut s = PodStatus::default();

    // Step 1: container statuses.
    let old_app = old.and_then(|o| o.container_statuses.as_deref()).unwrap_or(&[]);
    let old_init = old.and_then(|o| o.init_container_statuses.as_deref()).unwrap_or(&[]);
    let mut app = convert_to_api_container_statuses(pod, i.runtime, i.waiting_reasons, old_app, app_containers(pod), has_init, false);
    let mut init = convert_to_api_container_statuses(pod, i.runtime, i.waiting_reasons, old_init, init_containers(pod), has_init, true);

    // Step 2: the phase. Once terminal (in our last status or on the API server) it stays.
    let mut phase = get_phase(pod, &init, &app, i.pod_is_terminal);
    let old_phase = old.and_then(|o| o.phase.as_deref());
    let api_phase = api_status.and_then(|o| o.phase.as_deref());
    if !is_pod_phase_terminal(Some(phase)) {
        if is_pod_phase_terminal(old_phase) {
            phase = if old_phase == Some(PHASE_SUCCEEDED) { PHASE_SUCCEEDED } else { PHASE_FAILED };
        } else if is_pod_phase_terminal(api_phase) {
            phase = if api_phase == Some(PHASE_SUCCEEDED) { PHASE_SUCCEEDED } else { PHASE_FAILED };
        }
    }
    if is_pod_phase_terminal(api_phase) && api_phase != Some(phase) {
        tracing::error!(target: "kubelet::status", pod_uid = %i.runtime.uid, from = ?api_phase, to = phase, "pod attempted illegal phase transition");
        phase = if api_phase == Some(PHASE_SUCCEEDED) { PHASE_SUCCEEDED } else { PHASE_FAILED };
    }
    s.phase = Some(phase.to_string());
    // The reason and message belong to the phase (Evicted, …): kept while it holds.
    if old_phase == Some(phase) {
        s.reason = old.and_then(|o| o.reason.clone()).or_else(|| api_status.and_then(|o| o.reason.clone()));
        s.message = old.and_then(|o| o.message.clone()).or_else(|| api_status.and_then(|o| o.message.clone()));
    }

    // Step 3: probe results.
    apply_probe_results(&mut app, i.readiness, i.startup, false);
    apply_probe_results(&mut init, i.readiness, i.startup, true);

    // Step 4: conditions — others' first, then ours in Kubernetes' order.
    let mut conditions: Vec<PodCondition> = api_status
        .and_then(|o| o.conditions.as_deref())
        .unwrap_or(&[])
        .iter()
        .filter(|c| !condition_owned_by_kubelet(&c.type_))
        .cloned()
        .collect();
    conditions.push(pod_ready_to_start_containers_condition(i.runtime));
    conditions.push(pod_initialized_condition(pod, &init, &app, phase));
    let ready = pod_ready_condition(pod, &conditions, &app, phase);
    conditions.push(ready);
    conditions.push(containers_ready_condition(pod, &app, phase));
    conditions.push(condition(POD_SCHEDULED, true, None, None));
    s.conditions = Some(conditions);
    // PodScheduled was set by the scheduler: its time is on the API server's copy.
    let mut times_from = old.cloned().unwrap_or_default();
    if let Some(sched) = api_status.and_then(|a| a.conditions.as_ref()).and_then(|c| c.iter().find(|c| c.type_ == POD_SCHEDULED))
        && !times_from.conditions.iter().flatten().any(|c| c.type_ == POD_SCHEDULED)
    {
        times_from.conditions.get_or_insert_with(Vec::new).push(sched.clone());
    }
    update_last_transition_times(&mut s, Some(&times_from), &now);

    s.container_statuses = Some(app);
    s.init_container_statuses = if init.is_empty() { None } else { Some(init) };

    // Step 5: addresses, QoS, start time.
    let host_network = pod.spec.as_ref().and_then(|s| s.host_network).unwrap_or(false);
    let mut pod_ips: Vec<String> = i.runtime.ips.clone();
    if pod_ips.is_empty() && host_network {
        pod_ips = i.host_ips.iter().take(1).cloned().collect();
    }
    if pod_ips.is_empty() {
        // The sandbox is gone (the pod finished): the pod keeps the addresses it had.
        pod_ips = old.and_then(|o| o.pod_ips.as_ref()).into_iter().flatten().map(|p| p.ip.clone()).collect();
    }
    if !pod_ips.is_empty() {
        s.pod_ip = pod_ips.first().cloned();
        s.pod_ips = Some(pod_ips.into_iter().map(|ip| PodIP { ip }).collect());
    }
    if let Some(first) = i.host_ips.first() {
        s.host_ip = Some(first.clone());
        s.host_ips = Some(i.host_ips.iter().map(|ip| HostIP { ip: ip.clone() }).collect());
    }
    if !i.qos_class.is_empty() {
        s.qos_class = Some(i.qos_class.to_string());
    }
    s.start_time = old.and_then(|o| o.start_time.clone()).or(Some(now));
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::container::ContainerState as RuntimeState;
    use crate::status::container_statuses::should_container_be_restarted;
    use chrono::TimeZone;
    use k8s_openapi::api::core::v1::ContainerState;
    use kc::{ContainerStatus as RtContainer, SandboxStatus};
    use serde_json::json;

    fn at(secs: i64) -> DateTime<Utc> {
        Utc.timestamp_opt(1_700_000_000 + secs, 0).single().unwrap_or_default()
    }

    fn pod(policy: &str, init: &[&str], app: &[&str]) -> Pod {
        let c = |n: &&str| json!({"name": n, "image": format!("docker.io/library/{n}:1")});
        let mut spec = json!({"restartPolicy": policy, "containers": app.iter().map(c).collect::<Vec<_>>()});
        if !init.is_empty() {
            spec["initContainers"] = json!(init.iter().map(c).collect::<Vec<_>>());
        }
        serde_json::from_value(json!({"metadata": {"name": "p", "namespace": "default", "uid": "u1"}, "spec": spec}))
            .expect("pod")
    }

    fn ctr(name: &str, attempt: i32, state: RuntimeState, exit_code: i32) -> RtContainer {
        RtContainer {
            id: format!("{name}-{attempt}"),
            name: name.into(),
            state,
            created_at: Some(at(10 * attempt as i64)),
            started_at: (state != RuntimeState::Created).then(|| at(10 * attempt as i64 + 1)),
            finished_at: (state == RuntimeState::Exited).then(|| at(10 * attempt as i64 + 5)),
            exit_code,
            image: format!("docker.io/library/{name}:1"),
            image_ref: "sha256:abc".into(),
            restart_count: attempt,
            reason: if state == RuntimeState::Exited { if exit_code == 0 { "Completed" } else { "Error" } } else { "" }.into(),
            message: String::new(),
            hash: 1,
        }
    }

    fn sandbox(ready: bool) -> SandboxStatus {
        SandboxStatus { id: "sb".into(), ready, created_at: Some(at(0)), attempt: 0, ips: vec!["10.244.0.5".into()], host_network: false }
    }

    fn runtime(sandboxes: Vec<SandboxStatus>, containers: Vec<RtContainer>) -> kc::PodStatus {
        let ips = if sandboxes.iter().any(|s| s.ready) { vec!["10.244.0.5".to_string()] } else { vec![] };
        kc::PodStatus { uid: "u1".into(), name: "p".into(), namespace: "default".into(), ips, sandboxes, containers }
    }

    struct Case<'a> {
        pod: Pod,
        rt: kc::PodStatus,
        old: Option<PodStatus>,
        reasons: Vec<(&'a str, &'a str)>,
        readiness: Vec<(&'a str, bool)>,
        terminal: bool,
    }

    impl Case<'_> {
        fn new(pod: Pod, rt: kc::PodStatus) -> Self {
            Case { pod, rt, old: None, reasons: vec![], readiness: vec![], terminal: false }
        }
        fn run(&self) -> PodStatus {
            let reasons = self.reasons.iter().map(|(c, r)| (c.to_string(), (r.to_string(), format!("{r} message")))).collect();
            let readiness = self.readiness.iter().map(|(c, r)| (c.to_string(), *r)).collect();
            let startup = HashMap::new();
            let host_ips = vec!["192.168.1.10".to_string()];
            generate_api_pod_status(&StatusInputs {
                pod: &self.pod,
                runtime: &self.rt,
                old: self.old.as_ref(),
                waiting_reasons: &reasons,
                readiness: &readiness,
                startup: &startup,
                host_ips: &host_ips,
                qos_class: "BestEffort",
                pod_is_terminal: self.terminal,
                now: at(100),
            })
        }
    }

    /// One line per container: `name state(reason/exit) last=... restarts ready`.
    fn summary(list: Option<&Vec<ContainerStatus>>) -> Vec<String> {
        let st = |s: &Option<ContainerState>| match s {
            Some(ContainerState { running: Some(_), .. }) => "running".to_string(),
            Some(ContainerState { terminated: Some(t), .. }) => format!("terminated({})", t.exit_code),
            Some(ContainerState { waiting: Some(w), .. }) => format!("waiting({})", w.reason.clone().unwrap_or_default()),
            _ => "-".into(),
        };
        list.into_iter()
            .flatten()
            .map(|c| format!("{} {} last={} restarts={} ready={}", c.name, st(&c.state), st(&c.last_state), c.restart_count, c.ready))
            .collect()
    }

    fn cond(s: &PodStatus, t: &str) -> (String, String, String) {
        let c = s.conditions.iter().flatten().find(|c| c.type_ == t).cloned().unwrap_or_default();
        (c.status, c.reason.unwrap_or_default(), c.message.unwrap_or_default())
    }

    #[test]
    fn container_statuses_table() {
        use RuntimeState::*;
        struct Row {
            name: &'static str,
            init: &'static [&'static str],
            containers: Vec<RtContainer>,
            reasons: Vec<(&'static str, &'static str)>,
            policy: &'static str,
            want_phase: &'static str,
            want_init: Vec<&'static str>,
            want_app: Vec<&'static str>,
        }
        let rows = vec![
            Row {
                name: "nothing created yet: ContainerCreating",
                init: &[],
                containers: vec![],
                reasons: vec![],
                policy: "Always",
                want_phase: PHASE_PENDING,
                want_init: vec![],
                want_app: vec!["app waiting(ContainerCreating) last=- restarts=0 ready=false"],
            },
            Row {
                name: "image pull failing: the sync's reason",
                init: &[],
                containers: vec![],
                reasons: vec![("app", "ImagePullBackOff")],
                policy: "Always",
                want_phase: PHASE_PENDING,
                want_init: vec![],
                want_app: vec!["app waiting(ImagePullBackOff) last=- restarts=0 ready=false"],
            },
            Row {
                name: "running",
                init: &[],
                containers: vec![ctr("app", 0, Running, 0)],
                reasons: vec![],
                policy: "Always",
                want_phase: PHASE_RUNNING,
                want_init: vec![],
                want_app: vec!["app running last=- restarts=0 ready=true"],
            },
            Row {
                name: "created, not started: waiting without reason",
                init: &[],
                containers: vec![ctr("app", 0, Created, 0)],
                reasons: vec![],
                policy: "Always",
                want_phase: PHASE_PENDING,
                want_init: vec![],
                want_app: vec!["app waiting() last=- restarts=0 ready=false"],
            },
            Row {
                name: "crash loop: waiting, last state the crash",
                init: &[],
                containers: vec![ctr("app", 0, Exited, 1), ctr("app", 1, Exited, 1)],
                reasons: vec![("app", "CrashLoopBackOff")],
                policy: "Always",
                want_phase: PHASE_RUNNING,
                want_init: vec![],
                want_app: vec!["app waiting(CrashLoopBackOff) last=terminated(1) restarts=1 ready=false"],
            },
            Row {
                name: "restarted: running, last state the previous attempt",
                init: &[],
                containers: vec![ctr("app", 0, Exited, 2), ctr("app", 1, Running, 0)],
                reasons: vec![],
                policy: "Always",
                want_phase: PHASE_RUNNING,
                want_init: vec![],
                want_app: vec!["app running last=terminated(2) restarts=1 ready=true"],
            },
            Row {
                name: "init running: app containers PodInitializing",
                init: &["init1", "init2"],
                containers: vec![ctr("init1", 0, Running, 0)],
                reasons: vec![],
                policy: "Always",
                want_phase: PHASE_PENDING,
                want_init: vec![
                    "init1 running last=- restarts=0 ready=false",
                    "init2 waiting(PodInitializing) last=- restarts=0 ready=false",
                ],
                want_app: vec!["app waiting(PodInitializing) last=- restarts=0 ready=false"],
            },
            Row {
                name: "inits done, app running",
                init: &["init1"],
                containers: vec![ctr("init1", 0, Exited, 0), ctr("app", 0, Running, 0)],
                reasons: vec![],
                policy: "Always",
                want_phase: PHASE_RUNNING,
                want_init: vec!["init1 terminated(0) last=- restarts=0 ready=true"],
                want_app: vec!["app running last=- restarts=0 ready=true"],
            },
            Row {
                name: "init failed, Never: pod failed",
                init: &["init1"],
                containers: vec![ctr("init1", 0, Exited, 1)],
                reasons: vec![],
                policy: "Never",
                want_phase: PHASE_FAILED,
                want_init: vec!["init1 terminated(1) last=- restarts=0 ready=false"],
                want_app: vec!["app waiting(PodInitializing) last=- restarts=0 ready=false"],
            },
            Row {
                name: "init crash-looping, Always: pending",
                init: &["init1"],
                containers: vec![ctr("init1", 0, Exited, 1)],
                reasons: vec![("init1", "CrashLoopBackOff")],
                policy: "Always",
                want_phase: PHASE_PENDING,
                want_init: vec!["init1 waiting(CrashLoopBackOff) last=terminated(1) restarts=0 ready=false"],
                want_app: vec!["app waiting(PodInitializing) last=- restarts=0 ready=false"],
            },
            Row {
                name: "a succeeded init container is never waiting again",
                init: &["init1"],
                containers: vec![ctr("init1", 0, Exited, 0)],
                reasons: vec![("init1", "CrashLoopBackOff")],
                policy: "Always",
                want_phase: PHASE_PENDING,
                want_init: vec!["init1 terminated(0) last=- restarts=0 ready=true"],
                want_app: vec!["app waiting(PodInitializing) last=- restarts=0 ready=false"],
            },
        ];
        for r in rows {
            let s = Case { reasons: r.reasons, ..Case::new(pod(r.policy, r.init, &["app"]), runtime(vec![sandbox(true)], r.containers)) }.run();
            assert_eq!(s.phase.as_deref(), Some(r.want_phase), "{}: phase", r.name);
            assert_eq!(summary(s.init_container_statuses.as_ref()), r.want_init, "{}: init", r.name);
            assert_eq!(summary(s.container_statuses.as_ref()), r.want_app, "{}: app", r.name);
        }
    }

    #[test]
    fn phase_table_by_restart_policy() {
        use RuntimeState::*;
        // (policy, exit codes of the two app containers (None = running), pod terminal, phase)
        let rows: Vec<(&str, [Option<i32>; 2], bool, &str)> = vec![
            ("Never", [Some(0), Some(0)], false, PHASE_SUCCEEDED),
            ("Never", [Some(0), Some(1)], false, PHASE_FAILED),
            ("Never", [Some(0), None], false, PHASE_RUNNING),
            ("OnFailure", [Some(0), Some(0)], false, PHASE_SUCCEEDED),
            ("OnFailure", [Some(0), Some(1)], false, PHASE_RUNNING),
            ("Always", [Some(0), Some(0)], false, PHASE_RUNNING),
            ("Always", [Some(1), Some(1)], false, PHASE_RUNNING),
            ("Always", [Some(0), Some(0)], true, PHASE_SUCCEEDED),
            ("Always", [Some(0), Some(137)], true, PHASE_FAILED),
            ("OnFailure", [Some(1), Some(0)], true, PHASE_FAILED),
        ];
        for (policy, codes, terminal, want) in rows {
            let containers = ["a", "b"]
                .iter()
                .zip(codes)
                .map(|(n, c)| match c {
                    Some(code) => ctr(n, 0, Exited, code),
                    None => ctr(n, 0, Running, 0),
                })
                .collect();
            let s = Case { terminal, ..Case::new(pod(policy, &[], &["a", "b"]), runtime(vec![sandbox(true)], containers)) }.run();
            assert_eq!(s.phase.as_deref(), Some(want), "{policy} {codes:?} terminal={terminal}");
        }
    }

    #[test]
    fn terminal_phase_sticks() {
        // The old status said Succeeded; the runtime now shows nothing (sandbox removed).
        let old = PodStatus { phase: Some(PHASE_SUCCEEDED.into()), ..Default::default() };
        let s = Case { old: Some(old), ..Case::new(pod("Never", &[], &["app"]), runtime(vec![], vec![])) }.run();
        assert_eq!(s.phase.as_deref(), Some(PHASE_SUCCEEDED));
        // The API server says Failed; we compute Running: the API server wins.
        let mut p = pod("Always", &[], &["app"]);
        p.status = Some(PodStatus { phase: Some(PHASE_FAILED.into()), ..Default::default() });
        let s = Case::new(p, runtime(vec![sandbox(true)], vec![ctr("app", 0, RuntimeState::Running, 0)])).run();
        assert_eq!(s.phase.as_deref(), Some(PHASE_FAILED));
    }

    #[test]
    fn conditions_table() {
        use RuntimeState::*;
        struct Row {
            name: &'static str,
            init: &'static [&'static str],
            sandboxes: Vec<SandboxStatus>,
            containers: Vec<RtContainer>,
            readiness: Vec<(&'static str, bool)>,
            policy: &'static str,
            // (type, status, reason, message)
            want: Vec<(&'static str, &'static str, &'static str, &'static str)>,
        }
        let rows = vec![
            Row {
                name: "no sandbox yet",
                init: &[],
                sandboxes: vec![],
                containers: vec![],
                readiness: vec![],
                policy: "Always",
                want: vec![
                    (POD_READY_TO_START_CONTAINERS, "False", "", ""),
                    (POD_INITIALIZED, "True", "", ""),
                    (POD_READY, "False", CONTAINERS_NOT_READY, "containers with unready status: [app side]"),
                    (CONTAINERS_READY, "False", CONTAINERS_NOT_READY, "containers with unready status: [app side]"),
                    (POD_SCHEDULED, "True", "", ""),
                ],
            },
            Row {
                name: "init in progress",
                init: &["init1", "init2"],
                sandboxes: vec![sandbox(true)],
                containers: vec![ctr("init1", 0, Exited, 0), ctr("init2", 0, Running, 0)],
                readiness: vec![],
                policy: "Always",
                want: vec![
                    (POD_READY_TO_START_CONTAINERS, "True", "", ""),
                    (POD_INITIALIZED, "False", CONTAINERS_NOT_INITIALIZED, "containers with incomplete status: [init2]"),
                    (POD_READY, "False", CONTAINERS_NOT_READY, "containers with unready status: [app side]"),
                ],
            },
            Row {
                name: "all running and ready",
                init: &["init1"],
                sandboxes: vec![sandbox(true)],
                containers: vec![ctr("init1", 0, Exited, 0), ctr("app", 0, Running, 0), ctr("side", 0, Running, 0)],
                readiness: vec![],
                policy: "Always",
                want: vec![
                    (POD_INITIALIZED, "True", "", ""),
                    (POD_READY, "True", "", ""),
                    (CONTAINERS_READY, "True", "", ""),
                ],
            },
            Row {
                name: "readiness probe failing on one",
                init: &[],
                sandboxes: vec![sandbox(true)],
                containers: vec![ctr("app", 0, Running, 0), ctr("side", 0, Running, 0)],
                readiness: vec![("side-0", false), ("app-0", true)],
                policy: "Always",
                want: vec![
                    (POD_READY, "False", CONTAINERS_NOT_READY, "containers with unready status: [side]"),
                    (CONTAINERS_READY, "False", CONTAINERS_NOT_READY, "containers with unready status: [side]"),
                ],
            },
            Row {
                name: "completed",
                init: &[],
                sandboxes: vec![sandbox(false)],
                containers: vec![ctr("app", 0, Exited, 0), ctr("side", 0, Exited, 0)],
                readiness: vec![],
                policy: "Never",
                want: vec![
                    (POD_READY_TO_START_CONTAINERS, "False", "", ""),
                    (POD_INITIALIZED, "True", POD_COMPLETED, ""),
                    (POD_READY, "False", POD_COMPLETED, ""),
                    (CONTAINERS_READY, "False", POD_COMPLETED, ""),
                ],
            },
            Row {
                name: "failed",
                init: &[],
                sandboxes: vec![sandbox(true)],
                containers: vec![ctr("app", 0, Exited, 1), ctr("side", 0, Exited, 0)],
                readiness: vec![],
                policy: "Never",
                want: vec![(POD_READY, "False", POD_FAILED, ""), (CONTAINERS_READY, "False", POD_FAILED, "")],
            },
        ];
        for r in rows {
            let s = Case { readiness: r.readiness, ..Case::new(pod(r.policy, r.init, &["app", "side"]), runtime(r.sandboxes, r.containers)) }.run();
            for (t, status, reason, message) in r.want {
                assert_eq!(cond(&s, t), (status.into(), reason.into(), message.into()), "{}: {t}", r.name);
            }
        }
    }

    #[test]
    fn transition_times_and_start_time_are_kept() {
        use RuntimeState::*;
        let old = Case::new(pod("Always", &[], &["app"]), runtime(vec![sandbox(true)], vec![])).run();
        let old_time = |t: &str| old.conditions.iter().flatten().find(|c| c.type_ == t).and_then(|c| c.last_transition_time.clone());
        // Pretend the old status is from long ago so that kept times are told from new ones.
        let mut old = old.clone();
        let long_ago = to_time(at(-1000));
        for c in old.conditions.iter_mut().flatten() {
            c.last_transition_time = Some(long_ago.clone());
        }
        old.start_time = Some(long_ago.clone());
        assert!(old_time(POD_READY).is_some());
        let s = Case { old: Some(old), ..Case::new(pod("Always", &[], &["app"]), runtime(vec![sandbox(true)], vec![ctr("app", 0, Running, 0)])) }.run();
        let time = |t: &str| s.conditions.iter().flatten().find(|c| c.type_ == t).and_then(|c| c.last_transition_time.clone());
        assert_eq!(time(POD_SCHEDULED), Some(long_ago.clone()), "unchanged: kept");
        assert_eq!(time(POD_READY_TO_START_CONTAINERS), Some(long_ago.clone()), "unchanged: kept");
        assert_eq!(time(POD_READY), Some(to_time(at(100))), "flipped to True: now");
        assert_eq!(s.start_time, Some(long_ago));
    }

    #[test]
    fn others_conditions_and_the_schedulers_time_are_kept() {
        let mut p = pod("Always", &[], &["app"]);
        p.status = Some(PodStatus {
            conditions: Some(vec![
                PodCondition { type_: POD_SCHEDULED.into(), status: "True".into(), last_transition_time: Some(to_time(at(-50))), ..Default::default() },
                PodCondition { type_: "DisruptionTarget".into(), status: "True".into(), ..Default::default() },
            ]),
            ..Default::default()
        });
        let s = Case::new(p, runtime(vec![], vec![])).run();
        let types: Vec<&str> = s.conditions.iter().flatten().map(|c| c.type_.as_str()).collect();
        assert_eq!(types, ["DisruptionTarget", POD_READY_TO_START_CONTAINERS, POD_INITIALIZED, POD_READY, CONTAINERS_READY, POD_SCHEDULED]);
        let sched = s.conditions.iter().flatten().find(|c| c.type_ == POD_SCHEDULED).and_then(|c| c.last_transition_time.clone());
        assert_eq!(sched, Some(to_time(at(-50))));
    }

    #[test]
    fn ips_qos_and_container_fields() {
        let s = Case::new(pod("Always", &[], &["app"]), runtime(vec![sandbox(true)], vec![ctr("app", 0, RuntimeState::Running, 0)])).run();
        assert_eq!(s.pod_ip.as_deref(), Some("10.244.0.5"));
        assert_eq!(s.host_ip.as_deref(), Some("192.168.1.10"));
        assert_eq!(s.qos_class.as_deref(), Some("BestEffort"));
        assert_eq!(s.start_time, Some(to_time(at(100))));
        let c = &s.container_statuses.unwrap_or_default()[0];
        assert_eq!(c.container_id.as_deref(), Some("containerd://app-0"));
        assert_eq!(c.image, "docker.io/library/app:1");
        assert_eq!(c.image_id, "sha256:abc");
        assert_eq!(c.started, Some(true));
        let started = c.state.as_ref().and_then(|s| s.running.as_ref()).and_then(|r| r.started_at.clone());
        assert_eq!(started, Some(to_time(at(1))));
        // A host-network pod without sandbox IPs shows the node's address.
        let mut p = pod("Always", &[], &["app"]);
        if let Some(spec) = p.spec.as_mut() {
            spec.host_network = Some(true);
        }
        let s = Case::new(p, runtime(vec![], vec![])).run();
        assert_eq!(s.pod_ip.as_deref(), Some("192.168.1.10"));
    }

    #[test]
    fn a_running_container_that_vanished_is_not_pending() {
        // Old status: running; runtime: nothing (removed behind our back).
        let first = Case::new(pod("Always", &[], &["app"]), runtime(vec![sandbox(true)], vec![ctr("app", 0, RuntimeState::Running, 0)])).run();
        let s = Case { old: Some(first), ..Case::new(pod("Always", &[], &["app"]), runtime(vec![sandbox(true)], vec![])) }.run();
        assert_eq!(summary(s.container_statuses.as_ref()), ["app waiting(ContainerCreating) last=terminated(137) restarts=1 ready=false"]);
        assert_eq!(s.phase.as_deref(), Some(PHASE_RUNNING));
    }

    #[test]
    fn last_state_carried_when_the_previous_attempt_was_collected() {
        use RuntimeState::*;
        let first = Case::new(pod("Always", &[], &["app"]), runtime(vec![sandbox(true)], vec![ctr("app", 0, Exited, 3)])).run();
        // Attempt 0 is gone; attempt 1 runs.
        let s = Case { old: Some(first), ..Case::new(pod("Always", &[], &["app"]), runtime(vec![sandbox(true)], vec![ctr("app", 1, Running, 0)])) }.run();
        assert_eq!(summary(s.container_statuses.as_ref()), ["app running last=terminated(3) restarts=1 ready=true"]);
    }

    #[test]
    fn no_restart_for_a_pod_being_deleted() {
        let mut p = pod("Always", &[], &["app"]);
        p.metadata.deletion_timestamp = Some(to_time(at(0)));
        let rt = runtime(vec![], vec![ctr("app", 0, RuntimeState::Exited, 1)]);
        assert!(!should_container_be_restarted(&p.spec.clone().unwrap_or_default().containers[0], &p, &rt));
        // The cached CrashLoopBackOff no longer applies: the container shows how it ended.
        let s = Case { reasons: vec![("app", "CrashLoopBackOff")], ..Case::new(p, rt) }.run();
        assert_eq!(summary(s.container_statuses.as_ref()), ["app terminated(1) last=- restarts=0 ready=false"]);
    }

}
