//! Mirrors kube-scheduler's internal/queue/scheduling_queue.go (PriorityQueue): where pending pods
//! wait for a scheduling cycle.
//!
//! - **activeQ**: pods ready to be tried, highest `spec.priority` first, then oldest first.
//! - **backoffQ**: pods that failed and wait out their backoff — 1 s after the first failed attempt,
//!   doubling per attempt up to 10 s — before going back to activeQ.
//! - **gated pods**: pods a PreEnqueue plugin keeps out of activeQ (SchedulingGates: the pod still
//!   has `spec.schedulingGates`). Every way into activeQ runs those plugins first; a gated pod
//!   never starts a cycle, takes no attempt and no backoff, and leaves only through an update of
//!   its own that the plugins let pass (kube-scheduler's `Gated` pods).
//! - **unschedulable pods**: pods no node fits. They leave only when a cluster event one of the
//!   plugins that rejected them registered for happens (a node added or changed, a pod deleted…),
//!   or after five minutes by the periodic flush, the safety net for events the scheduler missed.
//!
//! A pod rejected while an event that could have helped it happened *during* its cycle goes to
//! backoffQ, not to the unschedulable pods (kube-scheduler's moveRequestCycle): otherwise it would
//! wait for another event that may never come.

use std::cmp::Reverse;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use crate::framework::{PodInfo, PreEnqueuePlugin};

pub const INITIAL_BACKOFF: Duration = Duration::from_secs(1);
pub const MAX_BACKOFF: Duration = Duration::from_secs(10);
/// Unschedulable pods are retried at least this often (podMaxInUnschedulablePodsDuration).
pub const MAX_IN_UNSCHEDULABLE: Duration = Duration::from_secs(300);

/// A pod in the queue and its scheduling history.
#[derive(Clone, Debug)]
pub struct QueuedPodInfo {
    pub pod: Arc<PodInfo>,
    /// When it last entered a queue (orders activeQ; starts the backoff and unschedulable clocks).
    pub timestamp: Instant,
    /// Scheduling attempts so far.
    pub attempts: u32,
    /// When it was first added (for scheduler_e2e_scheduling_duration_seconds).
    pub initial_timestamp: Instant,
    /// Plugins that rejected it on its last attempt: only their events move it back.
    pub unschedulable_plugins: HashSet<&'static str>,
}

impl QueuedPodInfo {
    fn priority(&self) -> i32 {
        api::pod::pod_priority(&self.pod.pod)
    }

    /// When its backoff ends.
    pub fn backoff_expiry(&self) -> Instant {
        let mut d = INITIAL_BACKOFF;
        for _ in 1..self.attempts {
            d *= 2;
            if d >= MAX_BACKOFF {
                d = MAX_BACKOFF;
                break;
            }
        }
        self.timestamp + d
    }
}

type ActiveKey = (Reverse<i32>, Instant, u64, String);
type BackoffKey = (Instant, u64, String);

enum Where {
    Active(ActiveKey),
    Backoff(BackoffKey),
    Unschedulable,
    Gated,
}

#[derive(Default)]
struct Inner {
    active: BTreeSet<ActiveKey>,
    backoff: BTreeSet<BackoffKey>,
    pods: HashMap<String, (QueuedPodInfo, Where)>,
    /// The uids of `pods` that are unschedulable, so that events need not scan every pending pod.
    unschedulable: HashSet<String>,
    /// The uids of `pods` that a PreEnqueue plugin rejected.
    gated: HashSet<String>,
    /// The profile's PreEnqueue plugins, run before a pod enters activeQ.
    pre_enqueue: Vec<Arc<dyn PreEnqueuePlugin>>,
    /// Pods popped and not yet done with (uid → the pod), for updates that arrive meanwhile.
    in_flight: HashMap<String, Arc<PodInfo>>,
    seq: u64,
    scheduling_cycle: u64,
    move_request_cycle: u64,
    closed: bool,
}

/// Counts per queue, for `scheduler_pending_pods`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pending {
    pub active: usize,
    pub backoff: usize,
    pub unschedulable: usize,
    pub gated: usize,
}

#[derive(Default)]
pub struct SchedulingQueue {
    inner: Mutex<Inner>,
    notify: Notify,
}

impl Inner {
    fn remove(&mut self, uid: &str) -> Option<QueuedPodInfo> {
        let (qp, at) = self.pods.remove(uid)?;
        match at {
            Where::Active(k) => {
                self.active.remove(&k);
            }
            Where::Backoff(k) => {
                self.backoff.remove(&k);
            }
            Where::Unschedulable => {
                self.unschedulable.remove(uid);
            }
            Where::Gated => {
                self.gated.remove(uid);
            }
        }
        Some(qp)
    }

    fn push_unschedulable(&mut self, qp: QueuedPodInfo) {
        let uid = qp.pod.uid().to_string();
        self.unschedulable.insert(uid.clone());
        self.pods.insert(uid, (qp, Where::Unschedulable));
    }

    /// Into activeQ, unless a PreEnqueue plugin rejects the pod: then among the gated pods.
    fn push_active(&mut self, qp: QueuedPodInfo) {
        if let Some(s) = self.pre_enqueue.iter().map(|p| p.pre_enqueue(&qp.pod).with_plugin(p.name())).find(|s| !s.is_success()) {
            tracing::debug!(target: "scheduler::queue", pod = qp.pod.key(), pod_uid = qp.pod.uid(), plugin = s.plugin, reason = %s.message(), "gated");
            let uid = qp.pod.uid().to_string();
            self.gated.insert(uid.clone());
            self.pods.insert(uid, (qp, Where::Gated));
            return;
        }
        self.seq += 1;
        let uid = qp.pod.uid().to_string();
        let key = (Reverse(qp.priority()), qp.timestamp, self.seq, uid.clone());
        self.active.insert(key.clone());
        self.pods.insert(uid, (qp, Where::Active(key)));
    }

    fn push_backoff(&mut self, qp: QueuedPodInfo) {
        self.seq += 1;
        let uid = qp.pod.uid().to_string();
        let key = (qp.backoff_expiry(), self.seq, uid.clone());
        self.backoff.insert(key.clone());
        self.pods.insert(uid, (qp, Where::Backoff(key)));
    }

    /// Active if its backoff is over, else backoffQ.
    fn push_active_or_backoff(&mut self, qp: QueuedPodInfo, now: Instant) {
        if qp.attempts > 0 && qp.backoff_expiry() > now {
            self.push_backoff(qp);
        } else {
            self.push_active(qp);
        }
    }
}

impl SchedulingQueue {
    /// A queue without PreEnqueue plugins (the queue's own tests).
    #[cfg(test)]
    pub fn new() -> SchedulingQueue {
        SchedulingQueue::default()
    }

    /// A queue that runs `plugins` (a profile's PreEnqueue plugins) before a pod enters activeQ.
    pub fn with_pre_enqueue(plugins: Vec<Arc<dyn PreEnqueuePlugin>>) -> SchedulingQueue {
        let q = SchedulingQueue::default();
        q.inner.lock().expect("queue lock").pre_enqueue = plugins;
        q
    }

    /// A new pending pod (or one seen again after a relist) goes to activeQ.
    pub fn add(&self, pod: Arc<PodInfo>) {
        let now = Instant::now();
        let mut q = self.inner.lock().expect("queue lock");
        let uid = pod.uid().to_string();
        if let Some(p) = q.in_flight.get_mut(&uid) {
            *p = pod;
            return;
        }
        if let Some(mut qp) = q.remove(&uid) {
            qp.pod = pod;
            q.push_active_or_backoff(qp, now);
        } else {
            podtrace::recorder().record(&uid, podtrace::Step::now("scheduler", "queued"));
            q.push_active(QueuedPodInfo {
                pod,
                timestamp: now,
                attempts: 0,
                initial_timestamp: now,
                unschedulable_plugins: HashSet::new(),
            });
        }
        drop(q);
        self.notify.notify_one();
    }

    /// An update of a pending pod: replaces it where it waits. An unschedulable pod whose spec
    /// changed is worth another try at once (its own change may be what makes it fit).
    pub fn update(&self, pod: Arc<PodInfo>) {
        let now = Instant::now();
        let mut q = self.inner.lock().expect("queue lock");
        let uid = pod.uid().to_string();
        if let Some(p) = q.in_flight.get_mut(&uid) {
            *p = pod;
            return;
        }
        match q.pods.get(&uid).map(|(_, w)| matches!(w, Where::Unschedulable)) {
            None => {
                drop(q);
                self.add(pod);
                return;
            }
            Some(true) => {
                let mut qp = q.remove(&uid).expect("present");
                let spec_changed = qp.pod.pod.spec != pod.pod.spec || qp.pod.pod.metadata.labels != pod.pod.metadata.labels;
                qp.pod = pod;
                if spec_changed {
                    q.push_active_or_backoff(qp, now);
                } else {
                    q.push_unschedulable(qp);
                }
            }
            Some(false) => {
                let mut qp = q.remove(&uid).expect("present");
                qp.pod = pod;
                match qp.attempts {
                    0 => q.push_active(qp),
                    _ => q.push_active_or_backoff(qp, now),
                }
            }
        }
        drop(q);
        self.notify.notify_one();
    }

    /// The pod was deleted or bound by someone else: it leaves every queue.
    pub fn delete(&self, uid: &str) {
        let mut q = self.inner.lock().expect("queue lock");
        q.remove(uid);
        q.in_flight.remove(uid);
    }

    /// Waits for the next pod of activeQ. `None` once the queue is closed.
    pub async fn pop(&self) -> Option<QueuedPodInfo> {
        loop {
            let notified = self.notify.notified();
            {
                let mut q = self.inner.lock().expect("queue lock");
                if q.closed {
                    return None;
                }
                if let Some(key) = q.active.pop_first() {
                    let (mut qp, _) = q.pods.remove(&key.3).expect("indexed");
                    qp.attempts += 1;
                    q.scheduling_cycle += 1;
                    q.in_flight.insert(key.3, qp.pod.clone());
                    return Some(qp);
                }
            }
            notified.await;
        }
    }

    /// The current cycle number: pass it back to `add_unschedulable` for the pod just popped.
    pub fn scheduling_cycle(&self) -> u64 {
        self.inner.lock().expect("queue lock").scheduling_cycle
    }

    /// The newest version of a popped pod, if it is still wanted (not deleted meanwhile).
    pub fn in_flight(&self, uid: &str) -> Option<Arc<PodInfo>> {
        self.inner.lock().expect("queue lock").in_flight.get(uid).cloned()
    }

    /// The popped pod was scheduled (or dropped): it is no longer in flight.
    pub fn done(&self, uid: &str) {
        self.inner.lock().expect("queue lock").in_flight.remove(uid);
    }

    /// The popped pod failed: into the unschedulable pods, or backoffQ when it failed for an error
    /// or an event that could help arrived during its cycle (`cycle` = `scheduling_cycle()` when
    /// it was popped). A pod deleted while in flight is dropped.
    pub fn add_unschedulable(&self, mut qp: QueuedPodInfo, cycle: u64, error: bool) {
        let now = Instant::now();
        let mut q = self.inner.lock().expect("queue lock");
        let uid = qp.pod.uid().to_string();
        let Some(latest) = q.in_flight.remove(&uid) else { return };
        qp.pod = latest;
        qp.timestamp = now;
        if error || q.move_request_cycle >= cycle {
            q.push_backoff(qp);
        } else {
            q.push_unschedulable(qp);
        }
    }

    /// A pod whose binding failed after it left the queue: back in with backoff (unless it is
    /// queued again already, as a newer version).
    pub fn add_backoff(&self, mut qp: QueuedPodInfo, pod: Arc<PodInfo>) {
        let mut q = self.inner.lock().expect("queue lock");
        if q.pods.contains_key(pod.uid()) || q.in_flight.contains_key(pod.uid()) {
            return;
        }
        qp.pod = pod;
        qp.timestamp = Instant::now();
        q.push_backoff(qp);
    }

    /// A cluster event happened that the plugins in `interested` registered for: unschedulable
    /// pods any of them rejected (or that no plugin named) move to activeQ or backoffQ.
    pub fn move_all_to_active_or_backoff(&self, interested: &[&'static str]) {
        let now = Instant::now();
        let mut q = self.inner.lock().expect("queue lock");
        let movable: Vec<String> = q
            .unschedulable
            .iter()
            .filter(|uid| {
                let qp = &q.pods[*uid].0;
                qp.unschedulable_plugins.is_empty() || qp.unschedulable_plugins.iter().any(|p| interested.contains(p))
            })
            .cloned()
            .collect();
        let moved = !movable.is_empty();
        for uid in movable {
            let qp = q.remove(&uid).expect("present");
            q.push_active_or_backoff(qp, now);
        }
        q.move_request_cycle = q.scheduling_cycle;
        drop(q);
        if moved {
            self.notify.notify_one();
        }
    }

    /// Moves pods whose backoff is over to activeQ (run every second), and unschedulable pods
    /// that waited longer than MAX_IN_UNSCHEDULABLE (run every 30 s).
    pub fn flush(&self, unschedulable_too: bool) {
        let now = Instant::now();
        let mut q = self.inner.lock().expect("queue lock");
        let mut moved = false;
        while let Some(key) = q.backoff.first().cloned() {
            if key.0 > now {
                break;
            }
            let qp = q.remove(&key.2).expect("indexed");
            q.push_active(qp);
            moved = true;
        }
        if unschedulable_too {
            let stale: Vec<String> = q
                .unschedulable
                .iter()
                .filter(|uid| now.duration_since(q.pods[*uid].0.timestamp) > MAX_IN_UNSCHEDULABLE)
                .cloned()
                .collect();
            for uid in stale {
                let qp = q.remove(&uid).expect("present");
                q.push_active_or_backoff(qp, now);
                moved = true;
            }
        }
        drop(q);
        if moved {
            self.notify.notify_one();
        }
    }

    pub fn pending(&self) -> Pending {
        let q = self.inner.lock().expect("queue lock");
        Pending { active: q.active.len(), backoff: q.backoff.len(), unschedulable: q.unschedulable.len(), gated: q.gated.len() }
    }

    /// Wakes `pop` with `None`.
    pub fn close(&self) {
        self.inner.lock().expect("queue lock").closed = true;
        self.notify.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::types::testing::pod;
    use serde_json::json;

    fn p(name: &str, priority: i32) -> Arc<PodInfo> {
        Arc::new(pod(name, json!({"priority": priority})))
    }

    async fn pop_name(q: &SchedulingQueue) -> String {
        q.pop().await.unwrap().pod.name().to_string()
    }

    #[tokio::test(start_paused = true)]
    async fn active_queue_orders_by_priority_then_age() {
        let q = SchedulingQueue::new();
        q.add(p("low-old", 0));
        tokio::time::advance(Duration::from_millis(10)).await;
        q.add(p("high", 100));
        tokio::time::advance(Duration::from_millis(10)).await;
        q.add(p("low-new", 0));
        assert_eq!(pop_name(&q).await, "high");
        assert_eq!(pop_name(&q).await, "low-old");
        assert_eq!(pop_name(&q).await, "low-new");
    }

    #[tokio::test(start_paused = true)]
    async fn a_gated_pod_waits_outside_active_q_until_its_gates_are_removed() {
        use crate::plugins::scheduling_gates::SchedulingGates;
        let q = SchedulingQueue::with_pre_enqueue(vec![Arc::new(SchedulingGates)]);
        let gated = |gates: serde_json::Value| Arc::new(pod("g", json!({"schedulingGates": gates})));
        q.add(gated(json!([{"name": "a"}, {"name": "b"}])));
        q.add(p("free", 0));
        assert_eq!(pop_name(&q).await, "free");
        assert_eq!(q.pending(), Pending { gated: 1, ..Pending::default() });
        // Events and the periodic flush leave it where it is: only its own update can free it.
        q.move_all_to_active_or_backoff(&[crate::plugins::scheduling_gates::NAME]);
        tokio::time::advance(MAX_IN_UNSCHEDULABLE * 2).await;
        q.flush(true);
        q.update(gated(json!([{"name": "b"}])));
        assert_eq!(q.pending(), Pending { gated: 1, ..Pending::default() });
        q.update(gated(json!([])));
        assert_eq!(q.pending(), Pending { active: 1, ..Pending::default() });
        let qp = q.pop().await.unwrap();
        assert_eq!((qp.pod.name(), qp.attempts), ("g", 1), "this is its first attempt: the wait took none");
        q.delete("uid-g");
        assert_eq!(q.pending(), Pending::default());
    }

    #[tokio::test(start_paused = true)]
    async fn backoff_doubles_to_ten_seconds() {
        let q = SchedulingQueue::new();
        q.add(p("a", 0));
        let mut expected = [1u64, 2, 4, 8, 10, 10].into_iter();
        for attempt in 1..=6u32 {
            let qp = q.pop().await.unwrap();
            assert_eq!(qp.attempts, attempt);
            let cycle = q.scheduling_cycle();
            q.add_unschedulable(qp, cycle, true); // an error: straight to backoffQ
            let wait = Duration::from_secs(expected.next().unwrap());
            tokio::time::advance(wait - Duration::from_millis(1)).await;
            q.flush(false);
            assert_eq!(q.pending(), Pending { active: 0, backoff: 1, unschedulable: 0, gated: 0 }, "attempt {attempt}: still backing off");
            tokio::time::advance(Duration::from_millis(1)).await;
            q.flush(false);
            assert_eq!(q.pending(), Pending { active: 1, backoff: 0, unschedulable: 0, gated: 0 }, "attempt {attempt}: backoff over");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn unschedulable_pods_move_only_on_interesting_events() {
        let q = SchedulingQueue::new();
        q.add(p("a", 0));
        let mut qp = q.pop().await.unwrap();
        let cycle = q.scheduling_cycle();
        qp.unschedulable_plugins.insert("NodeResourcesFit");
        q.add_unschedulable(qp, cycle, false);
        assert_eq!(q.pending().unschedulable, 1);

        q.move_all_to_active_or_backoff(&["TaintToleration"]);
        assert_eq!(q.pending().unschedulable, 1, "an event the rejecting plugin did not register leaves it");

        q.move_all_to_active_or_backoff(&["NodeResourcesFit", "NodeAffinity"]);
        assert_eq!(q.pending(), Pending { active: 0, backoff: 1, unschedulable: 0, gated: 0 }, "moved, but still backing off");
        tokio::time::advance(INITIAL_BACKOFF).await;
        q.flush(false);
        assert_eq!(pop_name(&q).await, "a");
    }

    #[tokio::test(start_paused = true)]
    async fn an_event_during_the_cycle_sends_the_pod_to_backoff() {
        let q = SchedulingQueue::new();
        q.add(p("a", 0));
        let mut qp = q.pop().await.unwrap();
        let cycle = q.scheduling_cycle();
        q.move_all_to_active_or_backoff(&["NodeResourcesFit"]); // a node was added mid-cycle
        qp.unschedulable_plugins.insert("NodeResourcesFit");
        q.add_unschedulable(qp, cycle, false);
        assert_eq!(q.pending(), Pending { active: 0, backoff: 1, unschedulable: 0, gated: 0 });
    }

    #[tokio::test(start_paused = true)]
    async fn periodic_flush_retries_long_unschedulable_pods() {
        let q = SchedulingQueue::new();
        q.add(p("a", 0));
        let mut qp = q.pop().await.unwrap();
        qp.unschedulable_plugins.insert("NodeAffinity");
        let cycle = q.scheduling_cycle();
        q.add_unschedulable(qp, cycle, false);
        tokio::time::advance(MAX_IN_UNSCHEDULABLE).await;
        q.flush(true);
        assert_eq!(q.pending().unschedulable, 1, "not longer than the limit yet");
        tokio::time::advance(Duration::from_secs(1)).await;
        q.flush(true);
        assert_eq!(q.pending().active, 1);
    }

    #[tokio::test(start_paused = true)]
    async fn deleted_and_updated_pods() {
        let q = SchedulingQueue::new();
        q.add(p("a", 0));
        q.add(p("b", 0));
        q.delete("uid-a");
        assert_eq!(pop_name(&q).await, "b");
        // Deleted while in flight: dropped when it fails.
        q.add(p("c", 0));
        let qp = q.pop().await.unwrap();
        q.delete("uid-c");
        let cycle = q.scheduling_cycle();
        q.add_unschedulable(qp, cycle, false);
        assert_eq!(q.pending(), Pending::default());
        // An unschedulable pod whose spec changes is retried.
        q.add(p("d", 0));
        let mut qp = q.pop().await.unwrap();
        qp.unschedulable_plugins.insert("NodeAffinity");
        let cycle = q.scheduling_cycle();
        q.add_unschedulable(qp, cycle, false);
        q.update(p("d", 5));
        assert_eq!(q.pending().unschedulable, 0);
    }

    #[tokio::test(start_paused = true)]
    async fn pop_waits_and_close_wakes_it() {
        let q = Arc::new(SchedulingQueue::new());
        let waiter = tokio::spawn({
            let q = q.clone();
            async move { q.pop().await.map(|qp| qp.pod.name().to_string()) }
        });
        tokio::task::yield_now().await;
        q.add(p("late", 0));
        assert_eq!(waiter.await.unwrap().as_deref(), Some("late"));
        let waiter = tokio::spawn({
            let q = q.clone();
            async move { q.pop().await.is_none() }
        });
        tokio::task::yield_now().await;
        q.close();
        assert!(waiter.await.unwrap());
    }
}
