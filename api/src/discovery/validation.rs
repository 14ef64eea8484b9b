//! Mirrors pkg/apis/discovery/validation/validation.go: ValidateEndpointSlice and
//! ValidateEndpointSliceUpdate.

use apimachinery::validation::{FieldError, is_dns1123_label, is_dns1123_subdomain, is_valid_port_num, validate_labels};
use serde_json::{Value, json};

use crate::core::validation::{validate_endpoint_ip, validate_object_meta};

const ADDRESS_TYPES: &[&str] = &["FQDN", "IPv4", "IPv6"];
const PROTOCOLS: &[&str] = &["SCTP", "TCP", "UDP"];
/// maxEndpoints, maxAddresses and maxPorts of the validation.
const MAX_ENDPOINTS: usize = 1000;
const MAX_ADDRESSES: usize = 100;
const MAX_PORTS: usize = 20000;

/// ValidateEndpointSlice: metadata, a supported address type, each endpoint's addresses (of that
/// type), hostname and nodeName, and the ports (names unique DNS-1123 labels, numbers, protocols).
pub fn validate_endpoint_slice(obj: &Value) -> Vec<FieldError> {
    let mut errs = validate_object_meta(obj, true, is_dns1123_subdomain);
    let address_type = obj.get("addressType").and_then(Value::as_str).unwrap_or("");
    if address_type.is_empty() {
        errs.push(FieldError::required("addressType", ""));
    } else if !ADDRESS_TYPES.contains(&address_type) {
        errs.push(FieldError::not_supported("addressType", &json!(address_type), ADDRESS_TYPES));
    }
    let endpoints = obj.get("endpoints").and_then(Value::as_array).cloned().unwrap_or_default();
    if endpoints.len() > MAX_ENDPOINTS {
        errs.push(FieldError::too_many("endpoints", endpoints.len(), MAX_ENDPOINTS));
    }
    for (i, ep) in endpoints.iter().enumerate() {
        let path = format!("endpoints[{i}]");
        let addresses: Vec<&Value> = ep.get("addresses").and_then(Value::as_array).into_iter().flatten().collect();
        if addresses.is_empty() {
            errs.push(FieldError::required(&format!("{path}.addresses"), "must contain at least 1 address"));
        } else if addresses.len() > MAX_ADDRESSES {
            errs.push(FieldError::too_many(&format!("{path}.addresses"), addresses.len(), MAX_ADDRESSES));
        }
        for (j, a) in addresses.iter().enumerate() {
            let apath = format!("{path}.addresses[{j}]");
            let s = a.as_str().unwrap_or("");
            match address_type {
                "IPv4" | "IPv6" => {
                    let family_ok = match s.parse::<std::net::IpAddr>() {
                        Ok(std::net::IpAddr::V4(_)) => address_type == "IPv4",
                        Ok(std::net::IpAddr::V6(_)) => address_type == "IPv6",
                        Err(_) => true, // validate_endpoint_ip says it
                    };
                    errs.extend(validate_endpoint_ip(s, &apath));
                    if !family_ok {
                        errs.push(FieldError::invalid(&apath, a, &format!("must be an {address_type} address")));
                    }
                }
                "FQDN" => errs.extend(is_dns1123_subdomain(s).into_iter().map(|m| FieldError::invalid(&apath, a, &m))),
                _ => {}
            }
        }
        if let Some(h) = ep.get("hostname").and_then(Value::as_str) {
            errs.extend(is_dns1123_label(h).into_iter().map(|m| FieldError::invalid(&format!("{path}.hostname"), &json!(h), &m)));
        }
        if let Some(n) = ep.get("nodeName").and_then(Value::as_str) {
            errs.extend(is_dns1123_subdomain(n).into_iter().map(|m| FieldError::invalid(&format!("{path}.nodeName"), &json!(n), &m)));
        }
        if let Some(topology) = ep.get("deprecatedTopology") {
            errs.extend(validate_labels(Some(topology), &format!("{path}.deprecatedTopology")));
        }
    }
    let ports = obj.get("ports").and_then(Value::as_array).cloned().unwrap_or_default();
    if ports.len() > MAX_PORTS {
        errs.push(FieldError::too_many("ports", ports.len(), MAX_PORTS));
    }
    let mut names = std::collections::HashSet::new();
    for (i, port) in ports.iter().enumerate() {
        let path = format!("ports[{i}]");
        let name = port.get("name").and_then(Value::as_str).unwrap_or("");
        if !name.is_empty() {
            errs.extend(is_dns1123_label(name).into_iter().map(|m| FieldError::invalid(&format!("{path}.name"), &json!(name), &m)));
        }
        if !names.insert(name.to_string()) {
            errs.push(FieldError::duplicate(&format!("{path}.name"), &json!(name)));
        }
        let protocol = port.get("protocol").and_then(Value::as_str).unwrap_or("");
        if !PROTOCOLS.contains(&protocol) {
            errs.push(FieldError::not_supported(&format!("{path}.protocol"), &json!(protocol), PROTOCOLS));
        }
        if let Some(n) = port.get("port").and_then(Value::as_i64) {
            errs.extend(is_valid_port_num(n).into_iter().map(|m| FieldError::invalid(&format!("{path}.port"), &json!(n), &m)));
        }
    }
    errs
}

/// ValidateEndpointSliceUpdate: the new slice is valid, and its address type has not changed.
pub fn validate_endpoint_slice_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let mut errs = validate_endpoint_slice(new);
    if new.get("addressType") != old.get("addressType") {
        errs.push(FieldError::invalid("addressType", new.get("addressType").unwrap_or(&Value::Null), "field is immutable"));
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reasons(obj: &Value) -> Vec<String> {
        validate_endpoint_slice(obj).iter().map(|e| format!("{}:{}", e.field, e.reason.reason_str())).collect()
    }

    #[test]
    fn a_slice_as_the_controller_writes_it_is_valid() {
        let slice = json!({
            "metadata": {"name": "web-abcde", "namespace": "default"}, "addressType": "IPv4",
            "endpoints": [{"addresses": ["10.244.0.5"], "conditions": {"ready": true}, "nodeName": "node1"}],
            "ports": [{"name": "", "port": 8080, "protocol": "TCP"}],
        });
        assert!(reasons(&slice).is_empty(), "{:?}", reasons(&slice));
    }

    #[test]
    fn what_kubernetes_refuses_in_a_slice() {
        let slice = json!({
            "metadata": {"name": "web-abcde", "namespace": "default"}, "addressType": "IPv4",
            "endpoints": [{"addresses": ["fd00::1"]}, {"addresses": []}],
            "ports": [{"name": "http", "port": 80, "protocol": "TCP"}, {"name": "http", "port": 81, "protocol": "ICMP"}],
        });
        assert_eq!(
            reasons(&slice),
            ["endpoints[0].addresses[0]:FieldValueInvalid", "endpoints[1].addresses:FieldValueRequired", "ports[1].name:FieldValueDuplicate", "ports[1].protocol:FieldValueNotSupported"]
        );
        assert_eq!(reasons(&json!({"metadata": {"name": "x", "namespace": "d"}})), ["addressType:FieldValueRequired"]);
    }
}
