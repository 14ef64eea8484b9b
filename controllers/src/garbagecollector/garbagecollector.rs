//! Mirrors pkg/controller/garbagecollector/garbagecollector.go, graph_builder.go and
//! operations.go: the garbage collector. It deletes objects whose owners are all gone, takes
//! the ownerReferences off the dependents of an owner deleted with `propagationPolicy: Orphan`,
//! and lets an owner deleted in the foreground go once its blocking dependents are gone.
//!
//! 1. **Discover** every resource the API server serves that can be listed, watched and deleted,
//!    and watch them all ([`GarbageCollector::run`]; the graph builder). Each event updates the
//!    [`Graph`] and queues the uids it concerns.
//! 2. **attemptToDelete** ([`GarbageCollector::attempt_to_delete`]): a virtual node (an owner
//!    only referenced) is verified by a live GET and forgotten if absent; a node being deleted in
//!    the foreground loses its `foregroundDeletion` finalizer once nothing blocks it, else its
//!    blocking dependents are queued; any other node's owners are classified by live reads —
//!    solid, dangling, waiting for dependents — and the object is kept (dangling references
//!    patched away) or deleted ([`super::graph::decide`]).
//! 3. **attemptToOrphan** ([`GarbageCollector::attempt_to_orphan`]): the owner's reference is
//!    removed from each dependent, then the `orphan` finalizer from the owner, which the API
//!    server then deletes.
//!
//! Workers start once every watch has listed, so the graph is whole before anything is judged.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PropagationPolicy};
use kube::discovery::{ApiResource, Discovery, Scope, verbs};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::json;

use super::graph::{Graph, Identity, OwnerState, Verdict, Work, decide};
use crate::error::{Error, Result};
use crate::workqueue::WorkQueue;

const TARGET: &str = "controllers::garbagecollector";
/// Workers for attemptToDelete and attemptToOrphan each (`--concurrent-gc-syncs`, 20 by default).
pub const CONCURRENT_GC_SYNCS: usize = 20;

/// The resources served, by (group, kind), with their scope.
#[derive(Clone, Default)]
struct Resources {
    by_kind: HashMap<(String, String), (ApiResource, bool)>,
}

impl Resources {
    fn find(&self, api_version: &str, kind: &str) -> Option<&(ApiResource, bool)> {
        let group = api_version.split_once('/').map_or("", |(g, _)| g);
        self.by_kind.get(&(group.to_string(), kind.to_string()))
    }
}

/// The two kinds of work (attemptToDelete, attemptToOrphan).
#[derive(Clone, Copy, Debug)]
enum Step {
    Delete,
    Orphan,
}

pub struct GarbageCollector {
    /// Lists and watches for the caches: the controller manager's own client (see
    /// [`crate::controller_context`]).
    informers: kube::Client,
    /// Everything else: the controller's own client.
    client: kube::Client,
    graph: Mutex<Graph>,
    resources: Mutex<Resources>,
    delete_queue: WorkQueue<String>,
    orphan_queue: WorkQueue<String>,
}

impl GarbageCollector {
    pub fn new(informers: kube::Client, client: kube::Client) -> Self {
        Self { informers, client, graph: Mutex::new(Graph::default()), resources: Mutex::new(Resources::default()), delete_queue: WorkQueue::new(), orphan_queue: WorkQueue::new() }
    }

    fn graph(&self) -> std::sync::MutexGuard<'_, Graph> {
        self.graph.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn resources(&self) -> Resources {
        self.resources.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn queue(&self, work: Work) {
        for uid in work.delete {
            self.delete_queue.add(uid);
        }
        for uid in work.orphan {
            self.orphan_queue.add(uid);
        }
    }

    /// Steps 1–3 until the process ends.
    pub async fn run(self) -> Result<()> {
        // Step 1: discovery.
        // The API server may still be starting: discovery is retried rather than failing the
        // controller manager.
        let discovery = loop {
            match Discovery::new(self.client.clone()).run().await {
                Ok(d) => break d,
                Err(e) => {
                    tracing::warn!(target: TARGET, error = %e, "discovery failed; retrying");
                    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                }
            }
        };
        let mut watched = Vec::new();
        {
            let mut res = self.resources.lock().unwrap_or_else(|e| e.into_inner());
            for group in discovery.groups() {
                for (ar, caps) in group.recommended_resources() {
                    let namespaced = caps.scope == Scope::Namespaced;
                    res.by_kind.insert((ar.group.clone(), ar.kind.clone()), (ar.clone(), namespaced));
                    if caps.supports_operation(verbs::LIST) && caps.supports_operation(verbs::WATCH) && caps.supports_operation(verbs::DELETE) && ar.plural != "events" {
                        watched.push(ar);
                    }
                }
            }
        }
        let synced = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let total = watched.len();
        let ready = tokio::sync::Notify::new();
        let informers = futures::future::join_all(watched.into_iter().map(|ar| {
            let (synced, ready) = (synced.clone(), &ready);
            self.watch(ar, move || {
                if synced.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1 == total {
                    ready.notify_one();
                }
            })
        }));
        let work = async {
            if total > 0 {
                ready.notified().await;
            }
            tracing::info!(target: TARGET, resources = total, objects = self.graph().nodes.len(), "graph synced; collecting garbage");
            let deleters = (0..CONCURRENT_GC_SYNCS).map(|_| self.worker(Step::Delete));
            let orphaners = (0..CONCURRENT_GC_SYNCS).map(|_| self.worker(Step::Orphan));
            futures::future::join(futures::future::join_all(deleters), futures::future::join_all(orphaners)).await;
        };
        tokio::select! {
            _ = informers => {}
            () = work => {}
        }
        Ok(())
    }

    /// One worker of a step's queue: each uid attempted, retried with backoff when it fails.
    async fn worker(&self, step: Step) {
        let queue = match step {
            Step::Delete => &self.delete_queue,
            Step::Orphan => &self.orphan_queue,
        };
        while let Some(uid) = queue.get().await {
            let result = match step {
                Step::Delete => self.attempt_to_delete(&uid).await,
                Step::Orphan => self.attempt_to_orphan(&uid).await,
            };
            match result {
                Ok(()) => queue.forget(&uid),
                Err(e) => {
                    tracing::warn!(target: TARGET, uid = %uid, error = %e, step = ?step, "failed; will retry");
                    queue.add_rate_limited(uid.clone());
                }
            }
            queue.done(&uid);
        }
    }

    /// One resource's watch into the graph; `on_synced` once its first list is in.
    async fn watch(&self, ar: ApiResource, on_synced: impl Fn()) {
        let api: Api<DynamicObject> = Api::all_with(self.informers.clone(), &ar);
        let mut stream = std::pin::pin!(watcher(api, watcher::Config::default()).default_backoff());
        let mut synced = false;
        let resources = self.resources();
        let namespaced_owner = |o: &OwnerReference| resources.find(&o.api_version, &o.kind).is_none_or(|(_, ns)| *ns);
        while let Some(ev) = stream.next().await {
            match ev {
                Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) => {
                    let meta = &o.metadata;
                    let identity = Identity {
                        api_version: ar.api_version.clone(),
                        kind: ar.kind.clone(),
                        namespace: meta.namespace.clone().unwrap_or_default(),
                        name: meta.name.clone().unwrap_or_default(),
                        uid: meta.uid.clone().unwrap_or_default(),
                    };
                    let owners = meta.owner_references.clone().unwrap_or_default();
                    let finalizers = meta.finalizers.clone().unwrap_or_default();
                    // Objects that own nothing and are owned by nothing stay out of the graph
                    // until something refers to them.
                    let known = self.graph().nodes.contains_key(&identity.uid);
                    if owners.is_empty() && finalizers.iter().all(|f| f != "orphan" && f != "foregroundDeletion") && !known {
                        continue;
                    }
                    let work = self.graph().observe(identity, owners, &finalizers, meta.deletion_timestamp.is_some(), namespaced_owner);
                    self.queue(work);
                }
                Ok(watcher::Event::Delete(o)) => {
                    let work = self.graph().forget(o.metadata.uid.as_deref().unwrap_or_default());
                    self.queue(work);
                }
                Ok(watcher::Event::InitDone) if !synced => {
                    synced = true;
                    on_synced();
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(target: TARGET, resource = %ar.plural, error = %e, "watch failed; retrying"),
            }
        }
    }

    fn api_for(&self, identity: &Identity) -> Option<Api<DynamicObject>> {
        let (ar, namespaced) = self.resources().find(&identity.api_version, &identity.kind).cloned()?;
        Some(if namespaced { Api::namespaced_with(self.client.clone(), &identity.namespace, &ar) } else { Api::all_with(self.client.clone(), &ar) })
    }

    /// The object as the API server has it now, if it is the one with this uid.
    async fn get_live(&self, identity: &Identity) -> Result<Option<DynamicObject>> {
        let Some(api) = self.api_for(identity) else { return Ok(None) };
        match api.get_opt(&identity.name).await.map_err(Error::Kube)? {
            Some(o) if o.metadata.uid.as_deref() == Some(identity.uid.as_str()) => Ok(Some(o)),
            _ => Ok(None),
        }
    }

    /// Step 2.
    async fn attempt_to_delete(&self, uid: &str) -> Result<()> {
        let Some(node) = self.graph().nodes.get(uid).cloned() else { return Ok(()) };
        let Some(latest) = self.get_live(&node.identity).await? else {
            // Absent (a virtual node never seen, or one whose deletion the watch has not shown
            // yet): it leaves the graph; its dependents are judged again, and a foreground owner
            // waiting for it looks again.
            let work = self.graph().remove_absent(uid);
            self.queue(work);
            return Ok(());
        };
        let finalizers = latest.metadata.finalizers.clone().unwrap_or_default();
        let being_deleted = latest.metadata.deletion_timestamp.is_some();
        if being_deleted && !finalizers.iter().any(|f| f == "foregroundDeletion") {
            return Ok(()); // going already
        }
        if being_deleted {
            // A foreground owner: done when nothing blocks it any more.
            let blocking = self.graph().blocking_dependents(uid);
            if blocking.is_empty() {
                return self.remove_finalizer(&node.identity, &latest, "foregroundDeletion").await;
            }
            for d in blocking {
                self.delete_queue.add(d);
            }
            return Ok(());
        }
        // Classify the owners by live reads.
        let owners = latest.metadata.owner_references.clone().unwrap_or_default();
        if owners.is_empty() {
            return Ok(());
        }
        let mut states = Vec::new();
        for o in &owners {
            let identity = Identity {
                api_version: o.api_version.clone(),
                kind: o.kind.clone(),
                namespace: match self.resources().find(&o.api_version, &o.kind) {
                    Some((_, false)) => String::new(),
                    _ => node.identity.namespace.clone(),
                },
                name: o.name.clone(),
                uid: o.uid.clone(),
            };
            let state = match self.get_live(&identity).await? {
                None => OwnerState::Dangling,
                Some(owner) if owner.metadata.deletion_timestamp.is_some() && owner.metadata.finalizers.iter().flatten().any(|f| f == "foregroundDeletion") => {
                    OwnerState::WaitingForDependentsDeletion
                }
                Some(_) => OwnerState::Solid,
            };
            states.push((o.uid.clone(), state));
        }
        let has_dependents = !node.dependents.is_empty();
        match decide(&states, has_dependents, &finalizers) {
            Verdict::Keep { drop_references } if drop_references.is_empty() => Ok(()),
            Verdict::Keep { drop_references } => self.remove_references(&node.identity, &latest, &drop_references).await,
            Verdict::Delete { policy } => {
                let Some(api) = self.api_for(&node.identity) else { return Ok(()) };
                let propagation = match policy {
                    "Orphan" => PropagationPolicy::Orphan,
                    "Foreground" => PropagationPolicy::Foreground,
                    _ => PropagationPolicy::Background,
                };
                let params = DeleteParams {
                    propagation_policy: Some(propagation),
                    preconditions: Some(kube::api::Preconditions { uid: Some(uid.to_string()), resource_version: None }),
                    ..DeleteParams::default()
                };
                tracing::info!(target: TARGET, object = %format!("{}/{} {}/{}", node.identity.api_version, node.identity.kind, node.identity.namespace, node.identity.name), uid, policy, "deleting object whose owners are gone");
                match api.delete(&node.identity.name, &params).await {
                    Ok(_) => Ok(()),
                    Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => Ok(()),
                    Err(e) => Err(Error::Kube(e)),
                }
            }
        }
    }

    /// Step 3.
    async fn attempt_to_orphan(&self, uid: &str) -> Result<()> {
        let Some(node) = self.graph().nodes.get(uid).cloned() else { return Ok(()) };
        let Some(latest) = self.get_live(&node.identity).await? else { return Ok(()) };
        if !latest.metadata.finalizers.iter().flatten().any(|f| f == "orphan") {
            return Ok(());
        }
        let dependents: Vec<_> = {
            let g = self.graph();
            node.dependents.iter().filter_map(|d| g.nodes.get(d).map(|n| n.identity.clone())).collect()
        };
        for d in dependents {
            if let Some(dep) = self.get_live(&d).await? {
                self.remove_references(&d, &dep, &[uid.to_string()]).await?;
            }
        }
        tracing::info!(target: TARGET, object = %format!("{}/{} {}/{}", node.identity.api_version, node.identity.kind, node.identity.namespace, node.identity.name), "dependents orphaned");
        self.remove_finalizer(&node.identity, &latest, "orphan").await
    }

    /// A JSON patch that removes the owner references with these uids (each tested first).
    async fn remove_references(&self, identity: &Identity, obj: &DynamicObject, uids: &[String]) -> Result<()> {
        let refs = obj.metadata.owner_references.clone().unwrap_or_default();
        let mut ops = Vec::new();
        for (i, r) in refs.iter().enumerate().rev() {
            if uids.contains(&r.uid) {
                ops.push(json!({"op": "test", "path": format!("/metadata/ownerReferences/{i}/uid"), "value": r.uid}));
                ops.push(json!({"op": "remove", "path": format!("/metadata/ownerReferences/{i}")}));
            }
        }
        // The last reference gone: the field goes too, as Kubernetes shows an empty list (omitted).
        if !ops.is_empty() && refs.iter().all(|r| uids.contains(&r.uid)) {
            ops.push(json!({"op": "remove", "path": "/metadata/ownerReferences"}));
        }
        self.json_patch(identity, ops).await
    }

    async fn remove_finalizer(&self, identity: &Identity, obj: &DynamicObject, finalizer: &str) -> Result<()> {
        let Some(i) = obj.metadata.finalizers.iter().flatten().position(|f| f == finalizer) else { return Ok(()) };
        let ops = vec![json!({"op": "test", "path": format!("/metadata/finalizers/{i}"), "value": finalizer}), json!({"op": "remove", "path": format!("/metadata/finalizers/{i}")})];
        self.json_patch(identity, ops).await
    }

    async fn json_patch(&self, identity: &Identity, ops: Vec<serde_json::Value>) -> Result<()> {
        if ops.is_empty() {
            return Ok(());
        }
        let Some(api) = self.api_for(identity) else { return Ok(()) };
        let patch: json_patch::Patch = serde_json::from_value(json!(ops)).map_err(|e| Error::Kube(kube::Error::SerdeError(e)))?;
        match api.patch(&identity.name, &PatchParams::default(), &Patch::<()>::Json(patch)).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            // Changed meanwhile (a test failed): its event brings it back.
            Err(kube::Error::Api(s)) if s.code == 422 || s.code == 409 => Err(Error::Kube(kube::Error::Api(s))),
            Err(e) => Err(Error::Kube(e)),
        }
    }
}
