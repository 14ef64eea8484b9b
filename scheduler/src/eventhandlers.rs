//! Mirrors kube-scheduler's eventhandlers.go: what the scheduler does with each change the pod and
//! node watches report.
//!
//! - An **unassigned** pod this scheduler is responsible for goes into the queue (or is updated or
//!   removed there).
//! - An **assigned** pod goes into the cache (confirming an assumption when the scheduler bound
//!   it); its deletion frees room, so unschedulable pods waiting for that are moved back.
//! - A **node** goes into the cache; the kind of change (added, labels, taints, allocatable,
//!   cordon) decides which unschedulable pods move back.
//!
//! Watches (kube's `watcher`, a list then a watch, relisting after errors and 410s) report
//! everything again after a relist; objects gone meanwhile are found by comparing with what the
//! relist returned.

use std::collections::HashSet;
use std::sync::Arc;

use api::pod::{is_pod_terminal, uid};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::watch;

use crate::framework::{ClusterEvent, PodInfo};
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
