//! Mirrors the sync loop of kubelet's kubelet.go: syncLoop / syncLoopIteration and the pod update
//! handlers (HandlePodAdditions with admission, HandlePodUpdates, HandlePodRemoves).
//!
//! The sync loop waits on five channels: pod updates from the sources (config), lifecycle events
//! from PLEG, kills decided elsewhere (the eviction manager's), probe results that changed, and a
//! housekeeping tick (every 2 s); and on shutdown. It never does pod work itself: it owns the pod
//! workers ([`crate::pod_workers`]) and hands each pod to its worker, which calls the Kubelet back
//! through [`crate::pod_workers::PodSyncer`].

use std::sync::Arc;
use std::time::Duration;

use api::pod::kubelet_types::{APISERVER_SOURCE, CONFIG_SOURCE_ANNOTATION_KEY};
use api::pod::{is_mirror_pod, is_pod_terminal, uid};
use k8s_openapi::api::core::v1::Pod;
use tokio::sync::{mpsc, watch};

use super::Kubelet;
use super::pods::active_pods;
use crate::config::{PodOperation, PodUpdate};
use crate::container::PodLifecycleEvent;
use crate::events;
use crate::kuberuntime::kuberuntime_container::FORCED_GRACE_PERIOD;
use crate::pod_workers::{PodWorkers, UpdatePodOptions, UpdateType};
use crate::prober::{ProbeResult, ProbeType};

/// The sync loop (kubelet's syncLoop / syncLoopIteration). Runs until shutdown; owns the pod
/// workers.
pub(crate) async fn sync_loop(
    kubelet: Arc<Kubelet>,
    mut updates: mpsc::Receiver<PodUpdate>,
    mut pleg_events: mpsc::Receiver<PodLifecycleEvent>,
    sources_ready: Arc<dyn Fn() -> bool + Send + Sync>,
    mut pod_kills: mpsc::Receiver<UpdatePodOptions>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut workers = PodWorkers::new(kubelet.clone());
    let mut probe_updates = kubelet.deps.probes.take_updates();
    let mut housekeeping = tokio::time::interval(Duration::from_secs(2));
    housekeeping.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            u = updates.recv() => match u {
                Some(u) => handle_pod_update(&kubelet, &mut workers, u),
                None => break,
            },
            Some(e) = pleg_events.recv() => {
                tracing::debug!(target: "kubelet::pleg", pod_uid = %e.id, event = ?e.kind, container = %e.data, "PLEG event");
                let pod = kubelet.pod_manager.get_pod_by_uid(&e.id);
                if let Some(pod) = pod {
                    workers.update_pod(UpdatePodOptions { pod, update_type: UpdateType::Sync, grace_override: None, removed: false });
                }
            }
            // Kills decided outside the loop (the eviction manager's killPodFunc).
            Some(kill) = pod_kills.recv() => workers.update_pod(kill),
            Some(u) = next_probe_update(&mut probe_updates) => {
                // handleProbeSync: a container became (un)ready, started, or failed its
                // liveness probe — sync its pod now, which regenerates the status or kills it.
                if u.probe_type == ProbeType::Liveness && u.result != ProbeResult::Failure {
                    continue;
                }
                tracing::debug!(target: "kubelet::prober", pod_uid = %u.pod_uid, probe = %u.probe_type, container_id = %u.container_id, result = ?u.result, "probe result changed; syncing the pod");
                let pod = kubelet.pod_manager.get_pod_by_uid(&u.pod_uid);
                if let Some(pod) = pod {
                    workers.update_pod(UpdatePodOptions { pod, update_type: UpdateType::Sync, grace_override: None, removed: false });
                }
            }
            _ = housekeeping.tick() => {
                // Read readiness first, then take every update already queued: a ready source's
                // pods are all in the queue (the merger marks it ready after queueing them), so
                // the pod manager holds them before anything is judged an orphan.
                let ready = sources_ready();
                while let Ok(u) = updates.try_recv() {
                    handle_pod_update(&kubelet, &mut workers, u);
                }
                kubelet.handle_pod_cleanups(&mut workers, ready).await;
            }
            _ = shutdown.changed() => break,
        }
    }
    tracing::info!(target: "kubelet", "sync loop stopped; pods keep running until the agent is restarted");
}

/// The next probe result change, or never when there is no channel.
async fn next_probe_update(rx: &mut Option<mpsc::UnboundedReceiver<crate::prober::results::Update>>) -> Option<crate::prober::results::Update> {
    match rx {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

/// syncLoopIteration's config branch: one update from the pod sources, by what it does.
fn handle_pod_update(kubelet: &Arc<Kubelet>, workers: &mut PodWorkers, u: PodUpdate) {
    match u.op {
        PodOperation::Add => handle_pod_additions(kubelet, workers, u.pods),
        PodOperation::Update => handle_pod_updates(kubelet, workers, u.pods),
        PodOperation::Remove => handle_pod_removes(kubelet, workers, u.pods),
    }
}

/// HandlePodAdditions: new pods, oldest first, each admitted (or rejected) and handed to a worker;
/// mirror pods only go to the pod manager.
fn handle_pod_additions(kubelet: &Arc<Kubelet>, workers: &mut PodWorkers, mut pods: Vec<Pod>) {
    pods.sort_by(|a, b| a.metadata.creation_timestamp.cmp(&b.metadata.creation_timestamp));
    for pod in pods {
        if is_mirror_pod(&pod) {
            kubelet.pod_manager.add_mirror_pod(Arc::new(pod));
            continue;
        }
        handle_pod_addition(kubelet, workers, pod);
    }
}

/// HandlePodUpdates: a newer version of pods already admitted goes to their workers (a deletion
/// as a Kill, with any shorter grace period reaching a termination in progress).
fn handle_pod_updates(kubelet: &Arc<Kubelet>, workers: &mut PodWorkers, pods: Vec<Pod>) {
    for pod in pods {
        if is_mirror_pod(&pod) {
            kubelet.pod_manager.add_mirror_pod(Arc::new(pod));
            continue;
        }
        let pod = Arc::new(pod);
        if !kubelet.pod_manager.update_pod(pod.clone()) {
            // Rejected at admission (or never seen): nothing runs for it.
            continue;
        }
        let kill = pod.metadata.deletion_timestamp.is_some();
        if kill {
            kubelet.shorten_termination(&pod, false);
        }
        workers.update_pod(UpdatePodOptions {
            pod,
            update_type: if kill { UpdateType::Kill } else { UpdateType::Update },
            grace_override: None,
            removed: false,
        });
    }
}

/// HandlePodRemoves: pods no source wants any more are killed and, once stopped, removed.
fn handle_pod_removes(kubelet: &Arc<Kubelet>, workers: &mut PodWorkers, pods: Vec<Pod>) {
    for pod in pods {
        if is_mirror_pod(&pod) {
            kubelet.pod_manager.remove_mirror_pod(&pod);
            continue;
        }
        kubelet.pod_manager.remove_pod(uid(&pod));
        // Gone from the API server while still running here: a forced delete
        // (`--force --grace-period=0`). The containers get 1 s, not the pod's grace
        // period. A static pod whose file went away stops with its own grace period.
        let from_api = pod
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(CONFIG_SOURCE_ANNOTATION_KEY))
            .is_some_and(|s| s == APISERVER_SOURCE);
        if from_api {
            kubelet.shorten_termination(&pod, true);
        }
        workers.update_pod(UpdatePodOptions {
            pod: Arc::new(pod),
            update_type: UpdateType::Kill,
            grace_override: from_api.then_some(FORCED_GRACE_PERIOD.as_secs() as i64),
            removed: true,
        });
    }
}

/// HandlePodAdditions: admit the pod (or reject it with a reason), then hand it to a worker.
fn handle_pod_addition(kubelet: &Arc<Kubelet>, workers: &mut PodWorkers, pod: Pod) {
    let uid = uid(&pod).to_string();
    let terminal = is_pod_terminal(&pod);
    let already_running = kubelet.has_runtime_state(&uid) || workers.state(&uid).is_some();
    if !terminal && !already_running && pod.metadata.deletion_timestamp.is_none() {
        // The eviction manager's admit handler comes first, as in kubelet.
        let pressure = kubelet.deps.pressure.borrow().clone();
        if let Some((reason, message)) = crate::eviction::eviction_manager::admit(&pressure, &pod) {
            reject_pod(kubelet, &pod, &reason, &message);
            return;
        }
        let active = active_pods(kubelet, workers);
        let node = kubelet.deps.node.borrow().clone();
        if let Some(node) = node {
            let r = crate::lifecycle::predicate::can_admit_pod(&node, &active, &pod, kubelet.deps.max_pods as usize);
            if !r.admit {
                reject_pod(kubelet, &pod, &r.reason, &r.message);
                return;
            }
        }
    }
    let pod = Arc::new(pod);
    kubelet.pod_manager.add_pod(pod.clone());
    workers.update_pod(UpdatePodOptions {
        pod: pod.clone(),
        update_type: if pod.metadata.deletion_timestamp.is_some() { UpdateType::Kill } else { UpdateType::Create },
        grace_override: None,
        removed: false,
    });
}

/// rejectPod: the pod fails on this node with the admission reason, and an event says why.
fn reject_pod(kubelet: &Kubelet, pod: &Pod, reason: &str, message: &str) {
    kubelet.deps.recorder.pod_event(pod, None, events::WARNING, reason, message);
    let mut status = pod.status.clone().unwrap_or_default();
    status.phase = Some("Failed".into());
    status.reason = Some(reason.to_string());
    status.message = Some(format!("Pod was rejected: {message}"));
    kubelet.deps.status.set_pod_status(pod, status);
    // Nothing runs for a rejected pod: its terminal phase may be reported at once.
    kubelet.deps.status.terminate_pod(pod);
}
