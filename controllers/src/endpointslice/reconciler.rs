//! Mirrors staging/src/k8s.io/endpointslice/reconciler.go: which EndpointSlices to create,
//! update and delete so that a Service's slices hold exactly the endpoints of its pods, touching
//! as few slices as it can. Pure: [`reconcile`] takes the Service, its pods and its slices and
//! returns a [`Plan`]; the controller carries it out.
//!
//! [`reconcile`]:
//! 1. Slices not owned by this Service (a previous one of the same name) or of an address type
//!    it no longer wants are deleted.
//! 2. For each address type the Service wants, group the desired endpoints by their ports (pods
//!    whose named `targetPort` resolves to different numbers go to different slices)
//!    ([`reconcile_by_address_type`]); slices of a port set no pod has any more are deleted.
//! 3. For each port set ([`reconcile_by_port_mapping`]):
//!    1. walk the existing slices: keep the endpoints still desired (updated when they changed),
//!       drop the others; a slice that lost all its endpoints is deleted, one that changed (or
//!       whose labels are stale) is updated, the rest are unchanged;
//!    2. fill the slices being updated anyway with new endpoints, the fullest first;
//!    3. what is left goes, if it fits, into the unchanged slice closest to full, else into new
//!       slices of at most `max_endpoints_per_slice` each.
//! 4. A Service with no endpoints at all keeps one empty placeholder slice.
//! 5. Deletions are turned into updates of the slices that would otherwise be created, so that
//!    churn is an update rather than a delete and a create.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointPort, EndpointSlice};

use super::utils::{endpoint_key, get_address_types_for_service, get_endpoint_ports, new_endpoint_slice, owned_by, pod_to_endpoint, port_map_key, set_endpoint_slice_labels};
use crate::endpoint::controller_utils::should_pod_be_in_endpoints;

type PortKey = Vec<(String, i32, String, String)>;
type EndpointKey = (Vec<String>, String, String, String);

/// What a sync must write. Slices to create have no name (a `generateName`); slices to update
/// keep the name and resourceVersion they were read with.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Plan {
    pub to_create: Vec<EndpointSlice>,
    pub to_update: Vec<EndpointSlice>,
    pub to_delete: Vec<EndpointSlice>,
}

impl Plan {
    pub fn is_empty(&self) -> bool {
        self.to_create.is_empty() && self.to_update.is_empty() && self.to_delete.is_empty()
    }
}

/// Steps 1–5 for one Service: `pods` are those its selector matches, `existing` the slices
/// labelled as its and managed by this controller, `node_zones` the zone of each node that has
/// one.
pub fn reconcile(svc: &Service, pods: &[&Pod], existing: &[EndpointSlice], node_zones: &BTreeMap<String, String>, max_endpoints_per_slice: usize) -> Plan {
    let max = max_endpoints_per_slice.max(1);
    let address_types = get_address_types_for_service(svc);
    let mut plan = Plan::default();
    // Step 1.
    let mut by_type: BTreeMap<&str, Vec<&EndpointSlice>> = BTreeMap::new();
    for slice in existing {
        match address_types.iter().find(|t| **t == slice.address_type) {
            Some(t) if owned_by(slice, svc) => by_type.entry(t).or_default().push(slice),
            _ => plan.to_delete.push(slice.clone()),
        }
    }
    // Steps 2 and 3.
    for t in &address_types {
        reconcile_by_address_type(svc, pods, by_type.remove(t).unwrap_or_default(), node_zones, max, t, &mut plan);
    }
    // Step 4.
    if existing.len() == plan.to_delete.len() && plan.to_create.is_empty() {
        let placeholder = new_endpoint_slice(svc, Vec::new(), address_types[0]);
        if plan.to_delete.len() == 1 && same_placeholder(&plan.to_delete[0], &placeholder) {
            plan.to_delete.clear();
        } else {
            plan.to_create.push(placeholder);
        }
    }
    // Step 5.
    let mut i = 0;
    while i < plan.to_delete.len() && !plan.to_create.is_empty() {
        let doomed = &plan.to_delete[i];
        let Some(last) = plan.to_create.last() else { break };
        if doomed.address_type == last.address_type && owned_by(doomed, svc) {
            let doomed = plan.to_delete.remove(i);
            let mut reused = plan.to_create.pop().unwrap_or_default();
            let labels = reused.metadata.labels.take();
            reused.metadata = doomed.metadata;
            reused.metadata.labels = labels;
            plan.to_update.push(reused);
        } else {
            i += 1;
        }
    }
    plan
}

/// placeholderSliceCompare: an existing empty slice that is the placeholder this Service would
/// create (same namespace, labels, address type; no ports, no endpoints).
fn same_placeholder(existing: &EndpointSlice, placeholder: &EndpointSlice) -> bool {
    existing.metadata.namespace == placeholder.metadata.namespace
        && existing.metadata.labels.clone().unwrap_or_default() == placeholder.metadata.labels.clone().unwrap_or_default()
        && existing.address_type == placeholder.address_type
        && existing.ports.as_ref().is_none_or(Vec::is_empty)
        && existing.endpoints.as_ref().is_none_or(Vec::is_empty)
}

/// Step 2 for one address type.
fn reconcile_by_address_type(
    svc: &Service,
    pods: &[&Pod],
    existing: Vec<&EndpointSlice>,
    node_zones: &BTreeMap<String, String>,
    max: usize,
    address_type: &str,
    plan: &mut Plan,
) {
    let mut desired: BTreeMap<PortKey, (Vec<EndpointPort>, BTreeMap<EndpointKey, Endpoint>)> = BTreeMap::new();
    for pod in pods {
        if !should_pod_be_in_endpoints(pod, true) {
            continue;
        }
        let ports = get_endpoint_ports(svc, pod);
        let zone = pod.spec.as_ref().and_then(|s| s.node_name.as_ref()).and_then(|n| node_zones.get(n));
        let endpoint = pod_to_endpoint(pod, zone.map(String::as_str), svc, address_type);
        let entry = desired.entry(port_map_key(&ports)).or_insert_with(|| (ports, BTreeMap::new()));
        if !endpoint.addresses.is_empty() {
            entry.1.insert(endpoint_key(&endpoint), endpoint);
        }
    }
    let mut existing_by_ports: BTreeMap<PortKey, Vec<&EndpointSlice>> = BTreeMap::new();
    for slice in existing {
        existing_by_ports.entry(port_map_key(slice.ports.as_deref().unwrap_or_default())).or_default().push(slice);
    }
    for (key, slices) in &existing_by_ports {
        if !desired.contains_key(key) {
            plan.to_delete.extend(slices.iter().map(|s| (*s).clone()));
        }
    }
    for (key, (ports, endpoints)) in desired {
        let slices = existing_by_ports.remove(&key).unwrap_or_default();
        reconcile_by_port_mapping(svc, slices, endpoints, ports, address_type, max, plan);
    }
}

/// Step 3 for one set of ports.
fn reconcile_by_port_mapping(
    svc: &Service,
    existing: Vec<&EndpointSlice>,
    mut desired: BTreeMap<EndpointKey, Endpoint>,
    ports: Vec<EndpointPort>,
    address_type: &str,
    max: usize,
    plan: &mut Plan,
) {
    let mut by_name: BTreeMap<String, EndpointSlice> = BTreeMap::new();
    let (mut unchanged, mut to_update, mut to_delete) = (BTreeSet::new(), BTreeSet::new(), BTreeSet::new());
    // Step 3.1.
    for slice in existing {
        let name = slice.metadata.name.clone().unwrap_or_default();
        let old = slice.endpoints.as_deref().unwrap_or_default();
        let mut kept = Vec::with_capacity(old.len());
        let mut endpoint_updated = false;
        for ep in old {
            if let Some(want) = desired.remove(&endpoint_key(ep)) {
                endpoint_updated |= want != *ep;
                kept.push(want);
            }
        }
        let (labels, labels_changed) = set_endpoint_slice_labels(slice, svc);
        let mut copy = slice.clone();
        if endpoint_updated || kept.len() != old.len() {
            if kept.is_empty() {
                to_delete.insert(name.clone());
            } else {
                copy.endpoints = Some(kept);
                copy.metadata.labels = Some(labels);
                to_update.insert(name.clone());
            }
        } else if labels_changed {
            copy.metadata.labels = Some(labels);
            to_update.insert(name.clone());
        } else {
            unchanged.insert(name.clone());
        }
        by_name.insert(name, copy);
    }
    // Step 3.2: the fullest first.
    if !desired.is_empty() && !to_update.is_empty() {
        let mut names: Vec<&String> = to_update.iter().collect();
        names.sort_by_key(|n| std::cmp::Reverse(by_name[*n].endpoints.as_ref().map_or(0, Vec::len)));
        for name in names {
            if let Some(slice) = by_name.get_mut(name) {
                fill(slice, &mut desired, max);
            }
        }
    }
    // Step 3.3.
    while !desired.is_empty() {
        let mut target = None;
        if desired.len() < max && !unchanged.is_empty() {
            target = get_slice_to_fill(unchanged.iter().map(|n| &by_name[n]), desired.len(), max);
        }
        match target {
            Some(name) => {
                unchanged.remove(&name);
                to_update.insert(name.clone());
                if let Some(slice) = by_name.get_mut(&name) {
                    fill(slice, &mut desired, max);
                }
            }
            None => {
                let mut slice = new_endpoint_slice(svc, ports.clone(), address_type);
                fill(&mut slice, &mut desired, max);
                plan.to_create.push(slice);
            }
        }
    }
    plan.to_update.extend(to_update.iter().map(|n| by_name[n].clone()));
    plan.to_delete.extend(to_delete.iter().map(|n| by_name[n].clone()));
}

/// Moves desired endpoints into `slice` until it holds `max`.
fn fill(slice: &mut EndpointSlice, desired: &mut BTreeMap<EndpointKey, Endpoint>, max: usize) {
    let endpoints = slice.endpoints.get_or_insert_with(Vec::new);
    while endpoints.len() < max {
        let Some((_, ep)) = desired.pop_first() else { break };
        endpoints.push(ep);
    }
}

/// getSliceToFill: the slice closest to full that still has room for `n` endpoints.
fn get_slice_to_fill<'a>(slices: impl Iterator<Item = &'a EndpointSlice>, n: usize, max: usize) -> Option<String> {
    if n == 0 || n > max {
        return None;
    }
    slices
        .map(|s| (s.endpoints.as_ref().map_or(0, Vec::len), s))
        .filter(|(len, _)| len + n <= max)
        .max_by_key(|(len, _)| *len)
        .map(|(_, s)| s.metadata.name.clone().unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

    use super::*;
    use crate::endpoint::controller_utils::testing::{pod, service, terminating};

    /// The plan's slices as the API server would store them: named `web-<n>`, with a
    /// resourceVersion.
    fn stored(mut slices: Vec<EndpointSlice>) -> Vec<EndpointSlice> {
        for (i, s) in slices.iter_mut().enumerate() {
            s.metadata.name.get_or_insert_with(|| format!("web-{i}"));
            s.metadata.resource_version = Some("1".into());
        }
        slices
    }

    fn names(eps: &EndpointSlice) -> Vec<String> {
        eps.endpoints.iter().flatten().filter_map(|e| e.target_ref.as_ref()?.name.clone()).collect()
    }

    fn pods(n: usize, port: i32) -> Vec<Pod> {
        (0..n).map(|i| pod(&format!("p{i:03}"), &format!("10.1.{}.{}", i / 250, i % 250 + 1), port, true)).collect()
    }

    fn run(svc: &Service, pods: &[Pod], existing: &[EndpointSlice]) -> Plan {
        let refs: Vec<&Pod> = pods.iter().collect();
        reconcile(svc, &refs, existing, &BTreeMap::new(), 100)
    }

    #[test]
    fn first_sync_creates_one_slice_with_every_pod() {
        let svc = service(IntOrString::String("http".into()));
        let ps = vec![pod("a", "10.1.0.1", 8080, true), pod("b", "10.1.0.2", 8080, false), terminating(pod("c", "10.1.0.3", 8080, true))];
        let plan = run(&svc, &ps, &[]);
        assert_eq!((plan.to_create.len(), plan.to_update.len(), plan.to_delete.len()), (1, 0, 0));
        let slice = &plan.to_create[0];
        assert_eq!(names(slice), ["a", "b", "c"]);
        assert_eq!(slice.address_type, "IPv4");
        let ports = slice.ports.clone().unwrap();
        assert_eq!((ports[0].name.as_deref(), ports[0].port), (Some("http"), Some(8080)));
        // Nothing changed: nothing to do.
        assert!(run(&svc, &ps, &stored(plan.to_create)).is_empty());
    }

    #[test]
    fn pods_without_ip_or_finished_are_left_out() {
        let svc = service(IntOrString::Int(8080));
        let mut no_ip = pod("a", "10.1.0.1", 8080, true);
        no_ip.status.as_mut().unwrap().pod_ip = None;
        no_ip.status.as_mut().unwrap().pod_ips = None;
        let mut done = pod("b", "10.1.0.2", 8080, true);
        done.status.as_mut().unwrap().phase = Some("Succeeded".into());
        let plan = run(&svc, &[no_ip, done, pod("c", "10.1.0.3", 8080, true)], &[]);
        assert_eq!(names(&plan.to_create[0]), ["c"]);
    }

    #[test]
    fn at_most_max_endpoints_per_slice() {
        let svc = service(IntOrString::Int(8080));
        let plan = run(&svc, &pods(250, 8080), &[]);
        let sizes: Vec<usize> = plan.to_create.iter().map(|s| s.endpoints.as_ref().unwrap().len()).collect();
        assert_eq!(sizes, [100, 100, 50]);
        let refs: Vec<Pod> = pods(7, 8080);
        let refs: Vec<&Pod> = refs.iter().collect();
        let small = reconcile(&svc, &refs, &[], &BTreeMap::new(), 3);
        assert_eq!(small.to_create.iter().map(|s| s.endpoints.as_ref().unwrap().len()).collect::<Vec<_>>(), [3, 3, 1]);
    }

    #[test]
    fn different_resolved_ports_go_to_different_slices() {
        let svc = service(IntOrString::String("http".into()));
        let ps = vec![pod("a", "10.1.0.1", 8080, true), pod("b", "10.1.0.2", 9090, true), pod("c", "10.1.0.3", 8080, true)];
        let plan = run(&svc, &ps, &[]);
        let mut got: Vec<(i32, Vec<String>)> = plan.to_create.iter().map(|s| (s.ports.clone().unwrap()[0].port.unwrap(), names(s))).collect();
        got.sort();
        assert_eq!(got, [(8080, vec!["a".to_string(), "c".to_string()]), (9090, vec!["b".to_string()])]);
    }

    #[test]
    fn a_pod_going_not_ready_updates_its_slice_in_place() {
        let svc = service(IntOrString::Int(8080));
        let mut ps = pods(3, 8080);
        let existing = stored(run(&svc, &ps, &[]).to_create);
        ps[1] = pod("p001", "10.1.0.2", 8080, false);
        let plan = run(&svc, &ps, &existing);
        assert_eq!((plan.to_create.len(), plan.to_update.len(), plan.to_delete.len()), (0, 1, 0));
        let updated = &plan.to_update[0];
        assert_eq!(updated.metadata.name.as_deref(), Some("web-0"));
        assert_eq!(updated.metadata.resource_version.as_deref(), Some("1"));
        let c = updated.endpoints.as_ref().unwrap()[1].conditions.clone().unwrap();
        assert_eq!((c.ready, c.serving, c.terminating), (Some(false), Some(false), Some(false)));
    }

    #[test]
    fn new_pods_fill_a_partial_slice_and_full_ones_are_left_alone() {
        let svc = service(IntOrString::Int(8080));
        let all = pods(160, 8080);
        // Two slices: web-0 full (100), web-1 with 50.
        let existing = stored(run(&svc, &all[..150], &[]).to_create);
        assert_eq!(existing.iter().map(|s| s.endpoints.as_ref().unwrap().len()).collect::<Vec<_>>(), [100, 50]);
        let plan = run(&svc, &all, &existing);
        assert_eq!((plan.to_create.len(), plan.to_update.len(), plan.to_delete.len()), (0, 1, 0));
        assert_eq!(plan.to_update[0].metadata.name.as_deref(), Some("web-1"));
        assert_eq!(plan.to_update[0].endpoints.as_ref().unwrap().len(), 60);
        // Scaling down touches only the slice that held the pods that went.
        let in_second = names(&existing[1]);
        let without = |gone: &[String]| -> Vec<Pod> { all[..150].iter().filter(|p| !gone.contains(p.metadata.name.as_ref().unwrap())).cloned().collect() };
        let plan = run(&svc, &without(&in_second[..10]), &existing);
        assert_eq!((plan.to_create.len(), plan.to_update.len(), plan.to_delete.len()), (0, 1, 0));
        assert_eq!(plan.to_update[0].metadata.name.as_deref(), Some("web-1"));
        assert_eq!(plan.to_update[0].endpoints.as_ref().unwrap().len(), 40);
        // A slice whose pods all went is deleted.
        let plan = run(&svc, &without(&in_second), &existing);
        assert_eq!((plan.to_create.len(), plan.to_update.len(), plan.to_delete.len()), (0, 0, 1));
        assert_eq!(plan.to_delete[0].metadata.name.as_deref(), Some("web-1"));
    }

    #[test]
    fn new_pods_beyond_room_get_a_new_slice() {
        let svc = service(IntOrString::Int(8080));
        let all = pods(101, 8080);
        let existing = stored(run(&svc, &all[..100], &[]).to_create);
        let plan = run(&svc, &all, &existing);
        assert_eq!((plan.to_create.len(), plan.to_update.len(), plan.to_delete.len()), (1, 0, 0));
        assert_eq!(names(&plan.to_create[0]), ["p100"]);
    }

    #[test]
    fn no_endpoints_keeps_one_placeholder() {
        let svc = service(IntOrString::Int(8080));
        let plan = run(&svc, &[], &[]);
        assert_eq!((plan.to_create.len(), plan.to_update.len(), plan.to_delete.len()), (1, 0, 0));
        let placeholder = &plan.to_create[0];
        assert!(placeholder.endpoints.as_ref().unwrap().is_empty());
        assert!(placeholder.ports.as_ref().unwrap().is_empty());
        assert!(run(&svc, &[], &stored(plan.to_create)).is_empty());
        // The last pods going empty the slice in place (the deletion becomes an update of the
        // placeholder), rather than a delete and a create.
        let existing = stored(run(&svc, &pods(2, 8080), &[]).to_create);
        let plan = run(&svc, &[], &existing);
        assert_eq!((plan.to_create.len(), plan.to_update.len(), plan.to_delete.len()), (0, 1, 0));
        assert_eq!(plan.to_update[0].metadata.name.as_deref(), Some("web-0"));
        assert!(plan.to_update[0].endpoints.as_ref().unwrap().is_empty());
        assert!(run(&svc, &[], &stored(plan.to_update)).is_empty());
    }

    #[test]
    fn slices_of_another_owner_are_replaced() {
        let svc = service(IntOrString::Int(8080));
        let mut old = stored(run(&svc, &pods(2, 8080), &[]).to_create);
        old[0].metadata.owner_references.as_mut().unwrap()[0].uid = "old-uid".into();
        let plan = run(&svc, &pods(2, 8080), &old);
        assert_eq!((plan.to_create.len(), plan.to_update.len(), plan.to_delete.len()), (1, 0, 1));
    }

    #[test]
    fn service_labels_reach_the_slices() {
        let mut svc = service(IntOrString::Int(8080));
        let existing = stored(run(&svc, &pods(2, 8080), &[]).to_create);
        svc.metadata.labels = Some([("tier".to_string(), "front".to_string())].into());
        let plan = run(&svc, &pods(2, 8080), &existing);
        assert_eq!(plan.to_update.len(), 1);
        assert_eq!(plan.to_update[0].metadata.labels.as_ref().unwrap().get("tier").map(String::as_str), Some("front"));
    }

    #[test]
    fn a_port_change_reuses_the_slice() {
        let svc = service(IntOrString::Int(8080));
        let existing = stored(run(&svc, &pods(2, 8080), &[]).to_create);
        let moved = service(IntOrString::Int(9090));
        let plan = run(&moved, &pods(2, 8080), &existing);
        assert_eq!((plan.to_create.len(), plan.to_update.len(), plan.to_delete.len()), (0, 1, 0));
        assert_eq!(plan.to_update[0].ports.as_ref().unwrap()[0].port, Some(9090));
        assert_eq!(plan.to_update[0].metadata.name.as_deref(), Some("web-0"));
    }
}
