//! Mirrors csi-driver-host-path's pkg/hostpath/controllerserver.go: volumes made and removed
//! (CreateVolume/DeleteVolume, a directory each), attached and detached (ControllerPublish/
//! ControllerUnpublish, which only record the node: a directory needs no attaching, but the
//! calls keep Kubernetes' attach flow honest), and the space left (GetCapacity).

use std::os::unix::fs::PermissionsExt as _;

use proto::csi::v1 as csi;
use proto::csi::v1::controller_service_capability::{Rpc, Type as CapabilityType, rpc::Type as RpcType};
use tonic::{Request, Response, Status};

use super::state::Volume;
use super::{HostPath, check_capability, node_topology, require, volume_path};
use crate::error::{Error, Result};
use crate::mount;

/// The controller capabilities.
pub fn controller_capabilities() -> Vec<csi::ControllerServiceCapability> {
    [RpcType::CreateDeleteVolume, RpcType::PublishUnpublishVolume, RpcType::GetCapacity]
        .into_iter()
        .map(|t| csi::ControllerServiceCapability { r#type: Some(CapabilityType::Rpc(Rpc { r#type: t as i32 })) })
        .collect()
}

/// The capacity a new volume gets for `range`: the required bytes, or the limit when only that is
/// given; 0 (unknown) when neither is. A range whose minimum exceeds its maximum is OUT_OF_RANGE.
pub fn capacity_for(range: Option<&csi::CapacityRange>) -> Result<i64> {
    let Some(r) = range else { return Ok(0) };
    if r.required_bytes < 0 || r.limit_bytes < 0 {
        return Err(Error::OutOfRange("capacity range must not be negative".into()));
    }
    if r.limit_bytes > 0 && r.required_bytes > r.limit_bytes {
        return Err(Error::OutOfRange(format!("required bytes {} exceed the limit {}", r.required_bytes, r.limit_bytes)));
    }
    Ok(if r.required_bytes > 0 { r.required_bytes } else { r.limit_bytes })
}

/// Whether an existing volume of `capacity` bytes satisfies `range` (CreateVolume's idempotency:
/// the same name again with a range it does not fit is ALREADY_EXISTS).
pub fn capacity_fits(capacity: i64, range: Option<&csi::CapacityRange>) -> bool {
    let Some(r) = range else { return true };
    capacity >= r.required_bytes && (r.limit_bytes == 0 || capacity <= r.limit_bytes)
}

/// Whether a volume on `node` meets the accessibility requirements: with requisite or preferred
/// topologies given, one of them must be this node's (the driver can only make volumes on its
/// own disk: RESOURCE_EXHAUSTED otherwise, the spec's code for "not in that topology").
pub fn check_topology(req: Option<&csi::TopologyRequirement>, node: &str) -> Result<()> {
    let Some(req) = req else { return Ok(()) };
    let mut all = req.requisite.iter().chain(&req.preferred).peekable();
    if all.peek().is_none() {
        return Ok(());
    }
    let ours = |t: &csi::Topology| t.segments.get(crate::TOPOLOGY_KEY).is_some_and(|v| v == node);
    if all.any(ours) {
        return Ok(());
    }
    Err(Error::ResourceExhausted(format!("volume can only be provisioned on node {node:?}, which the accessibility requirements do not include")))
}

fn to_csi_volume(v: &Volume) -> csi::Volume {
    csi::Volume {
        capacity_bytes: v.capacity_bytes,
        volume_id: v.id.clone(),
        volume_context: v.parameters.clone().into_iter().collect(),
        content_source: None,
        accessible_topology: vec![node_topology(&v.node_id)],
    }
}

#[tonic::async_trait]
impl csi::controller_server::Controller for HostPath {
    async fn create_volume(&self, req: Request<csi::CreateVolumeRequest>) -> Result<Response<csi::CreateVolumeResponse>, Status> {
        let req = req.into_inner();
        let volume = self
            .locked(move |config, st| {
                // Step 1: validate the request.
                let name = require(&req.name, "name")?.to_string();
                if req.volume_capabilities.is_empty() {
                    return Err(Error::InvalidArgument("volume capabilities missing in request".into()));
                }
                req.volume_capabilities.iter().try_for_each(check_capability)?;
                if req.volume_content_source.is_some() {
                    return Err(Error::InvalidArgument("volume content sources (snapshots, clones) are not supported".into()));
                }
                let capacity = capacity_for(req.capacity_range.as_ref())?;
                // Step 2: the same name again is the same volume, if it fits (idempotency).
                if let Some(existing) = st.get_by_name(&name) {
                    if !capacity_fits(existing.capacity_bytes, req.capacity_range.as_ref()) {
                        return Err(Error::AlreadyExists(format!(
                            "volume {name:?} already exists with a different capacity ({} bytes)",
                            existing.capacity_bytes
                        )));
                    }
                    return Ok(to_csi_volume(existing));
                }
                // Step 3: it can only live on this node, and only up to the disk's size.
                check_topology(req.accessibility_requirements.as_ref(), &config.node_id)?;
                let volumes_dir = config.state_dir.join("volumes");
                let fs = mount::statvfs(&volumes_dir).map_err(|e| Error::io(&volumes_dir, e))?;
                if capacity > fs.total_bytes {
                    return Err(Error::OutOfRange(format!(
                        "requested capacity {capacity} exceeds the size of the volumes' filesystem ({} bytes)",
                        fs.total_bytes
                    )));
                }
                // Step 4: the directory, writable by any pod's user, then the record.
                let id = uuid::Uuid::new_v4().to_string();
                let path = volume_path(&config.state_dir, &id);
                std::fs::create_dir_all(&path).map_err(|e| Error::io(&path, e))?;
                std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o777)).map_err(|e| Error::io(&path, e))?;
                let v = Volume {
                    id,
                    name,
                    capacity_bytes: capacity,
                    node_id: config.node_id.clone(),
                    parameters: req.parameters.into_iter().collect(),
                    ..Default::default()
                };
                if let Err(e) = st.insert(v.clone()) {
                    let _ = std::fs::remove_dir(&path);
                    return Err(e);
                }
                tracing::info!(target: "csi::hostpath", volume = %v.id, name = %v.name, capacity = v.capacity_bytes, "CreateVolume: created");
                Ok(to_csi_volume(&v))
            })
            .await?;
        Ok(Response::new(csi::CreateVolumeResponse { volume: Some(volume) }))
    }

    async fn delete_volume(&self, req: Request<csi::DeleteVolumeRequest>) -> Result<Response<csi::DeleteVolumeResponse>, Status> {
        let req = req.into_inner();
        self.locked(move |config, st| {
            let id = require(&req.volume_id, "volume id")?;
            // An unknown volume is already deleted (the spec's idempotency).
            let Some(v) = st.get(id) else { return Ok(()) };
            if v.in_use() {
                return Err(Error::FailedPrecondition(format!("volume {id} is still in use (attached, staged or published)")));
            }
            let path = volume_path(&config.state_dir, id);
            match std::fs::remove_dir_all(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(Error::io(&path, e)),
            }
            st.remove(id)?;
            tracing::info!(target: "csi::hostpath", volume = %id, "DeleteVolume: deleted");
            Ok(())
        })
        .await?;
        Ok(Response::new(csi::DeleteVolumeResponse {}))
    }

    async fn controller_publish_volume(
        &self,
        req: Request<csi::ControllerPublishVolumeRequest>,
    ) -> Result<Response<csi::ControllerPublishVolumeResponse>, Status> {
        let req = req.into_inner();
        self.locked(move |config, st| {
            let id = require(&req.volume_id, "volume id")?.to_string();
            let node = require(&req.node_id, "node id")?.to_string();
            let cap = req.volume_capability.as_ref().ok_or_else(|| Error::InvalidArgument("volume capability missing in request".into()))?;
            check_capability(cap)?;
            let v = st.get(&id).ok_or_else(|| Error::NotFound(format!("volume {id} not found")))?;
            // The volume is this node's directory: no other node can have it.
            if node != config.node_id || v.node_id != node {
                return Err(Error::NotFound(format!("node {node:?} not found: volume {id} lives on node {:?}", v.node_id)));
            }
            st.update(&id, |v| {
                v.attached.insert(node.clone());
            })?;
            tracing::info!(target: "csi::hostpath", volume = %id, node = %node, "ControllerPublishVolume: attached");
            Ok(())
        })
        .await?;
        Ok(Response::new(csi::ControllerPublishVolumeResponse { publish_context: Default::default() }))
    }

    async fn controller_unpublish_volume(
        &self,
        req: Request<csi::ControllerUnpublishVolumeRequest>,
    ) -> Result<Response<csi::ControllerUnpublishVolumeResponse>, Status> {
        let req = req.into_inner();
        self.locked(move |_, st| {
            let id = require(&req.volume_id, "volume id")?.to_string();
            // Unknown volume or node: nothing is attached, which is what was asked (the spec's
            // "SHOULD return OK" when it can be regarded as unpublished).
            st.update(&id, |v| match req.node_id.as_str() {
                "" => v.attached.clear(),
                node => {
                    v.attached.remove(node);
                }
            })?;
            tracing::info!(target: "csi::hostpath", volume = %id, node = %req.node_id, "ControllerUnpublishVolume: detached");
            Ok(())
        })
        .await?;
        Ok(Response::new(csi::ControllerUnpublishVolumeResponse {}))
    }

    async fn validate_volume_capabilities(
        &self,
        req: Request<csi::ValidateVolumeCapabilitiesRequest>,
    ) -> Result<Response<csi::ValidateVolumeCapabilitiesResponse>, Status> {
        let req = req.into_inner();
        let resp = self
            .locked(move |_, st| {
                let id = require(&req.volume_id, "volume id")?;
                if req.volume_capabilities.is_empty() {
                    return Err(Error::InvalidArgument("volume capabilities missing in request".into()));
                }
                if st.get(id).is_none() {
                    return Err(Error::NotFound(format!("volume {id} not found")));
                }
                Ok(match req.volume_capabilities.iter().try_for_each(check_capability) {
                    Ok(()) => csi::ValidateVolumeCapabilitiesResponse {
                        confirmed: Some(csi::validate_volume_capabilities_response::Confirmed {
                            volume_context: req.volume_context,
                            volume_capabilities: req.volume_capabilities,
                            parameters: req.parameters,
                        }),
                        message: String::new(),
                    },
                    Err(e) => csi::ValidateVolumeCapabilitiesResponse { confirmed: None, message: e.to_string() },
                })
            })
            .await?;
        Ok(Response::new(resp))
    }

    /// What is free on the filesystem of the volumes' directory.
    async fn get_capacity(&self, _: Request<csi::GetCapacityRequest>) -> Result<Response<csi::GetCapacityResponse>, Status> {
        let fs = self
            .locked(|config, _| {
                let dir = config.state_dir.join("volumes");
                mount::statvfs(&dir).map_err(|e| Error::io(&dir, e))
            })
            .await?;
        Ok(Response::new(csi::GetCapacityResponse {
            available_capacity: fs.available_bytes,
            maximum_volume_size: Some(fs.total_bytes),
            minimum_volume_size: None,
        }))
    }

    async fn controller_get_capabilities(
        &self,
        _: Request<csi::ControllerGetCapabilitiesRequest>,
    ) -> Result<Response<csi::ControllerGetCapabilitiesResponse>, Status> {
        Ok(Response::new(csi::ControllerGetCapabilitiesResponse { capabilities: controller_capabilities() }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(required: i64, limit: i64) -> Option<csi::CapacityRange> {
        Some(csi::CapacityRange { required_bytes: required, limit_bytes: limit })
    }

    #[test]
    fn capacity_table() {
        let cases: &[(&str, Option<csi::CapacityRange>, Option<i64>)] = &[
            ("none", None, Some(0)),
            ("required", range(100, 0), Some(100)),
            ("limit only", range(0, 50), Some(50)),
            ("both", range(10, 50), Some(10)),
            ("exact", range(50, 50), Some(50)),
            ("inverted", range(60, 50), None),
            ("negative", range(-1, 0), None),
        ];
        for (name, r, want) in cases {
            let got = capacity_for(r.as_ref());
            assert_eq!(got.as_ref().ok().copied(), *want, "{name}: {got:?}");
            if want.is_none() {
                assert!(matches!(got, Err(Error::OutOfRange(_))), "{name}");
            }
        }
    }

    #[test]
    fn existing_volume_fits() {
        let cases = [
            ("no range", 100, None, true),
            ("same", 100, range(100, 0), true),
            ("bigger than required", 200, range(100, 0), true),
            ("smaller than required", 50, range(100, 0), false),
            ("above limit", 200, range(100, 150), false),
        ];
        for (name, cap, r, want) in cases {
            assert_eq!(capacity_fits(cap, r.as_ref()), want, "{name}");
        }
    }

    #[test]
    fn topology_table() {
        let t = |n: &str| node_topology(n);
        let req = |requisite: Vec<csi::Topology>, preferred: Vec<csi::Topology>| Some(csi::TopologyRequirement { requisite, preferred });
        let cases = [
            ("none", None, true),
            ("empty", req(vec![], vec![]), true),
            ("requisite ours", req(vec![t("n2"), t("n1")], vec![]), true),
            ("preferred ours", req(vec![], vec![t("n1")]), true),
            ("other node", req(vec![t("n2")], vec![t("n2")]), false),
            ("other key", req(vec![csi::Topology { segments: [("zone".to_string(), "n1".to_string())].into_iter().collect() }], vec![]), false),
        ];
        for (name, r, ok) in cases {
            let got = check_topology(r.as_ref(), "n1");
            assert_eq!(got.is_ok(), ok, "{name}: {got:?}");
            if !ok {
                assert!(matches!(got, Err(Error::ResourceExhausted(_))), "{name}");
            }
        }
    }
}
