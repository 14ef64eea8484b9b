//! Mirrors pkg/kubelet/pluginmanager/pluginwatcher/plugin_watcher.go: which registration sockets
//! are in the registry directory — the desired state of the world.
//!
//! Kubelet learns of sockets from fsnotify events; here the directory is read on every poll, and
//! a socket's modification time stands for the time it was created, so that a socket a plugin
//! re-creates (a restarted driver) is registered again. Hidden entries (`.…`) are ignored, as
//! kubelet ignores them. Blocking: the caller uses `spawn_blocking`.

use std::collections::BTreeMap;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::error::{Error, Result};

/// Socket path → when it was created.
pub(crate) type DesiredState = BTreeMap<PathBuf, SystemTime>;

/// The sockets directly in `dir` (none if `dir` does not exist).
pub(crate) fn scan(dir: &Path) -> Result<DesiredState> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(DesiredState::new()),
        Err(e) => return Err(Error::io(dir, e)),
    };
    let mut sockets = DesiredState::new();
    for entry in entries {
        let entry = entry.map_err(|e| Error::io(dir, e))?;
        if entry.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        // A socket that vanishes between the listing and the stat is simply not there.
        let Ok(meta) = entry.metadata() else { continue };
        if meta.file_type().is_socket() {
            sockets.insert(entry.path(), meta.modified().unwrap_or(SystemTime::UNIX_EPOCH));
        }
    }
    Ok(sockets)
}

#[cfg(test)]
mod tests {
    use std::os::unix::net::UnixListener;

    use super::*;

    #[test]
    fn only_visible_sockets() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        assert!(scan(&dir.path().join("missing"))?.is_empty());
        let sock = dir.path().join("d-reg.sock");
        let _a = UnixListener::bind(&sock).map_err(|e| Error::io(&sock, e))?;
        let _b = UnixListener::bind(dir.path().join(".hidden.sock")).map_err(|e| Error::io("hidden", e))?;
        std::fs::write(dir.path().join("file"), "x").map_err(|e| Error::io("file", e))?;
        std::fs::create_dir(dir.path().join("subdir")).map_err(|e| Error::io("subdir", e))?;
        let found = scan(dir.path())?;
        assert_eq!(found.keys().cloned().collect::<Vec<_>>(), vec![sock]);
        Ok(())
    }
}
