//! What kube-proxy's iptables/proxier.go and nftables/proxier.go each have and kubelab writes
//! once: the trackers the watches feed (`OnServiceUpdate`, `OnEndpointSliceUpdate`, …), the
//! choice between a full and a partial sync, the sync metrics, and the record of each sync for
//! `kubelab trace svc/<name>`. What a sync writes, and how, is the [`Mode`]'s: the iptables
//! mode's ([`crate::iptables::proxier`]) or the nftables mode's ([`crate::nftables::proxier`]).
//!
//! A sync:
//! 1. takes the current [`ServicePortMap`] and [`EndpointsMap`] from the trackers, with the
//!    Services that changed since the last successful sync;
//! 2. decides full or partial: full the first time, once every sync period, and after any
//!    failure; partial otherwise;
//! 3. hands them to the mode, with what the last successful sync left (`Mode::Synced`), which
//!    writes and applies the rules;
//! 4. records the metrics, and a step for each changed Service.
//!
//! A failed sync forgets what the last one left and makes the next sync full; the caller's
//! runner retries it as soon as it has a token, at most the minimum sync period later.
//!
//! kubelab's addition: each sync, done or failed, is a step of every Service it was for (the
//! changed ones), recorded under the Service's UID for `kubelab trace svc/<name>`
//! ([`Proxier::record_steps`]; kube-proxy reports the same hop only as its
//! `network_programming_duration_seconds` histogram).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;

use crate::config::{EndpointSliceHandler, ServiceHandler};
use crate::endpointschangetracker::{EndpointsChangeTracker, EndpointsMap};
use crate::error::Result;
use crate::metrics::Metrics;
use crate::servicechangetracker::{ServiceChangeTracker, ServicePortMap};

/// The Services (namespace, name) whose ports or endpoints changed since the last successful
/// sync (kube-proxy's `UpdatedServices`).
pub type ChangedServices = std::collections::BTreeSet<(String, String)>;

/// How a proxy mode writes the rules: the half of kube-proxy's `syncProxyRules` that differs
/// between modes.
pub trait Mode: Send + Sync + 'static {
    /// What a sync leaves for the next one to compare with (the rules it wrote).
    type Synced: Send;
    /// The field of a trace step that tells how much a sync wrote.
    const WRITTEN_FIELD: &'static str;
    /// Writes and applies the rules: every one when `changed` is None (a full sync), else only
    /// what changed for those Services given `last` (which a full sync may ignore). `start` is
    /// when the sync began (the report's generation time counts from it).
    fn sync(
        &self,
        metrics: &Metrics,
        services: &ServicePortMap,
        endpoints: &EndpointsMap,
        changed: Option<&ChangedServices>,
        last: Option<Self::Synced>,
        start: Instant,
    ) -> Result<(SyncReport, Self::Synced)>;
    /// A sync failed (partial or not): for the mode's own failure metrics.
    fn failed(&self, _metrics: &Metrics, _full: bool) {}
}

/// What one sync did, for the log and the benchmark.
#[derive(Debug, Clone)]
pub struct SyncReport {
    /// Full (every chain written) or partial (only the chains whose rules changed).
    pub full: bool,
    /// Per-Service chains written.
    pub chains_written: usize,
    /// Bytes handed to the kernel's tool: iptables-restore's input text, or the nf_tables
    /// netlink batch.
    pub written_bytes: usize,
    pub services: usize,
    pub endpoints: usize,
    /// Rules in use once applied, in nat chains and in filter chains.
    pub nat_rules: usize,
    pub filter_rules: usize,
    /// Steps 1–3 up to the rules written (no I/O yet).
    pub generate: Duration,
    /// Step 3's I/O: the rules applied.
    pub apply: Duration,
}

/// What a sync carries over to the next; only a sync uses it, and syncs are serial.
struct SyncState<S> {
    /// What the last successful sync wrote; None after a failure and at start: the next sync
    /// is full.
    last: Option<S>,
    /// The next sync must be full (the first one, and after a failure: kube-proxy's `needFullSync`).
    need_full_sync: bool,
    last_full_sync: Option<Instant>,
}

pub struct Proxier<M: Mode> {
    mode: M,
    /// `--hostname-override`: endpoints whose `nodeName` is this are local.
    hostname: String,
    // The watch tasks write the trackers and the sync reads them: a lock held for a map update
    // or a copy, never across I/O.
    services: Mutex<ServiceChangeTracker>,
    endpoints: Mutex<EndpointsChangeTracker>,
    services_synced: AtomicBool,
    endpoints_synced: AtomicBool,
    /// Held for the whole sync (syncs are serial).
    state: Mutex<SyncState<M::Synced>>,
    /// A full sync at least this often (`--iptables-sync-period`); partial ones in between.
    full_sync_period: Duration,
    pub metrics: Metrics,
    /// Poked on every change that needs a sync (kube-proxy's `syncRunner.Run()`).
    pub sync_runner: tokio::sync::Notify,
}

impl<M: Mode> Proxier<M> {
    pub fn with_mode(mode: M, hostname: String) -> Proxier<M> {
        Proxier {
            mode,
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
    pub fn with_full_sync_period(mut self, period: Duration) -> Proxier<M> {
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

    /// One sync (blocking: it runs the mode's I/O), partial when it can be.
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
        // Step 3 (a failure leaves `last` None: the next sync is full)
        let last = state.last.take();
        let result = self.mode.sync(&self.metrics, &services, &endpoints, (!full).then_some(&changed), last, start);
        let elapsed = start.elapsed().as_secs_f64();
        // Step 4
        let result = match result {
            Ok((report, synced)) => {
                state.last = Some(synced);
                state.need_full_sync = false;
                if full {
                    state.last_full_sync = Some(start);
                }
                let m = &self.metrics;
                m.sync_proxy_rules_latency.observe(elapsed);
                if full { &m.sync_full_proxy_rules_latency } else { &m.sync_partial_proxy_rules_latency }.observe(elapsed);
                let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
                m.sync_proxy_rules_last_timestamp.set(i64::try_from(now.as_secs()).unwrap_or(i64::MAX));
                Ok(report)
            }
            Err(e) => {
                self.mode.failed(&self.metrics, full);
                Err(e)
            }
        };
        self.record_steps(&changed, &endpoints, full, started_at, &result);
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
                Ok(r) => step = step.with_field(M::WRITTEN_FIELD, r.written_bytes),
                Err(e) => step.error = Some(e.to_string()),
            }
            podtrace::recorder().record(&uid, step);
        }
    }
}

impl<M: Mode> ServiceHandler for Proxier<M> {
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

impl<M: Mode> EndpointSliceHandler for Proxier<M> {
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
