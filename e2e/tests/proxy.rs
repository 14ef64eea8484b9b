//! `kubelab proxy` end to end: the real binary, run inside a network namespace this test creates
//! (`kubelab-proxy-e2e-<pid>`; the host's tables are never touched), on a kubelab store + API
//! server + controller manager. The proxy reaches the API server on the host's loopback through
//! a forwarder this test runs (a listener inside the namespace, a connection from outside it):
//! no address or route is added on the host.
//!
//! A Service and a Ready pod (made Ready by posting its status; no node agent) go through the
//! EndpointSlice controller and the proxy's watches into the namespace's rules; the pod's
//! deletion turns them into a REJECT; /healthz answers; the safety net stays when the proxy
//! stops; `kubelab proxy --cleanup` removes everything. Once with `--proxy-mode iptables`
//! (read back with `iptables-save`), once with `--proxy-mode nftables` (read back with Debian's
//! `nft list table ip kube-proxy`: the real nft must understand what kubelab wrote over netlink).

use std::io::{Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd as _;
use std::process::Command;
use std::time::Duration;

use e2e::apiserver::{ApiCluster, ApiOptions};
use e2e::poll_until;
use e2e::process::Process;
use k8s_openapi::api::core::v1::{Pod, Service};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;

struct Netns(String);

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

fn in_netns<T: Send + 'static>(ns: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let path = format!("/var/run/netns/{ns}");
    std::thread::spawn(move || {
        let file = std::fs::File::open(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        // SAFETY: setns on this thread only, with a namespace file held open.
        assert_eq!(unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) }, 0, "setns {path}");
        f()
    })
    .join()
    .expect("netns thread")
}

/// 127.0.0.1:<returned port> inside `ns` forwards to 127.0.0.1:`to` on the host.
fn forward_into(ns: &str, to: u16) -> u16 {
    let listener = in_netns(ns, || TcpListener::bind("127.0.0.1:0").expect("bind in the namespace"));
    let port = listener.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        for inside in listener.incoming().flatten() {
            let Ok(outside) = TcpStream::connect(("127.0.0.1", to)) else { continue };
            for (mut from, mut into) in [(inside.try_clone().expect("clone"), outside.try_clone().expect("clone")), (outside, inside)] {
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut from, &mut into);
                    let _ = into.shutdown(std::net::Shutdown::Write);
                });
            }
        }
    });
    port
}

fn iptables_save(ns: &str) -> String {
    let out = Command::new("ip").args(["netns", "exec", ns, "iptables-save"]).output().expect("iptables-save");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `iptables-save`, then (nftables mode) `nft list table ip kube-proxy`.
fn rules(ns: &str, mode: &str) -> String {
    let mut out = iptables_save(ns);
    if mode == "nftables" {
        let nft = Command::new("ip").args(["netns", "exec", ns, "nft", "list", "table", "ip", "kube-proxy"]).output().expect("nft");
        out.push_str(&String::from_utf8_lossy(&nft.stdout));
        out.push_str(&String::from_utf8_lossy(&nft.stderr));
    }
    out
}

fn healthz(ns: &str) -> String {
    in_netns(ns, || {
        let Ok(mut s) = TcpStream::connect("127.0.0.1:10256") else { return String::new() };
        let _ = s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        out
    })
}

async fn wait_rules(ns: &str, mode: &str, what: &str, needles: &[&str]) -> String {
    poll_until(what, Duration::from_secs(20), Duration::from_millis(100), || async {
        let save = rules(ns, mode);
        Ok(needles.iter().all(|n| save.contains(n)).then_some(save))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", rules(ns, mode)))
}

#[tokio::test]
async fn proxy_follows_services_and_endpoint_slices_into_a_namespaces_rules() {
    follow_services_and_endpoint_slices("iptables").await;
}

#[tokio::test]
async fn nftables_proxy_follows_services_and_endpoint_slices_into_a_namespaces_rules() {
    follow_services_and_endpoint_slices("nftables").await;
}

async fn follow_services_and_endpoint_slices(mode: &str) {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 || !Command::new("iptables-save").arg("--version").output().is_ok_and(|o| o.status.success()) {
        eprintln!("skipped: needs root, ip and iptables (network namespaces)");
        return;
    }
    let c = ApiCluster::start(ApiOptions { controller_manager: true, ..ApiOptions::default() }).await.expect("start the cluster");
    let ns = Netns(format!("kubelab-proxy-e2e-{}-{mode}", std::process::id()));
    assert!(Command::new("ip").args(["netns", "add", &ns.0]).status().expect("ip").success());
    assert!(Command::new("ip").args(["netns", "exec", &ns.0, "ip", "link", "set", "lo", "up"]).status().expect("ip").success());
    let port = forward_into(&ns.0, c.port());

    let bin = e2e::kubelab_bin().expect("kubelab binary");
    let args: Vec<String> = [
        "netns", "exec", &ns.0, bin.to_str().expect("utf-8 path"), "proxy",
        "--master", &format!("http://127.0.0.1:{port}"), "--hostname-override", "n1",
        "--cluster-cidr", "10.244.0.0/16", "--service-cluster-ip-range", "10.96.0.0/12",
        "--healthz-bind-address", "127.0.0.1:10256", "--iptables-min-sync-period", "100ms", "--proxy-mode", mode,
    ]
    .map(String::from)
    .to_vec();
    let log_dir = c.root().join("proxy");
    let mut proxy = Process::spawn("proxy", std::path::Path::new("ip"), &args, &log_dir, &[("RUST_LOG".into(), "info".into())]).expect("start kubelab proxy");

    // The safety net is in before anything is synced.
    wait_rules(&ns.0, mode, "the safety net", &[":KUBELAB-SERVICE-RANGE", "-d 10.96.0.0/12", "-j KUBELAB-SERVICE-RANGE"]).await;

    let client = c.kube_client().expect("client");
    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    let svc: Service = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
        "spec": {"selector": {"app": "web"}, "ports": [{"name": "http", "port": 80, "targetPort": 8080}]},
    }))
    .expect("valid service");
    let svc = services.create(&PostParams::default(), &svc).await.expect("create service");
    let cluster_ip = svc.spec.and_then(|s| s.cluster_ip).expect("a cluster IP");

    // No endpoints yet: a REJECT in the filter table (iptables), an element of the
    // no-endpoint-services map that goes to the reject chain (nftables).
    let no_endpoints = match mode {
        "iptables" => vec!["default/web:http has no endpoints".to_string(), format!("-d {cluster_ip}/32")],
        _ => vec![format!("{cluster_ip} . tcp . 80 : goto reject-chain")],
    };
    let no_endpoints: Vec<&str> = no_endpoints.iter().map(String::as_str).collect();
    wait_rules(&ns.0, mode, "the REJECT of a Service without endpoints", &no_endpoints).await;

    // A Ready pod on n1: the EndpointSlice controller lists it, the proxy DNATs to it.
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pod: Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web-1", "labels": {"app": "web"}},
        "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "busybox", "ports": [{"containerPort": 8080}]}]},
    }))
    .expect("valid pod");
    pods.create(&PostParams::default(), &pod).await.expect("create pod");
    let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let status = json!({"status": {"phase": "Running", "podIP": "10.244.1.5", "podIPs": [{"ip": "10.244.1.5"}],
        "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": now}]}});
    pods.patch_status("web-1", &PatchParams::default(), &Patch::Strategic(&status)).await.expect("post pod status");
    let dnat = match mode {
        "iptables" => vec!["DNAT --to-destination 10.244.1.5:8080".to_string(), "default/web:http cluster IP".to_string()],
        _ => vec!["dnat to 10.244.1.5:8080".to_string(), format!("{cluster_ip} . tcp . 80 : goto service-")],
    };
    let dnat: Vec<&str> = dnat.iter().map(String::as_str).collect();
    let save = wait_rules(&ns.0, mode, "the DNAT to the pod", &dnat).await;
    assert!(!save.contains(no_endpoints[0]), "{save}");

    let health = healthz(&ns.0);
    assert!(health.starts_with("HTTP/1.1 200"), "{health}");
    assert!(health.contains("\"lastUpdated\":\"20"), "{health}");

    // The pod goes: back to REJECT, the per-Service chains deleted.
    pods.delete("web-1", &DeleteParams { grace_period_seconds: Some(0), ..Default::default() }).await.expect("delete pod");
    let save = wait_rules(&ns.0, mode, "the REJECT after the pod's deletion", &no_endpoints).await;
    assert!(!save.contains("10.244.1.5"), "{save}");

    // Stopped, the proxy leaves its rules (the safety net among them) in place.
    proxy.terminate();
    let save = rules(&ns.0, mode);
    let kept = if mode == "iptables" { ":KUBE-SERVICES" } else { "table ip kube-proxy" };
    assert!(save.contains(":KUBELAB-SERVICE-RANGE") && save.contains(kept), "{save}");

    // --cleanup: nothing of ours stays.
    let out = Command::new("ip").args(["netns", "exec", &ns.0]).arg(&bin).args(["proxy", "--cleanup"]).output().expect("kubelab proxy --cleanup");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let save = rules(&ns.0, mode);
    assert!(!save.contains("KUBE-") && !save.contains("KUBELAB-") && !save.contains("table ip kube-proxy {"), "left behind:\n{save}");
}
