//! Mirrors pkg/kubelet/envvars/envvars.go (FromServices) and the choice of Services in
//! kubelet_pods.go (getServiceEnvVarMap): the Docker-links-style variables every container gets
//! for the Services it may talk to.
//!
//! 1. Which Services ([`services_for_pod`]): the master service (`default/kubernetes`) always;
//!    the other Services of the pod's own namespace while `enableServiceLinks` is true (the
//!    default). A Service without a cluster IP (headless, ExternalName) gives nothing.
//! 2. Their variables ([`from_services`]), per Service `NAME` (upper case, `-` → `_`):
//!    `NAME_SERVICE_HOST`, `NAME_SERVICE_PORT` (the first port), `NAME_SERVICE_PORT_<PORTNAME>`
//!    for each named port, and the links: `NAME_PORT=<proto>://<ip>:<port>` (first port), then
//!    per port `NAME_PORT_<port>_<PROTO>` with `_PROTO`, `_PORT` and `_ADDR`.
//!
//! The container's own `env` wins over a Service variable of the same name, and `$(VAR)` in
//! `env` may refer to them (kuberuntime_container's `make_environment_variables`).

use k8s_openapi::api::core::v1::Service;

/// The namespace of the master service, and its name (kubelet's masterServiceNamespace and
/// `masterServices`).
pub(crate) const MASTER_SERVICE_NAMESPACE: &str = "default";
const MASTER_SERVICE: &str = "kubernetes";

/// Step 1: of `services` (the pod's namespace's and the master namespace's), the ones whose
/// variables a pod in `namespace` gets, in name order, each name once.
pub(crate) fn services_for_pod<'a>(services: &'a [Service], namespace: &str, enable_service_links: bool) -> Vec<&'a Service> {
    let mut chosen: std::collections::BTreeMap<&str, &Service> = std::collections::BTreeMap::new();
    for s in services.iter().filter(|s| is_service_ip_set(s)) {
        let (ns, name) = (s.metadata.namespace.as_deref().unwrap_or_default(), s.metadata.name.as_deref().unwrap_or_default());
        if ns == MASTER_SERVICE_NAMESPACE && name == MASTER_SERVICE {
            chosen.entry(name).or_insert(s);
        } else if ns == namespace && enable_service_links {
            chosen.insert(name, s);
        }
    }
    chosen.into_values().collect()
}

/// IsServiceIPSet: a cluster IP that is neither empty nor `None`.
fn is_service_ip_set(s: &Service) -> bool {
    s.spec.as_ref().and_then(|sp| sp.cluster_ip.as_deref()).is_some_and(|ip| !ip.is_empty() && ip != "None")
}

/// Step 2: the variables of `services`, in the order Kubernetes lists them.
pub(crate) fn from_services(services: &[&Service]) -> Vec<(String, String)> {
    let mut out = vec![];
    for s in services {
        let Some(spec) = &s.spec else { continue };
        let ip = spec.cluster_ip.clone().unwrap_or_default();
        let name = env_name(s.metadata.name.as_deref().unwrap_or_default());
        let ports = spec.ports.clone().unwrap_or_default();
        out.push((format!("{name}_SERVICE_HOST"), ip.clone()));
        if let Some(first) = ports.first() {
            out.push((format!("{name}_SERVICE_PORT"), first.port.to_string()));
        }
        for p in &ports {
            if let Some(pn) = p.name.as_deref().filter(|n| !n.is_empty()) {
                out.push((format!("{name}_SERVICE_PORT_{}", env_name(pn)), p.port.to_string()));
            }
        }
        // makeLinkVariables. An IPv6 address is bracketed in the URLs.
        let host = if ip.contains(':') { format!("[{ip}]") } else { ip.clone() };
        for (i, p) in ports.iter().enumerate() {
            let proto = p.protocol.clone().unwrap_or_else(|| "TCP".into());
            let url = format!("{}://{host}:{}", proto.to_lowercase(), p.port);
            if i == 0 {
                out.push((format!("{name}_PORT"), url.clone()));
            }
            let prefix = format!("{name}_PORT_{}_{}", p.port, proto.to_uppercase());
            out.push((prefix.clone(), url));
            out.push((format!("{prefix}_PROTO"), proto.to_lowercase()));
            out.push((format!("{prefix}_PORT"), p.port.to_string()));
            out.push((format!("{prefix}_ADDR"), ip.clone()));
        }
    }
    out
}

/// makeEnvVariableName: upper case, dashes to underscores.
fn env_name(s: &str) -> String {
    s.to_uppercase().replace('-', "_")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn svc(ns: &str, name: &str, ip: &str, ports: serde_json::Value) -> Service {
        serde_json::from_value(json!({"metadata": {"namespace": ns, "name": name}, "spec": {"clusterIP": ip, "ports": ports}})).expect("service")
    }

    #[test]
    fn the_pods_namespace_and_the_master_service_only() {
        let all = vec![
            svc("default", "kubernetes", "10.96.0.1", json!([{"name": "https", "port": 443, "protocol": "TCP"}])),
            svc("shop", "web", "10.96.0.20", json!([{"port": 80}])),
            svc("shop", "db", "None", json!([{"port": 5432}])),
            svc("other", "web", "10.96.0.30", json!([{"port": 80}])),
            svc("default", "elsewhere", "10.96.0.40", json!([{"port": 80}])),
        ];
        let names = |v: Vec<&Service>| v.iter().map(|s| format!("{}/{}", s.metadata.namespace.as_deref().unwrap(), s.metadata.name.as_deref().unwrap())).collect::<Vec<_>>();
        assert_eq!(names(services_for_pod(&all, "shop", true)), ["default/kubernetes", "shop/web"]);
        assert_eq!(names(services_for_pod(&all, "shop", false)), ["default/kubernetes"]);
        // In the default namespace every Service of it counts.
        assert_eq!(names(services_for_pod(&all, "default", true)), ["default/elsewhere", "default/kubernetes"]);
        // A Service named kubernetes in the pod's namespace replaces the master service.
        let mut shadow = all.clone();
        shadow.push(svc("shop", "kubernetes", "10.96.0.50", json!([{"port": 8443}])));
        let chosen = services_for_pod(&shadow, "shop", true);
        assert_eq!(chosen[0].spec.as_ref().unwrap().cluster_ip.as_deref(), Some("10.96.0.50"));
    }

    #[test]
    fn variables_as_kubernetes_writes_them() {
        let s = svc("shop", "my-web", "10.96.0.20", json!([{"name": "http", "port": 80, "protocol": "TCP"}, {"name": "dns-udp", "port": 53, "protocol": "UDP"}]));
        let got = from_services(&[&s]);
        let want: Vec<(String, String)> = [
            ("MY_WEB_SERVICE_HOST", "10.96.0.20"),
            ("MY_WEB_SERVICE_PORT", "80"),
            ("MY_WEB_SERVICE_PORT_HTTP", "80"),
            ("MY_WEB_SERVICE_PORT_DNS_UDP", "53"),
            ("MY_WEB_PORT", "tcp://10.96.0.20:80"),
            ("MY_WEB_PORT_80_TCP", "tcp://10.96.0.20:80"),
            ("MY_WEB_PORT_80_TCP_PROTO", "tcp"),
            ("MY_WEB_PORT_80_TCP_PORT", "80"),
            ("MY_WEB_PORT_80_TCP_ADDR", "10.96.0.20"),
            ("MY_WEB_PORT_53_UDP", "udp://10.96.0.20:53"),
            ("MY_WEB_PORT_53_UDP_PROTO", "udp"),
            ("MY_WEB_PORT_53_UDP_PORT", "53"),
            ("MY_WEB_PORT_53_UDP_ADDR", "10.96.0.20"),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .to_vec();
        assert_eq!(got, want);
    }
}
