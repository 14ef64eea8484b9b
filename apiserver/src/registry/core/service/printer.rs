//! Mirrors printService in pkg/printers/internalversion/printers.go: NAME, TYPE, CLUSTER-IP,
//! EXTERNAL-IP, PORT(S), AGE (and, wide, SELECTOR).

use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::printers::fields::{age, arr_at, name, obj_at, str_at};
use crate::printers::tablegenerator::{Column, Printer, age_col, col, name_col};

pub struct ServicePrinter;

impl Printer for ServicePrinter {
    fn columns(&self) -> Vec<Column> {
        vec![
            name_col(),
            col("Type", "string", "type determines how the Service is exposed.", 0),
            col("Cluster-IP", "string", "clusterIP is the IP address of the service and is usually assigned randomly.", 0),
            col("External-IP", "string", "externalIPs is a list of IP addresses for which nodes in the cluster will also accept traffic for this service.", 0),
            col("Port(s)", "string", "The list of ports that are exposed by this service.", 0),
            age_col(),
            col("Selector", "string", "Route service traffic to pods with label keys and values matching this selector.", 1),
        ]
    }

    fn row(&self, obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
        let type_ = str_at(obj, &["spec", "type"]);
        let cluster_ip = match str_at(obj, &["spec", "clusterIP"]) {
            "" => "<none>",
            ip => ip,
        };
        vec![
            name(obj).into(),
            type_.into(),
            cluster_ip.into(),
            external_ip(obj, type_).into(),
            ports(obj).into(),
            age(obj, now).into(),
            selector(obj).into(),
        ]
    }
}

/// getServiceExternalIP.
fn external_ip(obj: &Value, type_: &str) -> String {
    let external_ips: Vec<&str> = arr_at(obj, &["spec", "externalIPs"]).iter().filter_map(Value::as_str).collect();
    let joined = |ips: &[&str]| if ips.is_empty() { "<none>".to_string() } else { ips.join(",") };
    match type_ {
        "ClusterIP" | "NodePort" => joined(&external_ips),
        "LoadBalancer" => {
            let mut ips: Vec<&str> = arr_at(obj, &["status", "loadBalancer", "ingress"])
                .iter()
                .filter_map(|i| i.get("ip").and_then(Value::as_str).filter(|s| !s.is_empty()).or_else(|| i.get("hostname").and_then(Value::as_str)))
                .collect();
            ips.extend(external_ips);
            if ips.is_empty() { "<pending>".to_string() } else { ips.join(",") }
        }
        "ExternalName" => str_at(obj, &["spec", "externalName"]).to_string(),
        _ => "<unknown>".to_string(),
    }
}

/// makePortString: `80/TCP`, `80:30080/TCP`, joined by commas.
fn ports(obj: &Value) -> String {
    let ports = arr_at(obj, &["spec", "ports"]);
    if ports.is_empty() {
        return "<none>".into();
    }
    ports
        .iter()
        .map(|p| {
            let port = p.get("port").and_then(Value::as_i64).unwrap_or(0);
            let proto = p.get("protocol").and_then(Value::as_str).unwrap_or("TCP");
            match p.get("nodePort").and_then(Value::as_i64).filter(|n| *n > 0) {
                Some(n) => format!("{port}:{n}/{proto}"),
                None => format!("{port}/{proto}"),
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// labels.FormatLabels of the selector: `a=b,c=d`, or `<none>`.
fn selector(obj: &Value) -> String {
    match obj_at(obj, &["spec", "selector"]).and_then(Value::as_object) {
        Some(m) if !m.is_empty() => m.iter().map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or(""))).collect::<Vec<_>>().join(","),
        _ => "<none>".into(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::ServicePrinter;
    use crate::printers::tablegenerator::testing::{assert_printer, object};

    #[test]
    fn service_cells() {
        let cases = [
            (
                object(json!({"spec": {"type": "ClusterIP", "clusterIP": "10.96.0.10", "ports": [{"port": 53, "protocol": "UDP"}, {"port": 53, "protocol": "TCP"}], "selector": {"k8s-app": "kube-dns"}}})),
                vec![json!("x"), json!("ClusterIP"), json!("10.96.0.10"), json!("<none>"), json!("53/UDP,53/TCP"), json!("10s"), json!("k8s-app=kube-dns")],
            ),
            (
                object(json!({"spec": {"type": "NodePort", "clusterIP": "10.96.3.4", "ports": [{"port": 80, "protocol": "TCP", "nodePort": 30080}]}})),
                vec![json!("x"), json!("NodePort"), json!("10.96.3.4"), json!("<none>"), json!("80:30080/TCP"), json!("10s"), json!("<none>")],
            ),
            (
                object(json!({"spec": {"type": "LoadBalancer", "clusterIP": "10.96.3.5", "ports": [{"port": 443, "protocol": "TCP", "nodePort": 31443}]}})),
                vec![json!("x"), json!("LoadBalancer"), json!("10.96.3.5"), json!("<pending>"), json!("443:31443/TCP"), json!("10s"), json!("<none>")],
            ),
            (
                object(json!({"spec": {"type": "ExternalName", "externalName": "db.example.com"}})),
                vec![json!("x"), json!("ExternalName"), json!("<none>"), json!("db.example.com"), json!("<none>"), json!("10s"), json!("<none>")],
            ),
            (
                object(json!({"spec": {"type": "ClusterIP", "clusterIP": "None", "ports": [{"port": 80, "protocol": "TCP"}]}})),
                vec![json!("x"), json!("ClusterIP"), json!("None"), json!("<none>"), json!("80/TCP"), json!("10s"), json!("<none>")],
            ),
        ];
        assert_printer(&ServicePrinter, &cases, &[("Name", 0), ("Type", 0), ("Cluster-IP", 0), ("External-IP", 0), ("Port(s)", 0), ("Age", 0), ("Selector", 1)]);
    }
}
