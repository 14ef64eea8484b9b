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

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use actix::prelude::*;
use api::pod::uid;
use k8s_openapi::api::core::v1::Pod;
use tokio::sync::mpsc;

use crate::eviction::types::{KillPodFunc, PodStatusFunc};
use crate::kubelet::{Kubelet, SyncOutcome};
use crate::status::StatusManager;

/// Why a worker is asked to look at its pod (kubelet's SyncPodType).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UpdateType {
    Create,
    Update,
    /// A periodic resync, a PLEG event, or a backoff that ended.
    Sync,
    /// Stop the pod: deleted (graceful), removed from its source, rejected, or evicted.
    Kill,
}

#[derive(Clone, Debug)]
pub struct UpdatePodOptions {
    pub pod: Arc<Pod>,
    pub update_type: UpdateType,
    /// For Kill: the grace period to use instead of the pod's own.
    pub grace_override: Option<i64>,
    /// For Kill: the pod is gone from every source; remove its containers and files as well.
    pub removed: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WorkerState {
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
pub struct PodWorkers {
    kubelet: Arc<Kubelet>,
    workers: HashMap<String, WorkerHandle>,
}

impl PodWorkers {
    pub fn new(kubelet: Arc<Kubelet>) -> PodWorkers {
        PodWorkers { kubelet, workers: HashMap::new() }
    }

    /// UpdatePod: hand the pod to its worker, creating the worker for a pod seen the first time.
    pub fn update_pod(&mut self, opts: UpdatePodOptions) {
        let uid = opts.pod.metadata.uid.clone().unwrap_or_default();
        if let Some(h) = self.workers.get(&uid)
            && h.addr.connected()
        {
            merge_pending(&mut h.pending.lock().unwrap_or_else(|e| e.into_inner()), opts);
            h.addr.do_send(Wake);
            return;
        }
        if opts.update_type == UpdateType::Kill && opts.removed && !self.kubelet.has_runtime_state(&uid) {
            // Never started here and nothing left behind: nothing to stop.
            return;
        }
        let pending: Slot = Arc::new(Mutex::new(Some(opts.clone())));
        let state = Arc::new(Mutex::new(WorkerState::Syncing));
        let worker = PodWorker {
            uid: uid.clone(),
            kubelet: self.kubelet.clone(),
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
    pub fn state(&self, uid: &str) -> Option<WorkerState> {
        self.workers
            .get(uid)
            .filter(|h| h.addr.connected())
            .map(|h| *h.state.lock().unwrap_or_else(|e| e.into_inner()))
    }

    pub fn known_pods(&self) -> Vec<String> {
        self.workers.iter().filter(|(_, h)| h.addr.connected()).map(|(k, _)| k.clone()).collect()
    }

    /// Drop the handles of workers that stopped (terminated pods no source wants).
    pub fn forget_stopped(&mut self) {
        self.workers.retain(|_, h| h.addr.connected());
    }
}

/// The kill function the eviction manager is handed (kubelet's killPodNow): the pod's status, as
/// the status manager holds it, gets the eviction's verdict at once; the Kill goes to the sync
/// loop, which hands it to the pod's worker — the termination path a deletion takes.
pub fn kill_pod_now(kill_tx: mpsc::Sender<UpdatePodOptions>, status: StatusManager) -> KillPodFunc {
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
    kubelet: Arc<Kubelet>,
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
        let kubelet = self.kubelet.clone();
        let state = self.state();
        let pod = update.pod.clone();
        let wants_termination =
            update.update_type == UpdateType::Kill || pod.metadata.deletion_timestamp.is_some();

        let fut = async move {
            match state {
                WorkerState::Syncing if !wants_termination => {
                    match kubelet.sync_pod(&pod).await {
                        SyncOutcome::Continue { resync_after } => (WorkerState::Syncing, Some(resync_after)),
                        // The pod finished (Succeeded/Failed): stop what is left and release it.
                        SyncOutcome::Terminal => {
                            kubelet.sync_terminating_pod(&pod, Some(0)).await;
                            kubelet.sync_terminated_pod(&pod, false).await;
                            (WorkerState::Terminated, None)
                        }
                    }
                }
                WorkerState::Syncing | WorkerState::Terminating => {
                    if kubelet.sync_terminating_pod(&pod, update.grace_override).await {
                        kubelet.sync_terminated_pod(&pod, update.removed).await;
                        (WorkerState::Terminated, None)
                    } else {
                        // Stopping failed (runtime away): try again shortly.
                        (WorkerState::Terminating, Some(Duration::from_secs(2)))
                    }
                }
                WorkerState::Terminated => {
                    if update.removed {
                        kubelet.sync_terminated_pod(&pod, true).await;
                    } else if wants_termination {
                        // Deleted after it finished: let the status manager complete the deletion.
                        kubelet.sync_terminated_pod(&pod, false).await;
                    }
                    (WorkerState::Terminated, None)
                }
            }
        };
        let removed = update.removed;
        AtomicResponse::new(Box::pin(fut.into_actor(self).map(move |(next, resync), act, ctx| {
            act.set_state(next);
            if next == WorkerState::Terminated && (removed || !act.kubelet.is_desired(&act.uid)) {
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
    use super::*;

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
}
