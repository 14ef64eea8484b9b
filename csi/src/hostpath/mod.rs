//! Mirrors kubernetes-csi/csi-driver-host-path's pkg/hostpath/hostpath.go: one driver object that
//! serves the CSI Identity ([`identity`]), Controller ([`controller`]) and Node ([`node`])
//! services, keeping its volumes as directories under `<state dir>/volumes/<volume id>` and what
//! it knows about them in a state file ([`state`]).
//!
//! Every RPC runs on a blocking thread ([`HostPath::locked`]) under the one lock of the state, as
//! the Go driver serializes its RPCs with one mutex: the RPCs do file I/O and mount(2), which must
//! not block the async runtime, and one volume's create, publish and delete must not interleave.

pub mod controller;
pub mod identity;
pub mod node;
pub mod state;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use proto::csi::v1 as csi;

use crate::error::{Error, Result};
use state::State;

/// The driver's settings (csi-driver-host-path's `Config`).
#[derive(Clone, Debug)]
pub struct Config {
    /// The CSI driver name (`hostpath.csi.kubelab.io`).
    pub driver_name: String,
    /// GetPluginInfo's `vendor_version`.
    pub vendor_version: String,
    /// This node's id (NodeGetInfo), and the topology value of every volume made here.
    pub node_id: String,
    /// Volumes and the state file live here.
    pub state_dir: PathBuf,
    /// NodeGetInfo's `max_volumes_per_node`; 0 is unlimited.
    pub max_volumes_per_node: i64,
}

/// The driver: cheap to clone, every clone the same volumes.
#[derive(Clone)]
pub struct HostPath {
    inner: Arc<Inner>,
}

struct Inner {
    config: Config,
    state: Mutex<State>,
}

impl HostPath {
    /// Step 1 of the driver's start: the state directory, its `volumes/` and the state file.
    pub fn new(config: Config) -> Result<HostPath> {
        if config.driver_name.is_empty() {
            return Err(Error::Config("no driver name".into()));
        }
        if config.node_id.is_empty() {
            return Err(Error::Config("no node id (--nodeid)".into()));
        }
        let volumes = config.state_dir.join("volumes");
        std::fs::create_dir_all(&volumes).map_err(|e| Error::io(&volumes, e))?;
        let state = State::load(&config.state_dir)?;
        tracing::info!(target: "csi::hostpath", driver = %config.driver_name, node = %config.node_id,
            state_dir = %config.state_dir.display(), volumes = state.volumes().count(), "driver state loaded");
        Ok(HostPath { inner: Arc::new(Inner { config, state: Mutex::new(state) }) })
    }

    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    /// The directory of volume `id`.
    pub fn volume_path(&self, id: &str) -> PathBuf {
        volume_path(&self.inner.config.state_dir, id)
    }

    /// Runs `f` on a blocking thread with the state locked; its error becomes the RPC's status.
    async fn locked<T, F>(&self, f: F) -> std::result::Result<T, tonic::Status>
    where
        T: Send + 'static,
        F: FnOnce(&Config, &mut State) -> Result<T> + Send + 'static,
    {
        let inner = self.inner.clone();
        let joined = tokio::task::spawn_blocking(move || {
            // A panic in another RPC poisons the lock, not the state: the file is the truth and
            // every change was saved before it was kept in memory.
            let mut st = inner.state.lock().unwrap_or_else(|e| e.into_inner());
            f(&inner.config, &mut st)
        })
        .await;
        match joined {
            Ok(r) => r.map_err(Error::into_status),
            Err(e) => Err(tonic::Status::internal(format!("driver task failed: {e}"))),
        }
    }
}

fn volume_path(state_dir: &Path, id: &str) -> PathBuf {
    state_dir.join("volumes").join(id)
}

/// The topology of a volume or node on `node`: `{topology.hostpath.csi.kubelab.io/node: node}`.
pub fn node_topology(node: &str) -> csi::Topology {
    csi::Topology { segments: [(crate::TOPOLOGY_KEY.to_string(), node.to_string())].into_iter().collect() }
}

/// Step "validate" of every RPC that takes a volume id.
fn require<'a>(value: &'a str, what: &str) -> Result<&'a str> {
    if value.is_empty() {
        return Err(Error::InvalidArgument(format!("{what} missing in request")));
    }
    Ok(value)
}

/// Whether the driver can serve a volume capability: filesystem volumes (mount) in any access
/// mode; no raw block volumes (caveat: the volumes are directories).
fn check_capability(cap: &csi::VolumeCapability) -> Result<()> {
    use csi::volume_capability::AccessType;
    match cap.access_type {
        Some(AccessType::Mount(_)) => {}
        Some(AccessType::Block(_)) => return Err(Error::InvalidArgument("block access type is not supported: volumes are directories".into())),
        None => return Err(Error::InvalidArgument("volume capability has no access type".into())),
    }
    match cap.access_mode.as_ref().map(|m| m.mode()) {
        None | Some(csi::volume_capability::access_mode::Mode::Unknown) => {
            Err(Error::InvalidArgument("volume capability has no access mode".into()))
        }
        Some(_) => Ok(()),
    }
}

/// Whether a capability asks for read-only access (the `*_READER_ONLY` modes).
fn is_read_only_mode(cap: Option<&csi::VolumeCapability>) -> bool {
    use csi::volume_capability::access_mode::Mode;
    matches!(cap.and_then(|c| c.access_mode.as_ref()).map(|m| m.mode()), Some(Mode::SingleNodeReaderOnly | Mode::MultiNodeReaderOnly))
}

#[cfg(test)]
mod tests {
    use super::*;
    use csi::volume_capability::{AccessMode, AccessType, BlockVolume, MountVolume, access_mode::Mode};

    fn cap(access: Option<AccessType>, mode: Option<Mode>) -> csi::VolumeCapability {
        csi::VolumeCapability { access_type: access, access_mode: mode.map(|m| AccessMode { mode: m as i32 }) }
    }

    #[test]
    fn capabilities() {
        let mount = || Some(AccessType::Mount(MountVolume::default()));
        let cases = [
            ("mount rwo", cap(mount(), Some(Mode::SingleNodeWriter)), true, false),
            ("mount rox", cap(mount(), Some(Mode::MultiNodeReaderOnly)), true, true),
            ("mount rwx", cap(mount(), Some(Mode::MultiNodeMultiWriter)), true, false),
            ("block", cap(Some(AccessType::Block(BlockVolume {})), Some(Mode::SingleNodeWriter)), false, false),
            ("no access type", cap(None, Some(Mode::SingleNodeWriter)), false, false),
            ("no mode", cap(mount(), None), false, false),
            ("unknown mode", cap(mount(), Some(Mode::Unknown)), false, false),
        ];
        for (name, c, ok, ro) in cases {
            assert_eq!(check_capability(&c).is_ok(), ok, "{name}");
            assert_eq!(is_read_only_mode(Some(&c)), ro, "{name}");
        }
    }

    #[test]
    fn required_fields() {
        assert!(matches!(require("", "volume id"), Err(Error::InvalidArgument(m)) if m == "volume id missing in request"));
        assert_eq!(require("v", "volume id").ok(), Some("v"));
    }
}
