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
//! changed since the last successful sync, kube-proxy writes every top-level chain
//! (`KUBE-SERVICES`, `KUBE-NODEPORTS`, `KUBE-EXTERNAL-SERVICES`, `KUBE-FORWARD`, …) and every
//! per-Service chain (`KUBE-SVC-`/`KUBE-SVL-`/`KUBE-EXT-`/`KUBE-SEP-`) of the changed Services,
//! and leaves out those of every other Service: with `--noflush`, a chain the input does not
//! declare keeps its rules. kubelab goes further: given what the last successful sync left in
//! every chain ([`SyncedRules`]), [`write_rules`] writes only the chains whose rules change
//! (a one-endpoint change: the Service's `KUBE-SVC-`, the new endpoint's chain, the removed
//! one's to delete), and takes an unchanged Service's rules from there instead of writing them
//! again. Chains left out still count as in use, so that only the chains of removed Services
//! and endpoints are deleted.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::fmt::Write as _;
use std::net::Ipv4Addr;

use crate::endpoint::Endpoint;
use crate::endpointschangetracker::EndpointsMap;
use crate::proxier::ChangedServices;
use crate::serviceport::{Protocol, ServicePortInfo, ServicePortName};
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

/// The text for `iptables-restore --noflush`, and what the tables hold once it is applied.
#[derive(Debug)]
pub struct Ruleset {
    pub text: String,
    /// How many per-Service nat chains the text declares and writes (not counting those it
    /// flushes only to delete them).
    pub nat_chains_written: usize,
    /// Rules in use, nat and filter, written or left in place (kube-proxy's
    /// `sync_proxy_rules_iptables_total`).
    pub nat_rules: usize,
    pub filter_rules: usize,
    /// Every chain's rules once the text is applied (what the next partial sync compares with).
    pub synced: SyncedRules,
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

/// What one Service port puts in the tables: its rules in the top-level chains, and its own
/// chains with their rules.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct PortRules {
    /// Its rules in the filter table's top-level chains (`REJECT`/`DROP` without endpoints).
    filter_rules: Vec<String>,
    /// Its rules in the top-level nat chains (`KUBE-SERVICES`, `KUBE-NODEPORTS`).
    top_nat_rules: Vec<String>,
    /// Its per-Service nat chains in the order they are declared, each with its rules (one
    /// per line).
    chains: Vec<(String, String)>,
    /// nat rules, top-level and in its own chains.
    nat_rule_count: usize,
}

impl PortRules {
    /// A rule in a top-level nat chain.
    fn top(&mut self, rule: String) {
        self.nat_rule_count += 1;
        self.top_nat_rules.push(rule);
    }
    /// A per-Service chain: the rules that follow go to it.
    fn chain(&mut self, name: &str) {
        self.chains.push((name.to_string(), String::new()));
    }
    /// A rule in the chain declared last (formatted straight into its text).
    fn rule(&mut self, rule: std::fmt::Arguments<'_>) {
        self.nat_rule_count += 1;
        if let Some((_, rules)) = self.chains.last_mut() {
            let _ = rules.write_fmt(rule);
            rules.push('\n');
        }
    }
}

/// Every chain's rules as the tables hold them once a ruleset is applied: the top-level chains
/// by table and chain, the per-Service chains by the Service port that owns them. The proxier
/// keeps the last successful sync's; given it, the next partial sync writes a chain only when
/// its rules change (and takes an unchanged Service's rules from here instead of writing them
/// again). Not kept after a failure: the next sync is full.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SyncedRules {
    pub top_chains: TopChains,
    ports: BTreeMap<ServicePortName, PortRules>,
}

impl SyncedRules {
    /// The per-Service nat chains.
    pub fn nat_chains(&self) -> impl Iterator<Item = &str> {
        self.ports.values().flat_map(|p| p.chains.iter().map(|(c, _)| c.as_str()))
    }
}

/// Writes the ruleset: all of it when `changed` is None (a full sync). Otherwise (a partial
/// sync) a chain is written only when its rules differ from what `last` (the last successful
/// sync's [`SyncedRules`]) says the tables hold:
/// - a top-level chain, when a Service's rules in it changed (kube-proxy rewrites
///   `KUBE-SERVICES`, `KUBE-NODEPORTS`, … in every partial sync: with a thousand Services most
///   of a one-endpoint sync's time);
/// - a changed Service's own chain, when it is new or its rules changed (kube-proxy rewrites
///   every chain of a changed Service: a one-endpoint change rewrites its ten endpoint chains
///   where one is new);
/// - an unchanged Service's chains never; its rules are taken from `last`, not generated again.
///
/// Without `last`, a partial sync writes every top-level chain and every chain of the changed
/// Services. Chains of ours no longer used are flushed and deleted: those `last` records for
/// changed or removed Service ports, and those of `existing_nat_chains` (the nat table's chains
/// as iptables-save lists them, when `last` is not known; empty otherwise). kubelab's
/// additions to kube-proxy are the comparison and the reuse of `last`.
pub fn write_rules(
    cfg: &RulesConfig,
    services: &ServicePortMap,
    endpoints: &EndpointsMap,
    existing_nat_chains: &BTreeSet<String>,
    changed: Option<&ChangedServices>,
    last: Option<SyncedRules>,
) -> Ruleset {
    let (last_top, last_ports) = match last {
        Some(l) => (Some(l.top_chains), Some(l.ports)),
        None => (None, None),
    };
    let partial = changed.is_some();
    let no_endpoints = Vec::new();
    // Per-Service chains to write, as (name, rules), in order; and those to delete.
    let mut write_chains: Vec<(&str, &str)> = Vec::new();
    let mut gone: Vec<String> = Vec::new();
    // The Service ports whose rules were written again, each with its rules as the last sync
    // left them (to compare with, and to delete the chains no longer used).
    let mut rewritten: Vec<(ServicePortName, Option<PortRules>)> = Vec::new();
    // Whether a Service port was added or removed since the last sync.
    let mut ports_changed = last_ports.is_none();
    let ports = match (changed, last_ports) {
        // A partial sync given the last one's rules: only the changed Services' ports are
        // generated again, the others' rules stay as they are (no work for them at all: a
        // Service not in `changed` is as the last sync left it, which every partial sync
        // trusts the trackers for).
        (Some(changed), Some(mut ports)) => {
            for (namespace, name) in changed {
                // The first key a port of this Service can have (ports sort by name, then
                // protocol; TCP first).
                let first = ServicePortName { namespace: namespace.clone(), name: name.clone(), port: String::new(), protocol: Protocol::Tcp };
                let of_service = |k: &ServicePortName| k.namespace == *namespace && k.name == *name;
                let before: Vec<ServicePortName> = ports.range(&first..).map(|(k, _)| k).take_while(|k| of_service(k)).cloned().collect();
                for k in before.iter().filter(|k| !services.contains_key(*k)) {
                    // A port (or the whole Service) gone: all its chains go.
                    ports_changed = true;
                    gone.extend(ports.remove(k).into_iter().flat_map(|p| p.chains).map(|(c, _)| c));
                }
                for svc in services.range(&first..).map(|(_, s)| s).take_while(|s| of_service(&s.name)) {
                    let eps = endpoints.get(&svc.name).unwrap_or(&no_endpoints);
                    let before = ports.insert(svc.name.clone(), write_service(cfg, svc, eps));
                    ports_changed |= before.is_none();
                    rewritten.push((svc.name.clone(), before));
                }
            }
            ports
        }
        // A full sync, or a partial one not knowing the last one's rules: every port written
        // again (in a partial sync, only the changed Services' chains go into the text).
        (changed, last_ports) => {
            let mut last_ports = last_ports.unwrap_or_default();
            let mut ports = BTreeMap::new();
            for svc in services.values() {
                let eps = endpoints.get(&svc.name).unwrap_or(&no_endpoints);
                let before = last_ports.remove(&svc.name);
                if changed.is_none_or(|c| c.contains(&(svc.name.namespace.clone(), svc.name.name.clone()))) {
                    rewritten.push((svc.name.clone(), before));
                }
                ports.insert(svc.name.clone(), write_service(cfg, svc, eps));
            }
            // Service ports gone since the last sync: all their chains go.
            for (_, before) in last_ports {
                gone.extend(before.chains.into_iter().map(|(c, _)| c));
            }
            ports
        }
    };
    for (name, before) in &rewritten {
        let now = &ports[name];
        let before = before.as_ref();
        for (chain, rules) in now.chains.iter().filter(|_| partial) {
            let kept = before.is_some_and(|b| b.chains.iter().any(|(c, r)| c == chain && r == rules));
            if !kept {
                write_chains.push((chain, rules));
            }
        }
        for (chain, _) in before.map(|b| b.chains.as_slice()).unwrap_or_default() {
            if !now.chains.iter().any(|(c, _)| c == chain) {
                gone.push(chain.clone());
            }
        }
    }
    if !partial {
        // A full sync writes every chain (in the same order as the rewritten ones above).
        write_chains = ports.values().flat_map(|p| p.chains.iter().map(|(c, r)| (c.as_str(), r.as_str()))).collect();
    }
    if !existing_nat_chains.is_empty() {
        let ours: HashSet<&str> = ports.values().flat_map(|p| p.chains.iter().map(|(c, _)| c.as_str())).collect();
        gone.extend(existing_nat_chains.iter().filter(|c| PER_SERVICE_PREFIXES.iter().any(|p| c.starts_with(p)) && !ours.contains(c.as_str())).cloned());
    }
    gone.sort();
    gone.dedup();

    let comment = "\"kubernetes service nodeports; NOTE: this must be the last rule in this chain\"";
    let nodeports: Vec<String> = cfg
        .nodeport_addresses
        .iter()
        .map(|addr| format!("-A {KUBE_SERVICES} -m comment --comment {comment} -d {addr}/32 -j {KUBE_NODEPORTS}"))
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
    let filter_rules = ports.values().flat_map(|p| p.filter_rules.iter());
    // The top-level chains: as the last sync left them when no Service port came or went and
    // none of the rewritten ones changed its rules there; otherwise put together again.
    let top_same = |(name, before): &(ServicePortName, Option<PortRules>)| {
        before.as_ref().is_some_and(|b| b.filter_rules == ports[name].filter_rules && b.top_nat_rules == ports[name].top_nat_rules)
    };
    let top_chains = match &last_top {
        Some(top) if partial && !ports_changed && rewritten.iter().all(top_same) => top.clone(),
        _ => {
            let mut top_chains = TopChains::new();
            top_chains_of("filter", &FILTER_TOP, filter_rules.clone().chain(forward.iter()), &mut top_chains);
            let top_nat_rules = ports.values().flat_map(|p| p.top_nat_rules.iter());
            top_chains_of("nat", &NAT_TOP, masq.iter().chain(top_nat_rules).chain(nodeports.iter()), &mut top_chains);
            top_chains
        }
    };
    // In a partial sync, a top-level chain the tables already hold as it is now is left out.
    let to_write = |table: &'static str, chains: &[&'static str]| -> Vec<(&'static str, &'static str, &String)> {
        chains
            .iter()
            .filter_map(|c| {
                let key = format!("{table} {c}");
                let rules = top_chains.get(&key)?;
                let kept = partial && last_top.as_ref().and_then(|w| w.get(&key)) == Some(rules);
                (!kept).then_some((table, *c, rules))
            })
            .collect()
    };
    let write: Vec<(&str, &str, &String)> = to_write("filter", &FILTER_TOP).into_iter().chain(to_write("nat", &NAT_TOP)).collect();

    let size = write.iter().map(|(_, _, r)| r.len()).sum::<usize>() + write_chains.iter().map(|(c, r)| c.len() + r.len() + 8).sum::<usize>();
    let mut t = String::with_capacity(size + 64 * gone.len() + 256);
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
    // Declaring a chain creates or flushes it: a chain to delete must be empty.
    for c in write_chains.iter().map(|(c, _)| *c).chain(gone.iter().map(String::as_str)) {
        let _ = writeln!(t, ":{c} - [0:0]");
    }
    for (_, _, rules) in write.iter().filter(|(table, _, _)| *table == "nat") {
        t.push_str(rules);
    }
    for (_, rules) in &write_chains {
        t.push_str(rules);
    }
    for c in &gone {
        let _ = writeln!(t, "-X {c}");
    }
    t.push_str("COMMIT\n");
    Ruleset {
        text: t,
        nat_chains_written: write_chains.len(),
        nat_rules: ports.values().map(|p| p.nat_rule_count).sum::<usize>() + nodeports.len() + masq.len(),
        filter_rules: filter_rules.count() + forward.len(),
        synced: SyncedRules { top_chains, ports },
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

fn write_service(cfg: &RulesConfig, svc: &ServicePortInfo, eps: &[Endpoint]) -> PortRules {
    let mut b = PortRules::default();
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
                b.rule(format_args!(
                    "-A {ext_chain} -m comment --comment \"masquerade traffic for {name} external destinations\" -j {KUBE_MARK_MASQ}"
                ));
                b.rule(format_args!("-A {ext_chain} -j {svc_chain}"));
            } else {
                if !cat.cluster.is_empty() {
                    if let Some(cidr) = cfg.cluster_cidr {
                        b.rule(format_args!(
                            "-A {ext_chain} -s {cidr} -m comment --comment \"pod traffic for {name} external destinations\" -j {svc_chain}"
                        ));
                    }
                    b.rule(format_args!(
                        "-A {ext_chain} -m comment --comment \"masquerade LOCAL traffic for {name} external destinations\" -m addrtype --src-type LOCAL -j {KUBE_MARK_MASQ}"
                    ));
                    b.rule(format_args!(
                        "-A {ext_chain} -m comment --comment \"route LOCAL traffic for {name} external destinations\" -m addrtype --src-type LOCAL -j {svc_chain}"
                    ));
                }
                b.rule(format_args!("-A {ext_chain} -j {svl_chain}"));
            }
        }
    }

    // Step 4: the cluster-wide chain.
    let svc_used = !cat.cluster.is_empty() && (!svc.internal_policy_local || (svc.externally_accessible() && !external_eps.is_empty()));
    if svc_used {
        b.chain(&svc_chain);
        let d = dest(svc, svc.cluster_ip, svc.port);
        if cfg.masquerade_all || !cfg.bridge_netfilter {
            b.rule(format_args!("-A {svc_chain} -m comment --comment \"{name} cluster IP\" {d} -j {KUBE_MARK_MASQ}"));
        } else if let Some(cidr) = cfg.cluster_cidr {
            b.rule(format_args!("-A {svc_chain} -m comment --comment \"{name} cluster IP\" {d} ! -s {cidr} -j {KUBE_MARK_MASQ}"));
        }
        write_balancing(svc, &svc_chain, &cat.cluster, &mut b);
    }
    // Step 4: the node-local chain.
    let svl_used = !cat.local.is_empty() && (svc.internal_policy_local || (svc.externally_accessible() && svc.external_policy_local));
    if svl_used {
        b.chain(&svl_chain);
        write_balancing(svc, &svl_chain, &cat.local, &mut b);
    }

    // Step 5: one chain per endpoint.
    for ep in &cat.all_reachable {
        let sep = endpoint_chain(&svc.name, ep);
        b.chain(&sep);
        b.rule(format_args!("-A {sep} -m comment --comment \"{name}\" -s {}/32 -j {KUBE_MARK_MASQ}", ep.ip));
        let affinity = if svc.affinity_timeout.is_some() { format!(" -m recent --name {sep} --set") } else { String::new() };
        b.rule(format_args!("-A {sep} -m comment --comment \"{name}\"{affinity} -m {proto} -p {proto} -j DNAT --to-destination {ep}"));
    }
    b
}

/// `writeServiceToEndpointRules`: affinity first, then the random spread.
fn write_balancing(svc: &ServicePortInfo, chain: &str, eps: &[&Endpoint], b: &mut PortRules) {
    let name = svc.name.to_string();
    if let Some(timeout) = svc.affinity_timeout {
        for ep in eps {
            let sep = endpoint_chain(&svc.name, ep);
            b.rule(format_args!("-A {chain} -m comment --comment \"{name} -> {ep}\" -m recent --name {sep} --rcheck --seconds {timeout} --reap -j {sep}"));
        }
    }
    let n = eps.len();
    for (i, ep) in eps.iter().enumerate() {
        let sep = endpoint_chain(&svc.name, ep);
        if i < n - 1 {
            b.rule(format_args!("-A {chain} -m comment --comment \"{name} -> {ep}\" -m statistic --mode random --probability {} -j {sep}", probability(n - i)));
        } else {
            b.rule(format_args!("-A {chain} -m comment --comment \"{name} -> {ep}\" -j {sep}"));
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::util::iptables::chains_in_save;

    pub(crate) fn name(svc: &str, port: &str) -> ServicePortName {
        ServicePortName { namespace: "default".into(), name: svc.into(), port: port.into(), protocol: Protocol::Tcp }
    }

    pub(crate) fn svc(n: &str, ip: [u8; 4]) -> ServicePortInfo {
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

    pub(crate) fn ep(last: u8, local: bool) -> Endpoint {
        Endpoint { ip: [10, 244, 1, last].into(), port: 8080, is_local: local, ready: true, serving: true, terminating: false }
    }

    pub(crate) fn cfg() -> RulesConfig {
        RulesConfig {
            cluster_cidr: Some(Ipv4Cidr::parse("10.244.0.0/16").unwrap()),
            masquerade_all: false,
            bridge_netfilter: true,
            nodeport_addresses: vec!["192.168.50.2".parse().unwrap()],
        }
    }

    pub(crate) fn maps(items: Vec<(ServicePortInfo, Vec<Endpoint>)>) -> (ServicePortMap, EndpointsMap) {
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

    pub(crate) fn golden_services() -> Vec<(ServicePortInfo, Vec<Endpoint>)> {
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
        assert!(r.synced.nat_chains().any(|c| c == service_chain(&name("web", "http"))));
    }

    /// A partial sync not told how the last one left the chains (only which exist) writes
    /// every top-level rule and every chain of the changed Service, none of the others'; the
    /// chains it skips stay in use (not deleted), and the removed endpoint's chain goes.
    #[test]
    fn partial_sync_writes_only_the_changed_services_chains() {
        let mut items = golden_services();
        let (s0, e0) = maps(items.clone());
        let full = write_rules(&cfg(), &s0, &e0, &BTreeSet::new(), None, None);
        // web loses an endpoint.
        items[0].1.pop();
        let (s, e) = maps(items);
        let changed: ChangedServices = [("default".to_string(), "web".to_string())].into();
        let existing: BTreeSet<String> = full.synced.nat_chains().map(String::from).collect();
        let partial = write_rules(&cfg(), &s, &e, &existing, Some(&changed), None);
        let full_after = write_rules(&cfg(), &s, &e, &existing, None, None);

        let web = name("web", "http");
        let gone = endpoint_chain(&web, &ep(2, false));
        let mut want = vec![service_chain(&web), endpoint_chain(&web, &ep(1, true)), gone.clone()];
        want.sort();
        let mut got: Vec<String> = chains_in_save(&partial.text).into_iter().filter(|c| PER_SERVICE_PREFIXES.iter().any(|p| c.starts_with(p))).collect();
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
        assert_eq!(partial.synced, full_after.synced);
        assert_eq!((partial.nat_rules, partial.filter_rules), (full_after.nat_rules, full_after.filter_rules));
        assert!(partial.nat_chains_written < full_after.nat_chains_written);
        // No change at all: only the top-level chains.
        let existing: BTreeSet<String> = full_after.synced.nat_chains().map(String::from).collect();
        let none = write_rules(&cfg(), &s, &e, &existing, Some(&ChangedServices::new()), None);
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
        let web = ("default".to_string(), "web".to_string());
        // web loses one of its two endpoints: its chains change, no top-level chain does.
        items[0].1.pop();
        let (s1, e1) = maps(items.clone());
        let partial = write_rules(&cfg(), &s1, &e1, &BTreeSet::new(), Some(&[web.clone()].into()), Some(full.synced.clone()));
        assert!(!partial.text.contains("*filter"), "no filter chain changed:\n{}", partial.text);
        assert!(!chains_in_save(&partial.text).iter().any(|c| c.starts_with("KUBE-") && !PER_SERVICE_PREFIXES.iter().any(|p| c.starts_with(p))), "{}", partial.text);
        assert!(!partial.text.contains("-A KUBE-SERVICES ") && !partial.text.contains("-A KUBE-NODEPORTS "), "{}", partial.text);
        assert!(partial.text.contains(&format!(":{} - [0:0]", service_chain(&name("web", "http")))), "{}", partial.text);
        assert_eq!(partial.synced.top_chains, full.synced.top_chains);
        // web loses its last endpoint: its cluster IP moves from nat KUBE-SERVICES to a REJECT
        // in filter KUBE-SERVICES; both are written whole, the chains that stay are not.
        items[0].1.clear();
        let (s2, e2) = maps(items);
        let emptied = write_rules(&cfg(), &s2, &e2, &BTreeSet::new(), Some(&[web].into()), Some(partial.synced.clone()));
        let mut got = chains_in_save(&emptied.text).into_iter().filter(|c| !PER_SERVICE_PREFIXES.iter().any(|p| c.starts_with(p))).collect::<Vec<_>>();
        got.sort();
        assert_eq!(got, ["KUBE-SERVICES", "KUBE-SERVICES"], "{}", emptied.text);
        assert!(emptied.text.contains("has no endpoints\" ") && emptied.text.contains("-A KUBE-SERVICES -m comment --comment \"kubernetes service nodeports"), "{}", emptied.text);
        let full_after = write_rules(&cfg(), &s2, &e2, &BTreeSet::new(), None, Some(partial.synced.clone()));
        assert_eq!(emptied.synced, full_after.synced);
        for chain in [KUBE_SERVICES, KUBE_EXTERNAL_SERVICES, KUBE_FORWARD, KUBE_NODEPORTS, KUBE_POSTROUTING, KUBE_MARK_MASQ] {
            assert!(full_after.text.contains(&format!(":{chain} - [0:0]")), "a full sync writes {chain}");
        }
    }

    /// The tables as a model: (table, chain) → rules; `apply` plays an `iptables-restore
    /// --noflush` text on it (a declaration creates or flushes, `-A` appends, `-X` deletes).
    type Tables = BTreeMap<(String, String), Vec<String>>;

    fn apply(tables: &mut Tables, text: &str) {
        let mut table = String::new();
        for l in text.lines() {
            if let Some(t) = l.strip_prefix('*') {
                table = t.to_string();
            } else if let Some(c) = l.strip_prefix(':') {
                tables.insert((table.clone(), c.split(' ').next().unwrap().to_string()), vec![]);
            } else if let Some(r) = l.strip_prefix("-A ") {
                let chain = r.split(' ').next().unwrap().to_string();
                tables.get_mut(&(table.clone(), chain)).expect("-A to a declared chain").push(l.to_string());
            } else if let Some(c) = l.strip_prefix("-X ") {
                let rules = tables.remove(&(table.clone(), c.to_string())).expect("-X of an existing chain");
                assert!(rules.is_empty(), "-X of a flushed chain");
            } else {
                assert_eq!(l, "COMMIT");
            }
        }
    }

    /// The per-Service chains a text declares (to write, or to flush and delete).
    fn declared_per_service(t: &str) -> BTreeSet<String> {
        chains_in_save(t).into_iter().filter(|c| PER_SERVICE_PREFIXES.iter().any(|p| c.starts_with(p))).collect()
    }

    /// One endpoint out and one in: a partial sync given the last sync's rules declares only
    /// the chains whose rules change (the Service's KUBE-SVC-), the new endpoint's and the
    /// removed one's (flushed, then deleted); the endpoint chain that stays is not declared
    /// again, nor is any top-level chain.
    #[test]
    fn partial_sync_writes_only_the_chains_that_change() {
        let mut items = golden_services();
        let (s0, e0) = maps(items.clone());
        let full = write_rules(&cfg(), &s0, &e0, &BTreeSet::new(), None, None);
        items[0].1[1] = ep(9, false);
        let (s, e) = maps(items);
        let web = name("web", "http");
        let changed: ChangedServices = [("default".to_string(), "web".to_string())].into();
        let partial = write_rules(&cfg(), &s, &e, &BTreeSet::new(), Some(&changed), Some(full.synced.clone()));
        let (kept, added, gone) = (endpoint_chain(&web, &ep(1, true)), endpoint_chain(&web, &ep(9, false)), endpoint_chain(&web, &ep(2, false)));
        assert_eq!(declared_per_service(&partial.text), [service_chain(&web), added.clone(), gone.clone()].into(), "{}", partial.text);
        assert_eq!(partial.nat_chains_written, 2);
        assert!(!partial.text.contains(&format!("-A {kept} ")), "{}", partial.text);
        assert!(partial.text.contains(&format!("-A {added} ")) && partial.text.contains(&format!("-X {gone}\n")), "{}", partial.text);
        assert!(!partial.text.contains("*filter") && !partial.text.contains(":KUBE-SERVICES "), "{}", partial.text);
        // What the partial sync records is what a full sync would.
        let full_after = write_rules(&cfg(), &s, &e, &BTreeSet::new(), None, None);
        assert_eq!(partial.synced, full_after.synced);
        assert_eq!((partial.nat_rules, partial.filter_rules), (full_after.nat_rules, full_after.filter_rules));
    }

    /// A Service reported changed whose rules come out the same: nothing of it is declared
    /// again (a text with no chain at all); with no `last`, it would be written whole.
    #[test]
    fn an_unchanged_chain_is_not_declared_again() {
        let (s, e) = maps(golden_services());
        let full = write_rules(&cfg(), &s, &e, &BTreeSet::new(), None, None);
        let changed: ChangedServices = [("default".to_string(), "local".to_string()), ("default".to_string(), "aff".to_string())].into();
        let again = write_rules(&cfg(), &s, &e, &BTreeSet::new(), Some(&changed), Some(full.synced.clone()));
        assert_eq!(again.text, "*nat\nCOMMIT\n");
        assert_eq!(again.nat_chains_written, 0);
        assert_eq!(again.synced, full.synced);
        let existing: BTreeSet<String> = full.synced.nat_chains().map(String::from).collect();
        let blind = write_rules(&cfg(), &s, &e, &existing, Some(&changed), None);
        assert_eq!(blind.nat_chains_written, 3 + 5, "aff: SVC and 2 SEP; local: EXT, SVC, SVL and 2 SEP");
    }

    /// A full sync writes every chain whatever the last sync left: the same text as with
    /// nothing known (it is what repairs a table someone else changed).
    #[test]
    fn a_full_sync_writes_every_chain() {
        let (s, e) = maps(golden_services());
        let first = write_rules(&cfg(), &s, &e, &BTreeSet::new(), None, None);
        let again = write_rules(&cfg(), &s, &e, &BTreeSet::new(), None, Some(first.synced.clone()));
        assert_eq!(again.text, first.text);
        assert_eq!(again.nat_chains_written, first.synced.nat_chains().count());
    }

    /// Change after change, partial syncs (each given the last one's rules) leave the tables as
    /// a full sync of the same Services writes them into empty tables, and record the same
    /// rules; the chains of a removed endpoint, port or Service are deleted.
    #[test]
    fn partial_syncs_leave_what_a_full_sync_writes() {
        let mut items = golden_services();
        let (s, e) = maps(items.clone());
        let first = write_rules(&cfg(), &s, &e, &BTreeSet::new(), None, None);
        let mut tables = Tables::new();
        apply(&mut tables, &first.text);
        let mut last = first.synced;
        let key = |n: &str| ("default".to_string(), n.to_string());
        type Change = Box<dyn Fn(&mut Vec<(ServicePortInfo, Vec<Endpoint>)>)>;
        let steps: Vec<(&str, &str, Change)> = vec![
            ("an endpoint replaced", "web", Box::new(|i| i[0].1[1] = ep(9, false))),
            ("an affinity endpoint gone", "aff", Box::new(|i| { i[2].1.pop(); })),
            ("a local endpoint made remote", "local", Box::new(|i| i[3].1[0].is_local = false)),
            ("a Service removed", "np", Box::new(|i| { i.remove(1); })),
            ("a Service added", "new", Box::new(|i| i.push((svc("new", [10, 96, 0, 16]), vec![ep(20, false), ep(21, true)])))),
            ("a Service's last endpoints gone", "new", Box::new(|i| i.last_mut().unwrap().1.clear())),
            ("an empty Service gets an endpoint", "empty", Box::new(|i| i[4].1.push(ep(30, false)))),
            ("affinity turned off", "aff", Box::new(|i| i[1].0.affinity_timeout = None)),
            ("a port added", "web", Box::new(|i| i.push((ServicePortInfo { name: name("web", "https"), port: 443, ..svc("web", [10, 96, 0, 10]) }, vec![ep(1, true)])))),
            ("a port removed", "web", Box::new(|i| { i.pop(); })),
        ];
        for (step, service, change) in steps {
            change(&mut items);
            let (s, e) = maps(items.clone());
            let partial = write_rules(&cfg(), &s, &e, &BTreeSet::new(), Some(&[key(service)].into()), Some(last));
            apply(&mut tables, &partial.text);
            let full = write_rules(&cfg(), &s, &e, &BTreeSet::new(), None, None);
            let mut want = Tables::new();
            apply(&mut want, &full.text);
            assert_eq!(tables, want, "{step}:\n{}", partial.text);
            assert_eq!(partial.synced, full.synced, "{step}");
            assert!(partial.nat_chains_written < full.nat_chains_written, "{step}");
            last = partial.synced;
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
