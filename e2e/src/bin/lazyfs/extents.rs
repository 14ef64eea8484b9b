//! A file's unsynced bytes: runs of bytes that do not overlap, by offset. Pure, so it has unit
//! tests of its own.
//! Part of lazyfs (main.rs).

use std::collections::BTreeMap;

#[derive(Default, Debug)]
pub struct Extents {
    runs: BTreeMap<u64, Vec<u8>>,
    bytes: u64,
}

impl Extents {
    /// Records `data` at `off`, over whatever was cached there. A write that continues the
    /// run before it (a log's append) grows that run instead of starting another.
    pub fn write(&mut self, off: u64, data: &[u8]) {
        if data.is_empty() {
            return;
        }
        self.discard(off, off.saturating_add(data.len() as u64));
        self.bytes += data.len() as u64;
        if let Some((start, run)) = self.runs.range_mut(..off).next_back()
            && start + run.len() as u64 == off
        {
            run.extend_from_slice(data);
            return;
        }
        self.runs.insert(off, data.to_vec());
    }

    /// Drops the cached bytes in `[from, to)`, splitting the runs that straddle its ends.
    pub fn discard(&mut self, from: u64, to: u64) {
        if from >= to {
            return;
        }
        let mut hit: Vec<u64> = self.runs.range(from..to).map(|(s, _)| *s).collect();
        if let Some((s, run)) = self.runs.range(..from).next_back()
            && s + run.len() as u64 > from
        {
            hit.push(*s);
        }
        for start in hit {
            let Some(run) = self.runs.remove(&start) else { continue };
            let end = start + run.len() as u64;
            self.bytes -= run.len() as u64;
            if start < from {
                let keep = run[..(from - start) as usize].to_vec();
                self.bytes += keep.len() as u64;
                self.runs.insert(start, keep);
            }
            if end > to {
                let keep = run[(to - start) as usize..].to_vec();
                self.bytes += keep.len() as u64;
                self.runs.insert(to, keep);
            }
        }
    }

    /// Drops every cached byte at or past `size` (a truncation).
    pub fn truncate(&mut self, size: u64) {
        self.discard(size, u64::MAX);
    }

    /// Where the last cached byte ends (0 with none).
    pub fn end(&self) -> u64 {
        self.runs.iter().next_back().map_or(0, |(s, r)| s + r.len() as u64)
    }

    /// Copies the cached bytes of `[off, off + buf.len())` over `buf`.
    pub fn overlay(&self, off: u64, buf: &mut [u8]) {
        let to = off + buf.len() as u64;
        let before = self.runs.range(..off).next_back();
        for (&start, run) in before.into_iter().chain(self.runs.range(off..to)) {
            let (lo, hi) = (start.max(off), (start + run.len() as u64).min(to));
            if lo < hi {
                buf[(lo - off) as usize..(hi - off) as usize]
                    .copy_from_slice(&run[(lo - start) as usize..(hi - start) as usize]);
            }
        }
    }

    pub fn runs(&self) -> impl Iterator<Item = (u64, &[u8])> {
        self.runs.iter().map(|(s, r)| (*s, r.as_slice()))
    }

    /// Forgets everything; returns how many bytes that was.
    pub fn clear(&mut self) -> u64 {
        self.runs.clear();
        std::mem::take(&mut self.bytes)
    }

    pub fn bytes(&self) -> u64 {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(e: &Extents, off: u64, len: usize) -> Vec<u8> {
        let mut buf = vec![b'.'; len];
        e.overlay(off, &mut buf);
        buf
    }

    #[test]
    fn writes_overlay_and_overwrite() {
        let mut e = Extents::default();
        e.write(2, b"abcd");
        e.write(4, b"XYZ");
        assert_eq!(read(&e, 0, 9), b"..abXYZ..");
        assert_eq!(e.bytes(), 5);
        assert_eq!(e.end(), 7);
        e.write(0, b"0123456789");
        assert_eq!(read(&e, 0, 12), b"0123456789..");
        assert_eq!(e.bytes(), 10);
    }

    #[test]
    fn appends_grow_one_run() {
        let mut e = Extents::default();
        for i in 0..100u64 {
            e.write(i * 3, b"abc");
        }
        assert_eq!(e.runs().count(), 1);
        assert_eq!(e.bytes(), 300);
    }

    #[test]
    fn truncate_and_discard_split_runs() {
        let mut e = Extents::default();
        e.write(0, b"0123456789");
        e.discard(3, 5);
        assert_eq!(read(&e, 0, 10), b"012..56789");
        e.truncate(8);
        assert_eq!(read(&e, 0, 10), b"012..567..");
        assert_eq!((e.bytes(), e.end()), (6, 8));
        assert_eq!(e.clear(), 6);
        assert_eq!((e.bytes(), e.end()), (0, 0));
    }
}
