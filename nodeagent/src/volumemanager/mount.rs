//! Mirrors k8s.io/mount-utils (mount_linux.go): reading the mount table and the two mount calls
//! the in-tree plugins here need (tmpfs for memory-backed volumes, and unmount).
//!
//! Every function here does blocking system calls or file I/O: async callers wrap them in
//! `tokio::task::spawn_blocking`.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

const MOUNTINFO: &str = "/proc/self/mountinfo";

/// One line of `/proc/self/mountinfo` (proc(5)), the fields the node agent uses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct MountInfo {
    /// Where it is mounted, octal escapes (`\040` for a space) decoded.
    pub(crate) mount_point: PathBuf,
    /// `tmpfs`, `cgroup`, `cgroup2`, `ext4`, …
    pub(crate) fs_type: String,
    /// The per-superblock options: for a cgroup v1 mount they name its controllers (`rw,cpu,cpuacct`).
    pub(crate) super_options: String,
}

/// Every mount of this process's mount namespace, in the kernel's order (parents before children).
pub(crate) fn mounts() -> Result<Vec<MountInfo>> {
    let text = std::fs::read_to_string(MOUNTINFO).map_err(|e| Error::io(MOUNTINFO, e))?;
    Ok(parse_mountinfo(&text))
}

/// Parses mountinfo text. Malformed lines are skipped: the kernel writes this file, and one line we
/// fail to read must not hide the others.
pub(crate) fn parse_mountinfo(text: &str) -> Vec<MountInfo> {
    text.lines()
        .filter_map(|line| {
            // `36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue`:
            // a variable number of optional fields ends at the lone `-`.
            let (before, after) = line.split_once(" - ")?;
            let mount_point = before.split(' ').nth(4)?;
            let mut after = after.split(' ');
            let fs_type = after.next()?;
            let _source = after.next()?;
            let super_options = after.next().unwrap_or("");
            Some(MountInfo {
                mount_point: PathBuf::from(unescape_octal(mount_point)),
                fs_type: fs_type.to_string(),
                super_options: super_options.to_string(),
            })
        })
        .collect()
}

/// The kernel escapes space, tab, newline and backslash in mountinfo paths as `\ooo`.
fn unescape_octal(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' && i + 4 <= bytes.len() {
            let digits = &bytes[i + 1..i + 4];
            if digits.iter().all(|d| (b'0'..=b'7').contains(d)) {
                let value = digits.iter().fold(0u32, |acc, d| acc * 8 + u32::from(d - b'0'));
                if let Ok(b) = u8::try_from(value) {
                    out.push(b);
                    i += 4;
                    continue;
                }
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Resolves symlinks in `path` as far as it exists, so it can be compared with mountinfo (which
/// always shows real paths).
fn real_path(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

/// Whether something is mounted exactly at `path`.
pub(crate) fn is_mount_point(path: &Path) -> Result<bool> {
    let path = real_path(path);
    Ok(mounts()?.iter().any(|m| m.mount_point == path))
}

/// Every mount point at or below `dir`, deepest first (the order to unmount them in).
pub(crate) fn mounts_under(dir: &Path) -> Result<Vec<PathBuf>> {
    let dir = real_path(dir);
    let mut found: Vec<PathBuf> =
        mounts()?.into_iter().map(|m| m.mount_point).filter(|p| p.starts_with(&dir)).collect();
    found.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    found.dedup();
    Ok(found)
}

fn c_path(path: &Path) -> Result<CString> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| Error::Invalid(format!("{}: path contains a NUL byte", path.display())))
}

/// Mounts a fresh tmpfs on `path` (which must exist), limited to `size_bytes` if given. This is
/// what an emptyDir with `medium: Memory` is, and what secrets always live on, so their bytes never
/// touch the node's disk.
pub(crate) fn mount_tmpfs(path: &Path, size_bytes: Option<i64>) -> Result<()> {
    let target = c_path(path)?;
    let options = match size_bytes {
        Some(size) => CString::new(format!("size={size}")),
        None => CString::new(""),
    }
    .map_err(|_| Error::Invalid("tmpfs options contain a NUL byte".into()))?;
    // SAFETY: every pointer is a valid NUL-terminated string that outlives the call.
    let rc = unsafe { libc::mount(c"tmpfs".as_ptr(), target.as_ptr(), c"tmpfs".as_ptr(), 0, options.as_ptr().cast()) };
    if rc != 0 {
        return Err(Error::io(path, io::Error::last_os_error()));
    }
    Ok(())
}

/// Unmounts whatever is mounted on `path`. Not lazy (no `MNT_DETACH`): if something still uses the
/// mount, the caller hears about it (EBUSY) and retries, as kubelet does.
pub(crate) fn unmount(path: &Path) -> Result<()> {
    let target = c_path(path)?;
    // SAFETY: `target` is a valid NUL-terminated string that outlives the call.
    let rc = unsafe { libc::umount2(target.as_ptr(), 0) };
    if rc != 0 {
        return Err(Error::io(path, io::Error::last_os_error()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_mountinfo_lines() {
        let text = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime shared:5 master:2 - cgroup cgroup rw,cpu
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
99 23 0:50 / /var/lib/kube\\040lab/pods rw - tmpfs tmpfs rw
garbage line
";
        let m = parse_mountinfo(text);
        assert_eq!(m.len(), 4);
        assert_eq!(m[0].mount_point, PathBuf::from("/sys/fs/cgroup"));
        assert_eq!(m[1].fs_type, "cgroup");
        assert_eq!(m[1].super_options, "rw,cpu");
        assert_eq!(m[2].super_options, "rw,name=systemd");
        assert_eq!(m[3].mount_point, PathBuf::from("/var/lib/kube lab/pods"));
    }

    #[test]
    fn unescapes_only_octal_triples() {
        assert_eq!(unescape_octal(r"a\040b"), "a b");
        assert_eq!(unescape_octal(r"a\134b"), r"a\b");
        assert_eq!(unescape_octal(r"a\09"), r"a\09");
        assert_eq!(unescape_octal(r"end\04"), r"end\04");
    }

    /// We are root on the test machines: a real tmpfs goes up and comes down.
    #[test]
    fn tmpfs_mount_and_unmount() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        let target = dir.path().join("mnt");
        std::fs::create_dir(&target).map_err(|e| Error::io(&target, e))?;
        assert!(!is_mount_point(&target)?);
        mount_tmpfs(&target, Some(1 << 20))?;
        assert!(is_mount_point(&target)?);
        assert_eq!(mounts_under(dir.path())?, vec![real_path(&target)]);
        unmount(&target)?;
        assert!(!is_mount_point(&target)?);
        assert!(unmount(&target).is_err(), "unmounting a plain directory fails");
        Ok(())
    }
}
