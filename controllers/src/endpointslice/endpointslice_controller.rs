//! Mirrors pkg/controller/endpointslice/endpointslice_controller.go: the EndpointSlice
//! controller. It keeps, for each Service with a selector, the `discovery.k8s.io/v1`
//! EndpointSlices that list its pods — what kube-proxy and cluster DNS read.
//!
//! Events feed a work queue of Service keys ([`EndpointSliceController::run`]):
//! - a Service added, changed or deleted queues itself;
//! - a pod added, changed or deleted queues every Service whose selector matches it, before or
//!   after the change (its labels may have moved it from one Service to another);
//! - a slice managed by this controller queues its Service when someone else changed or deleted
//!   it (the controller's own writes are recognised by the [`EndpointSliceTracker`]), so a slice
//!   edited or deleted by hand is put back.
//!
//! One sync ([`EndpointSliceController::sync_service`]):
//! 1. Read the Service from the cache; gone, forget it (its slices, which it owns, go with it
//!    through the garbage collector). An ExternalName Service or one without a selector is left
//!    alone: the slices of the latter are its user's.
//! 2. Its pods (the selector's, in its namespace) and its slices (labelled with its name and
//!    managed by this controller) from the caches; if the slice cache has not caught up with
//!    this controller's last writes, retry later instead.
//! 3. Decide what to create, update and delete ([`super::reconciler::reconcile`], pure).
//! 4. Create (unless the Service is being deleted), then update (each with the resourceVersion
//!    read, so a concurrent change makes it retry), then delete — in this order, so that no
//!    endpoint is missing in between.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::{Node, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, DeleteParams, PostParams};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};

use super::endpointslice_tracker::EndpointSliceTracker;
use super::reconciler::reconcile;
use super::utils::{LABEL_SERVICE_NAME, LABEL_TOPOLOGY_ZONE, managed_by_controller, service_key_of_slice};
use crate::endpoint::controller_utils::{get_pod_service_memberships, managed_selector, selector_matches, service_key};
use crate::error::{Error, Result};
use crate::workqueue::WorkQueue;

const TARGET: &str = "controllers::endpointslice";
/// Workers syncing Services at once (`--concurrent-service-endpoint-syncs`).
pub const CONCURRENT_SERVICE_ENDPOINT_SYNCS: usize = 5;
/// `--max-endpoints-per-slice`'s default.
pub const DEFAULT_MAX_ENDPOINTS_PER_SLICE: usize = 100;

pub struct EndpointSliceController {
    /// Lists and watches for the caches: the controller manager's own client (see
    /// [`crate::controller_context`]).
    informers: kube::Client,
    /// Everything else: the controller's own client.
    client: kube::Client,
    max_endpoints_per_slice: usize,
    tracker: EndpointSliceTracker,
}

/// How a sync ended when it did not fail.
enum Synced {
    Done,
    /// The slice cache lags behind this controller's writes: try again shortly.
    Stale,
}

impl EndpointSliceController {
    pub fn new(informers: kube::Client, client: kube::Client, max_endpoints_per_slice: usize) -> Self {
        Self { informers, client, max_endpoints_per_slice: max_endpoints_per_slice.max(1), tracker: EndpointSliceTracker::default() }
    }

    /// Watches Services, pods, EndpointSlices and nodes into caches;
    /// [`CONCURRENT_SERVICE_ENDPOINT_SYNCS`] workers sync the Services their events queue.
    pub async fn run(self) -> Result<()> {
        let (services, services_w) = reflector::store::<Service>();
        let (pods, pods_w) = reflector::store::<Pod>();
        let (slices, slices_w) = reflector::store::<EndpointSlice>();
        let (nodes, nodes_w) = reflector::store::<Node>();
        let queue: WorkQueue<String> = WorkQueue::new();
        let informer_client = self.informers.clone();
        // The labels each pod (by namespace/name) was last seen with: an update's old object.
        let seen: Mutex<HashMap<String, BTreeMap<String, String>>> = Mutex::new(HashMap::new());
        let informers = async {
            let on_service = |svc: &Service, deleted: bool| {
                let k = service_key(svc);
                if deleted {
                    self.tracker.delete_service(&k);
                }
                queue.add(k);
            };
            let on_pod = |pod: &Pod, deleted: bool| pod_changed(pod, deleted, &services, &queue, &seen);
            let on_slice = |slice: &EndpointSlice, deleted: bool| {
                if !managed_by_controller(slice) {
                    return;
                }
                if let Some(k) = service_key_of_slice(slice)
                    && self.tracker.observe(&k, slice, deleted)
                {
                    queue.add(k);
                }
            };
            tokio::join!(
                drive("services", reflector::reflector(services_w, watcher(Api::<Service>::all(informer_client.clone()), watcher::Config::default())), on_service),
                drive("pods", reflector::reflector(pods_w, watcher(Api::<Pod>::all(informer_client.clone()), watcher::Config::default())), on_pod),
                drive("endpointslices", reflector::reflector(slices_w, watcher(Api::<EndpointSlice>::all(informer_client.clone()), watcher::Config::default())), on_slice),
                drive("nodes", reflector::reflector(nodes_w, watcher(Api::<Node>::all(informer_client.clone()), watcher::Config::default())), |_: &Node, _| {}),
            );
        };
        let work = async {
            for store in [services.wait_until_ready().await, pods.wait_until_ready().await, slices.wait_until_ready().await, nodes.wait_until_ready().await] {
                if store.is_err() {
                    return;
                }
            }
            tracing::info!(target: TARGET, workers = CONCURRENT_SERVICE_ENDPOINT_SYNCS, max_endpoints_per_slice = self.max_endpoints_per_slice, "caches synced; syncing Services");
            let worker = || async {
                while let Some(k) = queue.get().await {
                    match self.sync_service(&services, &pods, &slices, &nodes, &k).await {
                        Ok(Synced::Done) => queue.forget(&k),
                        Ok(Synced::Stale) => {
                            tracing::debug!(target: TARGET, service = %k, "slice cache behind this controller's writes; retrying");
                            queue.add_rate_limited(k.clone());
                        }
                        Err(e) => {
                            tracing::warn!(target: TARGET, service = %k, error = %e, "sync failed; will retry");
                            queue.add_rate_limited(k.clone());
                        }
                    }
                    queue.done(&k);
                }
            };
            futures::future::join_all((0..CONCURRENT_SERVICE_ENDPOINT_SYNCS).map(|_| worker())).await;
        };
        tokio::select! {
            () = informers => {}
            () = work => {}
        }
        Ok(())
    }

    /// Steps 1–4 for one Service.
    async fn sync_service(&self, services: &Store<Service>, pods: &Store<Pod>, slices: &Store<EndpointSlice>, nodes: &Store<Node>, k: &str) -> Result<Synced> {
        // Step 1.
        let (ns, name) = k.split_once('/').unwrap_or(("", k));
        let Some(svc) = services.get(&ObjectRef::new(name).within(ns)) else {
            self.tracker.delete_service(k);
            return Ok(Synced::Done);
        };
        let Some(selector) = managed_selector(&svc) else { return Ok(Synced::Done) };
        // Step 2.
        let mine: Vec<Arc<Pod>> = pods
            .state()
            .into_iter()
            .filter(|p| p.metadata.namespace.as_deref() == Some(ns) && selector_matches(selector, p.metadata.labels.as_ref().unwrap_or(&BTreeMap::new())))
            .collect();
        let existing: Vec<EndpointSlice> = slices
            .state()
            .into_iter()
            .filter(|s| {
                s.metadata.namespace.as_deref() == Some(ns)
                    && managed_by_controller(s)
                    && s.metadata.labels.as_ref().and_then(|l| l.get(LABEL_SERVICE_NAME)).map(String::as_str) == Some(name)
            })
            .map(|s| (*s).clone())
            .collect();
        if self.tracker.stale(k, &existing) {
            return Ok(Synced::Stale);
        }
        let node_zones: BTreeMap<String, String> = nodes
            .state()
            .iter()
            .filter_map(|n| Some((n.metadata.name.clone()?, n.metadata.labels.as_ref()?.get(LABEL_TOPOLOGY_ZONE)?.clone())))
            .collect();
        // Step 3.
        let pod_refs: Vec<&Pod> = mine.iter().map(|p| p.as_ref()).collect();
        let plan = reconcile(&svc, &pod_refs, &existing, &node_zones, self.max_endpoints_per_slice);
        if plan.is_empty() {
            return Ok(Synced::Done);
        }
        tracing::info!(target: TARGET, service = %k, pods = mine.len(), create = plan.to_create.len(), update = plan.to_update.len(), delete = plan.to_delete.len(), "reconciling EndpointSlices");
        // Step 4.
        let api: Api<EndpointSlice> = Api::namespaced(self.client.clone(), ns);
        if svc.metadata.deletion_timestamp.is_none() {
            for slice in &plan.to_create {
                let created = api.create(&PostParams::default(), slice).await.map_err(Error::Kube)?;
                self.tracker.update(k, &created);
            }
        }
        for slice in &plan.to_update {
            let slice_name = slice.metadata.name.clone().unwrap_or_default();
            let updated = api.replace(&slice_name, &PostParams::default(), slice).await.map_err(Error::Kube)?;
            self.tracker.update(k, &updated);
        }
        for slice in &plan.to_delete {
            let slice_name = slice.metadata.name.clone().unwrap_or_default();
            let params = DeleteParams { preconditions: slice.metadata.uid.clone().map(|uid| kube::api::Preconditions { uid: Some(uid), resource_version: None }), ..DeleteParams::default() };
            match api.delete(&slice_name, &params).await {
                Ok(_) => self.tracker.expect_deletion(k, slice),
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => return Err(Error::Kube(e)),
            }
        }
        Ok(Synced::Done)
    }
}

/// The pod event handlers (addPod, updatePod, deletePod): the Services that select the pod now
/// or selected it before.
fn pod_changed(pod: &Pod, deleted: bool, services: &Store<Service>, queue: &WorkQueue<String>, seen: &Mutex<HashMap<String, BTreeMap<String, String>>>) {
    let pod_key = crate::endpoint::controller_utils::key(pod.metadata.namespace.as_deref().unwrap_or_default(), pod.metadata.name.as_deref().unwrap_or_default());
    let labels = pod.metadata.labels.clone().unwrap_or_default();
    let before = {
        let mut seen = seen.lock().unwrap_or_else(|e| e.into_inner());
        if deleted { seen.remove(&pod_key) } else { seen.insert(pod_key, labels.clone()) }
    };
    let all = services.state();
    let mut keys: BTreeSet<String> = get_pod_service_memberships(all.iter().map(|s| s.as_ref()), pod);
    if let Some(old) = before.filter(|old| *old != labels) {
        let mut old_pod = pod.clone();
        old_pod.metadata.labels = Some(old);
        keys.extend(get_pod_service_memberships(all.iter().map(|s| s.as_ref()), &old_pod));
    }
    for k in keys {
        queue.add(k);
    }
}

/// Runs one informer's stream into `on_change` (the object, and whether it was deleted); the
/// watcher retries by itself (with backoff), errors are logged.
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
