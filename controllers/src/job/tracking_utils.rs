//! Mirrors pkg/controller/job/tracking_utils.go: the finalizer removals a Job controller asked
//! for and has not seen yet (`uidTrackingExpectations`). Until the pod watch shows a pod
//! without the `batch.kubernetes.io/job-tracking` finalizer, the cache still holds it with the
//! finalizer; a sync trusting the cache would count that pod a second time. So each sync skips
//! the UIDs expected here.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

/// Per Job key, the pod UIDs whose finalizer removal is not yet observed.
#[derive(Clone, Default)]
pub struct FinalizerExpectations {
    inner: Arc<Mutex<HashMap<String, HashSet<String>>>>,
}

impl FinalizerExpectations {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, HashSet<String>>> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// getExpectedUIDs.
    pub fn expected_uids(&self, key: &str) -> HashSet<String> {
        self.lock().get(key).cloned().unwrap_or_default()
    }

    /// expectFinalizersRemoved: before the patches are sent.
    pub fn expect_removed(&self, key: &str, uids: impl IntoIterator<Item = String>) {
        self.lock().entry(key.into()).or_default().extend(uids);
    }

    /// finalizerRemovalObserved: the pod was seen without the finalizer, or gone (or the patch
    /// failed, so no such update will come).
    pub fn removal_observed(&self, key: &str, uid: &str) {
        let mut m = self.lock();
        if let Some(set) = m.get_mut(key) {
            set.remove(uid);
            if set.is_empty() {
                m.remove(key);
            }
        }
    }

    /// deleteExpectations: the Job went.
    pub fn delete(&self, key: &str) {
        self.lock().remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn removals_are_expected_until_observed() {
        let e = FinalizerExpectations::default();
        assert!(e.expected_uids("ns/j").is_empty());
        e.expect_removed("ns/j", ["a".to_string(), "b".to_string()]);
        e.expect_removed("ns/other", ["c".to_string()]);
        e.removal_observed("ns/j", "a");
        e.removal_observed("ns/j", "x"); // never expected: nothing happens
        assert_eq!(e.expected_uids("ns/j"), HashSet::from(["b".to_string()]));
        e.removal_observed("ns/j", "b");
        assert!(e.expected_uids("ns/j").is_empty());
        e.delete("ns/other");
        assert!(e.expected_uids("ns/other").is_empty());
    }
}
