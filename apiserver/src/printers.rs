//! Mirrors Kubernetes' pkg/printers/internalversion/printers.go: server-side Table columns and cells.
//!
//! `kubectl get` asks for `application/json;as=Table;v=v1;g=meta.k8s.io` and prints whatever columns
//! the server returns, so the server, not kubectl, decides what `READY`, `STATUS` or `ROLES` mean.
//! Kubernetes registers one `TableHandler` per kind (column definitions plus a `printX` function that
//! turns one object into cells); [`columns`] and [`row`] are that registry, keyed by kind.
//!
//! The server always prints as if `-o wide` were given (`GenerateOptions{Wide: true}`): every row
//! carries the priority-1 cells too, and kubectl hides those columns unless asked for them.
//!
//! Objects arrive as JSON rather than typed structs on purpose: a printer must never fail, and reading
//! a missing or malformed field as "absent" is exactly what Go's zero values give the Go printers.
//!
//! Implementation caveats (left out on purpose):
//! - Only Pod, Node, Namespace, Event, ConfigMap, Secret, ServiceAccount and Lease have printers.
//!   Every other kind gets NAME and AGE; the real apiserver's fallback (`DefaultTableConvertor`)
//!   prints NAME and a `date`-typed "Created At" instead.
//! - Column descriptions are short paraphrases, not the full OpenAPI field docs Kubernetes uses.
//! - Event's FIRST SEEN falls back to `metadata.creationTimestamp` when both `firstTimestamp` and
//!   `eventTime` are missing (Kubernetes prints "<unknown>").
//! - Rows carry the Pod `Completed` row condition but no `includeObject=Object` support: the row
//!   object is always the metadata.

use chrono::{DateTime, Duration, Utc};
use serde_json::{Map, Value, json};
use std::collections::BTreeSet;

/// One `metav1.TableColumnDefinition`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Column {
    /// Title-cased as Kubernetes declares it ("Nominated Node"); kubectl upper-cases it for display.
    pub name: &'static str,
    /// An OpenAPI type: "string" | "integer" | "date".
    pub type_: &'static str,
    /// "name" for the column that holds the object's name, otherwise "".
    pub format: &'static str,
    pub description: &'static str,
    /// 0 = always shown; 1 = shown only with `-o wide`.
    pub priority: i32,
}

const NAME_DESCRIPTION: &str = "Name must be unique within a namespace.";
const AGE_DESCRIPTION: &str =
    "CreationTimestamp is a timestamp representing the server time when this object was created.";

/// The reason the node lifecycle controller puts on pods of a node that stopped reporting
/// (Kubernetes' `node.NodeUnreachablePodReason`).
const NODE_UNREACHABLE_POD_REASON: &str = "NodeLost";
/// Label prefix whose suffix names a node role: `node-role.kubernetes.io/control-plane`.
const LABEL_NODE_ROLE_PREFIX: &str = "node-role.kubernetes.io/";
/// The older role label, whose value names the role.
const NODE_LABEL_ROLE: &str = "kubernetes.io/role";

const fn col(
    name: &'static str,
    type_: &'static str,
    description: &'static str,
    priority: i32,
) -> Column {
    Column {
        name,
        type_,
        format: "",
        description,
        priority,
    }
}

const fn name_col() -> Column {
    Column {
        name: "Name",
        type_: "string",
        format: "name",
        description: NAME_DESCRIPTION,
        priority: 0,
    }
}

const fn age_col() -> Column {
    col("Age", "string", AGE_DESCRIPTION, 0)
}

/// The column definitions for `kind` (Kubernetes' `AddHandlers`). Kinds without a printer get
/// NAME and AGE.
pub fn columns(kind: &str) -> Vec<Column> {
    match kind {
        "Pod" => vec![
            name_col(),
            col(
                "Ready",
                "string",
                "The aggregate readiness state of this pod for accepting traffic.",
                0,
            ),
            col(
                "Status",
                "string",
                "The aggregate status of the containers in this pod.",
                0,
            ),
            col(
                "Restarts",
                "string",
                "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.",
                0,
            ),
            age_col(),
            col("IP", "string", "IP address allocated to the pod.", 1),
            col("Node", "string", "The node this pod is bound to.", 1),
            col(
                "Nominated Node",
                "string",
                "The node the scheduler nominated for this pod after preemption.",
                1,
            ),
            col(
                "Readiness Gates",
                "string",
                "Readiness gates whose conditions are True, of all gates.",
                1,
            ),
        ],
        "Node" => vec![
            name_col(),
            col("Status", "string", "The status of the node", 0),
            col("Roles", "string", "The roles of the node", 0),
            age_col(),
            col(
                "Version",
                "string",
                "Kubelet Version reported by the node.",
                0,
            ),
            col(
                "Internal-IP",
                "string",
                "The node's first InternalIP address.",
                1,
            ),
            col(
                "External-IP",
                "string",
                "The node's first ExternalIP address.",
                1,
            ),
            col("OS-Image", "string", "OS Image reported by the node.", 1),
            col(
                "Kernel-Version",
                "string",
                "Kernel Version reported by the node.",
                1,
            ),
            col(
                "Container-Runtime",
                "string",
                "ContainerRuntime Version reported by the node.",
                1,
            ),
        ],
        "Namespace" => vec![
            name_col(),
            col("Status", "string", "The status of the namespace", 0),
            age_col(),
        ],
        "Event" => vec![
            col(
                "Last Seen",
                "string",
                "The time at which the most recent occurrence of this event was recorded.",
                0,
            ),
            col("Type", "string", "Type of this event (Normal, Warning).", 0),
            col(
                "Reason",
                "string",
                "A short, machine understandable string for why this event happened.",
                0,
            ),
            col(
                "Object",
                "string",
                "The object that this event is about.",
                0,
            ),
            col(
                "Subobject",
                "string",
                "The field path of the part of the object the event is about.",
                1,
            ),
            col("Source", "string", "The component reporting this event.", 1),
            col(
                "Message",
                "string",
                "A human-readable description of the status of this operation.",
                0,
            ),
            col(
                "First Seen",
                "string",
                "The time at which the event was first recorded.",
                1,
            ),
            col(
                "Count",
                "string",
                "The number of times this event has occurred.",
                1,
            ),
            Column {
                priority: 1,
                ..name_col()
            },
        ],
        "ConfigMap" => vec![
            name_col(),
            col(
                "Data",
                "string",
                "Number of keys in data and binaryData.",
                0,
            ),
            age_col(),
        ],
        "Secret" => vec![
            name_col(),
            col(
                "Type",
                "string",
                "Used to facilitate programmatic handling of secret data.",
                0,
            ),
            col("Data", "string", "Number of keys in data.", 0),
            age_col(),
        ],
        "ServiceAccount" => vec![
            name_col(),
            col("Secrets", "string", "Number of secrets listed.", 0),
            age_col(),
        ],
        "Lease" => vec![
            name_col(),
            col(
                "Holder",
                "string",
                "The identity of the holder of the lease.",
                0,
            ),
            age_col(),
        ],
        _ => vec![name_col(), age_col()],
    }
}

/// The cells of one row for an object of `kind`, in the order of [`columns`], wide cells included.
pub fn row(kind: &str, obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    match kind {
        "Pod" => print_pod(obj, now),
        "Node" => print_node(obj, now),
        "Namespace" => vec![
            name(obj).into(),
            str_at(obj, &["status", "phase"]).into(),
            age(obj, now).into(),
        ],
        "Event" => print_event(obj, now),
        "ConfigMap" => {
            let data = len_at(obj, &["data"]) + len_at(obj, &["binaryData"]);
            vec![name(obj).into(), data.into(), age(obj, now).into()]
        }
        "Secret" => {
            // stringData is write-only: the API server merges it into data. Count the union so an
            // object that has not been through that merge still shows the right number.
            let mut keys: BTreeSet<&str> = BTreeSet::new();
            for field in ["data", "stringData"] {
                if let Some(map) = obj.get(field).and_then(Value::as_object) {
                    keys.extend(map.keys().map(String::as_str));
                }
            }
            vec![
                name(obj).into(),
                str_at(obj, &["type"]).into(),
                (keys.len() as i64).into(),
                age(obj, now).into(),
            ]
        }
        "ServiceAccount" => vec![
            name(obj).into(),
            len_at(obj, &["secrets"]).into(),
            age(obj, now).into(),
        ],
        "Lease" => vec![
            name(obj).into(),
            str_at(obj, &["spec", "holderIdentity"]).into(),
            age(obj, now).into(),
        ],
        _ => vec![name(obj).into(), age(obj, now).into()],
    }
}

/// The `metav1.Table` for a list of objects of `kind`. Each row's `object` is the object's metadata
/// as a `PartialObjectMetadata` (what `includeObject=Metadata`, kubectl's default, asks for): kubectl
/// reads labels (`--show-labels`, `-L`) and the namespace (`-A`) from it.
pub fn table(
    kind: &str,
    objects: &[impl std::borrow::Borrow<Value>],
    resource_version: &str,
    continue_token: Option<&str>,
    now: DateTime<Utc>,
) -> Value {
    let mut metadata = Map::new();
    if !resource_version.is_empty() {
        metadata.insert("resourceVersion".into(), resource_version.into());
    }
    if let Some(token) = continue_token.filter(|t| !t.is_empty()) {
        metadata.insert("continue".into(), token.into());
    }
    let column_definitions: Vec<Value> = columns(kind)
        .iter()
        .map(|c| {
            json!({
                "name": c.name,
                "type": c.type_,
                "format": c.format,
                "description": c.description,
                "priority": c.priority,
            })
        })
        .collect();
    let rows: Vec<Value> = objects
        .iter()
        .map(|obj| {
            let obj: &Value = obj.borrow();
            let mut r = json!({
                "cells": row(kind, obj, now),
                "object": {
                    "kind": "PartialObjectMetadata",
                    "apiVersion": "meta.k8s.io/v1",
                    "metadata": obj.get("metadata").cloned().unwrap_or_else(|| json!({})),
                },
            });
            if let Some(conditions) = row_conditions(kind, obj) {
                r["conditions"] = conditions;
            }
            r
        })
        .collect();
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": metadata,
        "columnDefinitions": column_definitions,
        "rows": rows,
    })
}

/// The same Table as [`table`], encoded straight to JSON: each row's object metadata is borrowed
/// from the object rather than copied into a new tree (what makes a 10,000-row LIST affordable).
pub fn table_json(
    kind: &str,
    objects: &[impl std::borrow::Borrow<Value>],
    resource_version: &str,
    continue_token: Option<&str>,
    now: DateTime<Utc>,
) -> Vec<u8> {
    #[derive(serde::Serialize)]
    struct PartialObject<'a> {
        kind: &'static str,
        #[serde(rename = "apiVersion")]
        api_version: &'static str,
        metadata: &'a Value,
    }
    #[derive(serde::Serialize)]
    struct Row<'a> {
        cells: Vec<Value>,
        object: PartialObject<'a>,
        #[serde(skip_serializing_if = "Option::is_none")]
        conditions: Option<Value>,
    }
    let empty = json!({});
    let rows: Vec<Row> = objects
        .iter()
        .map(|obj| {
            let obj: &Value = obj.borrow();
            Row {
                cells: row(kind, obj, now),
                object: PartialObject {
                    kind: "PartialObjectMetadata",
                    api_version: "meta.k8s.io/v1",
                    metadata: obj.get("metadata").unwrap_or(&empty),
                },
                conditions: row_conditions(kind, obj),
            }
        })
        .collect();
    // The envelope (metadata and columns) from `table` with no rows, then the rows spliced in.
    let mut out = serde_json::to_vec(&table(kind, &[] as &[Value], resource_version, continue_token, now)).unwrap_or_default();
    let tail = b"\"rows\":[]}";
    if out.ends_with(tail) {
        out.truncate(out.len() - tail.len());
        out.extend_from_slice(b"\"rows\":");
        let _ = serde_json::to_writer(&mut out, &rows);
        out.push(b'}');
    }
    out
}

/// Row conditions: printPod marks finished pods `Completed` (Kubernetes' `podSuccessConditions` and
/// `podFailedConditions`), which clients may use to tell finished rows apart.
fn row_conditions(kind: &str, obj: &Value) -> Option<Value> {
    if kind != "Pod" {
        return None;
    }
    let (reason, message) = match str_at(obj, &["status", "phase"]) {
        "Succeeded" => ("Succeeded", "The pod has completed successfully."),
        "Failed" => ("Failed", "The pod failed."),
        _ => return None,
    };
    Some(json!([{"type": "Completed", "status": "True", "reason": reason, "message": message}]))
}

/// Kubernetes' `duration.HumanDuration`: two significant units at most, and coarser as the
/// duration grows. A clock skew of up to a second reads as "0s"; more than that is "<invalid>".
pub fn human_duration(d: Duration) -> String {
    let seconds = d.num_seconds();
    if seconds < -1 {
        return "<invalid>".to_string();
    } else if seconds < 0 {
        return "0s".to_string();
    } else if seconds < 60 * 2 {
        return format!("{seconds}s");
    }
    let minutes = d.num_minutes();
    if minutes < 10 {
        let s = seconds % 60;
        if s == 0 {
            return format!("{minutes}m");
        }
        return format!("{minutes}m{s}s");
    } else if minutes < 60 * 3 {
        return format!("{minutes}m");
    }
    let hours = d.num_hours();
    if hours < 8 {
        let m = minutes % 60;
        if m == 0 {
            return format!("{hours}h");
        }
        return format!("{hours}h{m}m");
    } else if hours < 48 {
        return format!("{hours}h");
    } else if hours < 24 * 8 {
        let h = hours % 24;
        if h == 0 {
            return format!("{}d", hours / 24);
        }
        return format!("{}d{}h", hours / 24, h);
    } else if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    } else if hours < 24 * 365 * 8 {
        let dy = (hours / 24) % 365;
        if dy == 0 {
            return format!("{}y", hours / 24 / 365);
        }
        return format!("{}y{}d", hours / 24 / 365, dy);
    }
    format!("{}y", hours / 24 / 365)
}

// ---------------------------------------------------------------------------------------------
// Pod

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

// ---------------------------------------------------------------------------------------------
// Node

fn print_node(node: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let info = |field: &str| {
        let v = str_at(node, &["status", "nodeInfo", field]);
        if v.is_empty() {
            "<unknown>".to_string()
        } else {
            v.to_string()
        }
    };
    let roles = node_roles(node);
    vec![
        name(node).into(),
        node_status(node).into(),
        (if roles.is_empty() {
            "<none>".to_string()
        } else {
            roles.join(",")
        })
        .into(),
        age(node, now).into(),
        str_at(node, &["status", "nodeInfo", "kubeletVersion"]).into(),
        node_address(node, "InternalIP").into(),
        node_address(node, "ExternalIP").into(),
        info("osImage").into(),
        info("kernelVersion").into(),
        info("containerRuntimeVersion").into(),
    ]
}

/// "Ready" / "NotReady" from the Ready condition (any status but True is NotReady), "Unknown"
/// without one, then ",SchedulingDisabled" for a cordoned node.
fn node_status(node: &Value) -> String {
    // Kubernetes builds a map by condition type, so the last Ready condition wins.
    let ready = arr_at(node, &["status", "conditions"])
        .iter()
        .rev()
        .find(|c| str_at(c, &["type"]) == "Ready");
    let mut status = vec![match ready {
        Some(c) if str_at(c, &["status"]) == "True" => "Ready",
        Some(_) => "NotReady",
        None => "Unknown",
    }];
    if bool_at(node, &["spec", "unschedulable"]) {
        status.push("SchedulingDisabled");
    }
    status.join(",")
}

/// Roles from `node-role.kubernetes.io/<role>` keys and `kubernetes.io/role=<role>` values, sorted.
fn node_roles(node: &Value) -> Vec<String> {
    let mut roles = BTreeSet::new();
    if let Some(labels) = obj_at(node, &["metadata", "labels"]).and_then(Value::as_object) {
        for (key, value) in labels {
            if let Some(role) = key.strip_prefix(LABEL_NODE_ROLE_PREFIX) {
                if !role.is_empty() {
                    roles.insert(role.to_string());
                }
            } else if key == NODE_LABEL_ROLE
                && let Some(role) = value.as_str().filter(|r| !r.is_empty())
            {
                roles.insert(role.to_string());
            }
        }
    }
    roles.into_iter().collect()
}

fn node_address(node: &Value, address_type: &str) -> String {
    arr_at(node, &["status", "addresses"])
        .iter()
        .find(|a| str_at(a, &["type"]) == address_type)
        .map(|a| str_at(a, &["address"]).to_string())
        .unwrap_or_else(|| "<none>".to_string())
}

// ---------------------------------------------------------------------------------------------
// Event

fn print_event(event: &Value, now: DateTime<Utc>) -> Vec<Value> {
    // First seen: firstTimestamp, else the events.k8s.io eventTime. (Falling back further to the
    // creationTimestamp is ours: it keeps hand-made events from showing "<unknown>".)
    let first = time_at(event, &["firstTimestamp"])
        .or_else(|| time_at(event, &["eventTime"]))
        .or_else(|| time_at(event, &["metadata", "creationTimestamp"]));
    let mut last = time_at(event, &["lastTimestamp"]).or(first);
    let mut count = int_at(event, &["count"]);
    if obj_at(event, &["series"]).is_some() {
        last = time_at(event, &["series", "lastObservedTime"]);
        count = int_at(event, &["series", "count"]);
    } else if count == 0 {
        // Singleton events of the new API carry no count.
        count = 1;
    }
    let kind = str_at(event, &["involvedObject", "kind"]).to_lowercase();
    let involved_name = str_at(event, &["involvedObject", "name"]);
    let target = if involved_name.is_empty() {
        kind
    } else {
        format!("{kind}/{involved_name}")
    };
    let component = first_non_empty(
        str_at(event, &["source", "component"]),
        str_at(event, &["reportingComponent"]),
    );
    let instance = first_non_empty(
        str_at(event, &["source", "host"]),
        str_at(event, &["reportingInstance"]),
    );
    let source = if instance.is_empty() {
        component.to_string()
    } else {
        format!("{component}, {instance}")
    };
    vec![
        since(last, now).into(),
        str_at(event, &["type"]).into(),
        str_at(event, &["reason"]).into(),
        target.into(),
        str_at(event, &["involvedObject", "fieldPath"]).into(),
        source.into(),
        str_at(event, &["message"]).trim().into(),
        since(first, now).into(),
        count.into(),
        name(event).into(),
    ]
}

fn first_non_empty<'a>(a: &'a str, b: &'a str) -> &'a str {
    if a.is_empty() { b } else { a }
}

// ---------------------------------------------------------------------------------------------
// JSON access that treats anything missing or mistyped as Go's zero value.

fn get<'a>(v: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(v, |cur, key| cur.get(key))
}

fn str_at<'a>(v: &'a Value, path: &[&str]) -> &'a str {
    get(v, path).and_then(Value::as_str).unwrap_or("")
}

fn int_at(v: &Value, path: &[&str]) -> i64 {
    get(v, path).and_then(Value::as_i64).unwrap_or(0)
}

fn bool_at(v: &Value, path: &[&str]) -> bool {
    get(v, path).and_then(Value::as_bool).unwrap_or(false)
}

fn arr_at<'a>(v: &'a Value, path: &[&str]) -> &'a [Value] {
    get(v, path)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

/// A field that is present as an object (a Go pointer that is not nil).
fn obj_at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a Value> {
    get(v, path).filter(|x| x.is_object())
}

fn obj_present(v: &Value, path: &[&str]) -> bool {
    get(v, path).is_some_and(|x| !x.is_null())
}

fn len_at(v: &Value, path: &[&str]) -> i64 {
    match get(v, path) {
        Some(Value::Object(m)) => m.len() as i64,
        Some(Value::Array(a)) => a.len() as i64,
        _ => 0,
    }
}

fn time_at(v: &Value, path: &[&str]) -> Option<DateTime<Utc>> {
    let s = str_at(v, path);
    DateTime::parse_from_rfc3339(s)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

fn name(obj: &Value) -> &str {
    str_at(obj, &["metadata", "name"])
}

/// Kubernetes' `translateTimestampSince`.
fn since(t: Option<DateTime<Utc>>, now: DateTime<Utc>) -> String {
    match t {
        Some(t) => human_duration(now - t),
        None => "<unknown>".to_string(),
    }
}

fn age(obj: &Value, now: DateTime<Utc>) -> String {
    since(time_at(obj, &["metadata", "creationTimestamp"]), now)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_streamed_table_is_the_same_table() {
        let pods = vec![
            json!({"metadata": {"name": "a", "namespace": "default", "creationTimestamp": "2026-01-01T00:00:00Z"}, "status": {"phase": "Succeeded"}}),
            json!({"metadata": {"name": "b", "namespace": "default"}, "spec": {"nodeName": "n1"}}),
        ];
        for (kind, rv, cont) in [("Pod", "42", Some("tok")), ("ConfigMap", "", None)] {
            let streamed: Value = serde_json::from_slice(&table_json(kind, &pods, rv, cont, now())).unwrap();
            assert_eq!(streamed, table(kind, &pods, rv, cont, now()), "{kind}");
        }
    }

    fn now() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-01-01T12:00:00Z")
            .map(|t| t.with_timezone(&Utc))
            .expect("valid time")
    }

    /// An RFC 3339 timestamp `secs` seconds before [`now`].
    fn ago(secs: i64) -> String {
        (now() - Duration::seconds(secs)).to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
    }

    #[test]
    fn human_duration_table() {
        let cases: &[(i64, &str)] = &[
            (-5, "<invalid>"),
            (-2, "<invalid>"),
            (-1, "0s"),
            (0, "0s"),
            (5, "5s"),
            (119, "119s"),
            (120, "2m"),
            (182, "3m2s"),
            (599, "9m59s"),
            (600, "10m"),
            (179 * 60 + 59, "179m"),
            (3 * 3600, "3h"),
            (5 * 3600, "5h"),
            (5 * 3600 + 30 * 60, "5h30m"),
            (7 * 3600 + 59 * 60, "7h59m"),
            (8 * 3600, "8h"),
            (47 * 3600, "47h"),
            (48 * 3600, "2d"),
            (3 * 86400 + 4 * 3600, "3d4h"),
            (7 * 86400 + 23 * 3600, "7d23h"),
            (8 * 86400, "8d"),
            (729 * 86400, "729d"),
            (730 * 86400, "2y"),
            (731 * 86400, "2y1d"),
            (8 * 365 * 86400, "8y"),
            (20 * 365 * 86400 + 5 * 86400, "20y"),
        ];
        for (secs, want) in cases {
            assert_eq!(human_duration(Duration::seconds(*secs)), *want, "{secs}s");
        }
        // Fractions are truncated, as Go's int(d.Seconds()) does.
        assert_eq!(human_duration(Duration::milliseconds(-1500)), "0s");
        assert_eq!(human_duration(Duration::milliseconds(5999)), "5s");
    }

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
            let cells = row("Pod", &pod, now());
            assert_eq!(cells.len(), columns("Pod").len(), "{case}");
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
            row("Pod", &p, now()),
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
            row("Pod", &bare, now())[4..],
            [
                json!("<unknown>"),
                json!("<none>"),
                json!("<none>"),
                json!("<none>"),
                json!("<none>")
            ]
        );
    }

    fn node(labels: Value, ready: Option<&str>, unschedulable: bool) -> Value {
        let conditions = match ready {
            Some(s) => {
                json!([{"type": "MemoryPressure", "status": "False"}, {"type": "Ready", "status": s}])
            }
            None => json!([]),
        };
        json!({
            "metadata": {"name": "n1", "labels": labels, "creationTimestamp": ago(5 * 3600)},
            "spec": {"unschedulable": unschedulable},
            "status": {"conditions": conditions, "nodeInfo": {"kubeletVersion": "v1.37.0",
                "osImage": "Debian GNU/Linux 12", "kernelVersion": "6.1.0", "containerRuntimeVersion": "containerd://2.0.0"},
                "addresses": [{"type": "Hostname", "address": "n1"}, {"type": "InternalIP", "address": "10.0.0.1"}]},
        })
    }

    #[test]
    fn node_status_and_roles_table() {
        // (case, node, STATUS, ROLES)
        let cases = vec![
            (
                "ready",
                node(json!({}), Some("True"), false),
                "Ready",
                "<none>",
            ),
            (
                "not ready",
                node(json!({}), Some("False"), false),
                "NotReady",
                "<none>",
            ),
            (
                "ready unknown",
                node(json!({}), Some("Unknown"), false),
                "NotReady",
                "<none>",
            ),
            (
                "no ready condition",
                node(json!({}), None, false),
                "Unknown",
                "<none>",
            ),
            (
                "cordoned",
                node(json!({}), Some("True"), true),
                "Ready,SchedulingDisabled",
                "<none>",
            ),
            (
                "cordoned, no condition",
                node(json!({}), None, true),
                "Unknown,SchedulingDisabled",
                "<none>",
            ),
            (
                "control plane",
                node(
                    json!({"node-role.kubernetes.io/control-plane": ""}),
                    Some("True"),
                    false,
                ),
                "Ready",
                "control-plane",
            ),
            (
                "roles sorted and deduplicated",
                node(
                    json!({"node-role.kubernetes.io/worker": "", "node-role.kubernetes.io/control-plane": "",
                           "kubernetes.io/role": "worker", "node-role.kubernetes.io/": "x", "app": "y"}),
                    Some("True"),
                    false,
                ),
                "Ready",
                "control-plane,worker",
            ),
            (
                "legacy role label",
                node(json!({"kubernetes.io/role": "master"}), Some("True"), false),
                "Ready",
                "master",
            ),
            (
                "empty legacy role",
                node(json!({"kubernetes.io/role": ""}), Some("True"), false),
                "Ready",
                "<none>",
            ),
        ];
        for (case, n, status, roles) in cases {
            let cells = row("Node", &n, now());
            assert_eq!(cells[1], status, "{case}");
            assert_eq!(cells[2], roles, "{case}");
        }
    }

    #[test]
    fn node_cells_version_and_wide() {
        let n = node(json!({}), Some("True"), false);
        assert_eq!(
            row("Node", &n, now()),
            vec![
                json!("n1"),
                json!("Ready"),
                json!("<none>"),
                json!("5h"),
                json!("v1.37.0"),
                json!("10.0.0.1"),
                json!("<none>"),
                json!("Debian GNU/Linux 12"),
                json!("6.1.0"),
                json!("containerd://2.0.0")
            ]
        );
        let bare = json!({"metadata": {"name": "n2"}});
        assert_eq!(
            row("Node", &bare, now()),
            vec![
                json!("n2"),
                json!("Unknown"),
                json!("<none>"),
                json!("<unknown>"),
                json!(""),
                json!("<none>"),
                json!("<none>"),
                json!("<unknown>"),
                json!("<unknown>"),
                json!("<unknown>")
            ]
        );
    }

    #[test]
    fn event_cells_table() {
        let base = json!({
            "metadata": {"name": "web.123", "namespace": "default", "creationTimestamp": ago(900)},
            "involvedObject": {"kind": "Pod", "name": "web", "fieldPath": "spec.containers{app}"},
            "reason": "Pulled", "type": "Normal", "message": "  Pulled image  \n",
            "source": {"component": "kubelet", "host": "n1"},
        });
        let with = |patch: Value| {
            let mut e = base.clone();
            if let (Some(e), Some(p)) = (e.as_object_mut(), patch.as_object()) {
                for (k, v) in p {
                    e.insert(k.clone(), v.clone());
                }
            }
            e
        };
        // (case, event, LAST SEEN, FIRST SEEN, COUNT, OBJECT, SOURCE)
        let cases = vec![
            (
                "classic timestamps",
                with(json!({"firstTimestamp": ago(600), "lastTimestamp": ago(5), "count": 4})),
                "5s",
                "10m",
                4,
                "pod/web",
                "kubelet, n1",
            ),
            (
                "last falls back to first",
                with(json!({"firstTimestamp": ago(600)})),
                "10m",
                "10m",
                1,
                "pod/web",
                "kubelet, n1",
            ),
            (
                "eventTime only",
                with(
                    json!({"eventTime": "2026-01-01T11:59:30.123456Z", "source": {},
                    "reportingComponent": "kubelab-scheduler", "reportingInstance": "sched-1"}),
                ),
                "29s",
                "29s",
                1,
                "pod/web",
                "kubelab-scheduler, sched-1",
            ),
            (
                "creationTimestamp as last resort",
                base.clone(),
                "15m",
                "15m",
                1,
                "pod/web",
                "kubelet, n1",
            ),
            (
                "series overrides last seen and count",
                with(
                    json!({"eventTime": ago(3600), "series": {"count": 7, "lastObservedTime": ago(60)}}),
                ),
                "60s",
                "60m",
                7,
                "pod/web",
                "kubelet, n1",
            ),
            (
                "object without a name, source without host",
                with(
                    json!({"involvedObject": {"kind": "Node"}, "source": {"component": "kubelab"}, "lastTimestamp": ago(1)}),
                ),
                "1s",
                "15m",
                1,
                "node",
                "kubelab",
            ),
        ];
        for (case, e, last, first, count, object, source) in cases {
            let cells = row("Event", &e, now());
            assert_eq!(cells.len(), columns("Event").len(), "{case}");
            assert_eq!(cells[0], last, "{case}: LAST SEEN");
            assert_eq!(cells[3], object, "{case}: OBJECT");
            assert_eq!(cells[5], source, "{case}: SOURCE");
            assert_eq!(cells[7], first, "{case}: FIRST SEEN");
            assert_eq!(cells[8], count, "{case}: COUNT");
        }
        let cells = row("Event", &base, now());
        assert_eq!(cells[1], "Normal");
        assert_eq!(cells[2], "Pulled");
        assert_eq!(cells[4], "spec.containers{app}");
        assert_eq!(cells[6], "Pulled image");
        assert_eq!(cells[9], "web.123");
        let bare = json!({"metadata": {"name": "e"}});
        assert_eq!(row("Event", &bare, now())[0], "<unknown>");
    }

    #[test]
    fn small_kinds_table() {
        let meta = json!({"name": "x", "creationTimestamp": ago(10)});
        // (kind, object, cells)
        let cases = vec![
            (
                "Namespace",
                json!({"metadata": meta, "status": {"phase": "Active"}}),
                vec![json!("x"), json!("Active"), json!("10s")],
            ),
            (
                "Namespace",
                json!({"metadata": meta, "status": {"phase": "Terminating"}}),
                vec![json!("x"), json!("Terminating"), json!("10s")],
            ),
            (
                "ConfigMap",
                json!({"metadata": meta, "data": {"a": "1", "b": "2"}, "binaryData": {"c": "AA=="}}),
                vec![json!("x"), json!(3), json!("10s")],
            ),
            (
                "ConfigMap",
                json!({"metadata": meta}),
                vec![json!("x"), json!(0), json!("10s")],
            ),
            (
                "Secret",
                json!({"metadata": meta, "type": "Opaque", "data": {"a": "MQ==", "b": "Mg=="}, "stringData": {"b": "2", "c": "3"}}),
                vec![json!("x"), json!("Opaque"), json!(3), json!("10s")],
            ),
            (
                "Secret",
                json!({"metadata": meta, "type": "kubernetes.io/tls"}),
                vec![
                    json!("x"),
                    json!("kubernetes.io/tls"),
                    json!(0),
                    json!("10s"),
                ],
            ),
            (
                "ServiceAccount",
                json!({"metadata": meta, "secrets": [{"name": "s1"}, {"name": "s2"}]}),
                vec![json!("x"), json!(2), json!("10s")],
            ),
            (
                "ServiceAccount",
                json!({"metadata": meta}),
                vec![json!("x"), json!(0), json!("10s")],
            ),
            (
                "Lease",
                json!({"metadata": meta, "spec": {"holderIdentity": "n1"}}),
                vec![json!("x"), json!("n1"), json!("10s")],
            ),
            (
                "Lease",
                json!({"metadata": meta, "spec": {}}),
                vec![json!("x"), json!(""), json!("10s")],
            ),
            (
                "Deployment",
                json!({"metadata": meta}),
                vec![json!("x"), json!("10s")],
            ),
            (
                "Widget",
                json!({"metadata": {"name": "w"}}),
                vec![json!("w"), json!("<unknown>")],
            ),
            (
                "Widget",
                json!("not an object"),
                vec![json!(""), json!("<unknown>")],
            ),
        ];
        for (kind, obj, want) in cases {
            assert_eq!(row(kind, &obj, now()), want, "{kind} {obj}");
            assert_eq!(columns(kind).len(), want.len(), "{kind}");
        }
    }

    #[test]
    fn columns_match_kubernetes() {
        let names = |kind: &str| {
            columns(kind)
                .iter()
                .map(|c| (c.name, c.priority))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            names("Pod"),
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
        assert_eq!(
            names("Node"),
            vec![
                ("Name", 0),
                ("Status", 0),
                ("Roles", 0),
                ("Age", 0),
                ("Version", 0),
                ("Internal-IP", 1),
                ("External-IP", 1),
                ("OS-Image", 1),
                ("Kernel-Version", 1),
                ("Container-Runtime", 1)
            ]
        );
        assert_eq!(
            names("Event"),
            vec![
                ("Last Seen", 0),
                ("Type", 0),
                ("Reason", 0),
                ("Object", 0),
                ("Subobject", 1),
                ("Source", 1),
                ("Message", 0),
                ("First Seen", 1),
                ("Count", 1),
                ("Name", 1)
            ]
        );
        assert_eq!(
            names("Namespace"),
            vec![("Name", 0), ("Status", 0), ("Age", 0)]
        );
        assert_eq!(
            names("ConfigMap"),
            vec![("Name", 0), ("Data", 0), ("Age", 0)]
        );
        assert_eq!(
            names("Secret"),
            vec![("Name", 0), ("Type", 0), ("Data", 0), ("Age", 0)]
        );
        assert_eq!(
            names("ServiceAccount"),
            vec![("Name", 0), ("Secrets", 0), ("Age", 0)]
        );
        assert_eq!(names("Lease"), vec![("Name", 0), ("Holder", 0), ("Age", 0)]);
        assert_eq!(names("Anything"), vec![("Name", 0), ("Age", 0)]);
        // Exactly one column carries the "name" format, in every kind.
        for kind in [
            "Pod",
            "Node",
            "Event",
            "Namespace",
            "ConfigMap",
            "Secret",
            "ServiceAccount",
            "Lease",
            "X",
        ] {
            let formats: Vec<_> = columns(kind)
                .iter()
                .filter(|c| c.format == "name")
                .map(|c| c.name)
                .collect();
            assert_eq!(formats, vec!["Name"], "{kind}");
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
        let t = table("Pod", &pods, "104", Some("tok"), now());
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

        let empty = table("Node", &[] as &[Value], "", None, now());
        assert_eq!(empty["metadata"], json!({}));
        assert_eq!(empty["rows"], json!([]));
        let no_continue = table("Node", &[] as &[Value], "7", Some(""), now());
        assert_eq!(no_continue["metadata"], json!({"resourceVersion": "7"}));
        let no_meta = table("Widget", &[json!({})], "1", None, now());
        assert_eq!(no_meta["rows"][0]["object"]["metadata"], json!({}));
    }
}
