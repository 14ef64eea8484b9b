//! Mirrors kube-proxy's iptables/proxier.go (the `Proxier` type, `syncProxyRules` and
//! `iptablesJumpChains`): the trackers the watches feed, and one sync of the rules.
//!
//! A sync:
//! 1. takes the current [`ServicePortMap`] and [`EndpointsMap`] from the trackers;
//! 2. writes the whole ruleset ([`rules::write_rules`]), deleting per-Service chains the previous
//!    sync wrote and this one does not;
//! 3. applies it with one `iptables-restore --noflush` (atomic per table: a packet sees the old
//!    rules or the new, never half);
//! 4. makes sure the built-in chains jump to ours ([`JUMP_CHAINS`], checked and prepended).
//!
//! A failed sync forgets which chains exist (the next one reads them again with iptables-save)
//! and is retried by the caller after the minimum sync period.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;

use crate::config::{EndpointSliceHandler, ServiceHandler};
use crate::endpointschangetracker::{EndpointsChangeTracker, EndpointsMap};
use crate::error::Result;
use crate::iptables::rules::{self, KUBE_EXTERNAL_SERVICES, KUBE_FORWARD, KUBE_POSTROUTING, KUBE_SERVICES, RulesConfig};
use crate::servicechangetracker::{ServiceChangeTracker, ServicePortMap};
use crate::util::iptables::{Iptables, Table};

/// One rule in a built-in chain that sends packets to one of ours (`iptablesJumpChain`).
pub struct JumpChain {
    pub table: Table,
    pub from: &'static str,
    pub to: &'static str,
    pub comment: &'static str,
    /// Only new connections: established ones were decided when they began.
    pub new_only: bool,
}

impl JumpChain {
    /// The rule as `iptables -C/-I/-D` take it.
    pub fn rule(&self) -> Vec<&'static str> {
        let mut r = vec!["-m", "comment", "--comment", self.comment];
        if self.new_only {
            r.extend(["-m", "conntrack", "--ctstate", "NEW"]);
        }
        r.extend(["-j", self.to]);
        r
    }
}

pub const JUMP_CHAINS: [JumpChain; 8] = [
    JumpChain { table: Table::Filter, from: "INPUT", to: KUBE_EXTERNAL_SERVICES, comment: "kubernetes externally-visible service portals", new_only: true },
    JumpChain { table: Table::Filter, from: "FORWARD", to: KUBE_EXTERNAL_SERVICES, comment: "kubernetes externally-visible service portals", new_only: true },
    JumpChain { table: Table::Filter, from: "FORWARD", to: KUBE_SERVICES, comment: "kubernetes service portals", new_only: true },
    JumpChain { table: Table::Filter, from: "OUTPUT", to: KUBE_SERVICES, comment: "kubernetes service portals", new_only: true },
    JumpChain { table: Table::Filter, from: "FORWARD", to: KUBE_FORWARD, comment: "kubernetes forwarding rules", new_only: false },
    JumpChain { table: Table::Nat, from: "OUTPUT", to: KUBE_SERVICES, comment: "kubernetes service portals", new_only: false },
    JumpChain { table: Table::Nat, from: "PREROUTING", to: KUBE_SERVICES, comment: "kubernetes service portals", new_only: false },
    JumpChain { table: Table::Nat, from: "POSTROUTING", to: KUBE_POSTROUTING, comment: "kubernetes postrouting rules", new_only: false },
];

/// What one sync did, for the log and the benchmark.
#[derive(Debug, Clone)]
pub struct SyncReport {
    pub services: usize,
    pub endpoints: usize,
    pub nat_rules: usize,
    pub filter_rules: usize,
    /// Steps 1–2: the maps and the text.
    pub generate: Duration,
    /// Steps 3–4: iptables-restore and the jump rules.
    pub apply: Duration,
}

pub struct Proxier {
    cfg: RulesConfig,
    iptables: Iptables,
    /// `--hostname-override`: endpoints whose `nodeName` is this are local.
    hostname: String,
    // The watch tasks write the trackers and the sync reads them: a lock held for a map update
    // or a copy, never across I/O.
    services: Mutex<ServiceChangeTracker>,
    endpoints: Mutex<EndpointsChangeTracker>,
    services_synced: AtomicBool,
    endpoints_synced: AtomicBool,
    /// The per-Service nat chains the last sync left; None: read them from iptables-save.
    /// Only a sync uses it, and syncs are serial: the lock is held for the whole sync.
    nat_chains: Mutex<Option<BTreeSet<String>>>,
    /// Poked on every change that needs a sync (kube-proxy's `syncRunner.Run()`).
    pub sync_runner: tokio::sync::Notify,
}

impl Proxier {
    pub fn new(cfg: RulesConfig, iptables: Iptables, hostname: String) -> Proxier {
        Proxier {
            cfg,
            iptables,
            hostname,
            services: Mutex::default(),
            endpoints: Mutex::default(),
            services_synced: AtomicBool::new(false),
            endpoints_synced: AtomicBool::new(false),
            nat_chains: Mutex::new(None),
            sync_runner: tokio::sync::Notify::new(),
        }
    }

    /// Both watches have listed once: syncing before would delete the rules of every Service
    /// not yet listed (kube-proxy's `isInitialized`).
    pub fn is_initialized(&self) -> bool {
        self.services_synced.load(Ordering::Acquire) && self.endpoints_synced.load(Ordering::Acquire)
    }

    /// Step 1: the current maps (and whether either changed since the last call).
    pub fn snapshot(&self) -> (ServicePortMap, EndpointsMap, bool) {
        let (services, a) = {
            let mut s = self.services.lock().expect("service tracker lock");
            let changed = s.take_changed();
            (s.service_port_map(), changed)
        };
        let (endpoints, b) = {
            let mut e = self.endpoints.lock().expect("endpoints tracker lock");
            let changed = e.take_changed();
            (e.endpoints_map(&self.hostname), changed)
        };
        (services, endpoints, a || b)
    }

    /// One full sync (blocking: it runs iptables).
    pub fn sync_proxy_rules(&self) -> Result<SyncReport> {
        let start = Instant::now();
        // Step 1
        let (services, endpoints, _) = self.snapshot();
        self.sync_maps(&services, &endpoints, start)
    }

    /// Steps 2–4 for given maps (the benchmark and the tests feed these directly).
    pub fn sync_maps(&self, services: &ServicePortMap, endpoints: &EndpointsMap, start: Instant) -> Result<SyncReport> {
        let mut known = self.nat_chains.lock().expect("nat chains lock");
        let existing = match known.take() {
            Some(c) => c,
            None => self.iptables.chains(Table::Nat)?.into_iter().collect(),
        };
        // Step 2
        let ruleset = rules::write_rules(&self.cfg, services, endpoints, &existing);
        let generate = start.elapsed();
        // Step 3 (a failure leaves `known` None: the next sync reads the chains again)
        let applied = Instant::now();
        self.iptables.restore(&ruleset.text)?;
        // Step 4
        for j in &JUMP_CHAINS {
            self.iptables.ensure_rule(j.table, j.from, &j.rule(), true)?;
        }
        *known = Some(ruleset.nat_chains);
        Ok(SyncReport {
            services: services.len(),
            endpoints: endpoints.values().map(Vec::len).sum(),
            nat_rules: ruleset.nat_rules,
            filter_rules: ruleset.filter_rules,
            generate,
            apply: applied.elapsed(),
        })
    }
}

impl ServiceHandler for Proxier {
    fn on_service_update(&self, svc: Service) {
        self.services.lock().expect("service tracker lock").update(svc);
        self.sync_runner.notify_one();
    }
    fn on_service_delete(&self, svc: &Service) {
        self.services.lock().expect("service tracker lock").delete(svc);
        self.sync_runner.notify_one();
    }
    fn on_services_listed(&self, all: Vec<Service>) {
        self.services.lock().expect("service tracker lock").replace_all(all);
        self.services_synced.store(true, Ordering::Release);
        self.sync_runner.notify_one();
    }
}

impl EndpointSliceHandler for Proxier {
    fn on_endpoint_slice_update(&self, slice: EndpointSlice) {
        self.endpoints.lock().expect("endpoints tracker lock").update(slice);
        self.sync_runner.notify_one();
    }
    fn on_endpoint_slice_delete(&self, slice: &EndpointSlice) {
        self.endpoints.lock().expect("endpoints tracker lock").delete(slice);
        self.sync_runner.notify_one();
    }
    fn on_endpoint_slices_listed(&self, all: Vec<EndpointSlice>) {
        self.endpoints.lock().expect("endpoints tracker lock").replace_all(all);
        self.endpoints_synced.store(true, Ordering::Release);
        self.sync_runner.notify_one();
    }
}
