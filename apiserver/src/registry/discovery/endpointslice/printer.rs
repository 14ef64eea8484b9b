//! Mirrors printEndpointSlice in pkg/printers/internalversion/printers.go: NAME, ADDRESSTYPE,
//! PORTS, ENDPOINTS, AGE.

use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::printers::fields::{age, arr_at, name, str_at};
use crate::printers::tablegenerator::{Column, Printer, age_col, col, name_col};

/// How many ports or addresses a cell shows before "+ N more...".
const MAX_SHOWN: usize = 3;

pub struct EndpointSlicePrinter;

impl Printer for EndpointSlicePrinter {
    fn columns(&self) -> Vec<Column> {
        vec![
            name_col(),
            col("AddressType", "string", "The type of addresses contained in the EndpointSlice.", 0),
            col("Ports", "string", "The ports contained in the EndpointSlice.", 0),
            col("Endpoints", "string", "The endpoints contained in the EndpointSlice.", 0),
            age_col(),
        ]
    }

    fn row(&self, obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
        vec![name(obj).into(), str_at(obj, &["addressType"]).into(), ports(obj).into(), endpoints(obj).into(), age(obj, now).into()]
    }
}

fn shortened(items: Vec<String>, none: &str) -> String {
    if items.is_empty() {
        return none.into();
    }
    let mut s = items.iter().take(MAX_SHOWN).cloned().collect::<Vec<_>>().join(",");
    if items.len() > MAX_SHOWN {
        s.push_str(&format!(" + {} more...", items.len() - MAX_SHOWN));
    }
    s
}

/// formatDiscoveryPorts: the port numbers, "<unset>" for a port that has none (all ports).
fn ports(obj: &Value) -> String {
    let ports = arr_at(obj, &["ports"]);
    let items = ports.iter().map(|p| p.get("port").and_then(Value::as_i64).map_or("<unset>".to_string(), |n| n.to_string())).collect();
    shortened(items, "<unset>")
}

/// formatDiscoveryEndpoints: every address of every endpoint.
fn endpoints(obj: &Value) -> String {
    let items = arr_at(obj, &["endpoints"])
        .iter()
        .flat_map(|e| e.get("addresses").and_then(Value::as_array).cloned().unwrap_or_default())
        .filter_map(|a| a.as_str().map(str::to_string))
        .collect();
    shortened(items, "<unset>")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::EndpointSlicePrinter;
    use crate::printers::tablegenerator::testing::{assert_printer, object};

    #[test]
    fn endpointslice_cells() {
        let cases = [
            (
                object(json!({"addressType": "IPv4", "ports": [{"port": 80}], "endpoints": [{"addresses": ["10.244.0.5"]}, {"addresses": ["10.244.0.6"]}, {"addresses": ["10.244.1.5"]}, {"addresses": ["10.244.1.6"]}]})),
                vec![json!("x"), json!("IPv4"), json!("80"), json!("10.244.0.5,10.244.0.6,10.244.1.5 + 1 more..."), json!("10s")],
            ),
            (object(json!({"addressType": "IPv4"})), vec![json!("x"), json!("IPv4"), json!("<unset>"), json!("<unset>"), json!("10s")]),
        ];
        assert_printer(&EndpointSlicePrinter, &cases, &[("Name", 0), ("AddressType", 0), ("Ports", 0), ("Endpoints", 0), ("Age", 0)]);
    }
}
