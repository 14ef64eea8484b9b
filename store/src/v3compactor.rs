//! Mirrors etcd's `etcdserver/api/v3compactor` (`compactor.go`, `periodic.go`, `revision.go`):
//! auto-compaction, `--auto-compaction-mode` and `--auto-compaction-retention`.
//!
//! - `periodic` keeps the history of the last retention period: every tenth of the period (at
//!   most an hour's tenth) the compactor notes the store's revision; once a period has passed
//!   since the last compaction (then every period, at most every hour) it compacts at the
//!   revision noted one period ago.
//! - `revision` keeps the last N revisions: every five minutes it compacts at the current
//!   revision minus N, unless that is where it compacted last.
//!
//! Only the leader compacts (the others are paused, as etcd pauses the compactor of a member
//! that is not the leader), and it does so as a client would: a Compaction request through raft,
//! applied by every member at the same point of the log. The decisions are the pure
//! [`Periodic`] and [`Revision`]; [`run`] carries them out against a member.

use std::collections::VecDeque;
use std::time::Duration;

use proto::etcd::PbCompactionRequest;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::apply::Request;
use crate::config::{AutoCompaction, MODE_PERIODIC, MODE_REVISION};
use crate::error::Error;
use crate::server::Node;

/// How often the revision compactor looks (etcd's `revInterval`).
pub const REVISION_INTERVAL: Duration = Duration::from_secs(5 * 60);
/// The periodic compactor notes revisions this many times per period (etcd's `retryDivisor`).
const RETRY_DIVISOR: u32 = 10;

/// etcd's periodic compactor, as a decider: [`Periodic::record`] before each wait of
/// [`Periodic::retry_interval`], [`Periodic::due`] after it.
#[derive(Debug)]
pub struct Periodic {
    period: Duration,
    /// Revisions noted, oldest first; the first is the one of a period ago.
    revs: VecDeque<i64>,
    last_success: Instant,
    /// The first compaction waits a whole period; later ones the compact interval.
    base_interval: Duration,
}

impl Periodic {
    pub fn new(period: Duration, now: Instant) -> Self {
        Self { period, revs: VecDeque::new(), last_success: now, base_interval: period }
    }

    fn compact_interval(&self) -> Duration {
        self.period.min(Duration::from_secs(3600))
    }

    pub fn retry_interval(&self) -> Duration {
        self.compact_interval() / RETRY_DIVISOR
    }

    fn retentions(&self) -> usize {
        (self.period.as_nanos() / self.retry_interval().as_nanos().max(1)) as usize + 1
    }

    /// Notes the store's revision now.
    pub fn record(&mut self, rev: i64) {
        self.revs.push_back(rev);
        if self.revs.len() > self.retentions() {
            self.revs.pop_front();
        }
    }

    /// The revision to compact at, if one is due and this member may compact (`paused`: not
    /// the leader).
    pub fn due(&mut self, now: Instant, paused: bool) -> Option<i64> {
        if paused || now.duration_since(self.last_success) < self.base_interval {
            return None;
        }
        if self.base_interval == self.period {
            self.base_interval = self.compact_interval();
        }
        self.revs.front().copied()
    }

    /// The compaction succeeded (or the revision was compacted already).
    pub fn succeeded(&mut self, now: Instant) {
        self.last_success = now;
    }
}

/// etcd's revision compactor, as a decider: [`Revision::due`] every [`REVISION_INTERVAL`].
#[derive(Debug)]
pub struct Revision {
    retention: i64,
    prev: i64,
}

impl Revision {
    pub fn new(retention: i64) -> Self {
        Self { retention, prev: 0 }
    }

    pub fn due(&self, current: i64, paused: bool) -> Option<i64> {
        let rev = current - self.retention;
        if paused || rev <= 0 || rev == self.prev {
            return None;
        }
        Some(rev)
    }

    pub fn succeeded(&mut self, rev: i64) {
        self.prev = rev;
    }
}

/// Proposes a compaction at `rev` through raft; true if it is done (or was done already).
async fn compact(node: &Node, rev: i64, mode: &str) -> bool {
    let start = std::time::Instant::now();
    tracing::info!(target: "store::compactor", mode, revision = rev, "starting auto compaction");
    match node.propose(Request::Compaction(PbCompactionRequest { revision: rev, physical: false })).await {
        Ok(_) | Err(Error::Compacted { .. }) => {
            tracing::info!(target: "store::compactor", mode, revision = rev, took = ?start.elapsed(), "completed auto compaction");
            true
        }
        Err(e) => {
            tracing::warn!(target: "store::compactor", mode, revision = rev, error = %e, "failed auto compaction");
            false
        }
    }
}

/// Runs the compactor `ac` asks for against `node` until `stop` turns true.
pub async fn run(node: Node, ac: AutoCompaction, mut stop: watch::Receiver<bool>) {
    let rev = |node: &Node| node.state_machine().read().expect("state machine lock").kv.current_revision();
    let paused = |node: &Node| !node.status().is_leader;
    match ac {
        AutoCompaction::Periodic(period) => {
            let mut p = Periodic::new(period, Instant::now());
            tracing::info!(target: "store::compactor", ?period, "periodic auto compaction enabled");
            loop {
                p.record(rev(&node));
                tokio::select! {
                    _ = stop.wait_for(|s| *s) => return,
                    _ = tokio::time::sleep(p.retry_interval()) => {}
                }
                if let Some(r) = p.due(Instant::now(), paused(&node))
                    && compact(&node, r, MODE_PERIODIC).await
                {
                    p.succeeded(Instant::now());
                }
            }
        }
        AutoCompaction::Revision(retention) => {
            let mut r = Revision::new(retention);
            tracing::info!(target: "store::compactor", retention, "revision auto compaction enabled");
            loop {
                tokio::select! {
                    _ = stop.wait_for(|s| *s) => return,
                    _ = tokio::time::sleep(REVISION_INTERVAL) => {}
                }
                if let Some(rev) = r.due(rev(&node), paused(&node))
                    && compact(&node, rev, MODE_REVISION).await
                {
                    r.succeeded(rev);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_parse_as_etcd_parses_them() {
        let p = |m, r| AutoCompaction::parse(m, r);
        assert_eq!(p("periodic", "1").unwrap(), Some(AutoCompaction::Periodic(Duration::from_secs(3600))), "a bare number is hours");
        assert_eq!(p("periodic", "30m").unwrap(), Some(AutoCompaction::Periodic(Duration::from_secs(1800))));
        assert_eq!(p("periodic", "1h30m").unwrap(), Some(AutoCompaction::Periodic(Duration::from_secs(5400))));
        assert_eq!(p("periodic", "1.5s").unwrap(), Some(AutoCompaction::Periodic(Duration::from_millis(1500))));
        assert_eq!(p("revision", "1000").unwrap(), Some(AutoCompaction::Revision(1000)));
        assert_eq!(p("periodic", "0").unwrap(), None, "0 turns it off");
        assert_eq!(p("revision", "0").unwrap(), None);
        assert_eq!(p("hourly", "1").unwrap_err().to_string(), "invalid configuration: unknown auto-compaction-mode \"hourly\"");
        assert!(p("periodic", "5 minutes").unwrap_err().to_string().contains("error parsing CompactionRetention: time: "));
    }

    /// Drives a periodic compactor through `ticks` retry intervals in which the store's revision
    /// grows by one each time; returns the revisions it compacted at, with the tick.
    fn periodic_run(period: Duration, ticks: usize, leader_from: usize) -> Vec<(usize, i64)> {
        let t0 = Instant::now();
        let mut p = Periodic::new(period, t0);
        let mut now = t0;
        let mut out = Vec::new();
        for tick in 0..ticks {
            p.record(tick as i64 + 100);
            now += p.retry_interval();
            if let Some(rev) = p.due(now, tick < leader_from) {
                out.push((tick, rev));
                p.succeeded(now);
            }
        }
        out
    }

    #[test]
    fn periodic_keeps_one_period_of_history() {
        // A period of 10 s: revisions noted every second, the first compaction after 10 s at the
        // revision noted 10 s before, then one every 10 s.
        let got = periodic_run(Duration::from_secs(10), 31, 0);
        assert_eq!(got, vec![(9, 100), (19, 109), (29, 119)]);
        // Past an hour: noted every 6 minutes, compacted every hour once a period has passed,
        // at the revision of a period (here 2 h, 21 notes) ago.
        let got = periodic_run(Duration::from_secs(2 * 3600), 41, 0);
        assert_eq!(got, vec![(19, 100), (29, 109), (39, 119)]);
    }

    #[test]
    fn only_the_leader_compacts() {
        assert!(periodic_run(Duration::from_secs(10), 40, usize::MAX).is_empty(), "a follower never compacts");
        // Leader from tick 25 on: the first tick it leads, it compacts at the revision of a
        // period ago.
        assert_eq!(periodic_run(Duration::from_secs(10), 31, 25), vec![(25, 115)]);
    }

    #[test]
    fn revision_keeps_the_last_n_revisions() {
        let mut r = Revision::new(1000);
        assert_eq!(r.due(900, false), None, "not enough revisions yet");
        assert_eq!(r.due(5000, true), None, "paused: not the leader");
        assert_eq!(r.due(5000, false), Some(4000));
        r.succeeded(4000);
        assert_eq!(r.due(5000, false), None, "nothing new since the last compaction");
        assert_eq!(r.due(5001, false), Some(4001));
    }
}
