//! Mirrors kubelet's pod_workers.go: one serial worker per pod UID.
//!
//! Each worker is an actix actor. Updates for a pod never run concurrently: the actor handles one
//! `Wake` at a time with an [`AtomicResponse`], which keeps other messages in the mailbox until
//! the sync finishes. An update that arrives during a sync does not queue behind it: it replaces
//! the pending one in a slot shared with [`PodWorkers`] (kubelet's `lastUndeliveredWorkUpdate`),
//! so a pod that changes ten times during one slow sync is synced once more, with its latest spec.
//!
//! A worker moves through kubelet's three states: syncing (`SyncPod`, repeated on every update and
//! resync), terminating (`SyncTerminatingPod`: stop the containers within the grace period) and
//! terminated (`SyncTerminatedPod`: release cgroups and volumes). It stops once its pod is
//! terminated and no source wants it any more.
//!
//! The workers call those three functions through [`PodSyncer`] (kubelet's `podSyncer`
//! interface), which the Kubelet implements: this file knows nothing else of it, and its tests
//! drive the workers with a syncer that only records what it was asked.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use actix::prelude::*;
use api::pod::uid;
use futures::future::LocalBoxFuture;
use k8s_openapi::api::core::v1::Pod;
use tokio::sync::mpsc;

use crate::eviction::types::{KillPodFunc, PodStatusFunc};
use crate::status::StatusManager;

/// What a SyncPod tells its worker.
#[derive(Debug)]
pub(crate) enum SyncOutcome {
    /// Keep syncing; look again after this long (the resync period, or the end of a backoff).
    Continue { resync_after: Duration },
    /// The pod reached Succeeded or Failed: terminate it.
    Terminal,
}

/// What the pod workers call (kubelet's podSyncer): the three sync functions, and the two
/// questions a worker asks before it starts and after it finishes. The futures are local: the
/// workers are actors on the node agent's one thread.
pub(crate) trait PodSyncer: 'static {
    /// SyncPod: make the runtime match the pod; called on every update and resync.
    fn sync_pod<'a>(&'a self, pod: &'a Pod) -> LocalBoxFuture<'a, SyncOutcome>;
    /// SyncTerminatingPod: stop the pod's containers within the grace period (`grace_override`
    /// instead of the pod's own when set). True once everything stopped.
    fn sync_terminating_pod<'a>(&'a self, pod: &'a Pod, grace_override: Option<i64>) -> LocalBoxFuture<'a, bool>;
    /// SyncTerminatedPod: release what the stopped pod held; `removed`: no source wants it, so
    /// its containers and files go too.
    fn sync_terminated_pod<'a>(&'a self, pod: &'a Pod, removed: bool) -> LocalBoxFuture<'a, ()>;
    /// Whether the runtime had anything of this pod at the last look: a Kill for a removed pod
    /// without a worker and without runtime state has nothing to stop.
    fn has_runtime_state(&self, uid: &str) -> bool;
    /// Whether some source still wants the pod: a terminated pod's worker stops once none does.
    fn is_desired(&self, uid: &str) -> bool;
}

/// Why a worker is asked to look at its pod (kubelet's SyncPodType).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum UpdateType {
    Create,
    Update,
    /// A periodic resync, a PLEG event, or a backoff that ended.
    Sync,
    /// Stop the pod: deleted (graceful), removed from its source, rejected, or evicted.
    Kill,
}

#[derive(Clone, Debug)]
pub(crate) struct UpdatePodOptions {
    pub(crate) pod: Arc<Pod>,
    pub(crate) update_type: UpdateType,
    /// For Kill: the grace period to use instead of the pod's own.
    pub(crate) grace_override: Option<i64>,
    /// For Kill: the pod is gone from every source; remove its containers and files as well.
    pub(crate) removed: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WorkerState {
    Syncing,
    Terminating,
    Terminated,
}

type Slot = Arc<Mutex<Option<UpdatePodOptions>>>;

/// Merge a new update into the pending one: a Kill is never replaced by a non-Kill, and the
/// newest pod object always wins.
fn merge_pending(slot: &mut Option<UpdatePodOptions>, new: UpdatePodOptions) {
    match slot {
        Some(old) if old.update_type == UpdateType::Kill && new.update_type != UpdateType::Kill => {
            old.pod = new.pod;
        }
        Some(old) if old.update_type == UpdateType::Kill => {
            let removed = old.removed || new.removed;
            *old = new;
            old.removed = removed;
        }
        _ => *slot = Some(new),
    }
}

struct WorkerHandle {
    addr: Addr<PodWorker>,
    pending: Slot,
    state: Arc<Mutex<WorkerState>>,
}

/// The dispatcher: owns one worker per pod UID.
pub(crate) struct PodWorkers {
    syncer: Arc<dyn PodSyncer>,
    workers: HashMap<String, WorkerHandle>,
}

impl PodWorkers {
    pub(crate) fn new(syncer: Arc<dyn PodSyncer>) -> PodWorkers {
        PodWorkers { syncer, workers: HashMap::new() }
    }

    /// UpdatePod: hand the pod to its worker, creating the worker for a pod seen the first time.
    pub(crate) fn update_pod(&mut self, opts: UpdatePodOptions) {
        let uid = opts.pod.metadata.uid.clone().unwrap_or_default();
        if let Some(h) = self.workers.get(&uid)
            && h.addr.connected()
        {
            merge_pending(&mut h.pending.lock().unwrap_or_else(|e| e.into_inner()), opts);
            h.addr.do_send(Wake);
            return;
        }
        if opts.update_type == UpdateType::Kill && opts.removed && !self.syncer.has_runtime_state(&uid) {
            // Never started here and nothing left behind: nothing to stop.
            return;
        }
        let pending: Slot = Arc::new(Mutex::new(Some(opts.clone())));
        let state = Arc::new(Mutex::new(WorkerState::Syncing));
        let worker = PodWorker {
            uid: uid.clone(),
            syncer: self.syncer.clone(),
            pending: pending.clone(),
            state: state.clone(),
            last_pod: opts.pod.clone(),
            resync: None,
        };
        let addr = worker.start();
        addr.do_send(Wake);
        self.workers.insert(uid, WorkerHandle { addr, pending, state });
    }

    /// Whether a worker exists for `uid` and what state it is in.
    pub(crate) fn state(&self, uid: &str) -> Option<WorkerState> {
        self.workers
            .get(uid)
            .filter(|h| h.addr.connected())
            .map(|h| *h.state.lock().unwrap_or_else(|e| e.into_inner()))
    }

    pub(crate) fn known_pods(&self) -> Vec<String> {
        self.workers.iter().filter(|(_, h)| h.addr.connected()).map(|(k, _)| k.clone()).collect()
    }

    /// Drop the handles of workers that stopped (terminated pods no source wants).
    pub(crate) fn forget_stopped(&mut self) {
        self.workers.retain(|_, h| h.addr.connected());
    }
}

/// The kill function the eviction manager is handed (kubelet's killPodNow): the pod's status, as
/// the status manager holds it, gets the eviction's verdict at once; the Kill goes to the sync
/// loop, which hands it to the pod's worker — the termination path a deletion takes.
pub(crate) fn kill_pod_now(kill_tx: mpsc::Sender<UpdatePodOptions>, status: StatusManager) -> KillPodFunc {
    Arc::new(move |pod: Arc<Pod>, grace: i64, verdict: PodStatusFunc| {
        let mut s = status.get_pod_status(uid(&pod)).or_else(|| pod.status.clone()).unwrap_or_default();
        verdict(&mut s);
        status.set_pod_status(&pod, s);
        let kill = UpdatePodOptions { pod, update_type: UpdateType::Kill, grace_override: Some(grace), removed: false };
        let kill_tx = kill_tx.clone();
        Box::pin(async move { kill_tx.send(kill).await.is_ok() })
    })
}

#[derive(Message)]
#[rtype(result = "()")]
struct Wake;

struct PodWorker {
    uid: String,
    syncer: Arc<dyn PodSyncer>,
    pending: Slot,
    state: Arc<Mutex<WorkerState>>,
    last_pod: Arc<Pod>,
    resync: Option<SpawnHandle>,
}

impl Actor for PodWorker {
    type Context = Context<Self>;
}

impl PodWorker {
    fn state(&self) -> WorkerState {
        *self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn set_state(&self, s: WorkerState) {
        *self.state.lock().unwrap_or_else(|e| e.into_inner()) = s;
        tracing::debug!(target: "kubelet::pod_workers", pod_uid = %self.uid, state = ?s, "worker state");
    }

    /// Come back after `delay` with a Sync of the latest pod, unless something else comes first.
    fn schedule_resync(&mut self, ctx: &mut Context<Self>, delay: Duration) {
        if let Some(h) = self.resync.take() {
            ctx.cancel_future(h);
        }
        let pending = self.pending.clone();
        self.resync = Some(ctx.run_later(delay, move |act, ctx| {
            act.resync = None;
            let mut slot = pending.lock().unwrap_or_else(|e| e.into_inner());
            if slot.is_none() {
                *slot = Some(UpdatePodOptions {
                    pod: act.last_pod.clone(),
                    update_type: UpdateType::Sync,
                    grace_override: None,
                    removed: false,
                });
            }
            drop(slot);
            ctx.notify(Wake);
        }));
    }
}

impl Handler<Wake> for PodWorker {
    type Result = AtomicResponse<Self, ()>;

    fn handle(&mut self, _: Wake, _ctx: &mut Context<Self>) -> Self::Result {
        let Some(update) = self.pending.lock().unwrap_or_else(|e| e.into_inner()).take() else {
            // Already consumed by an earlier Wake: the latest update has been synced.
            return AtomicResponse::new(Box::pin(async {}.into_actor(self)));
        };
        self.last_pod = update.pod.clone();
        let syncer = self.syncer.clone();
        let state = self.state();
        let pod = update.pod.clone();
        let wants_termination =
            update.update_type == UpdateType::Kill || pod.metadata.deletion_timestamp.is_some();

        let fut = async move {
            match state {
                WorkerState::Syncing if !wants_termination => {
                    match syncer.sync_pod(&pod).await {
                        SyncOutcome::Continue { resync_after } => (WorkerState::Syncing, Some(resync_after)),
                        // The pod finished (Succeeded/Failed): stop what is left and release it.
                        SyncOutcome::Terminal => {
                            syncer.sync_terminating_pod(&pod, Some(0)).await;
                            syncer.sync_terminated_pod(&pod, false).await;
                            (WorkerState::Terminated, None)
                        }
                    }
                }
                WorkerState::Syncing | WorkerState::Terminating => {
                    if syncer.sync_terminating_pod(&pod, update.grace_override).await {
                        syncer.sync_terminated_pod(&pod, update.removed).await;
                        (WorkerState::Terminated, None)
                    } else {
                        // Stopping failed (runtime away): try again shortly.
                        (WorkerState::Terminating, Some(Duration::from_secs(2)))
                    }
                }
                WorkerState::Terminated => {
                    if update.removed {
                        syncer.sync_terminated_pod(&pod, true).await;
                    } else if wants_termination {
                        // Deleted after it finished: let the status manager complete the deletion.
                        syncer.sync_terminated_pod(&pod, false).await;
                    }
                    (WorkerState::Terminated, None)
                }
            }
        };
        let removed = update.removed;
        AtomicResponse::new(Box::pin(fut.into_actor(self).map(move |(next, resync), act, ctx| {
            act.set_state(next);
            if next == WorkerState::Terminated && (removed || !act.syncer.is_desired(&act.uid)) {
                tracing::debug!(target: "kubelet::pod_workers", pod_uid = %act.uid, "worker done");
                ctx.stop();
                return;
            }
            if let Some(d) = resync {
                act.schedule_resync(ctx, d);
            }
            if act.pending.lock().unwrap_or_else(|e| e.into_inner()).is_some() {
                ctx.notify(Wake);
            }
        })))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use tokio::sync::oneshot;

    use super::*;
    use crate::testing::wait_for;

    fn upd(t: UpdateType, name: &str, removed: bool) -> UpdatePodOptions {
        let mut p = Pod::default();
        p.metadata.name = Some(name.into());
        UpdatePodOptions { pod: Arc::new(p), update_type: t, grace_override: None, removed }
    }

    #[test]
    fn pending_updates_coalesce_and_kill_wins() {
        let mut slot = None;
        merge_pending(&mut slot, upd(UpdateType::Update, "v1", false));
        merge_pending(&mut slot, upd(UpdateType::Update, "v2", false));
        assert_eq!(slot.as_ref().and_then(|u| u.pod.metadata.name.as_deref()), Some("v2"));
        merge_pending(&mut slot, upd(UpdateType::Kill, "v3", true));
        merge_pending(&mut slot, upd(UpdateType::Sync, "v4", false));
        let u = slot.expect("pending");
        assert_eq!(u.update_type, UpdateType::Kill, "a later sync must not cancel a kill");
        assert!(u.removed);
        assert_eq!(u.pod.metadata.name.as_deref(), Some("v4"));
    }

    /// The second [`PodSyncer`], a test seam: it runs nothing and records each call, in order, as
    /// one line (`sync_pod v1`, `sync_terminating_pod v2 grace=None`, …).
    struct RecordingSyncer {
        calls: mpsc::UnboundedSender<String>,
        /// What every SyncPod returns.
        outcome: fn() -> SyncOutcome,
        /// The UIDs some source wants.
        desired: Mutex<HashSet<String>>,
        /// Taken by the first SyncPod, which returns only once the test sends on it.
        hold_first_sync: Mutex<Option<oneshot::Receiver<()>>>,
    }

    fn name(pod: &Pod) -> &str {
        pod.metadata.name.as_deref().unwrap_or_default()
    }

    impl PodSyncer for RecordingSyncer {
        fn sync_pod<'a>(&'a self, pod: &'a Pod) -> LocalBoxFuture<'a, SyncOutcome> {
            Box::pin(async move {
                let _ = self.calls.send(format!("sync_pod {}", name(pod)));
                let hold = self.hold_first_sync.lock().unwrap_or_else(|e| e.into_inner()).take();
                if let Some(released) = hold {
                    let _ = released.await;
                }
                (self.outcome)()
            })
        }

        fn sync_terminating_pod<'a>(&'a self, pod: &'a Pod, grace_override: Option<i64>) -> LocalBoxFuture<'a, bool> {
            let _ = self.calls.send(format!("sync_terminating_pod {} grace={grace_override:?}", name(pod)));
            Box::pin(async { true })
        }

        fn sync_terminated_pod<'a>(&'a self, pod: &'a Pod, removed: bool) -> LocalBoxFuture<'a, ()> {
            let _ = self.calls.send(format!("sync_terminated_pod {} removed={removed}", name(pod)));
            Box::pin(async {})
        }

        fn has_runtime_state(&self, _uid: &str) -> bool {
            false
        }

        fn is_desired(&self, uid: &str) -> bool {
            self.desired.lock().unwrap_or_else(|e| e.into_inner()).contains(uid)
        }
    }

    /// Long enough that no resync comes during a test.
    fn keep_running() -> SyncOutcome {
        SyncOutcome::Continue { resync_after: Duration::from_secs(3600) }
    }

    fn recording(outcome: fn() -> SyncOutcome, desired: &[&str]) -> (Arc<RecordingSyncer>, mpsc::UnboundedReceiver<String>) {
        let (calls, rx) = mpsc::unbounded_channel();
        let desired = Mutex::new(desired.iter().map(|u| u.to_string()).collect());
        (Arc::new(RecordingSyncer { calls, outcome, desired, hold_first_sync: Mutex::new(None) }), rx)
    }

    fn pod_update(t: UpdateType, uid: &str, version: &str, removed: bool) -> UpdatePodOptions {
        let mut p = Pod::default();
        p.metadata.uid = Some(uid.into());
        p.metadata.name = Some(version.into());
        UpdatePodOptions { pod: Arc::new(p), update_type: t, grace_override: None, removed }
    }

    /// The calls the syncer records next, each within 10 s.
    async fn next_calls(rx: &mut mpsc::UnboundedReceiver<String>, n: usize) -> Vec<String> {
        let mut out = vec![];
        for _ in 0..n {
            let call = tokio::time::timeout(Duration::from_secs(10), rx.recv()).await.expect("a call within 10 s");
            out.push(call.expect("the syncer is alive"));
        }
        out
    }

    #[actix_rt::test]
    async fn a_worker_syncs_its_pod_then_terminates_it_and_stops() {
        let (syncer, mut calls) = recording(keep_running, &["u1"]);
        let mut workers = PodWorkers::new(syncer.clone());
        workers.update_pod(pod_update(UpdateType::Create, "u1", "v1", false));
        assert_eq!(next_calls(&mut calls, 1).await, ["sync_pod v1"]);
        assert_eq!(workers.state("u1"), Some(WorkerState::Syncing));

        syncer.desired.lock().unwrap_or_else(|e| e.into_inner()).remove("u1");
        workers.update_pod(pod_update(UpdateType::Kill, "u1", "v2", true));
        assert_eq!(next_calls(&mut calls, 2).await, ["sync_terminating_pod v2 grace=None", "sync_terminated_pod v2 removed=true"]);
        wait_for("the worker to stop", || workers.state("u1").is_none()).await;
        workers.forget_stopped();
        assert!(workers.known_pods().is_empty());
    }

    /// kubelet's lastUndeliveredWorkUpdate: nine updates during one slow sync make one more sync,
    /// of the newest pod — and nothing else runs before the kill that follows.
    #[actix_rt::test]
    async fn updates_during_a_sync_are_coalesced_into_one() {
        let (syncer, mut calls) = recording(keep_running, &["u1"]);
        let (release, held) = oneshot::channel();
        *syncer.hold_first_sync.lock().unwrap_or_else(|e| e.into_inner()) = Some(held);
        let mut workers = PodWorkers::new(syncer.clone());
        workers.update_pod(pod_update(UpdateType::Create, "u1", "v1", false));
        assert_eq!(next_calls(&mut calls, 1).await, ["sync_pod v1"]);
        for v in 2..=10 {
            workers.update_pod(pod_update(UpdateType::Update, "u1", &format!("v{v}"), false));
        }
        release.send(()).expect("the first sync is waiting");
        assert_eq!(next_calls(&mut calls, 1).await, ["sync_pod v10"]);
        workers.update_pod(pod_update(UpdateType::Kill, "u1", "v11", false));
        assert_eq!(next_calls(&mut calls, 2).await, ["sync_terminating_pod v11 grace=None", "sync_terminated_pod v11 removed=false"]);
        wait_for("the worker to be terminated", || workers.state("u1") == Some(WorkerState::Terminated)).await;
    }

    /// A pod that reached Succeeded or Failed is stopped at once (grace 0) and released, and its
    /// worker stays, Terminated, while a source still wants the pod.
    #[actix_rt::test]
    async fn a_terminal_pod_is_stopped_at_once_and_released() {
        let (syncer, mut calls) = recording(|| SyncOutcome::Terminal, &["u1"]);
        let mut workers = PodWorkers::new(syncer);
        workers.update_pod(pod_update(UpdateType::Create, "u1", "v1", false));
        let want = ["sync_pod v1", "sync_terminating_pod v1 grace=Some(0)", "sync_terminated_pod v1 removed=false"];
        assert_eq!(next_calls(&mut calls, 3).await, want);
        wait_for("the worker to be terminated", || workers.state("u1") == Some(WorkerState::Terminated)).await;
        assert_eq!(workers.known_pods(), vec!["u1".to_string()]);
    }

    /// A removed pod that never had a worker and left nothing in the runtime gets no worker.
    #[actix_rt::test]
    async fn a_removed_pod_with_nothing_to_stop_gets_no_worker() {
        let (syncer, mut calls) = recording(keep_running, &[]);
        let mut workers = PodWorkers::new(syncer);
        workers.update_pod(pod_update(UpdateType::Kill, "u1", "v1", true));
        assert_eq!(workers.state("u1"), None);
        assert!(workers.known_pods().is_empty());
        assert!(calls.try_recv().is_err(), "nothing was synced");
    }
}
