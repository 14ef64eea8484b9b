//! Mirrors pkg/registry/core/service/ipallocator/ipallocator.go (the allocator of Kubernetes
//! 1.33, where each allocated cluster IP is an `IPAddress` object): a Service's cluster IP is
//! taken by creating the key `<prefix>/ipaddresses/<ip>` only if it does not exist, so two API
//! servers — or two creates in one — can never hand out one address twice, and given back by
//! deleting it.
//!
//! 1. A requested address must lie in the range (`--service-cluster-ip-range`) and not be its
//!    network or broadcast address; it is taken or refused ("provided IP is already allocated").
//! 2. A free one is chosen at random, first from the upper part of the range, which
//!    Kubernetes leaves to dynamic allocation so that the lower part stays free for addresses
//!    people choose (the `kube-dns` Service's tenth address): the band's first address is
//!    `min(max(16, size/16), 256)` in.
//! 3. After a few collisions the taken addresses are listed once and a free one is picked from
//!    what is left, so a nearly full range still allocates in a bounded number of writes.

use std::collections::HashSet;
use std::net::Ipv4Addr;

use rand::Rng;
use serde_json::{Value, json};

use crate::error::Result;
use crate::storage::store::{Storage, WriteOutcome};

/// Random tries before the taken addresses are listed.
const RANDOM_TRIES: usize = 4;

/// An IPv4 service range, as `--service-cluster-ip-range` gives it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cidr {
    pub base: Ipv4Addr,
    pub prefix_len: u8,
}

impl Cidr {
    pub fn parse(s: &str) -> std::result::Result<Cidr, String> {
        let (ip, bits) = s.split_once('/').ok_or_else(|| format!("{s:?} is not a CIDR (address/bits)"))?;
        let ip: Ipv4Addr = ip.parse().map_err(|_| format!("{s:?}: {ip:?} is not an IPv4 address (IPv6 service ranges are not supported)"))?;
        let prefix_len: u8 = bits.parse().ok().filter(|b| *b <= 30).ok_or_else(|| format!("{s:?}: the prefix length must be 0–30"))?;
        let mask = if prefix_len == 0 { 0 } else { u32::MAX << (32 - prefix_len) };
        Ok(Cidr { base: Ipv4Addr::from(u32::from(ip) & mask), prefix_len })
    }

    /// Addresses in the range, network and broadcast included.
    pub fn size(&self) -> u64 {
        1u64 << (32 - self.prefix_len)
    }

    /// The address `offset` in (1 is the first usable one).
    pub fn nth(&self, offset: u64) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(self.base) + offset as u32)
    }

    /// The offset of `ip`, if it is a usable address of the range.
    pub fn offset(&self, ip: Ipv4Addr) -> Option<u64> {
        let off = u32::from(ip).checked_sub(u32::from(self.base))? as u64;
        (off >= 1 && off < self.size() - 1).then_some(off)
    }

    /// The first address of the dynamic band (calculateRangeOffset).
    fn dynamic_band_start(&self) -> u64 {
        (self.size() / 16).clamp(16, 256).min(self.size() - 2)
    }
}

impl std::fmt::Display for Cidr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.base, self.prefix_len)
    }
}

/// Why an address could not be taken: the message a 422 carries after "failed to allocate IP …: ".
#[derive(Debug, PartialEq, Eq)]
pub enum AllocateError {
    NotInRange { ip: String, range: String },
    Allocated,
    Full,
}

impl std::fmt::Display for AllocateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AllocateError::NotInRange { ip, range } => write!(f, "the provided IP ({ip}) is not in the valid range. The range of valid IPs is {range}"),
            AllocateError::Allocated => write!(f, "provided IP is already allocated"),
            AllocateError::Full => write!(f, "range is full"),
        }
    }
}

/// Who holds an address: the Service's namespace and name (the IPAddress' `parentRef`).
pub struct Holder<'a> {
    pub namespace: &'a str,
    pub name: &'a str,
}

/// The cluster IP allocator over the store.
#[derive(Clone)]
pub struct IpAllocator {
    pub range: Cidr,
    /// `<etcd prefix>/ipaddresses/`.
    prefix: String,
}

impl IpAllocator {
    pub fn new(range: Cidr, etcd_prefix: &str) -> Self {
        Self { range, prefix: format!("{}/ipaddresses/", etcd_prefix.trim_end_matches('/')) }
    }

    fn key(&self, ip: Ipv4Addr) -> String {
        format!("{}{ip}", self.prefix)
    }

    /// The IPAddress object that records who holds `ip`.
    fn ip_address(ip: Ipv4Addr, holder: &Holder<'_>) -> Value {
        json!({
            "apiVersion": "networking.k8s.io/v1", "kind": "IPAddress",
            "metadata": {
                "name": ip.to_string(),
                "labels": {"ipaddress.kubernetes.io/ip-family": "IPv4", "ipaddress.kubernetes.io/managed-by": "ipallocator.k8s.io"},
                "creationTimestamp": crate::registry::generic::store::now_rfc3339(),
            },
            "spec": {"parentRef": {"group": "", "resource": "services", "namespace": holder.namespace, "name": holder.name}},
        })
    }

    /// Step 1: takes `ip` for `holder`; with `dry_run`, only checks that it could.
    pub async fn allocate(&self, storage: &Storage, ip: &str, holder: &Holder<'_>, dry_run: bool) -> Result<std::result::Result<(), AllocateError>> {
        let not_in_range = || AllocateError::NotInRange { ip: ip.to_string(), range: self.range.to_string() };
        let Some(addr) = ip.parse::<Ipv4Addr>().ok().filter(|a| self.range.offset(*a).is_some()) else {
            return Ok(Err(not_in_range()));
        };
        if dry_run {
            return Ok(match storage.get(&self.key(addr)).await? {
                Some(_) => Err(AllocateError::Allocated),
                None => Ok(()),
            });
        }
        Ok(match storage.create(&self.key(addr), &Self::ip_address(addr, holder), None).await? {
            WriteOutcome::Written(_) => Ok(()),
            WriteOutcome::Mismatch(_) => Err(AllocateError::Allocated),
        })
    }

    /// Steps 2 and 3: takes a free address for `holder`; with `dry_run`, finds one and takes
    /// nothing.
    pub async fn allocate_next(&self, storage: &Storage, holder: &Holder<'_>, dry_run: bool) -> Result<std::result::Result<Ipv4Addr, AllocateError>> {
        let size = self.range.size();
        let band = self.range.dynamic_band_start();
        for _ in 0..RANDOM_TRIES {
            let offset = rand::rng().random_range(band..size - 1);
            let ip = self.range.nth(offset);
            if self.allocate(storage, &ip.to_string(), holder, dry_run).await?.is_ok() {
                return Ok(Ok(ip));
            }
        }
        let taken = self.taken(storage).await?;
        // The dynamic band from a random place on, then the static part.
        let start = rand::rng().random_range(band..size - 1);
        let order = (start..size - 1).chain(band..start).chain(1..band);
        for offset in order {
            let ip = self.range.nth(offset);
            if taken.contains(&ip) {
                continue;
            }
            if self.allocate(storage, &ip.to_string(), holder, dry_run).await?.is_ok() {
                return Ok(Ok(ip));
            }
        }
        Ok(Err(AllocateError::Full))
    }

    /// Gives `ip` back, if `holder` holds it (a no-op for an address not taken, taken by another
    /// Service, or not of the range).
    pub async fn release(&self, storage: &Storage, ip: &str, holder: &Holder<'_>) -> Result<()> {
        let Ok(addr) = ip.parse::<Ipv4Addr>() else { return Ok(()) };
        let key = self.key(addr);
        if let Some(stored) = storage.get(&key).await? {
            let parent = stored.value.pointer("/spec/parentRef").cloned().unwrap_or(Value::Null);
            if parent.get("namespace").and_then(Value::as_str) == Some(holder.namespace) && parent.get("name").and_then(Value::as_str) == Some(holder.name) {
                storage.delete(&key, stored.mod_revision).await?;
            }
        }
        Ok(())
    }

    /// Every address taken, with who holds it (the repair loop's view).
    pub async fn taken_by(&self, storage: &Storage) -> Result<Vec<(Ipv4Addr, String, String, i64)>> {
        let mut out = Vec::new();
        let mut start = None;
        loop {
            let page = storage.list(&self.prefix, 0, 1000, start.as_deref()).await?;
            for item in &page.items {
                let Some(ip) = item.key.strip_prefix(&self.prefix).and_then(|s| s.parse::<Ipv4Addr>().ok()) else { continue };
                let parent = item.value.pointer("/spec/parentRef").cloned().unwrap_or(Value::Null);
                let ns = parent.get("namespace").and_then(Value::as_str).unwrap_or("").to_string();
                let name = parent.get("name").and_then(Value::as_str).unwrap_or("").to_string();
                out.push((ip, ns, name, item.mod_revision));
            }
            match page.next_key {
                Some(k) => start = Some(k),
                None => return Ok(out),
            }
        }
    }

    async fn taken(&self, storage: &Storage) -> Result<HashSet<Ipv4Addr>> {
        Ok(self.taken_by(storage).await?.into_iter().map(|(ip, ..)| ip).collect())
    }

    /// Deletes the record of `ip` if it is still at `revision` (the repair loop's release of a
    /// leak, which must not take back an address re-allocated since it looked).
    pub async fn release_if_unchanged(&self, storage: &Storage, ip: Ipv4Addr, revision: i64) -> Result<()> {
        storage.delete(&self.key(ip), revision).await.map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_range_and_its_bands() {
        let r = Cidr::parse("10.96.0.0/12").unwrap();
        assert_eq!(r.size(), 1 << 20);
        assert_eq!(r.nth(1), Ipv4Addr::new(10, 96, 0, 1));
        assert_eq!(r.nth(10), Ipv4Addr::new(10, 96, 0, 10));
        assert_eq!(r.offset(Ipv4Addr::new(10, 96, 0, 0)), None, "the network address");
        assert_eq!(r.offset(Ipv4Addr::new(10, 111, 255, 255)), None, "the broadcast address");
        assert_eq!(r.offset(Ipv4Addr::new(10, 112, 0, 1)), None, "outside");
        assert_eq!(r.dynamic_band_start(), 256);
        assert_eq!(Cidr::parse("10.0.0.0/24").unwrap().dynamic_band_start(), 16);
        assert_eq!(Cidr::parse("10.96.5.7/12").unwrap().to_string(), "10.96.0.0/12");
        assert!(Cidr::parse("fd00::/108").is_err());
        assert!(Cidr::parse("10.96.0.0").is_err());
    }

    #[test]
    fn why_an_address_is_refused_reads_as_kubernetes_says_it() {
        let e = AllocateError::NotInRange { ip: "1.2.3.4".into(), range: "10.96.0.0/12".into() };
        assert_eq!(e.to_string(), "the provided IP (1.2.3.4) is not in the valid range. The range of valid IPs is 10.96.0.0/12");
        assert_eq!(AllocateError::Allocated.to_string(), "provided IP is already allocated");
    }
}
