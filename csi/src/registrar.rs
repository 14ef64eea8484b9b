//! Mirrors kubernetes-csi/node-driver-registrar (cmd/csi-node-driver-registrar/node_register.go):
//! the kubelet finds a CSI driver through a socket in `<kubelet root>/plugins_registry/`. The
//! registrar serves the kubelet's plugin registration API there:
//!
//! 1. GetInfo: {type `CSIPlugin`, the driver's name, the driver's CSI socket as the kubelet sees
//!    it (`--kubelet-registration-path`), supported versions ["1.0.0"]}.
//! 2. The kubelet (the node agent's plugin watcher) then calls the driver's NodeGetInfo itself
//!    and writes the CSINode entry, the node's `csi.volume.kubernetes.io/nodeid` annotation and
//!    topology labels.
//! 3. NotifyRegistrationStatus: the kubelet's verdict, logged.

use std::path::{Path, PathBuf};

use proto::pluginregistration as reg;
use tonic::{Request, Response, Status};

/// `PluginInfo.type` of a CSI driver (the kubelet's `CSIPlugin`).
pub const CSI_PLUGIN_TYPE: &str = "CSIPlugin";
/// The CSI versions the driver speaks.
pub const SUPPORTED_VERSIONS: &[&str] = &["1.0.0"];

/// `<kubelet root>/plugins_registry/<driver>-reg.sock`, where the kubelet looks for plugins.
pub fn registration_socket_path(kubelet_root: &Path, driver: &str) -> PathBuf {
    kubelet_root.join("plugins_registry").join(format!("{driver}-reg.sock"))
}

/// `<kubelet root>/plugins/<driver>/csi.sock`, where a driver's CSI socket conventionally is.
pub fn default_csi_socket_path(kubelet_root: &Path, driver: &str) -> PathBuf {
    kubelet_root.join("plugins").join(driver).join("csi.sock")
}

/// The Registration service.
#[derive(Clone, Debug)]
pub struct Registrar {
    pub driver_name: String,
    /// The driver's CSI socket as the kubelet reaches it.
    pub endpoint: PathBuf,
}

#[tonic::async_trait]
impl reg::registration_server::Registration for Registrar {
    /// Step 1.
    async fn get_info(&self, _: Request<reg::InfoRequest>) -> Result<Response<reg::PluginInfo>, Status> {
        tracing::info!(target: "csi::registrar", driver = %self.driver_name, "GetInfo: the kubelet asks who we are");
        Ok(Response::new(reg::PluginInfo {
            r#type: CSI_PLUGIN_TYPE.to_string(),
            name: self.driver_name.clone(),
            endpoint: self.endpoint.to_string_lossy().into_owned(),
            supported_versions: SUPPORTED_VERSIONS.iter().map(|v| v.to_string()).collect(),
        }))
    }

    /// Step 3.
    async fn notify_registration_status(
        &self,
        req: Request<reg::RegistrationStatus>,
    ) -> Result<Response<reg::RegistrationStatusResponse>, Status> {
        let status = req.into_inner();
        if status.plugin_registered {
            tracing::info!(target: "csi::registrar", driver = %self.driver_name, "the kubelet registered the driver");
        } else {
            tracing::error!(target: "csi::registrar", driver = %self.driver_name, error = %status.error,
                "the kubelet failed to register the driver; it will retry while the socket exists");
        }
        Ok(Response::new(reg::RegistrationStatusResponse {}))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths() {
        let root = Path::new("/var/lib/kubelab");
        assert_eq!(
            registration_socket_path(root, "hostpath.csi.kubelab.io"),
            Path::new("/var/lib/kubelab/plugins_registry/hostpath.csi.kubelab.io-reg.sock")
        );
        assert_eq!(
            default_csi_socket_path(root, "hostpath.csi.kubelab.io"),
            Path::new("/var/lib/kubelab/plugins/hostpath.csi.kubelab.io/csi.sock")
        );
    }
}
