//! Mirrors csi-driver-host-path's pkg/hostpath/identityserver.go: who the driver is (name and
//! version), what it offers (a Controller service; volumes bound to a node's topology) and
//! whether it is ready.

use proto::csi::v1 as csi;
use proto::csi::v1::plugin_capability::{Service, Type as CapabilityType, service::Type as ServiceType};
use tonic::{Request, Response, Status};

use super::HostPath;

/// The plugin capabilities: the Controller service, and volumes that are not equally accessible
/// from every node (each lives on one node's disk).
pub fn plugin_capabilities() -> Vec<csi::PluginCapability> {
    [ServiceType::ControllerService, ServiceType::VolumeAccessibilityConstraints]
        .into_iter()
        .map(|t| csi::PluginCapability { r#type: Some(CapabilityType::Service(Service { r#type: t as i32 })) })
        .collect()
}

#[tonic::async_trait]
impl csi::identity_server::Identity for HostPath {
    async fn get_plugin_info(&self, _: Request<csi::GetPluginInfoRequest>) -> Result<Response<csi::GetPluginInfoResponse>, Status> {
        let c = self.config();
        Ok(Response::new(csi::GetPluginInfoResponse {
            name: c.driver_name.clone(),
            vendor_version: c.vendor_version.clone(),
            manifest: Default::default(),
        }))
    }

    async fn get_plugin_capabilities(
        &self,
        _: Request<csi::GetPluginCapabilitiesRequest>,
    ) -> Result<Response<csi::GetPluginCapabilitiesResponse>, Status> {
        Ok(Response::new(csi::GetPluginCapabilitiesResponse { capabilities: plugin_capabilities() }))
    }

    /// Ready as soon as it serves: the state was loaded before the socket was opened.
    async fn probe(&self, _: Request<csi::ProbeRequest>) -> Result<Response<csi::ProbeResponse>, Status> {
        Ok(Response::new(csi::ProbeResponse { ready: Some(true) }))
    }
}
