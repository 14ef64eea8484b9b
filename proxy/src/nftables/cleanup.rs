//! Mirrors kube-proxy's nftables `CleanupLeftovers`: the whole `ip kube-proxy` table goes, and
//! everything in it with it. Nothing of this mode lives outside the table.

use crate::error::Result;
use crate::nftables::rules::TABLE;
use crate::util::nftables::{Nftables, Op, Transaction};

/// Deletes the table if it exists; whether it did.
pub fn cleanup_leftovers(nft: &Nftables) -> Result<bool> {
    if !nft.table_exists()? {
        return Ok(false);
    }
    let mut tx = Transaction::new();
    tx.push(Op::DeleteTable);
    nft.apply(&tx)?;
    tracing::info!(target: "proxy::nftables", table = TABLE, "deleted the proxy's nftables table");
    Ok(true)
}
