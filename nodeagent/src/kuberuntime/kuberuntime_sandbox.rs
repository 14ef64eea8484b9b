//! Mirrors kubelet's kuberuntime/kuberuntime_sandbox.go (generatePodSandboxConfig): the sandbox is the pod's shared network, IPC and UTS namespaces, held by
//! the pause container; CNI gives it its IP when containerd creates it.

use std::collections::HashMap;
use std::path::Path;

use k8s_cri::v1 as api;
use k8s_openapi::api::core::v1::Pod;

use super::labels;

/// The directory a pod's container logs go to (kubelet: `/var/log/pods/<ns>_<name>_<uid>`).
pub(crate) fn pod_log_dir(logs_root: &Path, pod: &Pod) -> std::path::PathBuf {
    let m = &pod.metadata;
    logs_root.join(format!(
        "{}_{}_{}",
        m.namespace.as_deref().unwrap_or_default(),
        m.name.as_deref().unwrap_or_default(),
        m.uid.as_deref().unwrap_or_default()
    ))
}

pub(crate) fn host_network(pod: &Pod) -> bool {
    pod.spec.as_ref().and_then(|s| s.host_network).unwrap_or(false)
}

/// The pod's hostname: spec.hostname, else its name, cut to 63 characters as Kubernetes does.
pub(crate) fn pod_hostname(pod: &Pod) -> String {
    let h = pod
        .spec
        .as_ref()
        .and_then(|s| s.hostname.clone())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| pod.metadata.name.clone().unwrap_or_default());
    let h: String = h.chars().take(63).collect();
    h.trim_end_matches(['-', '.']).to_string()
}

/// generatePodSandboxConfig: everything the runtime needs to create the sandbox; its DNS is
/// what [`crate::network::dns`] made of the pod's policy.
pub(crate) fn generate_pod_sandbox_config(
    pod: &Pod,
    attempt: u32,
    logs_root: &Path,
    cgroup_parent: &str,
    dns_config: api::DnsConfig,
) -> api::PodSandboxConfig {
    let spec = pod.spec.clone().unwrap_or_default();
    let host_net = spec.host_network.unwrap_or(false);
    let port_mappings = spec
        .containers
        .iter()
        .flat_map(|c| c.ports.iter().flatten())
        .filter(|p| p.host_port.is_some_and(|h| h > 0))
        .map(|p| api::PortMapping {
            protocol: match p.protocol.as_deref() {
                Some("UDP") => api::Protocol::Udp as i32,
                Some("SCTP") => api::Protocol::Sctp as i32,
                _ => api::Protocol::Tcp as i32,
            },
            container_port: p.container_port,
            host_port: p.host_port.unwrap_or_default(),
            host_ip: p.host_ip.clone().unwrap_or_default(),
        })
        .collect();
    let sc = spec.security_context.clone().unwrap_or_default();
    let namespace_options = api::NamespaceOption {
        network: if host_net { api::NamespaceMode::Node } else { api::NamespaceMode::Pod } as i32,
        pid: if spec.host_pid.unwrap_or(false) {
            api::NamespaceMode::Node
        } else if spec.share_process_namespace.unwrap_or(false) {
            api::NamespaceMode::Pod
        } else {
            api::NamespaceMode::Container
        } as i32,
        ipc: if spec.host_ipc.unwrap_or(false) { api::NamespaceMode::Node } else { api::NamespaceMode::Pod } as i32,
        ..Default::default()
    };
    let sysctls: HashMap<String, String> = sc
        .sysctls
        .iter()
        .flatten()
        .map(|s| (s.name.clone(), s.value.clone()))
        .collect();
    api::PodSandboxConfig {
        metadata: Some(api::PodSandboxMetadata {
            name: pod.metadata.name.clone().unwrap_or_default(),
            uid: pod.metadata.uid.clone().unwrap_or_default(),
            namespace: pod.metadata.namespace.clone().unwrap_or_default(),
            attempt,
        }),
        // A host-network pod has no UTS namespace of its own: setting a hostname would fail.
        hostname: if host_net { String::new() } else { pod_hostname(pod) },
        log_directory: pod_log_dir(logs_root, pod).to_string_lossy().into_owned(),
        dns_config: Some(dns_config),
        port_mappings,
        labels: labels::new_pod_labels(pod),
        annotations: pod.metadata.annotations.clone().unwrap_or_default().into_iter().collect(),
        linux: Some(api::LinuxPodSandboxConfig {
            cgroup_parent: cgroup_parent.to_string(),
            security_context: Some(api::LinuxSandboxSecurityContext {
                namespace_options: Some(namespace_options),
                run_as_user: sc.run_as_user.map(|value| api::Int64Value { value }),
                run_as_group: sc.run_as_group.map(|value| api::Int64Value { value }),
                supplemental_groups: sc.supplemental_groups.clone().unwrap_or_default(),
                // A privileged container needs a privileged sandbox: containerd refuses one in
                // an unprivileged sandbox ("no privileged container allowed in sandbox").
                privileged: has_privileged_container(pod),
                ..Default::default()
            }),
            sysctls,
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// HasPrivilegedContainer (kubelet's container helpers): any container, init container or
/// ephemeral container with `securityContext.privileged: true`.
fn has_privileged_container(pod: &Pod) -> bool {
    let Some(spec) = pod.spec.as_ref() else { return false };
    let privileged = |sc: Option<&k8s_openapi::api::core::v1::SecurityContext>| sc.and_then(|sc| sc.privileged).unwrap_or(false);
    spec.containers.iter().any(|c| privileged(c.security_context.as_ref()))
        || spec.init_containers.iter().flatten().any(|c| privileged(c.security_context.as_ref()))
        || spec.ephemeral_containers.iter().flatten().any(|c| privileged(c.security_context.as_ref()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{Container, ContainerPort, PodSpec};

    fn pod(host_net: bool) -> Pod {
        let mut p = Pod::default();
        p.metadata.name = Some("web".into());
        p.metadata.namespace = Some("default".into());
        p.metadata.uid = Some("u1".into());
        p.spec = Some(PodSpec {
            host_network: Some(host_net),
            containers: vec![Container {
                name: "c".into(),
                ports: Some(vec![
                    ContainerPort { container_port: 80, host_port: Some(8080), ..Default::default() },
                    ContainerPort { container_port: 53, protocol: Some("UDP".into()), ..Default::default() },
                ]),
                ..Default::default()
            }],
            ..Default::default()
        });
        p
    }

    #[test]
    fn sandbox_config_carries_identity_ports_and_namespaces() {
        let dns = api::DnsConfig { servers: vec!["10.0.0.2".into()], ..Default::default() };
        let c = generate_pod_sandbox_config(&pod(false), 1, Path::new("/logs"), "/kubepods/besteffort/podu1", dns.clone());
        let m = c.metadata.as_ref().expect("metadata");
        assert_eq!((m.name.as_str(), m.uid.as_str(), m.attempt), ("web", "u1", 1));
        assert_eq!(c.hostname, "web");
        assert_eq!(c.log_directory, "/logs/default_web_u1");
        assert_eq!(c.port_mappings.len(), 1, "only ports with a hostPort are mapped");
        assert_eq!(c.port_mappings[0].host_port, 8080);
        assert_eq!(c.labels[crate::container::POD_UID_LABEL], "u1");
        let linux = c.linux.as_ref().expect("linux");
        assert_eq!(linux.cgroup_parent, "/kubepods/besteffort/podu1");
        let ns = linux.security_context.as_ref().and_then(|s| s.namespace_options.as_ref()).expect("ns");
        assert_eq!(ns.network, api::NamespaceMode::Pod as i32);
        assert_eq!(c.dns_config.as_ref().expect("dns").servers, ["10.0.0.2"]);

        let hn = generate_pod_sandbox_config(&pod(true), 0, Path::new("/logs"), "", dns);
        assert_eq!(hn.hostname, "", "host-network pods must not set a hostname");
    }

    #[test]
    fn a_privileged_container_makes_a_privileged_sandbox() {
        let privileged = |p: &Pod| {
            let c = generate_pod_sandbox_config(p, 0, Path::new("/logs"), "", api::DnsConfig::default());
            c.linux.and_then(|l| l.security_context).is_some_and(|s| s.privileged)
        };
        let mut p = pod(false);
        assert!(!privileged(&p));
        let sc = k8s_openapi::api::core::v1::SecurityContext { privileged: Some(true), ..Default::default() };
        if let Some(spec) = p.spec.as_mut() {
            spec.init_containers = Some(vec![Container { name: "init".into(), security_context: Some(sc), ..Default::default() }]);
        }
        assert!(privileged(&p), "an init container counts too");
    }
}
