//! Mirrors pkg/controller/volume/persistentvolume/pv_controller.go: the binder's decisions, pure.
//! [`super::pv_controller_base`] reads the caches, calls them and carries out what they say.
//!
//! `syncClaim` ([`sync_claim`]) — a claim without `pv.kubernetes.io/bind-completed`:
//! 1. No `spec.volumeName` (the user did not choose): the best matching volume
//!    ([`super::index::find_best_match`]) is bound. None: a claim without any class gets the
//!    default class (and is synced again); a WaitForFirstConsumer claim without a selected node
//!    waits (event `WaitForFirstConsumer`, or `WaitForPodScheduled` naming its unscheduled pods);
//!    a claim with a class is handed to the class's external provisioner (the
//!    `storage-provisioner` annotations, event `ExternalProvisioning`); a claim without one stays
//!    Pending (event `FailedBinding`).
//! 2. A `spec.volumeName` (pre-bound by the user): the volume, if it exists and is free and fits
//!    (else `VolumeMismatch`), or already names this claim, is bound; one bound elsewhere leaves
//!    the claim Pending (`FailedBinding`).
//!
//! A claim bound before (`bind-completed`): it is Lost when its volume is gone or names another
//! claim (`ClaimLost`, `ClaimMisbound`); otherwise the binding is completed again where needed.
//!
//! `syncVolume` ([`sync_volume`]): a free volume, or one pre-bound by name only, is Available; one
//! whose claim is gone is Released and reclaimed ([`reclaim`]: Retain keeps it, Delete of a volume
//! an external provisioner made is that provisioner's to do, anything else fails with Kubernetes'
//! messages); one whose claim is not bound yet queues the claim; one whose claim is bound to it is
//! Bound; one whose claim went to another volume is released (provisioned for it with Delete) or
//! unbound.
//!
//! `bind` writes the volume first (claimRef, then phase Bound), then the claim (volumeName and the
//! annotations, then status Bound with the volume's access modes and capacity) — each step by
//! [`bind_volume_to_claim`], [`bind_claim_to_volume`], [`claim_status`] and [`volume_with_phase`],
//! which return `None` when there is nothing to write.

use k8s_openapi::api::core::v1::{ObjectReference, PersistentVolume, PersistentVolumeClaim, PersistentVolumeClaimStatus, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use super::index::find_best_match;
use super::util::*;

/// An event the binder records (on the claim unless said otherwise).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    pub type_: &'static str,
    pub reason: &'static str,
    pub message: String,
}

fn event(type_: &'static str, reason: &'static str, message: impl Into<String>) -> Event {
    Event { type_, reason, message: message.into() }
}

/// What a claim's sync does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClaimAction {
    /// `bind(volume, claim)`: both sides, each step only when needed.
    Bind { volume: String },
    /// assignDefaultStorageClass: the claim gets the default class; its update brings it back.
    AssignDefaultClass { class: String },
    /// provisionClaimOperationExternal: the `storage-provisioner` annotations, and the event
    /// `ExternalProvisioning`.
    ProvisionExternal { provisioner: String },
    /// `updateClaimStatus(Pending)` (access modes and capacity cleared), after the event if any.
    Pending { event: Option<Event> },
    /// `updateClaimStatusWithEvent(Lost)`: the event only when the phase changes.
    Lost { reason: &'static str, message: &'static str },
    /// Nothing written: the sync fails (and is retried), after the event if any.
    Fail { event: Option<Event>, error: String },
}

/// IsDelayBindingMode: the claim's class binds WaitForFirstConsumer. No class, or a class not
/// found, is Immediate; so is a class without `volumeBindingMode` (the API server defaults it).
pub fn is_delay_binding_mode(claim: &PersistentVolumeClaim, classes: &[&StorageClass]) -> bool {
    let name = claim_class(claim);
    !name.is_empty() && classes.iter().any(|c| c.metadata.name.as_deref() == Some(name) && c.volume_binding_mode.as_deref() == Some("WaitForFirstConsumer"))
}

/// syncClaim: what to do with `claim`, given every volume, class, and the pods of its namespace.
pub fn sync_claim(claim: &PersistentVolumeClaim, volumes: &[&PersistentVolume], classes: &[&StorageClass], pods: &[&Pod]) -> ClaimAction {
    if has_annotation(&claim.metadata, ANN_BIND_COMPLETED) { sync_bound_claim(claim, volumes) } else { sync_unbound_claim(claim, volumes, classes, pods) }
}

/// syncUnboundClaim (steps 1 and 2 of the module's tour).
fn sync_unbound_claim(claim: &PersistentVolumeClaim, volumes: &[&PersistentVolume], classes: &[&StorageClass], pods: &[&Pod]) -> ClaimAction {
    let wanted = claim_volume_name(claim);
    if wanted.is_empty() {
        // Step 1: any volume will do.
        let delay = is_delay_binding_mode(claim, classes);
        match find_best_match(claim, volumes, delay) {
            Err(e) => return ClaimAction::Fail { event: None, error: format!("error finding PV for claim {:?}: {e}", claim_key(claim)) },
            Ok(Some(v)) => return ClaimAction::Bind { volume: v.metadata.name.clone().unwrap_or_default() },
            Ok(None) => {}
        }
        let has_class = has_annotation(&claim.metadata, ANN_BETA_STORAGE_CLASS) || claim.spec.as_ref().is_some_and(|s| s.storage_class_name.is_some());
        if !has_class && let Some(class) = default_class(classes) {
            return ClaimAction::AssignDefaultClass { class };
        }
        if delay && !has_annotation(&claim.metadata, ANN_SELECTED_NODE) {
            return ClaimAction::Pending { event: Some(wait_for_first_consumer_event(claim, pods)) };
        }
        let class_name = claim_class(claim);
        if !class_name.is_empty() {
            // provisionClaim / findProvisionablePlugin.
            let Some(class) = classes.iter().find(|c| c.metadata.name.as_deref() == Some(class_name)) else {
                let msg = format!("storageclass.storage.k8s.io {class_name:?} not found");
                return ClaimAction::Fail { event: Some(event(client::record::WARNING, "ProvisioningFailed", msg.clone())), error: msg };
            };
            if class.provisioner.starts_with("kubernetes.io/") {
                // An in-tree plugin: kubelab has none.
                let msg = "no provisionable volume plugin matched".to_string();
                return ClaimAction::Fail { event: Some(event(client::record::WARNING, "ProvisioningFailed", msg.clone())), error: msg };
            }
            return ClaimAction::ProvisionExternal { provisioner: class.provisioner.clone() };
        }
        return ClaimAction::Pending { event: Some(event(client::record::NORMAL, "FailedBinding", "no persistent volumes available for this claim and no storage class is set")) };
    }
    // Step 2: the user chose a volume.
    let Some(volume) = volumes.iter().find(|v| v.metadata.name.as_deref() == Some(wanted)) else {
        return ClaimAction::Pending { event: None };
    };
    if claim_ref(volume).is_none() {
        return match check_volume_satisfy_claim(volume, claim) {
            Ok(()) => ClaimAction::Bind { volume: wanted.to_string() },
            Err(e) => ClaimAction::Pending { event: Some(event(client::record::WARNING, "VolumeMismatch", format!("Cannot bind to requested volume {wanted:?}: {e}"))) },
        };
    }
    if is_volume_bound_to_claim(volume, claim) {
        return ClaimAction::Bind { volume: wanted.to_string() };
    }
    let taken = event(client::record::WARNING, "FailedBinding", format!("volume {wanted:?} already bound to a different claim."));
    if !has_annotation(&claim.metadata, ANN_BOUND_BY_CONTROLLER) {
        return ClaimAction::Pending { event: Some(taken) };
    }
    let other = claim_ref(volume).map(claim_ref_key).unwrap_or_default();
    ClaimAction::Fail { event: Some(taken), error: format!("invalid binding of claim {:?} to volume {wanted:?}: volume already claimed by {other:?}", claim_key(claim)) }
}

/// emitEventForUnboundDelayBindingClaim: `WaitForFirstConsumer`, or `WaitForPodScheduled` naming
/// the claim's pods not scheduled yet.
fn wait_for_first_consumer_event(claim: &PersistentVolumeClaim, pods: &[&Pod]) -> Event {
    let name = claim.metadata.name.as_deref().unwrap_or_default();
    let waiting: Vec<&str> = pods
        .iter()
        .filter(|p| p.metadata.namespace == claim.metadata.namespace)
        .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()).unwrap_or_default().is_empty())
        .filter(|p| pod_claim_names(p).iter().any(|c| c == name))
        .filter_map(|p| p.metadata.name.as_deref())
        .collect();
    match waiting.as_slice() {
        [] => event(client::record::NORMAL, "WaitForFirstConsumer", "waiting for first consumer to be created before binding"),
        [one] => event(client::record::NORMAL, "WaitForPodScheduled", format!("waiting for pod {one} to be scheduled")),
        many => event(client::record::NORMAL, "WaitForPodScheduled", format!("waiting for pods {} to be scheduled", many.join(","))),
    }
}

/// checkVolumeSatisfyClaim: a volume the user chose must still fit the claim.
pub fn check_volume_satisfy_claim(volume: &PersistentVolume, claim: &PersistentVolumeClaim) -> Result<(), String> {
    if volume.metadata.deletion_timestamp.is_some() {
        return Err(format!("the volume is marked for deletion {:?}", volume.metadata.name.as_deref().unwrap_or_default()));
    }
    if volume_capacity(volume) < requested_storage(claim) {
        return Err("requested PV is too small".into());
    }
    if volume_class(volume) != claim_class(claim) {
        return Err("storageClassName does not match".into());
    }
    if volume_mode_mismatches(claim, volume) {
        return Err("incompatible volumeMode".into());
    }
    let have = access_modes(volume.spec.as_ref().and_then(|s| s.access_modes.as_ref()));
    if !access_modes(claim.spec.as_ref().and_then(|s| s.access_modes.as_ref())).iter().all(|m| have.contains(m)) {
        return Err("incompatible accessMode".into());
    }
    Ok(())
}

/// syncBoundClaim.
fn sync_bound_claim(claim: &PersistentVolumeClaim, volumes: &[&PersistentVolume]) -> ClaimAction {
    let name = claim_volume_name(claim);
    if name.is_empty() {
        return ClaimAction::Lost { reason: "ClaimLost", message: "Bound claim has lost reference to PersistentVolume. Data on the volume is lost!" };
    }
    let Some(volume) = volumes.iter().find(|v| v.metadata.name.as_deref() == Some(name)) else {
        return ClaimAction::Lost { reason: "ClaimLost", message: "Bound claim has lost its PersistentVolume. Data on the volume is lost!" };
    };
    match claim_ref(volume) {
        // Unbound volume (or the binder's own write not seen yet): bind it again.
        None => ClaimAction::Bind { volume: name.to_string() },
        Some(r) if r.uid == claim.metadata.uid => ClaimAction::Bind { volume: name.to_string() },
        Some(_) => ClaimAction::Lost { reason: "ClaimMisbound", message: "Two claims are bound to the same volume, this one is bound incorrectly" },
    }
}

/// What a volume's sync does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VolumeAction {
    /// `updateVolumePhase` (no event; nothing when the phase is already that).
    Phase(&'static str),
    /// The claim is gone (or bound elsewhere though the volume was provisioned for it): Released
    /// unless Released or Failed already, then [`reclaim`].
    Release,
    /// Bound to a claim that is not bound yet: its sync finishes the binding.
    QueueClaim(String),
    /// A claim naming this volume with another volume mode: `VolumeMismatch` on both.
    VolumeModeMismatch { volume_message: String, claim_message: String },
    /// unbindVolume: claimRef dropped (bound by the binder) or its uid cleared (pre-bound by the
    /// user), then Available.
    Unbind,
}

/// syncVolume: what to do with `volume`, given the claim its claimRef names as found (`None`
/// when there is none of that name, or only one with another uid).
pub fn sync_volume(volume: &PersistentVolume, claim: Option<&PersistentVolumeClaim>) -> VolumeAction {
    let Some(r) = claim_ref(volume) else { return VolumeAction::Phase(VOLUME_AVAILABLE) };
    if r.uid.as_deref().is_none_or(str::is_empty) {
        // Pre-bound by name: the claim's sync binds it.
        return VolumeAction::Phase(VOLUME_AVAILABLE);
    }
    let Some(claim) = claim.filter(|c| c.metadata.uid == r.uid) else { return VolumeAction::Release };
    let name = volume.metadata.name.as_deref().unwrap_or_default();
    let bound_to = claim_volume_name(claim);
    if bound_to.is_empty() {
        if volume_mode_mismatches(claim, volume) {
            let claim_name = claim.metadata.name.as_deref().unwrap_or_default();
            return VolumeAction::VolumeModeMismatch {
                volume_message: format!("Cannot bind PersistentVolume to requested PersistentVolumeClaim {claim_name:?} due to incompatible volumeMode."),
                claim_message: format!("Cannot bind PersistentVolume {name:?} to requested PersistentVolumeClaim due to incompatible volumeMode."),
            };
        }
        return VolumeAction::QueueClaim(claim_key(claim));
    }
    if bound_to == name {
        return VolumeAction::Phase(VOLUME_BOUND);
    }
    if has_annotation(&volume.metadata, ANN_DYNAMICALLY_PROVISIONED) && reclaim_policy(volume) == "Delete" {
        return VolumeAction::Release;
    }
    VolumeAction::Unbind
}

/// What reclaimVolume does with a Released volume.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reclaim {
    /// Retain, or a migrated volume: nothing.
    Nothing,
    /// Delete of a volume an external provisioner made: that provisioner deletes it.
    External { provisioner: String },
    /// The volume cannot be reclaimed here: Failed, with this message and event (once).
    Fail { reason: &'static str, message: String },
}

/// reclaimVolume (and the plugin lookups of delete and recycle): kubelab has no in-tree
/// deleters or recyclers, so only what an external provisioner made can be deleted.
pub fn reclaim(volume: &PersistentVolume) -> Reclaim {
    if annotation(&volume.metadata, ANN_MIGRATED_TO).is_some_and(|m| !m.is_empty()) {
        return Reclaim::Nothing;
    }
    let name = volume.metadata.name.as_deref().unwrap_or_default();
    match reclaim_policy(volume) {
        "Retain" => Reclaim::Nothing,
        "Recycle" => Reclaim::Fail { reason: "VolumeFailedRecycle", message: "No recycler plugin found for the volume!".into() },
        "Delete" => match annotation(&volume.metadata, ANN_DYNAMICALLY_PROVISIONED) {
            Some(p) if !p.is_empty() && !p.starts_with("kubernetes.io/") => Reclaim::External { provisioner: p.to_string() },
            _ => Reclaim::Fail { reason: "VolumeFailedDelete", message: format!("error getting deleter volume plugin for volume {name:?}: no deletable volume plugin matched") },
        },
        _ => Reclaim::Fail { reason: "VolumeUnknownReclaimPolicy", message: "Volume has unrecognized PersistentVolumeReclaimPolicy".into() },
    }
}

/// GetBindVolumeToClaim: the volume with a claimRef to the claim (and `bound-by-controller`
/// when the binder chose it), or `None` when it already has both.
pub fn bind_volume_to_claim(volume: &PersistentVolume, claim: &PersistentVolumeClaim) -> Option<PersistentVolume> {
    let chosen_by_binder = !is_volume_bound_to_claim(volume, claim);
    let mut out = volume.clone();
    let mut dirty = false;
    let same = claim_ref(volume).is_some_and(|r| r.name == claim.metadata.name && r.namespace == claim.metadata.namespace && r.uid == claim.metadata.uid);
    if !same {
        let r = ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("PersistentVolumeClaim".into()),
            namespace: claim.metadata.namespace.clone(),
            name: claim.metadata.name.clone(),
            uid: claim.metadata.uid.clone(),
            resource_version: claim.metadata.resource_version.clone(),
            ..Default::default()
        };
        out.spec.get_or_insert_with(Default::default).claim_ref = Some(r);
        dirty = true;
    }
    if chosen_by_binder && !has_annotation(&out.metadata, ANN_BOUND_BY_CONTROLLER) {
        out.metadata.annotations.get_or_insert_with(Default::default).insert(ANN_BOUND_BY_CONTROLLER.into(), "yes".into());
        dirty = true;
    }
    dirty.then_some(out)
}

/// bindClaimToVolume: the claim with `volumeName` (and `bound-by-controller` when the binder set
/// it) and `bind-completed`, or `None` when it has them.
pub fn bind_claim_to_volume(claim: &PersistentVolumeClaim, volume: &PersistentVolume) -> Option<PersistentVolumeClaim> {
    let name = volume.metadata.name.clone().unwrap_or_default();
    let mut out = claim.clone();
    let mut dirty = false;
    if claim_volume_name(claim) != name {
        out.spec.get_or_insert_with(Default::default).volume_name = Some(name);
        out.metadata.annotations.get_or_insert_with(Default::default).entry(ANN_BOUND_BY_CONTROLLER.into()).or_insert_with(|| "yes".into());
        dirty = true;
    }
    if !has_annotation(&out.metadata, ANN_BIND_COMPLETED) {
        out.metadata.annotations.get_or_insert_with(Default::default).insert(ANN_BIND_COMPLETED.into(), "yes".into());
        dirty = true;
    }
    dirty.then_some(out)
}

/// updateClaimStatus: the claim's status at `phase` — with the volume's access modes, and its
/// capacity when the claim becomes Bound; without either when there is no volume — or `None` when
/// that is the status already.
pub fn claim_status(claim: &PersistentVolumeClaim, phase: &str, volume: Option<&PersistentVolume>) -> Option<PersistentVolumeClaimStatus> {
    let old = claim.status.clone().unwrap_or_default();
    let mut new = old.clone();
    new.phase = Some(phase.to_string());
    match volume {
        None => {
            new.access_modes = None;
            new.capacity = None;
        }
        Some(v) => {
            let spec = v.spec.clone().unwrap_or_default();
            new.access_modes = spec.access_modes;
            // Only on becoming Bound: a different capacity later may be meant (a resize).
            if claim_phase(claim) != phase
                && let Some(cap) = spec.capacity.as_ref().and_then(|c| c.get("storage"))
                && old.capacity.as_ref().and_then(|c| c.get("storage")) != Some(cap)
            {
                new.capacity = spec.capacity.clone();
            }
        }
    }
    (new != old).then_some(new)
}

/// updateVolumePhase: the volume at `phase` with `message` and `lastPhaseTransitionTime`, or
/// `None` when it is at that phase.
pub fn volume_with_phase(volume: &PersistentVolume, phase: &str, message: Option<&str>, now: Timestamp) -> Option<PersistentVolume> {
    if volume_phase(volume) == phase {
        return None;
    }
    let mut out = volume.clone();
    let status = out.status.get_or_insert_with(Default::default);
    status.phase = Some(phase.to_string());
    status.message = message.map(str::to_string);
    status.last_phase_transition_time = Some(Time(now));
    Some(out)
}

/// unbindVolume's write: bound by the binder, the claimRef goes (with the annotation); pre-bound
/// by the user, only its uid.
pub fn unbind_volume(volume: &PersistentVolume) -> PersistentVolume {
    let mut out = volume.clone();
    if has_annotation(&volume.metadata, ANN_BOUND_BY_CONTROLLER) {
        if let Some(spec) = out.spec.as_mut() {
            spec.claim_ref = None;
        }
        if let Some(a) = out.metadata.annotations.as_mut() {
            a.remove(ANN_BOUND_BY_CONTROLLER);
            if a.is_empty() {
                out.metadata.annotations = None;
            }
        }
    } else if let Some(r) = out.spec.as_mut().and_then(|s| s.claim_ref.as_mut()) {
        r.uid = None;
    }
    out
}

/// setClaimProvisioner: the claim with both `storage-provisioner` annotations, or `None` when it
/// names that provisioner already.
pub fn claim_with_provisioner(claim: &PersistentVolumeClaim, provisioner: &str) -> Option<PersistentVolumeClaim> {
    if annotation(&claim.metadata, ANN_STORAGE_PROVISIONER) == Some(provisioner) {
        return None;
    }
    let mut out = claim.clone();
    let a = out.metadata.annotations.get_or_insert_with(Default::default);
    a.insert(ANN_BETA_STORAGE_PROVISIONER.into(), provisioner.into());
    a.insert(ANN_STORAGE_PROVISIONER.into(), provisioner.into());
    Some(out)
}

/// provisionClaimOperationExternal's event.
pub fn external_provisioning_message(provisioner: &str) -> String {
    format!(
        "Waiting for a volume to be created either by the external provisioner '{provisioner}' or manually by the system administrator. If volume creation is delayed, please verify that the provisioner is running and correctly registered."
    )
}

#[cfg(test)]
mod tests {
    use super::super::util::tests::{pv, pvc};
    use super::*;
    use serde_json::{Value, json};

    fn class(name: &str, mode: &str, provisioner: &str, default: bool) -> StorageClass {
        let ann = if default { json!({ANN_DEFAULT_STORAGE_CLASS: "true"}) } else { json!({}) };
        serde_json::from_value(json!({"metadata": {"name": name, "annotations": ann}, "provisioner": provisioner, "volumeBindingMode": mode})).expect("class")
    }

    fn named_pv(name: &str, v: Value) -> PersistentVolume {
        let mut p = pv(v);
        p.metadata.name = Some(name.into());
        p
    }

    fn pod(name: &str, node: Option<&str>, claim: &str) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": name, "namespace": "default"},
            "spec": {"nodeName": node, "containers": [], "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": claim}}]}}))
        .expect("pod")
    }

    /// (what, claim, volumes, pods, action)
    type ClaimCase<'a> = (&'a str, PersistentVolumeClaim, Vec<&'a PersistentVolume>, Vec<&'a Pod>, ClaimAction);

    #[test]
    fn claim_syncs() {
        let standard = class("standard", "WaitForFirstConsumer", "hostpath.csi.kubelab.io", true);
        let fast = class("fast", "Immediate", "hostpath.csi.kubelab.io", false);
        let intree = class("old", "Immediate", "kubernetes.io/gce-pd", false);
        let classes = [&standard, &fast, &intree];
        let free = named_pv("free", json!({}));
        let free_fast = named_pv("free-fast", json!({"spec": {"storageClassName": "fast"}}));
        let provisioned = named_pv("pvc-uid-1", json!({"spec": {"storageClassName": "standard", "claimRef": {"namespace": "default", "name": "claim", "uid": "uid-1"}}, "status": {"phase": "Bound"}}));
        let taken = named_pv("taken", json!({"spec": {"claimRef": {"namespace": "default", "name": "other", "uid": "x"}}, "status": {"phase": "Bound"}}));
        let small = named_pv("small", json!({"spec": {"capacity": {"storage": "1Mi"}}}));
        let unscheduled = pod("web-0", None, "claim");
        let bind = |v: &str| ClaimAction::Bind { volume: v.into() };
        let pending = |t, r, m: &str| ClaimAction::Pending { event: Some(event(t, r, m)) };
        let n = client::record::NORMAL;
        let w = client::record::WARNING;
        let completed = json!({"metadata": {"annotations": {ANN_BIND_COMPLETED: "yes"}}, "spec": {"volumeName": "free"}});
        let free_bound = named_pv("free", json!({"spec": {"claimRef": {"namespace": "default", "name": "claim", "uid": "uid-1"}}}));
        // (what, claim, volumes, pods, action)
        let cases: Vec<ClaimCase> = vec![
            ("static: binds the free volume", pvc(json!({"spec": {"storageClassName": ""}})), vec![&free, &taken], vec![], bind("free")),
            ("static: no volume, no class", pvc(json!({"spec": {"storageClassName": ""}})), vec![&taken], vec![], pending(n, "FailedBinding", "no persistent volumes available for this claim and no storage class is set")),
            ("no class at all: the default is assigned", pvc(json!({})), vec![], vec![], ClaimAction::AssignDefaultClass { class: "standard".into() }),
            ("Immediate class: binds a volume of the class", pvc(json!({"spec": {"storageClassName": "fast"}})), vec![&free, &free_fast], vec![], bind("free-fast")),
            ("Immediate class, no volume: external provisioner", pvc(json!({"spec": {"storageClassName": "fast"}})), vec![&free], vec![], ClaimAction::ProvisionExternal { provisioner: "hostpath.csi.kubelab.io".into() }),
            ("WaitForFirstConsumer: waits", pvc(json!({"spec": {"storageClassName": "standard"}})), vec![], vec![], pending(n, "WaitForFirstConsumer", "waiting for first consumer to be created before binding")),
            ("WaitForFirstConsumer: names the unscheduled pod", pvc(json!({"spec": {"storageClassName": "standard"}})), vec![], vec![&unscheduled], pending(n, "WaitForPodScheduled", "waiting for pod web-0 to be scheduled")),
            (
                "WaitForFirstConsumer with a selected node: provisioned",
                pvc(json!({"metadata": {"annotations": {ANN_SELECTED_NODE: "node-1"}}, "spec": {"storageClassName": "standard"}})),
                vec![],
                vec![],
                ClaimAction::ProvisionExternal { provisioner: "hostpath.csi.kubelab.io".into() },
            ),
            ("WaitForFirstConsumer: the provisioned volume binds", pvc(json!({"spec": {"storageClassName": "standard"}})), vec![&provisioned], vec![], bind("pvc-uid-1")),
            (
                "unknown class",
                pvc(json!({"spec": {"storageClassName": "gold"}})),
                vec![],
                vec![],
                ClaimAction::Fail { event: Some(event(w, "ProvisioningFailed", "storageclass.storage.k8s.io \"gold\" not found")), error: "storageclass.storage.k8s.io \"gold\" not found".into() },
            ),
            (
                "in-tree provisioner",
                pvc(json!({"spec": {"storageClassName": "old"}})),
                vec![],
                vec![],
                ClaimAction::Fail { event: Some(event(w, "ProvisioningFailed", "no provisionable volume plugin matched")), error: "no provisionable volume plugin matched".into() },
            ),
            ("pre-bound claim: volume missing", pvc(json!({"spec": {"volumeName": "nope"}})), vec![&free], vec![], ClaimAction::Pending { event: None }),
            ("pre-bound claim: free volume", pvc(json!({"spec": {"volumeName": "free", "storageClassName": ""}})), vec![&free], vec![], bind("free")),
            ("pre-bound claim: too small", pvc(json!({"spec": {"volumeName": "small"}})), vec![&small], vec![], pending(w, "VolumeMismatch", "Cannot bind to requested volume \"small\": requested PV is too small")),
            ("pre-bound claim: taken", pvc(json!({"spec": {"volumeName": "taken"}})), vec![&taken], vec![], pending(w, "FailedBinding", "volume \"taken\" already bound to a different claim.")),
            ("bound: all well", pvc(completed.clone()), vec![&free_bound], vec![], bind("free")),
            ("bound: the volume lost its claimRef", pvc(completed.clone()), vec![&free], vec![], bind("free")),
            ("bound: volume gone", pvc(completed.clone()), vec![], vec![], ClaimAction::Lost { reason: "ClaimLost", message: "Bound claim has lost its PersistentVolume. Data on the volume is lost!" }),
            (
                "bound: no volumeName",
                pvc(json!({"metadata": {"annotations": {ANN_BIND_COMPLETED: "yes"}}})),
                vec![],
                vec![],
                ClaimAction::Lost { reason: "ClaimLost", message: "Bound claim has lost reference to PersistentVolume. Data on the volume is lost!" },
            ),
            (
                "bound: the volume is another claim's",
                pvc(json!({"metadata": {"annotations": {ANN_BIND_COMPLETED: "yes"}}, "spec": {"volumeName": "taken"}})),
                vec![&taken],
                vec![],
                ClaimAction::Lost { reason: "ClaimMisbound", message: "Two claims are bound to the same volume, this one is bound incorrectly" },
            ),
        ];
        for (what, claim, volumes, pods, want) in cases {
            assert_eq!(sync_claim(&claim, &volumes, &classes, &pods), want, "{what}");
        }
    }

    #[test]
    fn volume_syncs() {
        let claim = pvc(json!({"spec": {"volumeName": "pv"}}));
        let unbound_claim = pvc(json!({}));
        let elsewhere = pvc(json!({"spec": {"volumeName": "another"}}));
        let block_claim = pvc(json!({"spec": {"volumeMode": "Block"}}));
        let recreated = pvc(json!({"metadata": {"uid": "uid-2"}}));
        let bound = json!({"spec": {"claimRef": {"namespace": "default", "name": "claim", "uid": "uid-1"}}});
        let provisioned = json!({"metadata": {"annotations": {ANN_DYNAMICALLY_PROVISIONED: "hostpath.csi.kubelab.io"}},
            "spec": {"persistentVolumeReclaimPolicy": "Delete", "claimRef": {"namespace": "default", "name": "claim", "uid": "uid-1"}}});
        // (what, volume, claim found, action)
        let cases: Vec<(&str, PersistentVolume, Option<&PersistentVolumeClaim>, VolumeAction)> = vec![
            ("free", pv(json!({"status": {"phase": "Pending"}})), None, VolumeAction::Phase(VOLUME_AVAILABLE)),
            ("pre-bound by name", pv(json!({"spec": {"claimRef": {"namespace": "default", "name": "claim"}}})), None, VolumeAction::Phase(VOLUME_AVAILABLE)),
            ("claim gone", pv(bound.clone()), None, VolumeAction::Release),
            ("claim recreated with another uid", pv(bound.clone()), Some(&recreated), VolumeAction::Release),
            ("claim not bound yet", pv(bound.clone()), Some(&unbound_claim), VolumeAction::QueueClaim("default/claim".into())),
            ("all bound", pv(bound.clone()), Some(&claim), VolumeAction::Phase(VOLUME_BOUND)),
            ("claim bound elsewhere: unbind", pv(bound.clone()), Some(&elsewhere), VolumeAction::Unbind),
            ("provisioned for a claim bound elsewhere: release", pv(provisioned), Some(&elsewhere), VolumeAction::Release),
        ];
        for (what, volume, claim, want) in cases {
            assert_eq!(sync_volume(&volume, claim), want, "{what}");
        }
        assert!(matches!(sync_volume(&pv(bound), Some(&block_claim)), VolumeAction::VolumeModeMismatch { .. }));
    }

    #[test]
    fn reclaim_policies() {
        let v = |policy: &str, provisioner: Option<&str>| {
            let ann = provisioner.map_or(json!({}), |p| json!({ANN_DYNAMICALLY_PROVISIONED: p}));
            named_pv("data", json!({"metadata": {"annotations": ann}, "spec": {"persistentVolumeReclaimPolicy": policy}}))
        };
        let cases = [
            (v("Retain", None), Reclaim::Nothing),
            (v("Delete", Some("hostpath.csi.kubelab.io")), Reclaim::External { provisioner: "hostpath.csi.kubelab.io".into() }),
            (v("Delete", None), Reclaim::Fail { reason: "VolumeFailedDelete", message: "error getting deleter volume plugin for volume \"data\": no deletable volume plugin matched".into() }),
            (v("Recycle", None), Reclaim::Fail { reason: "VolumeFailedRecycle", message: "No recycler plugin found for the volume!".into() }),
            (v("Bogus", None), Reclaim::Fail { reason: "VolumeUnknownReclaimPolicy", message: "Volume has unrecognized PersistentVolumeReclaimPolicy".into() }),
        ];
        for (volume, want) in cases {
            assert_eq!(reclaim(&volume), want, "{:?}", volume.spec.as_ref().and_then(|s| s.persistent_volume_reclaim_policy.clone()));
        }
    }

    #[test]
    fn binding_writes() {
        let claim = pvc(json!({"metadata": {"resourceVersion": "7"}}));
        let free = pv(json!({}));
        // The volume: claimRef and bound-by-controller, then nothing more.
        let bound = bind_volume_to_claim(&free, &claim).expect("dirty");
        let r = bound.spec.as_ref().and_then(|s| s.claim_ref.clone()).expect("claimRef");
        assert_eq!((r.kind.as_deref(), r.api_version.as_deref(), r.name.as_deref(), r.uid.as_deref()), (Some("PersistentVolumeClaim"), Some("v1"), Some("claim"), Some("uid-1")));
        assert_eq!(annotation(&bound.metadata, ANN_BOUND_BY_CONTROLLER), Some("yes"));
        assert_eq!(bind_volume_to_claim(&bound, &claim), None);
        // Pre-bound by the user (name only): the uid is added, no bound-by-controller.
        let prebound = pv(json!({"spec": {"claimRef": {"namespace": "default", "name": "claim"}}}));
        let done = bind_volume_to_claim(&prebound, &claim).expect("dirty");
        assert!(!has_annotation(&done.metadata, ANN_BOUND_BY_CONTROLLER));
        // The claim: volumeName, bound-by-controller, bind-completed.
        let c = bind_claim_to_volume(&claim, &bound).expect("dirty");
        assert_eq!(claim_volume_name(&c), "pv");
        assert_eq!((annotation(&c.metadata, ANN_BIND_COMPLETED), annotation(&c.metadata, ANN_BOUND_BY_CONTROLLER)), (Some("yes"), Some("yes")));
        assert_eq!(bind_claim_to_volume(&c, &bound), None);
        // A claim that named its volume: only bind-completed.
        let chose = bind_claim_to_volume(&pvc(json!({"spec": {"volumeName": "pv"}})), &bound).expect("dirty");
        assert!(!has_annotation(&chose.metadata, ANN_BOUND_BY_CONTROLLER));
        // The status: Bound with the volume's modes and capacity; Pending clears them.
        let s = claim_status(&c, CLAIM_BOUND, Some(&bound)).expect("dirty");
        assert_eq!(s.phase.as_deref(), Some("Bound"));
        assert_eq!(s.access_modes, Some(vec!["ReadWriteOnce".to_string()]));
        assert_eq!(s.capacity.as_ref().and_then(|c| c.get("storage")).map(|q| q.0.as_str()), Some("1Gi"));
        let mut bound_claim = c.clone();
        bound_claim.status = Some(s);
        assert_eq!(claim_status(&bound_claim, CLAIM_BOUND, Some(&bound)), None);
        let lost = claim_status(&bound_claim, CLAIM_LOST, None).expect("dirty");
        assert_eq!((lost.phase.as_deref(), lost.access_modes.is_none(), lost.capacity.is_none()), (Some("Lost"), true, true));
        assert_eq!(claim_status(&pvc(json!({})), CLAIM_PENDING, None), None);
        // Phases.
        let now: Timestamp = "2026-12-06T00:00:00Z".parse().expect("time");
        let failed = volume_with_phase(&free, VOLUME_FAILED, Some("boom"), now).expect("dirty");
        let st = failed.status.clone().expect("status");
        assert_eq!((st.phase.as_deref(), st.message.as_deref(), st.last_phase_transition_time), (Some("Failed"), Some("boom"), Some(Time(now))));
        assert_eq!(volume_with_phase(&failed, VOLUME_FAILED, Some("other"), now), None);
        // Unbinding.
        let unbound = unbind_volume(&bound);
        assert!(claim_ref(&unbound).is_none() && unbound.metadata.annotations.is_none());
        let user = unbind_volume(&done);
        assert_eq!(claim_ref(&user).map(|r| (r.name.as_deref(), r.uid.is_none())), Some((Some("claim"), true)));
        // The provisioner annotations.
        let asked = claim_with_provisioner(&claim, "hostpath.csi.kubelab.io").expect("dirty");
        assert_eq!(annotation(&asked.metadata, ANN_BETA_STORAGE_PROVISIONER), Some("hostpath.csi.kubelab.io"));
        assert_eq!(claim_with_provisioner(&asked, "hostpath.csi.kubelab.io"), None);
    }
}
