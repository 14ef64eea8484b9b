//! Real traffic through the proxier's rules, in network namespaces this test creates
//! (`kubelab-proxy-<pid>-<tag>-*`), never the host's tables or routes:
//!
//! ```text
//!   pod "a" 10.244.1.2 ─┐                      node: bridge br0 10.244.1.1/24
//!   pod "b" 10.244.1.3 ─┴─ veths on br0 ──────       up0 192.168.77.2/24 (the node's address)
//!                                                    default route → up0 (a veth to a sink namespace)
//! ```
//!
//! TCP servers in the pods answer with their name. Services and EndpointSlices are fed to the
//! proxier through its watch handlers, and the rules it writes are applied inside the node
//! namespace. Every namespace is deleted by a guard, also when the test fails.

mod support;

use std::io::ErrorKind;
use std::net::Ipv4Addr;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use k8s_openapi::api::discovery::v1::{Endpoint as SliceEndpoint, EndpointConditions, EndpointPort, EndpointSlice};
use proxy::config::{EndpointSliceHandler as _, ServiceHandler as _};
use proxy::iptables::proxier::Proxier;
use proxy::iptables::rules::RulesConfig;
use proxy::iptables::{cleanup, safety_net};
use proxy::nftables;
use proxy::proxier::Mode;
use proxy::util::iptables::{Iptables, Table};
use proxy::util::nftables::Nftables;
use proxy::Ipv4Cidr;
use support::{Netns, sh};

/// The node and pod namespaces; deleted on drop.
struct Lab {
    node: String,
    uplink: String,
    pods: Vec<String>,
}

impl Drop for Lab {
    fn drop(&mut self) {
        for ns in self.pods.iter().chain([&self.node, &self.uplink]) {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
    }
}

impl Lab {
    fn exec(&self, ns: &str, args: &[&str]) -> String {
        let mut full = vec!["ip", "netns", "exec", ns];
        full.extend_from_slice(args);
        sh(&full)
    }

    fn new(tag: &str) -> Lab {
        let base = format!("kubelab-proxy-{}-{tag}", std::process::id());
        let lab = Lab { node: format!("{base}-node"), uplink: format!("{base}-up"), pods: vec![format!("{base}-a"), format!("{base}-b")] };
        sh(&["ip", "netns", "add", &lab.node]);
        let n = lab.node.clone();
        // No IPv6: its router solicitations and MLD reports would add to the uplink's counter.
        lab.exec(&n, &["sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1"]);
        lab.exec(&n, &["ip", "link", "set", "lo", "up"]);
        lab.exec(&n, &["ip", "link", "add", "br0", "type", "bridge"]);
        lab.exec(&n, &["ip", "addr", "add", "10.244.1.1/24", "dev", "br0"]);
        lab.exec(&n, &["ip", "link", "set", "br0", "up"]);
        // The uplink: a veth to a namespace that answers nothing, behind a gateway with a fixed
        // MAC (no ARP): every packet the node routes out is one more on up0's tx counter.
        sh(&["ip", "netns", "add", &lab.uplink]);
        lab.exec(&n, &["ip", "link", "add", "up0", "type", "veth", "peer", "name", "sink0", "netns", &lab.uplink]);
        lab.exec(&lab.uplink, &["ip", "link", "set", "sink0", "up"]);
        lab.exec(&n, &["ip", "addr", "add", "192.168.77.2/24", "dev", "up0"]);
        lab.exec(&n, &["ip", "link", "set", "up0", "up"]);
        lab.exec(&n, &["ip", "neigh", "add", "192.168.77.1", "lladdr", "02:00:00:00:00:01", "dev", "up0", "nud", "permanent"]);
        lab.exec(&n, &["ip", "route", "add", "default", "via", "192.168.77.1", "dev", "up0"]);
        lab.exec(&n, &["sysctl", "-qw", "net.ipv4.ip_forward=1"]);
        for (i, pod) in lab.pods.iter().enumerate() {
            sh(&["ip", "netns", "add", pod]);
            let veth = format!("veth{i}");
            lab.exec(&n, &["ip", "link", "add", &veth, "type", "veth", "peer", "name", "eth0", "netns", pod]);
            lab.exec(&n, &["ip", "link", "set", &veth, "master", "br0", "up"]);
            // As the CNI bridge plugin's hairpinMode: a pod may reach itself through a Service.
            lab.exec(&n, &["ip", "link", "set", &veth, "type", "bridge_slave", "hairpin", "on"]);
            let ip = format!("10.244.1.{}/24", i + 2);
            lab.exec(pod, &["ip", "link", "set", "lo", "up"]);
            lab.exec(pod, &["ip", "addr", "add", &ip, "dev", "eth0"]);
            lab.exec(pod, &["ip", "link", "set", "eth0", "up"]);
            lab.exec(pod, &["ip", "route", "add", "default", "via", "10.244.1.1"]);
        }
        lab
    }

    fn uplink_tx_packets(&self) -> u64 {
        self.exec(&self.node, &["cat", "/sys/class/net/up0/statistics/tx_packets"]).trim().parse().expect("a counter")
    }

    fn set_bridge_nf(&self, on: bool) -> bool {
        let path = "/proc/sys/net/bridge/bridge-nf-call-iptables";
        let v = if on { "1" } else { "0" };
        Command::new("ip").args(["netns", "exec", &self.node, "sh", "-c", &format!("echo {v} > {path}")]).status().is_ok_and(|s| s.success())
    }
}

/// A server in `ns` on :8080 that answers every connection with `name`.
fn serve(ns: &str, name: &'static str) {
    support::serve(ns, "0.0.0.0:8080", name);
}

/// Connects from `ns` to `to` (500 ms to connect: the uplink control expects a timeout).
fn call(ns: &str, to: &str) -> Result<String, ErrorKind> {
    support::call(ns, to, Duration::from_millis(500))
}

/// The names answering `n` calls.
fn answers(ns: &str, to: &str, n: usize) -> std::collections::BTreeSet<String> {
    (0..n).map(|_| call(ns, to).unwrap_or_else(|e| panic!("{ns} → {to}: {e:?}"))).collect()
}

fn service(name: &str, ip: &str, node_port: Option<i32>) -> Service {
    let mut s = Service::default();
    s.metadata.namespace = Some("default".into());
    s.metadata.name = Some(name.into());
    s.spec = Some(ServiceSpec {
        type_: Some(if node_port.is_some() { "NodePort" } else { "ClusterIP" }.into()),
        cluster_ip: Some(ip.into()),
        ports: Some(vec![ServicePort { name: Some("http".into()), port: 80, node_port, ..Default::default() }]),
        ..Default::default()
    });
    s
}

fn affinity(mut s: Service) -> Service {
    if let Some(spec) = s.spec.as_mut() {
        spec.session_affinity = Some("ClientIP".into());
    }
    s
}

fn slice(service: &str, ips: &[&str]) -> EndpointSlice {
    let mut s = EndpointSlice::default();
    s.metadata.namespace = Some("default".into());
    s.metadata.name = Some(format!("{service}-x1"));
    s.metadata.labels = Some([("kubernetes.io/service-name".to_string(), service.to_string())].into());
    s.address_type = "IPv4".into();
    s.ports = Some(vec![EndpointPort { name: Some("http".into()), port: Some(8080), protocol: Some("TCP".into()), ..Default::default() }]);
    s.endpoints = Some(
        ips.iter()
            .map(|ip| SliceEndpoint {
                addresses: vec![ip.to_string()],
                node_name: Some("node1".into()),
                conditions: Some(EndpointConditions { ready: Some(true), ..Default::default() }),
                ..Default::default()
            })
            .collect(),
    );
    s
}

fn privileged() -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let tools = Command::new("iptables-restore").arg("--version").output().is_ok_and(|o| o.status.success());
    if !(root && tools) {
        eprintln!("skipped: needs root, ip and iptables-restore (network namespaces)");
    }
    root && tools
}

fn cfg(bridge_netfilter: bool) -> RulesConfig {
    RulesConfig {
        cluster_cidr: Some(Ipv4Cidr::parse("10.244.0.0/16").unwrap()),
        masquerade_all: false,
        bridge_netfilter,
        nodeport_addresses: vec![Ipv4Addr::new(192, 168, 77, 2)],
    }
}

fn proxier(lab: &Lab, bridge_netfilter: bool) -> Arc<Proxier> {
    Arc::new(Proxier::new(cfg(bridge_netfilter), Iptables::in_netns(&lab.node), "node1".into()))
}

#[test]
fn services_reach_their_pods_and_nothing_else_leaves() {
    if !privileged() {
        return;
    }
    let lab = Lab::new("t");
    let p = proxier(&lab, true);
    reach_pods_and_nothing_else_leaves(&lab, &p, Rules::Iptables(Iptables::in_netns(&lab.node)));
}

/// The same with `--proxy-mode nftables`: one table of verdict maps written over netlink.
#[test]
fn nftables_services_reach_their_pods_and_nothing_else_leaves() {
    if !privileged() {
        return;
    }
    let lab = Lab::new("nft");
    let nft = Nftables::in_netns(nftables::rules::TABLE, &lab.node).expect("netlink socket in the node namespace");
    let p = Arc::new(nftables::proxier::Proxier::new(cfg(true), Some(Ipv4Cidr::parse("10.96.0.0/12").unwrap()), nft, "node1".into()));
    let nft = Nftables::in_netns(nftables::rules::TABLE, &lab.node).expect("netlink socket");
    reach_pods_and_nothing_else_leaves(&lab, &p, Rules::Nftables(nft));
}

/// How a test looks at the rules of one mode.
enum Rules {
    Iptables(Iptables),
    Nftables(Nftables),
}

impl Rules {
    /// The cluster-wide chains of the Services with endpoints.
    fn service_chains(&self) -> usize {
        match self {
            Rules::Iptables(ipt) => ipt.save(Table::Nat).expect("save").matches(":KUBE-SVC-").count(),
            Rules::Nftables(nft) => nft.list_chains().expect("list chains").iter().filter(|c| c.starts_with("service-") && nftables::rules::is_per_service(c)).count(),
        }
    }

    /// `--cleanup` of this mode's rules: nothing of ours stays.
    fn cleanup(&self) {
        match self {
            Rules::Iptables(ipt) => {
                let deleted = cleanup::cleanup_leftovers(ipt).expect("cleanup");
                assert!(deleted >= 10, "{deleted} chains deleted");
                let all = format!("{}{}", ipt.save(Table::Nat).unwrap(), ipt.save(Table::Filter).unwrap());
                assert!(!all.contains("KUBE-") && !all.contains("KUBELAB-"), "left behind:\n{all}");
                assert_eq!(cleanup::cleanup_leftovers(ipt).expect("cleanup again"), 0);
            }
            Rules::Nftables(nft) => {
                assert!(nftables::cleanup::cleanup_leftovers(nft).expect("cleanup"), "the table was there");
                assert!(!nft.table_exists().expect("table"), "the table is gone");
                assert!(!nftables::cleanup::cleanup_leftovers(nft).expect("cleanup again"));
            }
        }
    }
}

fn reach_pods_and_nothing_else_leaves<M: Mode>(lab: &Lab, p: &proxy::proxier::Proxier<M>, rules: Rules) {
    let (node, a, b) = (lab.node.clone(), lab.pods[0].clone(), lab.pods[1].clone());
    assert!(lab.set_bridge_nf(true) || std::fs::metadata("/proc/sys/net/bridge").is_err());
    serve(&a, "a");
    serve(&b, "b");
    assert_eq!(call(&node, "10.244.1.3:8080"), Ok("b".into()), "the lab itself works");

    // The control: before the safety net, an unassigned service address leaves by the default route.
    let before = lab.uplink_tx_packets();
    assert_eq!(call(&node, "10.96.0.99:80"), Err(ErrorKind::TimedOut));
    assert!(lab.uplink_tx_packets() > before, "without the safety net the SYN goes out through up0");

    let ipt = Iptables::in_netns(&node);
    safety_net::ensure(&ipt, Ipv4Cidr::parse("10.96.0.0/12").unwrap()).expect("safety net");
    p.on_services_listed(vec![
        service("web", "10.96.0.10", Some(30080)),
        service("empty", "10.96.0.11", None),
        service("self", "10.96.0.12", None),
        affinity(service("sticky", "10.96.0.13", None)),
    ]);
    p.on_endpoint_slices_listed(vec![
        slice("web", &["10.244.1.2", "10.244.1.3"]),
        slice("self", &["10.244.1.2"]),
        slice("sticky", &["10.244.1.2", "10.244.1.3"]),
    ]);
    assert!(p.is_initialized());
    let r = p.sync_proxy_rules().expect("sync");
    assert_eq!((r.services, r.endpoints), (4, 5));

    let both: std::collections::BTreeSet<String> = ["a".to_string(), "b".to_string()].into();
    // ClusterIP from the node (nat OUTPUT) and from a pod on the bridge (PREROUTING, same-bridge reply).
    assert_eq!(answers(&node, "10.96.0.10:80", 30), both, "node → ClusterIP reaches both backends");
    assert_eq!(answers(&a, "10.96.0.10:80", 30), both, "pod → ClusterIP reaches both backends");
    // Hairpin: a pod reaching itself through its Service.
    assert_eq!(answers(&a, "10.96.0.12:80", 3), ["a".to_string()].into());
    // ClientIP affinity: each client keeps its endpoint (uniform picks would differ with p > 99.9 %).
    assert_eq!(answers(&node, "10.96.0.13:80", 12).len(), 1, "node → sticky Service");
    assert_eq!(answers(&b, "10.96.0.13:80", 12).len(), 1, "pod → sticky Service");
    // NodePort on the node's address, from a pod and from the node.
    assert_eq!(answers(&b, "192.168.77.2:30080", 20), both, "pod → NodePort");
    assert_eq!(answers(&node, "192.168.77.2:30080", 20), both, "node → NodePort");

    // No endpoints: refused. An unassigned address or port in the range: refused, and nothing leaves.
    let before = lab.uplink_tx_packets();
    for from in [&node, &a] {
        assert_eq!(call(from, "10.96.0.11:80"), Err(ErrorKind::ConnectionRefused), "{from} → Service without endpoints");
        assert_eq!(call(from, "10.96.0.99:80"), Err(ErrorKind::ConnectionRefused), "{from} → address no Service holds");
        assert_eq!(call(from, "10.96.0.10:81"), Err(ErrorKind::ConnectionRefused), "{from} → port the Service lacks");
    }
    assert_eq!(lab.uplink_tx_packets(), before, "no packet to the service range left through the default route");

    // One endpoint gone: the next sync sends everything to the other.
    p.on_endpoint_slice_update(slice("web", &["10.244.1.2"]));
    p.sync_proxy_rules().expect("sync");
    assert_eq!(answers(&b, "10.96.0.10:80", 10), ["a".to_string()].into());
    // A Service deleted: its chains go, its address is refused by the safety net.
    p.on_service_delete(&service("sticky", "10.96.0.13", None));
    p.sync_proxy_rules().expect("sync");
    assert_eq!(call(&a, "10.96.0.13:80"), Err(ErrorKind::ConnectionRefused));
    assert_eq!(rules.service_chains(), 2, "web and self only");

    // --cleanup: no chain of ours and no jump to one stays.
    rules.cleanup();
}


/// Without bridge netfilter the proxier masquerades pod traffic to cluster IPs: a pod still
/// reaches a Service backed by a pod on its own bridge.
#[test]
fn same_bridge_without_bridge_netfilter() {
    if !privileged() {
        return;
    }
    let lab = Lab::new("nobr");
    let (a, b) = (lab.pods[0].clone(), lab.pods[1].clone());
    if !lab.set_bridge_nf(false) {
        eprintln!("this kernel has no per-namespace bridge-nf-call-iptables; the fallback is what runs anyway");
    }
    serve(&b, "b");
    let p = proxier(&lab, false);
    p.on_services_listed(vec![service("web", "10.96.0.10", None)]);
    p.on_endpoint_slices_listed(vec![slice("web", &["10.244.1.3"])]);
    p.sync_proxy_rules().expect("sync");
    let start = Instant::now();
    assert_eq!(call(&a, "10.96.0.10:80"), Ok("b".into()), "pod a → ClusterIP → pod b on the same bridge");
    assert!(start.elapsed() < Duration::from_secs(2));
    let _ = (a, lab);
}

/// A table as a set of chains and each chain's rules in order: what iptables-save prints,
/// without counters, comments, and the order of chains (which the nft backend does not keep).
fn ruleset(ipt: &Iptables, table: Table) -> (std::collections::BTreeSet<String>, std::collections::BTreeMap<String, Vec<String>>) {
    let save = ipt.save(table).expect("iptables-save");
    let mut chains = std::collections::BTreeSet::new();
    let mut rules: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for l in save.lines() {
        if let Some(c) = l.strip_prefix(':') {
            chains.insert(c.split(' ').next().unwrap_or_default().to_string());
        } else if let Some(r) = l.strip_prefix("-A ") {
            let chain = r.split(' ').next().unwrap_or_default().to_string();
            rules.entry(chain).or_default().push(l.to_string());
        }
    }
    (chains, rules)
}

/// Partial syncs (only the chains whose rules change rewritten) leave, change after change, the
/// same nat and filter tables as a full sync of the same Services into a fresh namespace; a
/// failed partial sync makes the next one full.
#[test]
fn partial_syncs_leave_what_a_full_sync_writes() {
    if !privileged() {
        return;
    }
    let (a, b) = (Netns::new("pa"), Netns::new("pb"));
    let cfg = cfg(true);
    let (ipt_a, ipt_b) = (Iptables::in_netns(&a.0), Iptables::in_netns(&b.0));
    let p = Proxier::new(cfg.clone(), ipt_a.clone(), "node1".into());
    let mut services = vec![
        service("web", "10.96.0.10", Some(30080)),
        service("empty", "10.96.0.11", None),
        service("self", "10.96.0.12", None),
        affinity(service("sticky", "10.96.0.13", None)),
    ];
    let mut slices = vec![
        slice("web", &["10.244.1.2", "10.244.1.3"]),
        slice("self", &["10.244.1.2"]),
        slice("sticky", &["10.244.1.2", "10.244.1.3"]),
    ];
    p.on_services_listed(services.clone());
    p.on_endpoint_slices_listed(slices.clone());
    assert!(p.sync_proxy_rules().expect("first sync").full, "the first sync is full");

    // Namespace b: a new proxier, one full sync of the same objects.
    let same_as_full = |services: &[Service], slices: &[EndpointSlice], step: &str| {
        let q = Proxier::new(cfg.clone(), ipt_b.clone(), "node1".into());
        q.on_services_listed(services.to_vec());
        q.on_endpoint_slices_listed(slices.to_vec());
        assert!(q.sync_proxy_rules().expect("full sync").full);
        for t in [Table::Nat, Table::Filter] {
            assert_eq!(ruleset(&ipt_a, t), ruleset(&ipt_b, t), "{step}: {t:?} after partial syncs differs from a full sync");
        }
    };
    same_as_full(&services, &slices, "first sync");

    type Step = Box<dyn Fn(&Proxier, &mut Vec<Service>, &mut Vec<EndpointSlice>)>;
    let steps: Vec<(&str, usize, Step)> = vec![
        ("one endpoint gone", 1, Box::new(|p, _, sl| {
            sl[0] = slice("web", &["10.244.1.2"]);
            p.on_endpoint_slice_update(sl[0].clone());
        })),
        ("a Service deleted", 0, Box::new(|p, sv, sl| {
            p.on_service_delete(&sv.remove(3));
            p.on_endpoint_slice_delete(&sl.remove(2));
        })),
        ("a Service added", 3, Box::new(|p, sv, sl| {
            sv.push(service("new", "10.96.0.14", Some(30081)));
            sl.push(slice("new", &["10.244.1.3"]));
            p.on_service_update(sv[3].clone());
            p.on_endpoint_slice_update(sl[2].clone());
        })),
        ("a Service's last endpoints gone", 0, Box::new(|p, _, sl| {
            p.on_endpoint_slice_delete(&sl.remove(1));
        })),
        ("a NodePort Service made a ClusterIP", 0, Box::new(|p, sv, _| {
            sv[0] = service("web", "10.96.0.10", None);
            p.on_service_update(sv[0].clone());
        })),
    ];
    for (step, written, change) in steps {
        change(&p, &mut services, &mut slices);
        let r = p.sync_proxy_rules().expect(step);
        assert!(!r.full, "{step}: partial");
        assert_eq!(r.chains_written, written, "{step}: only the chains whose rules change are written");
        same_as_full(&services, &slices, step);
    }
    assert_eq!(p.metrics.sync_partial_proxy_rules_latency.get_sample_count(), 5);

    // Something else jumps to web's endpoint chain, so deleting it fails: the partial sync that
    // tries fails, and the next sync, once the jump is gone, is full.
    let sep = ruleset(&ipt_a, Table::Nat).0.into_iter().find(|c| c.starts_with("KUBE-SEP-")).expect("an endpoint chain");
    sh(&["ip", "netns", "exec", &a.0, "iptables", "-t", "nat", "-A", "OUTPUT", "-j", &sep]);
    services.clear();
    slices.clear();
    p.on_services_listed(vec![]);
    p.on_endpoint_slices_listed(vec![]);
    assert!(p.sync_proxy_rules().is_err(), "a referenced chain cannot be deleted");
    assert_eq!(p.metrics.iptables_partial_restore_failures_total.get(), 1);
    sh(&["ip", "netns", "exec", &a.0, "iptables", "-t", "nat", "-D", "OUTPUT", "-j", &sep]);
    assert!(p.sync_proxy_rules().expect("after the failure").full, "a failed partial sync makes the next one full");
    same_as_full(&services, &slices, "everything deleted");
    let metrics = p.metrics.render();
    assert!(metrics.contains("kubeproxy_sync_full_proxy_rules_duration_seconds_count 2"), "{metrics}");

    // Once the sync period has passed since the last full sync, the next sync is full.
    let z = Proxier::new(cfg.clone(), ipt_b.clone(), "node1".into()).with_full_sync_period(Duration::ZERO);
    z.on_services_listed(vec![service("web", "10.96.0.10", None)]);
    z.on_endpoint_slices_listed(vec![slice("web", &["10.244.1.2"])]);
    assert!(z.sync_proxy_rules().expect("sync").full);
    z.on_endpoint_slice_update(slice("web", &["10.244.1.3"]));
    assert!(z.sync_proxy_rules().expect("sync").full, "the sync period has passed");
}

/// The nftables mode's partial syncs, change after change, leave the chains and sets a full
/// sync of the same Services writes into a fresh namespace (their rules and elements are
/// compared by the unit tests' model of the table); the table deleted behind the proxier's
/// back makes the next partial sync fail and the one after it, full, writes it all again.
#[test]
fn nftables_partial_syncs_leave_what_a_full_sync_writes() {
    if !privileged() {
        return;
    }
    let (a, b) = (Netns::new("na"), Netns::new("nb"));
    let table = nftables::rules::TABLE;
    let nft = |ns: &Netns| Nftables::in_netns(table, &ns.0).expect("netlink socket");
    let range = Some(Ipv4Cidr::parse("10.96.0.0/12").unwrap());
    let p = nftables::proxier::Proxier::new(cfg(true), range, nft(&a), "node1".into());
    let names = |n: &Nftables| {
        let mut chains = n.list_chains().expect("chains");
        let mut sets = n.list_sets().expect("sets");
        chains.sort();
        sets.sort();
        (chains, sets)
    };
    let same_as_full = |services: &[Service], slices: &[EndpointSlice], step: &str| {
        let q = nftables::proxier::Proxier::new(cfg(true), range, nft(&b), "node1".into());
        q.on_services_listed(services.to_vec());
        q.on_endpoint_slices_listed(slices.to_vec());
        assert!(q.sync_proxy_rules().expect("full sync").full);
        assert_eq!(names(&nft(&a)), names(&nft(&b)), "{step}: the table after partial syncs differs from a full sync's");
    };
    let mut services = vec![service("web", "10.96.0.10", Some(30080)), service("empty", "10.96.0.11", None), affinity(service("sticky", "10.96.0.13", None))];
    let mut slices = vec![slice("web", &["10.244.1.2", "10.244.1.3"]), slice("sticky", &["10.244.1.2", "10.244.1.3"])];
    p.on_services_listed(services.clone());
    p.on_endpoint_slices_listed(slices.clone());
    assert!(p.sync_proxy_rules().expect("first sync").full);
    same_as_full(&services, &slices, "first sync");

    type Change = Box<dyn Fn(&mut Vec<Service>, &mut Vec<EndpointSlice>)>;
    let changes: Vec<(&str, Change)> = vec![
        ("one endpoint replaced", Box::new(|_, sl| sl[0] = slice("web", &["10.244.1.2", "10.244.1.4"]))),
        ("a sticky endpoint gone", Box::new(|_, sl| sl[1] = slice("sticky", &["10.244.1.3"]))),
        ("a Service added", Box::new(|sv, sl| {
            sv.push(service("new", "10.96.0.14", Some(30081)));
            sl.push(slice("new", &["10.244.1.3"]));
        })),
        ("a Service deleted", Box::new(|sv, sl| {
            sv.remove(2);
            sl.remove(1);
        })),
        ("a Service's last endpoints gone", Box::new(|_, sl| {
            sl.remove(0);
        })),
    ];
    for (step, change) in changes {
        change(&mut services, &mut slices);
        p.on_services_listed(services.clone());
        p.on_endpoint_slices_listed(slices.clone());
        let r = p.sync_proxy_rules().unwrap_or_else(|e| panic!("{step}: {e}"));
        assert!(!r.full, "{step}: partial");
        same_as_full(&services, &slices, step);
    }

    // The table deleted behind the proxier's back: the next partial sync fails (its sets are
    // gone), the one after it is full and writes everything again.
    let mut tx = proxy::util::nftables::Transaction::new();
    tx.push(proxy::util::nftables::Op::DeleteTable);
    nft(&a).apply(&tx).expect("delete the table");
    slices.push(slice("empty", &["10.244.1.2"]));
    p.on_endpoint_slices_listed(slices.clone());
    assert!(p.sync_proxy_rules().is_err(), "a partial sync into a deleted table");
    assert_eq!(p.metrics.nftables_sync_failures_total.get(), 1);
    assert!(p.sync_proxy_rules().expect("after the failure").full, "a failed sync makes the next one full");
    same_as_full(&services, &slices, "after the failure");
}
