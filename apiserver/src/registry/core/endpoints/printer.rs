//! Mirrors printEndpoints in pkg/printers/internalversion/printers.go: NAME, ENDPOINTS, AGE —
//! the ready addresses with their ports, at most three shown (`formatEndpoints`).

use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::printers::fields::{age, arr_at, name};
use crate::printers::tablegenerator::{Column, Printer, age_col, col, name_col};

/// How many address:port pairs the cell shows before "+ N more...".
const MAX_SHOWN: usize = 3;

pub struct EndpointsPrinter;

impl Printer for EndpointsPrinter {
    fn columns(&self) -> Vec<Column> {
        vec![name_col(), col("Endpoints", "string", "Endpoints of the service", 0), age_col()]
    }

    fn row(&self, obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
        vec![name(obj).into(), format_endpoints(obj).into(), age(obj, now).into()]
    }
}

/// formatEndpoints: `ip:port` for each ready address and port (`ip` alone when the subset has no
/// ports), the first three, then "+ N more...".
fn format_endpoints(obj: &Value) -> String {
    let mut shown = Vec::new();
    let mut total = 0;
    for subset in arr_at(obj, &["subsets"]) {
        let addresses = subset.get("addresses").and_then(Value::as_array).cloned().unwrap_or_default();
        let ports = subset.get("ports").and_then(Value::as_array).cloned().unwrap_or_default();
        for addr in &addresses {
            let ip = addr.get("ip").and_then(Value::as_str).unwrap_or("");
            if ports.is_empty() {
                total += 1;
                if shown.len() < MAX_SHOWN {
                    shown.push(ip.to_string());
                }
            }
            for port in &ports {
                total += 1;
                if shown.len() < MAX_SHOWN {
                    shown.push(format!("{ip}:{}", port.get("port").and_then(Value::as_i64).unwrap_or(0)));
                }
            }
        }
    }
    if shown.is_empty() {
        return "<none>".into();
    }
    let mut s = shown.join(",");
    if total > shown.len() {
        s.push_str(&format!(" + {} more...", total - shown.len()));
    }
    s
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::EndpointsPrinter;
    use crate::printers::tablegenerator::testing::{assert_printer, object};

    #[test]
    fn endpoints_cells() {
        let cases = [
            (
                object(json!({"subsets": [{"addresses": [{"ip": "10.244.0.5"}, {"ip": "10.244.1.5"}], "notReadyAddresses": [{"ip": "10.244.2.5"}], "ports": [{"port": 80}, {"port": 443}]}]})),
                vec![json!("x"), json!("10.244.0.5:80,10.244.0.5:443,10.244.1.5:80 + 1 more..."), json!("10s")],
            ),
            (object(json!({"subsets": [{"notReadyAddresses": [{"ip": "10.244.2.5"}], "ports": [{"port": 80}]}]})), vec![json!("x"), json!("<none>"), json!("10s")]),
            (object(json!({})), vec![json!("x"), json!("<none>"), json!("10s")]),
        ];
        assert_printer(&EndpointsPrinter, &cases, &[("Name", 0), ("Endpoints", 0), ("Age", 0)]);
    }
}
