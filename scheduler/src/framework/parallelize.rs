//! Mirrors kube-scheduler's framework/parallelize: runs a per-node function over many nodes on
//! several threads, in chunks, with an early stop.
//!
//! Scoped OS threads rather than a work-stealing pool: a pool's idle workers spin while waiting for
//! work, and on a small machine the scheduler shares with the API server and the store that
//! spinning costs more CPU than the parallelism saves. Small inputs run on the calling thread.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// The CPUs this process may use, read once (it reads cgroup files on every call).
fn parallelism() -> usize {
    static N: OnceLock<usize> = OnceLock::new();
    *N.get_or_init(|| std::thread::available_parallelism().map_or(1, |p| p.get()))
}

/// Nodes per chunk: below two chunks' worth, everything runs on the calling thread. Starting a
/// thread (its stack mapped and zeroed, then unmapped) costs more than filtering a thousand nodes
/// on two cores (BENCHMARKS.md, scheduler), so only clusters past a thousand nodes fan out.
pub const CHUNK: usize = 1024;

/// Calls `f(i)` for every `i` in `0..n` (any order, several threads), until `stop` is set; returns
/// the `Some` results with their indices, in index order.
pub fn until<T: Send>(n: usize, stop: &AtomicBool, f: impl Fn(usize) -> Option<T> + Sync) -> Vec<(usize, T)> {
    let workers = parallelism().min(n.div_ceil(CHUNK));
    let next = AtomicUsize::new(0);
    let work = || {
        let mut out = Vec::new();
        loop {
            let start = next.fetch_add(CHUNK, Ordering::Relaxed);
            if start >= n || stop.load(Ordering::Relaxed) {
                return out;
            }
            for i in start..(start + CHUNK).min(n) {
                if stop.load(Ordering::Relaxed) {
                    return out;
                }
                if let Some(t) = f(i) {
                    out.push((i, t));
                }
            }
        }
    };
    let mut all = if workers <= 1 {
        work()
    } else {
        std::thread::scope(|s| {
            let others: Vec<_> = (1..workers).map(|_| s.spawn(work)).collect();
            let mut all = work();
            for h in others {
                all.extend(h.join().expect("a parallel scheduler worker panicked"));
            }
            all
        })
    };
    all.sort_unstable_by_key(|(i, _)| *i);
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_index_once_in_order() {
        let stop = AtomicBool::new(false);
        let out = until(1000, &stop, |i| (i % 3 == 0).then_some(i * 2));
        assert_eq!(out.len(), 334);
        assert!(out.windows(2).all(|w| w[0].0 < w[1].0));
        assert!(out.iter().all(|(i, v)| *v == i * 2));
    }

    #[test]
    fn stops_early() {
        let stop = AtomicBool::new(false);
        let seen = AtomicUsize::new(0);
        let out = until(10_000, &stop, |i| {
            if seen.fetch_add(1, Ordering::Relaxed) >= 50 {
                stop.store(true, Ordering::Relaxed);
            }
            Some(i)
        });
        assert!(out.len() < 10_000);
    }
}
