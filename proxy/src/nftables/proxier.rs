//! Mirrors kube-proxy's nftables/proxier.go (`syncProxyRules`): the nftables mode of a sync. The
//! trackers, the choice of a full or partial sync and the metrics are [`crate::proxier`]'s;
//! given the maps, a sync here:
//!
//! 3. writes the transaction ([`rules::write_table`]): a full sync the whole table (having
//!    listed the chains and sets it holds, to delete those no Service uses), a partial one only
//!    the chains and map elements of the changed Services that differ from what the last
//!    successful sync wrote;
//! 4. applies it as one nf_tables netlink batch ([`Nftables::apply`]): all of it or, on an
//!    error, none of it — a packet sees the old rules or the new, never half.
//!
//! Nothing outside the table is touched: its base chains hook into the kernel themselves, so
//! there are no jump rules to keep in the host's chains (the iptables mode's step 5).

use std::time::Instant;

use crate::endpointschangetracker::EndpointsMap;
use crate::error::Result;
use crate::iptables::rules::RulesConfig;
use crate::metrics::Metrics;
use crate::nftables::rules::{self, Existing, SyncedTable};
use crate::proxier::{ChangedServices, Mode, SyncReport};
use crate::servicechangetracker::ServicePortMap;
use crate::util::cidr::Ipv4Cidr;
use crate::util::nftables::Nftables;

/// The nftables mode: the rules' settings and the netlink client that applies them.
pub struct NftablesMode {
    cfg: RulesConfig,
    /// `--service-cluster-ip-range`: what is left addressed to it after DNAT is dropped.
    service_cidr: Option<Ipv4Cidr>,
    nft: Nftables,
}

/// kube-proxy's nftables `Proxier`.
pub type Proxier = crate::proxier::Proxier<NftablesMode>;

impl Proxier {
    pub fn new(cfg: RulesConfig, service_cidr: Option<Ipv4Cidr>, nft: Nftables, hostname: String) -> Proxier {
        crate::proxier::Proxier::with_mode(NftablesMode { cfg, service_cidr, nft }, hostname)
    }
}

impl Mode for NftablesMode {
    /// What the last successful sync wrote, by Service port.
    type Synced = SyncedTable;
    const WRITTEN_FIELD: &'static str = "batch_bytes";

    fn sync(
        &self,
        _metrics: &Metrics,
        services: &ServicePortMap,
        endpoints: &EndpointsMap,
        changed: Option<&ChangedServices>,
        last: Option<SyncedTable>,
        start: Instant,
    ) -> Result<(SyncReport, SyncedTable)> {
        // Step 3 (a full sync reads what the table holds, to delete what is no longer used)
        let existing = match (changed, &last) {
            (Some(_), Some(_)) => Existing::default(),
            _ if self.nft.table_exists()? => Existing { chains: self.nft.list_chains()?, sets: self.nft.list_sets()? },
            _ => Existing::default(),
        };
        let plan = rules::write_table(&self.cfg, self.service_cidr, services, endpoints, changed, last, &existing);
        let generate = start.elapsed();
        // Step 4
        let applied = Instant::now();
        let written_bytes = self.nft.apply(&plan.tx)?;
        let report = SyncReport {
            full: changed.is_none(),
            chains_written: plan.chains_written,
            written_bytes,
            services: services.len(),
            endpoints: endpoints.values().map(Vec::len).sum(),
            nat_rules: plan.nat_rules,
            filter_rules: plan.filter_rules,
            generate,
            apply: applied.elapsed(),
        };
        Ok((report, plan.synced))
    }

    fn failed(&self, metrics: &Metrics, _full: bool) {
        metrics.nftables_sync_failures_total.inc();
    }
}
