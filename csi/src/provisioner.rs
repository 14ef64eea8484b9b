//! Mirrors kubernetes-csi/external-provisioner (pkg/controller/controller.go, on
//! sig-storage-lib-external-provisioner's controller.go) in node-deployment mode: one provisioner
//! per node, beside the driver, making volumes for the claims that land on its node and deleting
//! them when they are released.
//!
//! Claims (the lib's claim queue, here a kube-runtime controller on PersistentVolumeClaims):
//! 1. Only unbound claims the PV binder handed to this driver (`volume.kubernetes.io/storage-provisioner`,
//!    or the beta annotation) whose StorageClass names it as provisioner ([`decide_claim`]).
//! 2. Node deployment: the claim must be for this node — `volume.kubernetes.io/selected-node` is
//!    this node (set by the scheduler for WaitForFirstConsumer). An Immediate claim with no node yet
//!    is taken by setting the annotation to this node, guarded by the claim's resourceVersion so that
//!    only one node's provisioner wins.
//! 3. A PV `pvc-<claim uid>` already there means the work is done (the binder binds it).
//! 4. Event `Provisioning`; CSI CreateVolume on the driver's own socket: name `pvc-<claim uid>`,
//!    capacity = the request, capabilities from the access modes, parameters = the class's (without
//!    the `csi.storage.k8s.io/` keys), accessibility = this node's topology.
//! 5. The PV ([`build_pv`]): spec.csi {driver, volumeHandle, fsType, volumeAttributes}, capacity,
//!    access modes, reclaim policy and mount options of the class, claimRef, node affinity from the
//!    volume's topology, `pv.kubernetes.io/provisioned-by` and the provisioner's finalizer.
//! 6. Event `ProvisioningSucceeded` ("Successfully provisioned volume pvc-…"), or on any failure
//!    `ProvisioningFailed` and a retry.
//!
//! Volumes (the lib's volume queue, a controller on PersistentVolumes):
//! 1. A PV this driver provisioned on this node, `Released`, with reclaim policy Delete
//!    ([`should_delete`]).
//! 2. CSI DeleteVolume (`VolumeFailedDelete` event and a retry on failure: the driver refuses while
//!    the volume is still attached), then the PV is deleted and the finalizer removed.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::{
    CSIPersistentVolumeSource, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, ObjectReference, PersistentVolume,
    PersistentVolumeClaim, PersistentVolumeSpec, VolumeNodeAffinity,
};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use proto::csi::v1 as csi;
use proto::csi::v1::controller_client::ControllerClient;
use serde_json::json;
use tonic::transport::Channel;

use crate::{capability, connection};
use crate::error::{Error, Result};

const TARGET: &str = "csi::provisioner";

pub const ANN_STORAGE_PROVISIONER: &str = "volume.kubernetes.io/storage-provisioner";
pub const ANN_BETA_STORAGE_PROVISIONER: &str = "volume.beta.kubernetes.io/storage-provisioner";
pub const ANN_SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";
pub const ANN_PROVISIONED_BY: &str = "pv.kubernetes.io/provisioned-by";
/// Keeps a provisioned PV until the provisioner has deleted its volume.
pub const FINALIZER: &str = "external-provisioner.volume.kubernetes.io/finalizer";
/// StorageClass parameters with this prefix are for the sidecars, not the driver.
pub const CSI_PARAMETER_PREFIX: &str = "csi.storage.k8s.io/";
pub const PARAM_FSTYPE: &str = "csi.storage.k8s.io/fstype";
pub const DEFAULT_FSTYPE: &str = "ext4";

pub const REASON_PROVISIONING: &str = "Provisioning";
pub const REASON_PROVISIONING_SUCCEEDED: &str = "ProvisioningSucceeded";
pub const REASON_PROVISIONING_FAILED: &str = "ProvisioningFailed";
pub const REASON_VOLUME_FAILED_DELETE: &str = "VolumeFailedDelete";

/// How long a failed claim or volume waits before it is tried again.
pub const RETRY: Duration = Duration::from_secs(5);

/// What to do with a claim ([`decide_claim`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClaimDecision {
    /// Not this provisioner's business (now): why.
    Ignore(&'static str),
    /// An Immediate claim with no node yet: take it for this node.
    SelectThisNode,
    /// Make its volume.
    Provision,
}

fn annotation<'a>(meta: &'a ObjectMeta, key: &str) -> Option<&'a str> {
    meta.annotations.as_ref()?.get(key).map(String::as_str)
}

/// Steps 1 and 2 for a claim and its class.
pub fn decide_claim(claim: &PersistentVolumeClaim, class: &StorageClass, driver: &str, node: &str) -> ClaimDecision {
    let meta = &claim.metadata;
    if claim.spec.as_ref().and_then(|s| s.volume_name.as_deref()).is_some_and(|v| !v.is_empty()) {
        return ClaimDecision::Ignore("bound");
    }
    if meta.deletion_timestamp.is_some() {
        return ClaimDecision::Ignore("being deleted");
    }
    let provisioner = annotation(meta, ANN_STORAGE_PROVISIONER).or_else(|| annotation(meta, ANN_BETA_STORAGE_PROVISIONER));
    if provisioner != Some(driver) || class.provisioner != driver {
        return ClaimDecision::Ignore("another provisioner's");
    }
    match annotation(meta, ANN_SELECTED_NODE) {
        Some(n) if n == node => ClaimDecision::Provision,
        Some(_) => ClaimDecision::Ignore("selected for another node"),
        None if class.volume_binding_mode.as_deref() == Some("WaitForFirstConsumer") => ClaimDecision::Ignore("waiting for the scheduler"),
        None => ClaimDecision::SelectThisNode,
    }
}

/// Step 1 of the volume queue.
pub fn should_delete(pv: &PersistentVolume, driver: &str, node: &str) -> bool {
    let released = pv.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Released");
    let Some(spec) = pv.spec.as_ref() else { return false };
    let delete = spec.persistent_volume_reclaim_policy.as_deref() == Some("Delete");
    let ours = annotation(&pv.metadata, ANN_PROVISIONED_BY) == Some(driver)
        && spec.csi.as_ref().is_some_and(|c| c.driver == driver);
    released && delete && ours && pv_node(spec).as_deref() == Some(node)
}

/// The node a PV's affinity names under the driver's topology key (where its directory is).
fn pv_node(spec: &PersistentVolumeSpec) -> Option<String> {
    let terms = &spec.node_affinity.as_ref()?.required.as_ref()?.node_selector_terms;
    terms
        .iter()
        .flat_map(|t| t.match_expressions.iter().flatten())
        .find(|e| e.key == crate::TOPOLOGY_KEY && e.operator == "In")
        .and_then(|e| e.values.as_ref()?.first().cloned())
}

/// Bytes as Kubernetes prints a binary quantity: `1Gi` when exact, plain bytes otherwise.
pub fn format_bytes(bytes: i64) -> String {
    const UNITS: [(&str, i64); 5] = [("Pi", 1 << 50), ("Ti", 1 << 40), ("Gi", 1 << 30), ("Mi", 1 << 20), ("Ki", 1 << 10)];
    for (suffix, unit) in UNITS {
        if bytes != 0 && bytes % unit == 0 {
            return format!("{}{suffix}", bytes / unit);
        }
    }
    bytes.to_string()
}

/// The claim's storage request in bytes.
fn requested_bytes(claim: &PersistentVolumeClaim) -> Result<i64> {
    let q = claim
        .spec
        .as_ref()
        .and_then(|s| s.resources.as_ref()?.requests.as_ref()?.get("storage"))
        .ok_or_else(|| Error::InvalidArgument("claim has no storage request (spec.resources.requests.storage)".into()))?;
    apimachinery::resource::parse_quantity_units(&q.0).ok_or_else(|| Error::InvalidArgument(format!("storage request {:?} is not a quantity", q.0)))
}

/// Step 4's CreateVolume request.
pub fn create_volume_request(claim: &PersistentVolumeClaim, class: &StorageClass, node: &str) -> Result<csi::CreateVolumeRequest> {
    let spec = claim.spec.as_ref().ok_or_else(|| Error::InvalidArgument("claim has no spec".into()))?;
    let uid = claim.metadata.uid.as_deref().ok_or_else(|| Error::InvalidArgument("claim has no uid".into()))?;
    let params = class.parameters.clone().unwrap_or_default();
    let fs_type = params.get(PARAM_FSTYPE).map_or(DEFAULT_FSTYPE, String::as_str);
    let block = spec.volume_mode.as_deref() == Some("Block");
    let mount_options = class.mount_options.clone().unwrap_or_default();
    let modes = spec.access_modes.clone().unwrap_or_default();
    if modes.is_empty() {
        return Err(Error::InvalidArgument("claim has no access modes".into()));
    }
    let volume_capabilities = modes
        .iter()
        .map(|m| {
            let mode = capability::csi_access_mode(m).ok_or_else(|| Error::InvalidArgument(format!("access mode {m:?} not supported")))?;
            Ok(capability::capability(mode, block, fs_type, &mount_options))
        })
        .collect::<Result<Vec<_>>>()?;
    let topology = crate::hostpath::node_topology(node);
    Ok(csi::CreateVolumeRequest {
        name: format!("pvc-{uid}"),
        capacity_range: Some(csi::CapacityRange { required_bytes: requested_bytes(claim)?, limit_bytes: 0 }),
        volume_capabilities,
        parameters: params.into_iter().filter(|(k, _)| !k.starts_with(CSI_PARAMETER_PREFIX)).collect(),
        secrets: Default::default(),
        volume_content_source: None,
        accessibility_requirements: Some(csi::TopologyRequirement { requisite: vec![topology.clone()], preferred: vec![topology] }),
    })
}

/// Step 5: the PV for a claim and the volume the driver made.
pub fn build_pv(claim: &PersistentVolumeClaim, class: &StorageClass, volume: &csi::Volume, driver: &str) -> Result<PersistentVolume> {
    let spec = claim.spec.as_ref().ok_or_else(|| Error::InvalidArgument("claim has no spec".into()))?;
    let uid = claim.metadata.uid.clone().ok_or_else(|| Error::InvalidArgument("claim has no uid".into()))?;
    let params = class.parameters.clone().unwrap_or_default();
    let capacity = if volume.capacity_bytes > 0 { volume.capacity_bytes } else { requested_bytes(claim)? };
    let terms: Vec<NodeSelectorTerm> = volume
        .accessible_topology
        .iter()
        .map(|t| {
            let mut segments: Vec<(&String, &String)> = t.segments.iter().collect();
            segments.sort();
            NodeSelectorTerm {
                match_expressions: Some(
                    segments
                        .into_iter()
                        .map(|(k, v)| NodeSelectorRequirement { key: k.clone(), operator: "In".into(), values: Some(vec![v.clone()]) })
                        .collect(),
                ),
                match_fields: None,
            }
        })
        .collect();
    let attributes: BTreeMap<String, String> = volume.volume_context.clone().into_iter().collect();
    let reclaim_policy = class.reclaim_policy.clone().unwrap_or_else(|| "Delete".into());
    // The finalizer keeps a volume the provisioner must delete from going before the provisioner
    // has (HonorPVReclaimPolicy); a volume it will never delete (Retain) gets none.
    let finalizers = (reclaim_policy == "Delete").then(|| vec![FINALIZER.to_string()]);
    Ok(PersistentVolume {
        metadata: ObjectMeta {
            name: Some(format!("pvc-{uid}")),
            annotations: Some(BTreeMap::from([(ANN_PROVISIONED_BY.to_string(), driver.to_string())])),
            finalizers,
            ..Default::default()
        },
        spec: Some(PersistentVolumeSpec {
            access_modes: spec.access_modes.clone(),
            capacity: Some(BTreeMap::from([("storage".to_string(), Quantity(format_bytes(capacity)))])),
            claim_ref: Some(ObjectReference {
                api_version: Some("v1".into()),
                kind: Some("PersistentVolumeClaim".into()),
                namespace: claim.metadata.namespace.clone(),
                name: claim.metadata.name.clone(),
                uid: Some(uid),
                ..Default::default()
            }),
            csi: Some(CSIPersistentVolumeSource {
                driver: driver.to_string(),
                volume_handle: volume.volume_id.clone(),
                fs_type: Some(params.get(PARAM_FSTYPE).cloned().unwrap_or_else(|| DEFAULT_FSTYPE.to_string())),
                volume_attributes: (!attributes.is_empty()).then_some(attributes),
                ..Default::default()
            }),
            mount_options: class.mount_options.clone(),
            node_affinity: (!terms.is_empty()).then_some(VolumeNodeAffinity { required: Some(NodeSelector { node_selector_terms: terms }) }),
            persistent_volume_reclaim_policy: Some(reclaim_policy),
            storage_class_name: class.metadata.name.clone(),
            volume_mode: Some(spec.volume_mode.clone().unwrap_or_else(|| "Filesystem".into())),
            ..Default::default()
        }),
        status: None,
    })
}

/// What both queues share.
pub struct Provisioner {
    pub client: kube::Client,
    pub csi: ControllerClient<Channel>,
    pub driver: String,
    pub node: String,
    pub recorder: client::record::EventRecorder,
}

/// Whether the driver's CreateVolume failure is final for this node (external-provisioner's
/// ProvisioningFinished): any gRPC code but those that say "try again" — the call timed out or
/// was cut (DeadlineExceeded, Unavailable, Canceled, Aborted), or is still going.
fn is_final(e: &Error) -> bool {
    use tonic::Code;
    matches!(e, Error::Csi { status, .. } if !matches!(status.code(), Code::DeadlineExceeded | Code::Unavailable | Code::Cancelled | Code::Aborted))
}

fn claim_key(claim: &PersistentVolumeClaim) -> String {
    format!("{}/{}", claim.metadata.namespace.as_deref().unwrap_or_default(), claim.metadata.name.as_deref().unwrap_or_default())
}

fn is_status(e: &kube::Error, code: u16) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == code)
}

impl Provisioner {
    fn claim_event(&self, claim: &PersistentVolumeClaim, type_: &'static str, reason: &str, message: String) {
        self.recorder.event(client::record::object_reference("v1", "PersistentVolumeClaim", &claim.metadata), type_, reason, message);
    }

    async fn sync_claim(&self, claim: &PersistentVolumeClaim) -> Result<Action> {
        let Some(class_name) = claim.spec.as_ref().and_then(|s| s.storage_class_name.clone()).filter(|c| !c.is_empty()) else {
            return Ok(Action::await_change());
        };
        // Cheap look before the class is fetched: claims for other provisioners are most.
        let meta = &claim.metadata;
        let provisioner = annotation(meta, ANN_STORAGE_PROVISIONER).or_else(|| annotation(meta, ANN_BETA_STORAGE_PROVISIONER));
        if provisioner != Some(self.driver.as_str()) {
            return Ok(Action::await_change());
        }
        let class = match Api::<StorageClass>::all(self.client.clone()).get(&class_name).await {
            Ok(c) => c,
            Err(e) if is_status(&e, 404) => {
                let msg = format!("storageclass.storage.k8s.io {class_name:?} not found");
                self.claim_event(claim, client::record::WARNING, REASON_PROVISIONING_FAILED, format!("failed to provision volume with StorageClass {class_name:?}: {msg}"));
                return Ok(Action::requeue(RETRY));
            }
            Err(e) => return Err(e.into()),
        };
        match decide_claim(claim, &class, &self.driver, &self.node) {
            ClaimDecision::Ignore(why) => {
                tracing::debug!(target: TARGET, claim = %claim_key(claim), why, "not provisioning");
                Ok(Action::await_change())
            }
            ClaimDecision::SelectThisNode => self.select_this_node(claim).await,
            ClaimDecision::Provision => {
                if let Err(e) = self.provision(claim, &class).await {
                    self.claim_event(claim, client::record::WARNING, REASON_PROVISIONING_FAILED, format!("failed to provision volume with StorageClass {class_name:?}: {e}"));
                    // A final refusal of the driver (not a transient failure) hands a
                    // WaitForFirstConsumer claim back to the scheduler, which may choose another
                    // node: external-provisioner's rescheduleProvisioning.
                    if is_final(&e) && class.volume_binding_mode.as_deref() == Some("WaitForFirstConsumer") {
                        self.reschedule(claim).await?;
                        return Ok(Action::await_change());
                    }
                    return Err(e);
                }
                Ok(Action::await_change())
            }
        }
    }

    /// Removes the claim's `volume.kubernetes.io/selected-node`, so that the scheduler's
    /// VolumeBinding gives up its PreBind and schedules the pod again.
    async fn reschedule(&self, claim: &PersistentVolumeClaim) -> Result<()> {
        let (Some(ns), Some(name)) = (claim.metadata.namespace.as_deref(), claim.metadata.name.as_deref()) else {
            return Ok(());
        };
        let patch = json!({"metadata": {"resourceVersion": claim.metadata.resource_version, "annotations": {ANN_SELECTED_NODE: null}}});
        match Api::<PersistentVolumeClaim>::namespaced(self.client.clone(), ns).patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await {
            Ok(_) => {
                tracing::info!(target: TARGET, claim = %claim_key(claim), node = %self.node, "provisioning failed for good: the claim goes back to the scheduler");
                Ok(())
            }
            Err(e) if is_status(&e, 409) || is_status(&e, 404) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Step 2 for an Immediate claim: the resourceVersion in the patch makes it a compare-and-swap,
    /// so of several nodes' provisioners exactly one sets its node.
    async fn select_this_node(&self, claim: &PersistentVolumeClaim) -> Result<Action> {
        let (Some(ns), Some(name)) = (claim.metadata.namespace.as_deref(), claim.metadata.name.as_deref()) else {
            return Ok(Action::await_change());
        };
        let patch = json!({"metadata": {"resourceVersion": claim.metadata.resource_version, "annotations": {ANN_SELECTED_NODE: self.node}}});
        match Api::<PersistentVolumeClaim>::namespaced(self.client.clone(), ns).patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await {
            Ok(_) => {
                tracing::info!(target: TARGET, claim = %claim_key(claim), node = %self.node, "immediate claim taken for this node");
                Ok(Action::await_change())
            }
            Err(e) if is_status(&e, 409) => Ok(Action::await_change()),
            Err(e) => Err(e.into()),
        }
    }

    /// Steps 3 to 6.
    async fn provision(&self, claim: &PersistentVolumeClaim, class: &StorageClass) -> Result<()> {
        let pvs = Api::<PersistentVolume>::all(self.client.clone());
        let req = create_volume_request(claim, class, &self.node)?;
        // Step 3.
        if pvs.get_opt(&req.name).await?.is_some() {
            return Ok(());
        }
        // Step 4.
        let key = claim_key(claim);
        self.claim_event(claim, client::record::NORMAL, REASON_PROVISIONING, format!("External provisioner is provisioning volume for claim {key:?}"));
        let name = req.name.clone();
        let mut client = self.csi.clone();
        let volume = connection::call("CreateVolume", &self.driver, &name, client.create_volume(req))
            .await?
            .volume
            .ok_or_else(|| Error::InvalidArgument("CreateVolume answered without a volume".into()))?;
        // Step 5.
        let pv = build_pv(claim, class, &volume, &self.driver)?;
        match pvs.create(&PostParams::default(), &pv).await {
            Ok(_) => {}
            Err(e) if is_status(&e, 409) => {}
            Err(e) => return Err(e.into()),
        }
        // Step 6.
        tracing::info!(target: TARGET, claim = %key, volume = %name, handle = %volume.volume_id, "provisioned");
        self.claim_event(claim, client::record::NORMAL, REASON_PROVISIONING_SUCCEEDED, format!("Successfully provisioned volume {name}"));
        Ok(())
    }

    async fn sync_volume(&self, pv: &PersistentVolume) -> Result<Action> {
        if !should_delete(pv, &self.driver, &self.node) {
            return Ok(Action::await_change());
        }
        let name = pv.metadata.name.clone().unwrap_or_default();
        let Some(handle) = pv.spec.as_ref().and_then(|s| s.csi.as_ref()).map(|c| c.volume_handle.clone()) else {
            return Ok(Action::await_change());
        };
        // Step 2: the volume, then the PV object, then the finalizer that kept it.
        let mut client = self.csi.clone();
        let req = csi::DeleteVolumeRequest { volume_id: handle.clone(), secrets: Default::default() };
        if let Err(e) = connection::call("DeleteVolume", &self.driver, &handle, client.delete_volume(req)).await {
            self.recorder.event(
                client::record::object_reference("v1", "PersistentVolume", &pv.metadata),
                client::record::WARNING,
                REASON_VOLUME_FAILED_DELETE,
                e.to_string(),
            );
            return Err(e);
        }
        let pvs = Api::<PersistentVolume>::all(self.client.clone());
        match pvs.delete(&name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(e) if is_status(&e, 404) => return Ok(Action::await_change()),
            Err(e) => return Err(e.into()),
        }
        self.remove_finalizer(&pvs, &name).await?;
        tracing::info!(target: TARGET, volume = %name, handle = %handle, "volume deleted");
        Ok(Action::await_change())
    }

    async fn remove_finalizer(&self, pvs: &Api<PersistentVolume>, name: &str) -> Result<()> {
        let Some(pv) = pvs.get_opt(name).await? else { return Ok(()) };
        let finalizers = pv.metadata.finalizers.clone().unwrap_or_default();
        if !finalizers.iter().any(|f| f == FINALIZER) {
            return Ok(());
        }
        let rest: Vec<&String> = finalizers.iter().filter(|f| *f != FINALIZER).collect();
        let patch = json!({"metadata": {"resourceVersion": pv.metadata.resource_version, "finalizers": rest}});
        match pvs.patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await {
            Ok(_) => Ok(()),
            Err(e) if is_status(&e, 404) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}

/// Runs both queues until `shutdown` completes. The API server may not serve the storage
/// resources yet: the watches retry with backoff until it does.
pub async fn run(p: Arc<Provisioner>, shutdown: impl std::future::Future<Output = ()> + Send + 'static) {
    tracing::info!(target: TARGET, driver = %p.driver, node = %p.node, "external provisioner started (node deployment)");
    let claims = Controller::new(Api::<PersistentVolumeClaim>::all(p.client.clone()), watcher::Config::default())
        .run(
            |claim, p: Arc<Provisioner>| async move { p.sync_claim(&claim).await },
            |claim, e, _| {
                tracing::warn!(target: TARGET, claim = %claim_key(&claim), error = %e, "provisioning failed; retrying");
                Action::requeue(RETRY)
            },
            p.clone(),
        )
        .for_each(|_| std::future::ready(()));
    let volumes = Controller::new(Api::<PersistentVolume>::all(p.client.clone()), watcher::Config::default())
        .run(
            |pv, p: Arc<Provisioner>| async move { p.sync_volume(&pv).await },
            |pv, e, _| {
                tracing::warn!(target: TARGET, volume = pv.metadata.name.as_deref().unwrap_or_default(), error = %e, "deleting failed; retrying");
                Action::requeue(RETRY)
            },
            p.clone(),
        )
        .for_each(|_| std::future::ready(()));
    tokio::select! {
        _ = futures::future::join(claims, volumes) => {}
        _ = shutdown => {}
    }
    tracing::info!(target: TARGET, "external provisioner stopped");
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{PersistentVolumeClaimSpec, PersistentVolumeStatus, VolumeResourceRequirements};

    const DRIVER: &str = "hostpath.csi.kubelab.io";

    fn class(mode: &str) -> StorageClass {
        StorageClass {
            metadata: ObjectMeta { name: Some("standard".into()), ..Default::default() },
            provisioner: DRIVER.into(),
            volume_binding_mode: Some(mode.into()),
            reclaim_policy: Some("Delete".into()),
            parameters: Some(BTreeMap::from([("kind".to_string(), "dir".to_string()), (PARAM_FSTYPE.to_string(), "xfs".to_string())])),
            ..Default::default()
        }
    }

    fn claim(annotations: &[(&str, &str)]) -> PersistentVolumeClaim {
        PersistentVolumeClaim {
            metadata: ObjectMeta {
                name: Some("data".into()),
                namespace: Some("default".into()),
                uid: Some("u1".into()),
                annotations: Some(annotations.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()),
                ..Default::default()
            },
            spec: Some(PersistentVolumeClaimSpec {
                access_modes: Some(vec!["ReadWriteOnce".into()]),
                storage_class_name: Some("standard".into()),
                resources: Some(VolumeResourceRequirements {
                    requests: Some(BTreeMap::from([("storage".to_string(), Quantity("1Gi".into()))])),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            status: None,
        }
    }

    #[test]
    fn decide_claim_table() {
        let ours = (ANN_STORAGE_PROVISIONER, DRIVER);
        let mut bound = claim(&[ours, (ANN_SELECTED_NODE, "n1")]);
        if let Some(s) = bound.spec.as_mut() {
            s.volume_name = Some("pv1".into());
        }
        let cases = [
            ("bound", bound, "WaitForFirstConsumer", ClaimDecision::Ignore("bound")),
            ("not annotated", claim(&[]), "Immediate", ClaimDecision::Ignore("another provisioner's")),
            ("other driver", claim(&[(ANN_STORAGE_PROVISIONER, "x.csi")]), "Immediate", ClaimDecision::Ignore("another provisioner's")),
            ("beta annotation", claim(&[(ANN_BETA_STORAGE_PROVISIONER, DRIVER), (ANN_SELECTED_NODE, "n1")]), "Immediate", ClaimDecision::Provision),
            ("wffc, no node", claim(&[ours]), "WaitForFirstConsumer", ClaimDecision::Ignore("waiting for the scheduler")),
            ("wffc, this node", claim(&[ours, (ANN_SELECTED_NODE, "n1")]), "WaitForFirstConsumer", ClaimDecision::Provision),
            ("wffc, other node", claim(&[ours, (ANN_SELECTED_NODE, "n2")]), "WaitForFirstConsumer", ClaimDecision::Ignore("selected for another node")),
            ("immediate, no node", claim(&[ours]), "Immediate", ClaimDecision::SelectThisNode),
        ];
        for (name, c, mode, want) in cases {
            assert_eq!(decide_claim(&c, &class(mode), DRIVER, "n1"), want, "{name}");
        }
    }

    #[test]
    fn request_and_pv() {
        let c = claim(&[(ANN_STORAGE_PROVISIONER, DRIVER), (ANN_SELECTED_NODE, "n1")]);
        let sc = class("WaitForFirstConsumer");
        let req = create_volume_request(&c, &sc, "n1").expect("request");
        assert_eq!(req.name, "pvc-u1");
        assert_eq!(req.capacity_range.as_ref().map(|r| r.required_bytes), Some(1 << 30));
        assert_eq!(req.parameters.get("kind").map(String::as_str), Some("dir"));
        assert!(!req.parameters.contains_key(PARAM_FSTYPE), "sidecar parameters stay out");
        assert_eq!(req.volume_capabilities.len(), 1);
        let topo = req.accessibility_requirements.as_ref().map(|t| t.requisite.clone()).unwrap_or_default();
        assert_eq!(topo[0].segments.get(crate::TOPOLOGY_KEY).map(String::as_str), Some("n1"));

        let volume = csi::Volume {
            capacity_bytes: 1 << 30,
            volume_id: "vol-1".into(),
            volume_context: [("kind".to_string(), "dir".to_string())].into_iter().collect(),
            content_source: None,
            accessible_topology: vec![crate::hostpath::node_topology("n1")],
        };
        let pv = build_pv(&c, &sc, &volume, DRIVER).expect("pv");
        assert_eq!(pv.metadata.name.as_deref(), Some("pvc-u1"));
        assert_eq!(pv.metadata.finalizers, Some(vec![FINALIZER.to_string()]));
        let spec = pv.spec.as_ref().expect("spec");
        assert_eq!(spec.capacity.as_ref().and_then(|c| c.get("storage")).map(|q| q.0.as_str()), Some("1Gi"));
        let csi_src = spec.csi.as_ref().expect("csi");
        assert_eq!((csi_src.driver.as_str(), csi_src.volume_handle.as_str(), csi_src.fs_type.as_deref()), (DRIVER, "vol-1", Some("xfs")));
        let claim_ref = spec.claim_ref.as_ref().expect("claimRef");
        assert_eq!((claim_ref.name.as_deref(), claim_ref.uid.as_deref(), claim_ref.kind.as_deref()), (Some("data"), Some("u1"), Some("PersistentVolumeClaim")));
        assert_eq!(pv_node(spec).as_deref(), Some("n1"));
        assert_eq!(spec.persistent_volume_reclaim_policy.as_deref(), Some("Delete"));
        assert_eq!(spec.volume_mode.as_deref(), Some("Filesystem"));
        assert_eq!(spec.storage_class_name.as_deref(), Some("standard"));

        // Step 1 of the volume queue: released, Delete, ours, on this node.
        let mut released = pv.clone();
        released.metadata.annotations = Some(BTreeMap::from([(ANN_PROVISIONED_BY.to_string(), DRIVER.to_string())]));
        released.status = Some(PersistentVolumeStatus { phase: Some("Released".into()), ..Default::default() });
        assert!(should_delete(&released, DRIVER, "n1"));
        assert!(!should_delete(&released, DRIVER, "n2"), "another node's volume");
        assert!(!should_delete(&pv, DRIVER, "n1"), "not released");
        let mut retain = released.clone();
        if let Some(s) = retain.spec.as_mut() {
            s.persistent_volume_reclaim_policy = Some("Retain".into());
        }
        assert!(!should_delete(&retain, DRIVER, "n1"), "retained");

        // A class that retains: the provisioner will never delete the volume, so no finalizer.
        let mut keep = class("Immediate");
        keep.reclaim_policy = Some("Retain".into());
        let pv = build_pv(&c, &keep, &volume, DRIVER).expect("pv");
        assert_eq!(pv.metadata.finalizers, None);
        assert_eq!(pv.spec.as_ref().and_then(|s| s.persistent_volume_reclaim_policy.as_deref()), Some("Retain"));
    }

    #[test]
    fn only_a_final_refusal_hands_the_claim_back() {
        let csi_err = |code| Error::Csi { rpc: "CreateVolume", status: tonic::Status::new(code, "x") };
        assert!(is_final(&csi_err(tonic::Code::ResourceExhausted)));
        assert!(is_final(&csi_err(tonic::Code::InvalidArgument)));
        assert!(!is_final(&csi_err(tonic::Code::DeadlineExceeded)));
        assert!(!is_final(&csi_err(tonic::Code::Unavailable)));
        assert!(!is_final(&Error::InvalidArgument("no spec".into())), "not the driver's answer");
    }

    #[test]
    fn quantities() {
        for (bytes, want) in [(1 << 30, "1Gi"), (5 << 20, "5Mi"), (1536, "1536"), (1 << 10, "1Ki"), (0, "0"), (1000, "1000")] {
            assert_eq!(format_bytes(bytes), want, "{bytes}");
        }
    }
}
