//! Mirrors the filesystem part of cAdvisor's fs info that kubelet's stats read: a filesystem's
//! size and free space (`statvfs`) and what a directory tree takes on disk (`du`). Blocking file
//! I/O: callers run it in `spawn_blocking`.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// One filesystem's size and free space, in bytes and inodes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct FsStats {
    pub(crate) capacity: i64,
    /// Free to unprivileged users (`f_bavail`), which is what a pod can still write.
    pub(crate) available: i64,
    pub(crate) inodes: i64,
    pub(crate) inodes_free: i64,
}

impl FsStats {
    /// Percent of the capacity in use, as image GC computes it (100 − available share).
    pub(crate) fn usage_percent(&self) -> i64 {
        if self.capacity <= 0 {
            return 0;
        }
        100 - self.available.saturating_mul(100) / self.capacity
    }
}

/// `statvfs` of the filesystem holding `path` (or its nearest existing ancestor).
pub(crate) fn fs_stats(path: &Path) -> Option<FsStats> {
    let mut p = path;
    while !p.exists() {
        p = p.parent()?;
    }
    let c = CString::new(p.as_os_str().as_bytes()).ok()?;
    // SAFETY: statvfs writes into the zeroed struct we own; `c` is NUL-terminated.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return None;
    }
    // The field types are platform aliases: cast, not convert.
    let frsize = st.f_frsize as i64;
    Some(FsStats {
        capacity: (st.f_blocks as i64).saturating_mul(frsize),
        available: (st.f_bavail as i64).saturating_mul(frsize),
        inodes: st.f_files as i64,
        inodes_free: st.f_ffree as i64,
    })
}

/// Bytes a directory tree takes on disk (`du`): allocated blocks, hard links counted once per
/// walk, symlinks not followed, and never crossing into another filesystem (a memory-backed
/// emptyDir is a tmpfs and uses no disk). A missing directory uses nothing.
pub(crate) fn dir_usage(dir: &Path) -> i64 {
    let Ok(root) = std::fs::symlink_metadata(dir) else { return 0 };
    let dev = root.dev();
    let mut total = 0i64;
    let mut seen = std::collections::HashSet::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else { continue };
        for e in entries.flatten() {
            let Ok(m) = e.metadata() else { continue };
            if m.dev() != dev {
                continue;
            }
            if m.is_dir() {
                stack.push(e.path());
            } else if m.nlink() <= 1 || seen.insert(m.ino()) {
                total = total.saturating_add((m.blocks() as i64).saturating_mul(512));
            }
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filesystem_and_directory_usage() {
        let dir = tempfile::tempdir().expect("tmp");
        let s = fs_stats(dir.path()).expect("statvfs");
        assert!(s.capacity > 0 && s.available <= s.capacity);
        assert!((0..=100).contains(&s.usage_percent()));
        assert!(fs_stats(&dir.path().join("not/yet/there")).is_some(), "the nearest existing ancestor is measured");
        assert_eq!(dir_usage(&dir.path().join("missing")), 0);
        std::fs::create_dir_all(dir.path().join("a/b")).expect("mkdir");
        std::fs::write(dir.path().join("a/b/f"), vec![1u8; 64 * 1024]).expect("write");
        std::fs::hard_link(dir.path().join("a/b/f"), dir.path().join("a/g")).expect("link");
        let used = dir_usage(dir.path());
        assert!((64 * 1024..2 * 64 * 1024).contains(&used), "64 KiB counted once, got {used}");
        assert!(crate::stats::pidlimit::running_processes().is_some_and(|n| n > 0));
    }
}
