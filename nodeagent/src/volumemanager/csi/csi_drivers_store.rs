//! Mirrors pkg/volume/csi/csi_drivers_store.go: the CSI drivers registered on this node, by name.
//!
//! The plugin manager writes it (a driver's registration socket appeared, or went away) and the
//! CSI volume plugin reads it (which socket serves a PersistentVolume's driver). It is the one
//! piece of state the two share, so it is a lock around a map, as kubelet's is: every access is a
//! short lookup or insert, never held across an await.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};

/// What registration learnt about a driver.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Driver {
    /// The driver's CSI socket (`<root>/plugins/<driver>/csi.sock`).
    pub(crate) endpoint: PathBuf,
    /// The highest CSI version it speaks (`1.0.0`).
    pub(crate) highest_supported_version: String,
}

/// The registered drivers. Cheap to clone: every clone shares one map.
#[derive(Clone, Debug, Default)]
pub(crate) struct Drivers {
    inner: Arc<RwLock<BTreeMap<String, Driver>>>,
}

impl Drivers {
    pub(crate) fn get(&self, name: &str) -> Option<Driver> {
        self.inner.read().unwrap_or_else(|e| e.into_inner()).get(name).cloned()
    }

    pub(crate) fn set(&self, name: &str, driver: Driver) {
        self.inner.write().unwrap_or_else(|e| e.into_inner()).insert(name.to_string(), driver);
    }

    pub(crate) fn delete(&self, name: &str) {
        self.inner.write().unwrap_or_else(|e| e.into_inner()).remove(name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_get_delete() {
        let drivers = Drivers::default();
        let d = Driver { endpoint: "/var/lib/kubelab/plugins/d/csi.sock".into(), highest_supported_version: "1.0.0".into() };
        assert_eq!(drivers.get("d"), None);
        drivers.clone().set("d", d.clone());
        assert_eq!(drivers.get("d"), Some(d));
        drivers.delete("d");
        assert_eq!(drivers.get("d"), None);
    }
}
