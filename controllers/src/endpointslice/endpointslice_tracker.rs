//! Mirrors staging/src/k8s.io/endpointslice/util/endpointslice_tracker.go: what this controller
//! wrote and its watch has not shown yet. Two uses, as in Kubernetes:
//! - a sync whose cache is stale (a slice it created not there yet, one it deleted still there,
//!   one it updated not yet at the version it wrote) would act on the past — creating the same
//!   endpoints twice — so it fails and is retried instead ([`EndpointSliceTracker::stale`]);
//! - the watch events of the controller's own writes do not queue the Service again
//!   ([`EndpointSliceTracker::observe`]), but anybody else's change or deletion does: the slice is
//!   put back.
//!
//! Kubernetes compares `metadata.generation`; kubelab's API server bumps it on `spec` changes
//! only (a slice has none), so the tracker remembers the resourceVersion each write returned,
//! which the watch shows again in order. Like generations, kubelab's resourceVersions are
//! numbers that only grow (store revisions), and they are compared as such: a slice newer than
//! the write is past it, not stale — the watch may show the write before the write's reply
//! has been recorded here, and only a later change then shows the slice again. (A version that
//! is not a number is compared for equality only.) An expectation older than
//! [`EXPECTATION_TIMEOUT`] is dropped, so an event lost for good (a watch relisted past it)
//! cannot stall a Service.
//!
//! A std `Mutex`: held for a few map operations, never across an `.await`.

use std::cmp::Ordering;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::discovery::v1::EndpointSlice;

/// How long a write's expectation is trusted.
pub const EXPECTATION_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Clone, Debug, PartialEq, Eq)]
enum Expected {
    /// Created or updated: the watch will show this resourceVersion.
    Version(String),
    /// Deleted: the watch will show it go.
    Deleted,
}

/// Per slice uid, what the watch should show next, and since when.
type Expectations = HashMap<String, (Expected, Instant)>;

/// Per Service key, its slices' expectations.
#[derive(Default)]
pub struct EndpointSliceTracker {
    inner: Mutex<HashMap<String, Expectations>>,
}

impl EndpointSliceTracker {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Expectations>> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Update: the controller created or updated the slice and got it back as `written`.
    pub fn update(&self, service: &str, written: &EndpointSlice) {
        let (Some(uid), Some(rv)) = (written.metadata.uid.clone(), written.metadata.resource_version.clone()) else { return };
        self.lock().entry(service.into()).or_default().insert(uid, (Expected::Version(rv), Instant::now()));
    }

    /// ExpectDeletion: the controller deleted the slice.
    pub fn expect_deletion(&self, service: &str, slice: &EndpointSlice) {
        let Some(uid) = slice.metadata.uid.clone() else { return };
        self.lock().entry(service.into()).or_default().insert(uid, (Expected::Deleted, Instant::now()));
    }

    /// ShouldSync: a watch event for the slice — `false` when it is the controller's own write
    /// showing up (the expectation is then met), `true` when someone else changed or deleted it.
    pub fn observe(&self, service: &str, slice: &EndpointSlice, deleted: bool) -> bool {
        let Some(uid) = slice.metadata.uid.as_deref() else { return true };
        let mut all = self.lock();
        let Some(slices) = all.get_mut(service) else { return true };
        let Some((expected, _)) = slices.get(uid) else { return true };
        let seen = slice.metadata.resource_version.as_deref().unwrap_or_default();
        let ours = match expected {
            Expected::Deleted => deleted,
            Expected::Version(rv) => !deleted && seen == rv,
        };
        // A later version than the write means the watch is past it (its own event came first).
        let past = matches!(expected, Expected::Version(rv) if compare(seen, rv) == Some(Ordering::Greater));
        if ours || deleted || past {
            slices.remove(uid);
        }
        if slices.is_empty() {
            all.remove(service);
        }
        !ours
    }

    /// StaleSlices: whether the cached `slices` of the Service lag behind what the controller
    /// wrote.
    pub fn stale(&self, service: &str, slices: &[EndpointSlice]) -> bool {
        let mut all = self.lock();
        let Some(expected) = all.get_mut(service) else { return false };
        expected.retain(|_, (_, at)| at.elapsed() < EXPECTATION_TIMEOUT);
        expected.iter().any(|(uid, (want, _))| {
            let cached = slices.iter().find(|s| s.metadata.uid.as_deref() == Some(uid.as_str()));
            match (want, cached) {
                (Expected::Deleted, cached) => cached.is_some(),
                (Expected::Version(_), None) => true,
                (Expected::Version(rv), Some(s)) => {
                    let cached = s.metadata.resource_version.as_deref().unwrap_or_default();
                    match compare(cached, rv) {
                        Some(order) => order == Ordering::Less,
                        None => cached != rv,
                    }
                }
            }
        })
    }

    /// DeleteService: forget the Service.
    pub fn delete_service(&self, service: &str) {
        self.lock().remove(service);
    }
}

/// Two resourceVersions' order, when both are numbers (kubelab's store revisions).
fn compare(a: &str, b: &str) -> Option<Ordering> {
    Some(a.parse::<u64>().ok()?.cmp(&b.parse::<u64>().ok()?))
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    fn slice(uid: &str, rv: &str) -> EndpointSlice {
        EndpointSlice { metadata: ObjectMeta { uid: Some(uid.into()), resource_version: Some(rv.into()), ..ObjectMeta::default() }, ..EndpointSlice::default() }
    }

    #[test]
    fn own_writes_are_expected_then_seen() {
        let t = EndpointSliceTracker::default();
        t.update("default/web", &slice("a", "5"));
        // Created but not in the cache yet: stale.
        assert!(t.stale("default/web", &[]));
        // An older version in the cache: still stale.
        assert!(t.stale("default/web", &[slice("a", "4")]));
        assert!(!t.stale("default/web", &[slice("a", "5")]));
        // Its own event does not queue the Service, and meets the expectation.
        assert!(!t.observe("default/web", &slice("a", "5"), false));
        assert!(!t.stale("default/web", &[]));
        // Somebody else's change does.
        assert!(t.observe("default/web", &slice("a", "9"), false));
    }

    /// The watch shows the controller's write before the write's reply is recorded: when
    /// somebody else then changes the slice, that change is neither stale nor ignored.
    #[test]
    fn a_write_seen_before_it_was_recorded_does_not_stall_the_service() {
        let t = EndpointSliceTracker::default();
        assert!(t.observe("default/web", &slice("a", "5"), false), "unknown: a sync, harmless");
        t.update("default/web", &slice("a", "5"));
        // Emptied by hand: a newer version. The cache holding it is not stale.
        assert!(!t.stale("default/web", &[slice("a", "8")]));
        assert!(t.observe("default/web", &slice("a", "8"), false), "somebody else's change is synced");
        assert!(!t.stale("default/web", &[slice("a", "8")]));
        // Versions that are not numbers are compared for equality only.
        t.update("default/db", &slice("b", "x1"));
        assert!(t.stale("default/db", &[slice("b", "x0")]));
        assert!(!t.stale("default/db", &[slice("b", "x1")]));
    }

    #[test]
    fn deletions_are_expected_then_seen() {
        let t = EndpointSliceTracker::default();
        t.expect_deletion("default/web", &slice("a", "5"));
        assert!(t.stale("default/web", &[slice("a", "5")]));
        assert!(!t.stale("default/web", &[]));
        assert!(!t.observe("default/web", &slice("a", "5"), true));
        // Deleted by somebody else: the Service is synced, the slice put back.
        assert!(t.observe("default/web", &slice("b", "7"), true));
    }
}
