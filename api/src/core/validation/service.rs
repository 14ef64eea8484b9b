//! Mirrors the service and endpoints parts of pkg/apis/core/validation/validation.go:
//! ValidateService, ValidateServiceCreate, ValidateServiceUpdate and ValidateEndpoints.
//!
//! A Service is checked as the user wrote it, defaulted: the cluster IP may still be empty (the
//! API server's allocator fills it after validation), and the node ports may be 0 (the same).
//! What the allocator refuses — an address outside the range, a port already taken — is the
//! allocator's error, not validation's.

use std::collections::HashSet;

use apimachinery::validation::{FieldError, is_dns1035_label, is_dns1123_label, is_dns1123_subdomain, is_valid_ip, is_valid_port_name, is_valid_port_num, validate_labels};
use serde_json::{Value, json};

use super::validate_object_meta;

const SERVICE_TYPES: &[&str] = &["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"];
const PROTOCOLS: &[&str] = &["SCTP", "TCP", "UDP"];
const TRAFFIC_POLICIES: &[&str] = &["Cluster", "Local"];
/// A ClientIP affinity lasts at most a day.
const MAX_CLIENT_IP_SERVICE_AFFINITY_SECONDS: i64 = 86400;

fn spec_str<'a>(obj: &'a Value, field: &str) -> &'a str {
    obj.pointer(&format!("/spec/{field}")).and_then(Value::as_str).unwrap_or("")
}

/// ValidateService: metadata (a DNS-1035 name), the type, the ports, the cluster IPs as far as
/// they are given, the selector, affinity and traffic policies.
pub fn validate_service(obj: &Value) -> Vec<FieldError> {
    let mut errs = validate_object_meta(obj, true, is_dns1035_label);
    let type_ = spec_str(obj, "type");
    if !SERVICE_TYPES.contains(&type_) {
        errs.push(FieldError::not_supported("spec.type", &json!(type_), SERVICE_TYPES));
    }
    let cluster_ip = spec_str(obj, "clusterIP");
    let headless = cluster_ip == "None";
    let ports = obj.pointer("/spec/ports").and_then(Value::as_array).cloned().unwrap_or_default();
    if type_ == "ExternalName" {
        let name = spec_str(obj, "externalName").trim_end_matches('.');
        if name.is_empty() {
            errs.push(FieldError::required("spec.externalName", ""));
        } else {
            for msg in is_dns1123_subdomain(name) {
                errs.push(FieldError::invalid("spec.externalName", &json!(spec_str(obj, "externalName")), &msg));
            }
        }
        if !cluster_ip.is_empty() {
            errs.push(FieldError::forbidden("spec.clusterIPs", "may not be set for ExternalName services"));
        }
    } else if ports.is_empty() && !headless {
        errs.push(FieldError::required("spec.ports", ""));
    }
    if (type_ == "NodePort" || type_ == "LoadBalancer") && headless {
        errs.push(FieldError::invalid("spec.clusterIPs[0]", &json!("None"), &format!("may not be set to 'None' for {type_} services")));
    }
    errs.extend(validate_cluster_ips(obj));
    let mut names = HashSet::new();
    let mut seen = HashSet::new();
    let need_names = ports.len() > 1;
    for (i, port) in ports.iter().enumerate() {
        let path = format!("spec.ports[{i}]");
        errs.extend(validate_service_port(port, need_names, &mut names, &path));
        let key = (port.get("port").and_then(Value::as_i64), port.get("protocol").and_then(Value::as_str).unwrap_or("TCP").to_string());
        if !seen.insert(key) {
            errs.push(FieldError::duplicate(&path, port));
        }
        let node_port = port.get("nodePort").and_then(Value::as_i64).unwrap_or(0);
        if node_port != 0 {
            if type_ != "NodePort" && type_ != "LoadBalancer" {
                errs.push(FieldError::forbidden(&format!("{path}.nodePort"), &format!("may not be used when `type` is '{type_}'")));
            } else {
                for msg in is_valid_port_num(node_port) {
                    errs.push(FieldError::invalid(&format!("{path}.nodePort"), &json!(node_port), &msg));
                }
            }
        }
    }
    // Two ports of one protocol may not share a node port.
    let mut node_ports = HashSet::new();
    for (i, port) in ports.iter().enumerate() {
        let n = port.get("nodePort").and_then(Value::as_i64).unwrap_or(0);
        let proto = port.get("protocol").and_then(Value::as_str).unwrap_or("TCP");
        if n != 0 && !node_ports.insert((n, proto)) {
            errs.push(FieldError::duplicate(&format!("spec.ports[{i}].nodePort"), &json!(n)));
        }
    }
    if let Some(selector) = obj.pointer("/spec/selector") {
        errs.extend(validate_labels(Some(selector), "spec.selector"));
    }
    let affinity = spec_str(obj, "sessionAffinity");
    match affinity {
        "None" | "" => {
            if obj.pointer("/spec/sessionAffinityConfig").is_some_and(|c| !c.is_null()) {
                errs.push(FieldError::forbidden("spec.sessionAffinityConfig", "must not be set when session affinity is None"));
            }
        }
        "ClientIP" => {
            let t = obj.pointer("/spec/sessionAffinityConfig/clientIP/timeoutSeconds").and_then(Value::as_i64).unwrap_or(0);
            if t <= 0 || t > MAX_CLIENT_IP_SERVICE_AFFINITY_SECONDS {
                errs.push(FieldError::invalid(
                    "spec.sessionAffinityConfig.clientIP.timeoutSeconds",
                    &json!(t),
                    &format!("must be greater than 0 and less than {MAX_CLIENT_IP_SERVICE_AFFINITY_SECONDS}"),
                ));
            }
        }
        other => errs.push(FieldError::not_supported("spec.sessionAffinity", &json!(other), &["ClientIP", "None"])),
    }
    let external = spec_str(obj, "externalTrafficPolicy");
    if type_ == "NodePort" || type_ == "LoadBalancer" {
        if !TRAFFIC_POLICIES.contains(&external) {
            errs.push(FieldError::not_supported("spec.externalTrafficPolicy", &json!(external), TRAFFIC_POLICIES));
        }
    } else if !external.is_empty() {
        errs.push(FieldError::invalid("spec.externalTrafficPolicy", &json!(external), "may only be set for services with type NodePort or LoadBalancer"));
    }
    if let Some(internal) = obj.pointer("/spec/internalTrafficPolicy").and_then(Value::as_str)
        && !TRAFFIC_POLICIES.contains(&internal)
    {
        errs.push(FieldError::not_supported("spec.internalTrafficPolicy", &json!(internal), TRAFFIC_POLICIES));
    }
    for (i, ip) in obj.pointer("/spec/externalIPs").and_then(Value::as_array).into_iter().flatten().enumerate() {
        let s = ip.as_str().unwrap_or("");
        for msg in is_valid_ip(s) {
            errs.push(FieldError::invalid(&format!("spec.externalIPs[{i}]"), ip, &msg));
        }
    }
    errs
}

/// The cluster IPs as given: `clusterIP` a valid address, "None" or empty; `clusterIPs`, when
/// given, starting with it.
fn validate_cluster_ips(obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let cluster_ip = spec_str(obj, "clusterIP");
    let ips: Vec<&str> = obj.pointer("/spec/clusterIPs").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
    if let Some(first) = ips.first()
        && !cluster_ip.is_empty()
        && *first != cluster_ip
    {
        errs.push(FieldError::invalid("spec.clusterIPs", &json!(ips), "element [0] must match clusterIP"));
    }
    for (i, ip) in ips.iter().enumerate() {
        if *ip == "None" {
            if i > 0 || ips.len() > 1 {
                errs.push(FieldError::invalid(&format!("spec.clusterIPs[{i}]"), &json!(ip), "'None' may only be set on a single-element list"));
            }
            continue;
        }
        for msg in is_valid_ip(ip) {
            errs.push(FieldError::invalid(&format!("spec.clusterIPs[{i}]"), &json!(ip), &msg));
        }
    }
    if ips.is_empty() && !cluster_ip.is_empty() && cluster_ip != "None" {
        for msg in is_valid_ip(cluster_ip) {
            errs.push(FieldError::invalid("spec.clusterIPs[0]", &json!(cluster_ip), &msg));
        }
    }
    if ips.len() > 2 {
        errs.push(FieldError::invalid("spec.clusterIPs", &json!(ips), "may only hold up to 2 values"));
    }
    errs
}

/// validateServicePort: a name (required when there are several, a DNS-1123 label, unique), a
/// port number, a protocol, and a targetPort by number or by an IANA service name.
fn validate_service_port(port: &Value, need_name: bool, names: &mut HashSet<String>, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let name = port.get("name").and_then(Value::as_str).unwrap_or("");
    if name.is_empty() {
        if need_name {
            errs.push(FieldError::required(&format!("{path}.name"), ""));
        }
    } else {
        for msg in is_dns1123_label(name) {
            errs.push(FieldError::invalid(&format!("{path}.name"), &json!(name), &msg));
        }
        if !names.insert(name.to_string()) {
            errs.push(FieldError::duplicate(&format!("{path}.name"), &json!(name)));
        }
    }
    match port.get("port").and_then(Value::as_i64) {
        Some(n) => {
            for msg in is_valid_port_num(n) {
                errs.push(FieldError::invalid(&format!("{path}.port"), &json!(n), &msg));
            }
        }
        None => errs.push(FieldError::required(&format!("{path}.port"), "")),
    }
    let protocol = port.get("protocol").and_then(Value::as_str).unwrap_or("");
    if !PROTOCOLS.contains(&protocol) {
        errs.push(FieldError::not_supported(&format!("{path}.protocol"), &json!(protocol), PROTOCOLS));
    }
    match port.get("targetPort") {
        Some(Value::Number(n)) => {
            for msg in is_valid_port_num(n.as_i64().unwrap_or(0)) {
                errs.push(FieldError::invalid(&format!("{path}.targetPort"), &json!(n), &msg));
            }
        }
        Some(Value::String(s)) => {
            for msg in is_valid_port_name(s) {
                errs.push(FieldError::invalid(&format!("{path}.targetPort"), &json!(s), &msg));
            }
        }
        _ => {}
    }
    errs
}

/// ValidateServiceCreate: ValidateService (the create-only checks of Kubernetes concern dual
/// stack, which kubelab does not allocate).
pub fn validate_service_create(obj: &Value) -> Vec<FieldError> {
    validate_service(obj)
}

/// ValidateServiceUpdate: the new Service is valid, and its cluster IPs, once allocated, stay —
/// unless the Service becomes, or stops being, an ExternalName one (which holds none).
pub fn validate_service_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let mut errs = validate_service(new);
    let (new_type, old_type) = (spec_str(new, "type"), spec_str(old, "type"));
    if new_type != "ExternalName" && old_type != "ExternalName" {
        let old_ips = old.pointer("/spec/clusterIPs").cloned().unwrap_or(Value::Null);
        let new_ips = new.pointer("/spec/clusterIPs").cloned().unwrap_or(Value::Null);
        let old_first = spec_str(old, "clusterIP");
        let new_first = spec_str(new, "clusterIP");
        if !old_first.is_empty() && (old_first != new_first || (!new_ips.is_null() && old_ips != new_ips)) {
            errs.push(FieldError::invalid("spec.clusterIPs[0]", &json!(new_first), "may not change once set"));
        }
    }
    errs
}

/// ValidateEndpoints (ValidateEndpointsCreate/Update): metadata and each subset's addresses
/// (valid IPs, not loopback or link-local, as Kubernetes refuses them) and ports.
pub fn validate_endpoints(obj: &Value) -> Vec<FieldError> {
    let mut errs = validate_object_meta(obj, true, is_dns1123_subdomain);
    for (i, subset) in obj.get("subsets").and_then(Value::as_array).into_iter().flatten().enumerate() {
        let path = format!("subsets[{i}]");
        let ready = subset.get("addresses").and_then(Value::as_array).map_or(0, Vec::len);
        let not_ready = subset.get("notReadyAddresses").and_then(Value::as_array).map_or(0, Vec::len);
        if ready + not_ready == 0 {
            errs.push(FieldError::required(&path, "must specify `addresses` or `notReadyAddresses`"));
        }
        for field in ["addresses", "notReadyAddresses"] {
            for (j, addr) in subset.get(field).and_then(Value::as_array).into_iter().flatten().enumerate() {
                let apath = format!("{path}.{field}[{j}]");
                errs.extend(validate_endpoint_ip(addr.get("ip").and_then(Value::as_str).unwrap_or(""), &format!("{apath}.ip")));
                if let Some(h) = addr.get("hostname").and_then(Value::as_str).filter(|h| !h.is_empty()) {
                    for msg in is_dns1123_label(h) {
                        errs.push(FieldError::invalid(&format!("{apath}.hostname"), &json!(h), &msg));
                    }
                }
            }
        }
        let ports = subset.get("ports").and_then(Value::as_array).cloned().unwrap_or_default();
        for (j, port) in ports.iter().enumerate() {
            let ppath = format!("{path}.ports[{j}]");
            let name = port.get("name").and_then(Value::as_str).unwrap_or("");
            if ports.len() > 1 && name.is_empty() {
                errs.push(FieldError::required(&format!("{ppath}.name"), ""));
            }
            match port.get("port").and_then(Value::as_i64) {
                Some(n) => errs.extend(is_valid_port_num(n).into_iter().map(|m| FieldError::invalid(&format!("{ppath}.port"), &json!(n), &m))),
                None => errs.push(FieldError::required(&format!("{ppath}.port"), "")),
            }
            let protocol = port.get("protocol").and_then(Value::as_str).unwrap_or("");
            if !PROTOCOLS.contains(&protocol) {
                errs.push(FieldError::not_supported(&format!("{ppath}.protocol"), &json!(protocol), PROTOCOLS));
            }
        }
    }
    errs
}

/// validateEndpointIP: a valid address that a Service may send traffic to — not unspecified,
/// loopback, link-local or multicast.
pub fn validate_endpoint_ip(ip: &str, path: &str) -> Vec<FieldError> {
    let parsed: std::net::IpAddr = match ip.parse() {
        Ok(a) => a,
        Err(_) => return vec![FieldError::invalid(path, &json!(ip), "must be a valid IP address")],
    };
    let reason = if parsed.is_unspecified() {
        Some("may not be unspecified (0.0.0.0)")
    } else if parsed.is_loopback() {
        Some("may not be in the loopback range (127.0.0.0/8, ::1/128)")
    } else if parsed.is_multicast() {
        Some("may not be in the multicast range (224.0.0.0/4, ff00::/8)")
    } else if matches!(parsed, std::net::IpAddr::V4(v4) if v4.is_link_local()) {
        Some("may not be in the link-local range (169.254.0.0/16, fe80::/10)")
    } else {
        None
    };
    reason.map(|r| FieldError::invalid(path, &json!(ip), r)).into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reasons(errs: &[FieldError]) -> Vec<String> {
        errs.iter().map(|e| format!("{}:{}", e.field, e.reason.reason_str())).collect()
    }

    fn svc(spec: Value) -> Value {
        json!({"metadata": {"name": "web", "namespace": "default"}, "spec": spec})
    }

    #[test]
    fn a_defaulted_service_is_valid_before_its_ip_is_allocated() {
        let ok = svc(json!({"type": "ClusterIP", "sessionAffinity": "None", "ports": [{"port": 80, "protocol": "TCP", "targetPort": 8080}], "selector": {"app": "web"}}));
        assert!(validate_service(&ok).is_empty(), "{:?}", reasons(&validate_service(&ok)));
        let headless = svc(json!({"type": "ClusterIP", "clusterIP": "None", "sessionAffinity": "None"}));
        assert!(validate_service(&headless).is_empty());
        let external = svc(json!({"type": "ExternalName", "externalName": "db.example.com", "sessionAffinity": "None"}));
        assert!(validate_service(&external).is_empty());
    }

    #[test]
    fn what_kubernetes_refuses_in_a_service() {
        let mut bad = svc(json!({
            "type": "NodePort", "clusterIP": "None", "sessionAffinity": "Sticky", "externalTrafficPolicy": "Cluster",
            "ports": [{"port": 80, "protocol": "TCP"}, {"name": "b", "port": 80, "protocol": "TCP", "targetPort": "Not_A_Name"}, {"name": "c", "port": 70000, "protocol": "ICMP"}],
        }));
        bad["metadata"]["name"] = json!("1web");
        assert_eq!(
            reasons(&validate_service(&bad)),
            [
                "metadata.name:FieldValueInvalid",
                "spec.clusterIPs[0]:FieldValueInvalid",
                "spec.ports[0].name:FieldValueRequired",
                "spec.ports[1].targetPort:FieldValueInvalid",
                "spec.ports[1]:FieldValueDuplicate",
                "spec.ports[2].port:FieldValueInvalid",
                "spec.ports[2].protocol:FieldValueNotSupported",
                "spec.sessionAffinity:FieldValueNotSupported",
            ]
        );
        let no_ports = svc(json!({"type": "ClusterIP", "sessionAffinity": "None"}));
        assert_eq!(reasons(&validate_service(&no_ports)), ["spec.ports:FieldValueRequired"]);
        let node_port_on_cluster_ip = svc(json!({"type": "ClusterIP", "sessionAffinity": "None", "ports": [{"port": 80, "protocol": "TCP", "nodePort": 30080}]}));
        assert_eq!(reasons(&validate_service(&node_port_on_cluster_ip)), ["spec.ports[0].nodePort:FieldValueForbidden"]);
        let no_external_name = svc(json!({"type": "ExternalName", "sessionAffinity": "None"}));
        assert_eq!(reasons(&validate_service(&no_external_name)), ["spec.externalName:FieldValueRequired"]);
    }

    #[test]
    fn a_cluster_ip_once_set_never_changes() {
        let old = svc(json!({"type": "ClusterIP", "clusterIP": "10.96.0.5", "clusterIPs": ["10.96.0.5"], "sessionAffinity": "None", "ports": [{"port": 80, "protocol": "TCP"}]}));
        let mut new = old.clone();
        new["spec"]["clusterIP"] = json!("10.96.0.6");
        new["spec"]["clusterIPs"] = json!(["10.96.0.6"]);
        assert_eq!(reasons(&validate_service_update(&new, &old)), ["spec.clusterIPs[0]:FieldValueInvalid"]);
        assert!(validate_service_update(&old, &old).is_empty());
    }

    #[test]
    fn endpoints_take_no_loopback_addresses() {
        let ep = json!({"metadata": {"name": "web", "namespace": "default"}, "subsets": [{"addresses": [{"ip": "10.244.0.5"}, {"ip": "127.0.0.1"}], "ports": [{"port": 80, "protocol": "TCP"}]}]});
        assert_eq!(reasons(&validate_endpoints(&ep)), ["subsets[0].addresses[1].ip:FieldValueInvalid"]);
    }
}
