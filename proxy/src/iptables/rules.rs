//! Mirrors the rule-writing half of kube-proxy's iptables/proxier.go (`syncProxyRules`): every
//! Service port and its endpoints turned into one iptables-restore text for the `filter` and
//! `nat` tables. A pure function: the same maps give the same text, byte for byte.
//!
//! A packet to a Service goes (nat table, PREROUTING for traffic from pods and other hosts,
//! OUTPUT for the node's own):
//!
//! 1. `KUBE-SERVICES`: one rule per cluster IP:port (and external IP) jumps to the port's chain;
//!    the last rule sends traffic to the node's own addresses on to `KUBE-NODEPORTS`.
//! 2. `KUBE-NODEPORTS`: one rule per node port, to the port's `KUBE-EXT-` chain.
//! 3. `KUBE-EXT-<hash>` (traffic from outside): marks it for masquerading (policy `Cluster`), or
//!    (policy `Local`) sends pod and node traffic cluster-wide and the rest to the local endpoints.
//! 4. `KUBE-SVC-<hash>` (all endpoints) / `KUBE-SVL-<hash>` (this node's): marks traffic from
//!    outside the cluster CIDR for masquerading, then picks an endpoint: rule *i* of *n* matches
//!    with probability 1/(n−i), which makes the choice uniform; with ClientIP affinity, a
//!    `recent` match first sends a client back to the endpoint it had.
//! 5. `KUBE-SEP-<hash>`: masquerades an endpoint talking to itself (hairpin), then DNATs.
//! 6. `KUBE-POSTROUTING` masquerades what `KUBE-MARK-MASQ` marked (0x4000).
//!
//! A port without usable endpoints gets a `REJECT` in the filter table instead (`KUBE-SERVICES`
//! for its cluster IP, `KUBE-EXTERNAL-SERVICES` for its node port and external IPs): the client
//! gets an ICMP port unreachable, which its TCP stack reports as "connection refused".
//!
//! **Partial syncs** (kube-proxy ≥ 1.27, `MinimizeIPTablesRestore`): given the Services that
//! changed since the last successful sync, [`write_rules`] still writes every top-level chain
//! (`KUBE-SERVICES`, `KUBE-NODEPORTS`, `KUBE-EXTERNAL-SERVICES`, `KUBE-FORWARD`, …) but leaves
//! out the per-Service chains (`KUBE-SVC-`/`KUBE-SVL-`/`KUBE-EXT-`/`KUBE-SEP-`) of every other
//! Service: with `--noflush`, a chain the input does not declare keeps its rules. Those chains
//! still count as in use, so that only the chains of removed Services and endpoints are deleted.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::net::Ipv4Addr;

use crate::endpoint::Endpoint;
use crate::endpointschangetracker::EndpointsMap;
use crate::serviceport::{ServicePortInfo, ServicePortName};
use crate::servicechangetracker::ServicePortMap;
use crate::topology::categorize_endpoints;
use crate::util::cidr::Ipv4Cidr;

pub const KUBE_SERVICES: &str = "KUBE-SERVICES";
pub const KUBE_EXTERNAL_SERVICES: &str = "KUBE-EXTERNAL-SERVICES";
pub const KUBE_NODEPORTS: &str = "KUBE-NODEPORTS";
pub const KUBE_POSTROUTING: &str = "KUBE-POSTROUTING";
pub const KUBE_MARK_MASQ: &str = "KUBE-MARK-MASQ";
pub const KUBE_FORWARD: &str = "KUBE-FORWARD";
/// The bit `KUBE-MARK-MASQ` sets and `KUBE-POSTROUTING` masquerades (`--iptables-masquerade-bit` 14).
pub const MASQ_MARK: &str = "0x4000";

/// The prefixes of the per-Service chains: a chain with one of them that the new rules do not
/// use is stale and deleted.
pub const PER_SERVICE_PREFIXES: [&str; 4] = ["KUBE-SVC-", "KUBE-SVL-", "KUBE-EXT-", "KUBE-SEP-"];

/// What the rules depend on besides the Services and endpoints.
#[derive(Clone, Debug, Default)]
pub struct RulesConfig {
    /// `--cluster-cidr`: traffic to a cluster IP from outside it is masqueraded.
    pub cluster_cidr: Option<Ipv4Cidr>,
    /// `--masquerade-all`: all traffic to a cluster IP is masqueraded.
    pub masquerade_all: bool,
    /// Whether bridged traffic passes through iptables (`net.bridge.bridge-nf-call-iptables=1`).
    /// Without it, a pod reaching a Service backed by a pod on the same bridge would get the
    /// reply straight from the pod's address, which conntrack never un-DNATs: so traffic from
    /// the cluster CIDR to a cluster IP is masqueraded too (the reply then comes back through
    /// the node).
    pub bridge_netfilter: bool,
    /// The node's addresses node ports answer on (`--nodeport-addresses`).
    pub nodeport_addresses: Vec<Ipv4Addr>,
}

/// The text for `iptables-restore --noflush`, and the nat chains it leaves.
#[derive(Debug)]
pub struct Ruleset {
    pub text: String,
    /// Every per-Service nat chain in use after the text is applied, written by it or (in a
    /// partial sync) left in place (the next sync's stale-chain check).
    pub nat_chains: BTreeSet<String>,
    /// How many per-Service nat chains the text declares and writes.
    pub nat_chains_written: usize,
    /// Rules written, nat and filter (kube-proxy's `sync_proxy_rules_iptables_total`).
    pub nat_rules: usize,
    pub filter_rules: usize,
    /// Every top-level chain's rules as the tables hold them once the text is applied (the
    /// next partial sync leaves out those that stay the same).
    pub top_chains: TopChains,
}

/// The rules of each top-level chain (`KUBE-SERVICES`, `KUBE-NODEPORTS`, …), by table and chain
/// (`nat KUBE-SERVICES`), one rule per line.
pub type TopChains = BTreeMap<String, String>;

/// kube-proxy's `portProtoHash`: 16 base32 characters of a hash of the port's name and protocol.
/// kube-proxy uses SHA-256; kubelab a 128-bit FNV-1a (no cryptography is needed, only names that
/// differ and fit iptables' 28 characters), so the names differ from Kubernetes'.
pub fn port_proto_hash(s: &str, protocol: &str) -> String {
    const ALPHABET: &[u8; 32] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
    let mut h: u128 = 0x6c62272e07bb014262b821756295c58d;
    for b in s.bytes().chain(protocol.bytes()) {
        h ^= u128::from(b);
        h = h.wrapping_mul(0x0000000001000000000000000000013B);
    }
    (0..16).map(|i| ALPHABET[((h >> (123 - 5 * i)) & 31) as usize] as char).collect()
}

pub fn service_chain(name: &ServicePortName) -> String {
    format!("KUBE-SVC-{}", port_proto_hash(&name.to_string(), name.protocol.upper()))
}

pub fn service_local_chain(name: &ServicePortName) -> String {
    format!("KUBE-SVL-{}", port_proto_hash(&name.to_string(), name.protocol.upper()))
}

pub fn external_chain(name: &ServicePortName) -> String {
    format!("KUBE-EXT-{}", port_proto_hash(&name.to_string(), name.protocol.upper()))
}

pub fn endpoint_chain(name: &ServicePortName, ep: &Endpoint) -> String {
    format!("KUBE-SEP-{}", port_proto_hash(&format!("{name}{}{ep}", name.protocol.upper()), ""))
}

/// kube-proxy's `computeProbability`: ten decimals, as iptables prints them back.
pub fn probability(n: usize) -> String {
    format!("{:.10}", 1.0 / n as f64)
}

/// The Services (namespace, name) whose ports or endpoints changed since the last successful
/// sync (kube-proxy's `UpdatedServices`).
pub type ChangedServices = BTreeSet<(String, String)>;

#[derive(Default)]
struct Buffers {
    filter_rules: Vec<String>,
    /// Per-Service chains declared in the text.
    nat_chains: Vec<String>,
    /// Every per-Service chain in use, written or skipped.
    active_nat_chains: BTreeSet<String>,
    /// Rules of per-Service nat chains.
    nat_rules: Vec<String>,
    /// Rules of the top-level nat chains (`KUBE-SERVICES`, `KUBE-NODEPORTS`).
    top_nat_rules: Vec<String>,
    /// nat rules in use, written or skipped (the metric counts both, as kube-proxy's).
    nat_rule_count: usize,
    /// The Service being written is unchanged in a partial sync: its own chains are left out.
    skip: bool,
}

impl Buffers {
    /// A rule in a top-level chain: written whenever its chain is (see [`write_rules`]).
    fn top(&mut self, rule: String) {
        self.nat_rule_count += 1;
        self.top_nat_rules.push(rule);
    }
    /// A per-Service chain: in use, declared unless skipped.
    fn chain(&mut self, name: &str) {
        self.active_nat_chains.insert(name.to_string());
        if !self.skip {
            self.nat_chains.push(name.to_string());
        }
    }
    /// A rule in a per-Service chain: written unless skipped (and then not even formatted: a
    /// partial sync of one Service among thousands would spend most of its time formatting).
    fn rule(&mut self, rule: impl FnOnce() -> String) {
        self.nat_rule_count += 1;
        if !self.skip {
            self.nat_rules.push(rule());
        }
    }
}

/// Writes the ruleset: all of it when `changed` is None (a full sync); otherwise (a partial
/// sync) only the chains of the Services in `changed` and the top-level chains — except, when
/// `written_top` says how the last successful sync left them, those whose rules stay the same
/// (kubelab's addition to kube-proxy's partial sync, which rewrites `KUBE-SERVICES` and
/// `KUBE-NODEPORTS` every time: with a thousand Services most of a one-endpoint sync's time).
/// `existing_nat_chains` are the nat table's chains now (from iptables-save, or the previous
/// sync): those of ours no longer used are deleted.
pub fn write_rules(
    cfg: &RulesConfig,
    services: &ServicePortMap,
    endpoints: &EndpointsMap,
    existing_nat_chains: &BTreeSet<String>,
    changed: Option<&ChangedServices>,
    written_top: Option<&TopChains>,
) -> Ruleset {
    let mut b = Buffers::default();
    let no_endpoints = Vec::new();
    for svc in services.values() {
        let eps = endpoints.get(&svc.name).unwrap_or(&no_endpoints);
        b.skip = changed.is_some_and(|c| !c.contains(&(svc.name.namespace.clone(), svc.name.name.clone())));
        write_service(cfg, svc, eps, &mut b);
    }
    b.skip = false;
    let comment = "\"kubernetes service nodeports; NOTE: this must be the last rule in this chain\"";
    for addr in &cfg.nodeport_addresses {
        b.top(format!("-A {KUBE_SERVICES} -m comment --comment {comment} -d {addr}/32 -j {KUBE_NODEPORTS}"));
    }

    let ours = b.active_nat_chains;
    let stale: Vec<&String> = existing_nat_chains
        .iter()
        .filter(|c| PER_SERVICE_PREFIXES.iter().any(|p| c.starts_with(p)) && !ours.contains(*c))
        .collect();

    let forward = [
        format!("-A {KUBE_FORWARD} -m conntrack --ctstate INVALID -j DROP"),
        format!("-A {KUBE_FORWARD} -m comment --comment \"kubernetes forwarding rules\" -m mark --mark {MASQ_MARK}/{MASQ_MARK} -j ACCEPT"),
        format!("-A {KUBE_FORWARD} -m comment --comment \"kubernetes forwarding conntrack rule\" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT"),
    ];
    let masq = [
        format!("-A {KUBE_POSTROUTING} -m mark ! --mark {MASQ_MARK}/{MASQ_MARK} -j RETURN"),
        // Cleared, so that a packet that goes through netfilter again is not masqueraded twice.
        format!("-A {KUBE_POSTROUTING} -j MARK --xor-mark {MASQ_MARK}"),
        format!("-A {KUBE_POSTROUTING} -m comment --comment \"kubernetes service traffic requiring SNAT\" -j MASQUERADE --random-fully"),
        format!("-A {KUBE_MARK_MASQ} -j MARK --or-mark {MASQ_MARK}"),
    ];
    const FILTER_TOP: [&str; 3] = [KUBE_SERVICES, KUBE_EXTERNAL_SERVICES, KUBE_FORWARD];
    const NAT_TOP: [&str; 4] = [KUBE_SERVICES, KUBE_NODEPORTS, KUBE_POSTROUTING, KUBE_MARK_MASQ];
    let mut top_chains = TopChains::new();
    top_chains_of("filter", &FILTER_TOP, b.filter_rules.iter().chain(forward.iter()), &mut top_chains);
    top_chains_of("nat", &NAT_TOP, masq.iter().chain(b.top_nat_rules.iter()), &mut top_chains);
    // In a partial sync, a top-level chain the tables already hold as it is now is left out.
    let to_write = |table: &'static str, chains: &[&'static str]| -> Vec<(&'static str, &'static str, &String)> {
        chains
            .iter()
            .filter_map(|c| {
                let key = format!("{table} {c}");
                let rules = top_chains.get(&key)?;
                let kept = changed.is_some() && written_top.and_then(|w| w.get(&key)) == Some(rules);
                (!kept).then_some((table, *c, rules))
            })
            .collect()
    };
    let write: Vec<(&str, &str, &String)> = to_write("filter", &FILTER_TOP).into_iter().chain(to_write("nat", &NAT_TOP)).collect();

    let mut t = String::with_capacity(256 * (b.nat_rules.len() + b.top_nat_rules.len() + b.filter_rules.len() + 16));
    // filter: only the top-level chains (left out entirely when none changed)
    if write.iter().any(|(table, _, _)| *table == "filter") {
        t.push_str("*filter\n");
        for (_, chain, _) in write.iter().filter(|(table, _, _)| *table == "filter") {
            let _ = writeln!(t, ":{chain} - [0:0]");
        }
        for (_, _, rules) in write.iter().filter(|(table, _, _)| *table == "filter") {
            t.push_str(rules);
        }
        t.push_str("COMMIT\n");
    }
    // nat
    t.push_str("*nat\n");
    for (_, chain, _) in write.iter().filter(|(table, _, _)| *table == "nat") {
        let _ = writeln!(t, ":{chain} - [0:0]");
    }
    for c in b.nat_chains.iter().chain(stale.iter().copied()) {
        let _ = writeln!(t, ":{c} - [0:0]");
    }
    for (_, _, rules) in write.iter().filter(|(table, _, _)| *table == "nat") {
        t.push_str(rules);
    }
    for r in &b.nat_rules {
        t.push_str(r);
        t.push('\n');
    }
    for c in &stale {
        let _ = writeln!(t, "-X {c}");
    }
    t.push_str("COMMIT\n");
    Ruleset {
        text: t,
        nat_chains: ours,
        nat_chains_written: b.nat_chains.len(),
        nat_rules: b.nat_rule_count + masq.len(),
        filter_rules: b.filter_rules.len() + forward.len(),
        top_chains,
    }
}

/// Each of `chains`' rules (`-A <chain> …`, in order), one per line, into `out` under
/// `<table> <chain>`; every chain gets an entry, an empty one too.
fn top_chains_of<'a>(table: &str, chains: &[&str], rules: impl Iterator<Item = &'a String>, out: &mut TopChains) {
    let mut texts = vec![String::new(); chains.len()];
    for r in rules {
        let chain = r.strip_prefix("-A ").and_then(|r| r.split(' ').next()).unwrap_or_default();
        if let Some(i) = chains.iter().position(|c| *c == chain) {
            texts[i].push_str(r);
            texts[i].push('\n');
        }
    }
    for (c, text) in chains.iter().zip(texts) {
        out.insert(format!("{table} {c}"), text);
    }
}

/// `-m tcp -p tcp -d 10.96.0.10/32 --dport 53`, as kube-proxy orders them.
fn dest(svc: &ServicePortInfo, ip: Ipv4Addr, port: u16) -> String {
    let p = svc.name.protocol.lower();
    format!("-m {p} -p {p} -d {ip}/32 --dport {port}")
}

fn write_service(cfg: &RulesConfig, svc: &ServicePortInfo, eps: &[Endpoint], b: &mut Buffers) {
    let name = svc.name.to_string();
    let proto = svc.name.protocol.lower();
    let cat = categorize_endpoints(svc, eps);
    let svc_chain = service_chain(&svc.name);
    let svl_chain = service_local_chain(&svc.name);
    let ext_chain = external_chain(&svc.name);

    // Which chain each kind of traffic goes to, and whether it has anywhere to go.
    let (internal_chain, internal_eps) = if svc.internal_policy_local { (&svl_chain, &cat.local) } else { (&svc_chain, &cat.cluster) };
    let external_eps = if svc.external_policy_local { &cat.local } else { &cat.cluster };
    let has_endpoints = !eps.is_empty();
    // An empty set with endpoints elsewhere is a policy at work (DROP, as kube-proxy); with none
    // at all, the Service is unavailable and says so (REJECT: "connection refused").
    let target = |local_policy: bool| {
        if local_policy && has_endpoints && eps.iter().any(|e| e.ready || e.serving) {
            ("has no local endpoints", "DROP".to_string())
        } else {
            ("has no endpoints", "REJECT --reject-with icmp-port-unreachable".to_string())
        }
    };

    // Step 1: the cluster IP.
    if internal_eps.is_empty() {
        let (why, jump) = target(svc.internal_policy_local);
        b.filter_rules.push(format!(
            "-A {KUBE_SERVICES} -m comment --comment \"{name} {why}\" {} -j {jump}",
            dest(svc, svc.cluster_ip, svc.port)
        ));
    } else {
        b.top(format!(
            "-A {KUBE_SERVICES} -m comment --comment \"{name} cluster IP\" {} -j {internal_chain}",
            dest(svc, svc.cluster_ip, svc.port)
        ));
    }

    // Step 1 (external IPs) and step 2 (node ports).
    if svc.externally_accessible() {
        if external_eps.is_empty() {
            let (why, jump) = target(svc.external_policy_local);
            for ip in &svc.external_ips {
                b.filter_rules.push(format!(
                    "-A {KUBE_EXTERNAL_SERVICES} -m comment --comment \"{name} {why}\" {} -j {jump}",
                    dest(svc, *ip, svc.port)
                ));
            }
            if let Some(np) = svc.node_port {
                b.filter_rules.push(format!(
                    "-A {KUBE_EXTERNAL_SERVICES} -m comment --comment \"{name} {why}\" -m addrtype --dst-type LOCAL -m {proto} -p {proto} --dport {np} -j {jump}"
                ));
            }
        } else {
            for ip in &svc.external_ips {
                b.top(format!(
                    "-A {KUBE_SERVICES} -m comment --comment \"{name} external IP\" {} -j {ext_chain}",
                    dest(svc, *ip, svc.port)
                ));
            }
            if let Some(np) = svc.node_port {
                b.top(format!("-A {KUBE_NODEPORTS} -m comment --comment \"{name}\" -m {proto} -p {proto} --dport {np} -j {ext_chain}"));
            }
            // Step 3: the external chain.
            b.chain(&ext_chain);
            if !svc.external_policy_local {
                b.rule(|| format!(
                    "-A {ext_chain} -m comment --comment \"masquerade traffic for {name} external destinations\" -j {KUBE_MARK_MASQ}"
                ));
                b.rule(|| format!("-A {ext_chain} -j {svc_chain}"));
            } else {
                if !cat.cluster.is_empty() {
                    if let Some(cidr) = cfg.cluster_cidr {
                        b.rule(|| format!(
                            "-A {ext_chain} -s {cidr} -m comment --comment \"pod traffic for {name} external destinations\" -j {svc_chain}"
                        ));
                    }
                    b.rule(|| format!(
                        "-A {ext_chain} -m comment --comment \"masquerade LOCAL traffic for {name} external destinations\" -m addrtype --src-type LOCAL -j {KUBE_MARK_MASQ}"
                    ));
                    b.rule(|| format!(
                        "-A {ext_chain} -m comment --comment \"route LOCAL traffic for {name} external destinations\" -m addrtype --src-type LOCAL -j {svc_chain}"
                    ));
                }
                b.rule(|| format!("-A {ext_chain} -j {svl_chain}"));
            }
        }
    }

    // Step 4: the cluster-wide chain.
    let svc_used = !cat.cluster.is_empty() && (!svc.internal_policy_local || (svc.externally_accessible() && !external_eps.is_empty()));
    if svc_used {
        b.chain(&svc_chain);
        let d = dest(svc, svc.cluster_ip, svc.port);
        if cfg.masquerade_all || !cfg.bridge_netfilter {
            b.rule(|| format!("-A {svc_chain} -m comment --comment \"{name} cluster IP\" {d} -j {KUBE_MARK_MASQ}"));
        } else if let Some(cidr) = cfg.cluster_cidr {
            b.rule(|| format!("-A {svc_chain} -m comment --comment \"{name} cluster IP\" {d} ! -s {cidr} -j {KUBE_MARK_MASQ}"));
        }
        write_balancing(svc, &svc_chain, &cat.cluster, b);
    }
    // Step 4: the node-local chain.
    let svl_used = !cat.local.is_empty() && (svc.internal_policy_local || (svc.externally_accessible() && svc.external_policy_local));
    if svl_used {
        b.chain(&svl_chain);
        write_balancing(svc, &svl_chain, &cat.local, b);
    }

    // Step 5: one chain per endpoint.
    for ep in &cat.all_reachable {
        let sep = endpoint_chain(&svc.name, ep);
        b.chain(&sep);
        b.rule(|| format!("-A {sep} -m comment --comment \"{name}\" -s {}/32 -j {KUBE_MARK_MASQ}", ep.ip));
        b.rule(|| {
            let affinity = if svc.affinity_timeout.is_some() { format!(" -m recent --name {sep} --set") } else { String::new() };
            format!("-A {sep} -m comment --comment \"{name}\"{affinity} -m {proto} -p {proto} -j DNAT --to-destination {ep}")
        });
    }
}

/// `writeServiceToEndpointRules`: affinity first, then the random spread.
fn write_balancing(svc: &ServicePortInfo, chain: &str, eps: &[&Endpoint], b: &mut Buffers) {
    let name = svc.name.to_string();
    if let Some(timeout) = svc.affinity_timeout {
        for ep in eps {
            b.rule(|| {
                let sep = endpoint_chain(&svc.name, ep);
                format!("-A {chain} -m comment --comment \"{name} -> {ep}\" -m recent --name {sep} --rcheck --seconds {timeout} --reap -j {sep}")
            });
        }
    }
    let n = eps.len();
    for (i, ep) in eps.iter().enumerate() {
        // Named inside the closures: a skipped Service's rules cost no hashing either.
        if i < n - 1 {
            b.rule(|| {
                let sep = endpoint_chain(&svc.name, ep);
                format!("-A {chain} -m comment --comment \"{name} -> {ep}\" -m statistic --mode random --probability {} -j {sep}", probability(n - i))
            });
        } else {
            b.rule(|| format!("-A {chain} -m comment --comment \"{name} -> {ep}\" -j {}", endpoint_chain(&svc.name, ep)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serviceport::Protocol;

    fn name(svc: &str, port: &str) -> ServicePortName {
        ServicePortName { namespace: "default".into(), name: svc.into(), port: port.into(), protocol: Protocol::Tcp }
    }

    fn svc(n: &str, ip: [u8; 4]) -> ServicePortInfo {
        ServicePortInfo {
            name: name(n, "http"),
            cluster_ip: ip.into(),
            port: 80,
            node_port: None,
            external_ips: vec![],
            affinity_timeout: None,
            external_policy_local: false,
            internal_policy_local: false,
        }
    }

    fn ep(last: u8, local: bool) -> Endpoint {
        Endpoint { ip: [10, 244, 1, last].into(), port: 8080, is_local: local, ready: true, serving: true, terminating: false }
    }

    fn cfg() -> RulesConfig {
        RulesConfig {
            cluster_cidr: Some(Ipv4Cidr::parse("10.244.0.0/16").unwrap()),
            masquerade_all: false,
            bridge_netfilter: true,
            nodeport_addresses: vec!["192.168.50.2".parse().unwrap()],
        }
    }

    fn maps(items: Vec<(ServicePortInfo, Vec<Endpoint>)>) -> (ServicePortMap, EndpointsMap) {
        let mut s = ServicePortMap::new();
        let mut e = EndpointsMap::new();
        for (svc, eps) in items {
            if !eps.is_empty() {
                e.insert(svc.name.clone(), eps);
            }
            s.insert(svc.name.clone(), svc);
        }
        (s, e)
    }

    /// The rules of `items` with the chain hashes replaced by readable names, and only the
    /// lines that concern Services (not the fixed ones every ruleset has).
    fn render(cfg: &RulesConfig, items: Vec<(ServicePortInfo, Vec<Endpoint>)>) -> String {
        let (s, e) = maps(items);
        let mut text = write_rules(cfg, &s, &e, &BTreeSet::new(), None, None).text;
        for svc in s.values() {
            let short = svc.name.name.to_uppercase();
            text = text.replace(&service_chain(&svc.name), &format!("KUBE-SVC-{short}"));
            text = text.replace(&service_local_chain(&svc.name), &format!("KUBE-SVL-{short}"));
            text = text.replace(&external_chain(&svc.name), &format!("KUBE-EXT-{short}"));
            for ep in e.get(&svc.name).into_iter().flatten() {
                text = text.replace(&endpoint_chain(&svc.name, ep), &format!("KUBE-SEP-{short}-{}", ep.ip.octets()[3]));
            }
        }
        text
    }

    #[test]
    fn hashes_are_stable_and_fit_iptables_names() {
        let n = name("web", "http");
        let c = service_chain(&n);
        assert_eq!(c, service_chain(&n.clone()));
        assert_eq!(c.len(), "KUBE-SVC-".len() + 16);
        assert!(c.len() <= 28, "iptables chain names are at most 28 characters");
        assert_ne!(service_chain(&name("web", "https")), c);
        assert_ne!(endpoint_chain(&n, &ep(1, false)), endpoint_chain(&n, &ep(2, false)));
    }

    #[test]
    fn probabilities_spread_evenly() {
        assert_eq!(probability(2), "0.5000000000");
        assert_eq!(probability(3), "0.3333333333");
        let (s, e) = maps(vec![(svc("web", [10, 96, 0, 10]), vec![ep(1, false), ep(2, false), ep(3, false), ep(4, false)])]);
        let text = write_rules(&cfg(), &s, &e, &BTreeSet::new(), None, None).text;
        let probs: Vec<&str> = text.lines().filter_map(|l| l.split("--probability ").nth(1)).map(|r| r.split(' ').next().unwrap()).collect();
        assert_eq!(probs, ["0.2500000000", "0.3333333333", "0.5000000000"]);
    }

    fn golden_services() -> Vec<(ServicePortInfo, Vec<Endpoint>)> {
        let mut np = svc("np", [10, 96, 0, 11]);
        np.node_port = Some(30080);
        let mut aff = svc("aff", [10, 96, 0, 12]);
        aff.affinity_timeout = Some(600);
        let mut local = svc("local", [10, 96, 0, 13]);
        local.node_port = Some(30081);
        local.external_policy_local = true;
        let mut itp = svc("itp", [10, 96, 0, 14]);
        itp.internal_policy_local = true;
        let mut empty = svc("empty", [10, 96, 0, 15]);
        empty.node_port = Some(30082);
        vec![
            (svc("web", [10, 96, 0, 10]), vec![ep(1, true), ep(2, false)]),
            (np, vec![ep(3, false)]),
            (aff, vec![ep(4, false), ep(5, false)]),
            (local, vec![ep(6, true), ep(7, false)]),
            (itp, vec![ep(8, false)]),
            (empty, vec![]),
        ]
    }

    /// The whole ruleset for: two endpoints (web), a NodePort (np), ClientIP affinity (aff),
    /// externalTrafficPolicy Local (local), internalTrafficPolicy Local with its only endpoint
    /// elsewhere (itp: DROP), and a NodePort without endpoints (empty: REJECT twice).
    #[test]
    fn golden() {
        let got = render(&cfg(), golden_services());
        let want = include_str!("testdata/golden.rules");
        if got != want {
            for (i, (g, w)) in got.lines().zip(want.lines()).enumerate() {
                assert_eq!(g, w, "line {}", i + 1);
            }
            assert_eq!(got.lines().count(), want.lines().count(), "{got}");
        }
    }

    /// Without bridge netfilter (or with --masquerade-all) all cluster-IP traffic is marked, pod
    /// traffic included; without --cluster-cidr nothing is (as kube-proxy).
    #[test]
    fn cluster_ip_masquerading() {
        let masq_line = |cfg: &RulesConfig| {
            let t = render(cfg, vec![(svc("web", [10, 96, 0, 10]), vec![ep(1, false)])]);
            t.lines().filter(|l| l.starts_with("-A KUBE-SVC-WEB") && l.ends_with("KUBE-MARK-MASQ")).map(str::to_string).collect::<Vec<_>>()
        };
        let base = cfg();
        assert!(masq_line(&base)[0].contains("! -s 10.244.0.0/16"));
        for c in [RulesConfig { bridge_netfilter: false, ..base.clone() }, RulesConfig { masquerade_all: true, ..base.clone() }] {
            let l = masq_line(&c);
            assert_eq!(l.len(), 1);
            assert!(!l[0].contains("-s "), "{l:?}");
        }
        assert!(masq_line(&RulesConfig { cluster_cidr: None, ..base }).is_empty());
    }

    /// Chains of ours the new rules no longer use are flushed and deleted; others' are left.
    #[test]
    fn stale_chains_are_deleted() {
        let existing: BTreeSet<String> = ["KUBE-SVC-OLD", "KUBE-SEP-OLD", "KUBE-SERVICES", "CNI-HOSTPORT-DNAT", "DOCKER"].map(String::from).into();
        let (s, e) = maps(vec![(svc("web", [10, 96, 0, 10]), vec![ep(1, false)])]);
        let r = write_rules(&cfg(), &s, &e, &existing, None, None);
        let x: Vec<&str> = r.text.lines().filter(|l| l.starts_with("-X ")).collect();
        assert_eq!(x, ["-X KUBE-SEP-OLD", "-X KUBE-SVC-OLD"]);
        assert!(r.text.contains(":KUBE-SVC-OLD - [0:0]"), "flushed before deletion");
        assert!(r.nat_chains.contains(&service_chain(&name("web", "http"))));
    }

    /// A partial sync (not told how the last one left the top-level chains) writes every
    /// top-level rule but only the changed Service's chains; the chains it skips stay in use
    /// (not deleted), and the removed endpoint's chain goes.
    #[test]
    fn partial_sync_writes_only_the_changed_services_chains() {
        let mut items = golden_services();
        let (s0, e0) = maps(items.clone());
        let full = write_rules(&cfg(), &s0, &e0, &BTreeSet::new(), None, None);
        // web loses an endpoint.
        items[0].1.pop();
        let (s, e) = maps(items);
        let changed: ChangedServices = [("default".to_string(), "web".to_string())].into();
        let partial = write_rules(&cfg(), &s, &e, &full.nat_chains, Some(&changed), None);
        let full_after = write_rules(&cfg(), &s, &e, &full.nat_chains, None, None);

        let web = name("web", "http");
        let gone = endpoint_chain(&web, &ep(2, false));
        let declared: Vec<&str> = partial.text.lines().filter_map(|l| l.strip_prefix(':')).map(|l| l.split(' ').next().unwrap()).collect();
        let per_service: Vec<&str> = declared.iter().copied().filter(|c| PER_SERVICE_PREFIXES.iter().any(|p| c.starts_with(p))).collect();
        let mut want = vec![service_chain(&web), endpoint_chain(&web, &ep(1, true)), gone.clone()];
        want.sort();
        let mut got: Vec<String> = per_service.iter().map(|c| c.to_string()).collect();
        got.sort();
        assert_eq!(got, want, "only web's chains (and its removed endpoint's, to flush and delete)");
        assert!(partial.text.contains(&format!("-X {gone}\n")), "{}", partial.text);
        // Every rule of a top-level chain is there, exactly as in a full sync.
        let top = |t: &str| -> Vec<String> {
            t.lines().filter(|l| ["-A KUBE-SERVICES ", "-A KUBE-NODEPORTS ", "-A KUBE-EXTERNAL-SERVICES ", "-A KUBE-FORWARD "].iter().any(|p| l.starts_with(p))).map(String::from).collect()
        };
        assert_eq!(top(&partial.text), top(&full_after.text));
        // Nothing of another Service's chains is written, yet they stay in use.
        let np = service_chain(&name("np", "http"));
        assert!(!partial.text.contains(&format!("-A {np} ")) && !partial.text.contains(&format!(":{np} ")));
        assert_eq!(partial.nat_chains, full_after.nat_chains);
        assert_eq!((partial.nat_rules, partial.filter_rules), (full_after.nat_rules, full_after.filter_rules));
        assert!(partial.nat_chains_written < full_after.nat_chains_written);
        // No change at all: only the top-level chains.
        let none = write_rules(&cfg(), &s, &e, &full_after.nat_chains, Some(&ChangedServices::new()), None);
        assert_eq!(none.nat_chains_written, 0);
        assert!(!none.text.contains(":KUBE-SVC-") && !none.text.contains("-X "), "{}", none.text);
    }

    /// Given how the last sync left the top-level chains, a partial sync leaves out those whose
    /// rules stay the same and writes those that change; a full sync writes them all anyway.
    #[test]
    fn partial_sync_leaves_out_unchanged_top_level_chains() {
        let mut items = golden_services();
        let (s0, e0) = maps(items.clone());
        let full = write_rules(&cfg(), &s0, &e0, &BTreeSet::new(), None, None);
        let declared = |t: &str| -> Vec<String> { t.lines().filter_map(|l| l.strip_prefix(':')).map(|l| l.split(' ').next().unwrap().to_string()).collect() };
        let web = ("default".to_string(), "web".to_string());
        // web loses one of its two endpoints: its chains change, no top-level chain does.
        items[0].1.pop();
        let (s1, e1) = maps(items.clone());
        let partial = write_rules(&cfg(), &s1, &e1, &full.nat_chains, Some(&[web.clone()].into()), Some(&full.top_chains));
        assert!(!partial.text.contains("*filter"), "no filter chain changed:\n{}", partial.text);
        assert!(!declared(&partial.text).iter().any(|c| c.starts_with("KUBE-") && !PER_SERVICE_PREFIXES.iter().any(|p| c.starts_with(p))), "{}", partial.text);
        assert!(!partial.text.contains("-A KUBE-SERVICES ") && !partial.text.contains("-A KUBE-NODEPORTS "), "{}", partial.text);
        assert!(partial.text.contains(&format!(":{} - [0:0]", service_chain(&name("web", "http")))), "{}", partial.text);
        assert_eq!(partial.top_chains, full.top_chains);
        // web loses its last endpoint: its cluster IP moves from nat KUBE-SERVICES to a REJECT
        // in filter KUBE-SERVICES; both are written whole, the chains that stay are not.
        items[0].1.clear();
        let (s2, e2) = maps(items);
        let emptied = write_rules(&cfg(), &s2, &e2, &partial.nat_chains, Some(&[web].into()), Some(&partial.top_chains));
        let mut got = declared(&emptied.text).into_iter().filter(|c| !PER_SERVICE_PREFIXES.iter().any(|p| c.starts_with(p))).collect::<Vec<_>>();
        got.sort();
        assert_eq!(got, ["KUBE-SERVICES", "KUBE-SERVICES"], "{}", emptied.text);
        assert!(emptied.text.contains("has no endpoints\" ") && emptied.text.contains("-A KUBE-SERVICES -m comment --comment \"kubernetes service nodeports"), "{}", emptied.text);
        let full_after = write_rules(&cfg(), &s2, &e2, &partial.nat_chains, None, Some(&partial.top_chains));
        assert_eq!(emptied.top_chains, full_after.top_chains);
        for chain in [KUBE_SERVICES, KUBE_EXTERNAL_SERVICES, KUBE_FORWARD, KUBE_NODEPORTS, KUBE_POSTROUTING, KUBE_MARK_MASQ] {
            assert!(full_after.text.contains(&format!(":{chain} - [0:0]")), "a full sync writes {chain}");
        }
    }

    /// A serving, terminating endpoint is used when no endpoint is ready; a not-serving one never.
    #[test]
    fn terminating_fallback() {
        let term = Endpoint { ready: false, serving: true, terminating: true, ..ep(9, false) };
        let dead = Endpoint { ready: false, serving: false, terminating: true, ..ep(8, false) };
        let t = render(&cfg(), vec![(svc("web", [10, 96, 0, 10]), vec![dead.clone(), term])]);
        assert!(t.contains("DNAT --to-destination 10.244.1.9:8080"), "{t}");
        assert!(!t.contains("10.244.1.8:8080"), "{t}");
        let t = render(&cfg(), vec![(svc("web", [10, 96, 0, 10]), vec![dead])]);
        assert!(t.contains("\"default/web:http has no endpoints\""), "{t}");
    }
}
