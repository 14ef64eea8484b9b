//! Mirrors CoreDNS's plugin/kubernetes/object/service.go (ToService): a Service as DNS sees it.

use std::net::IpAddr;

use k8s_openapi::api::core::v1 as corev1;

use super::Port;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Service {
    pub namespace: String,
    pub name: String,
    /// The ClusterIPs (both families on a dual-stack Service); empty when headless.
    pub cluster_ips: Vec<IpAddr>,
    /// `spec.clusterIP: None`: the name answers with the endpoints' addresses.
    pub headless: bool,
    /// `type: ExternalName`: the name is a CNAME to this.
    pub external_name: Option<String>,
    pub ports: Vec<Port>,
}

impl Service {
    /// ToService. `None` for an object without a name or namespace (nothing can ask for it).
    pub fn from_api(svc: &corev1::Service) -> Option<Service> {
        let namespace = svc.metadata.namespace.clone()?;
        let name = svc.metadata.name.clone()?;
        let spec = svc.spec.clone().unwrap_or_default();
        if spec.type_.as_deref() == Some("ExternalName") {
            let target = spec.external_name.unwrap_or_default();
            return Some(Service {
                namespace,
                name,
                cluster_ips: vec![],
                headless: false,
                external_name: Some(target.trim_end_matches('.').to_ascii_lowercase()),
                ports: vec![],
            });
        }
        let mut ips: Vec<String> = spec.cluster_ips.unwrap_or_default();
        if ips.is_empty() {
            ips.extend(spec.cluster_ip);
        }
        let headless = ips.iter().any(|ip| ip == "None");
        let cluster_ips = ips.iter().filter_map(|ip| ip.parse().ok()).collect();
        let ports = spec
            .ports
            .iter()
            .flatten()
            .filter_map(|p| Port::new(p.name.as_deref(), p.protocol.as_deref(), p.port))
            .collect();
        Some(Service { namespace, name, cluster_ips, headless, external_name: None, ports })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{ServicePort, ServiceSpec};

    fn svc(spec: ServiceSpec) -> corev1::Service {
        let mut s = corev1::Service { spec: Some(spec), ..Default::default() };
        s.metadata.name = Some("web".into());
        s.metadata.namespace = Some("default".into());
        s
    }

    #[test]
    fn cluster_ip_headless_and_external_name() {
        let port = ServicePort { name: Some("HTTP".into()), port: 80, ..Default::default() };
        let s = Service::from_api(&svc(ServiceSpec {
            cluster_ip: Some("10.96.0.10".into()),
            cluster_ips: Some(vec!["10.96.0.10".into(), "fd00::10".into()]),
            ports: Some(vec![port.clone()]),
            ..Default::default()
        }))
        .expect("service");
        assert_eq!(s.cluster_ips, ["10.96.0.10".parse::<IpAddr>().unwrap(), "fd00::10".parse().unwrap()]);
        assert!(!s.headless);
        assert_eq!(s.ports, [Port { name: "http".into(), protocol: "tcp".into(), port: 80 }]);

        let h = Service::from_api(&svc(ServiceSpec { cluster_ip: Some("None".into()), ports: Some(vec![port]), ..Default::default() }))
            .expect("service");
        assert!(h.headless && h.cluster_ips.is_empty());

        let e = Service::from_api(&svc(ServiceSpec {
            type_: Some("ExternalName".into()),
            external_name: Some("Example.COM.".into()),
            ..Default::default()
        }))
        .expect("service");
        assert_eq!(e.external_name.as_deref(), Some("example.com"));
    }
}
