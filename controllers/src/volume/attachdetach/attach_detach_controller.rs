//! Mirrors pkg/controller/volume/attachdetach/attach_detach_controller.go: the attach-detach
//! controller (`attachdetach`), for CSI volumes. It attaches a volume to a node by creating the
//! VolumeAttachment the driver's external attacher acts on, detaches it by deleting that, and
//! keeps each node's `status.volumesAttached` — which the node agent waits for — in step.
//!
//! 1. Watch pods, claims, volumes, CSIDrivers, nodes and VolumeAttachments into caches; any change
//!    queues one reconciliation (so does a timer every [`RECONCILE_PERIOD`]).
//! 2. A pass computes the desired state and the plan ([`super::reconciler`], pure) and carries it
//!    out: creates (an AlreadyExists is a create a stale cache repeated), deletes (a NotFound
//!    likewise), a merge patch of each node's `status.volumesAttached` that differs, and events
//!    on the pods: `SuccessfulAttachVolume` when a volume they use is newly reported attached to
//!    their node, `FailedAttachVolume` for a Multi-Attach error (once per pod and volume).

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::{Node, ObjectReference, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::{CSIDriver, VolumeAttachment};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::json;

use super::reconciler::{DesiredVolume, desired_state, reconcile};
use crate::error::{Error, Result};
use crate::workqueue::WorkQueue;

const TARGET: &str = "controllers::attachdetach";
/// How often a pass runs with nothing changed (Kubernetes' reconciler loops every 100 ms and
/// resyncs its state with the API server every minute; kubelab is event driven and looks again
/// now and then).
pub const RECONCILE_PERIOD: Duration = Duration::from_secs(30);
/// The one key of the queue: a pass covers every node.
const KEY: &str = "reconcile";

pub struct AttachDetachController {
    /// Lists and watches for the caches: the controller manager's own client.
    informers: kube::Client,
    /// Everything else: `attachdetach-controller`'s client.
    client: kube::Client,
    recorder: client::record::EventRecorder,
    /// The (pod, message) pairs already told of a Multi-Attach error.
    reported: Mutex<HashSet<((String, String), String)>>,
    /// The (node, volume) pairs whose attachment was announced to their pods: a patch repeated
    /// because the node cache lags the last one announces nothing again.
    announced: Mutex<HashSet<(String, String)>>,
}

struct Caches {
    pods: Store<Pod>,
    claims: Store<PersistentVolumeClaim>,
    volumes: Store<PersistentVolume>,
    drivers: Store<CSIDriver>,
    nodes: Store<Node>,
    attachments: Store<VolumeAttachment>,
}

fn refs<T>(v: &[Arc<T>]) -> Vec<&T> {
    v.iter().map(Arc::as_ref).collect()
}

impl AttachDetachController {
    pub fn new(informers: kube::Client, client: kube::Client) -> Self {
        let recorder = client::record::EventRecorder::new(client.clone(), "attachdetach-controller", None);
        Self { informers, client, recorder, reported: Mutex::new(HashSet::new()), announced: Mutex::new(HashSet::new()) }
    }

    /// Steps 1 and 2.
    pub async fn run(self) -> Result<()> {
        let (pods, pods_w) = reflector::store::<Pod>();
        let (claims, claims_w) = reflector::store::<PersistentVolumeClaim>();
        let (volumes, volumes_w) = reflector::store::<PersistentVolume>();
        let (drivers, drivers_w) = reflector::store::<CSIDriver>();
        let (nodes, nodes_w) = reflector::store::<Node>();
        let (attachments, attachments_w) = reflector::store::<VolumeAttachment>();
        let queue: WorkQueue<&'static str> = WorkQueue::new();
        let c = self.informers.clone();
        let cfg = watcher::Config::default;
        let informers = async {
            let changed = || queue.add(KEY);
            tokio::join!(
                drive("pods", reflector::reflector(pods_w, watcher(Api::<Pod>::all(c.clone()), cfg())), changed),
                drive("persistentvolumeclaims", reflector::reflector(claims_w, watcher(Api::<PersistentVolumeClaim>::all(c.clone()), cfg())), changed),
                drive("persistentvolumes", reflector::reflector(volumes_w, watcher(Api::<PersistentVolume>::all(c.clone()), cfg())), changed),
                drive("csidrivers", reflector::reflector(drivers_w, watcher(Api::<CSIDriver>::all(c.clone()), cfg())), changed),
                drive("nodes", reflector::reflector(nodes_w, watcher(Api::<Node>::all(c.clone()), cfg())), changed),
                drive("volumeattachments", reflector::reflector(attachments_w, watcher(Api::<VolumeAttachment>::all(c.clone()), cfg())), changed),
            );
        };
        let caches = Caches { pods, claims, volumes, drivers, nodes, attachments };
        let work = async {
            for ready in [
                caches.pods.wait_until_ready().await,
                caches.claims.wait_until_ready().await,
                caches.volumes.wait_until_ready().await,
                caches.drivers.wait_until_ready().await,
                caches.nodes.wait_until_ready().await,
                caches.attachments.wait_until_ready().await,
            ] {
                if ready.is_err() {
                    return;
                }
            }
            tracing::info!(target: TARGET, "caches synced; attaching and detaching CSI volumes");
            let timer = async {
                loop {
                    queue.add(KEY);
                    tokio::time::sleep(RECONCILE_PERIOD).await;
                }
            };
            let worker = async {
                while let Some(key) = queue.get().await {
                    match self.reconcile(&caches).await {
                        Ok(()) => queue.forget(&key),
                        Err(e) => {
                            tracing::warn!(target: TARGET, error = %e, "reconciliation failed; will retry");
                            queue.add_rate_limited(key);
                        }
                    }
                    queue.done(&key);
                }
            };
            tokio::join!(timer, worker);
        };
        tokio::select! {
            () = informers => {}
            () = work => {}
        }
        Ok(())
    }

    /// Step 2: one pass. Every write is tried; the first failure is returned after.
    async fn reconcile(&self, caches: &Caches) -> Result<()> {
        let (pods, claims, volumes, drivers, nodes, attachments) =
            (caches.pods.state(), caches.claims.state(), caches.volumes.state(), caches.drivers.state(), caches.nodes.state(), caches.attachments.state());
        let desired = desired_state(&refs(&pods), &refs(&claims), &refs(&volumes), &refs(&drivers), &refs(&nodes));
        let plan = reconcile(&desired, &refs(&attachments), &refs(&volumes), &refs(&nodes));
        let mut first_error: Option<Error> = None;
        let api: Api<VolumeAttachment> = Api::all(self.client.clone());
        for va in &plan.create {
            let name = va.metadata.name.clone().unwrap_or_default();
            match api.create(&PostParams::default(), va).await {
                Ok(_) => tracing::info!(target: TARGET, attachment = %name, node = %va.spec.node_name, volume = ?va.spec.source.persistent_volume_name, "attaching: VolumeAttachment created"),
                Err(kube::Error::Api(s)) if s.code == 409 => {}
                Err(e) => {
                    first_error.get_or_insert(Error::Kube(e));
                }
            }
        }
        for name in &plan.delete {
            match api.delete(name, &DeleteParams::default()).await {
                Ok(_) => tracing::info!(target: TARGET, attachment = %name, "detaching: VolumeAttachment deleted"),
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => {
                    first_error.get_or_insert(Error::Kube(e));
                }
            }
        }
        self.report_multi_attach(&plan.multi_attach_errors, &pods);
        {
            // Forget announcements of volumes no longer attached, so that a re-attach is told.
            let mut announced = self.announced.lock().unwrap_or_else(|e| e.into_inner());
            announced.retain(|(node, unique)| plan.volumes_attached.get(node).is_some_and(|l| l.iter().any(|a| &a.name == unique)));
        }
        let nodes_api: Api<Node> = Api::all(self.client.clone());
        for n in &nodes {
            let Some(name) = n.metadata.name.as_deref() else { continue };
            let want = plan.volumes_attached.get(name).cloned().unwrap_or_default();
            let have = n.status.as_ref().and_then(|s| s.volumes_attached.clone()).unwrap_or_default();
            if want == have {
                continue;
            }
            // The node status updater's patch: the whole list (null when empty).
            let value = if want.is_empty() { serde_json::Value::Null } else { json!(want) };
            match nodes_api.patch_status(name, &PatchParams::default(), &Patch::Merge(&json!({"status": {"volumesAttached": value}}))).await {
                Ok(_) => {
                    let before: BTreeSet<&str> = have.iter().map(|a| a.name.as_str()).collect();
                    for added in want.iter().filter(|a| !before.contains(a.name.as_str())) {
                        self.report_attached(name, &added.name, &desired, &pods);
                    }
                }
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => {
                    first_error.get_or_insert(Error::Kube(e));
                }
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// `SuccessfulAttachVolume` on the pods of the node using the volume.
    fn report_attached(&self, node: &str, unique: &str, desired: &BTreeMap<String, DesiredVolume>, pods: &[Arc<Pod>]) {
        if !self.announced.lock().unwrap_or_else(|e| e.into_inner()).insert((node.to_string(), unique.to_string())) {
            return;
        }
        for d in desired.values().filter(|d| d.node == node && d.unique_name == unique) {
            for (ns, name) in &d.pods {
                if let Some(pod) = find_pod(pods, ns, name) {
                    self.recorder.event(pod, client::record::NORMAL, "SuccessfulAttachVolume", format!("AttachVolume.Attach succeeded for volume {:?} ", d.pv_name));
                }
            }
        }
    }

    /// `FailedAttachVolume`, once per pod and message.
    fn report_multi_attach(&self, errors: &[((String, String), String)], pods: &[Arc<Pod>]) {
        let mut reported = self.reported.lock().unwrap_or_else(|e| e.into_inner());
        let current: HashSet<((String, String), String)> = errors.iter().cloned().collect();
        // Forget what no longer applies, so that a recurrence is told again.
        reported.retain(|r| current.contains(r));
        for e in errors {
            if reported.insert(e.clone())
                && let Some(pod) = find_pod(pods, &e.0.0, &e.0.1)
            {
                self.recorder.event(pod, client::record::WARNING, "FailedAttachVolume", e.1.clone());
            }
        }
    }
}

fn find_pod(pods: &[Arc<Pod>], ns: &str, name: &str) -> Option<ObjectReference> {
    pods.iter().find(|p| p.metadata.namespace.as_deref() == Some(ns) && p.metadata.name.as_deref() == Some(name)).map(|p| client::record::pod_reference(p))
}

/// Runs one informer's stream, calling `changed` for every object it applies or deletes.
async fn drive<K>(what: &'static str, stream: impl Stream<Item = watcher::Result<watcher::Event<K>>>, changed: impl Fn()) {
    let mut stream = std::pin::pin!(stream.default_backoff());
    while let Some(ev) = stream.next().await {
        match ev {
            Ok(watcher::Event::Apply(_) | watcher::Event::Delete(_) | watcher::Event::InitDone) => changed(),
            Ok(_) => {}
            Err(e) => tracing::warn!(target: TARGET, resource = what, error = %e, "watch failed; retrying"),
        }
    }
}
