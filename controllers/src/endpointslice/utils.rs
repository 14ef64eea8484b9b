//! Mirrors staging/src/k8s.io/endpointslice/utils.go: how a pod becomes an endpoint (addresses,
//! conditions, node, zone, hostname, target), which ports it serves a Service on, the labels and
//! owner a Service's slices carry, and the address types a Service wants.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ObjectReference, Pod, Service};
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions, EndpointPort, EndpointSlice};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::controller_utils::controller_ref;
use crate::endpoint::controller_utils::{LABEL_HEADLESS, find_port, is_ipv6, pod_ips, should_set_hostname};

/// The label naming the Service a slice belongs to (`discovery.LabelServiceName`).
pub const LABEL_SERVICE_NAME: &str = "kubernetes.io/service-name";
/// The label naming who manages a slice (`discovery.LabelManagedBy`).
pub const LABEL_MANAGED_BY: &str = "endpointslice.kubernetes.io/managed-by";
/// This controller's value of [`LABEL_MANAGED_BY`] (`ControllerName`).
pub const CONTROLLER_NAME: &str = "endpointslice-controller.k8s.io";
/// The node label an endpoint's zone is read from (`v1.LabelTopologyZone`).
pub const LABEL_TOPOLOGY_ZONE: &str = "topology.kubernetes.io/zone";
pub const ADDRESS_TYPE_IPV4: &str = "IPv4";
pub const ADDRESS_TYPE_IPV6: &str = "IPv6";

/// podToEndpoint: the endpoint of `pod` for `svc` in the family of `address_type`. Serving is the
/// pod's Ready condition, terminating its deletion mark; ready is serving and not terminating
/// (always, with `publishNotReadyAddresses`).
pub fn pod_to_endpoint(pod: &Pod, zone: Option<&str>, svc: &Service, address_type: &str) -> Endpoint {
    let serving = api::pod::is_pod_ready(pod);
    let terminating = pod.metadata.deletion_timestamp.is_some();
    let publish_not_ready = svc.spec.as_ref().and_then(|s| s.publish_not_ready_addresses).unwrap_or(false);
    let ready = publish_not_ready || (serving && !terminating);
    let node_name = pod.spec.as_ref().and_then(|s| s.node_name.clone()).filter(|n| !n.is_empty());
    Endpoint {
        addresses: get_endpoint_addresses(pod, address_type),
        conditions: Some(EndpointConditions { ready: Some(ready), serving: Some(serving), terminating: Some(terminating) }),
        node_name,
        zone: zone.filter(|z| !z.is_empty()).map(str::to_string),
        hostname: should_set_hostname(pod, svc).then(|| pod.spec.as_ref().and_then(|s| s.hostname.clone())).flatten(),
        target_ref: Some(ObjectReference {
            kind: Some("Pod".into()),
            namespace: pod.metadata.namespace.clone(),
            name: pod.metadata.name.clone(),
            uid: pod.metadata.uid.clone(),
            ..ObjectReference::default()
        }),
        ..Endpoint::default()
    }
}

/// getEndpointAddresses: the pod's first IP of the address type's family (empty if it has none).
pub fn get_endpoint_addresses(pod: &Pod, address_type: &str) -> Vec<String> {
    let want_v6 = address_type == ADDRESS_TYPE_IPV6;
    pod_ips(pod).into_iter().find(|ip| is_ipv6(ip) == want_v6).into_iter().collect()
}

/// getEndpointPorts: one port per Service port the pod serves (named as the Service port,
/// numbered as its `targetPort` resolves on this pod); a port whose named target the pod lacks
/// is left out.
pub fn get_endpoint_ports(svc: &Service, pod: &Pod) -> Vec<EndpointPort> {
    svc.spec
        .iter()
        .flat_map(|s| s.ports.iter().flatten())
        .filter_map(|sp| {
            let port = find_port(pod, sp)?;
            Some(EndpointPort {
                name: Some(sp.name.clone().unwrap_or_default()),
                port: Some(port),
                protocol: Some(sp.protocol.clone().unwrap_or_else(|| "TCP".into())),
                app_protocol: sp.app_protocol.clone(),
            })
        })
        .collect()
}

/// The ports in a canonical order, with absent names and protocols as their defaults: the key
/// endpoints are grouped by (Kubernetes' `portMapKey`, a hash of the same).
pub fn port_map_key(ports: &[EndpointPort]) -> Vec<(String, i32, String, String)> {
    let mut key: Vec<_> = ports
        .iter()
        .map(|p| (p.name.clone().unwrap_or_default(), p.port.unwrap_or(0), p.protocol.clone().unwrap_or_else(|| "TCP".into()), p.app_protocol.clone().unwrap_or_default()))
        .collect();
    key.sort();
    key
}

/// What identifies an endpoint across syncs (Kubernetes' endpoint hash): its addresses, its pod
/// and its hostname. An endpoint with the same key and other differences is updated in place.
pub fn endpoint_key(ep: &Endpoint) -> (Vec<String>, String, String, String) {
    let (ns, name) = ep.target_ref.as_ref().map(|r| (r.namespace.clone().unwrap_or_default(), r.name.clone().unwrap_or_default())).unwrap_or_default();
    (ep.addresses.clone(), ns, name, ep.hostname.clone().unwrap_or_default())
}

/// getAddressTypesForService: the families of `spec.ipFamilies`; without them, that of the
/// cluster IP; for a headless Service without either, both.
pub fn get_address_types_for_service(svc: &Service) -> Vec<&'static str> {
    let spec = svc.spec.as_ref();
    let mut types: Vec<&'static str> = spec
        .and_then(|s| s.ip_families.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|f| match f.as_str() {
            "IPv4" => Some(ADDRESS_TYPE_IPV4),
            "IPv6" => Some(ADDRESS_TYPE_IPV6),
            _ => None,
        })
        .collect();
    types.dedup();
    if !types.is_empty() {
        return types;
    }
    match spec.and_then(|s| s.cluster_ip.as_deref()) {
        Some(ip) if !ip.is_empty() && ip != "None" => vec![if is_ipv6(ip) { ADDRESS_TYPE_IPV6 } else { ADDRESS_TYPE_IPV4 }],
        _ => vec![ADDRESS_TYPE_IPV4, ADDRESS_TYPE_IPV6],
    }
}

/// `!IsServiceIPSet`: no cluster IP (`None` or empty).
pub fn is_service_ip_unset(svc: &Service) -> bool {
    matches!(svc.spec.as_ref().and_then(|s| s.cluster_ip.as_deref()), None | Some("") | Some("None"))
}

fn is_reserved_label_key(key: &str) -> bool {
    key == LABEL_SERVICE_NAME || key == LABEL_MANAGED_BY || key == LABEL_HEADLESS
}

/// setEndpointSliceLabels: the labels a slice of `svc` should carry — the Service's own (less the
/// reserved keys), the headless label when it has no cluster IP, the Service's name and this
/// controller's — and whether the slice's differ.
pub fn set_endpoint_slice_labels(slice: &EndpointSlice, svc: &Service) -> (BTreeMap<String, String>, bool) {
    let mut labels: BTreeMap<String, String> = svc.metadata.labels.iter().flatten().filter(|(k, _)| !is_reserved_label_key(k)).map(|(k, v)| (k.clone(), v.clone())).collect();
    if is_service_ip_unset(svc) {
        labels.insert(LABEL_HEADLESS.into(), String::new());
    }
    labels.insert(LABEL_SERVICE_NAME.into(), svc.metadata.name.clone().unwrap_or_default());
    labels.insert(LABEL_MANAGED_BY.into(), CONTROLLER_NAME.into());
    let changed = slice.metadata.labels.clone().unwrap_or_default() != labels;
    (labels, changed)
}

/// newEndpointSlice: an empty slice of `svc` (generateName `<service>-`, owned by it, labelled).
pub fn new_endpoint_slice(svc: &Service, ports: Vec<EndpointPort>, address_type: &str) -> EndpointSlice {
    let mut slice = EndpointSlice {
        metadata: ObjectMeta {
            generate_name: Some(format!("{}-", svc.metadata.name.as_deref().unwrap_or_default())),
            namespace: svc.metadata.namespace.clone(),
            owner_references: Some(vec![controller_ref("v1", "Service", &svc.metadata)]),
            ..ObjectMeta::default()
        },
        address_type: address_type.into(),
        endpoints: Some(Vec::new()),
        ports: Some(ports),
    };
    slice.metadata.labels = Some(set_endpoint_slice_labels(&slice, svc).0);
    slice
}

/// ownedBy: whether the slice names `svc` (this one, by uid) among its owners.
pub fn owned_by(slice: &EndpointSlice, svc: &Service) -> bool {
    slice.metadata.owner_references.iter().flatten().any(|r| r.kind == "Service" && r.api_version == "v1" && Some(&r.uid) == svc.metadata.uid.as_ref())
}

/// Whether this controller manages the slice (its managed-by label).
pub fn managed_by_controller(slice: &EndpointSlice) -> bool {
    slice.metadata.labels.as_ref().and_then(|l| l.get(LABEL_MANAGED_BY)).map(String::as_str) == Some(CONTROLLER_NAME)
}

/// The Service a slice names by its label, as `<namespace>/<name>`.
pub fn service_key_of_slice(slice: &EndpointSlice) -> Option<String> {
    let name = slice.metadata.labels.as_ref()?.get(LABEL_SERVICE_NAME)?;
    Some(crate::endpoint::controller_utils::key(slice.metadata.namespace.as_deref().unwrap_or_default(), name))
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

    use super::*;
    use crate::endpoint::controller_utils::testing::{pod, service, terminating};

    fn conditions(ep: &Endpoint) -> (bool, bool, bool) {
        let c = ep.conditions.clone().unwrap_or_default();
        (c.ready.unwrap_or(false), c.serving.unwrap_or(false), c.terminating.unwrap_or(false))
    }

    #[test]
    fn conditions_as_kubernetes_computes_them() {
        let svc = service(IntOrString::Int(8080));
        let mut publish = svc.clone();
        publish.spec.as_mut().unwrap().publish_not_ready_addresses = Some(true);
        // (pod, service) -> (ready, serving, terminating)
        let cases = [
            (pod("a", "10.1.0.1", 80, true), &svc, (true, true, false)),
            (pod("a", "10.1.0.1", 80, false), &svc, (false, false, false)),
            (terminating(pod("a", "10.1.0.1", 80, true)), &svc, (false, true, true)),
            (terminating(pod("a", "10.1.0.1", 80, false)), &svc, (false, false, true)),
            (pod("a", "10.1.0.1", 80, false), &publish, (true, false, false)),
            (terminating(pod("a", "10.1.0.1", 80, true)), &publish, (true, true, true)),
        ];
        for (i, (p, s, want)) in cases.iter().enumerate() {
            assert_eq!(conditions(&pod_to_endpoint(p, None, s, ADDRESS_TYPE_IPV4)), *want, "case {i}");
        }
    }

    #[test]
    fn endpoint_carries_node_zone_target_and_hostname() {
        let svc = service(IntOrString::Int(8080));
        let mut p = pod("a", "10.1.0.1", 80, true);
        p.spec.as_mut().unwrap().hostname = Some("a".into());
        p.spec.as_mut().unwrap().subdomain = Some("web".into());
        let ep = pod_to_endpoint(&p, Some("zone-a"), &svc, ADDRESS_TYPE_IPV4);
        assert_eq!(ep.addresses, vec!["10.1.0.1".to_string()]);
        assert_eq!(ep.node_name.as_deref(), Some("n1"));
        assert_eq!(ep.zone.as_deref(), Some("zone-a"));
        assert_eq!(ep.hostname.as_deref(), Some("a"));
        let r = ep.target_ref.unwrap();
        assert_eq!((r.kind.as_deref(), r.namespace.as_deref(), r.name.as_deref(), r.uid.as_deref()), (Some("Pod"), Some("default"), Some("a"), Some("uid-a")));
        // The IPv6 slice of an IPv4-only pod has no address for it.
        assert!(get_endpoint_addresses(&p, ADDRESS_TYPE_IPV6).is_empty());
    }

    #[test]
    fn ports_resolve_per_pod() {
        let by_name = service(IntOrString::String("http".into()));
        let a = get_endpoint_ports(&by_name, &pod("a", "10.1.0.1", 8080, true));
        let b = get_endpoint_ports(&by_name, &pod("b", "10.1.0.2", 9090, true));
        assert_eq!(a[0].port, Some(8080));
        assert_eq!(b[0].port, Some(9090));
        assert_eq!((a[0].name.as_deref(), a[0].protocol.as_deref()), (Some("http"), Some("TCP")));
        assert_ne!(port_map_key(&a), port_map_key(&b));
        let by_number = service(IntOrString::Int(7000));
        assert_eq!(get_endpoint_ports(&by_number, &pod("a", "10.1.0.1", 8080, true))[0].port, Some(7000));
        let missing = service(IntOrString::String("grpc".into()));
        assert!(get_endpoint_ports(&missing, &pod("a", "10.1.0.1", 8080, true)).is_empty());
    }

    #[test]
    fn address_types_and_labels() {
        let mut svc = service(IntOrString::Int(80));
        assert_eq!(get_address_types_for_service(&svc), vec![ADDRESS_TYPE_IPV4]);
        svc.spec.as_mut().unwrap().cluster_ip = Some("fd00::10".into());
        assert_eq!(get_address_types_for_service(&svc), vec![ADDRESS_TYPE_IPV6]);
        svc.spec.as_mut().unwrap().cluster_ip = Some("None".into());
        assert_eq!(get_address_types_for_service(&svc), vec![ADDRESS_TYPE_IPV4, ADDRESS_TYPE_IPV6]);
        svc.spec.as_mut().unwrap().ip_families = Some(vec!["IPv4".into()]);
        assert_eq!(get_address_types_for_service(&svc), vec![ADDRESS_TYPE_IPV4]);
        svc.metadata.labels = Some([("tier".to_string(), "front".to_string()), (LABEL_MANAGED_BY.to_string(), "me".to_string())].into());
        let slice = new_endpoint_slice(&svc, Vec::new(), ADDRESS_TYPE_IPV4);
        let labels = slice.metadata.labels.clone().unwrap();
        assert_eq!(labels.get("tier").map(String::as_str), Some("front"));
        assert_eq!(labels.get(LABEL_MANAGED_BY).map(String::as_str), Some(CONTROLLER_NAME));
        assert_eq!(labels.get(LABEL_SERVICE_NAME).map(String::as_str), Some("web"));
        assert_eq!(labels.get(LABEL_HEADLESS).map(String::as_str), Some(""));
        assert_eq!(slice.metadata.generate_name.as_deref(), Some("web-"));
        assert!(owned_by(&slice, &svc));
        assert!(!set_endpoint_slice_labels(&slice, &svc).1);
        svc.metadata.labels = None;
        assert!(set_endpoint_slice_labels(&slice, &svc).1);
    }
}
