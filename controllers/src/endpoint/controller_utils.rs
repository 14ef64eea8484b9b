//! Mirrors pkg/controller/util/endpoint/controller_utils.go (with `FindPort` of pkg/api/v1/pod):
//! what the Endpoints and EndpointSlice controllers both ask of a pod and a Service — whether the
//! pod belongs in its endpoints at all, which Services select it, the port a Service port means
//! on it, and whether its hostname is published.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{Pod, Service, ServicePort};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

/// `spec.clusterIP` of a headless Service.
pub const CLUSTER_IP_NONE: &str = "None";
/// The label both controllers put on what they write for a headless Service (`v1.IsHeadlessService`).
pub const LABEL_HEADLESS: &str = "service.kubernetes.io/headless";

/// `<namespace>/<name>`, the queues' key.
pub fn key(namespace: &str, name: &str) -> String {
    format!("{namespace}/{name}")
}

/// The Service's key.
pub fn service_key(svc: &Service) -> String {
    key(svc.metadata.namespace.as_deref().unwrap_or_default(), svc.metadata.name.as_deref().unwrap_or_default())
}

/// The selector of a Service whose endpoints a controller keeps, or `None`: an ExternalName
/// Service has no endpoints, and one without a selector has its endpoints written by its user.
/// (An empty selector counts as none: stored, it cannot be told from an absent one.)
pub fn managed_selector(svc: &Service) -> Option<&BTreeMap<String, String>> {
    let spec = svc.spec.as_ref()?;
    if spec.type_.as_deref() == Some("ExternalName") {
        return None;
    }
    spec.selector.as_ref().filter(|s| !s.is_empty())
}

/// Whether `labels` match a Service's (equality-only) selector.
pub fn selector_matches(selector: &BTreeMap<String, String>, labels: &BTreeMap<String, String>) -> bool {
    selector.iter().all(|(k, v)| labels.get(k) == Some(v))
}

/// `v1helper.IsServiceIPSet` negated for `None`: `spec.clusterIP` is `None`.
pub fn is_headless(svc: &Service) -> bool {
    svc.spec.as_ref().and_then(|s| s.cluster_ip.as_deref()) == Some(CLUSTER_IP_NONE)
}

/// GetPodServiceMemberships: the keys of the Services of the pod's namespace whose selector
/// matches its labels.
pub fn get_pod_service_memberships<'a>(services: impl IntoIterator<Item = &'a Service>, pod: &Pod) -> BTreeSet<String> {
    let ns = pod.metadata.namespace.as_deref().unwrap_or_default();
    let empty = BTreeMap::new();
    let labels = pod.metadata.labels.as_ref().unwrap_or(&empty);
    services
        .into_iter()
        .filter(|svc| svc.metadata.namespace.as_deref() == Some(ns))
        .filter(|svc| managed_selector(svc).is_some_and(|sel| selector_matches(sel, labels)))
        .map(service_key)
        .collect()
}

/// ShouldPodBeInEndpoints: a pod that has finished (Succeeded, Failed) or has no IP yet is in no
/// endpoints; a terminating one only when `include_terminating`.
pub fn should_pod_be_in_endpoints(pod: &Pod, include_terminating: bool) -> bool {
    let status = pod.status.as_ref();
    if api::pod::is_pod_phase_terminal(status.and_then(|s| s.phase.as_deref())) {
        return false;
    }
    if pod_ips(pod).is_empty() {
        return false;
    }
    include_terminating || pod.metadata.deletion_timestamp.is_none()
}

/// The pod's IPs: `status.podIPs`, or `status.podIP` alone when the list is empty.
pub fn pod_ips(pod: &Pod) -> Vec<String> {
    let Some(status) = pod.status.as_ref() else { return Vec::new() };
    let ips: Vec<String> = status.pod_ips.iter().flatten().map(|ip| ip.ip.clone()).filter(|ip| !ip.is_empty()).collect();
    if !ips.is_empty() {
        return ips;
    }
    status.pod_ip.iter().filter(|ip| !ip.is_empty()).cloned().collect()
}

/// Whether an address is IPv6 (`utilnet.IsIPv6String`).
pub fn is_ipv6(ip: &str) -> bool {
    ip.parse::<std::net::Ipv6Addr>().is_ok()
}

/// ShouldSetHostname: the pod's hostname is published when its `subdomain` names this Service,
/// in its namespace.
pub fn should_set_hostname(pod: &Pod, svc: &Service) -> bool {
    let Some(spec) = pod.spec.as_ref() else { return false };
    spec.hostname.as_deref().is_some_and(|h| !h.is_empty())
        && spec.subdomain.is_some()
        && spec.subdomain.as_deref() == svc.metadata.name.as_deref()
        && pod.metadata.namespace == svc.metadata.namespace
}

/// FindPort: the number a Service port's `targetPort` means on this pod — a number as it is
/// (the Service's own `port` when unset), a name looked up among the ports of the pod's
/// containers (restartable init containers included) with the Service port's protocol. `None`
/// when the name is not there: the pod has no endpoint for that port.
pub fn find_port(pod: &Pod, svc_port: &ServicePort) -> Option<i32> {
    match &svc_port.target_port {
        None => Some(svc_port.port),
        Some(IntOrString::Int(n)) if *n == 0 => Some(svc_port.port),
        Some(IntOrString::Int(n)) => Some(*n),
        Some(IntOrString::String(name)) => {
            if let Ok(n) = name.parse::<i32>() {
                return Some(n);
            }
            let protocol = svc_port.protocol.as_deref().unwrap_or("TCP");
            let spec = pod.spec.as_ref()?;
            let sidecars = spec.init_containers.iter().flatten().filter(|c| api::pod::is_restartable_init_container(c));
            spec.containers
                .iter()
                .chain(sidecars)
                .flat_map(|c| c.ports.iter().flatten())
                .find(|p| p.name.as_deref() == Some(name.as_str()) && p.protocol.as_deref().unwrap_or("TCP") == protocol)
                .map(|p| p.container_port)
        }
    }
}

/// The pod's Ready condition's `lastTransitionTime` (getPodTriggerTime).
pub fn pod_ready_transition(pod: &Pod) -> Option<k8s_openapi::jiff::Timestamp> {
    let c = pod.status.as_ref()?.conditions.as_ref()?.iter().find(|c| c.type_ == "Ready")?;
    c.last_transition_time.as_ref().map(|t| t.0)
}

#[cfg(test)]
pub(crate) mod testing {
    //! Builders for the two controllers' table tests.
    use k8s_openapi::api::core::v1::{Container, ContainerPort, Pod, PodCondition, PodIP, PodSpec, PodStatus, Service, ServicePort, ServiceSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
    use k8s_openapi::jiff::Timestamp;

    /// A Service `web` in `default` selecting `app=web`, port `http` 80 → `target`.
    pub fn service(target: IntOrString) -> Service {
        Service {
            metadata: ObjectMeta { name: Some("web".into()), namespace: Some("default".into()), uid: Some("svc-uid".into()), ..ObjectMeta::default() },
            spec: Some(ServiceSpec {
                selector: Some([("app".to_string(), "web".to_string())].into()),
                cluster_ip: Some("10.0.0.10".into()),
                ports: Some(vec![ServicePort { name: Some("http".into()), port: 80, protocol: Some("TCP".into()), target_port: Some(target), ..ServicePort::default() }]),
                ..ServiceSpec::default()
            }),
            ..Service::default()
        }
    }

    /// A running pod `name` labelled `app=web` on node `n1` with `ip`, its container port `http`
    /// numbered `port`, Ready or not.
    pub fn pod(name: &str, ip: &str, port: i32, ready: bool) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("default".into()),
                uid: Some(format!("uid-{name}")),
                labels: Some([("app".to_string(), "web".to_string())].into()),
                ..ObjectMeta::default()
            },
            spec: Some(PodSpec {
                node_name: Some("n1".into()),
                containers: vec![Container {
                    name: "c".into(),
                    ports: Some(vec![ContainerPort { name: Some("http".into()), container_port: port, protocol: Some("TCP".into()), ..ContainerPort::default() }]),
                    ..Container::default()
                }],
                ..PodSpec::default()
            }),
            status: Some(PodStatus {
                phase: Some("Running".into()),
                pod_ip: Some(ip.into()),
                pod_ips: Some(vec![PodIP { ip: ip.into() }]),
                conditions: Some(vec![PodCondition {
                    type_: "Ready".into(),
                    status: if ready { "True" } else { "False" }.into(),
                    last_transition_time: Some(Time(Timestamp::UNIX_EPOCH)),
                    ..PodCondition::default()
                }]),
                ..PodStatus::default()
            }),
        }
    }

    /// The pod marked for deletion.
    pub fn terminating(mut pod: Pod) -> Pod {
        pod.metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
        pod
    }
}

#[cfg(test)]
mod tests {
    use super::testing::*;
    use super::*;

    #[test]
    fn find_port_by_number_name_and_default() {
        let p = pod("a", "10.1.0.1", 8080, true);
        let svc_port = |t: Option<IntOrString>, proto: &str| ServicePort { port: 80, target_port: t, protocol: Some(proto.into()), ..ServicePort::default() };
        let cases = [
            (svc_port(None, "TCP"), Some(80)),
            (svc_port(Some(IntOrString::Int(0)), "TCP"), Some(80)),
            (svc_port(Some(IntOrString::Int(9090)), "TCP"), Some(9090)),
            (svc_port(Some(IntOrString::String("http".into())), "TCP"), Some(8080)),
            (svc_port(Some(IntOrString::String("http".into())), "UDP"), None),
            (svc_port(Some(IntOrString::String("grpc".into())), "TCP"), None),
        ];
        for (i, (sp, want)) in cases.iter().enumerate() {
            assert_eq!(find_port(&p, sp), *want, "case {i}");
        }
    }

    #[test]
    fn which_pods_belong_in_endpoints() {
        let ready = pod("a", "10.1.0.1", 8080, true);
        assert!(should_pod_be_in_endpoints(&ready, false));
        let mut no_ip = ready.clone();
        no_ip.status.as_mut().unwrap().pod_ip = None;
        no_ip.status.as_mut().unwrap().pod_ips = None;
        assert!(!should_pod_be_in_endpoints(&no_ip, true));
        for phase in ["Succeeded", "Failed"] {
            let mut done = ready.clone();
            done.status.as_mut().unwrap().phase = Some(phase.into());
            assert!(!should_pod_be_in_endpoints(&done, true), "{phase}");
        }
        let going = terminating(ready);
        assert!(should_pod_be_in_endpoints(&going, true));
        assert!(!should_pod_be_in_endpoints(&going, false));
    }

    #[test]
    fn memberships_and_hostname() {
        let svc = service(IntOrString::Int(8080));
        let mut other = service(IntOrString::Int(8080));
        other.metadata.name = Some("db".into());
        other.spec.as_mut().unwrap().selector = Some([("app".to_string(), "db".to_string())].into());
        let mut elsewhere = service(IntOrString::Int(8080));
        elsewhere.metadata.namespace = Some("prod".into());
        let mut p = pod("a", "10.1.0.1", 8080, true);
        assert_eq!(get_pod_service_memberships([&svc, &other, &elsewhere], &p), BTreeSet::from(["default/web".to_string()]));
        assert!(!should_set_hostname(&p, &svc));
        p.spec.as_mut().unwrap().hostname = Some("a".into());
        p.spec.as_mut().unwrap().subdomain = Some("web".into());
        assert!(should_set_hostname(&p, &svc));
        assert!(!should_set_hostname(&p, &other));
    }

    #[test]
    fn external_name_and_selectorless_services_are_not_managed() {
        let mut svc = service(IntOrString::Int(8080));
        assert!(managed_selector(&svc).is_some());
        svc.spec.as_mut().unwrap().selector = None;
        assert!(managed_selector(&svc).is_none());
        let mut ext = service(IntOrString::Int(8080));
        ext.spec.as_mut().unwrap().type_ = Some("ExternalName".into());
        assert!(managed_selector(&ext).is_none());
    }
}
