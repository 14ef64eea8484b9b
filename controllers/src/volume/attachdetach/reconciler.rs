//! Mirrors pkg/controller/volume/attachdetach's desired state of world populator
//! (populator/desired_state_of_world_populator.go), its reconciler (reconciler/reconciler.go)
//! and its node status updater (statusupdater/node_status_updater.go), as pure functions over
//! what the caches hold: [`desired_state`] says which CSI volume should be attached to which
//! node, [`reconcile`] what to create, delete and report.
//!
//! 1. Desired: for every pod bound to a node that exists and not terminated, each claim its
//!    volumes name (a `persistentVolumeClaim` volume, or a generic ephemeral volume's claim)
//!    that is Bound to a PersistentVolume whose claimRef has the claim's uid, with `spec.csi`, of a
//!    driver whose CSIDriver requires attaching (`attachRequired`, true when unset or when there
//!    is no CSIDriver object, as Kubernetes' CSI attacher assumes): the volume
//!    `kubernetes.io/csi/<driver>^<volumeHandle>` on that node.
//! 2. Attach: a desired volume without its VolumeAttachment ([`attachment_name`]) gets one —
//!    unless only one node may have it (its access modes include ReadWriteOnce or
//!    ReadWriteOncePod, or it has none) and a VolumeAttachment on another node exists: a
//!    Multi-Attach error for its pods instead.
//! 3. Detach: a VolumeAttachment nothing desires is deleted once its node no longer lists the
//!    volume in `status.volumesInUse` (the node agent has unmounted it) — at once when the node is
//!    gone. One being deleted already is left to the external attacher.
//! 4. Report: each node's `status.volumesAttached` lists the volumes whose VolumeAttachment on
//!    it says `attached`, except those being detached.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{AttachedVolume, Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::{CSIDriver, VolumeAttachment, VolumeAttachmentSource, VolumeAttachmentSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::volume::persistentvolume::util::{CLAIM_BOUND, claim_phase, claim_ref, claim_volume_name, pod_claim_names};
use crate::volume::pvcprotection::pvc_protection_controller::is_pod_terminated;

pub use api::storage::csi::{attachment_name, unique_volume_name};

/// One volume that should be attached to one node (step 1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DesiredVolume {
    pub node: String,
    pub unique_name: String,
    pub pv_name: String,
    pub driver: String,
    pub handle: String,
    /// Whether several nodes may have it at once (isMultiAttachAllowed).
    pub multi_attach: bool,
    /// The pods on the node that use it, `(namespace, name)`.
    pub pods: BTreeSet<(String, String)>,
}

impl DesiredVolume {
    pub fn attachment_name(&self) -> String {
        attachment_name(&self.handle, &self.driver, &self.node)
    }
}

/// The CSI source of a volume: `(driver, volumeHandle)`.
fn csi_of(pv: &PersistentVolume) -> Option<(&str, &str)> {
    let csi = pv.spec.as_ref()?.csi.as_ref()?;
    Some((csi.driver.as_str(), csi.volume_handle.as_str()))
}

/// isMultiAttachAllowed for a PersistentVolume.
fn multi_attach_allowed(pv: &PersistentVolume) -> bool {
    let modes = pv.spec.as_ref().and_then(|s| s.access_modes.clone()).unwrap_or_default();
    !modes.is_empty() && !modes.iter().any(|m| m == "ReadWriteOnce" || m == "ReadWriteOncePod")
}

/// Step 1: the desired state, keyed by VolumeAttachment name.
pub fn desired_state(pods: &[&Pod], claims: &[&PersistentVolumeClaim], volumes: &[&PersistentVolume], drivers: &[&CSIDriver], nodes: &[&Node]) -> BTreeMap<String, DesiredVolume> {
    let node_names: BTreeSet<&str> = nodes.iter().filter_map(|n| n.metadata.name.as_deref()).collect();
    let claim = |ns: &str, name: &str| claims.iter().find(|c| c.metadata.namespace.as_deref() == Some(ns) && c.metadata.name.as_deref() == Some(name));
    let volume = |name: &str| volumes.iter().find(|v| v.metadata.name.as_deref() == Some(name));
    let attach_required = |driver: &str| drivers.iter().find(|d| d.metadata.name.as_deref() == Some(driver)).is_none_or(|d| d.spec.attach_required != Some(false));
    let mut out: BTreeMap<String, DesiredVolume> = BTreeMap::new();
    for pod in pods {
        let node = pod.spec.as_ref().and_then(|s| s.node_name.as_deref()).unwrap_or_default();
        if node.is_empty() || !node_names.contains(node) || is_pod_terminated(pod) {
            continue;
        }
        let ns = pod.metadata.namespace.as_deref().unwrap_or_default();
        for claim_name in pod_claim_names(pod) {
            let Some(pvc) = claim(ns, &claim_name) else { continue };
            let pv_name = claim_volume_name(pvc);
            if claim_phase(pvc) != CLAIM_BOUND || pv_name.is_empty() {
                continue;
            }
            let Some(pv) = volume(pv_name) else { continue };
            if claim_ref(pv).and_then(|r| r.uid.as_ref()) != pvc.metadata.uid.as_ref() {
                continue;
            }
            let Some((driver, handle)) = csi_of(pv) else { continue };
            if !attach_required(driver) {
                continue;
            }
            let entry = out.entry(attachment_name(handle, driver, node)).or_insert_with(|| DesiredVolume {
                node: node.to_string(),
                unique_name: unique_volume_name(driver, handle),
                pv_name: pv_name.to_string(),
                driver: driver.to_string(),
                handle: handle.to_string(),
                multi_attach: multi_attach_allowed(pv),
                pods: BTreeSet::new(),
            });
            entry.pods.insert((ns.to_string(), pod.metadata.name.clone().unwrap_or_default()));
        }
    }
    out
}

/// What one pass does.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Plan {
    /// Step 2: the VolumeAttachments to create.
    pub create: Vec<VolumeAttachment>,
    /// Step 2: the pods told that their volume is attached elsewhere, with the message.
    pub multi_attach_errors: Vec<((String, String), String)>,
    /// Step 3: the VolumeAttachments to delete.
    pub delete: Vec<String>,
    /// Step 4: each existing node's `volumesAttached`, sorted by name.
    pub volumes_attached: BTreeMap<String, Vec<AttachedVolume>>,
}

/// The VolumeAttachment the attach-detach controller creates for a desired volume (the CSI
/// attacher's Attach).
pub fn new_attachment(d: &DesiredVolume) -> VolumeAttachment {
    VolumeAttachment {
        metadata: ObjectMeta { name: Some(d.attachment_name()), ..Default::default() },
        spec: VolumeAttachmentSpec {
            attacher: d.driver.clone(),
            node_name: d.node.clone(),
            source: VolumeAttachmentSource { persistent_volume_name: Some(d.pv_name.clone()), ..Default::default() },
        },
        status: None,
    }
}

/// Steps 2–4 given the desired state, every VolumeAttachment, volume and node.
pub fn reconcile(desired: &BTreeMap<String, DesiredVolume>, attachments: &[&VolumeAttachment], volumes: &[&PersistentVolume], nodes: &[&Node]) -> Plan {
    let mut plan = Plan::default();
    let existing: BTreeMap<&str, &VolumeAttachment> = attachments.iter().filter_map(|va| Some((va.metadata.name.as_deref()?, *va))).collect();
    let pv_of = |va: &VolumeAttachment| va.spec.source.persistent_volume_name.clone();
    // A VolumeAttachment's volume's unique name, through its PersistentVolume.
    let unique_of = |va: &VolumeAttachment| -> Option<String> {
        let name = pv_of(va)?;
        let pv = volumes.iter().find(|v| v.metadata.name.as_deref() == Some(name.as_str()))?;
        let (_, handle) = csi_of(pv)?;
        Some(unique_volume_name(&va.spec.attacher, handle))
    };
    let node = |name: &str| nodes.iter().find(|n| n.metadata.name.as_deref() == Some(name));
    // Step 2.
    for (name, d) in desired {
        if existing.contains_key(name.as_str()) {
            continue;
        }
        if !d.multi_attach {
            // Attached (or attaching, or detaching) elsewhere — or about to be, by this pass.
            let elsewhere = attachments.iter().map(|va| &va.spec).chain(plan.create.iter().map(|va| &va.spec)).any(|spec| spec.source.persistent_volume_name.as_deref() == Some(d.pv_name.as_str()) && spec.node_name != d.node);
            if elsewhere {
                for pod in &d.pods {
                    plan.multi_attach_errors.push((pod.clone(), multi_attach_message(d, pod, desired)));
                }
                continue;
            }
        }
        plan.create.push(new_attachment(d));
    }
    // Step 3.
    for (name, va) in &existing {
        if desired.contains_key(*name) || va.spec.source.persistent_volume_name.is_none() || va.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let in_use = match (node(&va.spec.node_name), unique_of(va)) {
            (Some(n), Some(unique)) => n.status.as_ref().and_then(|s| s.volumes_in_use.as_ref()).is_some_and(|u| u.contains(&unique)),
            _ => false,
        };
        if !in_use {
            plan.delete.push(name.to_string());
        }
    }
    // Step 4.
    for n in nodes {
        let Some(node_name) = n.metadata.name.as_deref() else { continue };
        let mut attached: Vec<AttachedVolume> = existing
            .iter()
            .filter(|(name, va)| {
                va.spec.node_name == node_name
                    && va.metadata.deletion_timestamp.is_none()
                    && va.status.as_ref().is_some_and(|s| s.attached)
                    && !plan.delete.iter().any(|d| d == *name)
            })
            .filter_map(|(_, va)| unique_of(va))
            .map(|name| AttachedVolume { name, device_path: String::new() })
            .collect();
        attached.sort_by(|a, b| a.name.cmp(&b.name));
        attached.dedup_by(|a, b| a.name == b.name);
        plan.volumes_attached.insert(node_name.to_string(), attached);
    }
    plan
}

/// reportMultiAttachError's message for one pod: the pods of its namespace using the volume on
/// other nodes by name, those of other namespaces by count.
fn multi_attach_message(d: &DesiredVolume, pod: &(String, String), desired: &BTreeMap<String, DesiredVolume>) -> String {
    let others: Vec<&(String, String)> = desired.values().filter(|o| o.pv_name == d.pv_name && o.node != d.node).flat_map(|o| o.pods.iter()).collect();
    let local: Vec<&str> = others.iter().filter(|(ns, _)| *ns == pod.0).map(|(_, n)| n.as_str()).collect();
    let elsewhere = others.len() - local.len();
    let suffix = match (local.is_empty(), elsewhere) {
        (true, 0) => "Volume is already exclusively attached to one node and can't be attached to another".to_string(),
        (true, n) => format!("Volume is already used by {n} pod(s) in different namespaces"),
        (false, 0) => format!("Volume is already used by pod(s) {}", local.join(", ")),
        (false, n) => format!("Volume is already used by pod(s) {} and {n} pod(s) in different namespaces", local.join(", ")),
    };
    format!("Multi-Attach error for volume {:?} {suffix}", d.pv_name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    const DRIVER: &str = "hostpath.csi.kubelab.io";

    fn obj<T: serde::de::DeserializeOwned>(v: Value) -> T {
        serde_json::from_value(v).expect("object")
    }

    fn pod(name: &str, node: Option<&str>, claim: &str, phase: &str) -> Pod {
        obj(json!({"metadata": {"name": name, "namespace": "default"}, "spec": {"nodeName": node, "containers": [],
            "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": claim}}]}, "status": {"phase": phase}}))
    }

    fn claim(name: &str, pv: &str, phase: &str) -> PersistentVolumeClaim {
        obj(json!({"metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")}, "spec": {"volumeName": pv}, "status": {"phase": phase}}))
    }

    fn pv(name: &str, claim: &str, driver: Option<&str>, modes: Value) -> PersistentVolume {
        let csi = driver.map(|d| json!({"driver": d, "volumeHandle": format!("h-{name}")}));
        obj(json!({"metadata": {"name": name}, "spec": {"accessModes": modes, "csi": csi,
            "claimRef": {"namespace": "default", "name": claim, "uid": format!("uid-{claim}")}}}))
    }

    fn node(name: &str, in_use: &[String]) -> Node {
        obj(json!({"metadata": {"name": name}, "status": {"volumesInUse": in_use}}))
    }

    fn va(pv: &str, node: &str, attached: bool) -> VolumeAttachment {
        obj(json!({"metadata": {"name": attachment_name(&format!("h-{pv}"), DRIVER, node)},
            "spec": {"attacher": DRIVER, "nodeName": node, "source": {"persistentVolumeName": pv}}, "status": {"attached": attached}}))
    }

    #[test]
    fn attachment_names_are_kubernetes_hashes() {
        // sha256("h" + "d" + "n") = sha256("hdn").
        let want = api::storage::csi::sha256_hex("hdn");
        assert_eq!(attachment_name("h", "d", "n"), format!("csi-{want}"));
        assert_eq!(attachment_name("h", "d", "n").len(), 4 + 64);
        assert_eq!(unique_volume_name(DRIVER, "vol-1"), "kubernetes.io/csi/hostpath.csi.kubelab.io^vol-1");
    }

    #[test]
    fn desired_volumes() {
        let rwo = json!(["ReadWriteOnce"]);
        let claims = [claim("a", "pv-a", "Bound"), claim("b", "pv-b", "Pending"), claim("c", "pv-c", "Bound"), claim("d", "pv-d", "Bound"), claim("e", "pv-e", "Bound")];
        let volumes = [
            pv("pv-a", "a", Some(DRIVER), rwo.clone()),
            pv("pv-b", "b", Some(DRIVER), rwo.clone()),
            pv("pv-c", "c", None, rwo.clone()),
            pv("pv-d", "d", Some("noattach.example.com"), rwo.clone()),
            pv("pv-e", "someone-else", Some(DRIVER), rwo.clone()),
        ];
        let drivers: Vec<CSIDriver> = vec![obj(json!({"metadata": {"name": "noattach.example.com"}, "spec": {"attachRequired": false}}))];
        let nodes = [node("node-1", &[])];
        // (what, pod, desired on node-1)
        let cases = [
            ("bound CSI volume, no CSIDriver object: attach", pod("p", Some("node-1"), "a", "Running"), true),
            ("unscheduled", pod("p", None, "a", "Pending"), false),
            ("node unknown", pod("p", Some("node-9"), "a", "Running"), false),
            ("terminated", pod("p", Some("node-1"), "a", "Succeeded"), false),
            ("claim not bound", pod("p", Some("node-1"), "b", "Running"), false),
            ("not CSI", pod("p", Some("node-1"), "c", "Running"), false),
            ("attachRequired false", pod("p", Some("node-1"), "d", "Running"), false),
            ("volume bound to another claim uid", pod("p", Some("node-1"), "e", "Running"), false),
            ("claim missing", pod("p", Some("node-1"), "zzz", "Running"), false),
        ];
        let (c, v, d, n): (Vec<&PersistentVolumeClaim>, Vec<&PersistentVolume>, Vec<&CSIDriver>, Vec<&Node>) = (claims.iter().collect(), volumes.iter().collect(), drivers.iter().collect(), nodes.iter().collect());
        for (what, p, want) in cases {
            let got = desired_state(&[&p], &c, &v, &d, &n);
            assert_eq!(!got.is_empty(), want, "{what}");
        }
        let two = [pod("p", Some("node-1"), "a", "Running"), pod("q", Some("node-1"), "a", "Running")];
        let got = desired_state(&two.iter().collect::<Vec<_>>(), &c, &v, &d, &n);
        let only = got.get(&attachment_name("h-pv-a", DRIVER, "node-1")).expect("desired");
        assert_eq!((only.unique_name.as_str(), only.pods.len(), only.multi_attach), ("kubernetes.io/csi/hostpath.csi.kubelab.io^h-pv-a", 2, false));
    }

    fn desired(pv: &str, node: &str, pods: &[&str], multi: bool) -> (String, DesiredVolume) {
        let d = DesiredVolume {
            node: node.into(),
            unique_name: unique_volume_name(DRIVER, &format!("h-{pv}")),
            pv_name: pv.into(),
            driver: DRIVER.into(),
            handle: format!("h-{pv}"),
            multi_attach: multi,
            pods: pods.iter().map(|p| ("default".to_string(), p.to_string())).collect(),
        };
        (d.attachment_name(), d)
    }

    #[test]
    fn reconcile_attaches_detaches_and_reports() {
        let volumes = [pv("pv-a", "a", Some(DRIVER), json!(["ReadWriteOnce"])), pv("pv-b", "b", Some(DRIVER), json!(["ReadWriteOnce"]))];
        let v: Vec<&PersistentVolume> = volumes.iter().collect();
        let ua = unique_volume_name(DRIVER, "h-pv-a");
        let names = |p: &Plan| p.create.iter().map(|va| (va.spec.node_name.clone(), va.spec.source.persistent_volume_name.clone().unwrap_or_default())).collect::<Vec<_>>();
        let attached = |p: &Plan, n: &str| p.volumes_attached.get(n).map(|l| l.iter().map(|a| a.name.clone()).collect::<Vec<_>>()).unwrap_or_default();

        // Wanted, nothing yet: create.
        let want: BTreeMap<String, DesiredVolume> = [desired("pv-a", "node-1", &["web"], false)].into();
        let n1 = node("node-1", &[]);
        let plan = reconcile(&want, &[], &v, &[&n1]);
        assert_eq!(names(&plan), [("node-1".to_string(), "pv-a".to_string())]);
        assert_eq!(plan.create[0].spec.attacher, DRIVER);
        assert_eq!(attached(&plan, "node-1"), Vec::<String>::new());

        // Attached: nothing to do; reported on the node.
        let a1 = va("pv-a", "node-1", true);
        let plan = reconcile(&want, &[&a1], &v, &[&n1]);
        assert!(plan.create.is_empty() && plan.delete.is_empty());
        assert_eq!(attached(&plan, "node-1"), std::slice::from_ref(&ua));
        // Not attached yet: not reported.
        let pending = va("pv-a", "node-1", false);
        assert_eq!(attached(&reconcile(&want, &[&pending], &v, &[&n1]), "node-1"), Vec::<String>::new());

        // No longer wanted but still in use on the node: kept (and reported).
        let busy = node("node-1", std::slice::from_ref(&ua));
        let plan = reconcile(&BTreeMap::new(), &[&a1], &v, &[&busy]);
        assert!(plan.delete.is_empty());
        assert_eq!(attached(&plan, "node-1"), std::slice::from_ref(&ua));
        // Unmounted: detached, and no longer reported.
        let plan = reconcile(&BTreeMap::new(), &[&a1], &v, &[&n1]);
        assert_eq!(plan.delete, [a1.metadata.name.clone().unwrap_or_default()]);
        assert_eq!(attached(&plan, "node-1"), Vec::<String>::new());
        // Node gone: detached at once.
        let plan = reconcile(&BTreeMap::new(), &[&a1], &v, &[]);
        assert_eq!(plan.delete.len(), 1);
        // Being deleted already: left alone, not reported.
        let mut going = a1.clone();
        going.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time("2026-12-06T00:00:00Z".parse().expect("time")));
        let plan = reconcile(&BTreeMap::new(), &[&going], &v, &[&n1]);
        assert!(plan.delete.is_empty());
        assert_eq!(attached(&plan, "node-1"), Vec::<String>::new());

        // ReadWriteOnce attached on node-1, wanted on node-2 too: Multi-Attach error.
        let both: BTreeMap<String, DesiredVolume> = [desired("pv-a", "node-1", &["web-0"], false), desired("pv-a", "node-2", &["web-1"], false)].into();
        let n2 = node("node-2", &[]);
        let plan = reconcile(&both, &[&a1], &v, &[&n1, &n2]);
        assert!(plan.create.is_empty());
        assert_eq!(plan.multi_attach_errors, [(("default".to_string(), "web-1".to_string()), "Multi-Attach error for volume \"pv-a\" Volume is already used by pod(s) web-0".to_string())]);
        // Wanted on two nodes at once, attached nowhere: only one (the first by name) is attached.
        let plan = reconcile(&both, &[], &v, &[&n1, &n2]);
        assert_eq!((plan.create.len(), plan.multi_attach_errors.len()), (1, 1));
        // ReadWriteMany: attached to both.
        let many: BTreeMap<String, DesiredVolume> = [desired("pv-a", "node-1", &["web-0"], true), desired("pv-a", "node-2", &["web-1"], true)].into();
        assert_eq!(names(&reconcile(&many, &[&a1], &v, &[&n1, &n2])), [("node-2".to_string(), "pv-a".to_string())]);
    }
}
