//! Mirrors kube-scheduler's plugins/volumebinding (volume_binding.go): a pod's
//! PersistentVolumeClaims take part in choosing its node. A bound claim's PV must admit the node
//! (its node affinity: a hostpath CSI volume lives on one node); an unbound claim of a
//! WaitForFirstConsumer class needs a PV available there or a class that can provision there.
//! The chosen bindings are assumed in Reserve and written in PreBind, which waits until every
//! claim is bound before the pod is.
//!
//! | point | what |
//! | --- | --- |
//! | PreFilter | the pod's claims must exist and not be being deleted or Lost; immediate claims must be bound already; no claims → Skip |
//! | Filter | [`binder::find_pod_volumes`] for the node: "node(s) had volume node affinity conflict", "node(s) didn't find available persistent volumes to bind" |
//! | Reserve / Unreserve | assume / revert the node's bindings in the PV and PVC assume caches |
//! | PreBind | write them (PV claimRef, claim `volume.kubernetes.io/selected-node`) and wait, up to `bindTimeoutSeconds`, for every claim to be bound |
//!
//! The binding steps themselves are told in [`binder`].

pub mod assume_cache;
pub mod binder;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::PersistentVolume;

use crate::framework::{ClusterEvent, CycleState, FilterPlugin, NodeInfo, Plugin, PodInfo, PreBindPlugin, PreFilterPlugin, ReservePlugin, Status};
use crate::informers::Informers;
use crate::plugins::pv_helpers::NodeRef;
use binder::{PodVolumeClaims, PodVolumes, VolumeBinder, find_pod_volumes, pod_claim_names};

pub const NAME: &str = "VolumeBinding";
/// PreFilter's reason when an Immediate claim is not bound yet (the PV controller binds those).
pub const ERR_REASON_UNBOUND_IMMEDIATE: &str = "pod has unbound immediate PersistentVolumeClaims";
/// VolumeBindingArgs.bindTimeoutSeconds' default: how long PreBind waits for the claims.
pub const DEFAULT_BIND_TIMEOUT_SECONDS: u64 = 600;

const STATE_KEY: &str = "VolumeBinding/PreFilter";

/// Filter's answer for a node, and the node's labels (PreBind checks node affinity on them).
type NodeVolumes = (PodVolumes, BTreeMap<String, String>);

/// What one cycle keeps between the points (kube-scheduler's stateData).
struct StateData {
    claims: PodVolumeClaims,
    /// The PVs at PreFilter, assumptions applied: every node's Filter decides on the same list.
    pvs: Vec<Arc<PersistentVolume>>,
    /// Filter's answer per node. A lock because Filter runs for many nodes at once with a shared
    /// `&CycleState`.
    by_node: Mutex<HashMap<String, NodeVolumes>>,
    /// From Reserve: whether every claim was bound already (then PreBind has nothing to do).
    all_bound: bool,
}

pub struct VolumeBinding {
    binder: VolumeBinder,
}

impl VolumeBinding {
    pub fn new(informers: &Informers, client: Option<kube::Client>, bind_timeout: Duration) -> VolumeBinding {
        VolumeBinding { binder: VolumeBinder::new(informers, client, bind_timeout) }
    }

    /// podHasPVCs: whether the pod uses claims, and a status when one of them rules the pod out.
    fn pod_has_pvcs(&self, pod: &PodInfo) -> Result<bool, Status> {
        let mut has = false;
        for name in pod_claim_names(&pod.pod) {
            has = true;
            let Some(pvc) = self.binder.informers.persistent_volume_claims.get(&format!("{}/{name}", pod.namespace())) else {
                return Err(Status::unresolvable(format!("persistentvolumeclaim {name:?} not found")));
            };
            if pvc.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Lost") {
                let volume = pvc.spec.as_ref().and_then(|s| s.volume_name.as_deref()).unwrap_or("");
                return Err(Status::unresolvable(format!("persistentvolumeclaim {name:?} bound to non-existent persistentvolume {volume:?}")));
            }
            if pvc.metadata.deletion_timestamp.is_some() {
                return Err(Status::unresolvable(format!("persistentvolumeclaim {name:?} is being deleted")));
            }
        }
        Ok(has)
    }
}

impl Plugin for VolumeBinding {
    fn name(&self) -> &'static str {
        NAME
    }
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        use ClusterEvent::*;
        vec![
            // A class created or changed (allowedTopologies) may make provisioning possible.
            StorageClassAdd,
            StorageClassUpdate,
            // Claims and PVs coming or being bound are what this plugin waits for.
            PersistentVolumeClaimAdd,
            PersistentVolumeClaimUpdate,
            PersistentVolumeAdd,
            PersistentVolumeUpdate,
            // A node (or its labels) may match a PV's node affinity or a class's topology.
            NodeAdd,
            NodeLabelChange,
            NodeTaintChange,
            CSINodeAdd,
            CSINodeUpdate,
        ]
    }
}

impl PreFilterPlugin for VolumeBinding {
    fn pre_filter(&self, state: &mut CycleState, pod: &PodInfo, _nodes: &[Arc<NodeInfo>]) -> Status {
        let empty = || StateData { claims: PodVolumeClaims::default(), pvs: Vec::new(), by_node: Mutex::default(), all_bound: true };
        // Step 1: the claims must exist and be usable; a pod without any skips Filter.
        match self.pod_has_pvcs(pod) {
            Err(s) => return s,
            Ok(false) => {
                state.write(STATE_KEY, empty());
                return Status::skip();
            }
            Ok(true) => {}
        }
        // Step 2: split them; Immediate ones must have been bound by the PV controller already.
        let claims = match self.binder.get_pod_volume_claims(&pod.pod) {
            Ok(c) => c,
            Err(e) => return Status::error(e),
        };
        if !claims.unbound_immediate.is_empty() {
            return Status::unresolvable(ERR_REASON_UNBOUND_IMMEDIATE);
        }
        state.write(STATE_KEY, StateData { claims, pvs: self.binder.pv_cache.list(), by_node: Mutex::default(), all_bound: false });
        Status::success()
    }
}

impl FilterPlugin for VolumeBinding {
    fn filter(&self, state: &CycleState, _pod: &PodInfo, node: &NodeInfo) -> Status {
        let Some(s) = state.read::<StateData>(STATE_KEY) else { return Status::error("VolumeBinding: no PreFilter state") };
        let node_ref = NodeRef { name: node.name(), labels: node.labels() };
        match find_pod_volumes(&s.claims, &s.pvs, &|c| self.binder.class(c), &node_ref) {
            Err(e) => Status::error(e),
            Ok(Err(reasons)) => Status { code: crate::framework::Code::UnschedulableAndUnresolvable, reasons: reasons.into_iter().map(String::from).collect(), plugin: NAME },
            Ok(Ok(volumes)) => {
                s.by_node.lock().expect("volume binding state lock").insert(node.name().to_string(), (volumes, node.labels().clone()));
                Status::success()
            }
        }
    }
}

impl ReservePlugin for VolumeBinding {
    fn reserve(&self, state: &mut CycleState, pod: &PodInfo, node: &str) -> Status {
        let Some(s) = state.read_mut::<StateData>(STATE_KEY) else { return Status::success() };
        let by_node = s.by_node.get_mut().expect("volume binding state lock");
        let Some((volumes, _)) = by_node.get_mut(node) else {
            // The pod has no claims (PreFilter skipped).
            s.all_bound = true;
            return Status::success();
        };
        match self.binder.assume_pod_volumes(&pod.pod, node, volumes) {
            Ok((all_bound, assumed)) => {
                *volumes = assumed;
                s.all_bound = all_bound;
                Status::success()
            }
            Err(e) => Status::error(e),
        }
    }

    fn unreserve(&self, state: &mut CycleState, _pod: &PodInfo, node: &str) {
        let Some(s) = state.read_mut::<StateData>(STATE_KEY) else { return };
        if let Some((volumes, _)) = s.by_node.get_mut().expect("volume binding state lock").get(node) {
            self.binder.revert_assumed_pod_volumes(volumes);
        }
    }
}

impl PreBindPlugin for VolumeBinding {
    fn pre_bind<'a>(&'a self, state: &'a CycleState, pod: &'a PodInfo, node: &'a str) -> BoxFuture<'a, Status> {
        Box::pin(async move {
            let Some(s) = state.read::<StateData>(STATE_KEY) else { return Status::success() };
            if s.all_bound {
                return Status::success();
            }
            let Some((volumes, labels)) = s.by_node.lock().expect("volume binding state lock").get(node).cloned() else {
                return Status::error(format!("no pod volumes found for node {node:?}"));
            };
            match self.binder.bind_pod_volumes(&pod.pod, node, &labels, &volumes).await {
                Ok(()) => Status::success(),
                Err(e) => Status::error(e),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::Code;
    use crate::framework::types::testing::*;
    use crate::plugins::pv_helpers::ANN_SELECTED_NODE;
    use crate::plugins::pv_helpers::testing::*;
    use serde_json::json;

    fn with_claim(claim: &str) -> PodInfo {
        pod("p", json!({"volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": claim}}]}))
    }

    #[test]
    fn pre_filter_table() {
        let informers = Informers::default();
        informers.storage_classes.upsert(class("standard", "hostpath.csi.kubelab.io", "WaitForFirstConsumer"));
        informers.storage_classes.upsert(class("fast", "hostpath.csi.kubelab.io", "Immediate"));
        informers.persistent_volume_claims.upsert(claim("wffc", json!({"storageClassName": "standard"})));
        informers.persistent_volume_claims.upsert(claim("immediate", json!({"storageClassName": "fast"})));
        informers.persistent_volume_claims.upsert(claim_with("lost", json!({}), json!({"volumeName": "gone"}), json!({"phase": "Lost"})));
        informers.persistent_volume_claims.upsert(claim_with("going", json!({"deletionTimestamp": "2026-01-01T00:00:00Z"}), json!({}), json!({})));
        let plugin = VolumeBinding::new(&informers, None, Duration::from_secs(1));
        let cases = [
            ("no claims", pod("p", json!({})), Code::Skip, ""),
            ("missing claim", with_claim("nope"), Code::UnschedulableAndUnresolvable, "persistentvolumeclaim \"nope\" not found"),
            ("lost claim", with_claim("lost"), Code::UnschedulableAndUnresolvable, "persistentvolumeclaim \"lost\" bound to non-existent persistentvolume \"gone\""),
            ("claim being deleted", with_claim("going"), Code::UnschedulableAndUnresolvable, "persistentvolumeclaim \"going\" is being deleted"),
            ("unbound immediate claim", with_claim("immediate"), Code::UnschedulableAndUnresolvable, ERR_REASON_UNBOUND_IMMEDIATE),
            ("unbound WaitForFirstConsumer claim", with_claim("wffc"), Code::Success, ""),
        ];
        for (case, p, code, reason) in cases {
            let s = plugin.pre_filter(&mut CycleState::new(), &p, &[]);
            assert_eq!(s.code, code, "{case}");
            if !reason.is_empty() {
                assert_eq!(s.reasons, vec![reason], "{case}");
            }
        }
    }

    #[test]
    fn filter_and_reserve_provision_on_the_chosen_node() {
        let informers = Informers::default();
        informers.storage_classes.upsert(class("standard", "hostpath.csi.kubelab.io", "WaitForFirstConsumer"));
        informers.persistent_volume_claims.upsert(claim("wffc", json!({"storageClassName": "standard"})));
        let plugin = VolumeBinding::new(&informers, None, Duration::from_secs(1));
        let p = with_claim("wffc");
        let mut state = CycleState::new();
        assert!(plugin.pre_filter(&mut state, &p, &[]).is_success());
        for n in ["n1", "n2"] {
            assert!(plugin.filter(&state, &p, &plain_node(n)).is_success(), "{n}");
        }
        assert!(plugin.reserve(&mut state, &p, "n2").is_success());
        let claim = plugin.binder.pvc_cache.get("default/wffc").unwrap();
        assert_eq!(claim.metadata.annotations.as_ref().and_then(|a| a.get(crate::plugins::pv_helpers::ANN_SELECTED_NODE)).map(String::as_str), Some("n2"));
        // Another pod using the claim now fits only n2.
        let mut other = CycleState::new();
        assert!(plugin.pre_filter(&mut other, &p, &[]).is_success());
        assert_eq!(plugin.filter(&other, &p, &plain_node("n1")).reasons, vec![binder::ERR_REASON_BIND_CONFLICT]);
        assert!(plugin.filter(&other, &p, &plain_node("n2")).is_success());
        plugin.unreserve(&mut state, &p, "n2");
        assert!(plugin.binder.pvc_cache.get("default/wffc").unwrap().metadata.annotations.is_none());
    }

    /// A fake API server on 127.0.0.1:0 that accepts PUTs of PVs and claims, records them and
    /// answers with the object at resourceVersion "10" (as the API server would after the write).
    async fn fake_api_server(writes: Arc<Mutex<Vec<String>>>) -> kube::Client {
        use axum::extract::Path;
        use axum::http::header::CONTENT_TYPE;
        use axum::routing::put;
        let answer = |body: String| {
            let mut v: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
            v["metadata"]["resourceVersion"] = json!("10");
            ([(CONTENT_TYPE, "application/json")], v.to_string())
        };
        let (w1, w2) = (writes.clone(), writes);
        let app = axum::Router::new()
            .route(
                "/api/v1/persistentvolumes/{name}",
                put(move |Path(name): Path<String>, body: String| async move {
                    w1.lock().unwrap().push(format!("PUT persistentvolumes/{name} {body}"));
                    answer(body)
                }),
            )
            .route(
                "/api/v1/namespaces/{ns}/persistentvolumeclaims/{name}",
                put(move |Path((ns, name)): Path<(String, String)>, body: String| async move {
                    w2.lock().unwrap().push(format!("PUT {ns}/persistentvolumeclaims/{name} {body}"));
                    answer(body)
                }),
            );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        kube::Client::try_from(kube::Config::new(format!("http://{addr}").parse().unwrap())).unwrap()
    }

    /// The whole plugin over a fake API server: a static PV and a claim to provision are chosen
    /// in Filter, assumed in Reserve, written in PreBind, which returns once the (simulated) PV
    /// controller has bound both claims.
    #[tokio::test]
    async fn pre_bind_writes_the_bindings_and_waits_for_them() {
        let writes = Arc::new(Mutex::new(Vec::new()));
        let client = fake_api_server(writes.clone()).await;
        let informers = Informers::default();
        informers.storage_classes.upsert(class("standard", "hostpath.csi.kubelab.io", "WaitForFirstConsumer"));
        informers.storage_classes.upsert(class("local", crate::plugins::pv_helpers::NOT_SUPPORTED_PROVISIONER, "WaitForFirstConsumer"));
        let rwo = json!(["ReadWriteOnce"]);
        informers.persistent_volume_claims.upsert(claim("fresh", json!({"storageClassName": "standard", "accessModes": rwo})));
        informers.persistent_volume_claims.upsert(claim("static", json!({"storageClassName": "local", "accessModes": rwo})));
        let local_pv = json!({"capacity": {"storage": "1Gi"}, "accessModes": rwo, "storageClassName": "local", "nodeAffinity": pinned_to("n1")});
        informers.persistent_volumes.upsert(volume("local-pv", local_pv.clone(), "Available").as_ref().clone());
        let plugin = VolumeBinding::new(&informers, Some(client), Duration::from_secs(30));
        let p = pod("p", json!({"volumes": [
            {"name": "a", "persistentVolumeClaim": {"claimName": "fresh"}},
            {"name": "b", "persistentVolumeClaim": {"claimName": "static"}}]}));
        let labelled = |n: &str| node(n, json!({"labels": {"topology.hostpath.csi.kubelab.io/node": n}}), json!({}), "4", "8Gi", "110");

        let mut state = CycleState::new();
        assert!(plugin.pre_filter(&mut state, &p, &[]).is_success());
        assert_eq!(plugin.filter(&state, &p, &labelled("n2")).reasons, vec![binder::ERR_REASON_BIND_CONFLICT], "the static PV is on n1");
        assert!(plugin.filter(&state, &p, &labelled("n1")).is_success());
        assert!(plugin.reserve(&mut state, &p, "n1").is_success());

        // The PV controller's part, once both writes are in: both claims bound.
        let controller = {
            let (informers, writes) = (informers.clone(), writes.clone());
            async move {
                while writes.lock().unwrap().len() < 2 {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                let mut pv = volume("local-pv", local_pv, "Bound").as_ref().clone();
                pv.metadata.resource_version = Some("10".into());
                pv.spec.get_or_insert_default().claim_ref =
                    Some(serde_json::from_value(json!({"namespace": "default", "name": "static", "uid": "uid-static"})).unwrap());
                informers.persistent_volumes.upsert(pv);
                let provisioned = json!({"capacity": {"storage": "1Gi"}, "storageClassName": "standard", "nodeAffinity": pinned_to("n1")});
                informers.persistent_volumes.upsert(volume("pvc-uid-fresh", provisioned, "Bound").as_ref().clone());
                let done = |name: &str, pv: &str, class: &str, extra: serde_json::Value| {
                    let mut ann = json!({"pv.kubernetes.io/bind-completed": "yes"});
                    if let (Some(a), serde_json::Value::Object(e)) = (ann.as_object_mut(), extra) {
                        a.extend(e);
                    }
                    claim_with(name, json!({"resourceVersion": "11", "annotations": ann}), json!({"storageClassName": class, "volumeName": pv}), json!({"phase": "Bound"}))
                };
                informers.persistent_volume_claims.upsert(done("static", "local-pv", "local", json!({})));
                informers.persistent_volume_claims.upsert(done("fresh", "pvc-uid-fresh", "standard", json!({ANN_SELECTED_NODE: "n1"})));
                informers.notify_volume_change();
            }
        };
        let (s, ()) = tokio::join!(plugin.pre_bind(&state, &p, "n1"), controller);
        assert!(s.is_success(), "{s:?}");
        let writes = writes.lock().unwrap();
        assert!(writes[0].starts_with("PUT persistentvolumes/local-pv ") && writes[0].contains("\"claimRef\""), "{}", writes[0]);
        assert!(writes[1].starts_with("PUT default/persistentvolumeclaims/fresh ") && writes[1].contains("\"volume.kubernetes.io/selected-node\":\"n1\""), "{}", writes[1]);
    }
}
