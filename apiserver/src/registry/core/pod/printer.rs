//! Mirrors printPod in pkg/printers/internalversion/printers.go: NAME, READY, STATUS, RESTARTS,
//! AGE (and, wide, IP, NODE, NOMINATED NODE, READINESS GATES), and the `Completed` row condition.
//!
//! Longer than most files here, on purpose: STATUS is one decision (`pod_summary`, printPod's
//! steps) whose table test lists every case kubectl users meet, kept beside the code it checks.
//! The Table's own tests (streamed against built, its JSON shape) are here too, with the pod as
//! the kind that has every feature (wide columns, row conditions).

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use crate::printers::duration::human_duration;
use crate::printers::fields::{age, arr_at, bool_at, int_at, name, obj_at, obj_present, str_at, time_at};
use crate::printers::tablegenerator::{Column, Printer, age_col, col, name_col};

/// The reason the node lifecycle controller puts on pods of a node that stopped reporting
/// (Kubernetes' `node.NodeUnreachablePodReason`).
const NODE_UNREACHABLE_POD_REASON: &str = "NodeLost";

pub struct PodPrinter;

impl Printer for PodPrinter {
    fn columns(&self) -> Vec<Column> {
        vec![
            name_col(),
            col("Ready", "string", "The aggregate readiness state of this pod for accepting traffic.", 0),
            col("Status", "string", "The aggregate status of the containers in this pod.", 0),
            col(
                "Restarts",
                "string",
                "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.",
                0,
            ),
            age_col(),
            col("IP", "string", "IP address allocated to the pod.", 1),
            col("Node", "string", "The node this pod is bound to.", 1),
            col("Nominated Node", "string", "The node the scheduler nominated for this pod after preemption.", 1),
            col("Readiness Gates", "string", "Readiness gates whose conditions are True, of all gates.", 1),
        ]
    }

    fn row(&self, obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
        print_pod(obj, now)
    }

    fn row_conditions(&self, obj: &Value) -> Option<Value> {
        row_conditions(obj)
    }
}

/// Row conditions: printPod marks finished pods `Completed` (Kubernetes' `podSuccessConditions` and
/// `podFailedConditions`), which clients may use to tell finished rows apart.
fn row_conditions(obj: &Value) -> Option<Value> {
    let (reason, message) = match str_at(obj, &["status", "phase"]) {
        "Succeeded" => ("Succeeded", "The pod has completed successfully."),
        "Failed" => ("Failed", "The pod failed."),
        _ => return None,
    };
    Some(json!([{"type": "Completed", "status": "True", "reason": reason, "message": message}]))
}

/// What printPod derives from a pod before laying out cells.
#[derive(Debug, Clone, PartialEq, Eq)]
struct PodSummary {
    ready: usize,
    total: usize,
    reason: String,
    restarts: i64,
    last_restart: Option<DateTime<Utc>>,
}

fn print_pod(pod: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let s = pod_summary(pod);
    let restarts = match s.last_restart {
        Some(t) if s.restarts != 0 => format!("{} ({} ago)", s.restarts, human_duration(now - t)),
        _ => s.restarts.to_string(),
    };
    let or_none = |v: &str| {
        if v.is_empty() {
            "<none>".to_string()
        } else {
            v.to_string()
        }
    };
    let pod_ip = arr_at(pod, &["status", "podIPs"])
        .first()
        .map(|ip| str_at(ip, &["ip"]))
        .unwrap_or("");
    let conditions = arr_at(pod, &["status", "conditions"]);
    let gates = arr_at(pod, &["spec", "readinessGates"]);
    let readiness_gates = if gates.is_empty() {
        "<none>".to_string()
    } else {
        // For each gate, the first condition of that type decides.
        let true_conditions = gates
            .iter()
            .filter(|gate| {
                let wanted = str_at(gate, &["conditionType"]);
                conditions
                    .iter()
                    .find(|c| str_at(c, &["type"]) == wanted)
                    .is_some_and(|c| str_at(c, &["status"]) == "True")
            })
            .count();
        format!("{}/{}", true_conditions, gates.len())
    };
    vec![
        name(pod).into(),
        format!("{}/{}", s.ready, s.total).into(),
        s.reason.into(),
        restarts.into(),
        age(pod, now).into(),
        or_none(pod_ip).into(),
        or_none(str_at(pod, &["spec", "nodeName"])).into(),
        or_none(str_at(pod, &["status", "nominatedNodeName"])).into(),
        readiness_gates.into(),
    ]
}

/// printPod's decision, step by step: the STATUS reason, READY counts and restarts.
fn pod_summary(pod: &Value) -> PodSummary {
    let init_specs = arr_at(pod, &["spec", "initContainers"]);
    // A restartable init container (a sidecar, restartPolicy: Always) counts as a container.
    let is_sidecar = |name: &str| {
        init_specs
            .iter()
            .any(|c| str_at(c, &["name"]) == name && str_at(c, &["restartPolicy"]) == "Always")
    };
    let mut total = arr_at(pod, &["spec", "containers"]).len();
    total += init_specs
        .iter()
        .filter(|c| str_at(c, &["restartPolicy"]) == "Always")
        .count();
    let mut ready = 0;
    let mut restarts = 0;
    let mut last_restart: Option<DateTime<Utc>> = None;
    let mut sidecar_restarts = 0;
    let mut last_sidecar_restart: Option<DateTime<Utc>> = None;

    // Step 1: start from the phase, overridden by status.reason (Evicted, OutOfcpu, NodeLost…)
    // and by a scheduling gate.
    let phase = str_at(pod, &["status", "phase"]);
    let mut reason = phase.to_string();
    let status_reason = str_at(pod, &["status", "reason"]);
    if !status_reason.is_empty() {
        reason = status_reason.to_string();
    }
    let conditions = arr_at(pod, &["status", "conditions"]);
    if conditions.iter().any(|c| {
        str_at(c, &["type"]) == "PodScheduled" && str_at(c, &["reason"]) == "SchedulingGated"
    }) {
        reason = "SchedulingGated".to_string();
    }

    // Step 2: init containers, in order; the first one that has not succeeded names the status.
    let init_statuses = arr_at(pod, &["status", "initContainerStatuses"]);
    let mut initializing = false;
    for (i, container) in init_statuses.iter().enumerate() {
        let count = int_at(container, &["restartCount"]);
        let finished = time_at(container, &["lastState", "terminated", "finishedAt"]);
        restarts += count;
        later(&mut last_restart, finished);
        let sidecar = is_sidecar(str_at(container, &["name"]));
        if sidecar {
            sidecar_restarts += count;
            later(&mut last_sidecar_restart, finished);
        }
        let terminated = obj_at(container, &["state", "terminated"]);
        let waiting_reason = str_at(container, &["state", "waiting", "reason"]);
        if terminated.is_some_and(|t| int_at(t, &["exitCode"]) == 0) {
            continue;
        }
        if sidecar && bool_at(container, &["started"]) {
            if bool_at(container, &["ready"]) {
                ready += 1;
            }
            continue;
        }
        reason = if let Some(t) = terminated {
            // Initialization failed.
            terminated_reason(t, "Init:")
        } else if !waiting_reason.is_empty() && waiting_reason != "PodInitializing" {
            format!("Init:{waiting_reason}")
        } else {
            format!("Init:{}/{}", i, init_specs.len())
        };
        initializing = true;
        break;
    }

    // Step 3: regular containers, last to first, so the first container's state wins.
    let initialized = conditions
        .iter()
        .any(|c| str_at(c, &["type"]) == "Initialized" && str_at(c, &["status"]) == "True");
    if !initializing || initialized {
        // Only sidecars keep counting once initialization is over.
        restarts = sidecar_restarts;
        last_restart = last_sidecar_restart;
        let mut has_running = false;
        for container in arr_at(pod, &["status", "containerStatuses"]).iter().rev() {
            restarts += int_at(container, &["restartCount"]);
            later(
                &mut last_restart,
                time_at(container, &["lastState", "terminated", "finishedAt"]),
            );
            let waiting_reason = str_at(container, &["state", "waiting", "reason"]);
            let terminated = obj_at(container, &["state", "terminated"]);
            if !waiting_reason.is_empty() {
                reason = waiting_reason.to_string();
            } else if let Some(t) = terminated {
                reason = terminated_reason(t, "");
            } else if bool_at(container, &["ready"])
                && obj_at(container, &["state", "running"]).is_some()
            {
                has_running = true;
                ready += 1;
            }
        }
        // A container that exited 0 while another still runs: the pod is not "Completed".
        if reason == "Completed" && has_running {
            let pod_ready = conditions
                .iter()
                .any(|c| str_at(c, &["type"]) == "Ready" && str_at(c, &["status"]) == "True");
            reason = if pod_ready { "Running" } else { "NotReady" }.to_string();
        }
    }

    // Step 4: deletion overrides everything, unless the pod already finished.
    if obj_present(pod, &["metadata", "deletionTimestamp"]) {
        if status_reason == NODE_UNREACHABLE_POD_REASON {
            reason = "Unknown".to_string();
        } else if phase != "Succeeded" && phase != "Failed" {
            reason = "Terminating".to_string();
        }
    }

    PodSummary {
        ready,
        total,
        reason,
        restarts,
        last_restart,
    }
}

/// A terminated container's reason, or `Signal:N` / `ExitCode:N` when the runtime gave none.
fn terminated_reason(terminated: &Value, prefix: &str) -> String {
    let reason = str_at(terminated, &["reason"]);
    if !reason.is_empty() {
        return format!("{prefix}{reason}");
    }
    let signal = int_at(terminated, &["signal"]);
    if signal != 0 {
        format!("{prefix}Signal:{signal}")
    } else {
        format!("{prefix}ExitCode:{}", int_at(terminated, &["exitCode"]))
    }
}

fn later(current: &mut Option<DateTime<Utc>>, candidate: Option<DateTime<Utc>>) {
    if let Some(c) = candidate
        && current.is_none_or(|cur| cur < c)
    {
        *current = Some(c);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::printers::tablegenerator::testing::{ago, column_names, name_columns, now};
    use crate::printers::tablegenerator::{DefaultPrinter, NAME_DESCRIPTION, table, table_json};
    use crate::registry::core::configmap::printer::CONFIGMAP_PRINTER;
    use crate::registry::core::node::printer::NodePrinter;

    fn pod(spec: Value, status: Value) -> Value {
        json!({"metadata": {"name": "web", "creationTimestamp": ago(300)}, "spec": spec, "status": status})
    }

    fn one(name: &str) -> Value {
        json!({"containers": [{"name": name, "image": "busybox"}]})
    }

    fn running(name: &str, ready: bool) -> Value {
        json!({"name": name, "ready": ready, "restartCount": 0, "state": {"running": {"startedAt": ago(60)}}})
    }

    fn waiting(name: &str, reason: &str) -> Value {
        json!({"name": name, "ready": false, "restartCount": 0, "state": {"waiting": {"reason": reason}}})
    }

    fn terminated(name: &str, exit_code: i64, reason: &str) -> Value {
        let mut t = json!({"exitCode": exit_code, "finishedAt": ago(30)});
        if !reason.is_empty() {
            t["reason"] = reason.into();
        }
        json!({"name": name, "ready": false, "restartCount": 0, "state": {"terminated": t}})
    }

    fn two_inits() -> Value {
        json!({
            "initContainers": [{"name": "i1", "image": "busybox"}, {"name": "i2", "image": "busybox"}],
            "containers": [{"name": "app", "image": "busybox"}],
        })
    }

    /// (case, pod, READY, STATUS, RESTARTS)
    fn pod_cases() -> Vec<(
        &'static str,
        Value,
        &'static str,
        &'static str,
        &'static str,
    )> {
        let crash = json!({
            "name": "app", "ready": false, "restartCount": 3,
            "state": {"waiting": {"reason": "CrashLoopBackOff"}},
            "lastState": {"terminated": {"exitCode": 1, "reason": "Error", "finishedAt": ago(120)}},
        });
        let mut deleting = pod(
            one("app"),
            json!({"phase": "Running", "containerStatuses": [running("app", true)]}),
        );
        deleting["metadata"]["deletionTimestamp"] = ago(1).into();
        let mut node_lost = pod(
            one("app"),
            json!({"phase": "Running", "reason": "NodeLost"}),
        );
        node_lost["metadata"]["deletionTimestamp"] = ago(1).into();
        let mut deleted_after_success = pod(
            one("app"),
            json!({"phase": "Succeeded", "containerStatuses": [terminated("app", 0, "Completed")]}),
        );
        deleted_after_success["metadata"]["deletionTimestamp"] = ago(1).into();
        let two = json!({"containers": [{"name": "a"}, {"name": "b"}]});
        let sidecar_spec = json!({
            "initContainers": [{"name": "proxy", "restartPolicy": "Always"}, {"name": "setup"}],
            "containers": [{"name": "app"}],
        });
        let gated = json!({"containers": [{"name": "app"}], "schedulingGates": [{"name": "wait"}]});
        vec![
            (
                "pending, no statuses",
                pod(one("app"), json!({"phase": "Pending"})),
                "0/1",
                "Pending",
                "0",
            ),
            (
                "no status at all",
                json!({"metadata": {"name": "x"}}),
                "0/0",
                "",
                "0",
            ),
            (
                "scheduling gated",
                pod(
                    gated,
                    json!({"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}]}),
                ),
                "0/1",
                "SchedulingGated",
                "0",
            ),
            (
                "container creating",
                pod(
                    one("app"),
                    json!({"phase": "Pending", "containerStatuses": [waiting("app", "ContainerCreating")]}),
                ),
                "0/1",
                "ContainerCreating",
                "0",
            ),
            (
                "image pull backoff",
                pod(
                    one("app"),
                    json!({"phase": "Pending", "containerStatuses": [waiting("app", "ImagePullBackOff")]}),
                ),
                "0/1",
                "ImagePullBackOff",
                "0",
            ),
            (
                "err image pull",
                pod(
                    one("app"),
                    json!({"phase": "Pending", "containerStatuses": [waiting("app", "ErrImagePull")]}),
                ),
                "0/1",
                "ErrImagePull",
                "0",
            ),
            (
                "create container config error",
                pod(
                    one("app"),
                    json!({"phase": "Pending", "containerStatuses": [waiting("app", "CreateContainerConfigError")]}),
                ),
                "0/1",
                "CreateContainerConfigError",
                "0",
            ),
            (
                "init 0/2",
                pod(
                    two_inits(),
                    json!({"phase": "Pending", "initContainerStatuses": [
                    waiting("i1", "PodInitializing"), waiting("i2", "PodInitializing")]}),
                ),
                "0/1",
                "Init:0/2",
                "0",
            ),
            (
                "init 0/2, first running",
                pod(
                    two_inits(),
                    json!({"phase": "Pending", "initContainerStatuses": [running("i1", false), waiting("i2", "")]}),
                ),
                "0/1",
                "Init:0/2",
                "0",
            ),
            (
                "init 1/2",
                pod(
                    two_inits(),
                    json!({"phase": "Pending", "initContainerStatuses": [
                    terminated("i1", 0, "Completed"), running("i2", false)]}),
                ),
                "0/1",
                "Init:1/2",
                "0",
            ),
            (
                "init crash loop",
                pod(
                    two_inits(),
                    json!({"phase": "Pending", "initContainerStatuses": [
                    {"name": "i1", "restartCount": 4, "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                     "lastState": {"terminated": {"exitCode": 1, "finishedAt": ago(40)}}}]}),
                ),
                "0/1",
                "Init:CrashLoopBackOff",
                "4 (40s ago)",
            ),
            (
                "init error",
                pod(
                    two_inits(),
                    json!({"phase": "Failed", "initContainerStatuses": [terminated("i1", 1, "Error")]}),
                ),
                "0/1",
                "Init:Error",
                "0",
            ),
            (
                "init exit code without reason",
                pod(
                    two_inits(),
                    json!({"phase": "Pending", "initContainerStatuses": [terminated("i1", 2, "")]}),
                ),
                "0/1",
                "Init:ExitCode:2",
                "0",
            ),
            (
                "init signal without reason",
                pod(
                    two_inits(),
                    json!({"phase": "Pending", "initContainerStatuses": [
                    {"name": "i1", "state": {"terminated": {"exitCode": 137, "signal": 9}}}]}),
                ),
                "0/1",
                "Init:Signal:9",
                "0",
            ),
            (
                "running 1/1",
                pod(
                    one("app"),
                    json!({"phase": "Running", "containerStatuses": [running("app", true)]}),
                ),
                "1/1",
                "Running",
                "0",
            ),
            (
                "running, not ready",
                pod(
                    one("app"),
                    json!({"phase": "Running", "containerStatuses": [running("app", false)]}),
                ),
                "0/1",
                "Running",
                "0",
            ),
            (
                "running after init done",
                pod(
                    two_inits(),
                    json!({"phase": "Running",
                    "initContainerStatuses": [terminated("i1", 0, "Completed"), terminated("i2", 0, "Completed")],
                    "containerStatuses": [running("app", true)]}),
                ),
                "1/1",
                "Running",
                "0",
            ),
            (
                "crash loop with restarts",
                pod(
                    one("app"),
                    json!({"phase": "Running", "containerStatuses": [crash]}),
                ),
                "0/1",
                "CrashLoopBackOff",
                "3 (2m ago)",
            ),
            (
                "a last state without restarts shows no time",
                pod(
                    one("app"),
                    json!({"phase": "Running", "containerStatuses": [
                    {"name": "app", "ready": true, "restartCount": 0, "state": {"running": {}},
                     "lastState": {"terminated": {"exitCode": 0, "finishedAt": ago(60)}}}]}),
                ),
                "1/1",
                "Running",
                "0",
            ),
            (
                "completed",
                pod(
                    json!({"restartPolicy": "Never", "containers": [{"name": "app"}]}),
                    json!({"phase": "Succeeded", "containerStatuses": [terminated("app", 0, "Completed")]}),
                ),
                "0/1",
                "Completed",
                "0",
            ),
            (
                "error",
                pod(
                    one("app"),
                    json!({"phase": "Failed", "containerStatuses": [terminated("app", 1, "Error")]}),
                ),
                "0/1",
                "Error",
                "0",
            ),
            (
                "oom killed",
                pod(
                    one("app"),
                    json!({"phase": "Running", "containerStatuses": [terminated("app", 137, "OOMKilled")]}),
                ),
                "0/1",
                "OOMKilled",
                "0",
            ),
            (
                "exit code without reason",
                pod(
                    one("app"),
                    json!({"phase": "Failed", "containerStatuses": [terminated("app", 3, "")]}),
                ),
                "0/1",
                "ExitCode:3",
                "0",
            ),
            (
                "signal without reason",
                pod(
                    one("app"),
                    json!({"phase": "Failed", "containerStatuses": [
                    {"name": "app", "state": {"terminated": {"exitCode": 143, "signal": 15}}}]}),
                ),
                "0/1",
                "Signal:15",
                "0",
            ),
            (
                "first container's state wins",
                pod(
                    two.clone(),
                    json!({"phase": "Running", "containerStatuses": [waiting("a", "ErrImagePull"), running("b", true)]}),
                ),
                "1/2",
                "ErrImagePull",
                "0",
            ),
            (
                "both waiting: the first container's reason wins",
                pod(
                    two.clone(),
                    json!({"phase": "Pending", "containerStatuses": [
                    waiting("a", "ErrImagePull"), waiting("b", "ContainerCreating")]}),
                ),
                "0/2",
                "ErrImagePull",
                "0",
            ),
            (
                "completed but one still running, pod ready",
                pod(
                    two.clone(),
                    json!({"phase": "Running",
                    "conditions": [{"type": "Ready", "status": "True"}],
                    "containerStatuses": [terminated("a", 0, "Completed"), running("b", true)]}),
                ),
                "1/2",
                "Running",
                "0",
            ),
            (
                "completed but one still running, pod not ready",
                pod(
                    two,
                    json!({"phase": "Running",
                    "conditions": [{"type": "Ready", "status": "False"}],
                    "containerStatuses": [terminated("a", 0, "Completed"), running("b", true)]}),
                ),
                "1/2",
                "NotReady",
                "0",
            ),
            ("terminating", deleting, "1/1", "Terminating", "0"),
            ("deleted on a lost node", node_lost, "0/1", "Unknown", "0"),
            (
                "deleted after success keeps Completed",
                deleted_after_success,
                "0/1",
                "Completed",
                "0",
            ),
            (
                "evicted",
                pod(
                    one("app"),
                    json!({"phase": "Failed", "reason": "Evicted", "message": "low on memory"}),
                ),
                "0/1",
                "Evicted",
                "0",
            ),
            (
                "out of cpu",
                pod(one("app"), json!({"phase": "Failed", "reason": "OutOfcpu"})),
                "0/1",
                "OutOfcpu",
                "0",
            ),
            (
                "sidecar started and ready counts, its restarts survive",
                pod(
                    sidecar_spec.clone(),
                    json!({"phase": "Running",
                    "initContainerStatuses": [
                        {"name": "proxy", "started": true, "ready": true, "restartCount": 2,
                         "state": {"running": {}}, "lastState": {"terminated": {"exitCode": 1, "finishedAt": ago(600)}}},
                        {"name": "setup", "restartCount": 5, "state": {"terminated": {"exitCode": 0, "reason": "Completed"}},
                         "lastState": {"terminated": {"exitCode": 1, "finishedAt": ago(10)}}}],
                    "containerStatuses": [running("app", true)]}),
                ),
                "2/2",
                "Running",
                "2 (10m ago)",
            ),
            (
                "sidecar not started yet blocks init",
                pod(
                    sidecar_spec,
                    json!({"phase": "Pending",
                    "initContainerStatuses": [{"name": "proxy", "started": false, "state": {"running": {}}}]}),
                ),
                "0/2",
                "Init:0/2",
                "0",
            ),
        ]
    }

    #[test]
    fn pod_status_table() {
        for (case, pod, ready, status, restarts) in pod_cases() {
            let cells = PodPrinter.row(&pod, now());
            assert_eq!(cells.len(), PodPrinter.columns().len(), "{case}");
            assert_eq!(cells[1], ready, "{case}: READY");
            assert_eq!(cells[2], status, "{case}: STATUS");
            assert_eq!(cells[3], restarts, "{case}: RESTARTS");
        }
    }

    #[test]
    fn pod_cells_name_age_and_wide() {
        let p = json!({
            "metadata": {"name": "web", "creationTimestamp": ago(3 * 86400 + 4 * 3600)},
            "spec": {"nodeName": "n1", "containers": [{"name": "app"}], "readinessGates": [
                {"conditionType": "example.com/a"}, {"conditionType": "example.com/b"}]},
            "status": {"phase": "Running", "podIPs": [{"ip": "10.0.0.5"}, {"ip": "fd00::5"}],
                "nominatedNodeName": "n2",
                "conditions": [{"type": "example.com/a", "status": "True"}, {"type": "example.com/b", "status": "False"}]},
        });
        assert_eq!(
            PodPrinter.row(&p, now()),
            vec![
                json!("web"),
                json!("0/1"),
                json!("Running"),
                json!("0"),
                json!("3d4h"),
                json!("10.0.0.5"),
                json!("n1"),
                json!("n2"),
                json!("1/2")
            ]
        );
        let bare = json!({"metadata": {"name": "x"}});
        assert_eq!(
            PodPrinter.row(&bare, now())[4..],
            [
                json!("<unknown>"),
                json!("<none>"),
                json!("<none>"),
                json!("<none>"),
                json!("<none>")
            ]
        );
    }

    #[test]
    fn columns_match_kubernetes() {
        assert_eq!(
            column_names(&PodPrinter),
            vec![
                ("Name", 0),
                ("Ready", 0),
                ("Status", 0),
                ("Restarts", 0),
                ("Age", 0),
                ("IP", 1),
                ("Node", 1),
                ("Nominated Node", 1),
                ("Readiness Gates", 1)
            ]
        );
        assert_eq!(name_columns(&PodPrinter), vec!["Name"]);
    }

    #[test]
    fn the_streamed_table_is_the_same_table() {
        let pods = vec![
            json!({"metadata": {"name": "a", "namespace": "default", "creationTimestamp": "2026-01-01T00:00:00Z"}, "status": {"phase": "Succeeded"}}),
            json!({"metadata": {"name": "b", "namespace": "default"}, "spec": {"nodeName": "n1"}}),
        ];
        for (kind, printer, rv, cont) in [("Pod", &PodPrinter as &dyn Printer, "42", Some("tok")), ("ConfigMap", &CONFIGMAP_PRINTER, "", None)] {
            let streamed: Value = serde_json::from_slice(&table_json(printer, &pods, rv, cont, now())).unwrap();
            assert_eq!(streamed, table(printer, &pods, rv, cont, now()), "{kind}");
        }
    }

    #[test]
    fn table_json_shape() {
        let pods = vec![
            json!({"metadata": {"name": "a", "namespace": "default", "labels": {"app": "web"}, "creationTimestamp": ago(5)},
                   "spec": {"containers": [{"name": "c"}]}, "status": {"phase": "Pending"}}),
            json!({"metadata": {"name": "b", "namespace": "default"}, "spec": {"containers": [{"name": "c"}]},
                   "status": {"phase": "Succeeded"}}),
        ];
        let t = table(&PodPrinter, &pods, "104", Some("tok"), now());
        assert_eq!(t["kind"], "Table");
        assert_eq!(t["apiVersion"], "meta.k8s.io/v1");
        assert_eq!(
            t["metadata"],
            json!({"resourceVersion": "104", "continue": "tok"})
        );
        assert_eq!(
            t["columnDefinitions"][0],
            json!({"name": "Name", "type": "string", "format": "name", "description": NAME_DESCRIPTION, "priority": 0})
        );
        assert_eq!(t["columnDefinitions"][5]["priority"], 1);
        assert_eq!(t["columnDefinitions"].as_array().map(Vec::len), Some(9));
        assert_eq!(
            t["rows"][0]["cells"],
            json!([
                "a", "0/1", "Pending", "0", "5s", "<none>", "<none>", "<none>", "<none>"
            ])
        );
        assert_eq!(
            t["rows"][0]["object"],
            json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": pods[0]["metadata"]})
        );
        assert!(t["rows"][0].get("conditions").is_none());
        assert_eq!(t["rows"][1]["conditions"][0]["type"], "Completed");
        assert_eq!(t["rows"][1]["conditions"][0]["reason"], "Succeeded");

        let empty = table(&NodePrinter, &[] as &[Value], "", None, now());
        assert_eq!(empty["metadata"], json!({}));
        assert_eq!(empty["rows"], json!([]));
        let no_continue = table(&NodePrinter, &[] as &[Value], "7", Some(""), now());
        assert_eq!(no_continue["metadata"], json!({"resourceVersion": "7"}));
        let no_meta = table(&DefaultPrinter, &[json!({})], "1", None, now());
        assert_eq!(no_meta["rows"][0]["object"]["metadata"], json!({}));
    }
}
