//! Mirrors kube-scheduler's eventhandlers.go: what the scheduler does with each change the pod and
//! node watches report.
//!
//! - An **unassigned** pod this scheduler is responsible for goes into the queue (or is updated or
//!   removed there).
//! - An **assigned** pod goes into the cache (confirming an assumption when the scheduler bound
//!   it); its deletion frees room, so unschedulable pods waiting for that are moved back.
//! - A **node** goes into the cache; the kind of change (added, labels, taints, allocatable,
//!   cordon) decides which unschedulable pods move back.
//! - A **PersistentVolume, PersistentVolumeClaim, StorageClass or CSINode** goes into its
//!   [`Informers`](crate::informers::Informers) lister; an add or update moves back the pods the
//!   volume plugins rejected (the queue has no per-pod queueing hints, so every such pod moves,
//!   not only those using the object). PV and claim changes also wake VolumeBinding's PreBind.
//!
//! Watches (kube's `watcher`, a list then a watch, relisting after errors and 410s) report
//! everything again after a relist; objects gone meanwhile are found by comparing with what the
//! relist returned.

use std::collections::HashSet;
use std::sync::Arc;

use api::pod::{is_pod_terminal, uid};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::{CSINode, StorageClass};
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::watch;

use crate::framework::{ClusterEvent, PodInfo};
use crate::informers::{self, Change};
use crate::scheduler::Scheduler;

fn assigned(pod: &Pod) -> bool {
    pod.spec.as_ref().and_then(|s| s.node_name.as_deref()).is_some_and(|n| !n.is_empty())
}

impl Scheduler {
    fn move_on(&self, event: ClusterEvent) {
        self.queue.move_all_to_active_or_backoff(&self.framework.plugins_interested_in(event));
    }

    pub fn on_pod(&self, pod: Pod) {
        let pod = Arc::new(pod);
        let id = uid(&pod).to_string();
        if assigned(&pod) {
            self.queue.delete(&id);
            if is_pod_terminal(&pod) {
                // A finished pod holds no resources any more.
                self.on_pod_delete(&pod);
                return;
            }
            let known = {
                let mut c = self.cache.lock().expect("cache lock");
                let known = c.contains_pod(&id) && !c.is_assumed(&id);
                c.add_or_update_pod(pod);
                known
            };
            self.move_on(if known { ClusterEvent::AssignedPodUpdate } else { ClusterEvent::AssignedPodAdd });
        } else if self.responsible_for(&pod) && pod.metadata.deletion_timestamp.is_none() && !is_pod_terminal(&pod) {
            if self.cache.lock().expect("cache lock").is_assumed(&id) {
                return; // scheduled already; its binding is on the way
            }
            self.queue.update(Arc::new(PodInfo::new(pod)));
        } else {
            self.queue.delete(&id);
        }
    }

    pub fn on_pod_delete(&self, pod: &Pod) {
        let id = uid(pod);
        self.queue.delete(id);
        let removed = {
            let mut cache = self.cache.lock().expect("cache lock");
            let known = assigned(pod) || cache.contains_pod(id);
            if known {
                cache.remove_pod(id);
            }
            known
        };
        if removed {
            self.move_on(ClusterEvent::AssignedPodDelete);
        }
        // A binding cycle waiting in PreBind for this pod's volumes stops waiting.
        self.pod_deletions.send_modify(|n| *n = n.wrapping_add(1));
    }

    pub fn on_node(&self, node: Node) {
        let events = self.cache.lock().expect("cache lock").upsert_node(Arc::new(node));
        for e in events {
            self.move_on(e);
        }
    }

    pub fn on_node_delete(&self, name: &str) {
        self.cache.lock().expect("cache lock").remove_node(name);
    }

    /// The queue events a storage object's change stands for: (on add, on update). Deletions move
    /// nothing (kube-scheduler registers none for these kinds).
    fn on_storage_change<K>(&self, change: &Change<'_, K>, events: (ClusterEvent, ClusterEvent)) {
        match change {
            Change::Add(_) => self.move_on(events.0),
            Change::Update { .. } => self.move_on(events.1),
            Change::Delete(_) => {}
        }
    }

    /// Watches PersistentVolumes into the informers until the stream ends.
    pub async fn watch_persistent_volumes(self: Arc<Self>, client: kube::Client, synced: watch::Sender<bool>) {
        let lister = self.informers.persistent_volumes.clone();
        informers::run(Api::<PersistentVolume>::all(client), lister, synced, |c| {
            self.on_storage_change(&c, (ClusterEvent::PersistentVolumeAdd, ClusterEvent::PersistentVolumeUpdate));
            self.informers.notify_volume_change();
        })
        .await
    }

    /// Watches PersistentVolumeClaims in every namespace into the informers.
    pub async fn watch_persistent_volume_claims(self: Arc<Self>, client: kube::Client, synced: watch::Sender<bool>) {
        let lister = self.informers.persistent_volume_claims.clone();
        informers::run(Api::<PersistentVolumeClaim>::all(client), lister, synced, |c| {
            self.on_storage_change(&c, (ClusterEvent::PersistentVolumeClaimAdd, ClusterEvent::PersistentVolumeClaimUpdate));
            self.informers.notify_volume_change();
        })
        .await
    }

    /// Watches StorageClasses into the informers.
    pub async fn watch_storage_classes(self: Arc<Self>, client: kube::Client, synced: watch::Sender<bool>) {
        let lister = self.informers.storage_classes.clone();
        informers::run(Api::<StorageClass>::all(client), lister, synced, |c| {
            self.on_storage_change(&c, (ClusterEvent::StorageClassAdd, ClusterEvent::StorageClassUpdate))
        })
        .await
    }

    /// Watches CSINodes into the informers.
    pub async fn watch_csi_nodes(self: Arc<Self>, client: kube::Client, synced: watch::Sender<bool>) {
        let lister = self.informers.csi_nodes.clone();
        informers::run(Api::<CSINode>::all(client), lister, synced, |c| self.on_storage_change(&c, (ClusterEvent::CSINodeAdd, ClusterEvent::CSINodeUpdate)))
            .await
    }

    /// Watches pods in every namespace until the stream ends; marks `synced` after the first list.
    pub async fn watch_pods(self: Arc<Self>, client: kube::Client, synced: watch::Sender<bool>) {
        let api: Api<Pod> = Api::all(client);
        let mut stream = watcher(api, watcher::Config::default()).default_backoff().boxed();
        let mut known: HashSet<String> = HashSet::new();
        let mut relisted: HashSet<String> = HashSet::new();
        // What a delete needs of each pod the watch reported, for pods found gone by a relist.
        let mut by_uid: std::collections::HashMap<String, Pod> = std::collections::HashMap::new();
        let skeleton = |p: &Pod| {
            let mut s = Pod::default();
            s.metadata.uid = p.metadata.uid.clone();
            s.metadata.name = p.metadata.name.clone();
            s.metadata.namespace = p.metadata.namespace.clone();
            s.spec = Some(k8s_openapi::api::core::v1::PodSpec {
                node_name: p.spec.as_ref().and_then(|s| s.node_name.clone()),
                ..Default::default()
            });
            s
        };
        while let Some(ev) = stream.next().await {
            match ev {
                Ok(watcher::Event::Init) => relisted.clear(),
                Ok(watcher::Event::InitApply(p)) => {
                    relisted.insert(uid(&p).to_string());
                    by_uid.insert(uid(&p).to_string(), skeleton(&p));
                    self.on_pod(p);
                }
                Ok(watcher::Event::InitDone) => {
                    for gone in known.difference(&relisted).cloned().collect::<Vec<_>>() {
                        if let Some(p) = by_uid.remove(&gone) {
                            self.on_pod_delete(&p);
                        }
                    }
                    known = std::mem::take(&mut relisted);
                    let _ = synced.send(true);
                }
                Ok(watcher::Event::Apply(p)) => {
                    known.insert(uid(&p).to_string());
                    by_uid.insert(uid(&p).to_string(), skeleton(&p));
                    self.on_pod(p);
                }
                Ok(watcher::Event::Delete(p)) => {
                    known.remove(uid(&p));
                    by_uid.remove(uid(&p));
                    self.on_pod_delete(&p);
                }
                Err(e) => tracing::warn!(target: "scheduler::eventhandlers", "pod watch: {e}"),
            }
        }
    }

    /// Watches nodes until the stream ends; marks `synced` after the first list.
    pub async fn watch_nodes(self: Arc<Self>, client: kube::Client, synced: watch::Sender<bool>) {
        let api: Api<Node> = Api::all(client);
        let mut stream = watcher(api, watcher::Config::default()).default_backoff().boxed();
        let mut known: HashSet<String> = HashSet::new();
        let mut relisted: HashSet<String> = HashSet::new();
        let name = |n: &Node| n.metadata.name.clone().unwrap_or_default();
        while let Some(ev) = stream.next().await {
            match ev {
                Ok(watcher::Event::Init) => relisted.clear(),
                Ok(watcher::Event::InitApply(n)) => {
                    relisted.insert(name(&n));
                    self.on_node(n);
                }
                Ok(watcher::Event::InitDone) => {
                    for gone in known.difference(&relisted) {
                        self.on_node_delete(gone);
                    }
                    known = std::mem::take(&mut relisted);
                    let _ = synced.send(true);
                }
                Ok(watcher::Event::Apply(n)) => {
                    known.insert(name(&n));
                    self.on_node(n);
                }
                Ok(watcher::Event::Delete(n)) => {
                    known.remove(&name(&n));
                    self.on_node_delete(&name(&n));
                }
                Err(e) => tracing::warn!(target: "scheduler::eventhandlers", "node watch: {e}"),
            }
        }
    }
}
