//! Mirrors pkg/controller/volume/pvcprotection/pvc_protection_controller.go: a claim in use is not
//! deleted under its pods. The API server's StorageObjectInUseProtection admission puts the
//! finalizer `kubernetes.io/pvc-protection` on every claim; a deleted claim stays (Terminating)
//! until this controller takes the finalizer off, which it does once no pod uses it.
//!
//! 1. Claims and pods are watched into caches. A claim queues itself when it lacks the finalizer
//!    or is being deleted with it; a pod that may release claims — deleted, terminated, or not
//!    scheduled — queues the claims its volumes name.
//! 2. For a queued claim ([`decide`]): being deleted with the finalizer and not in use → the
//!    finalizer is removed; not being deleted and without it → it is added (claims made before
//!    the admission plugin ran).
//! 3. "In use" ([`pod_uses_claim`]): a scheduled pod of its namespace has a
//!    `persistentVolumeClaim` volume naming it (whatever its phase, as in Kubernetes), or a generic
//!    ephemeral volume whose claim it is, unless that pod is shut down (deleted with a zero grace
//!    period). The cache is asked first; when it finds no user, a live list of the namespace's
//!    pods decides, since a pod just created may not be in the cache yet.

use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::api::{Api, ListParams, PostParams};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};

use crate::error::{Error, Result};
use crate::volume::persistentvolume::util::claim_key;
use crate::workqueue::WorkQueue;

const TARGET: &str = "controllers::pvcprotection";
/// The finalizer (`volumeutil.PVCProtectionFinalizer`).
pub const PVC_PROTECTION_FINALIZER: &str = "kubernetes.io/pvc-protection";

/// What one sync does with a claim.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    RemoveFinalizer,
    AddFinalizer,
    /// Being deleted but still in use: kept.
    Keep,
    Nothing,
}

fn has_finalizer(pvc: &PersistentVolumeClaim) -> bool {
    pvc.metadata.finalizers.iter().flatten().any(|f| f == PVC_PROTECTION_FINALIZER)
}

/// IsDeletionCandidate: being deleted, and holding the finalizer.
pub fn is_deletion_candidate(pvc: &PersistentVolumeClaim) -> bool {
    pvc.metadata.deletion_timestamp.is_some() && has_finalizer(pvc)
}

/// NeedToAddFinalizer: not being deleted, and without the finalizer.
pub fn need_to_add_finalizer(pvc: &PersistentVolumeClaim) -> bool {
    pvc.metadata.deletion_timestamp.is_none() && !has_finalizer(pvc)
}

/// podIsShutDown: the kubelet is done with the pod (it asked for its deletion with a zero grace
/// period) or it was force-deleted.
pub fn pod_is_shut_down(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_some() && pod.metadata.deletion_grace_period_seconds == Some(0)
}

/// podUsesPVC (step 3).
pub fn pod_uses_claim(pod: &Pod, pvc: &PersistentVolumeClaim) -> bool {
    let Some(spec) = &pod.spec else { return false };
    if spec.node_name.as_deref().unwrap_or_default().is_empty() || pod.metadata.namespace != pvc.metadata.namespace {
        return false;
    }
    let claim = pvc.metadata.name.as_deref().unwrap_or_default();
    let pod_name = pod.metadata.name.as_deref().unwrap_or_default();
    let owned_by_pod = pvc.metadata.owner_references.iter().flatten().any(|r| r.controller == Some(true) && Some(&r.uid) == pod.metadata.uid.as_ref());
    spec.volumes.iter().flatten().any(|v| {
        v.persistent_volume_claim.as_ref().is_some_and(|c| c.claim_name == claim)
            || (!pod_is_shut_down(pod) && v.ephemeral.is_some() && format!("{pod_name}-{}", v.name) == claim && owned_by_pod)
    })
}

/// Step 2: the decision, given whether the claim is in use (asked only for a deletion candidate).
pub fn decide(pvc: &PersistentVolumeClaim, in_use: impl FnOnce() -> bool) -> Action {
    if is_deletion_candidate(pvc) {
        return if in_use() { Action::Keep } else { Action::RemoveFinalizer };
    }
    if need_to_add_finalizer(pvc) { Action::AddFinalizer } else { Action::Nothing }
}

/// enqueuePVCs' filter: only a pod that is gone, terminated or unscheduled can release a claim.
fn may_release_claims(pod: &Pod, deleted: bool) -> bool {
    let unscheduled = pod.spec.as_ref().and_then(|s| s.node_name.as_deref()).unwrap_or_default().is_empty();
    deleted || unscheduled || is_pod_terminated(pod)
}

/// volumeutil.IsPodTerminated: Failed or Succeeded, or being deleted with no container running.
pub fn is_pod_terminated(pod: &Pod) -> bool {
    let Some(status) = &pod.status else { return pod.metadata.deletion_timestamp.is_some() };
    if matches!(status.phase.as_deref(), Some("Failed" | "Succeeded")) {
        return true;
    }
    // notRunning: a container counts as running unless it is waiting or terminated.
    let running = |s: &Option<Vec<k8s_openapi::api::core::v1::ContainerStatus>>| s.iter().flatten().any(|c| c.state.as_ref().is_none_or(|st| st.terminated.is_none() && st.waiting.is_none()));
    pod.metadata.deletion_timestamp.is_some() && !running(&status.init_container_statuses) && !running(&status.container_statuses) && !running(&status.ephemeral_container_statuses)
}

pub struct PvcProtectionController {
    /// Lists and watches for the caches: the controller manager's own client.
    informers: kube::Client,
    /// Everything else: `pvc-protection-controller`'s client.
    client: kube::Client,
}

impl PvcProtectionController {
    pub fn new(informers: kube::Client, client: kube::Client) -> Self {
        Self { informers, client }
    }

    /// Steps 1–3 with one worker.
    pub async fn run(self) -> Result<()> {
        let (claims, claims_w) = reflector::store::<PersistentVolumeClaim>();
        let (pods, pods_w) = reflector::store::<Pod>();
        let queue: WorkQueue<String> = WorkQueue::new();
        let c = self.informers.clone();
        let informers = async {
            let on_claim = |pvc: &PersistentVolumeClaim, deleted: bool| {
                if !deleted && (need_to_add_finalizer(pvc) || is_deletion_candidate(pvc)) {
                    queue.add(claim_key(pvc));
                }
            };
            let on_pod = |pod: &Pod, deleted: bool| {
                if may_release_claims(pod, deleted) {
                    let ns = pod.metadata.namespace.as_deref().unwrap_or_default();
                    for claim in crate::volume::persistentvolume::util::pod_claim_names(pod) {
                        queue.add(format!("{ns}/{claim}"));
                    }
                }
            };
            tokio::join!(
                drive("persistentvolumeclaims", reflector::reflector(claims_w, watcher(Api::<PersistentVolumeClaim>::all(c.clone()), watcher::Config::default())), on_claim),
                drive("pods", reflector::reflector(pods_w, watcher(Api::<Pod>::all(c.clone()), watcher::Config::default())), on_pod),
            );
        };
        let work = async {
            if claims.wait_until_ready().await.is_err() || pods.wait_until_ready().await.is_err() {
                return;
            }
            tracing::info!(target: TARGET, "caches synced; protecting claims in use");
            while let Some(key) = queue.get().await {
                match self.process_pvc(&claims, &pods, &key).await {
                    Ok(()) => queue.forget(&key),
                    Err(e) => {
                        tracing::warn!(target: TARGET, claim = %key, error = %e, "sync failed; will retry");
                        queue.add_rate_limited(key.clone());
                    }
                }
                queue.done(&key);
            }
        };
        tokio::select! {
            () = informers => {}
            () = work => {}
        }
        Ok(())
    }

    /// processPVC (step 2).
    async fn process_pvc(&self, claims: &Store<PersistentVolumeClaim>, pods: &Store<Pod>, key: &str) -> Result<()> {
        let (ns, name) = key.split_once('/').unwrap_or(("", key));
        let Some(pvc) = claims.get(&ObjectRef::new(name).within(ns)) else { return Ok(()) };
        let in_cache = pods.state().iter().any(|p| pod_uses_claim(p, &pvc));
        let in_use = if is_deletion_candidate(&pvc) && !in_cache {
            // Step 3: the live list.
            let live = Api::<Pod>::namespaced(self.client.clone(), ns).list(&ListParams::default()).await.map_err(|e| Error::Message(format!("live list of pods failed: {e}")))?;
            live.items.iter().any(|p| pod_uses_claim(p, &pvc))
        } else {
            in_cache
        };
        let api: Api<PersistentVolumeClaim> = Api::namespaced(self.client.clone(), ns);
        let mut updated = (*pvc).clone();
        match decide(&pvc, || in_use) {
            Action::Nothing => return Ok(()),
            Action::Keep => {
                tracing::debug!(target: TARGET, claim = %key, "keeping the claim: a pod uses it");
                return Ok(());
            }
            Action::RemoveFinalizer => {
                updated.metadata.finalizers.get_or_insert_with(Vec::new).retain(|f| f != PVC_PROTECTION_FINALIZER);
                tracing::info!(target: TARGET, claim = %key, "removed the protection finalizer: no pod uses the claim");
            }
            Action::AddFinalizer => updated.metadata.finalizers.get_or_insert_with(Vec::new).push(PVC_PROTECTION_FINALIZER.into()),
        }
        match api.replace(name, &PostParams::default(), &updated).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            Err(e) => Err(Error::Kube(e)),
        }
    }
}

/// Runs one informer's stream into `on_change` (the object, and whether it was deleted).
async fn drive<K>(what: &'static str, stream: impl Stream<Item = watcher::Result<watcher::Event<K>>>, on_change: impl Fn(&K, bool)) {
    let mut stream = std::pin::pin!(stream.default_backoff());
    while let Some(ev) = stream.next().await {
        match ev {
            Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) => on_change(&o, false),
            Ok(watcher::Event::Delete(o)) => on_change(&o, true),
            Ok(_) => {}
            Err(e) => tracing::warn!(target: TARGET, resource = what, error = %e, "watch failed; retrying"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn pvc(v: Value) -> PersistentVolumeClaim {
        let mut base = json!({"metadata": {"name": "data", "namespace": "default", "uid": "c1"}, "spec": {}});
        crate::volume::persistentvolume::util::tests::merge(&mut base, v);
        serde_json::from_value(base).expect("pvc")
    }

    fn pod(v: Value) -> Pod {
        let mut base = json!({"metadata": {"name": "web", "namespace": "default", "uid": "p1"},
            "spec": {"nodeName": "node-1", "containers": [], "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}]}});
        crate::volume::persistentvolume::util::tests::merge(&mut base, v);
        serde_json::from_value(base).expect("pod")
    }

    #[test]
    fn claims_in_use() {
        let claim = pvc(json!({}));
        let ephemeral_claim = pvc(json!({"metadata": {"name": "web-scratch", "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "web", "uid": "p1", "controller": true}]}}));
        let ephemeral = json!({"spec": {"volumes": [{"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}]}});
        // (what, pod, claim, in use)
        let cases = [
            ("scheduled pod naming it", pod(json!({})), &claim, true),
            ("unscheduled pod", pod(json!({"spec": {"nodeName": null}})), &claim, false),
            ("another namespace", pod(json!({"metadata": {"namespace": "other"}})), &claim, false),
            ("a finished pod still counts", pod(json!({"status": {"phase": "Succeeded"}})), &claim, true),
            ("another claim", pod(json!({"spec": {"volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "logs"}}]}})), &claim, false),
            ("ephemeral claim of the pod", pod(ephemeral.clone()), &ephemeral_claim, true),
            ("ephemeral claim, pod shut down", pod(json!({"metadata": {"deletionTimestamp": "2026-12-06T00:00:00Z", "deletionGracePeriodSeconds": 0}, "spec": ephemeral["spec"].clone()})), &ephemeral_claim, false),
        ];
        for (what, p, c, want) in cases {
            assert_eq!(pod_uses_claim(&p, c), want, "{what}");
        }
    }

    #[test]
    fn finalizer_decisions() {
        let deleting = json!({"metadata": {"deletionTimestamp": "2026-12-06T00:00:00Z", "finalizers": [PVC_PROTECTION_FINALIZER]}});
        // (what, claim, in use, action)
        let cases = [
            ("deleting, unused", pvc(deleting.clone()), false, Action::RemoveFinalizer),
            ("deleting, used", pvc(deleting), true, Action::Keep),
            ("no finalizer", pvc(json!({})), false, Action::AddFinalizer),
            ("protected", pvc(json!({"metadata": {"finalizers": [PVC_PROTECTION_FINALIZER]}})), true, Action::Nothing),
            ("deleting, finalizer gone", pvc(json!({"metadata": {"deletionTimestamp": "2026-12-06T00:00:00Z", "finalizers": ["other"]}})), false, Action::Nothing),
        ];
        for (what, c, used, want) in cases {
            assert_eq!(decide(&c, || used), want, "{what}");
        }
        assert!(may_release_claims(&pod(json!({"status": {"phase": "Failed"}})), false));
        assert!(!may_release_claims(&pod(json!({"status": {"phase": "Running"}})), false));
        assert!(may_release_claims(&pod(json!({})), true));
        // Terminated: a terminal phase, or being deleted with no container running.
        let deleting = |state: Value| pod(json!({"metadata": {"deletionTimestamp": "2026-12-06T00:00:00Z"}, "status": {"phase": "Running", "containerStatuses": [{"name": "c", "image": "i", "imageID": "", "ready": false, "restartCount": 0, "state": state}]}}));
        assert!(is_pod_terminated(&deleting(json!({"terminated": {"exitCode": 0}}))));
        assert!(is_pod_terminated(&deleting(json!({"waiting": {}}))));
        assert!(!is_pod_terminated(&deleting(json!({"running": {}}))));
        assert!(!is_pod_terminated(&pod(json!({"status": {"phase": "Running"}}))));
    }
}
