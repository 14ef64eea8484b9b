//! Mirrors pkg/volume/emptydir/empty_dir.go: scratch space that lives as long as the pod.
//!
//! `medium: ""` is a plain directory on the node's disk; `medium: Memory` is a tmpfs mounted on that
//! directory, limited to `sizeLimit` when given. Secrets, the downward API and projected volumes
//! are "wrapped" memory-backed emptyDirs, and configMaps disk-backed ones, exactly as in
//! Kubernetes: they call [`set_up`] before writing their files.
//!
//! The directory is made world-writable (0777) so a container running as any user can use it.
//! HugePages media are not supported. Blocking: async callers use `spawn_blocking`.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use super::mount;
use crate::error::{Error, Result};

/// The plugin's directory name under `pods/<uid>/volumes`.
pub(crate) const PLUGIN_NAME: &str = "kubernetes.io~empty-dir";
/// Kubernetes' emptyDir mode.
pub(crate) const DEFAULT_MODE: u32 = 0o777;

/// Where an emptyDir's bytes live.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Medium {
    Disk,
    /// tmpfs, with an optional size limit in bytes.
    Memory {
        size_limit: Option<i64>,
    },
}

impl Medium {
    /// The `medium` field as the API spells it (`""` or `"Memory"`).
    pub(crate) fn parse(medium: Option<&str>, size_limit: Option<i64>) -> Result<Medium> {
        match medium.unwrap_or("") {
            "" => Ok(Medium::Disk),
            "Memory" => Ok(Medium::Memory { size_limit }),
            other => Err(Error::VolumeSpec(format!("emptyDir medium {other:?} is not supported by kubelab"))),
        }
    }
}

/// Makes `dir` ready: created, tmpfs-mounted if memory-backed (only once: every sync calls this),
/// and given `mode`. Idempotent.
pub(crate) fn set_up(dir: &Path, medium: Medium, mode: u32) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    if let Medium::Memory { size_limit } = medium
        && !mount::is_mount_point(dir)?
    {
        mount::mount_tmpfs(dir, size_limit)?;
    }
    // Set explicitly (the umask applied at creation), and only when it differs, so that a sync
    // does not touch the directory's ctime for nothing.
    let meta = std::fs::metadata(dir).map_err(|e| Error::io(dir, e))?;
    if meta.permissions().mode() & 0o7777 != mode {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode)).map_err(|e| Error::io(dir, e))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_medium() {
        assert_eq!(Medium::parse(None, None).ok(), Some(Medium::Disk));
        assert_eq!(Medium::parse(Some(""), Some(5)).ok(), Some(Medium::Disk));
        assert_eq!(Medium::parse(Some("Memory"), Some(5)).ok(), Some(Medium::Memory { size_limit: Some(5) }));
        assert!(Medium::parse(Some("HugePages"), None).is_err());
    }

    #[test]
    fn disk_directory_is_world_writable() -> Result<()> {
        let root = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        let dir = root.path().join("a/b/cache");
        set_up(&dir, Medium::Disk, DEFAULT_MODE)?;
        set_up(&dir, Medium::Disk, DEFAULT_MODE)?;
        let mode = std::fs::metadata(&dir).map_err(|e| Error::io(&dir, e))?.permissions().mode();
        assert_eq!(mode & 0o7777, 0o777);
        assert!(!mount::is_mount_point(&dir)?);
        Ok(())
    }
}
