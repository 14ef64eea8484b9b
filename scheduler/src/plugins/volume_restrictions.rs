//! Mirrors kube-scheduler's plugins/volumerestrictions: a PersistentVolumeClaim with the
//! ReadWriteOncePod access mode may be used by one pod in the whole cluster. PreFilter finds the
//! pod's ReadWriteOncePod claims and counts how many of them scheduled (or assumed) pods already
//! use; Filter then rejects every node while that count is above zero — in Filter rather than
//! PreFilter, as Kubernetes does, so that preemption could one day free the claim.
//!
//! The in-tree disk conflicts the Kubernetes plugin also checks (GCE PD, AWS EBS, RBD, iSCSI
//! volumes) do not exist in kubelab.

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::framework::{ClusterEvent, CycleState, FilterPlugin, NodeInfo, Plugin, PodInfo, PreFilterPlugin, Status};
use crate::informers::Informers;
use crate::plugins::pv_helpers::claim_has_access_mode;
use crate::plugins::volume_binding::binder::pod_claim_names;

pub const NAME: &str = "VolumeRestrictions";
/// Kubernetes' ErrReasonReadWriteOncePodConflict.
pub const ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT: &str =
    "node has pod using PersistentVolumeClaim with the same name and ReadWriteOncePod access mode";

const STATE_KEY: &str = "VolumeRestrictions/PreFilter";

/// PreFilter's findings (preFilterState).
struct PreFilterState {
    /// How many of the pod's ReadWriteOncePod claims scheduled pods use.
    conflicting_pvc_ref_count: usize,
}

pub struct VolumeRestrictions {
    informers: Informers,
}

impl VolumeRestrictions {
    pub fn new(informers: &Informers) -> VolumeRestrictions {
        VolumeRestrictions { informers: informers.clone() }
    }
}

/// The decision (calPreFilterState): how many of the claims (keys "namespace/name") some node's
/// pods already use.
pub fn conflicting_pvc_ref_count(rwop_claims: &BTreeSet<String>, nodes: &[Arc<NodeInfo>]) -> usize {
    rwop_claims.iter().filter(|k| nodes.iter().any(|n| n.pvc_ref_counts.get(*k).is_some_and(|c| *c > 0))).count()
}

impl Plugin for VolumeRestrictions {
    fn name(&self) -> &'static str {
        NAME
    }
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        // The pod holding the claim going away frees it; a missing claim may be created.
        vec![
            ClusterEvent::AssignedPodDelete,
            ClusterEvent::NodeAdd,
            ClusterEvent::NodeTaintChange,
            ClusterEvent::NodeLabelChange,
            ClusterEvent::PersistentVolumeClaimAdd,
        ]
    }
}

impl PreFilterPlugin for VolumeRestrictions {
    fn pre_filter(&self, state: &mut CycleState, pod: &PodInfo, nodes: &[Arc<NodeInfo>]) -> Status {
        // Step 1: the pod's claims with the ReadWriteOncePod access mode (readWriteOncePodPVCsForPod).
        let mut rwop = BTreeSet::new();
        for name in pod_claim_names(&pod.pod) {
            let key = format!("{}/{name}", pod.namespace());
            let Some(pvc) = self.informers.persistent_volume_claims.get(&key) else {
                return Status::unresolvable(format!("persistentvolumeclaim {name:?} not found"));
            };
            if claim_has_access_mode(&pvc, "ReadWriteOncePod") {
                rwop.insert(key);
            }
        }
        // Step 2: how many of them are in use on some node.
        let conflicting = conflicting_pvc_ref_count(&rwop, nodes);
        if conflicting == 0 {
            return Status::skip();
        }
        state.write(STATE_KEY, PreFilterState { conflicting_pvc_ref_count: conflicting });
        Status::success()
    }
}

impl FilterPlugin for VolumeRestrictions {
    fn filter(&self, state: &CycleState, _pod: &PodInfo, _node: &NodeInfo) -> Status {
        match state.read::<PreFilterState>(STATE_KEY) {
            Some(s) if s.conflicting_pvc_ref_count > 0 => Status::unschedulable(ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT),
            _ => Status::success(),
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

    fn using(name: &str, claim: &str, node: &str) -> Arc<PodInfo> {
        let mut spec = json!({"volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": claim}}]});
        if !node.is_empty() {
            spec["nodeName"] = json!(node);
        }
        Arc::new(pod(name, spec))
    }

    #[test]
    fn read_write_once_pod_table() {
        let informers = Informers::default();
        informers.persistent_volume_claims.upsert(claim("solo", json!({"accessModes": ["ReadWriteOncePod"]})));
        informers.persistent_volume_claims.upsert(claim("shared", json!({"accessModes": ["ReadWriteOnce"]})));
        let plugin = VolumeRestrictions::new(&informers);
        // (case, claim the new pod uses, claim a pod on n1 uses or "", PreFilter code, Filter code)
        let cases = [
            ("RWOP claim unused", "solo", "", Code::Skip, Code::Success),
            ("RWOP claim used by another pod", "solo", "solo", Code::Success, Code::Unschedulable),
            ("RWO claim used by another pod", "shared", "shared", Code::Skip, Code::Success),
            ("other claim used", "solo", "shared", Code::Skip, Code::Success),
            ("missing claim", "nope", "", Code::UnschedulableAndUnresolvable, Code::Success),
        ];
        for (case, claim, used, pre, fil) in cases {
            let mut n1 = plain_node("n1");
            if !used.is_empty() {
                n1.add_pod(using("holder", used, "n1"));
            }
            let nodes = [Arc::new(n1), Arc::new(plain_node("n2"))];
            let p = using("p", claim, "");
            let mut state = CycleState::new();
            let s = plugin.pre_filter(&mut state, &p, &nodes);
            assert_eq!(s.code, pre, "{case}");
            if pre == Code::Success {
                // Every node rejects it, the empty one too: the claim is taken cluster-wide.
                for n in &nodes {
                    let f = plugin.filter(&state, &p, n);
                    assert_eq!(f.code, fil, "{case}");
                    assert_eq!(f.reasons, vec![ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT], "{case}");
                }
            }
        }
    }

    #[test]
    fn ref_counts_follow_pods() {
        let mut n = plain_node("n1");
        let holder = using("holder", "solo", "n1");
        n.add_pod(holder.clone());
        let claims: BTreeSet<String> = ["default/solo".to_string()].into();
        assert_eq!(conflicting_pvc_ref_count(&claims, &[Arc::new(n.clone())]), 1);
        n.remove_pod(holder.uid());
        assert_eq!(conflicting_pvc_ref_count(&claims, &[Arc::new(n)]), 0);
    }
}
