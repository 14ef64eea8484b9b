//! Mirrors runc's libcontainer/cgroups/file.go: reading and writing cgroup control files, and
//! removing a cgroup tree (libcontainer's RemovePath), shared by both hierarchies' code.

use std::io;
use std::path::Path;

use crate::error::{Error, Result};

/// The file's content without surrounding whitespace; a missing file reads as empty.
pub(crate) fn read_trimmed(path: &Path) -> Result<String> {
    match std::fs::read_to_string(path) {
        Ok(s) => Ok(s.trim().to_string()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(String::new()),
        Err(e) => Err(Error::io(path, e)),
    }
}

/// Writes `value` unless the file already holds it.
pub(crate) fn write_if_changed(path: &Path, value: &str) -> Result<()> {
    if read_trimmed(path)? == value {
        return Ok(());
    }
    std::fs::write(path, value).map_err(|e| Error::io(path, e))
}

/// Creates one cgroup directory; already there is fine.
pub(crate) fn mkdir(dir: &Path) -> Result<()> {
    match std::fs::create_dir(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(Error::io(dir, e)),
    }
}

/// Removes a cgroup directory and every cgroup below it, deepest first. Only directories are
/// removed: a cgroup's control files vanish with it. A cgroup that still holds a process cannot be
/// removed (EBUSY): the error names the processes.
pub(crate) fn remove_cgroup_tree(dir: &Path) -> Result<()> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(Error::io(dir, e)),
    };
    for entry in entries {
        let entry = entry.map_err(|e| Error::io(dir, e))?;
        if entry.file_type().map_err(|e| Error::io(entry.path(), e))?.is_dir() {
            remove_cgroup_tree(&entry.path())?;
        }
    }
    match std::fs::remove_dir(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) if e.raw_os_error() == Some(libc::EBUSY) => Err(busy(dir)),
        Err(e) => Err(Error::io(dir, e)),
    }
}

/// The processes anywhere in the tree below `dir` (its own `cgroup.procs` and its children's).
pub(crate) fn tree_pids(dir: &Path) -> Vec<String> {
    let mut pids: Vec<String> =
        read_trimmed(&dir.join("cgroup.procs")).unwrap_or_default().split_whitespace().map(str::to_string).collect();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                pids.extend(tree_pids(&entry.path()));
            }
        }
    }
    pids
}

/// The error for a cgroup that still holds processes.
pub(crate) fn busy(dir: &Path) -> Error {
    let pids = tree_pids(dir);
    let why = if pids.is_empty() {
        "cgroup is busy".to_string()
    } else {
        format!("cgroup still has processes (pids {})", pids.join(", "))
    };
    Error::io(dir, io::Error::new(io::ErrorKind::ResourceBusy, why))
}
