//! Mirrors kube-scheduler's volumebinding/binder.go (the SchedulerVolumeBinder): how a pod's
//! PersistentVolumeClaims are matched with PVs or sent to provisioning as part of scheduling, so
//! that a PV's node affinity weighs in the choice of node like the pod's own requirements.
//!
//! Its place in a pod's cycles:
//! 1. PreFilter — [`VolumeBinder::get_pod_volume_claims`]: the pod's claims split into bound,
//!    unbound with delayed binding (WaitForFirstConsumer) and unbound immediate ones.
//! 2. Filter, per node — [`find_pod_volumes`]: bound claims' PVs must admit the node; each unbound
//!    delayed claim needs an available PV that admits the node, or a class that can provision
//!    there. The answer (which PV for which claim, which claims to provision) is kept per node.
//! 3. Reserve — [`VolumeBinder::assume_pod_volumes`]: for the chosen node, the PVs bound to their
//!    claims and the claims annotated with the selected node are *assumed* in memory.
//! 4. PreBind — [`VolumeBinder::bind_pod_volumes`]: the API writes (PV claimRef; the claim's
//!    `volume.kubernetes.io/selected-node`), then a wait until the PV controller (and the external
//!    provisioner) have bound every claim, checked by [`check_bindings`] after each PV/PVC change.
//!    The wait fails on the bind timeout, or when the provisioner removes the selected-node
//!    annotation (its signal that provisioning failed there).

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, PostParams};

use super::assume_cache::{AssumeCache, version};
use crate::informers::{Informers, Lister, key};
use crate::plugins::pv_helpers::{
    ANN_SELECTED_NODE, NOT_SUPPORTED_PROVISIONER, NodeRef, bind_volume_to_claim, check_node_affinity, claim_class, find_matching_volume, is_claim_fully_bound,
    is_delay_binding_mode, match_topology_selector_terms, requested_storage,
};

/// Filter's reasons (kube-scheduler's ConflictReasons), as users see them.
pub const ERR_REASON_BIND_CONFLICT: &str = "node(s) didn't find available persistent volumes to bind";
pub const ERR_REASON_NODE_CONFLICT: &str = "node(s) had volume node affinity conflict";
pub const ERR_REASON_PV_NOT_EXIST: &str = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)";

/// A pod's claims, split as step 1 does.
#[derive(Clone, Debug, Default)]
pub struct PodVolumeClaims {
    pub bound: Vec<Arc<PersistentVolumeClaim>>,
    /// Unbound, in a WaitForFirstConsumer class: the scheduler binds or provisions them.
    pub unbound_delay_binding: Vec<Arc<PersistentVolumeClaim>>,
    /// Unbound otherwise (or pre-bound to a PV by name): the PV controller must bind them first.
    pub unbound_immediate: Vec<Arc<PersistentVolumeClaim>>,
}

/// A PV chosen for a claim.
#[derive(Clone, Debug)]
pub struct BindingInfo {
    pub pvc: Arc<PersistentVolumeClaim>,
    pub pv: Arc<PersistentVolume>,
}

/// What a node needs done for the pod's volumes (step 2's answer).
#[derive(Clone, Debug, Default)]
pub struct PodVolumes {
    /// Claims that bind to existing PVs.
    pub static_bindings: Vec<BindingInfo>,
    /// Claims to provision on the node.
    pub dynamic_provisions: Vec<Arc<PersistentVolumeClaim>>,
}

fn claim_key(pvc: &PersistentVolumeClaim) -> String {
    key(pvc)
}

fn pv_name(pv: &PersistentVolume) -> &str {
    pv.metadata.name.as_deref().unwrap_or("")
}

/// The claims a pod's volumes name, in volume order.
pub fn pod_claim_names(pod: &Pod) -> impl Iterator<Item = &str> {
    pod.spec.iter().flat_map(|s| s.volumes.iter().flatten()).filter_map(|v| v.persistent_volume_claim.as_ref().map(|c| c.claim_name.as_str()))
}

/// Step 2 for one node (FindPodVolumes), on the PVs as of the cycle's start (`pvs`, assumptions
/// applied) and the classes. Returns the node's PodVolumes, or the reasons it does not fit, or an
/// error (a claim without a class or with a missing class where provisioning is needed, a bad
/// claim selector).
pub fn find_pod_volumes(
    claims: &PodVolumeClaims,
    pvs: &[Arc<PersistentVolume>],
    class: &dyn Fn(&str) -> Option<Arc<StorageClass>>,
    node: &NodeRef<'_>,
) -> Result<Result<PodVolumes, Vec<&'static str>>, String> {
    let mut reasons = Vec::new();
    // Step 2a: the PVs of bound claims must exist and admit the node.
    for pvc in &claims.bound {
        let name = pvc.spec.as_ref().and_then(|s| s.volume_name.as_deref()).unwrap_or("");
        match pvs.iter().find(|pv| pv_name(pv) == name) {
            None => {
                reasons.push(ERR_REASON_PV_NOT_EXIST);
                break;
            }
            Some(pv) if check_node_affinity(pv, node.name, node.labels).is_err() => {
                reasons.push(ERR_REASON_NODE_CONFLICT);
                break;
            }
            Some(_) => {}
        }
    }
    if !reasons.is_empty() {
        return Ok(Err(reasons));
    }
    let mut out = PodVolumes::default();
    if claims.unbound_delay_binding.is_empty() {
        return Ok(Ok(out));
    }
    // Step 2b: claims the scheduler already sent to provisioning fit only their selected node.
    let mut to_match = Vec::new();
    let mut to_provision = Vec::new();
    for pvc in &claims.unbound_delay_binding {
        match pvc.metadata.annotations.as_ref().and_then(|a| a.get(ANN_SELECTED_NODE)) {
            Some(selected) if selected != node.name => return Ok(Err(vec![ERR_REASON_BIND_CONFLICT])),
            Some(_) => to_provision.push(pvc.clone()),
            None => to_match.push(pvc.clone()),
        }
    }
    // Step 2c: an available PV for each of the others, smallest requests first (so the smallest
    // PVs go to the smallest claims); those without one are left to provisioning.
    to_match.sort_by_key(|c| requested_storage(c));
    let mut chosen = HashSet::new();
    for pvc in to_match {
        let class_name = claim_class(&pvc);
        let of_class: Vec<Arc<PersistentVolume>> =
            pvs.iter().filter(|pv| crate::plugins::pv_helpers::volume_class(pv) == class_name).cloned().collect();
        match find_matching_volume(&pvc, &of_class, Some(node), &chosen, true)? {
            Some(pv) => {
                chosen.insert(pv_name(&pv).to_string());
                out.static_bindings.push(BindingInfo { pvc, pv });
            }
            None => to_provision.push(pvc),
        }
    }
    // Step 2d: the rest must be provisionable on this node (checkVolumeProvisions).
    for pvc in to_provision {
        let class_name = claim_class(&pvc);
        if class_name.is_empty() {
            return Err(format!("no class for claim {:?}", claim_key(&pvc)));
        }
        let Some(class) = class(class_name) else { return Err(format!("failed to find storage class {class_name:?}")) };
        if class.provisioner.is_empty() || class.provisioner == NOT_SUPPORTED_PROVISIONER {
            return Ok(Err(vec![ERR_REASON_BIND_CONFLICT]));
        }
        if !match_topology_selector_terms(class.allowed_topologies.as_deref(), node.labels) {
            return Ok(Err(vec![ERR_REASON_BIND_CONFLICT]));
        }
        out.dynamic_provisions.push(pvc);
    }
    Ok(Ok(out))
}

/// Step 4's test after each change (checkBindings): `Ok(true)` when every claim the pod's
/// bindings and provisions touched is fully bound, `Ok(false)` to keep waiting, an error when the
/// binding was undone and scheduling must be retried. It reads the informers' objects — what the
/// API server said — never the assumptions.
pub fn check_bindings(
    pvs: &Lister<PersistentVolume>,
    pvcs: &Lister<PersistentVolumeClaim>,
    node: &NodeRef<'_>,
    bindings: &[BindingInfo],
    provisions: &[Arc<PersistentVolumeClaim>],
) -> Result<bool, String> {
    for b in bindings {
        let Some(pv) = pvs.get(pv_name(&b.pv)) else { return Err(format!("failed to check binding: persistentvolume {:?} not found", pv_name(&b.pv))) };
        let Some(pvc) = pvcs.get(&claim_key(&b.pvc)) else {
            return Err(format!("failed to check binding: persistentvolumeclaim {:?} not found", claim_key(&b.pvc)))
        };
        // Our own write has not reached the informer yet.
        if version(b.pv.as_ref()) > version(pv.as_ref()) {
            return Ok(false);
        }
        if let Err(e) = check_node_affinity(&pv, node.name, node.labels) {
            return Err(format!("pv {:?} node affinity doesn't match node {:?}: {e}", pv_name(&pv), node.name));
        }
        let claim_ref_uid = pv.spec.as_ref().and_then(|s| s.claim_ref.as_ref()).and_then(|r| r.uid.as_deref()).unwrap_or("");
        if claim_ref_uid.is_empty() {
            return Err(format!("ClaimRef got reset for pv {:?}", pv_name(&pv)));
        }
        if !is_claim_fully_bound(&pvc) {
            return Ok(false);
        }
    }
    for claim in provisions {
        let Some(pvc) = pvcs.get(&claim_key(claim)) else {
            return Err(format!("failed to check provisioning pvc: persistentvolumeclaim {:?} not found", claim_key(claim)))
        };
        if version(claim.as_ref()) > version(pvc.as_ref()) {
            return Ok(false);
        }
        // The provisioner removes the annotation to say it could not provision there.
        let selected = pvc.metadata.annotations.as_ref().and_then(|a| a.get(ANN_SELECTED_NODE));
        if selected.map(String::as_str) != Some(node.name) {
            return Err(format!("provisioning failed for PVC {:?}", pvc.metadata.name.as_deref().unwrap_or("")));
        }
        let volume = pvc.spec.as_ref().and_then(|s| s.volume_name.as_deref()).unwrap_or("");
        if !volume.is_empty() {
            // The PV may not have reached the informer yet: wait for it.
            let Some(pv) = pvs.get(volume) else { return Ok(false) };
            if let Err(e) = check_node_affinity(&pv, node.name, node.labels) {
                return Err(format!("pv {:?} node affinity doesn't match node {:?}: {e}", pv_name(&pv), node.name));
            }
        }
        if !is_claim_fully_bound(&pvc) {
            return Ok(false);
        }
    }
    Ok(true)
}

/// The binder: the assume caches over the PV and PVC informers, and the client for step 4.
pub struct VolumeBinder {
    pub informers: Informers,
    pub pv_cache: AssumeCache<PersistentVolume>,
    pub pvc_cache: AssumeCache<PersistentVolumeClaim>,
    client: Option<kube::Client>,
    bind_timeout: Duration,
}

impl VolumeBinder {
    pub fn new(informers: &Informers, client: Option<kube::Client>, bind_timeout: Duration) -> VolumeBinder {
        VolumeBinder {
            pv_cache: AssumeCache::new(informers.persistent_volumes.clone()),
            pvc_cache: AssumeCache::new(informers.persistent_volume_claims.clone()),
            informers: informers.clone(),
            client,
            bind_timeout,
        }
    }

    pub fn class(&self, name: &str) -> Option<Arc<StorageClass>> {
        self.informers.storage_classes.get(name)
    }

    /// Step 1 (GetPodVolumeClaims): the pod's claims, as the assume cache has them, split.
    pub fn get_pod_volume_claims(&self, pod: &Pod) -> Result<PodVolumeClaims, String> {
        let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
        let mut out = PodVolumeClaims::default();
        for name in pod_claim_names(pod) {
            let Some(pvc) = self.pvc_cache.get(&format!("{ns}/{name}")) else { return Err(format!("persistentvolumeclaim {name:?} not found")) };
            if is_claim_fully_bound(&pvc) {
                out.bound.push(pvc);
                continue;
            }
            let delay = is_delay_binding_mode(&pvc, self.class(claim_class(&pvc)).as_deref())?;
            let prebound = pvc.spec.as_ref().and_then(|s| s.volume_name.as_deref()).is_some_and(|v| !v.is_empty());
            if delay && !prebound {
                out.unbound_delay_binding.push(pvc);
            } else {
                out.unbound_immediate.push(pvc);
            }
        }
        Ok(out)
    }

    /// Whether every claim of the pod is fully bound already (arePodVolumesBound).
    fn pod_volumes_bound(&self, pod: &Pod) -> bool {
        let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
        pod_claim_names(pod).all(|name| self.pvc_cache.get(&format!("{ns}/{name}")).is_some_and(|c| is_claim_fully_bound(&c)))
    }

    /// Step 3 (AssumePodVolumes): assumes the node's bindings and provisions; returns whether
    /// everything was bound already, and the PodVolumes with the assumed objects (what step 4
    /// writes).
    pub fn assume_pod_volumes(&self, pod: &Pod, node: &str, volumes: &PodVolumes) -> Result<(bool, PodVolumes), String> {
        if self.pod_volumes_bound(pod) {
            return Ok((true, volumes.clone()));
        }
        let mut out = PodVolumes::default();
        for b in &volumes.static_bindings {
            let (pv, dirty) = bind_volume_to_claim(&b.pv, &b.pvc);
            if dirty && let Err(e) = self.pv_cache.assume(pv.clone()) {
                self.revert_assumed_pod_volumes(&out);
                return Err(e);
            }
            out.static_bindings.push(BindingInfo { pvc: b.pvc.clone(), pv: Arc::new(pv) });
        }
        for claim in &volumes.dynamic_provisions {
            let mut c = claim.as_ref().clone();
            c.metadata.annotations.get_or_insert_default().insert(ANN_SELECTED_NODE.into(), node.into());
            if let Err(e) = self.pvc_cache.assume(c.clone()) {
                self.revert_assumed_pod_volumes(&out);
                return Err(e);
            }
            out.dynamic_provisions.push(Arc::new(c));
        }
        Ok((false, out))
    }

    /// Unreserve (RevertAssumedPodVolumes).
    pub fn revert_assumed_pod_volumes(&self, volumes: &PodVolumes) {
        for b in &volumes.static_bindings {
            self.pv_cache.restore(pv_name(&b.pv));
        }
        for c in &volumes.dynamic_provisions {
            self.pvc_cache.restore(&claim_key(c));
        }
    }

    /// Step 4 (BindPodVolumes): the API writes, then the wait.
    pub async fn bind_pod_volumes(&self, pod: &Pod, node: &str, node_labels: &BTreeMap<String, String>, volumes: &PodVolumes) -> Result<(), String> {
        let Some(client) = &self.client else { return Err("no API client to bind volumes with".into()) };
        // Subscribe before writing, so that no change after the writes goes unseen.
        let changes = self.informers.subscribe_volume_changes();
        let pod_key = format!("{}/{}", pod.metadata.namespace.as_deref().unwrap_or(""), pod.metadata.name.as_deref().unwrap_or(""));
        // Step 4a: bind each chosen PV to its claim (the PV controller completes the claim side).
        let mut bindings = volumes.static_bindings.clone();
        let mut provisions = volumes.dynamic_provisions.clone();
        let pv_api: Api<PersistentVolume> = Api::all(client.clone());
        for (i, b) in volumes.static_bindings.iter().enumerate() {
            tracing::info!(target: "scheduler::volumebinding", pod = pod_key, pv = pv_name(&b.pv), pvc = claim_key(&b.pvc), "Claim bound to volume");
            match pv_api.replace(pv_name(&b.pv), &PostParams::default(), &b.pv).await {
                Ok(pv) => bindings[i].pv = Arc::new(pv),
                Err(e) => {
                    self.revert_assumed_pod_volumes(&PodVolumes { static_bindings: volumes.static_bindings[i..].to_vec(), dynamic_provisions: provisions });
                    return Err(format!("binding persistentvolume {:?}: {e}", pv_name(&b.pv)));
                }
            }
        }
        // Step 4b: ask for provisioning on the node (the PV controller and the provisioner do the rest).
        for (i, c) in volumes.dynamic_provisions.iter().enumerate() {
            let ns = c.metadata.namespace.as_deref().unwrap_or("default");
            let api: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), ns);
            tracing::info!(target: "scheduler::volumebinding", pod = pod_key, pvc = claim_key(c), node, "selected node for provisioning");
            match api.replace(c.metadata.name.as_deref().unwrap_or(""), &PostParams::default(), c).await {
                Ok(pvc) => provisions[i] = Arc::new(pvc),
                Err(e) => {
                    self.revert_assumed_pod_volumes(&PodVolumes { static_bindings: Vec::new(), dynamic_provisions: volumes.dynamic_provisions[i..].to_vec() });
                    return Err(format!("updating persistentvolumeclaim {:?}: {e}", claim_key(c)));
                }
            }
        }
        // Step 4c: wait for every claim to be bound, or for a reason to give up.
        self.wait_for_bindings(changes, &NodeRef { name: node, labels: node_labels }, &bindings, &provisions).await?;
        tracing::info!(target: "scheduler::volumebinding", pod = pod_key, "all PVCs for pod are bound");
        Ok(())
    }

    /// Step 4c: [`check_bindings`] now and after every PV or claim change reported on `changes`,
    /// until it says done or fails, or the bind timeout passes.
    pub async fn wait_for_bindings(
        &self,
        mut changes: tokio::sync::watch::Receiver<u64>,
        node: &NodeRef<'_>,
        bindings: &[BindingInfo],
        provisions: &[Arc<PersistentVolumeClaim>],
    ) -> Result<(), String> {
        let deadline = tokio::time::Instant::now() + self.bind_timeout;
        loop {
            match check_bindings(&self.informers.persistent_volumes, &self.informers.persistent_volume_claims, node, bindings, provisions) {
                Ok(true) => return Ok(()),
                Ok(false) => {}
                Err(e) => return Err(format!("binding volumes: {e}")),
            }
            tokio::select! {
                r = changes.changed() => if r.is_err() {
                    return Err("binding volumes: the informers stopped".into());
                },
                () = tokio::time::sleep_until(deadline) => {
                    return Err(format!("binding volumes: timed out waiting for the condition after {}s", self.bind_timeout.as_secs()));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugins::pv_helpers::testing::*;
    use serde_json::json;

    const DRIVER: &str = "hostpath.csi.kubelab.io";

    fn classes() -> impl Fn(&str) -> Option<Arc<StorageClass>> {
        |name: &str| match name {
            "standard" => Some(Arc::new(class("standard", DRIVER, "WaitForFirstConsumer"))),
            "local" => Some(Arc::new(class("local", NOT_SUPPORTED_PROVISIONER, "WaitForFirstConsumer"))),
            _ => None,
        }
    }

    fn claims(bound: Vec<PersistentVolumeClaim>, delayed: Vec<PersistentVolumeClaim>) -> PodVolumeClaims {
        PodVolumeClaims {
            bound: bound.into_iter().map(Arc::new).collect(),
            unbound_delay_binding: delayed.into_iter().map(Arc::new).collect(),
            unbound_immediate: Vec::new(),
        }
    }

    fn local_pv(name: &str, node: &str) -> Arc<PersistentVolume> {
        volume(name, json!({"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "local", "nodeAffinity": pinned_to(node)}), "Available")
    }

    /// What `find_pod_volumes` decided: reasons, or "static:<pv>…" / "provision:<claim>…".
    fn outcome(r: Result<Result<PodVolumes, Vec<&'static str>>, String>) -> String {
        match r {
            Err(e) => format!("error: {e}"),
            Ok(Err(reasons)) => reasons.join("; "),
            Ok(Ok(v)) => {
                let mut parts: Vec<String> = v.static_bindings.iter().map(|b| format!("static:{}", pv_name(&b.pv))).collect();
                parts.extend(v.dynamic_provisions.iter().map(|c| format!("provision:{}", c.metadata.name.as_deref().unwrap_or(""))));
                parts.join(",")
            }
        }
    }

    #[test]
    fn find_pod_volumes_table() {
        let rwo = json!(["ReadWriteOnce"]);
        let bound_to = |pv: &str| {
            claim_with("data", json!({"annotations": {"pv.kubernetes.io/bind-completed": "yes"}}), json!({"volumeName": pv, "storageClassName": "standard"}), json!({"phase": "Bound"}))
        };
        let wffc = |class: &str| claim("data", json!({"accessModes": rwo, "storageClassName": class, "resources": {"requests": {"storage": "1Gi"}}}));
        let selected = |node: &str| {
            claim_with(
                "data",
                json!({"annotations": {ANN_SELECTED_NODE: node}}),
                json!({"accessModes": rwo, "storageClassName": "standard", "resources": {"requests": {"storage": "1Gi"}}}),
                json!({}),
            )
        };
        let provisioned_on = |node: &str| volume("pvc-1", json!({"capacity": {"storage": "1Gi"}, "storageClassName": "standard", "nodeAffinity": pinned_to(node)}), "Bound");
        /// (case, claims, PVs, node, expected outcome)
        type Case<'a> = (&'a str, PodVolumeClaims, Vec<Arc<PersistentVolume>>, &'a str, &'a str);
        let cases: Vec<Case> = vec![
            ("bound, PV on this node", claims(vec![bound_to("pvc-1")], vec![]), vec![provisioned_on("n1")], "n1", ""),
            ("bound, PV on another node", claims(vec![bound_to("pvc-1")], vec![]), vec![provisioned_on("n2")], "n1", ERR_REASON_NODE_CONFLICT),
            ("bound, PV gone", claims(vec![bound_to("pvc-1")], vec![]), vec![], "n1", ERR_REASON_PV_NOT_EXIST),
            ("unbound, provisionable", claims(vec![], vec![wffc("standard")]), vec![], "n1", "provision:data"),
            ("unbound, static PV here", claims(vec![], vec![wffc("local")]), vec![local_pv("lpv", "n1")], "n1", "static:lpv"),
            ("unbound, static PV elsewhere, no provisioner", claims(vec![], vec![wffc("local")]), vec![local_pv("lpv", "n2")], "n1", ERR_REASON_BIND_CONFLICT),
            ("unbound, selected for this node", claims(vec![], vec![selected("n1")]), vec![], "n1", "provision:data"),
            ("unbound, selected for another node", claims(vec![], vec![selected("n2")]), vec![], "n1", ERR_REASON_BIND_CONFLICT),
            ("unbound, class missing", claims(vec![], vec![wffc("gone")]), vec![], "n1", "error: failed to find storage class \"gone\""),
        ];
        for (case, c, pvs, node, want) in cases {
            let labels = node_labels(node);
            let got = outcome(find_pod_volumes(&c, &pvs, &classes(), &NodeRef { name: node, labels: &labels }));
            assert_eq!(got, want, "{case}");
        }
    }

    #[test]
    fn two_claims_do_not_share_a_pv() {
        let rwo = json!(["ReadWriteOnce"]);
        let a = claim("a", json!({"accessModes": rwo, "storageClassName": "local", "resources": {"requests": {"storage": "1Gi"}}}));
        let b = claim("b", json!({"accessModes": rwo, "storageClassName": "local", "resources": {"requests": {"storage": "1Gi"}}}));
        let labels = node_labels("n1");
        let node = NodeRef { name: "n1", labels: &labels };
        let one = vec![local_pv("p1", "n1")];
        assert_eq!(outcome(find_pod_volumes(&claims(vec![], vec![a.clone(), b.clone()]), &one, &classes(), &node)), ERR_REASON_BIND_CONFLICT);
        let two = vec![local_pv("p1", "n1"), local_pv("p2", "n1")];
        assert_eq!(outcome(find_pod_volumes(&claims(vec![], vec![a, b]), &two, &classes(), &node)), "static:p1,static:p2");
    }

    #[test]
    fn assume_then_check_bindings() {
        let informers = Informers::default();
        let binder = VolumeBinder::new(&informers, None, Duration::from_secs(600));
        let c = claim("data", json!({"accessModes": ["ReadWriteOnce"], "storageClassName": "standard", "resources": {"requests": {"storage": "1Gi"}}}));
        informers.persistent_volume_claims.upsert(c.clone());
        informers.storage_classes.upsert(class("standard", DRIVER, "WaitForFirstConsumer"));
        let pod: Pod = serde_json::from_value(json!({"metadata": {"name": "p", "namespace": "default"},
            "spec": {"containers": [], "volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": "data"}}]}}))
        .unwrap();
        let split = binder.get_pod_volume_claims(&pod).unwrap();
        assert_eq!(split.unbound_delay_binding.len(), 1);
        let volumes = PodVolumes { static_bindings: Vec::new(), dynamic_provisions: split.unbound_delay_binding.clone() };
        let (all_bound, assumed) = binder.assume_pod_volumes(&pod, "n1", &volumes).unwrap();
        assert!(!all_bound);
        // The next pod's cycle sees the selected node on the claim.
        let seen = binder.pvc_cache.get("default/data").unwrap();
        assert_eq!(seen.metadata.annotations.as_ref().and_then(|a| a.get(ANN_SELECTED_NODE)).map(String::as_str), Some("n1"));

        let labels = node_labels("n1");
        let node = NodeRef { name: "n1", labels: &labels };
        let check = || check_bindings(&informers.persistent_volumes, &informers.persistent_volume_claims, &node, &[], &assumed.dynamic_provisions);
        // The write reached the API server (version 2) with the annotation: keep waiting.
        let mut written = c.clone();
        written.metadata.resource_version = Some("2".into());
        written.metadata.annotations = Some([(ANN_SELECTED_NODE.to_string(), "n1".to_string())].into());
        informers.persistent_volume_claims.upsert(written.clone());
        assert_eq!(check(), Ok(false));
        // Provisioned and bound by the PV controller.
        let mut bound = written.clone();
        bound.metadata.resource_version = Some("3".into());
        bound.metadata.annotations.get_or_insert_default().insert("pv.kubernetes.io/bind-completed".into(), "yes".into());
        bound.spec.get_or_insert_default().volume_name = Some("pvc-uid-data".into());
        informers.persistent_volume_claims.upsert(bound.clone());
        assert_eq!(check(), Ok(false), "the PV is not in the informer yet");
        informers.persistent_volumes.upsert(
            volume("pvc-uid-data", json!({"capacity": {"storage": "1Gi"}, "nodeAffinity": pinned_to("n1")}), "Bound").as_ref().clone(),
        );
        assert_eq!(check(), Ok(true));
        // The provisioner gave up on the node: it removed the annotation.
        let mut undone = written;
        undone.metadata.resource_version = Some("4".into());
        undone.metadata.annotations = None;
        informers.persistent_volume_claims.upsert(undone);
        assert_eq!(check(), Err("provisioning failed for PVC \"data\"".into()));

        binder.revert_assumed_pod_volumes(&assumed);
    }

    /// PreBind's wait: done when the claim binds, failed when the provisioner gives the node up,
    /// failed at the bind timeout (on tokio's paused clock).
    #[tokio::test(start_paused = true)]
    async fn wait_for_bindings_outcomes() {
        let written = claim_with(
            "data",
            json!({"annotations": {ANN_SELECTED_NODE: "n1"}, "resourceVersion": "2"}),
            json!({"storageClassName": "standard"}),
            json!({}),
        );
        let labels = node_labels("n1");
        let node = NodeRef { name: "n1", labels: &labels };
        let provisions = vec![Arc::new(written.clone())];

        // Nobody binds the claim: the timeout ends the wait.
        let informers = Informers::default();
        informers.persistent_volume_claims.upsert(written.clone());
        let binder = VolumeBinder::new(&informers, None, Duration::from_secs(600));
        let start = tokio::time::Instant::now();
        let r = binder.wait_for_bindings(informers.subscribe_volume_changes(), &node, &[], &provisions).await;
        assert_eq!(r, Err("binding volumes: timed out waiting for the condition after 600s".into()));
        assert_eq!(start.elapsed(), Duration::from_secs(600));

        // The provisioner and the PV controller bind it after a while.
        let informers = Informers::default();
        informers.persistent_volume_claims.upsert(written.clone());
        let binder = VolumeBinder::new(&informers, None, Duration::from_secs(600));
        let changes = informers.subscribe_volume_changes();
        let mut bound = written.clone();
        bound.metadata.resource_version = Some("3".into());
        bound.metadata.annotations.get_or_insert_default().insert("pv.kubernetes.io/bind-completed".into(), "yes".into());
        bound.spec.get_or_insert_default().volume_name = Some("pvc-1".into());
        let controller = {
            let informers = informers.clone();
            async move {
                tokio::time::sleep(Duration::from_secs(5)).await;
                informers.persistent_volumes.upsert(volume("pvc-1", json!({"nodeAffinity": pinned_to("n1")}), "Bound").as_ref().clone());
                informers.notify_volume_change();
                informers.persistent_volume_claims.upsert(bound);
                informers.notify_volume_change();
            }
        };
        let (r, ()) = tokio::join!(binder.wait_for_bindings(changes, &node, &[], &provisions), controller);
        assert_eq!(r, Ok(()));

        // The provisioner removes the selected node: the wait fails at once.
        let informers = Informers::default();
        informers.persistent_volume_claims.upsert(written.clone());
        let binder = VolumeBinder::new(&informers, None, Duration::from_secs(600));
        let changes = informers.subscribe_volume_changes();
        let mut undone = written;
        undone.metadata.resource_version = Some("3".into());
        undone.metadata.annotations = None;
        let provisioner = {
            let informers = informers.clone();
            async move {
                tokio::time::sleep(Duration::from_secs(1)).await;
                informers.persistent_volume_claims.upsert(undone);
                informers.notify_volume_change();
            }
        };
        let (r, ()) = tokio::join!(binder.wait_for_bindings(changes, &node, &[], &provisions), provisioner);
        assert_eq!(r, Err("binding volumes: provisioning failed for PVC \"data\"".into()));
    }
}
