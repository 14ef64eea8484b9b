//! Mirrors kube-proxy's iptables/proxier.go (the `Proxier` type, `syncProxyRules` and
//! `iptablesJumpChains`): the trackers the watches feed, and one sync of the rules.
//!
//! A sync:
//! 1. takes the current [`ServicePortMap`] and [`EndpointsMap`] from the trackers, with the
//!    Services that changed since the last successful sync;
//! 2. decides full or partial: full the first time, once every `--iptables-sync-period`, and
//!    after any failure; partial otherwise (kube-proxy's `MinimizeIPTablesRestore`);
//! 3. writes the ruleset ([`rules::write_rules`]): a full sync every chain, a partial one only
//!    the chains (top-level, or a changed Service's own) whose rules differ from what the last
//!    successful sync left in them; either deletes the per-Service chains no Service uses any
//!    more;
//! 4. applies it with one `iptables-restore --noflush` (atomic per table: a packet sees the old
//!    rules or the new, never half);
//! 5. in a full sync, makes sure the built-in chains jump to ours ([`JUMP_CHAINS`], checked and
//!    prepended; as kube-proxy, a partial sync skips this: each check is a process of its own).
//!
//! A failed sync forgets what the chains hold (the next one reads their names again with
//! iptables-save) and makes the next sync full; the caller's runner retries it as soon as it
//! has a token, at most the minimum sync period later.
//!
//! kubelab's addition: each sync, done or failed, is a step of every Service it was for (the
//! changed ones), recorded under the Service's UID for `kubelab trace svc/<name>`
//! ([`Proxier::record_steps`]; kube-proxy reports the same hop only as its
//! `network_programming_duration_seconds` histogram).

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;

use crate::config::{EndpointSliceHandler, ServiceHandler};
use crate::endpointschangetracker::{EndpointsChangeTracker, EndpointsMap};
use crate::error::Result;
use crate::iptables::rules::{self, ChangedServices, KUBE_EXTERNAL_SERVICES, KUBE_FORWARD, KUBE_POSTROUTING, KUBE_SERVICES, RulesConfig, SyncedRules};
use crate::metrics::Metrics;
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
    /// Full (every chain written) or partial (only the chains whose rules changed).
    pub full: bool,
    /// Per-Service nat chains the restore wrote.
    pub nat_chains_written: usize,
    /// Bytes of iptables-restore input.
    pub restore_bytes: usize,
    pub services: usize,
    pub endpoints: usize,
    pub nat_rules: usize,
    pub filter_rules: usize,
    /// Steps 1–3: the maps and the text.
    pub generate: Duration,
    /// Steps 4–5: iptables-restore and the jump rules.
    pub apply: Duration,
}

/// What a sync carries over to the next; only a sync uses it, and syncs are serial.
struct SyncState {
    /// Every chain's rules as the last successful sync left them (kubelab's addition: kube-proxy's
    /// partial sync knows only which Services changed); None after a failure and at start: the
    /// next sync is full and reads the nat table's chains with iptables-save.
    last: Option<SyncedRules>,
    /// The next sync must be full (the first one, and after a failure: kube-proxy's `needFullSync`).
    need_full_sync: bool,
    last_full_sync: Option<Instant>,
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
    /// Held for the whole sync (syncs are serial).
    state: Mutex<SyncState>,
    /// A full sync at least this often (`--iptables-sync-period`); partial ones in between.
    full_sync_period: Duration,
    pub metrics: Metrics,
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
            state: Mutex::new(SyncState { last: None, need_full_sync: true, last_full_sync: None }),
            full_sync_period: crate::DEFAULT_SYNC_PERIOD,
            metrics: Metrics::new(),
            sync_runner: tokio::sync::Notify::new(),
        }
    }

    /// How often a sync is full (`--iptables-sync-period`; 30 s by default).
    pub fn with_full_sync_period(mut self, period: Duration) -> Proxier {
        self.full_sync_period = period;
        self
    }

    /// Makes the next sync full.
    pub fn request_full_sync(&self) {
        self.state.lock().expect("sync state lock").need_full_sync = true;
    }

    /// Both watches have listed once: syncing before would delete the rules of every Service
    /// not yet listed (kube-proxy's `isInitialized`).
    pub fn is_initialized(&self) -> bool {
        self.services_synced.load(Ordering::Acquire) && self.endpoints_synced.load(Ordering::Acquire)
    }

    /// The current maps (the changes stay pending for the next sync).
    pub fn snapshot(&self) -> (ServicePortMap, EndpointsMap) {
        let services = self.services.lock().expect("service tracker lock").service_port_map();
        let endpoints = self.endpoints.lock().expect("endpoints tracker lock").endpoints_map(&self.hostname);
        (services, endpoints)
    }

    /// Step 1: the current maps, and the Services that changed since the last call.
    fn take_snapshot(&self) -> (ServicePortMap, EndpointsMap, ChangedServices) {
        let (services, mut changed) = {
            let mut s = self.services.lock().expect("service tracker lock");
            let changed = s.take_changed();
            (s.service_port_map(), changed)
        };
        let endpoints = {
            let mut e = self.endpoints.lock().expect("endpoints tracker lock");
            changed.extend(e.take_changed());
            e.endpoints_map(&self.hostname)
        };
        (services, endpoints, changed)
    }

    /// One sync (blocking: it runs iptables), partial when it can be.
    pub fn sync_proxy_rules(&self) -> Result<SyncReport> {
        let start = Instant::now();
        let started_at = chrono::Utc::now();
        // The state lock first: a snapshot taken while another sync runs waits for it.
        let mut state = self.state.lock().expect("sync state lock");
        // Step 1
        let (services, endpoints, changed) = self.take_snapshot();
        // Step 2
        let full = state.need_full_sync
            || state.last.is_none()
            || state.last_full_sync.is_none_or(|t| t.elapsed() >= self.full_sync_period);
        // Until this sync succeeds, the next one must be full (the changes taken above are
        // not written anywhere else).
        state.need_full_sync = true;
        let result = self.sync_maps(&mut state, &services, &endpoints, (!full).then_some(&changed), start);
        let elapsed = start.elapsed().as_secs_f64();
        self.record_steps(&changed, &endpoints, full, started_at, &result);
        match &result {
            Ok(r) => {
                state.need_full_sync = false;
                if full {
                    state.last_full_sync = Some(start);
                }
                let m = &self.metrics;
                m.sync_proxy_rules_latency.observe(elapsed);
                if full { &m.sync_full_proxy_rules_latency } else { &m.sync_partial_proxy_rules_latency }.observe(elapsed);
                let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
                m.sync_proxy_rules_last_timestamp.set(i64::try_from(now.as_secs()).unwrap_or(i64::MAX));
                m.iptables_rules_total.with_label_values(&["nat"]).set(i64::try_from(r.nat_rules).unwrap_or(i64::MAX));
                m.iptables_rules_total.with_label_values(&["filter"]).set(i64::try_from(r.filter_rules).unwrap_or(i64::MAX));
            }
            Err(_) => {
                state.last = None;
                if !full {
                    self.metrics.iptables_partial_restore_failures_total.inc();
                }
            }
        }
        result
    }

    /// The sync as a step of each changed Service that still exists (a deleted one has no UID
    /// left here): full or partial, its endpoints as this node's rules use them, its failure.
    fn record_steps(&self, changed: &ChangedServices, endpoints: &EndpointsMap, full: bool, started_at: chrono::DateTime<chrono::Utc>, result: &Result<SyncReport>) {
        if !podtrace::enabled() || changed.is_empty() {
            return;
        }
        let end = chrono::Utc::now();
        let uids: Vec<((String, String), String)> = {
            let s = self.services.lock().expect("service tracker lock");
            changed.iter().filter_map(|k| Some((k.clone(), s.uid(k)?))).collect()
        };
        for ((namespace, name), uid) in uids {
            // Per port the endpoints differ only in their port numbers: the busiest port counts.
            let ports = endpoints.iter().filter(|(p, _)| p.namespace == namespace && p.name == name);
            let (ready, terminating) = ports
                .map(|(_, eps)| (eps.iter().filter(|e| e.ready).count(), eps.iter().filter(|e| e.terminating).count()))
                .max()
                .unwrap_or_default();
            let mut step = podtrace::Step { end, ..podtrace::Step::instant("proxy", "sync", started_at) }
                .with_field("sync", if full { "full" } else { "partial" })
                .with_field("endpoints", format!("{ready} ready, {terminating} terminating"));
            match result {
                Ok(r) => step = step.with_field("restore_bytes", r.restore_bytes),
                Err(e) => step.error = Some(e.to_string()),
            }
            podtrace::recorder().record(&uid, step);
        }
    }

    /// Steps 3–5 for given maps; `changed`: None for a full sync.
    fn sync_maps(
        &self,
        state: &mut SyncState,
        services: &ServicePortMap,
        endpoints: &EndpointsMap,
        changed: Option<&ChangedServices>,
        start: Instant,
    ) -> Result<SyncReport> {
        // Step 3 (a failure leaves `last` None: the next sync is full and reads the chains again)
        let last = state.last.take();
        let existing: BTreeSet<String> = match last {
            Some(_) => BTreeSet::new(),
            None => self.iptables.chains(Table::Nat)?.into_iter().collect(),
        };
        let ruleset = rules::write_rules(&self.cfg, services, endpoints, &existing, changed, last);
        let generate = start.elapsed();
        // Step 4
        let applied = Instant::now();
        self.iptables.restore(&ruleset.text)?;
        // Step 5
        if changed.is_none() {
            for j in &JUMP_CHAINS {
                self.iptables.ensure_rule(j.table, j.from, &j.rule(), true)?;
            }
        }
        state.last = Some(ruleset.synced);
        Ok(SyncReport {
            full: changed.is_none(),
            nat_chains_written: ruleset.nat_chains_written,
            restore_bytes: ruleset.text.len(),
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
        self.metrics.service_changes_total.inc();
        self.services.lock().expect("service tracker lock").update(svc);
        self.sync_runner.notify_one();
    }
    fn on_service_delete(&self, svc: &Service) {
        self.metrics.service_changes_total.inc();
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
        self.metrics.endpoint_changes_total.inc();
        self.endpoints.lock().expect("endpoints tracker lock").update(slice);
        self.sync_runner.notify_one();
    }
    fn on_endpoint_slice_delete(&self, slice: &EndpointSlice) {
        self.metrics.endpoint_changes_total.inc();
        self.endpoints.lock().expect("endpoints tracker lock").delete(slice);
        self.sync_runner.notify_one();
    }
    fn on_endpoint_slices_listed(&self, all: Vec<EndpointSlice>) {
        self.endpoints.lock().expect("endpoints tracker lock").replace_all(all);
        self.endpoints_synced.store(true, Ordering::Release);
        self.sync_runner.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{ServicePort, ServiceSpec};
    use super::*;
    use crate::util::iptables::chains_in_save;

    fn service() -> Service {
        let mut s = Service::default();
        s.metadata.namespace = Some("default".into());
        s.metadata.name = Some("web".into());
        s.spec = Some(ServiceSpec {
            cluster_ip: Some("10.96.0.10".into()),
            ports: Some(vec![ServicePort { name: Some("http".into()), port: 80, ..Default::default() }]),
            ..Default::default()
        });
        s
    }

    /// web's slice: each address ready, on node1.
    fn slice(ips: &[&str]) -> EndpointSlice {
        let eps: Vec<(&str, &str, bool)> = ips.iter().map(|ip| (*ip, "node1", true)).collect();
        crate::endpointschangetracker::tests::slice("web-x1", "web", &eps)
    }

    /// With a fake iptables that keeps the last input of each command (and fails while a
    /// `fail` file exists): a partial sync declares only the chains that change; a failed one
    /// makes the next sync full, which declares every chain again.
    #[test]
    fn a_failed_sync_makes_the_next_one_write_everything() {
        let dir = std::env::temp_dir().join(format!("kubelab-proxier-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let d = dir.display();
        let p = Proxier::new(RulesConfig::default(), Iptables::fake(&format!("cat > '{d}'/\"$0\"; test ! -e '{d}/fail'")), "node1".into());
        let restored = || std::fs::read_to_string(dir.join("iptables-restore")).expect("a restore ran");
        p.on_services_listed(vec![service()]);
        p.on_endpoint_slices_listed(vec![slice(&["10.244.1.2", "10.244.1.3"])]);
        let first = p.sync_proxy_rules().expect("first sync");
        assert!(first.full);
        let all = chains_in_save(&restored());
        assert_eq!(all.iter().filter(|c| c.starts_with("KUBE-SEP-")).count(), 2, "{all:?}");

        // One endpoint out, one in: KUBE-SVC- and the new KUBE-SEP- written, the old one
        // flushed and deleted, the one that stays and the top-level chains left out.
        p.on_endpoint_slice_update(slice(&["10.244.1.2", "10.244.1.4"]));
        let partial = p.sync_proxy_rules().expect("partial sync");
        assert!(!partial.full);
        assert_eq!(partial.nat_chains_written, 2);
        let text = restored();
        assert_eq!(chains_in_save(&text).len(), 3, "{text}");
        assert_eq!(text.lines().filter(|l| l.starts_with("-X ")).count(), 1, "{text}");

        // A failed partial sync; the next one (the failure gone) is full and declares every chain.
        std::fs::write(dir.join("fail"), "").expect("fail file");
        p.on_endpoint_slice_update(slice(&["10.244.1.2", "10.244.1.5"]));
        assert!(p.sync_proxy_rules().is_err());
        assert_eq!(p.metrics.iptables_partial_restore_failures_total.get(), 1);
        std::fs::remove_file(dir.join("fail")).expect("fail file");
        let after = p.sync_proxy_rules().expect("after the failure");
        assert!(after.full, "a failed sync makes the next one full");
        let text = restored();
        let mut got = chains_in_save(&text);
        got.sort();
        let mut want = all.clone();
        want.retain(|c| !c.starts_with("KUBE-SEP-"));
        want.sort();
        assert_eq!(got.iter().filter(|c| !c.starts_with("KUBE-SEP-")).cloned().collect::<Vec<_>>(), want, "{text}");
        assert_eq!(got.iter().filter(|c| c.starts_with("KUBE-SEP-")).count(), 2, "both endpoints' chains: {text}");
        // Then partial again, with nothing changed: nothing declared.
        let quiet = p.sync_proxy_rules().expect("sync");
        assert!(!quiet.full);
        assert_eq!(restored(), "*nat\nCOMMIT\n");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
