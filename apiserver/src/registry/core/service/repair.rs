//! Mirrors pkg/registry/core/service/ipallocator/controller/repairip.go and
//! portallocator/controller/repair.go: a loop in every API server that makes the pools agree
//! with the Services, at start and every `REPAIR_INTERVAL`.
//!
//! 1. List every Service (from the store, at one revision).
//! 2. Cluster IPs: an address a Service holds with no record is recorded for it ("repaired");
//!    a record whose Service is gone, or holds another address, is a leak — deleted once it
//!    has been seen leaked in `LEAK_CHECKS` runs in a row, since a create may have taken it and
//!    not written its Service yet.
//! 3. Node ports: the bitmap is rebuilt from the Services' ports, keeping a port nobody holds
//!    for the same number of runs before it is freed.
//!
//! Ports of two Services that clash (possible only after a restore of the store) are logged,
//! as Kubernetes reports them in an event.

use std::collections::{BTreeMap, HashMap};
use std::net::Ipv4Addr;
use std::time::Duration;

use serde_json::Value;

use super::alloc::{Allocators, cluster_ips, node_ports};
use super::ipallocator::Holder;
use super::portallocator::Change;
use crate::error::Result;
use crate::storage::store::Storage;

/// How often the pools are checked (Kubernetes: three minutes).
pub const REPAIR_INTERVAL: Duration = Duration::from_secs(180);
/// Runs a leak must be seen in before it is freed (`numRepairsBeforeLeakCleanup`).
const LEAK_CHECKS: u32 = 3;

/// The loop's memory between runs: how many runs in a row each leak has been seen in.
#[derive(Default)]
pub struct Repair {
    leaked_ips: HashMap<Ipv4Addr, u32>,
    leaked_ports: HashMap<u16, u32>,
}

/// What one run found and did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Report {
    pub ips_repaired: usize,
    pub ips_freed: usize,
    pub ports_freed: usize,
}

impl Repair {
    /// One run of steps 1–3.
    pub async fn run_once(&mut self, storage: &Storage, alloc: &Allocators, services_prefix: &str) -> Result<Report> {
        let services = list_all(storage, services_prefix).await?;
        let mut report = Report::default();
        // Step 2.
        let mut held: BTreeMap<Ipv4Addr, (String, String)> = BTreeMap::new();
        for svc in &services {
            let ns = svc.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or("").to_string();
            let name = svc.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("").to_string();
            for ip in cluster_ips(svc) {
                if let Ok(addr) = ip.parse::<Ipv4Addr>()
                    && alloc.ips.range.offset(addr).is_some()
                {
                    held.insert(addr, (ns.clone(), name.clone()));
                }
            }
        }
        let records = alloc.ips.taken_by(storage).await?;
        let recorded: HashMap<Ipv4Addr, (String, String, i64)> = records.into_iter().map(|(ip, ns, name, rev)| (ip, (ns, name, rev))).collect();
        for (ip, (ns, name)) in &held {
            if !recorded.contains_key(ip) {
                tracing::warn!(target: "apiserver", %ip, service = %format!("{ns}/{name}"), "cluster IP is not allocated; repairing");
                if alloc.ips.allocate(storage, &ip.to_string(), &Holder { namespace: ns, name }, false).await?.is_ok() {
                    report.ips_repaired += 1;
                }
            }
        }
        let mut still_leaked = HashMap::new();
        for (ip, (ns, name, rev)) in &recorded {
            if held.get(ip).is_some_and(|(hns, hname)| hns == ns && hname == name) {
                continue;
            }
            let seen = self.leaked_ips.get(ip).copied().unwrap_or(0) + 1;
            if seen >= LEAK_CHECKS {
                tracing::warn!(target: "apiserver", %ip, "cluster IP is allocated but no Service holds it; releasing");
                alloc.ips.release_if_unchanged(storage, *ip, *rev).await?;
                report.ips_freed += 1;
            } else {
                still_leaked.insert(*ip, seen);
            }
        }
        self.leaked_ips = still_leaked;
        // Step 3.
        let (current, _) = alloc.ports.read(storage).await?;
        let range = alloc.ports.range;
        let mut want = current.clone();
        let mut holders: HashMap<u16, usize> = HashMap::new();
        for svc in &services {
            for p in node_ports(svc) {
                *holders.entry(p).or_default() += 1;
            }
        }
        let mut still_leaked = HashMap::new();
        for i in 0..range.size {
            let port = range.base + i;
            match (current.has(i), holders.contains_key(&port)) {
                (false, true) => want.set(i, true),
                (true, false) => {
                    let seen = self.leaked_ports.get(&port).copied().unwrap_or(0) + 1;
                    if seen >= LEAK_CHECKS {
                        tracing::warn!(target: "apiserver", port, "node port is allocated but no Service holds it; releasing");
                        want.set(i, false);
                        report.ports_freed += 1;
                    } else {
                        still_leaked.insert(port, seen);
                    }
                }
                _ => {}
            }
        }
        self.leaked_ports = still_leaked;
        for (port, n) in holders.iter().filter(|(_, n)| **n > 1) {
            tracing::warn!(target: "apiserver", port, services = n, "node port is held by more than one Service");
        }
        if want != current {
            alloc.ports.change(storage, Change::Replace(&want), false).await?.ok();
        }
        Ok(report)
    }
}

/// Every object under `prefix`, page by page.
async fn list_all(storage: &Storage, prefix: &str) -> Result<Vec<Value>> {
    let mut out = Vec::new();
    let mut start = None;
    let mut revision = 0;
    loop {
        let page = storage.list(prefix, revision, 500, start.as_deref()).await?;
        revision = page.revision;
        out.extend(page.items.into_iter().map(|s| s.value));
        match page.next_key {
            Some(k) => start = Some(k),
            None => return Ok(out),
        }
    }
}

/// Runs the repair loop for ever (spawned by the server).
pub async fn run(storage: Storage, alloc: Allocators, services_prefix: String) {
    let mut repair = Repair::default();
    loop {
        match repair.run_once(&storage, &alloc, &services_prefix).await {
            Ok(report) if report != Report::default() => tracing::info!(target: "apiserver", ?report, "service allocations repaired"),
            Ok(_) => {}
            Err(e) => tracing::warn!(target: "apiserver", error = %e, "service allocation repair failed; retrying at the next interval"),
        }
        tokio::time::sleep(REPAIR_INTERVAL).await;
    }
}
