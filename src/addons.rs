//! The cluster DNS add-on of `kubelab up`, as kubeadm's cmd/kubeadm/app/phases/addons/dns/dns.go
//! installs CoreDNS — but with `kubelab dns` running in this process instead of a Deployment
//! (there is no image of kubelab for it to run from), so its Service has no selector and its
//! EndpointSlice is written here, the way Kubernetes publishes a backend outside the cluster.
//!
//! 1. The pods' bridge is made before any pod ([`ensure_bridge`]), with the pod network's
//!    gateway address, for the DNS server to listen on an address every pod reaches; the CNI
//!    bridge plugin finds it and uses it as it is.
//! 2. What the DNS server may read ([`apply_dns_rbac`]): kubeadm's ClusterRole `system:coredns`
//!    (list and watch of endpoints, services, pods, namespaces and EndpointSlices) bound, as
//!    kubeadm's ClusterRoleBinding `system:coredns` is, to the server's identity — here the user
//!    `system:kube-dns` of `pki/dns.conf`, where kubeadm's is the service account
//!    `kube-system/coredns` (kubelab's server runs outside any pod).
//! 3. The Service `kube-system/kube-dns` (kubeadm's: ClusterIP the tenth address of the Service
//!    range, ports `dns` 53/UDP and `dns-tcp` 53/TCP) and the EndpointSlice `kube-dns-<node>`
//!    pointing at the DNS server, both server-side applied ([`apply_kube_dns`]) at every start.
//!    The proxy turns the ClusterIP into the server's address; the node agent gives pods the
//!    ClusterIP as their nameserver (`--cluster-dns`).

use std::net::Ipv4Addr;
use std::process::Command;

use anyhow::{Context, bail};
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

/// The cluster DNS's Service address: the tenth of the default Service range (kubeadm's rule).
pub const KUBE_DNS_IP: Ipv4Addr = Ipv4Addr::new(10, 96, 0, 10);
/// The field manager of what this file applies.
const MANAGER: &str = "kubelab-up";

/// Step 1: the bridge `name` with `gateway/prefix`, up. Idempotent.
pub fn ensure_bridge(name: &str, gateway: Ipv4Addr, prefix: u8) -> anyhow::Result<()> {
    let ip = |args: &[&str]| -> anyhow::Result<std::process::Output> { Command::new("ip").args(args).output().with_context(|| format!("ip {}", args.join(" "))) };
    if !ip(&["link", "show", "dev", name])?.status.success() {
        let out = ip(&["link", "add", "name", name, "type", "bridge"])?;
        if !out.status.success() {
            bail!("ip link add {name} type bridge: {}", String::from_utf8_lossy(&out.stderr).trim());
        }
    }
    let addr = format!("{gateway}/{prefix}");
    for args in [vec!["addr", "replace", addr.as_str(), "dev", name], vec!["link", "set", name, "up"]] {
        let out = ip(&args)?;
        if !out.status.success() {
            bail!("ip {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim());
        }
    }
    Ok(())
}

/// The DNS server's user, from its client certificate (`pki/dns.conf`).
pub const KUBE_DNS_USER: &str = "system:kube-dns";

/// Step 2: the ClusterRole `system:coredns` and its binding to [`KUBE_DNS_USER`], applied at
/// every start, before the server starts.
pub async fn apply_dns_rbac(kube: &kube::Client) -> anyhow::Result<()> {
    let pp = PatchParams::apply(MANAGER).force();
    let role: ClusterRole = serde_json::from_value(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "system:coredns", "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"}},
        "rules": [
            {"apiGroups": [""], "resources": ["endpoints", "services", "pods", "namespaces"], "verbs": ["list", "watch"]},
            {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": ["list", "watch"]}
        ]
    }))?;
    Api::<ClusterRole>::all(kube.clone()).patch("system:coredns", &pp, &Patch::Apply(&role)).await.context("applying the ClusterRole system:coredns")?;
    let binding: ClusterRoleBinding = serde_json::from_value(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": "system:coredns", "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"}},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:coredns"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": KUBE_DNS_USER}]
    }))?;
    Api::<ClusterRoleBinding>::all(kube.clone()).patch("system:coredns", &pp, &Patch::Apply(&binding)).await.context("applying the ClusterRoleBinding system:coredns")?;
    Ok(())
}

/// Step 3: the kube-dns Service and the EndpointSlice of the server at `server` on `node`.
pub async fn apply_kube_dns(kube: &kube::Client, node: &str, server: Ipv4Addr) -> anyhow::Result<()> {
    let pp = PatchParams::apply(MANAGER).force();
    let svc: Service = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "kube-dns", "namespace": "kube-system",
                     "labels": {"k8s-app": "kube-dns", "kubernetes.io/name": "CoreDNS", "kubernetes.io/cluster-service": "true"}},
        "spec": {"clusterIP": KUBE_DNS_IP.to_string(),
                 "ports": [{"name": "dns", "port": 53, "protocol": "UDP", "targetPort": 53},
                           {"name": "dns-tcp", "port": 53, "protocol": "TCP", "targetPort": 53}]}
    }))?;
    Api::<Service>::namespaced(kube.clone(), "kube-system").patch("kube-dns", &pp, &Patch::Apply(&svc)).await.context("applying the kube-dns Service")?;
    let name = format!("kube-dns-{node}");
    let slice: EndpointSlice = serde_json::from_value(json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": name, "namespace": "kube-system",
                     "labels": {"kubernetes.io/service-name": "kube-dns", "endpointslice.kubernetes.io/managed-by": MANAGER}},
        "addressType": "IPv4",
        "endpoints": [{"addresses": [server.to_string()], "conditions": {"ready": true, "serving": true, "terminating": false}, "nodeName": node}],
        "ports": [{"name": "dns", "port": 53, "protocol": "UDP"}, {"name": "dns-tcp", "port": 53, "protocol": "TCP"}]
    }))?;
    Api::<EndpointSlice>::namespaced(kube.clone(), "kube-system").patch(&name, &pp, &Patch::Apply(&slice)).await.context("applying the kube-dns EndpointSlice")?;
    Ok(())
}
