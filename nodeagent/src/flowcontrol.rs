//! Mirrors client-go's util/flowcontrol/backoff.go: per-key exponential backoff, as the kubelet
//! uses it for CrashLoopBackOff (10 s doubling to 5 min) and ImagePullBackOff.

use std::collections::HashMap;
use std::time::{Duration, Instant};

#[derive(Debug)]
struct Entry {
    backoff: Duration,
    last_update: Instant,
}

/// Delays per key. An entry that has not been touched for twice the maximum delay starts over
/// (kubelet: a container that ran for 10 minutes is no longer in a crash loop).
#[derive(Debug)]
pub(crate) struct Backoff {
    initial: Duration,
    max: Duration,
    entries: HashMap<String, Entry>,
}

impl Backoff {
    pub(crate) fn new(initial: Duration, max: Duration) -> Backoff {
        Backoff { initial, max, entries: HashMap::new() }
    }

    /// The current delay for `key` (zero when there is none).
    pub(crate) fn get(&self, key: &str) -> Duration {
        self.entries.get(key).map(|e| e.backoff).unwrap_or_default()
    }

    /// Record one more failure at `now`: the first gives `initial`, each next doubles up to `max`.
    pub(crate) fn next(&mut self, key: &str, now: Instant) {
        let (initial, max) = (self.initial, self.max);
        match self.entries.get_mut(key) {
            Some(e) if now.duration_since(e.last_update) <= 2 * max => {
                e.backoff = (e.backoff * 2).min(max);
                e.last_update = now;
            }
            _ => {
                self.entries.insert(key.to_string(), Entry { backoff: initial, last_update: now });
            }
        }
    }

    /// Whether `key` is still backing off from a failure that happened at `event_time`, and for
    /// how much longer.
    pub(crate) fn remaining(&self, key: &str, event_time: Instant, now: Instant) -> Option<Duration> {
        let e = self.entries.get(key)?;
        if now.duration_since(e.last_update) > 2 * self.max {
            return None;
        }
        let until = event_time + e.backoff;
        (until > now).then(|| until - now)
    }

    /// How much longer `key` backs off, counted from its last recorded failure.
    pub(crate) fn remaining_since_last(&self, key: &str, now: Instant) -> Option<Duration> {
        let e = self.entries.get(key)?;
        let until = e.last_update + e.backoff;
        (until > now).then(|| until - now)
    }

    pub(crate) fn reset(&mut self, key: &str) {
        self.entries.remove(key);
    }

    /// Forget entries idle for more than twice the maximum delay.
    pub(crate) fn gc(&mut self, now: Instant) {
        let max = self.max;
        self.entries.retain(|_, e| now.duration_since(e.last_update) <= 2 * max);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_to_the_cap_and_resets_after_a_quiet_period() {
        let (i, m) = (Duration::from_secs(10), Duration::from_secs(300));
        let mut b = Backoff::new(i, m);
        let t0 = Instant::now();
        let mut seen = vec![];
        for n in 0..7 {
            b.next("c", t0 + Duration::from_secs(n));
            seen.push(b.get("c").as_secs());
        }
        assert_eq!(seen, [10, 20, 40, 80, 160, 300, 300]);
        // still in backoff shortly after the failure, out of it after the delay
        let t = t0 + Duration::from_secs(6);
        assert_eq!(b.remaining("c", t, t + Duration::from_secs(100)), Some(Duration::from_secs(200)));
        assert_eq!(b.remaining("c", t, t + Duration::from_secs(301)), None);
        // ten minutes later a new failure starts over at 10 s
        b.next("c", t0 + Duration::from_secs(6 + 601));
        assert_eq!(b.get("c"), i);
        b.gc(t0 + Duration::from_secs(10_000));
        assert_eq!(b.get("c"), Duration::ZERO);
    }
}
