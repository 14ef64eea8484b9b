//! Mirrors client-go's util/workqueue (queue.go, delaying_queue.go, rate_limiting_queue.go and
//! default_rate_limiters.go): the queue every controller's workers take keys from.
//!
//! Its promises, which the controllers rely on:
//! 1. A key is held at most once however often it is added (`dirty`): ten pod events for one
//!    ReplicaSet make one sync.
//! 2. A key being worked on (`processing`) is never handed to a second worker; added again
//!    meanwhile, it is queued once [`WorkQueue::done`] is called, so the sync that follows sees
//!    the newest state.
//! 3. [`WorkQueue::add_after`] adds later (a ReplicaSet waiting for `minReadySeconds`);
//!    [`WorkQueue::add_rate_limited`] adds after a per-key exponential backoff (5 ms doubling
//!    up to 1000 s, client-go's `ItemExponentialFailureRateLimiter` defaults), reset by
//!    [`WorkQueue::forget`] after a sync that succeeded.
//! 4. After [`WorkQueue::shut_down`], [`WorkQueue::get`] answers `None` and workers return.
//!
//! A std `Mutex` (not tokio's) guards the state: it is held for a few map operations and never
//! across an `.await`.

use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::Hash;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;

/// client-go's `DefaultItemBasedRateLimiter` bounds.
pub const BACKOFF_BASE: Duration = Duration::from_millis(5);
pub const BACKOFF_MAX: Duration = Duration::from_secs(1000);

struct State<K> {
    queue: VecDeque<K>,
    dirty: HashSet<K>,
    processing: HashSet<K>,
    failures: HashMap<K, u32>,
    shutting_down: bool,
}

/// A cloneable handle; clones share one queue.
pub struct WorkQueue<K> {
    state: Arc<Mutex<State<K>>>,
    ready: Arc<Notify>,
}

impl<K> Clone for WorkQueue<K> {
    fn clone(&self) -> Self {
        Self { state: self.state.clone(), ready: self.ready.clone() }
    }
}

impl<K: Clone + Eq + Hash + Send + 'static> Default for WorkQueue<K> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: Clone + Eq + Hash + Send + 'static> WorkQueue<K> {
    pub fn new() -> Self {
        let state = State {
            queue: VecDeque::new(),
            dirty: HashSet::new(),
            processing: HashSet::new(),
            failures: HashMap::new(),
            shutting_down: false,
        };
        Self { state: Arc::new(Mutex::new(state)), ready: Arc::new(Notify::new()) }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State<K>> {
        // A panic while holding the lock leaves plain collections behind, still consistent.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Promises 1 and 2.
    pub fn add(&self, key: K) {
        let mut s = self.lock();
        if s.shutting_down || !s.dirty.insert(key.clone()) {
            return;
        }
        if !s.processing.contains(&key) {
            s.queue.push_back(key);
            drop(s);
            self.ready.notify_one();
        }
    }

    /// Promise 3: adds `key` once `delay` has passed (at once when it is zero).
    pub fn add_after(&self, key: K, delay: Duration) {
        if delay.is_zero() {
            return self.add(key);
        }
        let q = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            q.add(key);
        });
    }

    /// Promise 3: adds `key` after its backoff, which doubles with each call until [`forget`].
    ///
    /// [`forget`]: WorkQueue::forget
    pub fn add_rate_limited(&self, key: K) {
        let delay = {
            let mut s = self.lock();
            let n = s.failures.entry(key.clone()).or_insert(0);
            let delay = exponential_backoff(*n);
            *n = n.saturating_add(1);
            delay
        };
        self.add_after(key, delay);
    }

    /// Clears `key`'s backoff (its sync succeeded).
    pub fn forget(&self, key: &K) {
        self.lock().failures.remove(key);
    }

    /// How many times `key` has been requeued with backoff since it was last forgotten.
    pub fn num_requeues(&self, key: &K) -> u32 {
        self.lock().failures.get(key).copied().unwrap_or(0)
    }

    /// Waits for a key and marks it processing; `None` once the queue is shut down.
    pub async fn get(&self) -> Option<K> {
        loop {
            let notified = self.ready.notified();
            {
                let mut s = self.lock();
                if let Some(key) = s.queue.pop_front() {
                    s.dirty.remove(&key);
                    s.processing.insert(key.clone());
                    // Another key may be waiting for another worker.
                    if !s.queue.is_empty() {
                        self.ready.notify_one();
                    }
                    return Some(key);
                }
                if s.shutting_down {
                    return None;
                }
            }
            notified.await;
        }
    }

    /// Ends the processing of `key`; if it was added meanwhile, it is queued again.
    pub fn done(&self, key: &K) {
        let mut s = self.lock();
        s.processing.remove(key);
        if s.dirty.contains(key) {
            s.queue.push_back(key.clone());
            drop(s);
            self.ready.notify_one();
        }
    }

    /// Promise 4: wakes every waiting worker with `None`; keys still queued are dropped.
    pub fn shut_down(&self) {
        let mut s = self.lock();
        s.shutting_down = true;
        s.queue.clear();
        drop(s);
        self.ready.notify_waiters();
        self.ready.notify_one();
    }

    /// Keys waiting (not counting those being processed).
    pub fn len(&self) -> usize {
        self.lock().queue.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The `n`th backoff (from 0): 5 ms · 2ⁿ, at most 1000 s.
pub fn exponential_backoff(n: u32) -> Duration {
    let factor = 2u64.checked_pow(n.min(63)).unwrap_or(u64::MAX);
    let nanos = (BACKOFF_BASE.as_nanos() as u64).saturating_mul(factor);
    Duration::from_nanos(nanos).min(BACKOFF_MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_key_is_held_once_and_never_by_two_workers() {
        let q = WorkQueue::new();
        q.add("a");
        q.add("a");
        q.add("b");
        assert_eq!(q.len(), 2);
        assert_eq!(q.get().await, Some("a"));
        // Added while processing: not handed out until done.
        q.add("a");
        assert_eq!(q.get().await, Some("b"));
        assert!(q.is_empty());
        q.done(&"a");
        assert_eq!(q.get().await, Some("a"));
        q.done(&"a");
        q.done(&"b");
        assert!(q.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn add_after_and_backoff() {
        let q = WorkQueue::new();
        q.add_after("later", Duration::from_secs(3));
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert!(q.is_empty());
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert_eq!(q.get().await, Some("later"));
        q.done(&"later");

        q.add_rate_limited("x");
        q.add_rate_limited("x");
        assert_eq!(q.num_requeues(&"x"), 2);
        q.forget(&"x");
        assert_eq!(q.num_requeues(&"x"), 0);
        let cases = [(0, 5), (1, 10), (2, 20), (10, 5120)];
        for (n, ms) in cases {
            assert_eq!(exponential_backoff(n), Duration::from_millis(ms), "n={n}");
        }
        assert_eq!(exponential_backoff(40), BACKOFF_MAX);
        assert_eq!(exponential_backoff(u32::MAX), BACKOFF_MAX);
    }

    #[tokio::test]
    async fn shut_down_wakes_waiting_workers() {
        let q: WorkQueue<&str> = WorkQueue::new();
        let (a, b) = (q.clone(), q.clone());
        let wa = tokio::spawn(async move { a.get().await });
        let wb = tokio::spawn(async move { b.get().await });
        tokio::task::yield_now().await;
        q.shut_down();
        assert_eq!(wa.await.unwrap(), None);
        assert_eq!(wb.await.unwrap(), None);
        q.add("late");
        assert_eq!(q.get().await, None);
    }
}
