//! Mirrors kube-scheduler's plugins/nodevolumelimits (csi.go, the CSILimits plugin): a node takes
//! no more volumes of a CSI driver than the driver said it can attach there — `allocatable.count`
//! of the driver's entry in the node's CSINode, which the node agent fills from the driver's
//! NodeGetInfo `max_volumes_per_node`.
//!
//! Volumes are counted by their unique name (driver and volume handle), so a volume several pods
//! on the node share counts once, and a volume the new pod shares with them adds nothing. A claim
//! not yet bound counts as one new volume of its class's provisioner.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::storage::v1::CSINode;

use crate::framework::{ClusterEvent, CycleState, FilterPlugin, NodeInfo, Plugin, PodInfo, PreFilterPlugin, Status};
use crate::informers::Informers;
use crate::plugins::pv_helpers::claim_class;
use crate::plugins::volume_binding::binder::pod_claim_names;

pub const NAME: &str = "NodeVolumeLimits";
/// Kubernetes' ErrReasonMaxVolumeCountExceeded.
pub const ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED: &str = "node(s) exceed max volume count";
/// Stands in for the volume handle of a claim not bound yet (Kubernetes uses a random prefix):
/// no real handle looks like it, so such a claim never matches an attached volume.
const UNBOUND_HANDLE_PREFIX: &str = "kubelab-unbound-claim";

pub struct CSILimits {
    informers: Informers,
}

impl CSILimits {
    pub fn new(informers: &Informers) -> CSILimits {
        CSILimits { informers: informers.clone() }
    }

    /// filterAttachableVolumes: the pod's CSI volumes into `out` (unique name → driver). For the
    /// pod being scheduled a missing claim is an error; an existing pod's is skipped.
    fn attachable_volumes(&self, pod: &Pod, new_pod: bool, out: &mut BTreeMap<String, String>) -> Result<(), String> {
        let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
        for name in pod_claim_names(pod) {
            let Some(pvc) = self.informers.persistent_volume_claims.get(&format!("{ns}/{name}")) else {
                if new_pod {
                    return Err(format!("looking up PVC {ns}/{name}: persistentvolumeclaim {name:?} not found"));
                }
                continue;
            };
            let volume = pvc.spec.as_ref().and_then(|s| s.volume_name.as_deref()).unwrap_or("");
            let csi = (!volume.is_empty())
                .then(|| self.informers.persistent_volumes.get(volume))
                .flatten()
                .map(|pv| pv.spec.as_ref().and_then(|s| s.csi.as_ref()).map(|c| (c.driver.clone(), c.volume_handle.clone())));
            let (driver, handle) = match csi {
                Some(Some(found)) => found,
                Some(None) => continue, // not a CSI volume: not counted here
                // Unbound, or its PV not seen yet: the class's provisioner will make it.
                None => {
                    let class = claim_class(&pvc);
                    let Some(sc) = (!class.is_empty()).then(|| self.informers.storage_classes.get(class)).flatten() else { continue };
                    (sc.provisioner.clone(), format!("{UNBOUND_HANDLE_PREFIX}-{ns}/{name}"))
                }
            };
            if driver.is_empty() || handle.is_empty() {
                continue;
            }
            out.insert(format!("{driver}/{handle}"), driver);
        }
        Ok(())
    }
}

/// The node's limit per driver, from its CSINode (getVolumeLimits).
pub fn volume_limits(csi_node: Option<&CSINode>) -> BTreeMap<String, i64> {
    csi_node
        .into_iter()
        .flat_map(|c| c.spec.drivers.iter())
        .filter_map(|d| d.allocatable.as_ref().and_then(|a| a.count).map(|n| (d.name.clone(), i64::from(n))))
        .collect()
}

/// The decision: whether adding `new` (unique name → driver) to what the node's pods already use
/// (`attached`) takes any driver past its limit. Volumes already attached are not new.
pub fn exceeds_limits(new: &BTreeMap<String, String>, attached: &BTreeMap<String, String>, limits: &BTreeMap<String, i64>) -> bool {
    let mut attached_count: BTreeMap<&str, i64> = BTreeMap::new();
    for driver in attached.values() {
        *attached_count.entry(driver).or_default() += 1;
    }
    let mut new_count: BTreeMap<&str, i64> = BTreeMap::new();
    for (unique, driver) in new {
        if !attached.contains_key(unique) {
            *new_count.entry(driver).or_default() += 1;
        }
    }
    new_count.iter().any(|(driver, n)| limits.get(*driver).is_some_and(|max| attached_count.get(driver).copied().unwrap_or(0) + n > *max))
}

impl Plugin for CSILimits {
    fn name(&self) -> &'static str {
        NAME
    }
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        // A new CSINode (or a raised limit), a pod leaving, or the pod's missing claim created.
        vec![ClusterEvent::CSINodeAdd, ClusterEvent::CSINodeUpdate, ClusterEvent::AssignedPodDelete, ClusterEvent::PersistentVolumeClaimAdd]
    }
}

impl PreFilterPlugin for CSILimits {
    fn pre_filter(&self, _state: &mut CycleState, pod: &PodInfo, _nodes: &[Arc<NodeInfo>]) -> Status {
        if pod_claim_names(&pod.pod).next().is_some() { Status::success() } else { Status::skip() }
    }
}

impl FilterPlugin for CSILimits {
    fn filter(&self, _state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        // Step 1: the new pod's CSI volumes.
        let mut new = BTreeMap::new();
        if let Err(e) = self.attachable_volumes(&pod.pod, true, &mut new) {
            return Status::unresolvable(e);
        }
        if new.is_empty() {
            return Status::success();
        }
        // Step 2: the node's limits; a node without any takes everything.
        let limits = volume_limits(self.informers.csi_nodes.get(node.name()).as_deref());
        if limits.is_empty() {
            return Status::success();
        }
        // Step 3: what the node's pods use, then compare.
        let mut attached = BTreeMap::new();
        for p in &node.pods {
            if let Err(e) = self.attachable_volumes(&p.pod, false, &mut attached) {
                return Status::error(e);
            }
        }
        if exceeds_limits(&new, &attached, &limits) {
            Status::unschedulable(ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED)
        } else {
            Status::success()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::Code;
    use crate::framework::types::testing::*;
    use crate::plugins::pv_helpers::testing::*;
    use serde_json::json;

    const DRIVER: &str = "hostpath.csi.kubelab.io";

    fn vols(v: &[(&str, &str)]) -> BTreeMap<String, String> {
        v.iter().map(|(u, d)| (u.to_string(), d.to_string())).collect()
    }

    #[test]
    fn exceeds_limits_table() {
        let limits: BTreeMap<String, i64> = [("a".to_string(), 2)].into();
        // (case, new volumes, attached volumes, exceeds)
        let cases = [
            ("room left", vols(&[("a/1", "a")]), vols(&[("a/2", "a")]), false),
            ("at the limit", vols(&[("a/1", "a")]), vols(&[("a/2", "a"), ("a/3", "a")]), true),
            ("shared volume counts once", vols(&[("a/2", "a")]), vols(&[("a/2", "a"), ("a/3", "a")]), false),
            ("two new ones", vols(&[("a/1", "a"), ("a/4", "a")]), vols(&[("a/2", "a")]), true),
            ("driver without a limit", vols(&[("b/1", "b"), ("b/2", "b"), ("b/3", "b")]), vols(&[]), false),
        ];
        for (case, new, attached, want) in cases {
            assert_eq!(exceeds_limits(&new, &attached, &limits), want, "{case}");
        }
    }

    fn csi_node(name: &str, count: Option<i32>) -> CSINode {
        let mut d = json!({"name": DRIVER, "nodeID": name});
        if let Some(c) = count {
            d["allocatable"] = json!({"count": c});
        }
        serde_json::from_value(json!({"metadata": {"name": name}, "spec": {"drivers": [d]}})).unwrap()
    }

    fn using(name: &str, claim: &str, node: &str) -> Arc<PodInfo> {
        let mut spec = json!({"volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": claim}}]});
        if !node.is_empty() {
            spec["nodeName"] = json!(node);
        }
        Arc::new(pod(name, spec))
    }

    #[test]
    fn filter_counts_bound_and_unbound_claims() {
        let informers = Informers::default();
        informers.storage_classes.upsert(class("standard", DRIVER, "WaitForFirstConsumer"));
        for (claim_name, pv) in [("c1", "pv1"), ("c2", "pv2")] {
            informers.persistent_volume_claims.upsert(claim_with(claim_name, json!({}), json!({"volumeName": pv, "storageClassName": "standard"}), json!({"phase": "Bound"})));
            informers.persistent_volumes.upsert(volume(pv, json!({"csi": {"driver": DRIVER, "volumeHandle": format!("h-{pv}")}}), "Bound").as_ref().clone());
        }
        informers.persistent_volume_claims.upsert(claim("new", json!({"storageClassName": "standard"})));
        informers.csi_nodes.upsert(csi_node("n1", Some(2)));
        informers.csi_nodes.upsert(csi_node("n2", None));
        let plugin = CSILimits::new(&informers);
        let mut n1 = plain_node("n1");
        n1.add_pod(using("a", "c1", "n1"));
        n1.add_pod(using("b", "c2", "n1"));
        let mut n2 = plain_node("n2");
        n2.add_pod(using("a2", "c1", "n2"));
        let cases = [
            ("unbound claim on a full node", "new", &n1, Code::Unschedulable),
            ("a volume the node has already", "c1", &n1, Code::Success),
            ("no limit reported", "new", &n2, Code::Success),
            ("missing claim", "nope", &n1, Code::UnschedulableAndUnresolvable),
        ];
        for (case, claim, node, code) in cases {
            let s = plugin.filter(&CycleState::new(), &using("p", claim, ""), node);
            assert_eq!(s.code, code, "{case}");
            if code == Code::Unschedulable {
                assert_eq!(s.reasons, vec![ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED]);
            }
        }
        assert!(plugin.pre_filter(&mut CycleState::new(), &pod("p", json!({})), &[]).is_skip());
    }
}
