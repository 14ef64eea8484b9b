//! Mirrors kubernetes-csi/external-attacher (pkg/controller/csi_handler.go): VolumeAttachments
//! become ControllerPublishVolume/ControllerUnpublishVolume calls on the driver. One attacher runs
//! per node, beside the driver, and handles the attachments of its node only.
//!
//! For a VolumeAttachment with `spec.attacher` = the driver and `spec.nodeName` = this node
//! ([`decide`]):
//! 1. Attach: add the finalizer `external-attacher/<driver with dots as dashes>`, read the PV
//!    (`spec.source.persistentVolumeName`) for the volume handle, its attributes, read-only flag
//!    and access modes, call ControllerPublishVolume, and write `status.attached: true` with the
//!    publish context as `attachmentMetadata` — or `status.attachError` and a retry.
//! 2. Detach (the object is being deleted and still has the finalizer): ControllerUnpublishVolume,
//!    `status.attached: false`, then the finalizer goes and the object with it — or
//!    `status.detachError` and a retry.

use std::sync::Arc;

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::PersistentVolume;
use k8s_openapi::api::storage::v1::VolumeAttachment;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use proto::csi::v1 as csi;
use proto::csi::v1::controller_client::ControllerClient;
use serde_json::json;
use tonic::transport::Channel;

use crate::{capability, connection};
use crate::error::{Error, Result};

const TARGET: &str = "csi::attacher";

/// How long a failed attach or detach waits before it is tried again.
pub const RETRY: std::time::Duration = std::time::Duration::from_secs(5);

/// The attacher's finalizer on a VolumeAttachment: `external-attacher/` and the driver name with
/// its dots as dashes (`external-attacher/hostpath-csi-kubelab-io`).
pub fn finalizer(driver: &str) -> String {
    format!("external-attacher/{}", driver.replace('.', "-"))
}

/// What to do with a VolumeAttachment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Another attacher's or another node's, or nothing left to do.
    Ignore,
    Attach,
    Detach,
}

/// Which step a VolumeAttachment needs.
pub fn decide(va: &VolumeAttachment, driver: &str, node: &str) -> Decision {
    if va.spec.attacher != driver || va.spec.node_name != node {
        return Decision::Ignore;
    }
    let has_finalizer = va.metadata.finalizers.iter().flatten().any(|f| *f == finalizer(driver));
    if va.metadata.deletion_timestamp.is_some() {
        return if has_finalizer { Decision::Detach } else { Decision::Ignore };
    }
    let attached = va.status.as_ref().is_some_and(|s| s.attached);
    if attached && has_finalizer { Decision::Ignore } else { Decision::Attach }
}

/// ControllerPublishVolume's request for a PV on `node_id`.
pub fn publish_request(pv: &PersistentVolume, driver: &str, node_id: &str) -> Result<csi::ControllerPublishVolumeRequest> {
    let name = pv.metadata.name.as_deref().unwrap_or_default();
    let spec = pv.spec.as_ref().ok_or_else(|| Error::InvalidArgument(format!("persistentvolume {name:?} has no spec")))?;
    let src = spec
        .csi
        .as_ref()
        .filter(|c| c.driver == driver)
        .ok_or_else(|| Error::InvalidArgument(format!("persistentvolume {name:?} is not a {driver} CSI volume")))?;
    let modes = spec.access_modes.clone().unwrap_or_default();
    let mode = capability::single_access_mode(&modes)
        .ok_or_else(|| Error::InvalidArgument(format!("persistentvolume {name:?} has no supported access mode")))?;
    let block = spec.volume_mode.as_deref() == Some("Block");
    let mount_options = spec.mount_options.clone().unwrap_or_default();
    Ok(csi::ControllerPublishVolumeRequest {
        volume_id: src.volume_handle.clone(),
        node_id: node_id.to_string(),
        volume_capability: Some(capability::capability(mode, block, src.fs_type.as_deref().unwrap_or_default(), &mount_options)),
        readonly: src.read_only.unwrap_or(false),
        secrets: Default::default(),
        volume_context: src.volume_attributes.clone().unwrap_or_default().into_iter().collect(),
    })
}

/// What the attacher needs.
pub struct Attacher {
    pub client: kube::Client,
    pub csi: ControllerClient<Channel>,
    pub driver: String,
    /// This node's name (VolumeAttachment.spec.nodeName).
    pub node: String,
    /// This node's id in the driver (NodeGetInfo's), passed to ControllerPublishVolume.
    pub node_id: String,
}

impl Attacher {
    fn api(&self) -> Api<VolumeAttachment> {
        Api::all(self.client.clone())
    }

    async fn sync(&self, va: &VolumeAttachment) -> Result<Action> {
        match decide(va, &self.driver, &self.node) {
            Decision::Ignore => Ok(Action::await_change()),
            Decision::Attach => self.attach(va).await,
            Decision::Detach => self.detach(va).await,
        }
    }

    async fn set_finalizers(&self, va: &VolumeAttachment, finalizers: Vec<String>) -> Result<()> {
        let name = va.metadata.name.as_deref().unwrap_or_default();
        let patch = json!({"metadata": {"resourceVersion": va.metadata.resource_version, "finalizers": finalizers}});
        self.api().patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await?;
        Ok(())
    }

    /// Writes `status` and answers the object as it now is.
    async fn patch_status(&self, name: &str, status: serde_json::Value) -> Result<VolumeAttachment> {
        Ok(self.api().patch_status(name, &PatchParams::default(), &Patch::Merge(&json!({ "status": status }))).await?)
    }

    fn volume_error(message: &str) -> serde_json::Value {
        json!({"time": Time(k8s_openapi::jiff::Timestamp::now()), "message": message})
    }

    /// Step 1.
    async fn attach(&self, va: &VolumeAttachment) -> Result<Action> {
        let name = va.metadata.name.clone().unwrap_or_default();
        let fin = finalizer(&self.driver);
        let mut finalizers = va.metadata.finalizers.clone().unwrap_or_default();
        if !finalizers.contains(&fin) {
            finalizers.push(fin);
            // The patch changes the object: the watch brings it back with the finalizer.
            self.set_finalizers(va, finalizers).await?;
            return Ok(Action::await_change());
        }
        let published = async {
            let pv_name = va
                .spec
                .source
                .persistent_volume_name
                .as_deref()
                .ok_or_else(|| Error::InvalidArgument("only persistent volumes are attached (no inline volume specs)".into()))?;
            let pv = Api::<PersistentVolume>::all(self.client.clone()).get(pv_name).await?;
            let req = publish_request(&pv, &self.driver, &self.node_id)?;
            let volume = req.volume_id.clone();
            let mut client = self.csi.clone();
            let resp = connection::call("ControllerPublishVolume", &self.driver, &volume, client.controller_publish_volume(req)).await?;
            Ok::<_, Error>(resp.publish_context)
        }
        .await;
        match published {
            Ok(context) => {
                let context: std::collections::BTreeMap<String, String> = context.into_iter().collect();
                self.patch_status(&name, json!({"attached": true, "attachmentMetadata": context, "attachError": null})).await?;
                tracing::info!(target: TARGET, attachment = %name, node = %self.node, "attached");
                Ok(Action::await_change())
            }
            Err(e) => {
                let _ = self.patch_status(&name, json!({"attached": false, "attachError": Self::volume_error(&e.to_string())})).await;
                Err(e)
            }
        }
    }

    /// Step 2.
    async fn detach(&self, va: &VolumeAttachment) -> Result<Action> {
        let name = va.metadata.name.clone().unwrap_or_default();
        let unpublished = async {
            let pv_name = va.spec.source.persistent_volume_name.as_deref().unwrap_or_default();
            let handle = match Api::<PersistentVolume>::all(self.client.clone()).get_opt(pv_name).await? {
                Some(pv) => pv.spec.and_then(|s| s.csi).map(|c| c.volume_handle),
                None => None,
            };
            // Without its PV the volume cannot be named; the driver refuses to delete an attached
            // volume, so a PV deleted under an attachment was never this driver's to detach.
            let Some(volume_id) = handle else {
                tracing::warn!(target: TARGET, attachment = %name, pv = pv_name, "persistent volume gone; detaching without ControllerUnpublishVolume");
                return Ok(());
            };
            let req = csi::ControllerUnpublishVolumeRequest { volume_id: volume_id.clone(), node_id: self.node_id.clone(), secrets: Default::default() };
            let mut client = self.csi.clone();
            connection::call("ControllerUnpublishVolume", &self.driver, &volume_id, client.controller_unpublish_volume(req)).await?;
            Ok::<_, Error>(())
        }
        .await;
        if let Err(e) = unpublished {
            let _ = self.patch_status(&name, json!({"detachError": Self::volume_error(&e.to_string())})).await;
            return Err(e);
        }
        // The status write may find the object already going; the finalizer is what matters. The
        // finalizer patch is guarded by the resourceVersion the status write left.
        let current = match self.patch_status(&name, json!({"attached": false, "detachError": null})).await {
            Ok(updated) => updated,
            Err(e) => {
                tracing::debug!(target: TARGET, attachment = %name, error = %e, "could not mark detached");
                va.clone()
            }
        };
        let fin = finalizer(&self.driver);
        let rest: Vec<String> = current.metadata.finalizers.iter().flatten().filter(|f| **f != fin).cloned().collect();
        match self.set_finalizers(&current, rest).await {
            Ok(()) => {}
            Err(Error::Kube(kube::Error::Api(s))) if s.code == 404 => {}
            Err(e) => return Err(e),
        }
        tracing::info!(target: TARGET, attachment = %name, node = %self.node, "detached");
        Ok(Action::await_change())
    }
}

/// Runs until `shutdown` completes; the watch retries with backoff while the API server does
/// not serve VolumeAttachments.
pub async fn run(a: Arc<Attacher>, shutdown: impl std::future::Future<Output = ()> + Send + 'static) {
    tracing::info!(target: TARGET, driver = %a.driver, node = %a.node, "external attacher started");
    let attachments = Controller::new(a.api(), watcher::Config::default())
        .run(
            |va, a: Arc<Attacher>| async move { a.sync(&va).await },
            |va, e, _| {
                tracing::warn!(target: TARGET, attachment = va.metadata.name.as_deref().unwrap_or_default(), error = %e, "attach/detach failed; retrying");
                Action::requeue(RETRY)
            },
            a.clone(),
        )
        .for_each(|_| std::future::ready(()));
    tokio::select! {
        _ = attachments => {}
        _ = shutdown => {}
    }
    tracing::info!(target: TARGET, "external attacher stopped");
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{CSIPersistentVolumeSource, PersistentVolumeSpec};
    use k8s_openapi::api::storage::v1::{VolumeAttachmentSource, VolumeAttachmentSpec, VolumeAttachmentStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    const DRIVER: &str = "hostpath.csi.kubelab.io";

    fn va(attacher: &str, node: &str, finalizers: &[&str], deleting: bool, attached: bool) -> VolumeAttachment {
        VolumeAttachment {
            metadata: ObjectMeta {
                name: Some("csi-abc".into()),
                finalizers: Some(finalizers.iter().map(|s| s.to_string()).collect()),
                deletion_timestamp: deleting.then(|| Time(k8s_openapi::jiff::Timestamp::now())),
                ..Default::default()
            },
            spec: VolumeAttachmentSpec {
                attacher: attacher.into(),
                node_name: node.into(),
                source: VolumeAttachmentSource { persistent_volume_name: Some("pv1".into()), ..Default::default() },
            },
            status: Some(VolumeAttachmentStatus { attached, ..Default::default() }),
        }
    }

    #[test]
    fn decide_table() {
        let fin = finalizer(DRIVER);
        assert_eq!(fin, "external-attacher/hostpath-csi-kubelab-io");
        let f = fin.as_str();
        let cases = [
            ("other driver", va("x.csi", "n1", &[], false, false), Decision::Ignore),
            ("other node", va(DRIVER, "n2", &[], false, false), Decision::Ignore),
            ("new", va(DRIVER, "n1", &[], false, false), Decision::Attach),
            ("finalizer, not attached", va(DRIVER, "n1", &[f], false, false), Decision::Attach),
            ("attached", va(DRIVER, "n1", &[f], false, true), Decision::Ignore),
            ("deleting", va(DRIVER, "n1", &[f], true, true), Decision::Detach),
            ("deleted, finalizer gone", va(DRIVER, "n1", &["other"], true, true), Decision::Ignore),
        ];
        for (name, v, want) in cases {
            assert_eq!(decide(&v, DRIVER, "n1"), want, "{name}");
        }
    }

    #[test]
    fn publish_request_from_pv() {
        let pv = PersistentVolume {
            metadata: ObjectMeta { name: Some("pv1".into()), ..Default::default() },
            spec: Some(PersistentVolumeSpec {
                access_modes: Some(vec!["ReadWriteOnce".into()]),
                csi: Some(CSIPersistentVolumeSource {
                    driver: DRIVER.into(),
                    volume_handle: "vol-1".into(),
                    fs_type: Some("ext4".into()),
                    read_only: Some(true),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            status: None,
        };
        let req = publish_request(&pv, DRIVER, "n1").expect("request");
        assert_eq!((req.volume_id.as_str(), req.node_id.as_str(), req.readonly), ("vol-1", "n1", true));
        assert!(req.volume_capability.is_some());
        assert!(publish_request(&pv, "other.csi", "n1").is_err(), "another driver's PV");
    }
}
