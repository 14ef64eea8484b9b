//! Mirrors printNode in pkg/printers/internalversion/printers.go: NAME, STATUS, ROLES, AGE,
//! VERSION (and, wide, the addresses and what the node reports of its OS and runtime).

use std::collections::BTreeSet;

use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::printers::fields::{age, arr_at, bool_at, name, obj_at, str_at};
use crate::printers::tablegenerator::{Column, Printer, age_col, col, name_col};

/// Label prefix whose suffix names a node role: `node-role.kubernetes.io/control-plane`.
const LABEL_NODE_ROLE_PREFIX: &str = "node-role.kubernetes.io/";
/// The older role label, whose value names the role.
const NODE_LABEL_ROLE: &str = "kubernetes.io/role";

pub struct NodePrinter;

impl Printer for NodePrinter {
    fn columns(&self) -> Vec<Column> {
        vec![
            name_col(),
            col("Status", "string", "The status of the node", 0),
            col("Roles", "string", "The roles of the node", 0),
            age_col(),
            col("Version", "string", "Kubelet Version reported by the node.", 0),
            col("Internal-IP", "string", "The node's first InternalIP address.", 1),
            col("External-IP", "string", "The node's first ExternalIP address.", 1),
            col("OS-Image", "string", "OS Image reported by the node.", 1),
            col("Kernel-Version", "string", "Kernel Version reported by the node.", 1),
            col("Container-Runtime", "string", "ContainerRuntime Version reported by the node.", 1),
        ]
    }

    fn row(&self, obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
        print_node(obj, now)
    }
}

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


#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::printers::tablegenerator::testing::{ago, column_names, name_columns, now};

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
            let cells = NodePrinter.row(&n, now());
            assert_eq!(cells[1], status, "{case}");
            assert_eq!(cells[2], roles, "{case}");
        }
    }

    #[test]
    fn node_cells_version_and_wide() {
        let n = node(json!({}), Some("True"), false);
        assert_eq!(
            NodePrinter.row(&n, now()),
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
            NodePrinter.row(&bare, now()),
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
    fn columns_match_kubernetes() {
        assert_eq!(
            column_names(&NodePrinter),
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
        assert_eq!(name_columns(&NodePrinter), vec!["Name"]);
    }
}
