//! Mirrors Kubernetes' pkg/util/async/bounded_frequency_runner.go: runs a function when poked,
//! but not more often than `min_interval` (pokes in between are folded into one run), and at
//! least every `max_interval` even without a poke — kube-proxy's `--iptables-min-sync-period`
//! and `--iptables-sync-period`.

use std::future::Future;
use std::time::Duration;

use futures::FutureExt as _;
use tokio::sync::Notify;
use tokio::time::Instant;

/// Runs `f` until the task is dropped. `f` returns whether it succeeded; a failure is retried
/// after `min_interval`, as kube-proxy does.
pub async fn bounded_frequency_loop<F, Fut>(poke: &Notify, min_interval: Duration, max_interval: Duration, mut f: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let mut last: Option<Instant> = None;
    loop {
        if let Some(l) = last {
            tokio::select! {
                () = poke.notified() => {}
                () = tokio::time::sleep_until(l + max_interval) => {}
            }
            // Debounce: changes arriving now wait for (and join) the next run.
            tokio::time::sleep_until(l + min_interval).await;
        } else {
            poke.notified().await;
        }
        // Pokes that came while waiting are served by this run (it reads the trackers after
        // this point): drop the one left stored, or it would cause a second, empty run.
        let _ = poke.notified().now_or_never();
        last = Some(Instant::now());
        if !f().await {
            poke.notify_one();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[tokio::test(start_paused = true)]
    async fn pokes_fold_min_interval_holds_and_max_interval_runs_anyway() {
        let poke = Arc::new(Notify::new());
        let runs = Arc::new(Mutex::new(Vec::<Duration>::new()));
        let t0 = Instant::now();
        let (p, r) = (poke.clone(), runs.clone());
        tokio::spawn(async move {
            bounded_frequency_loop(&p, Duration::from_secs(1), Duration::from_secs(30), || {
                r.lock().unwrap().push(t0.elapsed());
                async { true }
            })
            .await
        });
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(runs.lock().unwrap().is_empty(), "no run before the first poke");
        for _ in 0..5 {
            poke.notify_one();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        poke.notify_one(); // within 1 s of the first run: waits for it
        poke.notify_one();
        tokio::time::sleep(Duration::from_secs(40)).await;
        let secs: Vec<u64> = runs.lock().unwrap().iter().map(|d| d.as_millis() as u64 / 100).collect();
        // 0.01 s (first poke), 1.01 s (the folded pokes), 31.01 s (the periodic resync).
        assert_eq!(secs, [0, 10, 310]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_failure_is_retried_after_the_min_interval() {
        let poke = Arc::new(Notify::new());
        let calls = Arc::new(AtomicUsize::new(0));
        let (p, c) = (poke.clone(), calls.clone());
        tokio::spawn(async move {
            bounded_frequency_loop(&p, Duration::from_secs(1), Duration::from_secs(30), || {
                let n = c.fetch_add(1, Ordering::SeqCst);
                async move { n >= 2 }
            })
            .await
        });
        poke.notify_one();
        tokio::time::sleep(Duration::from_millis(2500)).await;
        assert_eq!(calls.load(Ordering::SeqCst), 3, "two failures, each retried a second later");
    }

    use std::sync::Mutex;
}
