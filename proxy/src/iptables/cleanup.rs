//! Mirrors `CleanupLeftovers` in kube-proxy's iptables/proxier.go (`kube-proxy --cleanup`):
//! removes the jump rules from the built-in chains, then flushes and deletes every chain the
//! proxy made — the per-Service ones, the fixed ones and the safety net — and nothing else.

use crate::error::Result;
use crate::iptables::proxier::JUMP_CHAINS;
use crate::iptables::rules::{KUBE_EXTERNAL_SERVICES, KUBE_FORWARD, KUBE_MARK_MASQ, KUBE_NODEPORTS, KUBE_POSTROUTING, KUBE_SERVICES, PER_SERVICE_PREFIXES};
use crate::iptables::safety_net::{self, KUBELAB_SERVICE_RANGE};
use crate::util::iptables::{Iptables, Table};

fn ours(chain: &str) -> bool {
    [KUBE_SERVICES, KUBE_EXTERNAL_SERVICES, KUBE_NODEPORTS, KUBE_POSTROUTING, KUBE_MARK_MASQ, KUBE_FORWARD, KUBELAB_SERVICE_RANGE].contains(&chain)
        || PER_SERVICE_PREFIXES.iter().any(|p| chain.starts_with(p))
}

/// Removes everything; returns how many chains were deleted.
pub fn cleanup_leftovers(ipt: &Iptables) -> Result<usize> {
    for j in JUMP_CHAINS {
        ipt.delete_rule(j.table, j.from, &j.rule())?;
    }
    for from in safety_net::JUMP_FROM {
        ipt.delete_rule(Table::Filter, from, &safety_net::jump_rule())?;
    }
    let mut deleted = 0;
    let mut text = String::new();
    for table in [Table::Filter, Table::Nat] {
        let chains: Vec<String> = ipt.chains(table)?.into_iter().filter(|c| ours(c)).collect();
        if chains.is_empty() {
            continue;
        }
        text.push_str(&format!("*{}\n", table.name()));
        // Flushed first (declaring a chain flushes it), so that no rule still jumps to one
        // being deleted.
        for c in &chains {
            text.push_str(&format!(":{c} - [0:0]\n"));
        }
        for c in &chains {
            text.push_str(&format!("-X {c}\n"));
        }
        text.push_str("COMMIT\n");
        deleted += chains.len();
    }
    if !text.is_empty() {
        ipt.restore(&text)?;
    }
    Ok(deleted)
}
