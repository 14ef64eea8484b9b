//! Helpers for the crate's unit tests: one wait and one hold, as the end-to-end tests have
//! `poll_until` and `hold_for` (e2e/src/lib.rs), which this crate cannot depend on. Both measure
//! time with tokio's clock, so a test with paused time runs them without waiting.

use std::time::Duration;

use tokio::time::Instant;

/// How often a condition is looked at.
const POLL: Duration = Duration::from_millis(20);

/// How long [`wait_for`] waits before it fails the test.
const WAIT_TIMEOUT: Duration = Duration::from_secs(10);

/// Waits until `cond` holds: synchronisation with work that tells the test nothing when it is
/// done (a pod worker's sync, a probe worker's result). Fails the test after [`WAIT_TIMEOUT`].
pub(crate) async fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT_TIMEOUT;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(POLL).await;
    }
}

/// Checks that `cond` holds throughout `period`, the first time at once and the last once the
/// period has passed: for tests whose point is that something does *not* happen for a while (no
/// restart during a back-off, nothing created by a sync that has nothing to do). Checking all
/// along also catches a change that comes and goes within the period. Fails the test at the first
/// look where `cond` is false.
pub(crate) async fn hold_for(what: &str, period: Duration, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    loop {
        assert!(cond(), "{what}: broken {:?} into the {period:?} it must hold", start.elapsed());
        let elapsed = start.elapsed();
        if elapsed >= period {
            return;
        }
        tokio::time::sleep(POLL.min(period - elapsed)).await;
    }
}
