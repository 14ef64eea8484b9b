//! Mirrors csi-driver-host-path's pkg/state/state.go: what the driver knows about its volumes —
//! each one's name, size, node and where it is attached, staged and published — kept in one JSON
//! file in the state directory, so a restarted driver still knows them (and can still tear down
//! what it mounted before).
//!
//! The file is rewritten whole after every change, through a temporary file and a rename: a crash
//! leaves either the old state or the new one, never half of one.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// The state file's name in `--state-dir`.
pub const STATE_FILE: &str = "state.json";

/// One volume, as the driver remembers it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Volume {
    /// The CSI volume id (the PV's `volumeHandle`); also its directory's name.
    pub id: String,
    /// The name CreateVolume was called with (`pvc-<claim uid>`): the key of its idempotency.
    pub name: String,
    /// What CreateVolume granted; bookkeeping only (a directory has no size).
    pub capacity_bytes: i64,
    /// The node whose disk holds the volume (its only accessible topology).
    pub node_id: String,
    /// The CreateVolume parameters, returned as the volume context.
    #[serde(default)]
    pub parameters: BTreeMap<String, String>,
    /// Nodes ControllerPublishVolume attached it to.
    #[serde(default)]
    pub attached: BTreeSet<String>,
    /// Staging paths NodeStageVolume bind-mounted it on.
    #[serde(default)]
    pub staged: BTreeSet<PathBuf>,
    /// Target paths NodePublishVolume bind-mounted it on, each with whether it is read-only.
    #[serde(default)]
    pub published: BTreeMap<PathBuf, bool>,
}

impl Volume {
    /// Whether anything still uses the volume (DeleteVolume refuses then).
    pub fn in_use(&self) -> bool {
        !self.attached.is_empty() || !self.staged.is_empty() || !self.published.is_empty()
    }
}

#[derive(Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
struct File {
    #[serde(default)]
    volumes: Vec<Volume>,
}

/// The volumes by id, and the file they are kept in.
#[derive(Debug)]
pub struct State {
    path: PathBuf,
    volumes: BTreeMap<String, Volume>,
}

impl State {
    /// Reads `<state_dir>/state.json`; a missing file is an empty state (the first start).
    pub fn load(state_dir: &Path) -> Result<State> {
        let path = state_dir.join(STATE_FILE);
        let volumes = match std::fs::read(&path) {
            Ok(bytes) => {
                let file: File = serde_json::from_slice(&bytes).map_err(|source| Error::State { path: path.clone(), source })?;
                file.volumes.into_iter().map(|v| (v.id.clone(), v)).collect()
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
            Err(e) => return Err(Error::io(&path, e)),
        };
        Ok(State { path, volumes })
    }

    pub fn get(&self, id: &str) -> Option<&Volume> {
        self.volumes.get(id)
    }

    pub fn get_by_name(&self, name: &str) -> Option<&Volume> {
        self.volumes.values().find(|v| v.name == name)
    }

    pub fn volumes(&self) -> impl Iterator<Item = &Volume> {
        self.volumes.values()
    }

    /// Applies `change` to the volume `id` (if there is one) and saves; the change is undone in
    /// memory when the save fails, so memory never runs ahead of the file.
    pub fn update(&mut self, id: &str, change: impl FnOnce(&mut Volume)) -> Result<()> {
        let Some(v) = self.volumes.get_mut(id) else { return Ok(()) };
        let before = v.clone();
        change(v);
        if *v == before {
            return Ok(());
        }
        self.save().inspect_err(|_| {
            self.volumes.insert(id.to_string(), before);
        })
    }

    /// Adds or replaces a volume and saves.
    pub fn insert(&mut self, v: Volume) -> Result<()> {
        let id = v.id.clone();
        let before = self.volumes.insert(id.clone(), v);
        self.save().inspect_err(|_| match before {
            Some(b) => {
                self.volumes.insert(id.clone(), b);
            }
            None => {
                self.volumes.remove(&id);
            }
        })
    }

    /// Forgets a volume and saves.
    pub fn remove(&mut self, id: &str) -> Result<()> {
        let Some(before) = self.volumes.remove(id) else { return Ok(()) };
        self.save().inspect_err(|_| {
            self.volumes.insert(id.to_string(), before);
        })
    }

    fn save(&self) -> Result<()> {
        let file = File { volumes: self.volumes.values().cloned().collect() };
        let bytes = serde_json::to_vec_pretty(&file).map_err(|source| Error::State { path: self.path.clone(), source })?;
        let tmp = self.path.with_extension("json.tmp");
        // Synced before the rename: otherwise a power loss could leave the new name on old (or no) bytes.
        let write = || -> std::io::Result<()> {
            use std::io::Write as _;
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(&bytes)?;
            f.sync_all()
        };
        write().map_err(|e| Error::io(&tmp, e))?;
        std::fs::rename(&tmp, &self.path).map_err(|e| Error::io(&self.path, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn volume(id: &str, name: &str) -> Volume {
        Volume { id: id.into(), name: name.into(), capacity_bytes: 1 << 20, node_id: "n1".into(), ..Default::default() }
    }

    #[test]
    fn survives_a_restart() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut st = State::load(dir.path()).expect("empty state");
        assert_eq!(st.volumes().count(), 0);
        st.insert(volume("v1", "pvc-1")).expect("insert");
        st.update("v1", |v| {
            v.attached.insert("n1".into());
            v.staged.insert("/stage".into());
        })
        .expect("update");
        let again = State::load(dir.path()).expect("reload");
        let v = again.get_by_name("pvc-1").expect("by name");
        assert_eq!(v.id, "v1");
        assert!(v.in_use());
        assert!(v.attached.contains("n1"));
        let mut again = again;
        again.remove("v1").expect("remove");
        assert!(State::load(dir.path()).expect("reload").get("v1").is_none());
    }

    #[test]
    fn a_corrupt_file_is_an_error() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join(STATE_FILE), b"{not json").expect("write");
        assert!(matches!(State::load(dir.path()), Err(Error::State { .. })));
    }
}
