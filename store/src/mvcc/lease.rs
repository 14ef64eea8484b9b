//! Mirrors etcd's `lease/lessor.go`: leases, the keys attached to them, and who decides expiry.
//!
//! Every member keeps the same leases, because grants, renewals and revocations are raft entries.
//! Only the leader (the *primary* lessor) looks at the clock and decides that a lease has expired;
//! it then proposes a revocation, so every member deletes the same keys at the same revision. A
//! member that becomes leader first extends every lease by its TTL ("promote"), so that leases are
//! not revoked in bulk because their old leader stopped renewing them during the election.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use crate::engine::{WriteBatch, keys};
use crate::error::{Error, Result};

/// etcd's upper bound on a lease TTL, in seconds.
pub const MAX_LEASE_TTL: i64 = 9_000_000_000;

#[derive(Debug, Clone)]
pub struct Lease {
    pub id: i64,
    /// The TTL granted, in seconds.
    pub ttl: i64,
    pub expiry: Instant,
    pub keys: BTreeSet<Vec<u8>>,
}

impl Lease {
    /// Seconds left, rounded up (etcd's `Remaining`), never below zero.
    pub fn remaining(&self, now: Instant) -> i64 {
        let left = self.expiry.saturating_duration_since(now);
        left.as_secs() as i64 + i64::from(left.subsec_nanos() > 0)
    }
}

pub struct Lessor {
    leases: BTreeMap<i64, Lease>,
    /// The smallest TTL granted; shorter requests are raised to it (etcd: 1.5 election timeouts).
    min_ttl: i64,
    primary: bool,
}

impl Lessor {
    pub fn new(min_ttl: i64) -> Self {
        Self { leases: BTreeMap::new(), min_ttl: min_ttl.max(1), primary: false }
    }

    /// Rebuilds the leases from the engine; `attached` gives each key's lease from the key space.
    pub fn load(
        min_ttl: i64,
        engine: &dyn crate::engine::Engine,
        attached: impl Iterator<Item = (i64, Vec<u8>)>,
        now: Instant,
    ) -> Result<Self> {
        let mut l = Self::new(min_ttl);
        for kv in engine.scan_prefix(keys::LEASE) {
            let (k, v) = kv?;
            let parse = |b: &[u8]| b.try_into().map(i64::from_be_bytes);
            let (Ok(id), Ok(ttl)) = (parse(&k[keys::LEASE.len()..]), parse(&v)) else {
                return Err(Error::Corrupt { what: "lease", detail: format!("{k:?}") });
            };
            l.leases.insert(id, Lease { id, ttl, expiry: now + secs(ttl), keys: BTreeSet::new() });
        }
        for (id, key) in attached {
            if let Some(lease) = l.leases.get_mut(&id) {
                lease.keys.insert(key);
            }
        }
        Ok(l)
    }

    pub fn is_primary(&self) -> bool {
        self.primary
    }

    /// This member became leader: it now decides expiry, and gives every lease a full TTL.
    pub fn promote(&mut self, now: Instant) {
        self.primary = true;
        for l in self.leases.values_mut() {
            l.expiry = now + secs(l.ttl);
        }
    }

    /// This member is no longer leader.
    pub fn demote(&mut self) {
        self.primary = false;
    }

    pub fn grant(&mut self, id: i64, ttl: i64, now: Instant, batch: &mut WriteBatch) -> Result<&Lease> {
        if ttl > MAX_LEASE_TTL {
            return Err(Error::LeaseTtlTooLarge);
        }
        if id <= 0 {
            return Err(Error::LeaseNotFound);
        }
        if self.leases.contains_key(&id) {
            return Err(Error::LeaseExists);
        }
        let ttl = ttl.max(self.min_ttl);
        batch.put(keys::with_u64(keys::LEASE, id as u64), ttl.to_be_bytes().to_vec());
        Ok(self.leases.entry(id).or_insert(Lease { id, ttl, expiry: now + secs(ttl), keys: BTreeSet::new() }))
    }

    /// Removes the lease and returns the keys that were attached to it (the caller deletes them).
    pub fn revoke(&mut self, id: i64, batch: &mut WriteBatch) -> Result<BTreeSet<Vec<u8>>> {
        let lease = self.leases.remove(&id).ok_or(Error::LeaseNotFound)?;
        batch.delete(keys::with_u64(keys::LEASE, id as u64));
        Ok(lease.keys)
    }

    /// A keep-alive: the lease lives another full TTL. Returns the TTL.
    pub fn renew(&mut self, id: i64, now: Instant) -> Result<i64> {
        let lease = self.leases.get_mut(&id).ok_or(Error::LeaseNotFound)?;
        lease.expiry = now + secs(lease.ttl);
        Ok(lease.ttl)
    }

    pub fn get(&self, id: i64) -> Option<&Lease> {
        self.leases.get(&id)
    }

    pub fn exists(&self, id: i64) -> bool {
        self.leases.contains_key(&id)
    }

    pub fn ids(&self) -> impl Iterator<Item = i64> + '_ {
        self.leases.keys().copied()
    }

    pub fn attach(&mut self, id: i64, key: &[u8]) {
        if let Some(l) = self.leases.get_mut(&id) {
            l.keys.insert(key.to_vec());
        }
    }

    pub fn detach(&mut self, id: i64, key: &[u8]) {
        if let Some(l) = self.leases.get_mut(&id) {
            l.keys.remove(key);
        }
    }

    /// Leases whose time is up, if this member decides expiry (only the leader does).
    pub fn expired(&self, now: Instant) -> Vec<i64> {
        if !self.primary {
            return Vec::new();
        }
        self.leases.values().filter(|l| l.expiry <= now).map(|l| l.id).collect()
    }

    /// Every lease with its TTL, for a snapshot.
    pub fn all(&self) -> impl Iterator<Item = &Lease> {
        self.leases.values()
    }

    /// Replaces every lease (a snapshot from the leader), staging the engine writes.
    pub fn restore(
        &mut self,
        leases: Vec<(i64, i64)>,
        attached: impl Iterator<Item = (i64, Vec<u8>)>,
        now: Instant,
        engine: &dyn crate::engine::Engine,
        batch: &mut WriteBatch,
    ) -> Result<()> {
        for kv in engine.scan_prefix(keys::LEASE) {
            batch.delete(kv?.0);
        }
        self.leases.clear();
        for (id, ttl) in leases {
            batch.put(keys::with_u64(keys::LEASE, id as u64), ttl.to_be_bytes().to_vec());
            self.leases.insert(id, Lease { id, ttl, expiry: now + secs(ttl), keys: BTreeSet::new() });
        }
        for (id, key) in attached {
            self.attach(id, &key);
        }
        Ok(())
    }
}

fn secs(ttl: i64) -> Duration {
    Duration::from_secs(ttl.max(0) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_primary_expires_leases_and_promotion_extends_them() {
        let t0 = Instant::now();
        let mut l = Lessor::new(2);
        let mut b = WriteBatch::default();
        assert_eq!(l.grant(7, 1, t0, &mut b).unwrap().ttl, 2, "raised to the minimum TTL");
        l.grant(8, 10, t0, &mut b).unwrap();
        let later = t0 + Duration::from_millis(2500);
        assert!(l.expired(later).is_empty(), "a follower never decides expiry");
        l.promote(t0 + Duration::from_secs(1));
        assert!(l.expired(later).is_empty(), "promotion gave lease 7 a fresh TTL");
        assert_eq!(l.expired(t0 + Duration::from_secs(4)), vec![7]);
        l.renew(7, t0 + Duration::from_secs(4)).unwrap();
        assert!(l.expired(t0 + Duration::from_secs(5)).is_empty());
        assert_eq!(l.get(8).unwrap().remaining(t0 + Duration::from_millis(1500)), 10);
    }

    #[test]
    fn grant_and_revoke_errors_are_etcds() {
        let t0 = Instant::now();
        let mut l = Lessor::new(1);
        let mut b = WriteBatch::default();
        l.grant(1, 5, t0, &mut b).unwrap();
        assert!(matches!(l.grant(1, 5, t0, &mut b), Err(Error::LeaseExists)));
        assert!(matches!(l.grant(2, MAX_LEASE_TTL + 1, t0, &mut b), Err(Error::LeaseTtlTooLarge)));
        l.attach(1, b"k");
        assert_eq!(l.revoke(1, &mut b).unwrap().into_iter().collect::<Vec<_>>(), vec![b"k".to_vec()]);
        assert!(matches!(l.revoke(1, &mut b), Err(Error::LeaseNotFound)));
        assert!(matches!(l.renew(1, t0), Err(Error::LeaseNotFound)));
    }
}
