//! Mirrors kubelet's kubelet_getters.go: where a pod's data lives on the node.
//!
//! Everything of a pod that is not in the container runtime lives under one directory named by its
//! UID, below the node agent's root directory (`--root-dir`, [`DEFAULT_ROOT_DIR`]):
//!
//! ```text
//! <root>/pods/<uid>/volumes/<plugin>/<volume>   a volume's host side, e.g. kubernetes.io~empty-dir/cache
//! <root>/pods/<uid>/plugins/                    per-pod state of volume plugins
//! <root>/pods/<uid>/etc-hosts                   the /etc/hosts the containers mount
//! ```
//!
//! The path helpers are pure. [`make_pod_data_dirs`], [`pod_uids_on_disk`] and [`remove_pod_dir`]
//! do blocking file I/O: async callers wrap them in `tokio::task::spawn_blocking`.

use std::io;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::volumemanager::mount;

/// kubelet's default is /var/lib/kubelet; kubelab's agent keeps its own.
pub(crate) const DEFAULT_ROOT_DIR: &str = "/var/lib/kubelab";

/// `<root>/pods`: one directory per pod UID.
pub(crate) fn pods_dir(root: &Path) -> PathBuf {
    root.join("pods")
}

/// `<root>/pods/<uid>`.
pub(crate) fn pod_dir(root: &Path, uid: &str) -> PathBuf {
    pods_dir(root).join(uid)
}

/// `<root>/pods/<uid>/volumes`.
pub(crate) fn pod_volumes_dir(root: &Path, uid: &str) -> PathBuf {
    pod_dir(root, uid).join("volumes")
}

/// `<root>/pods/<uid>/volumes/<plugin>/<volume>`, with `plugin_name` already escaped the way
/// kubelet does it (`kubernetes.io/empty-dir` → `kubernetes.io~empty-dir`).
pub(crate) fn pod_volume_dir(root: &Path, uid: &str, plugin_name: &str, volume_name: &str) -> PathBuf {
    pod_volumes_dir(root, uid).join(plugin_name).join(volume_name)
}

/// `<root>/pods/<uid>/plugins`.
pub(crate) fn pod_plugins_dir(root: &Path, uid: &str) -> PathBuf {
    pod_dir(root, uid).join("plugins")
}

/// `<root>/pods/<uid>/etc-hosts`: the hosts file kubelet writes and bind-mounts into containers.
pub(crate) fn pod_etc_hosts_path(root: &Path, uid: &str) -> PathBuf {
    pod_dir(root, uid).join("etc-hosts")
}

/// Step 2 of SyncPod: the pod's data directories (`pods/<uid>/{volumes,plugins}`). Idempotent.
/// Blocking.
pub(crate) fn make_pod_data_dirs(root: &Path, uid: &str) -> Result<()> {
    for dir in [pod_volumes_dir(root, uid), pod_plugins_dir(root, uid)] {
        std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
    }
    Ok(())
}

/// The UIDs that have a directory under `<root>/pods`, sorted: compared with the pods the agent
/// knows, the difference is the orphans to clean up. Blocking.
pub(crate) fn pod_uids_on_disk(root: &Path) -> Result<Vec<String>> {
    let dir = pods_dir(root);
    let entries = match std::fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io(&dir, e)),
    };
    let mut uids = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| Error::io(&dir, e))?;
        if entry.file_type().map_err(|e| Error::io(entry.path(), e))?.is_dir() {
            uids.push(entry.file_name().to_string_lossy().into_owned());
        }
    }
    uids.sort();
    Ok(uids)
}

/// Removes `<root>/pods/<uid>` and everything in it, but refuses while anything is still mounted
/// below it: deleting recursively through a mount would destroy what the mount shows (a tmpfs's
/// secrets are harmless to lose, a bind-mounted host directory is not). The caller unmounts the
/// volumes first ([`crate::volumemanager::VolumeManager::unmount_volumes`]) and retries on
/// [`Error::NotReady`]. Blocking.
pub(crate) fn remove_pod_dir(root: &Path, uid: &str) -> Result<()> {
    if uid.is_empty() || uid.contains('/') || uid == "." || uid == ".." {
        return Err(Error::UnusableUid(format!("refusing to remove the pod directory of UID {uid:?}")));
    }
    let dir = pod_dir(root, uid);
    if !dir.exists() {
        return Ok(());
    }
    let mounted = mount::mounts_under(&dir)?;
    if !mounted.is_empty() {
        let list: Vec<String> = mounted.iter().map(|p| p.display().to_string()).collect();
        return Err(Error::NotReady(format!("pod directory {} still has mounts: {}", dir.display(), list.join(", "))));
    }
    match std::fs::remove_dir_all(&dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::io(&dir, e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths() {
        let root = Path::new("/var/lib/kubelab");
        assert_eq!(pod_dir(root, "u1"), Path::new("/var/lib/kubelab/pods/u1"));
        assert_eq!(pod_volumes_dir(root, "u1"), Path::new("/var/lib/kubelab/pods/u1/volumes"));
        assert_eq!(
            pod_volume_dir(root, "u1", "kubernetes.io~empty-dir", "cache"),
            Path::new("/var/lib/kubelab/pods/u1/volumes/kubernetes.io~empty-dir/cache")
        );
        assert_eq!(pod_plugins_dir(root, "u1"), Path::new("/var/lib/kubelab/pods/u1/plugins"));
        assert_eq!(pod_etc_hosts_path(root, "u1"), Path::new("/var/lib/kubelab/pods/u1/etc-hosts"));
    }

    #[test]
    fn data_dirs_listed_and_removed() -> Result<()> {
        let root = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        assert!(pod_uids_on_disk(root.path())?.is_empty(), "no pods dir yet is not an error");
        make_pod_data_dirs(root.path(), "b")?;
        make_pod_data_dirs(root.path(), "a")?;
        make_pod_data_dirs(root.path(), "a")?; // idempotent
        assert!(pod_volumes_dir(root.path(), "a").is_dir());
        assert!(pod_plugins_dir(root.path(), "a").is_dir());
        assert_eq!(pod_uids_on_disk(root.path())?, vec!["a".to_string(), "b".to_string()]);
        remove_pod_dir(root.path(), "a")?;
        remove_pod_dir(root.path(), "a")?; // already gone is fine
        assert_eq!(pod_uids_on_disk(root.path())?, vec!["b".to_string()]);
        assert!(remove_pod_dir(root.path(), "..").is_err());
        Ok(())
    }

    /// We are root on the test machines: a real tmpfs below the pod directory blocks its removal.
    #[test]
    fn refuses_to_remove_through_a_mount() -> Result<()> {
        let root = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        make_pod_data_dirs(root.path(), "p")?;
        let vol = pod_volume_dir(root.path(), "p", "kubernetes.io~secret", "s");
        std::fs::create_dir_all(&vol).map_err(|e| Error::io(&vol, e))?;
        mount::mount_tmpfs(&vol, None)?;
        let result = remove_pod_dir(root.path(), "p");
        let still_there = pod_dir(root.path(), "p").exists();
        mount::unmount(&vol)?;
        let err = result.expect_err("mounted");
        assert!(matches!(err, Error::NotReady(_)), "{err}");
        assert!(err.to_string().contains("still has mounts"), "{err}");
        assert!(still_there);
        remove_pod_dir(root.path(), "p")?;
        assert!(!pod_dir(root.path(), "p").exists());
        Ok(())
    }
}
