//! `proxy_bench`: what a sync of kube-proxy's rules costs at 1,000 Services × 10 endpoints.
//!
//! Prints, each on a line of its own (median of the runs, in milliseconds):
//! - `rule generation, 1000 services x 10 endpoints (full sync)`: the maps from the trackers and
//!   the iptables-restore text (no I/O).
//! - `iptables-restore, 1000 services x 10 endpoints (first sync, empty tables)` and
//!   `(full sync, rules in place)`: the text applied (plus the jump-rule checks) inside a network
//!   namespace the benchmark creates (`kubelab-proxy-bench-<pid>`, deleted at the end).
//! - `one-endpoint change: full sync (generate + iptables-restore)`: one EndpointSlice updated,
//!   then one sync — kubelab writes the whole ruleset every time.
//!
//! Needs root (ip netns, iptables-restore). Run: `cargo run --release -p proxy --example proxy_bench`.

use std::process::Command;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions, EndpointPort, EndpointSlice};
use proxy::config::{EndpointSliceHandler as _, ServiceHandler as _};
use proxy::iptables::proxier::Proxier;
use proxy::iptables::rules::{RulesConfig, write_rules};
use proxy::util::iptables::Iptables;
use proxy::Ipv4Cidr;

const SERVICES: usize = 1000;
const ENDPOINTS: usize = 10;
const RUNS: usize = 7;

struct Netns(String);

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

fn service(i: usize) -> Service {
    let mut s = Service::default();
    s.metadata.namespace = Some("bench".into());
    s.metadata.name = Some(format!("svc-{i}"));
    s.spec = Some(ServiceSpec {
        type_: Some("NodePort".into()),
        cluster_ip: Some(format!("10.96.{}.{}", i / 250, i % 250 + 1)),
        ports: Some(vec![ServicePort { name: Some("http".into()), port: 80, node_port: Some(30000 + i as i32), ..Default::default() }]),
        ..Default::default()
    });
    s
}

fn slice(i: usize, generation: usize) -> EndpointSlice {
    let mut s = EndpointSlice::default();
    s.metadata.namespace = Some("bench".into());
    s.metadata.name = Some(format!("svc-{i}-abcde"));
    s.metadata.labels = Some([("kubernetes.io/service-name".to_string(), format!("svc-{i}"))].into());
    s.address_type = "IPv4".into();
    s.ports = Some(vec![EndpointPort { name: Some("http".into()), port: Some(8080), protocol: Some("TCP".into()), ..Default::default() }]);
    s.endpoints = Some(
        (0..ENDPOINTS)
            .map(|e| {
                let n = i * ENDPOINTS + e + generation;
                Endpoint {
                    addresses: vec![format!("10.{}.{}.{}", 128 + n / 65536, (n / 256) % 256, n % 256)],
                    node_name: Some(format!("node-{}", e % 3)),
                    conditions: Some(EndpointConditions { ready: Some(true), ..Default::default() }),
                    ..Default::default()
                }
            })
            .collect(),
    );
    s
}

fn median(mut v: Vec<Duration>) -> f64 {
    v.sort();
    v[v.len() / 2].as_secs_f64() * 1e3
}

fn main() -> anyhow::Result<()> {
    let cfg = RulesConfig {
        cluster_cidr: Some(Ipv4Cidr::parse("10.128.0.0/9").map_err(anyhow::Error::msg)?),
        masquerade_all: false,
        bridge_netfilter: true,
        nodeport_addresses: vec!["192.168.77.2".parse()?],
    };
    let ns = Netns(format!("kubelab-proxy-bench-{}", std::process::id()));
    anyhow::ensure!(Command::new("ip").args(["netns", "add", &ns.0]).status()?.success(), "ip netns add {} (root needed)", ns.0);
    let proxier = Proxier::new(cfg.clone(), Iptables::in_netns(&ns.0), "node-0".into());
    proxier.on_services_listed((0..SERVICES).map(service).collect());
    proxier.on_endpoint_slices_listed((0..SERVICES).map(|i| slice(i, 0)).collect());

    // Rule generation alone.
    let mut gen_times = Vec::new();
    let mut size = (0, 0, 0);
    for _ in 0..RUNS {
        let start = Instant::now();
        let (s, e, _) = proxier.snapshot();
        let r = write_rules(&cfg, &s, &e, &Default::default(), None);
        gen_times.push(start.elapsed());
        size = (r.nat_rules, r.filter_rules, r.text.len());
    }
    println!("ruleset: {} nat rules, {} filter rules, {} KiB of iptables-restore text", size.0, size.1, size.2 / 1024);
    println!("rule generation, {SERVICES} services x {ENDPOINTS} endpoints (full sync): {:.1} ms", median(gen_times));

    // First sync into empty tables, then full syncs with the rules in place.
    let first = proxier.sync_proxy_rules()?;
    println!(
        "iptables-restore, {SERVICES} services x {ENDPOINTS} endpoints (first sync, empty tables): {:.1} ms (generation {:.1} ms)",
        first.apply.as_secs_f64() * 1e3,
        first.generate.as_secs_f64() * 1e3
    );
    let mut applies = Vec::new();
    let mut totals = Vec::new();
    for _ in 0..RUNS {
        let start = Instant::now();
        let r = proxier.sync_proxy_rules()?;
        totals.push(start.elapsed());
        applies.push(r.apply);
    }
    println!("iptables-restore, {SERVICES} services x {ENDPOINTS} endpoints (full sync, rules in place): {:.1} ms", median(applies));
    println!("full sync total (generate + iptables-restore), {SERVICES} services x {ENDPOINTS} endpoints: {:.1} ms", median(totals));

    // One endpoint changes.
    let mut changes = Vec::new();
    for g in 1..=RUNS {
        let start = Instant::now();
        // Service 7's slice: endpoint addresses shifted by `g`, i.e. one endpoint out, one in.
        proxier.on_endpoint_slice_update(slice(7, g));
        proxier.sync_proxy_rules()?;
        changes.push(start.elapsed());
    }
    println!("one-endpoint change: full sync (generate + iptables-restore): {:.1} ms", median(changes));
    Ok(())
}
