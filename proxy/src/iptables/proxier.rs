//! Mirrors kube-proxy's iptables/proxier.go (`syncProxyRules` and `iptablesJumpChains`): the
//! iptables mode of a sync. The trackers, the choice of a full or partial sync (kube-proxy's
//! `MinimizeIPTablesRestore`) and the metrics are [`crate::proxier`]'s; given the maps, a sync
//! here:
//!
//! 3. writes the ruleset ([`rules::write_rules`]): a full sync every chain, a partial one only
//!    the chains (top-level, or a changed Service's own) whose rules differ from what the last
//!    successful sync left in them; either deletes the per-Service chains no Service uses any
//!    more;
//! 4. applies it with one `iptables-restore --noflush` (atomic per table: a packet sees the old
//!    rules or the new, never half);
//! 5. in a full sync, makes sure the built-in chains jump to ours ([`JUMP_CHAINS`], checked and
//!    prepended; as kube-proxy, a partial sync skips this: each check is a process of its own).
//!
//! After a failure the proxier forgets what the chains hold: the next sync, full, reads their
//! names again with iptables-save.

use std::collections::BTreeSet;
use std::time::Instant;

use crate::endpointschangetracker::EndpointsMap;
use crate::error::Result;
use crate::iptables::rules::{self, KUBE_EXTERNAL_SERVICES, KUBE_FORWARD, KUBE_POSTROUTING, KUBE_SERVICES, RulesConfig, SyncedRules};
use crate::metrics::Metrics;
use crate::proxier::{ChangedServices, Mode, SyncReport};
use crate::servicechangetracker::ServicePortMap;
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

/// The iptables mode: the rules' settings and the commands that apply them.
pub struct IptablesMode {
    cfg: RulesConfig,
    iptables: Iptables,
}

/// kube-proxy's iptables `Proxier`.
pub type Proxier = crate::proxier::Proxier<IptablesMode>;

impl Proxier {
    pub fn new(cfg: RulesConfig, iptables: Iptables, hostname: String) -> Proxier {
        crate::proxier::Proxier::with_mode(IptablesMode { cfg, iptables }, hostname)
    }
}

impl Mode for IptablesMode {
    /// Every chain's rules as the last successful sync left them (kubelab's addition:
    /// kube-proxy's partial sync knows only which Services changed).
    type Synced = SyncedRules;
    const WRITTEN_FIELD: &'static str = "restore_bytes";

    fn sync(
        &self,
        metrics: &Metrics,
        services: &ServicePortMap,
        endpoints: &EndpointsMap,
        changed: Option<&ChangedServices>,
        last: Option<SyncedRules>,
        start: Instant,
    ) -> Result<(SyncReport, SyncedRules)> {
        // Step 3 (without the last sync's rules, the chains the nat table has are read)
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
        metrics.iptables_rules_total.with_label_values(&["nat"]).set(i64::try_from(ruleset.nat_rules).unwrap_or(i64::MAX));
        metrics.iptables_rules_total.with_label_values(&["filter"]).set(i64::try_from(ruleset.filter_rules).unwrap_or(i64::MAX));
        let report = SyncReport {
            full: changed.is_none(),
            chains_written: ruleset.nat_chains_written,
            written_bytes: ruleset.text.len(),
            services: services.len(),
            endpoints: endpoints.values().map(Vec::len).sum(),
            nat_rules: ruleset.nat_rules,
            filter_rules: ruleset.filter_rules,
            generate,
            apply: applied.elapsed(),
        };
        Ok((report, ruleset.synced))
    }

    fn failed(&self, metrics: &Metrics, full: bool) {
        if !full {
            metrics.iptables_partial_restore_failures_total.inc();
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
    use k8s_openapi::api::discovery::v1::EndpointSlice;
    use super::*;
    use crate::config::{EndpointSliceHandler as _, ServiceHandler as _};
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
        assert_eq!(partial.chains_written, 2);
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
