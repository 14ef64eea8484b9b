//! Mirrors the rule-writing half of kube-proxy's nftables/proxier.go (`setupNFTables` and
//! `syncProxyRules`): every Service port and its endpoints turned into the chains, sets and map
//! elements of one table, `ip kube-proxy`, as a [`Transaction`]. A pure function.
//!
//! Where the iptables mode matches a packet against one rule per Service, this mode looks it up
//! in verdict maps, so a Service change is a few map elements and chains, not a rewrite of long
//! chains. A packet to a Service goes:
//!
//! 1. `nat-prerouting` / `nat-output` (base chains, priority dstnat) → `services`:
//!    `ip daddr . meta l4proto . th dport vmap @service-ips` (cluster IPs and external IPs), then
//!    `ip daddr @nodeport-ips meta l4proto . th dport vmap @service-nodeports` (node ports).
//! 2. `external-<hash>-<ns>/<name>/<proto>/<port>` (traffic from outside): masquerades it and goes
//!    on cluster-wide (policy `Cluster`), or sends pod and node traffic cluster-wide and the rest to
//!    the local endpoints (policy `Local`).
//! 3. `service-…` (all endpoints) / `local-…` (this node's): marks traffic from outside the
//!    cluster CIDR for masquerading; with ClientIP affinity, `ip saddr @affinity-… goto endpoint-…`
//!    sends a client back to its endpoint; then `numgen random mod N vmap { 0 : goto endpoint-…, … }`.
//! 4. `endpoint-…__<ip>/<port>`: masquerades an endpoint talking to itself, remembers the client
//!    for affinity, and DNATs.
//! 5. `nat-postrouting` → `masquerading` masquerades what `mark-for-masquerade` marked (0x4000).
//!
//! A port without usable endpoints is an element of `no-endpoint-services` (or
//! `no-endpoint-nodeports`) instead, looked up by the filter base chains before DNAT: `goto
//! reject-chain` ("connection refused"), or `drop` when a `Local` policy has endpoints only on other
//! nodes. After DNAT, `cluster-ips-check` rejects what is still addressed to a cluster IP (a port
//! the Service does not have) and the rest of `--service-cluster-ip-range` (kube-proxy drops
//! the latter; kubelab refuses it, as its safety net does).
//!
//! **Full and partial syncs.** A full sync writes the whole table: every chain added and flushed
//! and its rules written again, every map flushed and filled, the chains and affinity sets no
//! Service uses any more deleted (kube-proxy's full sync; the affinity sets are kept, with their
//! clients). A partial sync, given what the last successful sync wrote ([`SyncedTable`]), looks
//! only at the Services that changed: it writes the chains of theirs whose rules differ, adds and
//! deletes the map elements that differ, and deletes the chains and sets they no longer use.
//! kube-proxy's partial sync rewrites every chain of a changed Service and refills every map.

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;
use std::time::Duration;

use crate::endpoint::Endpoint;
use crate::endpointschangetracker::EndpointsMap;
use crate::iptables::rules::{RulesConfig, port_proto_hash};
use crate::proxier::ChangedServices;
use crate::serviceport::{Protocol, ServicePortInfo, ServicePortName};
use crate::servicechangetracker::ServicePortMap;
use crate::topology::categorize_endpoints;
use crate::util::cidr::Ipv4Cidr;
use crate::util::nftables::{BaseChain, ChainType, Element, Hook, Key, KeyValue, Op, Rule, Set, Stmt, Transaction, Verdict};

/// The table kube-proxy's nftables mode owns (family `ip`).
pub const TABLE: &str = "kube-proxy";

pub const SERVICES: &str = "services";
pub const MASQUERADING: &str = "masquerading";
pub const MARK_FOR_MASQUERADE: &str = "mark-for-masquerade";
pub const REJECT_CHAIN: &str = "reject-chain";
pub const SERVICE_ENDPOINTS_CHECK: &str = "service-endpoints-check";
pub const NODEPORT_ENDPOINTS_CHECK: &str = "nodeport-endpoints-check";
pub const CLUSTER_IPS_CHECK: &str = "cluster-ips-check";

pub const CLUSTER_IPS: &str = "cluster-ips";
pub const NODEPORT_IPS: &str = "nodeport-ips";
pub const SERVICE_IPS: &str = "service-ips";
pub const SERVICE_NODEPORTS: &str = "service-nodeports";
pub const NO_ENDPOINT_SERVICES: &str = "no-endpoint-services";
pub const NO_ENDPOINT_NODEPORTS: &str = "no-endpoint-nodeports";

/// The bit `mark-for-masquerade` sets and `masquerading` masquerades (`--masquerade-bit` 14).
pub const MASQ_MARK: u32 = 0x4000;

/// The prefixes of the per-Service chains and sets: one of ours that no Service uses is deleted
/// by a full sync. Their names also hold a `/` (`service-<hash>-<ns>/<name>/…`), which keeps
/// them apart from the fixed chains (`service-endpoints-check`).
pub const PER_SERVICE_PREFIXES: [&str; 5] = ["service-", "local-", "external-", "endpoint-", "affinity-"];

/// A per-Service chain or set of ours, by its name.
pub fn is_per_service(name: &str) -> bool {
    name.contains('/') && PER_SERVICE_PREFIXES.iter().any(|p| name.starts_with(p))
}

/// `service-ULMVA6XW-default/web/tcp/http`: kube-proxy's `servicePortChainNameBase` — a hash
/// (8 characters) keeps names unique, the rest makes them readable.
fn port_chain(prefix: &str, name: &ServicePortName) -> String {
    let proto = name.protocol.lower();
    let hash = &port_proto_hash(&name.to_string(), name.protocol.upper())[..8];
    format!("{prefix}-{hash}-{}/{}/{proto}/{}", name.namespace, name.name, name.port)
}

pub fn service_chain(name: &ServicePortName) -> String {
    port_chain("service", name)
}

pub fn local_chain(name: &ServicePortName) -> String {
    port_chain("local", name)
}

pub fn external_chain(name: &ServicePortName) -> String {
    port_chain("external", name)
}

/// `endpoint-5OJB2KTY-default/web/tcp/http__10.244.1.5/8080` (`servicePortEndpointChainNameBase`).
pub fn endpoint_chain(name: &ServicePortName, ep: &Endpoint) -> String {
    let proto = name.protocol.lower();
    let hash = &port_proto_hash(&format!("{name}{}{ep}", name.protocol.upper()), "")[..8];
    format!("endpoint-{hash}-{}/{}/{proto}/{}__{}/{}", name.namespace, name.name, name.port, ep.ip, ep.port)
}

/// The ClientIP-affinity set of an endpoint: the clients it has, each for the timeout.
pub fn affinity_set(name: &ServicePortName, ep: &Endpoint) -> String {
    endpoint_chain(name, ep).replacen("endpoint-", "affinity-", 1)
}

/// One Service port's part of the table.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PortRules {
    /// Its chains, in the order they are written, each with its rules.
    chains: Vec<(String, Vec<Rule>)>,
    /// Its elements of the shared sets and maps.
    elements: Vec<(&'static str, Element)>,
    /// Its affinity sets, with their timeout.
    affinity_sets: Vec<(String, Duration)>,
    /// The maps its `numgen random mod N vmap @…` rules pick an endpoint from: each named as
    /// the chain whose rule looks it up, with N and element `i` → `goto` the `i`th endpoint chain.
    picks: Vec<(String, u32, Vec<Element>)>,
}

impl PortRules {
    fn chain(&mut self, name: String) {
        self.chains.push((name, Vec::new()));
    }
    /// A rule in the chain added last.
    fn rule(&mut self, stmts: Vec<Stmt>, comment: Option<String>) {
        if let Some((_, rules)) = self.chains.last_mut() {
            rules.push(Rule { stmts, comment });
        }
    }
    fn element(&mut self, set: &'static str, key: KeyValue, verdict: Option<Verdict>) {
        self.elements.push((set, Element { key, verdict }));
    }
    fn rule_count(&self) -> usize {
        self.chains.iter().map(|(_, r)| r.len()).sum()
    }
    /// The names of its chains and sets.
    fn names(&self) -> impl Iterator<Item = &str> {
        let chains = self.chains.iter().map(|(c, _)| c.as_str());
        chains.chain(self.affinity_sets.iter().map(|(s, _)| s.as_str())).chain(self.picks.iter().map(|(m, _, _)| m.as_str()))
    }
}

/// What the last successful sync wrote, by Service port: the next partial sync compares with it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SyncedTable {
    ports: BTreeMap<ServicePortName, PortRules>,
}

impl SyncedTable {
    /// The per-Service chains.
    pub fn chains(&self) -> impl Iterator<Item = &str> {
        self.ports.values().flat_map(|p| p.chains.iter().map(|(c, _)| c.as_str()))
    }
}

/// A sync's transaction, and what the table holds once it is applied.
#[derive(Debug)]
pub struct Plan {
    pub tx: Transaction,
    /// Per-Service chains written (added or flushed and filled).
    pub chains_written: usize,
    /// Rules in the table once applied: in chains hooked for nat and in filter ones.
    pub nat_rules: usize,
    pub filter_rules: usize,
    pub synced: SyncedTable,
}

/// The table's chains and sets as a full sync finds them (to delete what no Service uses).
#[derive(Clone, Debug, Default)]
pub struct Existing {
    pub chains: Vec<String>,
    pub sets: Vec<String>,
}

/// Writes a sync: the whole table when `changed` or `last` is None (a full sync; `existing` is
/// what the table holds, to delete the rest), else only what changed for the `changed` Services.
pub fn write_table(
    cfg: &RulesConfig,
    service_cidr: Option<Ipv4Cidr>,
    services: &ServicePortMap,
    endpoints: &EndpointsMap,
    changed: Option<&ChangedServices>,
    last: Option<SyncedTable>,
    existing: &Existing,
) -> Plan {
    let no_endpoints = Vec::new();
    let base = base_chains(service_cidr);
    let count = |filter: bool| base.iter().filter(|c| c.filter == filter).map(|c| c.rules.len()).sum::<usize>();
    let (filter_rules, nat_base_rules) = (count(true), count(false));
    let mut tx = Transaction::new();
    let (ports, chains_written) = match (changed, last) {
        (Some(changed), Some(last)) => {
            let mut ports = last.ports;
            let mut plan = Partial::default();
            for (namespace, name) in changed {
                let first = ServicePortName { namespace: namespace.clone(), name: name.clone(), port: String::new(), protocol: Protocol::Tcp };
                let of_service = |k: &ServicePortName| k.namespace == *namespace && k.name == *name;
                let before: Vec<ServicePortName> = ports.range(&first..).map(|(k, _)| k).take_while(|k| of_service(k)).cloned().collect();
                for k in before.iter().filter(|k| !services.contains_key(*k)) {
                    if let Some(gone) = ports.remove(k) {
                        plan.compare(Some(&gone), &PortRules::default());
                    }
                }
                for svc in services.range(&first..).map(|(_, s)| s).take_while(|s| of_service(&s.name)) {
                    let now = write_port(cfg, svc, endpoints.get(&svc.name).unwrap_or(&no_endpoints));
                    plan.compare(ports.get(&svc.name), &now);
                    ports.insert(svc.name.clone(), now);
                }
            }
            // A Service's ports share its cluster IP: one port gone leaves it to the others.
            let in_use: BTreeSet<KeyValue> = ports.values().flat_map(|p| &p.elements).filter(|(s, _)| *s == CLUSTER_IPS).map(|(_, e)| e.key).collect();
            if let Some(del) = plan.del_elements.get_mut(CLUSTER_IPS) {
                del.retain(|e| !in_use.contains(&e.key));
            }
            let written = plan.written.len();
            plan.into_ops(&mut tx);
            (ports, written)
        }
        _ => {
            let ports: BTreeMap<ServicePortName, PortRules> =
                services.values().map(|svc| (svc.name.clone(), write_port(cfg, svc, endpoints.get(&svc.name).unwrap_or(&no_endpoints)))).collect();
            write_full(cfg, &base, &ports, existing, &mut tx);
            let written = ports.values().map(|p| p.chains.len()).sum();
            (ports, written)
        }
    };
    let port_rules: usize = ports.values().map(PortRules::rule_count).sum();
    Plan { tx, chains_written, nat_rules: nat_base_rules + port_rules, filter_rules, synced: SyncedTable { ports } }
}

/// A chain every sync has, whatever the Services.
struct FixedChain {
    name: &'static str,
    hook: Option<BaseChain>,
    rules: Vec<Rule>,
    /// Run from a filter hook (else from a nat one).
    filter: bool,
}

/// The chains every sync has, with their rules.
fn base_chains(service_cidr: Option<Ipv4Cidr>) -> Vec<FixedChain> {
    use Stmt::*;
    let rule = |stmts: Vec<Stmt>| Rule { stmts, comment: None };
    let commented = |stmts: Vec<Stmt>, c: &str| Rule { stmts, comment: Some(c.to_string()) };
    let jump = |c: &str| Verdict(crate::util::nftables::Verdict::Jump(c.to_string()));
    let hook = |kind, hook, priority| Some(BaseChain { kind, hook, priority });
    // kube-proxy's priorities: the filter checks just before DNAT (dstnat - 10), the
    // cluster-IP check of the node's own traffic just after it (dstnat + 10).
    const DSTNAT: i32 = -100;
    const SRCNAT: i32 = 100;
    let mut cluster_ips_check = vec![commented(vec![InSet { key: Key::Daddr, set: CLUSTER_IPS.into(), negate: false }, Reject], "Reject traffic to invalid ports of ClusterIPs")];
    if let Some(range) = service_cidr {
        // kube-proxy drops these; kubelab refuses them, as its service-range safety net does
        // (a client learns at once that nothing is there).
        cluster_ips_check.push(commented(vec![Ip { field: Key::Daddr, negate: false, net: range }, Reject], "Reject traffic to unallocated ClusterIPs"));
    }
    let chains: Vec<(&'static str, Option<BaseChain>, Vec<Rule>)> = vec![
        ("filter-input", hook(ChainType::Filter, Hook::Input, DSTNAT - 10), vec![rule(vec![CtStateNew, jump(NODEPORT_ENDPOINTS_CHECK)]), rule(vec![CtStateNew, jump(SERVICE_ENDPOINTS_CHECK)])]),
        ("filter-forward", hook(ChainType::Filter, Hook::Forward, DSTNAT - 10), vec![rule(vec![CtStateNew, jump(SERVICE_ENDPOINTS_CHECK)]), rule(vec![CtStateNew, jump(CLUSTER_IPS_CHECK)])]),
        ("filter-output", hook(ChainType::Filter, Hook::Output, DSTNAT - 10), vec![rule(vec![CtStateNew, jump(SERVICE_ENDPOINTS_CHECK)])]),
        ("filter-output-post-dnat", hook(ChainType::Filter, Hook::Output, DSTNAT + 10), vec![rule(vec![CtStateNew, jump(CLUSTER_IPS_CHECK)])]),
        ("nat-prerouting", hook(ChainType::Nat, Hook::Prerouting, DSTNAT), vec![rule(vec![jump(SERVICES)])]),
        ("nat-output", hook(ChainType::Nat, Hook::Output, DSTNAT), vec![rule(vec![jump(SERVICES)])]),
        ("nat-postrouting", hook(ChainType::Nat, Hook::Postrouting, SRCNAT), vec![rule(vec![jump(MASQUERADING)])]),
        (SERVICE_ENDPOINTS_CHECK, None, vec![rule(vec![Vmap { key: Key::DaddrProtoPort, map: NO_ENDPOINT_SERVICES.into() }])]),
        (NODEPORT_ENDPOINTS_CHECK, None, vec![rule(vec![InSet { key: Key::Daddr, set: NODEPORT_IPS.into(), negate: false }, Vmap { key: Key::ProtoPort, map: NO_ENDPOINT_NODEPORTS.into() }])]),
        (CLUSTER_IPS_CHECK, None, cluster_ips_check),
        (REJECT_CHAIN, None, vec![commented(vec![Reject], "helper for @no-endpoint-services / @no-endpoint-nodeports")]),
        (MARK_FOR_MASQUERADE, None, vec![rule(vec![MarkOr(MASQ_MARK)])]),
        (
            MASQUERADING,
            None,
            vec![
                rule(vec![MarkUnset(MASQ_MARK), Verdict(crate::util::nftables::Verdict::Return)]),
                // Cleared, so that a packet that goes through netfilter again is not masqueraded twice.
                rule(vec![MarkXor(MASQ_MARK)]),
                rule(vec![Masquerade { fully_random: true }]),
            ],
        ),
        (
            SERVICES,
            None,
            vec![
                rule(vec![Vmap { key: Key::DaddrProtoPort, map: SERVICE_IPS.into() }]),
                rule(vec![InSet { key: Key::Daddr, set: NODEPORT_IPS.into(), negate: false }, Vmap { key: Key::ProtoPort, map: SERVICE_NODEPORTS.into() }]),
            ],
        ),
    ];
    const FILTER: [&str; 4] = [SERVICE_ENDPOINTS_CHECK, NODEPORT_ENDPOINTS_CHECK, CLUSTER_IPS_CHECK, REJECT_CHAIN];
    chains
        .into_iter()
        .map(|(name, hook, rules)| {
            let filter = hook.map_or(FILTER.contains(&name), |h| h.kind == ChainType::Filter);
            FixedChain { name, hook, rules, filter }
        })
        .collect()
}

/// The shared sets and maps (kube-proxy's names and types).
fn shared_sets() -> Vec<Set> {
    let set = |name: &str, key, map, comment: &str| Set { name: name.into(), key, map, timeout: None, comment: Some(comment.into()) };
    vec![
        set(CLUSTER_IPS, Key::Daddr, false, "Active ClusterIPs"),
        set(NODEPORT_IPS, Key::Daddr, false, "IPs that accept NodePort traffic"),
        set(SERVICE_IPS, Key::DaddrProtoPort, true, "ClusterIP, ExternalIP and LoadBalancer IP traffic"),
        set(SERVICE_NODEPORTS, Key::ProtoPort, true, "NodePort traffic"),
        set(NO_ENDPOINT_SERVICES, Key::DaddrProtoPort, true, "vmap to drop or reject packets to services with no endpoints"),
        set(NO_ENDPOINT_NODEPORTS, Key::ProtoPort, true, "vmap to drop or reject packets to service nodeports with no endpoints"),
    ]
}

/// A full sync: the table, every chain added, flushed and filled, every shared set flushed and
/// filled, and what no Service uses any more deleted.
fn write_full(cfg: &RulesConfig, base: &[FixedChain], ports: &BTreeMap<ServicePortName, PortRules>, existing: &Existing, tx: &mut Transaction) {
    tx.push(Op::AddTable { comment: Some("rules for kube-proxy".into()) });
    // Chains first (rules and elements refer to them), then sets, rules, elements.
    for c in base {
        tx.push(Op::AddChain { name: c.name.into(), base: c.hook, comment: None });
        tx.push(Op::FlushChain(c.name.into()));
    }
    for (name, _) in ports.values().flat_map(|p| &p.chains) {
        tx.push(Op::AddChain { name: name.clone(), base: None, comment: None });
        tx.push(Op::FlushChain(name.clone()));
    }
    for set in shared_sets() {
        let name = set.name.clone();
        tx.push(Op::AddSet(set));
        tx.push(Op::FlushSet(name));
    }
    for (name, timeout) in ports.values().flat_map(|p| &p.affinity_sets) {
        // Not flushed: the clients an endpoint has stay with it.
        tx.push(Op::AddSet(affinity(name, *timeout)));
    }
    for (name, n, _) in ports.values().flat_map(|p| &p.picks) {
        tx.push(Op::AddSet(pick_map(name, *n)));
        tx.push(Op::FlushSet(name.clone()));
    }
    for c in base {
        for r in &c.rules {
            tx.push(Op::AddRule { chain: c.name.into(), rule: r.clone() });
        }
    }
    for (name, rules) in ports.values().flat_map(|p| &p.chains) {
        for r in rules {
            tx.push(Op::AddRule { chain: name.clone(), rule: r.clone() });
        }
    }
    let mut elements: BTreeMap<&str, Vec<Element>> = BTreeMap::new();
    for addr in &cfg.nodeport_addresses {
        elements.entry(NODEPORT_IPS).or_default().push(Element { key: KeyValue::Addr(*addr), verdict: None });
    }
    let mut seen = BTreeSet::new();
    for (set, e) in ports.values().flat_map(|p| &p.elements) {
        // Two Services claiming one key (an external IP and port): the first keeps it, as a map
        // holds one verdict per key.
        if seen.insert((*set, e.key)) {
            elements.entry(set).or_default().push(e.clone());
        }
    }
    for (set, elements) in elements {
        tx.push(Op::AddElements { set: set.into(), elements });
    }
    for (name, _, elements) in ports.values().flat_map(|p| &p.picks) {
        tx.push(Op::AddElements { set: name.clone(), elements: elements.clone() });
    }
    // What no Service uses any more: its chains (flushed here only if no longer ours, so that no
    // rule of theirs refers to a set or another chain), then its sets (whose elements may jump
    // to those chains), then the chains.
    let ours: BTreeSet<&str> = ports.values().flat_map(PortRules::names).collect();
    let stale = |n: &&String| is_per_service(n) && !ours.contains(n.as_str());
    let stale_chains: Vec<&String> = existing.chains.iter().filter(stale).collect();
    for c in &stale_chains {
        tx.push(Op::FlushChain((*c).clone()));
    }
    for s in existing.sets.iter().filter(stale) {
        tx.push(Op::DeleteSet(s.clone()));
    }
    for c in stale_chains {
        tx.push(Op::DeleteChain(c.clone()));
    }
}

fn affinity(name: &str, timeout: Duration) -> Set {
    Set { name: name.into(), key: Key::Saddr, map: false, timeout: Some(timeout), comment: None }
}

/// A partial sync's changes, gathered port by port and put in a safe order at the end.
#[derive(Default)]
struct Partial {
    new_sets: Vec<Set>,
    new_chains: Vec<String>,
    /// Chains whose rules are written again (new ones too), with their rules.
    written: Vec<(String, Vec<Rule>)>,
    del_elements: BTreeMap<String, Vec<Element>>,
    add_elements: BTreeMap<String, Vec<Element>>,
    gone_chains: Vec<String>,
    gone_sets: Vec<String>,
}

impl Partial {
    /// What turns `before` (None: a new port) into `now`.
    fn compare(&mut self, before: Option<&PortRules>, now: &PortRules) {
        let empty = PortRules::default();
        let before = before.unwrap_or(&empty);
        for (chain, rules) in &now.chains {
            match before.chains.iter().find(|(c, _)| c == chain) {
                Some((_, r)) if r == rules => {}
                Some(_) => self.written.push((chain.clone(), rules.clone())),
                None => {
                    self.new_chains.push(chain.clone());
                    self.written.push((chain.clone(), rules.clone()));
                }
            }
        }
        for (chain, _) in &before.chains {
            if !now.chains.iter().any(|(c, _)| c == chain) {
                self.gone_chains.push(chain.clone());
            }
        }
        for (set, e) in &before.elements {
            if !now.elements.contains(&(*set, e.clone())) {
                self.del_elements.entry((*set).to_string()).or_default().push(e.clone());
            }
        }
        for (set, e) in &now.elements {
            if !before.elements.contains(&(*set, e.clone())) {
                self.add_elements.entry((*set).to_string()).or_default().push(e.clone());
            }
        }
        for (map, n, elements) in &now.picks {
            let had = before.picks.iter().find(|(m, _, _)| m == map).map(|(_, _, e)| e.as_slice());
            if had.is_none() {
                self.new_sets.push(pick_map(map, *n));
            }
            let had = had.unwrap_or_default();
            let gone: Vec<Element> = had.iter().filter(|e| !elements.contains(e)).cloned().collect();
            let new: Vec<Element> = elements.iter().filter(|e| !had.contains(e)).cloned().collect();
            if !gone.is_empty() {
                self.del_elements.entry(map.clone()).or_default().extend(gone);
            }
            if !new.is_empty() {
                self.add_elements.entry(map.clone()).or_default().extend(new);
            }
        }
        for (map, _, _) in &before.picks {
            if !now.picks.iter().any(|(m, _, _)| m == map) {
                self.gone_sets.push(map.clone());
            }
        }
        for (s, timeout) in &now.affinity_sets {
            if !before.affinity_sets.iter().any(|(b, _)| b == s) {
                self.new_sets.push(affinity(s, *timeout));
            }
        }
        for (s, _) in &before.affinity_sets {
            if !now.affinity_sets.iter().any(|(n, _)| n == s) {
                self.gone_sets.push(s.clone());
            }
        }
    }

    /// New sets and chains first (what is written next refers to them), then the rewritten
    /// chains, the elements (deleted before added: a key whose verdict changes is both), and
    /// last what is gone: its chains flushed (no rule of theirs refers to anything any more),
    /// its sets deleted (no element of theirs jumps to a chain any more), its chains deleted.
    fn into_ops(self, tx: &mut Transaction) {
        for s in self.new_sets {
            tx.push(Op::AddSet(s));
        }
        for c in self.new_chains {
            tx.push(Op::AddChain { name: c, base: None, comment: None });
        }
        for (chain, rules) in self.written {
            tx.push(Op::FlushChain(chain.clone()));
            for rule in rules {
                tx.push(Op::AddRule { chain: chain.clone(), rule });
            }
        }
        for (set, elements) in self.del_elements.into_iter().filter(|(_, e)| !e.is_empty()) {
            tx.push(Op::DeleteElements { set, elements });
        }
        for (set, elements) in self.add_elements {
            tx.push(Op::AddElements { set, elements });
        }
        for c in &self.gone_chains {
            tx.push(Op::FlushChain(c.clone()));
        }
        for s in self.gone_sets {
            tx.push(Op::DeleteSet(s));
        }
        for c in self.gone_chains {
            tx.push(Op::DeleteChain(c));
        }
    }
}

/// `ip daddr 10.96.0.10 tcp dport 80`, the match of a cluster IP's port.
fn dest(svc: &ServicePortInfo, ip: Ipv4Addr) -> Vec<Stmt> {
    vec![
        Stmt::Ip { field: Key::Daddr, negate: false, net: Ipv4Cidr { network: ip, prefix: 32 } },
        Stmt::L4Proto(svc.name.protocol),
        Stmt::Dport(svc.name.protocol, svc.port),
    ]
}

fn write_port(cfg: &RulesConfig, svc: &ServicePortInfo, eps: &[Endpoint]) -> PortRules {
    let mut b = PortRules::default();
    let name = svc.name.to_string();
    let proto = svc.name.protocol;
    let cat = categorize_endpoints(svc, eps);
    let svc_chain = service_chain(&svc.name);
    let local = local_chain(&svc.name);
    let ext_chain = external_chain(&svc.name);
    let goto = |c: &str| Verdict::Goto(c.to_string());

    let (internal_chain, internal_eps) = if svc.internal_policy_local { (&local, &cat.local) } else { (&svc_chain, &cat.cluster) };
    let external_eps = if svc.external_policy_local { &cat.local } else { &cat.cluster };
    let has_endpoints = !eps.is_empty();
    // As in the iptables mode: a Local policy with endpoints elsewhere drops, no endpoints at
    // all rejects.
    let no_endpoints = |local_policy: bool| {
        if local_policy && has_endpoints && eps.iter().any(|e| e.ready || e.serving) { Verdict::Drop } else { goto(REJECT_CHAIN) }
    };

    // Step 1: the cluster IP and external IPs.
    b.element(CLUSTER_IPS, KeyValue::Addr(svc.cluster_ip), None);
    let cluster_key = KeyValue::AddrProtoPort(svc.cluster_ip, proto, svc.port);
    if internal_eps.is_empty() {
        b.element(NO_ENDPOINT_SERVICES, cluster_key, Some(no_endpoints(svc.internal_policy_local)));
    } else {
        b.element(SERVICE_IPS, cluster_key, Some(goto(internal_chain)));
    }
    if svc.externally_accessible() {
        let (map_ips, map_ports, verdict) = if external_eps.is_empty() {
            (NO_ENDPOINT_SERVICES, NO_ENDPOINT_NODEPORTS, no_endpoints(svc.external_policy_local))
        } else {
            (SERVICE_IPS, SERVICE_NODEPORTS, goto(&ext_chain))
        };
        for ip in &svc.external_ips {
            b.element(map_ips, KeyValue::AddrProtoPort(*ip, proto, svc.port), Some(verdict.clone()));
        }
        if let Some(np) = svc.node_port {
            b.element(map_ports, KeyValue::ProtoPort(proto, np), Some(verdict.clone()));
        }
        // Step 2: the external chain.
        if !external_eps.is_empty() {
            b.chain(ext_chain.clone());
            let mark = Stmt::Verdict(Verdict::Jump(MARK_FOR_MASQUERADE.into()));
            if !svc.external_policy_local {
                b.rule(vec![mark], Some(format!("masquerade traffic for {name} external destinations")));
                b.rule(vec![Stmt::Verdict(goto(&svc_chain))], None);
            } else {
                if !cat.cluster.is_empty() {
                    if let Some(cidr) = cfg.cluster_cidr {
                        let from_pods = Stmt::Ip { field: Key::Saddr, negate: false, net: cidr };
                        b.rule(vec![from_pods, Stmt::Verdict(goto(&svc_chain))], Some(format!("short-circuit pod traffic for {name} external destinations")));
                    }
                    let from_node = Stmt::FibLocal { field: Key::Saddr, negate: false };
                    b.rule(vec![from_node.clone(), mark], Some(format!("masquerade local traffic for {name} external destinations")));
                    b.rule(vec![from_node, Stmt::Verdict(goto(&svc_chain))], Some(format!("short-circuit local traffic for {name} external destinations")));
                }
                b.rule(vec![Stmt::Verdict(goto(&local))], None);
            }
        }
    }

    // Step 3: the cluster-wide chain and the node-local one.
    let svc_used = !cat.cluster.is_empty() && (!svc.internal_policy_local || (svc.externally_accessible() && !external_eps.is_empty()));
    if svc_used {
        b.chain(svc_chain.clone());
        let mark = Stmt::Verdict(Verdict::Jump(MARK_FOR_MASQUERADE.into()));
        if cfg.masquerade_all || !cfg.bridge_netfilter {
            b.rule([dest(svc, svc.cluster_ip), vec![mark]].concat(), None);
        } else if let Some(cidr) = cfg.cluster_cidr {
            let outside = Stmt::Ip { field: Key::Saddr, negate: true, net: cidr };
            b.rule([dest(svc, svc.cluster_ip), vec![outside, mark]].concat(), None);
        }
        write_balancing(svc, &cat.cluster, &mut b);
    }
    let local_used = !cat.local.is_empty() && (svc.internal_policy_local || (svc.externally_accessible() && svc.external_policy_local));
    if local_used {
        b.chain(local.clone());
        write_balancing(svc, &cat.local, &mut b);
    }

    // Step 4: one chain per endpoint.
    for ep in &cat.all_reachable {
        let chain = endpoint_chain(&svc.name, ep);
        b.chain(chain.clone());
        let itself = Stmt::Ip { field: Key::Saddr, negate: false, net: Ipv4Cidr { network: ep.ip, prefix: 32 } };
        b.rule(vec![itself, Stmt::Verdict(Verdict::Jump(MARK_FOR_MASQUERADE.into()))], None);
        if let Some(timeout) = svc.affinity_timeout {
            let set = affinity_set(&svc.name, ep);
            b.rule(vec![Stmt::UpdateSet { set: set.clone(), key: Key::Saddr }], None);
            b.affinity_sets.push((set, Duration::from_secs(u64::from(timeout))));
        }
        b.rule(vec![Stmt::Dnat { proto, addr: ep.ip, port: ep.port }], None);
    }
    b
}

/// Affinity first, then the random spread (`writeServiceToEndpointRules`), through the chain's
/// own map (named as the chain).
fn write_balancing(svc: &ServicePortInfo, eps: &[&Endpoint], b: &mut PortRules) {
    if svc.affinity_timeout.is_some() {
        for ep in eps {
            let chain = endpoint_chain(&svc.name, ep);
            b.rule(vec![Stmt::InSet { key: Key::Saddr, set: affinity_set(&svc.name, ep), negate: false }, Stmt::Verdict(Verdict::Goto(chain))], None);
        }
    }
    let Some((map, _)) = b.chains.last() else { return };
    let map = map.clone();
    let n = u32::try_from(eps.len()).unwrap_or(u32::MAX);
    let elements = eps
        .iter()
        .zip(0..)
        .map(|(ep, i)| Element { key: KeyValue::Number(i), verdict: Some(Verdict::Goto(endpoint_chain(&svc.name, ep))) })
        .collect();
    b.rule(vec![Stmt::NumgenVmap { modulus: n, map: map.clone() }], None);
    b.picks.push((map, n, elements));
}

/// A numgen map (no comment: its user data says the key's byte order).
fn pick_map(name: &str, modulus: u32) -> Set {
    Set { name: name.into(), key: Key::Numgen(modulus), map: true, timeout: None, comment: None }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::iptables::rules::tests::{cfg, ep, golden_services, maps, name, svc};

    /// The table as a model: chains with their rules, sets with their elements. `apply` plays a
    /// transaction on it with the kernel's checks that matter here: a chain is deleted only when
    /// empty and unreferenced, an element deleted only when there, a map key holds one verdict,
    /// a rule refers only to chains and sets that exist.
    #[derive(Clone, Debug, Default, PartialEq, Eq)]
    struct Model {
        chains: BTreeMap<String, Vec<Rule>>,
        sets: BTreeMap<String, BTreeMap<KeyValue, Option<Verdict>>>,
    }

    fn refs(rule: &Rule) -> (Vec<String>, Vec<String>) {
        let (mut chains, mut sets) = (Vec::new(), Vec::new());
        for s in &rule.stmts {
            match s {
                Stmt::Verdict(Verdict::Jump(c) | Verdict::Goto(c)) => chains.push(c.clone()),
                Stmt::NumgenVmap { map, .. } => sets.push(map.clone()),
                Stmt::InSet { set, .. } | Stmt::UpdateSet { set, .. } => sets.push(set.clone()),
                Stmt::Vmap { map, .. } => sets.push(map.clone()),
                _ => {}
            }
        }
        (chains, sets)
    }

    impl Model {
        fn referenced(&self, chain: &str) -> bool {
            self.chains.values().flatten().any(|r| refs(r).0.iter().any(|c| c == chain))
                || self.sets.values().flat_map(|s| s.values()).any(|v| matches!(v, Some(Verdict::Jump(c) | Verdict::Goto(c)) if c == chain))
        }

        fn apply(&mut self, tx: &Transaction) {
            for op in &tx.ops {
                match op {
                    Op::AddTable { .. } => {}
                    Op::DeleteTable => *self = Model::default(),
                    Op::AddChain { name, .. } => {
                        self.chains.entry(name.clone()).or_default();
                    }
                    Op::FlushChain(c) => self.chains.get_mut(c).unwrap_or_else(|| panic!("flush of a missing chain {c}")).clear(),
                    Op::DeleteChain(c) => {
                        assert!(self.chains.get(c).is_some_and(Vec::is_empty), "delete of a missing or non-empty chain {c}");
                        self.chains.remove(c);
                        assert!(!self.referenced(c), "delete of chain {c} still referred to");
                    }
                    Op::AddRule { chain, rule } => {
                        let (chains, sets) = refs(rule);
                        for c in chains {
                            assert!(self.chains.contains_key(&c), "a rule of {chain} refers to missing chain {c}");
                        }
                        for s in sets {
                            assert!(self.sets.contains_key(&s), "a rule of {chain} refers to missing set {s}");
                        }
                        self.chains.get_mut(chain).unwrap_or_else(|| panic!("rule in a missing chain {chain}")).push(rule.clone());
                    }
                    Op::AddSet(s) => {
                        self.sets.entry(s.name.clone()).or_default();
                    }
                    Op::FlushSet(s) => self.sets.get_mut(s).expect("flush of a missing set").clear(),
                    Op::DeleteSet(s) => {
                        assert!(!self.chains.values().flatten().any(|r| refs(r).1.contains(s)), "delete of set {s} still referred to");
                        self.sets.remove(s).expect("delete of a missing set");
                    }
                    Op::AddElements { set, elements } => {
                        let s = self.sets.get_mut(set).unwrap_or_else(|| panic!("elements of a missing set {set}"));
                        for e in elements {
                            if let Some(v) = s.get(&e.key) {
                                assert_eq!(v, &e.verdict, "{set}: key {:?} already maps elsewhere", e.key);
                            }
                            s.insert(e.key, e.verdict.clone());
                        }
                    }
                    Op::DeleteElements { set, elements } => {
                        let s = self.sets.get_mut(set).expect("elements of a missing set");
                        for e in elements {
                            assert!(s.remove(&e.key).is_some(), "{set}: delete of a missing element {:?}", e.key);
                        }
                    }
                }
            }
            for c in self.chains.keys() {
                assert!(!c.starts_with("endpoint-") || self.referenced(c), "chain {c} left unreferenced");
            }
        }
    }

    fn full(items: Vec<(ServicePortInfo, Vec<Endpoint>)>, existing: &Existing) -> Plan {
        let (s, e) = maps(items);
        write_table(&cfg(), Some(Ipv4Cidr::parse("10.96.0.0/12").unwrap()), &s, &e, None, None, existing)
    }

    fn partial(items: Vec<(ServicePortInfo, Vec<Endpoint>)>, changed: &[&str], last: &Plan) -> Plan {
        let (s, e) = maps(items);
        let changed: ChangedServices = changed.iter().map(|n| ("default".to_string(), n.to_string())).collect();
        write_table(&cfg(), Some(Ipv4Cidr::parse("10.96.0.0/12").unwrap()), &s, &e, Some(&changed), Some(last.synced.clone()), &Existing::default())
    }

    fn element<'a>(m: &'a Model, set: &str, key: KeyValue) -> Option<&'a Option<Verdict>> {
        m.sets.get(set).and_then(|s| s.get(&key))
    }

    /// Every Service of the golden set as the maps and chains kube-proxy's nftables mode has.
    #[test]
    fn a_full_sync_writes_maps_and_chains() {
        let plan = full(golden_services(), &Existing::default());
        let mut m = Model::default();
        m.apply(&plan.tx);
        let web = name("web", "http");
        let tcp = Protocol::Tcp;
        assert_eq!(element(&m, SERVICE_IPS, KeyValue::AddrProtoPort([10, 96, 0, 10].into(), tcp, 80)), Some(&Some(Verdict::Goto(service_chain(&web)))));
        assert_eq!(element(&m, SERVICE_NODEPORTS, KeyValue::ProtoPort(tcp, 30080)), Some(&Some(Verdict::Goto(external_chain(&name("np", "http"))))));
        assert_eq!(element(&m, NO_ENDPOINT_SERVICES, KeyValue::AddrProtoPort([10, 96, 0, 15].into(), tcp, 80)), Some(&Some(Verdict::Goto(REJECT_CHAIN.into()))));
        assert_eq!(element(&m, NO_ENDPOINT_NODEPORTS, KeyValue::ProtoPort(tcp, 30082)), Some(&Some(Verdict::Goto(REJECT_CHAIN.into()))));
        assert_eq!(m.sets[CLUSTER_IPS].len(), 6);
        assert_eq!(m.sets[NODEPORT_IPS].keys().collect::<Vec<_>>(), [&KeyValue::Addr([192, 168, 50, 2].into())]);
        // web: masquerade from outside the cluster CIDR, then a random pick of two endpoints.
        let rules = &m.chains[&service_chain(&web)];
        assert_eq!(rules.len(), 2);
        assert!(rules[0].stmts.contains(&Stmt::Ip { field: Key::Saddr, negate: true, net: cfg().cluster_cidr.unwrap() }), "{rules:?}");
        assert_eq!(rules[1].stmts, [Stmt::NumgenVmap { modulus: 2, map: service_chain(&web) }]);
        let pick = &m.sets[&service_chain(&web)];
        assert_eq!(pick.get(&KeyValue::Number(0)), Some(&Some(Verdict::Goto(endpoint_chain(&web, &ep(1, true))))));
        assert_eq!(pick.get(&KeyValue::Number(1)), Some(&Some(Verdict::Goto(endpoint_chain(&web, &ep(2, false))))));
        let sep = &m.chains[&endpoint_chain(&web, &ep(2, false))];
        assert_eq!(sep.last().unwrap().stmts, [Stmt::Dnat { proto: tcp, addr: [10, 244, 1, 2].into(), port: 8080 }]);
        // aff: an affinity set per endpoint, checked before the random pick, updated on the way.
        let aff = name("aff", "http");
        assert!(m.sets.contains_key(&affinity_set(&aff, &ep(4, false))));
        assert_eq!(m.chains[&service_chain(&aff)].len(), 1 + 2 + 1);
        // itp (internalTrafficPolicy Local, no endpoint here): dropped, not rejected.
        assert_eq!(element(&m, NO_ENDPOINT_SERVICES, KeyValue::AddrProtoPort([10, 96, 0, 14].into(), tcp, 80)), Some(&Some(Verdict::Drop)));
        // local (externalTrafficPolicy Local): the external chain ends in the local one.
        let ext = &m.chains[&external_chain(&name("local", "http"))];
        assert_eq!(ext.last().unwrap().stmts, [Stmt::Verdict(Verdict::Goto(local_chain(&name("local", "http"))))]);
        assert_eq!(plan.nat_rules, m.chains.iter().filter(|(c, _)| !c.starts_with("filter-") && ![SERVICE_ENDPOINTS_CHECK, NODEPORT_ENDPOINTS_CHECK, CLUSTER_IPS_CHECK, REJECT_CHAIN].contains(&c.as_str())).map(|(_, r)| r.len()).sum::<usize>());
        // Names nft takes (at most 255 bytes).
        assert!(m.chains.keys().all(|c| c.len() < 256));
        assert_eq!(service_chain(&web), format!("service-{}-default/web/tcp/http", &port_proto_hash("default/web:http", "TCP")[..8]));
    }

    /// A sequence of changes synced partially leaves the table as a full sync of the end state
    /// writes it, and each partial sync writes only what changed.
    #[test]
    fn partial_syncs_leave_what_a_full_sync_writes() {
        let mut items = golden_services();
        let first = full(items.clone(), &Existing::default());
        let mut m = Model::default();
        m.apply(&first.tx);
        let mut last = first;
        let web = name("web", "http");

        // One endpoint out, one in: the new endpoint's chain written, the old one's deleted,
        // the Service chain's map pointed at the new one; nothing else (its rule, `numgen
        // random mod 2 vmap @…`, stays as it is).
        items[0].1[1] = ep(9, false);
        let p = partial(items.clone(), &["web"], &last);
        assert_eq!(p.chains_written, 1, "{:#?}", p.tx);
        assert!(p.tx.ops.contains(&Op::DeleteChain(endpoint_chain(&web, &ep(2, false)))));
        let (kept, svc_chain) = (endpoint_chain(&web, &ep(1, true)), service_chain(&web));
        assert!(!p.tx.ops.iter().any(|o| match o {
            Op::AddElements { set, .. } | Op::DeleteElements { set, .. } => *set != svc_chain,
            Op::AddRule { chain, .. } | Op::FlushChain(chain) => *chain == kept || *chain == svc_chain,
            _ => false,
        }), "{:#?}", p.tx);
        m.apply(&p.tx);
        last = p;

        // web loses its endpoints: its element moves to no-endpoint-services, its chains go.
        items[0].1.clear();
        let p = partial(items.clone(), &["web"], &last);
        m.apply(&p.tx);
        assert_eq!(element(&m, SERVICE_IPS, KeyValue::AddrProtoPort([10, 96, 0, 10].into(), Protocol::Tcp, 80)), None);
        assert!(!m.chains.contains_key(&service_chain(&web)));
        last = p;

        // aff's endpoints change (an affinity set goes, one comes), np is deleted, a new
        // two-port Service comes, then loses one port (its cluster IP stays in cluster-ips).
        items[2].1 = vec![ep(4, false), ep(10, false)];
        items.remove(1);
        let mut two = svc("two", [10, 96, 0, 20]);
        let mut two_b = two.clone();
        two_b.name = name("two", "metrics");
        two_b.port = 9090;
        items.push((two.clone(), vec![ep(11, false)]));
        items.push((two_b, vec![ep(11, false)]));
        let p = partial(items.clone(), &["aff", "np", "two"], &last);
        m.apply(&p.tx);
        assert!(!m.sets.contains_key(&affinity_set(&name("aff", "http"), &ep(5, false))));
        last = p;
        items.pop();
        let p = partial(items.clone(), &["two"], &last);
        m.apply(&p.tx);
        assert!(m.sets[CLUSTER_IPS].contains_key(&KeyValue::Addr([10, 96, 0, 20].into())), "two's other port keeps its cluster IP");
        last = p;
        two.port = 81;
        items.last_mut().unwrap().0 = two;
        let p = partial(items.clone(), &["two"], &last);
        m.apply(&p.tx);

        // Nothing changed: an empty transaction.
        let quiet = partial(items.clone(), &["web", "aff"], &p);
        assert!(quiet.tx.is_empty(), "{:#?}", quiet.tx);

        let mut want = Model::default();
        want.apply(&full(items.clone(), &Existing::default()).tx);
        assert_eq!(m, want);

        // A full sync over what the partial syncs left deletes nothing of ours, and one given a
        // stale chain and set deletes them.
        let existing = Existing { chains: m.chains.keys().cloned().chain(["endpoint-XXXXXXXX-default/old/tcp/http__10.244.9.9/80".into()]).collect(), sets: m.sets.keys().cloned().chain(["affinity-XXXXXXXX-default/old/tcp/http__10.244.9.9/80".into()]).collect() };
        let mut stale = m.clone();
        stale.chains.insert(existing.chains.last().unwrap().clone(), vec![]);
        stale.sets.insert(existing.sets.last().unwrap().clone(), BTreeMap::new());
        stale.apply(&full(items, &existing).tx);
        assert_eq!(stale, want);
    }
}
