//! Mirrors csi-driver-host-path's pkg/hostpath/nodeserver.go: a volume's directory made
//! available to pods on this node in the two steps Kubernetes takes —
//! NodeStageVolume bind-mounts it once per node on the staging path (kubelet's `globalmount`),
//! NodePublishVolume bind-mounts the staging path once per pod on its target path (read-only by a
//! remount when asked) — and taken back in reverse. Every call is idempotent: a retried call that
//! finds its work done answers OK.

use std::path::{Path, PathBuf};

use proto::csi::v1 as csi;
use proto::csi::v1::node_service_capability::{Rpc, Type as CapabilityType, rpc::Type as RpcType};
use tonic::{Request, Response, Status};

use super::{HostPath, check_capability, is_read_only_mode, node_topology, require, volume_path};
use crate::error::{Error, Result};
use crate::mount;

/// The node capabilities.
pub fn node_capabilities() -> Vec<csi::NodeServiceCapability> {
    [RpcType::StageUnstageVolume, RpcType::GetVolumeStats]
        .into_iter()
        .map(|t| csi::NodeServiceCapability { r#type: Some(CapabilityType::Rpc(Rpc { r#type: t as i32 })) })
        .collect()
}

fn mkdir(path: &Path) -> Result<()> {
    std::fs::create_dir_all(path).map_err(|e| Error::io(path, e))
}

fn is_mount_point(path: &Path) -> Result<bool> {
    mount::is_mount_point(path).map_err(|e| Error::io(path, e))
}

fn require_path(value: &str, what: &str) -> Result<PathBuf> {
    let path = PathBuf::from(require(value, what)?);
    if !path.is_absolute() {
        return Err(Error::InvalidArgument(format!("{what} {value:?} is not an absolute path")));
    }
    Ok(path)
}

#[tonic::async_trait]
impl csi::node_server::Node for HostPath {
    async fn node_stage_volume(&self, req: Request<csi::NodeStageVolumeRequest>) -> Result<Response<csi::NodeStageVolumeResponse>, Status> {
        let req = req.into_inner();
        self.locked(move |config, st| {
            // Step 1: validate.
            let id = require(&req.volume_id, "volume id")?.to_string();
            let staging = require_path(&req.staging_target_path, "staging target path")?;
            let cap = req.volume_capability.as_ref().ok_or_else(|| Error::InvalidArgument("volume capability missing in request".into()))?;
            check_capability(cap)?;
            let v = st.get(&id).ok_or_else(|| Error::NotFound(format!("volume {id} not found")))?;
            // Step 2: Kubernetes attaches before it stages (the driver asks for attaching).
            if !v.attached.contains(&config.node_id) {
                return Err(Error::FailedPrecondition(format!(
                    "volume {id} is not attached to node {:?}: ControllerPublishVolume must be called before NodeStageVolume",
                    config.node_id
                )));
            }
            // Step 3: already staged there is done (idempotency).
            if v.staged.contains(&staging) && is_mount_point(&staging)? {
                return Ok(());
            }
            // Step 4: bind-mount the volume's directory on the staging path.
            mkdir(&staging)?;
            if !is_mount_point(&staging)? {
                mount::bind_mount(&volume_path(&config.state_dir, &id), &staging, false).map_err(|e| Error::io(&staging, e))?;
            }
            st.update(&id, |v| {
                v.staged.insert(staging.clone());
            })?;
            tracing::info!(target: "csi::hostpath", volume = %id, staging = %staging.display(), "NodeStageVolume: staged");
            Ok(())
        })
        .await?;
        Ok(Response::new(csi::NodeStageVolumeResponse {}))
    }

    async fn node_unstage_volume(
        &self,
        req: Request<csi::NodeUnstageVolumeRequest>,
    ) -> Result<Response<csi::NodeUnstageVolumeResponse>, Status> {
        let req = req.into_inner();
        self.locked(move |_, st| {
            let id = require(&req.volume_id, "volume id")?.to_string();
            let staging = require_path(&req.staging_target_path, "staging target path")?;
            if st.get(&id).is_none() {
                return Err(Error::NotFound(format!("volume {id} not found")));
            }
            // Unmounting what is not mounted is a no-op: a retried unstage answers OK. The
            // directory itself is the CO's (kubelet removes its globalmount).
            mount::unmount_all(&staging).map_err(|e| Error::io(&staging, e))?;
            st.update(&id, |v| {
                v.staged.remove(&staging);
            })?;
            tracing::info!(target: "csi::hostpath", volume = %id, staging = %staging.display(), "NodeUnstageVolume: unstaged");
            Ok(())
        })
        .await?;
        Ok(Response::new(csi::NodeUnstageVolumeResponse {}))
    }

    async fn node_publish_volume(
        &self,
        req: Request<csi::NodePublishVolumeRequest>,
    ) -> Result<Response<csi::NodePublishVolumeResponse>, Status> {
        let req = req.into_inner();
        self.locked(move |_, st| {
            // Step 1: validate.
            let id = require(&req.volume_id, "volume id")?.to_string();
            let target = require_path(&req.target_path, "target path")?;
            let staging = require_path(&req.staging_target_path, "staging target path")?;
            let cap = req.volume_capability.as_ref().ok_or_else(|| Error::InvalidArgument("volume capability missing in request".into()))?;
            check_capability(cap)?;
            let read_only = req.readonly || is_read_only_mode(Some(cap));
            let v = st.get(&id).ok_or_else(|| Error::NotFound(format!("volume {id} not found")))?;
            if !v.staged.contains(&staging) {
                return Err(Error::FailedPrecondition(format!("volume {id} is not staged at {}", staging.display())));
            }
            // Step 2: published there already: done if the same way, ALREADY_EXISTS if not.
            if let Some(&was_read_only) = v.published.get(&target)
                && is_mount_point(&target)?
            {
                if was_read_only != read_only {
                    return Err(Error::AlreadyExists(format!(
                        "volume {id} is already published at {} with read-only {was_read_only}",
                        target.display()
                    )));
                }
                return Ok(());
            }
            // Step 3: bind-mount the staging path on the target, then remount it read-only if asked.
            mkdir(&target)?;
            if !is_mount_point(&target)? {
                mount::bind_mount(&staging, &target, read_only).map_err(|e| Error::io(&target, e))?;
            }
            st.update(&id, |v| {
                v.published.insert(target.clone(), read_only);
            })?;
            tracing::info!(target: "csi::hostpath", volume = %id, target = %target.display(), read_only, "NodePublishVolume: published");
            Ok(())
        })
        .await?;
        Ok(Response::new(csi::NodePublishVolumeResponse {}))
    }

    async fn node_unpublish_volume(
        &self,
        req: Request<csi::NodeUnpublishVolumeRequest>,
    ) -> Result<Response<csi::NodeUnpublishVolumeResponse>, Status> {
        let req = req.into_inner();
        self.locked(move |_, st| {
            let id = require(&req.volume_id, "volume id")?.to_string();
            let target = require_path(&req.target_path, "target path")?;
            if st.get(&id).is_none() {
                return Err(Error::NotFound(format!("volume {id} not found")));
            }
            // As mount-utils' CleanupMountPoint: unmount, then remove the (now empty) directory.
            mount::unmount_all(&target).map_err(|e| Error::io(&target, e))?;
            match std::fs::remove_dir(&target) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(Error::io(&target, e)),
            }
            st.update(&id, |v| {
                v.published.remove(&target);
            })?;
            tracing::info!(target: "csi::hostpath", volume = %id, target = %target.display(), "NodeUnpublishVolume: unpublished");
            Ok(())
        })
        .await?;
        Ok(Response::new(csi::NodeUnpublishVolumeResponse {}))
    }

    /// The usage of the filesystem under the path (the volume is a directory of it: caveat).
    async fn node_get_volume_stats(
        &self,
        req: Request<csi::NodeGetVolumeStatsRequest>,
    ) -> Result<Response<csi::NodeGetVolumeStatsResponse>, Status> {
        let req = req.into_inner();
        let fs = self
            .locked(move |_, st| {
                let id = require(&req.volume_id, "volume id")?;
                let path = require_path(&req.volume_path, "volume path")?;
                if st.get(id).is_none() {
                    return Err(Error::NotFound(format!("volume {id} not found")));
                }
                if !path.exists() {
                    return Err(Error::NotFound(format!("volume path {} does not exist", path.display())));
                }
                mount::statvfs(&path).map_err(|e| Error::io(&path, e))
            })
            .await?;
        use csi::volume_usage::Unit;
        Ok(Response::new(csi::NodeGetVolumeStatsResponse {
            usage: vec![
                csi::VolumeUsage { available: fs.available_bytes, total: fs.total_bytes, used: fs.used_bytes, unit: Unit::Bytes as i32 },
                csi::VolumeUsage { available: fs.free_inodes, total: fs.total_inodes, used: fs.used_inodes, unit: Unit::Inodes as i32 },
            ],
            volume_condition: None,
        }))
    }

    async fn node_get_capabilities(
        &self,
        _: Request<csi::NodeGetCapabilitiesRequest>,
    ) -> Result<Response<csi::NodeGetCapabilitiesResponse>, Status> {
        Ok(Response::new(csi::NodeGetCapabilitiesResponse { capabilities: node_capabilities() }))
    }

    async fn node_get_info(&self, _: Request<csi::NodeGetInfoRequest>) -> Result<Response<csi::NodeGetInfoResponse>, Status> {
        let c = self.config();
        Ok(Response::new(csi::NodeGetInfoResponse {
            node_id: c.node_id.clone(),
            max_volumes_per_node: c.max_volumes_per_node,
            accessible_topology: Some(node_topology(&c.node_id)),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_must_be_absolute() {
        assert!(matches!(require_path("", "target path"), Err(Error::InvalidArgument(_))));
        assert!(matches!(require_path("rel/dir", "target path"), Err(Error::InvalidArgument(m)) if m.contains("not an absolute path")));
        assert_eq!(require_path("/a/b", "target path").ok(), Some(PathBuf::from("/a/b")));
    }
}
