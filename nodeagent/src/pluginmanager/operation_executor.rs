//! Mirrors pkg/kubelet/pluginmanager/operationexecutor/operation_generator.go: registering and
//! unregistering one plugin.
//!
//! Registering, in kubelet's order:
//! 1. dial the socket and call GetInfo;
//! 2. find the handler of the plugin's type (only `CSIPlugin`);
//! 3. the handler validates the plugin, then registers it;
//! 4. NotifyRegistrationStatus tells the plugin whether it is registered (and why not).

use std::path::Path;
use std::time::Duration;

use proto::pluginregistration::registration_client::RegistrationClient;
use proto::pluginregistration::{InfoRequest, PluginInfo, RegistrationStatus};

use super::{CSI_PLUGIN_TYPE, PluginHandler};
use crate::error::{Error, Result};
use crate::volumemanager::csi::csi_client::dial;

/// A plugin the agent registered: what unregistering it needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RegisteredPlugin {
    pub(crate) name: String,
    pub(crate) r#type: String,
}

async fn get_info(socket: &Path, timeout: Duration) -> Result<(RegistrationClient<tonic::transport::Channel>, PluginInfo)> {
    let mut client = RegistrationClient::new(dial(socket).await?);
    let info = tokio::time::timeout(timeout, client.get_info(InfoRequest {}))
        .await
        .map_err(|_| Error::PluginRegistration(format!("GetInfo on {} timed out", socket.display())))?
        .map_err(|source| Error::Csi { op: "GetInfo", source })?
        .into_inner();
    Ok((client, info))
}

/// Registers the plugin behind `socket` with `csi` (the handler of `CSIPlugin`). Returns what
/// was registered; the error otherwise (after telling the plugin, when it could be reached).
pub(crate) async fn register_plugin(socket: &Path, csi: &dyn PluginHandler, timeout: Duration) -> Result<RegisteredPlugin> {
    // Step 1: GetInfo.
    let (mut client, info) = get_info(socket, timeout).await.map_err(|e| {
        Error::PluginRegistration(format!("RegisterPlugin error -- failed to get plugin info using RPC GetInfo at socket {}, err: {e}", socket.display()))
    })?;
    // An empty endpoint means the registration socket serves the plugin's API too.
    let endpoint = if info.endpoint.is_empty() { socket.display().to_string() } else { info.endpoint.clone() };
    let outcome = async {
        // Step 2: the handler of its type.
        if info.r#type != CSI_PLUGIN_TYPE {
            return Err(Error::PluginRegistration(format!(
                "RegisterPlugin error -- no handler registered for plugin type: {} at socket {}",
                info.r#type,
                socket.display()
            )));
        }
        // Step 3: validate, register.
        csi.validate_plugin(&info.name, &endpoint, &info.supported_versions)
            .map_err(|e| Error::PluginRegistration(format!("RegisterPlugin error -- plugin validation failed with err: {e}")))?;
        csi.register_plugin(&info.name, &endpoint, &info.supported_versions).await
    }
    .await;
    // Step 4: tell the plugin.
    let status = RegistrationStatus {
        plugin_registered: outcome.is_ok(),
        error: outcome.as_ref().err().map(ToString::to_string).unwrap_or_default(),
    };
    match tokio::time::timeout(timeout, client.notify_registration_status(status)).await {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => tracing::warn!(target: "kubelet::pluginmanager", socket = %socket.display(), error = %e.message(), "NotifyRegistrationStatus failed"),
        Err(_) => tracing::warn!(target: "kubelet::pluginmanager", socket = %socket.display(), "NotifyRegistrationStatus timed out"),
    }
    outcome.map(|()| RegisteredPlugin { name: info.name, r#type: info.r#type })
}

/// Unregisters a plugin whose socket went away.
pub(crate) async fn unregister_plugin(plugin: &RegisteredPlugin, csi: &dyn PluginHandler) {
    if plugin.r#type == CSI_PLUGIN_TYPE {
        csi.deregister_plugin(&plugin.name).await;
    }
}
