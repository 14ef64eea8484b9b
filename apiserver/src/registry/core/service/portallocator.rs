//! Mirrors pkg/registry/core/service/portallocator/allocator.go over
//! registry/core/service/allocator/storage/storage.go: the NodePort range
//! (`--service-node-port-range`, 30000-32767) as a bitmap — one bit a port — kept in one
//! `RangeAllocation` object at `<prefix>/ranges/servicenodeports` and changed only by a write
//! conditioned on the revision it read, so every API server sees one truth.
//!
//! 1. Read the bitmap (an empty one when the key is absent).
//! 2. Set or clear the bits; a requested port outside the range or already set is refused.
//! 3. Write it back if nobody wrote since step 1; otherwise start again.
//!
//! A free port is chosen as Kubernetes does since 1.29: at random from the upper part of the
//! range first (`min(max(16, size/32), 128)` ports in), leaving the lower part to ports people
//! ask for.

use k8s_openapi::ByteString;
use rand::Rng;
use serde_json::{Value, json};

use crate::error::{Error, Result};
use crate::storage::store::{Storage, WriteOutcome};

/// Writes retried when another API server wrote the bitmap in between.
const CONFLICT_RETRIES: usize = 16;

/// `--service-node-port-range`: the first port and how many follow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PortRange {
    pub base: u16,
    pub size: u16,
}

impl PortRange {
    /// "30000-32767" (a single port "30000" is a range of one, as Kubernetes parses it).
    pub fn parse(s: &str) -> std::result::Result<PortRange, String> {
        let (a, b) = s.split_once('-').unwrap_or((s, s));
        let (Ok(a), Ok(b)) = (a.trim().parse::<u16>(), b.trim().parse::<u16>()) else {
            return Err(format!("{s:?} is not a port range (e.g. 30000-32767)"));
        };
        if a == 0 || b < a {
            return Err(format!("{s:?}: the range must run from a port above 0 up to a port not below it"));
        }
        Ok(PortRange { base: a, size: b - a + 1 })
    }

    pub fn contains(&self, port: i64) -> bool {
        port >= self.base as i64 && port < self.base as i64 + self.size as i64
    }

    fn dynamic_band_start(&self) -> u16 {
        (self.size / 32).clamp(16, 128).min(self.size.saturating_sub(1))
    }
}

impl std::fmt::Display for PortRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}", self.base, self.base as u32 + self.size as u32 - 1)
    }
}

/// Why a node port could not be taken: the message of the 422.
#[derive(Debug, PartialEq, Eq)]
pub enum PortError {
    NotInRange { range: String },
    Allocated,
    Full,
}

impl std::fmt::Display for PortError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PortError::NotInRange { range } => write!(f, "provided port is not in the valid range. The range of valid ports is {range}"),
            PortError::Allocated => write!(f, "provided port is already allocated"),
            PortError::Full => write!(f, "range is full"),
        }
    }
}

/// The bits of the range.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bitmap(Vec<u8>);

impl Bitmap {
    fn new(size: u16) -> Self {
        Bitmap(vec![0; (size as usize).div_ceil(8)])
    }

    pub fn has(&self, i: u16) -> bool {
        self.0.get(i as usize / 8).is_some_and(|b| b & (1 << (i % 8)) != 0)
    }

    pub fn set(&mut self, i: u16, on: bool) {
        if let Some(b) = self.0.get_mut(i as usize / 8) {
            if on { *b |= 1 << (i % 8) } else { *b &= !(1 << (i % 8)) }
        }
    }

    pub fn count(&self) -> u32 {
        self.0.iter().map(|b| b.count_ones()).sum()
    }
}

/// What a change of the bitmap asks.
pub enum Change<'a> {
    Allocate(u16),
    AllocateNext,
    Release(&'a [u16]),
    /// The repair loop's: the bitmap as it should be.
    Replace(&'a Bitmap),
}

#[derive(Clone)]
pub struct PortAllocator {
    pub range: PortRange,
    key: String,
}

impl PortAllocator {
    pub fn new(range: PortRange, etcd_prefix: &str) -> Self {
        Self { range, key: format!("{}/ranges/servicenodeports", etcd_prefix.trim_end_matches('/')) }
    }

    /// Step 1: the bitmap and the revision it was read at (0: not written yet). A bitmap of
    /// another range (the flag changed) is read as its ports that still fall in this one.
    pub async fn read(&self, storage: &Storage) -> Result<(Bitmap, i64)> {
        let Some(stored) = storage.get(&self.key).await? else { return Ok((Bitmap::new(self.range.size), 0)) };
        let bytes: ByteString = serde_json::from_value(stored.value.get("data").cloned().unwrap_or(json!(""))).unwrap_or(ByteString(Vec::new()));
        let stored_range = stored.value.get("range").and_then(Value::as_str).and_then(|r| PortRange::parse(r).ok());
        let mut bitmap = Bitmap::new(self.range.size);
        match stored_range {
            Some(r) if r == self.range => {
                let n = bytes.0.len().min(bitmap.0.len());
                bitmap.0[..n].copy_from_slice(&bytes.0[..n]);
            }
            Some(r) => {
                let old = Bitmap(bytes.0);
                for i in 0..r.size {
                    let port = r.base as i64 + i as i64;
                    if old.has(i) && self.range.contains(port) {
                        bitmap.set((port - self.range.base as i64) as u16, true);
                    }
                }
            }
            None => {}
        }
        Ok((bitmap, stored.mod_revision))
    }

    /// Steps 2 and 3: applies `change`; answers the port taken (for Allocate and AllocateNext).
    /// With `dry_run`, checks and writes nothing.
    pub async fn change(&self, storage: &Storage, change: Change<'_>, dry_run: bool) -> Result<std::result::Result<Option<u16>, PortError>> {
        for _ in 0..CONFLICT_RETRIES {
            let (mut bitmap, revision) = self.read(storage).await?;
            let taken = match &change {
                Change::Allocate(port) => {
                    if !self.range.contains(*port as i64) {
                        return Ok(Err(PortError::NotInRange { range: self.range.to_string() }));
                    }
                    let i = port - self.range.base;
                    if bitmap.has(i) {
                        return Ok(Err(PortError::Allocated));
                    }
                    bitmap.set(i, true);
                    Some(*port)
                }
                Change::AllocateNext => match self.pick_free(&bitmap) {
                    Some(i) => {
                        bitmap.set(i, true);
                        Some(self.range.base + i)
                    }
                    None => return Ok(Err(PortError::Full)),
                },
                Change::Release(ports) => {
                    for p in *ports {
                        if self.range.contains(*p as i64) {
                            bitmap.set(p - self.range.base, false);
                        }
                    }
                    None
                }
                Change::Replace(b) => {
                    bitmap = (*b).clone();
                    None
                }
            };
            if dry_run {
                return Ok(Ok(taken));
            }
            let obj = json!({
                "apiVersion": "v1", "kind": "RangeAllocation",
                "metadata": {"name": "servicenodeports", "creationTimestamp": crate::registry::generic::store::now_rfc3339()},
                "range": self.range.to_string(),
                "data": serde_json::to_value(ByteString(bitmap.0)).map_err(|e| Error::Internal(e.to_string()))?,
            });
            let outcome = if revision == 0 { storage.create(&self.key, &obj, None).await? } else { storage.update(&self.key, &obj, revision).await? };
            if let WriteOutcome::Written(_) = outcome {
                return Ok(Ok(taken));
            }
        }
        Err(Error::Conflict { kind: "rangeallocations".into(), name: "servicenodeports".into(), message: "the node port range was written by others too often; try again".into() })
    }

    /// A free bit: from a random place in the dynamic band on, then the static part.
    fn pick_free(&self, bitmap: &Bitmap) -> Option<u16> {
        let size = self.range.size;
        let band = self.range.dynamic_band_start();
        let start = if band < size { rand::rng().random_range(band..size) } else { 0 };
        (start..size).chain(band..start).chain(0..band).find(|i| !bitmap.has(*i))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_parse_as_kubernetes_writes_them() {
        let r = PortRange::parse("30000-32767").unwrap();
        assert_eq!((r.base, r.size), (30000, 2768));
        assert_eq!(r.to_string(), "30000-32767");
        assert!(r.contains(30000) && r.contains(32767) && !r.contains(32768) && !r.contains(29999));
        assert_eq!(r.dynamic_band_start(), 86);
        assert_eq!(PortRange::parse("30080").unwrap().size, 1);
        assert!(PortRange::parse("32767-30000").is_err());
        assert!(PortRange::parse("web").is_err());
    }

    #[test]
    fn a_free_port_comes_from_the_dynamic_band_first_then_anywhere() {
        let a = PortAllocator::new(PortRange::parse("30000-30099").unwrap(), "/registry");
        let mut b = Bitmap::new(100);
        for _ in 0..84 {
            let i = a.pick_free(&b).unwrap();
            assert!(i >= 16, "dynamic band first: {i}");
            b.set(i, true);
        }
        for _ in 0..16 {
            let i = a.pick_free(&b).unwrap();
            assert!(i < 16);
            b.set(i, true);
        }
        assert_eq!(b.count(), 100);
        assert_eq!(a.pick_free(&b), None);
    }
}
