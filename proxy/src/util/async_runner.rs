//! Mirrors Kubernetes' pkg/util/async/bounded_frequency_runner.go: runs a function when poked,
//! but on average not more often than once per `min_interval` (pokes in between are folded into
//! one run), and at least every `max_interval` even without a poke — kube-proxy's
//! `--iptables-min-sync-period` and `--iptables-sync-period`. As there, the limit is a token
//! bucket that holds `burst_runs` runs (kube-proxy's proxiers pass 2): after a quiet spell, a
//! second change right after a sync is synced at once, not a minimum period later.

use std::future::Future;
use std::time::Duration;

use futures::FutureExt as _;
use tokio::sync::Notify;
use tokio::time::Instant;

/// kube-proxy's `burstSyncs`: syncs that may follow each other without waiting.
pub const BURST_SYNCS: u32 = 2;

/// Runs `f` until the task is dropped. `f` returns whether it succeeded; a failure is retried as
/// soon as a token is back, at most `min_interval` later.
pub async fn bounded_frequency_loop<F, Fut>(poke: &Notify, min_interval: Duration, max_interval: Duration, burst_runs: u32, mut f: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let burst = f64::from(burst_runs.max(1));
    // The token bucket (client-go's flowcontrol limiter): full at start, one token back per
    // `min_interval`.
    let mut tokens = burst;
    let mut counted = Instant::now();
    let mut last: Option<Instant> = None;
    loop {
        if let Some(l) = last {
            tokio::select! {
                () = poke.notified() => {}
                () = tokio::time::sleep_until(l + max_interval) => {}
            }
        } else {
            poke.notified().await;
        }
        // Debounce: take a token; without one, wait until it is back (the count goes below
        // zero and the wait refills it); changes arriving meanwhile join this run.
        let now = Instant::now();
        tokens = if min_interval.is_zero() { burst } else { (tokens + (now - counted).as_secs_f64() / min_interval.as_secs_f64()).min(burst) };
        counted = now;
        tokens -= 1.0;
        if tokens < 0.0 {
            tokio::time::sleep(min_interval.mul_f64(-tokens)).await;
        }
        // Pokes that came while waiting are served by this run (it reads the trackers after
        // this point): drop the one left stored, or it would cause a second, empty run.
        let _ = poke.notified().now_or_never();
        last = Some(Instant::now());
        if !f().await {
            // Retried once a token is back (at most `min_interval` later).
            poke.notify_one();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A runner as kube-proxy's (1 s, 30 s, a burst of two) whose function records when it ran.
    fn recording_runner() -> (Arc<Notify>, Arc<Mutex<Vec<Duration>>>) {
        let poke = Arc::new(Notify::new());
        let runs = Arc::new(Mutex::new(Vec::<Duration>::new()));
        let t0 = Instant::now();
        let (p, r) = (poke.clone(), runs.clone());
        tokio::spawn(async move {
            bounded_frequency_loop(&p, Duration::from_secs(1), Duration::from_secs(30), BURST_SYNCS, || {
                r.lock().unwrap().push(t0.elapsed());
                async { true }
            })
            .await
        });
        (poke, runs)
    }

    #[tokio::test(start_paused = true)]
    async fn pokes_fold_min_interval_holds_and_max_interval_runs_anyway() {
        let (poke, runs) = recording_runner();
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(runs.lock().unwrap().is_empty(), "no run before the first poke");
        for _ in 0..5 {
            poke.notify_one();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        poke.notify_one(); // the burst's second token: at once
        tokio::time::sleep(Duration::from_millis(100)).await;
        poke.notify_one(); // no token left (0.2 back since): waits 0.8 s for one
        poke.notify_one();
        tokio::time::sleep(Duration::from_secs(40)).await;
        let secs: Vec<u64> = runs.lock().unwrap().iter().map(|d| d.as_millis() as u64 / 10).collect();
        // 0.01 s (first poke), 0.11 s (second token), 1.01 s (the folded pokes, a token back),
        // 31.01 s (the periodic resync).
        assert_eq!(secs, [1, 11, 101, 3101]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_failure_is_retried_after_the_min_interval() {
        let poke = Arc::new(Notify::new());
        let calls = Arc::new(AtomicUsize::new(0));
        let (p, c) = (poke.clone(), calls.clone());
        tokio::spawn(async move {
            bounded_frequency_loop(&p, Duration::from_secs(1), Duration::from_secs(30), 1, || {
                let n = c.fetch_add(1, Ordering::SeqCst);
                async move { n >= 2 }
            })
            .await
        });
        poke.notify_one();
        tokio::time::sleep(Duration::from_millis(2500)).await;
        assert_eq!(calls.load(Ordering::SeqCst), 3, "two failures, each retried a second later");
    }

    /// Under a steady stream of pokes, one run per `min_interval`, after the burst.
    #[tokio::test(start_paused = true)]
    async fn a_steady_stream_runs_once_per_min_interval_after_the_burst() {
        let (poke, runs) = recording_runner();
        for _ in 0..500 {
            poke.notify_one();
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let runs = runs.lock().unwrap().clone();
        // 0, 0.01 (the burst), then a token back every second: 1.0, 2.0, 3.0, 4.0.
        assert_eq!(runs.len(), 6, "{runs:?}");
        for w in runs[1..].windows(2).skip(1) {
            let gap = w[1] - w[0];
            assert!(gap >= Duration::from_millis(990) && gap <= Duration::from_millis(1010), "{runs:?}");
        }
    }

    use std::sync::Mutex;
}
