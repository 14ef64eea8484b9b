//! Mirrors pkg/controller/endpoint/endpoints_controller.go: the Endpoints controller. It keeps,
//! for each Service with a selector, the v1 Endpoints object named as the Service — the legacy
//! list of its pods' addresses, ready (`addresses`) or not (`notReadyAddresses`), grouped in
//! subsets by the ports they serve.
//!
//! Events feed a work queue of Service keys ([`EndpointsController::run`]): a Service added,
//! changed or deleted queues itself; a pod queues the Services that select it, before or after
//! its change; an Endpoints object deleted queues its key (so it is made again if its Service
//! still wants it). Once the caches have synced, every Endpoints object is queued once
//! (checkLeftoverEndpoints): one whose Service went while the controller was away is deleted.
//!
//! One sync ([`EndpointsController::sync_service`]):
//! 1. Read the Service from the cache; gone (and gone in a fresh read too), delete its
//!    Endpoints. An ExternalName Service or one without a selector is left alone (the Endpoints
//!    of the latter are its user's).
//! 2. Compute the subsets from the pods its selector matches ([`compute_subsets`], pure): each
//!    pod with an IP of the Service's family that has not finished (and is not terminating,
//!    unless `publishNotReadyAddresses`), once per Service port its `targetPort` resolves on,
//!    Ready (or `publishNotReadyAddresses`) in `addresses`, else in `notReadyAddresses`;
//!    repacked so that addresses sharing the same ports share one subset.
//! 3. Compare with the Endpoints in the cache ([`desired_endpoints`], pure): subsets, labels (the
//!    Service's, plus `service.kubernetes.io/headless` for a headless one) and the over-capacity
//!    annotation. Equal: done. Otherwise write it — created, or replaced with the resourceVersion
//!    read (a concurrent change makes it retry) — with the last-change-trigger-time annotation
//!    and, beyond 1,000 addresses, truncated with `endpoints.kubernetes.io/over-capacity:
//!    truncated`.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::{EndpointAddress, EndpointPort, EndpointSubset, Endpoints, ObjectReference, Pod, Service, ServicePort};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, PostParams};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};

use super::controller_utils::{
    LABEL_HEADLESS, find_port, get_pod_service_memberships, is_headless, is_ipv6, key, managed_selector, pod_ips, selector_matches, service_key, should_pod_be_in_endpoints, should_set_hostname,
};
use super::trigger_time_tracker::TriggerTimeTracker;
use crate::error::{Error, Result};
use crate::workqueue::WorkQueue;

const TARGET: &str = "controllers::endpoint";
/// Workers syncing Services at once (`--concurrent-endpoint-syncs`).
pub const CONCURRENT_ENDPOINT_SYNCS: usize = 5;
/// The most addresses one Endpoints object holds (`maxCapacity`).
pub const MAX_CAPACITY: usize = 1000;
/// `v1.EndpointsOverCapacity` and its value.
pub const ANNOTATION_OVER_CAPACITY: &str = "endpoints.kubernetes.io/over-capacity";
pub const TRUNCATED: &str = "truncated";
/// `v1.EndpointsLastChangeTriggerTime`.
pub const ANNOTATION_LAST_CHANGE_TRIGGER_TIME: &str = "endpoints.kubernetes.io/last-change-trigger-time";
/// The annotation of the Endpoints objects old leader elections used as locks, which
/// checkLeftoverEndpoints leaves alone.
const ANNOTATION_LEADER: &str = "control-plane.alpha.kubernetes.io/leader";

pub struct EndpointsController {
    /// Lists and watches for the caches: the controller manager's own client (see
    /// [`crate::controller_context`]).
    informers: kube::Client,
    /// Everything else: the controller's own client.
    client: kube::Client,
    trigger_times: TriggerTimeTracker,
}

impl EndpointsController {
    pub fn new(informers: kube::Client, client: kube::Client) -> Self {
        Self { informers, client, trigger_times: TriggerTimeTracker::default() }
    }

    /// Watches Services, pods and Endpoints into caches; [`CONCURRENT_ENDPOINT_SYNCS`] workers
    /// sync the Services their events queue.
    pub async fn run(self) -> Result<()> {
        let (services, services_w) = reflector::store::<Service>();
        let (pods, pods_w) = reflector::store::<Pod>();
        let (endpoints, endpoints_w) = reflector::store::<Endpoints>();
        let queue: WorkQueue<String> = WorkQueue::new();
        let informer_client = self.informers.clone();
        // The labels each pod (by namespace/name) was last seen with: an update's old object.
        let seen: Mutex<HashMap<String, BTreeMap<String, String>>> = Mutex::new(HashMap::new());
        let informers = async {
            let on_service = |svc: &Service, _deleted: bool| queue.add(service_key(svc));
            let on_pod = |pod: &Pod, deleted: bool| pod_changed(pod, deleted, &services, &queue, &seen);
            let on_endpoints = |ep: &Endpoints, deleted: bool| {
                if deleted {
                    queue.add(key(ep.metadata.namespace.as_deref().unwrap_or_default(), ep.metadata.name.as_deref().unwrap_or_default()));
                }
            };
            tokio::join!(
                drive("services", reflector::reflector(services_w, watcher(Api::<Service>::all(informer_client.clone()), watcher::Config::default())), on_service),
                drive("pods", reflector::reflector(pods_w, watcher(Api::<Pod>::all(informer_client.clone()), watcher::Config::default())), on_pod),
                drive("endpoints", reflector::reflector(endpoints_w, watcher(Api::<Endpoints>::all(informer_client.clone()), watcher::Config::default())), on_endpoints),
            );
        };
        let work = async {
            for store in [services.wait_until_ready().await, pods.wait_until_ready().await, endpoints.wait_until_ready().await] {
                if store.is_err() {
                    return;
                }
            }
            // checkLeftoverEndpoints.
            for ep in endpoints.state() {
                if ep.metadata.annotations.as_ref().is_some_and(|a| a.contains_key(ANNOTATION_LEADER)) {
                    continue;
                }
                queue.add(key(ep.metadata.namespace.as_deref().unwrap_or_default(), ep.metadata.name.as_deref().unwrap_or_default()));
            }
            tracing::info!(target: TARGET, workers = CONCURRENT_ENDPOINT_SYNCS, "caches synced; syncing Services");
            let worker = || async {
                while let Some(k) = queue.get().await {
                    match self.sync_service(&services, &pods, &endpoints, &k).await {
                        Ok(()) => queue.forget(&k),
                        Err(e) => {
                            tracing::warn!(target: TARGET, service = %k, error = %e, "sync failed; will retry");
                            queue.add_rate_limited(k.clone());
                        }
                    }
                    queue.done(&k);
                }
            };
            futures::future::join_all((0..CONCURRENT_ENDPOINT_SYNCS).map(|_| worker())).await;
        };
        tokio::select! {
            () = informers => {}
            () = work => {}
        }
        Ok(())
    }

    /// Steps 1–3 for one Service.
    async fn sync_service(&self, services: &Store<Service>, pods: &Store<Pod>, endpoints: &Store<Endpoints>, k: &str) -> Result<()> {
        let (ns, name) = k.split_once('/').unwrap_or(("", k));
        let api: Api<Endpoints> = Api::namespaced(self.client.clone(), ns);
        // Step 1.
        let Some(svc) = services.get(&ObjectRef::new(name).within(ns)) else {
            self.trigger_times.delete_service(k);
            if endpoints.get(&ObjectRef::new(name).within(ns)).is_none() {
                return Ok(());
            }
            // A fresh read before deleting: a Service created while the caches listed (the API
            // server's own `kubernetes` one, at start) is not in the Service cache yet; its
            // event queues it again.
            let live: Api<Service> = Api::namespaced(self.client.clone(), ns);
            if live.get_opt(name).await.map_err(Error::Kube)?.is_some() {
                return Ok(());
            }
            tracing::info!(target: TARGET, service = %k, "Service gone; deleting its Endpoints");
            return match api.delete(name, &DeleteParams::default()).await {
                Ok(_) => Ok(()),
                Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
                Err(e) => Err(Error::Kube(e)),
            };
        };
        let Some(selector) = managed_selector(&svc) else { return Ok(()) };
        // Step 2.
        let mine: Vec<Arc<Pod>> = pods
            .state()
            .into_iter()
            .filter(|p| p.metadata.namespace.as_deref() == Some(ns) && selector_matches(selector, p.metadata.labels.as_ref().unwrap_or(&BTreeMap::new())))
            .collect();
        let pod_refs: Vec<&Pod> = mine.iter().map(|p| p.as_ref()).collect();
        let subsets = compute_subsets(&svc, &pod_refs);
        let trigger_time = self.trigger_times.compute(k, &svc, &pod_refs);
        // Step 3.
        let current = endpoints.get(&ObjectRef::new(name).within(ns));
        let Some(desired) = desired_endpoints(&svc, current.as_deref(), subsets, trigger_time) else { return Ok(()) };
        let addresses: usize = desired.subsets.iter().flatten().map(|s| s.addresses.as_ref().map_or(0, Vec::len)).sum();
        let not_ready: usize = desired.subsets.iter().flatten().map(|s| s.not_ready_addresses.as_ref().map_or(0, Vec::len)).sum();
        tracing::info!(target: TARGET, service = %k, ready = addresses, not_ready, create = current.is_none(), "writing Endpoints");
        match current {
            None => api.create(&PostParams::default(), &desired).await.map_err(Error::Kube)?,
            Some(_) => api.replace(name, &PostParams::default(), &desired).await.map_err(Error::Kube)?,
        };
        Ok(())
    }
}

/// podToEndpointAddressForService: the pod's address of the Service's family (its first
/// `ipFamilies` entry, else its cluster IP's, else — a headless Service of old — the pod's first
/// IP's), with its node and pod.
pub fn pod_to_endpoint_address_for_service(svc: &Service, pod: &Pod) -> Option<EndpointAddress> {
    let ips = pod_ips(pod);
    let spec = svc.spec.as_ref();
    let want_v6 = match spec.and_then(|s| s.ip_families.as_ref()).and_then(|f| f.first()) {
        Some(family) => family == "IPv6",
        None => match spec.and_then(|s| s.cluster_ip.as_deref()) {
            Some(ip) if !ip.is_empty() && ip != "None" => is_ipv6(ip),
            _ => is_ipv6(ips.first()?),
        },
    };
    let ip = ips.into_iter().find(|ip| is_ipv6(ip) == want_v6)?;
    Some(EndpointAddress {
        ip,
        node_name: pod.spec.as_ref().and_then(|s| s.node_name.clone()).filter(|n| !n.is_empty()),
        hostname: should_set_hostname(pod, svc).then(|| pod.spec.as_ref().and_then(|s| s.hostname.clone())).flatten(),
        target_ref: Some(ObjectReference {
            kind: Some("Pod".into()),
            namespace: pod.metadata.namespace.clone(),
            name: pod.metadata.name.clone(),
            uid: pod.metadata.uid.clone(),
            ..ObjectReference::default()
        }),
    })
}

fn endpoint_port_from_service_port(sp: &ServicePort, port: i32) -> EndpointPort {
    EndpointPort { name: sp.name.clone().filter(|n| !n.is_empty()), port, protocol: Some(sp.protocol.clone().unwrap_or_else(|| "TCP".into())), app_protocol: sp.app_protocol.clone() }
}

/// Step 2: the Service's subsets from the pods its selector matches.
pub fn compute_subsets(svc: &Service, pods: &[&Pod]) -> Vec<EndpointSubset> {
    let spec = svc.spec.clone().unwrap_or_default();
    let tolerate_unready = spec.publish_not_ready_addresses.unwrap_or(false);
    let service_ports = spec.ports.clone().unwrap_or_default();
    let headless = is_headless(svc);
    // (ports, ready?, address) one per pod and port set, as addEndpointSubset appends them.
    let mut entries: Vec<(Vec<EndpointPort>, bool, EndpointAddress)> = Vec::new();
    for pod in pods {
        if !should_pod_be_in_endpoints(pod, tolerate_unready) {
            continue;
        }
        let Some(address) = pod_to_endpoint_address_for_service(svc, pod) else { continue };
        let ready = tolerate_unready || api::pod::is_pod_ready(pod);
        if service_ports.is_empty() {
            // A headless Service may have no ports.
            if headless {
                entries.push((Vec::new(), ready, address));
            }
            continue;
        }
        for sp in &service_ports {
            if let Some(port) = find_port(pod, sp) {
                entries.push((vec![endpoint_port_from_service_port(sp, port)], ready, address.clone()));
            }
        }
    }
    repack_subsets(entries)
}

fn port_key(p: &EndpointPort) -> (String, i32, String, String) {
    (p.name.clone().unwrap_or_default(), p.port, p.protocol.clone().unwrap_or_default(), p.app_protocol.clone().unwrap_or_default())
}

fn address_key(a: &EndpointAddress) -> (String, String) {
    (a.ip.clone(), a.target_ref.as_ref().and_then(|r| r.uid.clone()).unwrap_or_default())
}

/// RepackSubsets: one subset per port, then the subsets holding the same addresses merged into
/// one with all their ports; addresses unique (ready wins over not ready), everything sorted.
fn repack_subsets(entries: Vec<(Vec<EndpointPort>, bool, EndpointAddress)>) -> Vec<EndpointSubset> {
    // Step 1: per port (or the empty port list), its addresses.
    type AddressSet = BTreeMap<(String, String), (bool, EndpointAddress)>;
    type PortKey = Vec<(String, i32, String, String)>;
    let mut by_port: BTreeMap<PortKey, (Vec<EndpointPort>, AddressSet)> = BTreeMap::new();
    for (ports, ready, address) in entries {
        let pk: Vec<_> = ports.iter().map(port_key).collect();
        let slot = by_port.entry(pk).or_insert_with(|| (ports, BTreeMap::new()));
        let e = slot.1.entry(address_key(&address)).or_insert((ready, address));
        e.0 |= ready;
    }
    // Step 2: ports sharing exactly the same addresses share a subset.
    type AddressKey = Vec<((String, String), bool)>;
    let mut by_addresses: BTreeMap<AddressKey, (Vec<EndpointPort>, AddressSet)> = BTreeMap::new();
    for (_, (ports, addresses)) in by_port {
        let ak: Vec<_> = addresses.iter().map(|(k, (r, _))| (k.clone(), *r)).collect();
        by_addresses.entry(ak).or_insert_with(|| (Vec::new(), addresses)).0.extend(ports);
    }
    let mut subsets: Vec<EndpointSubset> = by_addresses
        .into_values()
        .map(|(mut ports, addresses)| {
            ports.sort_by_key(port_key);
            let (ready, not_ready): (Vec<_>, Vec<_>) = addresses.into_values().partition(|(r, _)| *r);
            let strip = |v: Vec<(bool, EndpointAddress)>| -> Option<Vec<EndpointAddress>> {
                let v: Vec<EndpointAddress> = v.into_iter().map(|(_, a)| a).collect();
                (!v.is_empty()).then_some(v)
            };
            EndpointSubset { addresses: strip(ready), not_ready_addresses: strip(not_ready), ports: (!ports.is_empty()).then_some(ports) }
        })
        .collect();
    subsets.sort_by_key(|s| s.ports.iter().flatten().map(port_key).collect::<Vec<_>>());
    subsets
}

/// truncateEndpoints: keeps at most [`MAX_CAPACITY`] addresses, the ready ones first, each
/// subset keeping its share (rounded up, the last taking what is left); `true` if it cut.
pub fn truncate_endpoints(subsets: &mut [EndpointSubset]) -> bool {
    let total_ready: usize = subsets.iter().map(|s| s.addresses.as_ref().map_or(0, Vec::len)).sum();
    let total_not_ready: usize = subsets.iter().map(|s| s.not_ready_addresses.as_ref().map_or(0, Vec::len)).sum();
    if total_ready + total_not_ready <= MAX_CAPACITY {
        return false;
    }
    let truncate_ready = total_ready > MAX_CAPACITY;
    let (max, total) = if truncate_ready { (MAX_CAPACITY, total_ready) } else { (MAX_CAPACITY - total_ready, total_not_ready) };
    let mut room = max;
    for s in subsets.iter_mut() {
        let list = if truncate_ready { &mut s.addresses } else { &mut s.not_ready_addresses };
        let n = list.as_ref().map_or(0, Vec::len);
        let share = (n * max).div_ceil(total).min(room);
        if let Some(v) = list.as_mut() {
            v.truncate(share);
        }
        room -= list.as_ref().map_or(0, Vec::len);
        if truncate_ready {
            s.not_ready_addresses = None;
        }
    }
    true
}

/// Step 3: the Endpoints to write for `svc`, or `None` when `current` already says it all.
pub fn desired_endpoints(svc: &Service, current: Option<&Endpoints>, mut subsets: Vec<EndpointSubset>, trigger_time: Option<Timestamp>) -> Option<Endpoints> {
    let truncated = truncate_endpoints(&mut subsets);
    let mut labels: BTreeMap<String, String> = svc.metadata.labels.clone().unwrap_or_default();
    if crate::endpointslice::utils::is_service_ip_unset(svc) {
        labels.insert(LABEL_HEADLESS.into(), String::new());
    } else {
        labels.remove(LABEL_HEADLESS);
    }
    if let Some(cur) = current {
        let capacity_ok = cur.metadata.annotations.as_ref().and_then(|a| a.get(ANNOTATION_OVER_CAPACITY)).map(String::as_str) == truncated.then_some(TRUNCATED);
        if normalized(cur.subsets.clone()) == normalized(Some(subsets.clone())) && cur.metadata.labels.clone().unwrap_or_default() == labels && capacity_ok {
            return None;
        }
    }
    let mut ep = current.cloned().unwrap_or_else(|| Endpoints {
        metadata: ObjectMeta { name: svc.metadata.name.clone(), namespace: svc.metadata.namespace.clone(), ..ObjectMeta::default() },
        ..Endpoints::default()
    });
    let annotations = ep.metadata.annotations.get_or_insert_with(BTreeMap::new);
    match trigger_time {
        Some(t) => annotations.insert(ANNOTATION_LAST_CHANGE_TRIGGER_TIME.into(), t.to_string()),
        None => annotations.remove(ANNOTATION_LAST_CHANGE_TRIGGER_TIME),
    };
    if truncated {
        annotations.insert(ANNOTATION_OVER_CAPACITY.into(), TRUNCATED.into());
    } else {
        annotations.remove(ANNOTATION_OVER_CAPACITY);
    }
    if annotations.is_empty() {
        ep.metadata.annotations = None;
    }
    ep.metadata.labels = Some(labels);
    ep.subsets = Some(subsets);
    Some(ep)
}

/// Subsets as compared: an absent list and an empty one are the same.
fn normalized(subsets: Option<Vec<EndpointSubset>>) -> Vec<EndpointSubset> {
    subsets.unwrap_or_default()
}

/// The pod event handlers: the Services that select the pod now or selected it before.
fn pod_changed(pod: &Pod, deleted: bool, services: &Store<Service>, queue: &WorkQueue<String>, seen: &Mutex<HashMap<String, BTreeMap<String, String>>>) {
    let pod_key = key(pod.metadata.namespace.as_deref().unwrap_or_default(), pod.metadata.name.as_deref().unwrap_or_default());
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

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

    use super::*;
    use crate::endpoint::controller_utils::testing::{pod, service, terminating};

    fn ips(v: &Option<Vec<EndpointAddress>>) -> Vec<String> {
        v.iter().flatten().map(|a| a.ip.clone()).collect()
    }

    #[test]
    fn ready_and_not_ready_addresses_in_one_subset() {
        let svc = service(IntOrString::String("http".into()));
        let (a, b, c) = (pod("a", "10.1.0.2", 8080, true), pod("b", "10.1.0.1", 8080, false), terminating(pod("c", "10.1.0.3", 8080, true)));
        let subsets = compute_subsets(&svc, &[&a, &b, &c]);
        assert_eq!(subsets.len(), 1);
        assert_eq!(ips(&subsets[0].addresses), ["10.1.0.2"]);
        // The terminating pod is in neither list.
        assert_eq!(ips(&subsets[0].not_ready_addresses), ["10.1.0.1"]);
        let port = &subsets[0].ports.as_ref().unwrap()[0];
        assert_eq!((port.name.as_deref(), port.port, port.protocol.as_deref()), (Some("http"), 8080, Some("TCP")));
        let addr = &subsets[0].addresses.as_ref().unwrap()[0];
        assert_eq!(addr.node_name.as_deref(), Some("n1"));
        assert_eq!(addr.target_ref.as_ref().and_then(|r| r.name.as_deref()), Some("a"));
    }

    #[test]
    fn publish_not_ready_addresses_makes_every_pod_ready() {
        let mut svc = service(IntOrString::Int(8080));
        svc.spec.as_mut().unwrap().publish_not_ready_addresses = Some(true);
        let (a, b) = (pod("a", "10.1.0.1", 8080, false), terminating(pod("b", "10.1.0.2", 8080, true)));
        let subsets = compute_subsets(&svc, &[&a, &b]);
        assert_eq!(ips(&subsets[0].addresses), ["10.1.0.1", "10.1.0.2"]);
        assert!(subsets[0].not_ready_addresses.is_none());
    }

    #[test]
    fn pods_with_different_ports_get_different_subsets() {
        let svc = service(IntOrString::String("http".into()));
        let (a, b) = (pod("a", "10.1.0.1", 8080, true), pod("b", "10.1.0.2", 9090, true));
        let subsets = compute_subsets(&svc, &[&a, &b]);
        let got: Vec<(i32, Vec<String>)> = subsets.iter().map(|s| (s.ports.as_ref().unwrap()[0].port, ips(&s.addresses))).collect();
        assert_eq!(got, [(8080, vec!["10.1.0.1".to_string()]), (9090, vec!["10.1.0.2".to_string()])]);
    }

    #[test]
    fn two_ports_of_the_same_pods_share_a_subset() {
        let mut svc = service(IntOrString::Int(8080));
        let extra = ServicePort { name: Some("metrics".into()), port: 9100, target_port: Some(IntOrString::Int(9100)), ..ServicePort::default() };
        svc.spec.as_mut().unwrap().ports.as_mut().unwrap().push(extra);
        let a = pod("a", "10.1.0.1", 8080, true);
        let subsets = compute_subsets(&svc, &[&a]);
        assert_eq!(subsets.len(), 1);
        assert_eq!(subsets[0].ports.as_ref().unwrap().iter().map(|p| p.port).collect::<Vec<_>>(), [8080, 9100]);
    }

    #[test]
    fn headless_without_ports_lists_addresses_and_hostnames() {
        let mut svc = service(IntOrString::Int(8080));
        svc.spec.as_mut().unwrap().cluster_ip = Some("None".into());
        svc.spec.as_mut().unwrap().ports = None;
        let mut a = pod("a", "10.1.0.1", 8080, true);
        a.spec.as_mut().unwrap().hostname = Some("a".into());
        a.spec.as_mut().unwrap().subdomain = Some("web".into());
        let subsets = compute_subsets(&svc, &[&a]);
        assert_eq!(subsets.len(), 1);
        assert!(subsets[0].ports.is_none());
        assert_eq!(subsets[0].addresses.as_ref().unwrap()[0].hostname.as_deref(), Some("a"));
        let ep = desired_endpoints(&svc, None, subsets, None).unwrap();
        assert_eq!(ep.metadata.labels.as_ref().unwrap().get(LABEL_HEADLESS).map(String::as_str), Some(""));
    }

    #[test]
    fn unchanged_endpoints_are_not_written_again() {
        let mut svc = service(IntOrString::Int(8080));
        svc.metadata.labels = Some([("app".to_string(), "web".to_string())].into());
        let a = pod("a", "10.1.0.1", 8080, true);
        let first = desired_endpoints(&svc, None, compute_subsets(&svc, &[&a]), Some(Timestamp::UNIX_EPOCH)).unwrap();
        assert_eq!(first.metadata.name.as_deref(), Some("web"));
        assert_eq!(first.metadata.labels.as_ref().unwrap().get("app").map(String::as_str), Some("web"));
        assert!(first.metadata.annotations.as_ref().unwrap().contains_key(ANNOTATION_LAST_CHANGE_TRIGGER_TIME));
        assert_eq!(desired_endpoints(&svc, Some(&first), compute_subsets(&svc, &[&a]), None), None);
        // A pod going not ready moves its address.
        let a_down = pod("a", "10.1.0.1", 8080, false);
        let next = desired_endpoints(&svc, Some(&first), compute_subsets(&svc, &[&a_down]), None).unwrap();
        let s = &next.subsets.as_ref().unwrap()[0];
        assert!(s.addresses.is_none());
        assert_eq!(ips(&s.not_ready_addresses), ["10.1.0.1"]);
    }

    #[test]
    fn over_capacity_truncates_ready_first() {
        let svc = service(IntOrString::Int(8080));
        let many: Vec<Pod> = (0..1100).map(|i| pod(&format!("p{i}"), &format!("10.1.{}.{}", i / 200, i % 200 + 1), 8080, i % 2 == 0)).collect();
        let refs: Vec<&Pod> = many.iter().collect();
        let ep = desired_endpoints(&svc, None, compute_subsets(&svc, &refs), None).unwrap();
        let s = &ep.subsets.as_ref().unwrap()[0];
        // 550 ready kept whole; the 550 not ready cut to the 450 left.
        assert_eq!((s.addresses.as_ref().unwrap().len(), s.not_ready_addresses.as_ref().unwrap().len()), (550, 450));
        assert_eq!(ep.metadata.annotations.as_ref().unwrap().get(ANNOTATION_OVER_CAPACITY).map(String::as_str), Some(TRUNCATED));
        // Stored as written, it is not written again.
        assert_eq!(desired_endpoints(&svc, Some(&ep), compute_subsets(&svc, &refs), None), None);
        let all_ready: Vec<Pod> = (0..1200).map(|i| pod(&format!("p{i}"), &format!("10.1.{}.{}", i / 200, i % 200 + 1), 8080, true)).collect();
        let refs: Vec<&Pod> = all_ready.iter().collect();
        let mut subsets = compute_subsets(&svc, &refs);
        assert!(truncate_endpoints(&mut subsets));
        assert_eq!(subsets[0].addresses.as_ref().unwrap().len(), MAX_CAPACITY);
    }
}
