//! Mirrors csi_plugin.go's RegistrationHandler: what the plugin manager calls for a plugin of
//! type `CSIPlugin`.
//!
//! 1. **ValidatePlugin**: the driver must speak a CSI version this agent speaks (1.x).
//! 2. **RegisterPlugin**: remember the driver's endpoint ([`Drivers`]), ask it NodeGetInfo, and
//!    publish what it answered ([`NodeInfoManager::install_csi_driver`]: the CSINode entry, the
//!    node ID annotation, the topology labels). On failure the driver is forgotten again.
//! 3. **DeRegisterPlugin** (its socket went away): forget it and remove it from the CSINode.

use std::path::PathBuf;

use futures::future::BoxFuture;

use super::csi_client::CsiClient;
use super::csi_drivers_store::{Driver, Drivers};
use super::nodeinfomanager::{DriverNodeInfo, NodeInfoManager};
use crate::error::{Error, Result};
use crate::pluginmanager::PluginHandler;

/// The CSI major version this agent speaks.
const SUPPORTED_MAJOR: u64 = 1;

/// The highest of `versions` this agent speaks (`1.x.y`), kubelet's highestSupportedVersion.
pub(crate) fn highest_supported_version(versions: &[String]) -> Option<String> {
    let parse = |v: &str| -> Option<(u64, u64, u64)> {
        let mut parts = v.trim_start_matches('v').splitn(3, '.').map(|p| p.parse::<u64>().ok());
        Some((parts.next()??, parts.next().flatten().unwrap_or(0), parts.next().flatten().unwrap_or(0)))
    };
    versions
        .iter()
        .filter_map(|v| parse(v).map(|p| (p, v)))
        .filter(|((major, _, _), _)| *major == SUPPORTED_MAJOR)
        .max_by_key(|(p, _)| *p)
        .map(|(_, v)| v.clone())
}

/// Validation (step 1), pure.
pub(crate) fn validate(name: &str, versions: &[String]) -> Result<String> {
    if versions.is_empty() {
        return Err(Error::PluginRegistration(format!(
            "RegisterPlugin error -- ValidatePlugin for CSI driver {name:?} failed. Plugin returned an empty list for supported versions"
        )));
    }
    highest_supported_version(versions).ok_or_else(|| {
        Error::PluginRegistration(format!(
            "RegisterPlugin error -- ValidatePlugin for CSI driver {name:?} failed. None of the versions specified {versions:?} are supported"
        ))
    })
}

/// The CSI plugin's handler for the plugin manager.
#[derive(Clone)]
pub(crate) struct RegistrationHandler {
    drivers: Drivers,
    nim: NodeInfoManager,
}

impl RegistrationHandler {
    pub(crate) fn new(drivers: Drivers, nim: NodeInfoManager) -> RegistrationHandler {
        RegistrationHandler { drivers, nim }
    }

    async fn register(&self, name: &str, endpoint: &str, versions: &[String]) -> Result<()> {
        let highest = validate(name, versions)?;
        let endpoint = PathBuf::from(endpoint.strip_prefix("unix://").unwrap_or(endpoint));
        self.drivers.set(name, Driver { endpoint: endpoint.clone(), highest_supported_version: highest });
        let installed = async {
            let info = CsiClient::new(name, endpoint).node_get_info().await?;
            let info = DriverNodeInfo {
                node_id: info.node_id,
                max_volumes_per_node: info.max_volumes_per_node,
                topology: info.accessible_topology.map(|t| t.segments.into_iter().collect()).unwrap_or_default(),
            };
            self.nim.install_csi_driver(name, &info).await
        }
        .await;
        if let Err(e) = installed {
            self.drivers.delete(name);
            return Err(Error::PluginRegistration(format!("RegisterPlugin error -- registration of CSI driver {name:?} failed: {e}")));
        }
        tracing::info!(target: "kubelet::csi", driver = name, "CSI driver registered");
        Ok(())
    }
}

impl PluginHandler for RegistrationHandler {
    fn validate_plugin(&self, name: &str, _endpoint: &str, versions: &[String]) -> Result<()> {
        validate(name, versions).map(drop)
    }

    fn register_plugin<'a>(&'a self, name: &'a str, endpoint: &'a str, versions: &'a [String]) -> BoxFuture<'a, Result<()>> {
        Box::pin(self.register(name, endpoint, versions))
    }

    fn deregister_plugin<'a>(&'a self, name: &'a str) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            self.drivers.delete(name);
            if let Err(e) = self.nim.uninstall_csi_driver(name).await {
                tracing::warn!(target: "kubelet::csi", driver = name, error = %e, "removing the driver from the CSINode");
            }
            tracing::info!(target: "kubelet::csi", driver = name, "CSI driver deregistered");
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_table() {
        let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(highest_supported_version(&v(&["1.0.0"])).as_deref(), Some("1.0.0"));
        assert_eq!(highest_supported_version(&v(&["0.3.0", "1.0.0", "1.5.0"])).as_deref(), Some("1.5.0"));
        assert_eq!(highest_supported_version(&v(&["v1.2.0"])).as_deref(), Some("v1.2.0"));
        assert_eq!(highest_supported_version(&v(&["0.3.0", "2.0.0", "x"])), None);
        assert!(validate("d", &[]).expect_err("none").to_string().contains("empty list for supported versions"));
        assert!(validate("d", &v(&["0.3.0"])).expect_err("old").to_string().contains("None of the versions specified"));
    }
}
