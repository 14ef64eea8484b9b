//! Mirrors k8s.io/mount-utils (mount_linux.go), the part the hostpath driver needs: bind mounts
//! (read-only by a remount, as the kernel requires), unmounting, finding mount points in
//! `/proc/self/mountinfo`, and a filesystem's usage (statvfs), as csi-driver-host-path uses them.
//!
//! Every function here makes blocking system calls: async callers run them in
//! `tokio::task::spawn_blocking`. The node agent has its own copy (nodeagent/src/volumemanager/
//! mount.rs, on the same `libc` calls); the driver is a separate program and does not link it.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

const MOUNTINFO: &str = "/proc/self/mountinfo";

fn c_path(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes()).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains a NUL byte"))
}

/// Bind-mounts `source` on `target` (both must exist); with `read_only`, then remounts the bind
/// read-only: a bind mount ignores MS_RDONLY on its first call.
pub fn bind_mount(source: &Path, target: &Path, read_only: bool) -> io::Result<()> {
    let (src, dst) = (c_path(source)?, c_path(target)?);
    // SAFETY: every pointer is a valid NUL-terminated string (or null) that outlives the call.
    let rc = unsafe { libc::mount(src.as_ptr(), dst.as_ptr(), std::ptr::null(), libc::MS_BIND, std::ptr::null()) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    if read_only {
        let flags = libc::MS_REMOUNT | libc::MS_BIND | libc::MS_RDONLY;
        // SAFETY: as above.
        let rc = unsafe { libc::mount(std::ptr::null(), dst.as_ptr(), std::ptr::null(), flags, std::ptr::null()) };
        if rc != 0 {
            let err = io::Error::last_os_error();
            // Do not leave a writable mount behind a failed read-only publish.
            let _ = unmount(target);
            return Err(err);
        }
    }
    Ok(())
}

/// Unmounts `target`; nothing mounted there is not an error (`EINVAL`), as `umount` of an
/// already-unmounted path is what a retried teardown does.
pub fn unmount(target: &Path) -> io::Result<()> {
    let dst = c_path(target)?;
    // SAFETY: a valid NUL-terminated path.
    if unsafe { libc::umount2(dst.as_ptr(), 0) } != 0 {
        let err = io::Error::last_os_error();
        if err.raw_os_error() == Some(libc::EINVAL) {
            return Ok(());
        }
        return Err(err);
    }
    Ok(())
}

/// Unmounts everything stacked on `target` (a retried publish may have mounted twice), as
/// mount-utils' CleanupMountPoint does before it removes the directory.
pub fn unmount_all(target: &Path) -> io::Result<()> {
    while is_mount_point(target)? {
        unmount(target)?;
    }
    Ok(())
}

/// Whether something is mounted exactly at `path` (symlinks resolved, as mountinfo shows real
/// paths). A path that does not exist is not a mount point.
pub fn is_mount_point(path: &Path) -> io::Result<bool> {
    let real = match std::fs::canonicalize(path) {
        Ok(p) => p,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e),
    };
    let text = std::fs::read_to_string(MOUNTINFO)?;
    Ok(mount_points(&text).any(|p| p == real))
}

/// The mount points of mountinfo text (proc(5)), the fifth field of each line, with the kernel's
/// octal escapes (`\040` for a space) decoded. Malformed lines are skipped.
fn mount_points(text: &str) -> impl Iterator<Item = PathBuf> + '_ {
    text.lines().filter_map(|line| line.split(' ').nth(4).map(|p| PathBuf::from(unescape_octal(p))))
}

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

/// A filesystem's size and use, in bytes and inodes (NodeGetVolumeStats, GetCapacity).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FsStats {
    pub total_bytes: i64,
    pub available_bytes: i64,
    pub used_bytes: i64,
    pub total_inodes: i64,
    pub free_inodes: i64,
    pub used_inodes: i64,
}

/// statvfs(3) of the filesystem holding `path`, as mount-utils' (and the kubelet's) FsInfo
/// reads it: available is what an unprivileged user may still use (`f_bavail`).
pub fn statvfs(path: &Path) -> io::Result<FsStats> {
    let p = c_path(path)?;
    // SAFETY: statvfs is plain old data; the kernel fills it in.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: a valid path and a valid out-pointer.
    if unsafe { libc::statvfs(p.as_ptr(), &mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let to_i64 = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
    #[allow(clippy::useless_conversion)] // the field widths differ between targets
    let (frsize, blocks, bfree, bavail, files, ffree) =
        (u64::from(st.f_frsize), u64::from(st.f_blocks), u64::from(st.f_bfree), u64::from(st.f_bavail), u64::from(st.f_files), u64::from(st.f_ffree));
    Ok(FsStats {
        total_bytes: to_i64(blocks.saturating_mul(frsize)),
        available_bytes: to_i64(bavail.saturating_mul(frsize)),
        used_bytes: to_i64(blocks.saturating_sub(bfree).saturating_mul(frsize)),
        total_inodes: to_i64(files),
        free_inodes: to_i64(ffree),
        used_inodes: to_i64(files.saturating_sub(ffree)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mount_points_of_mountinfo() {
        let text = "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n\
                    36 22 0:31 /vol /var/lib/a\\040b rw - ext4 /dev/sda1 rw\n\
                    garbage\n";
        let got: Vec<PathBuf> = mount_points(text).collect();
        assert_eq!(got, vec![PathBuf::from("/"), PathBuf::from("/var/lib/a b")]);
    }

    #[test]
    fn unescape() {
        for (input, want) in [("a\\040b", "a b"), ("tab\\011", "tab\t"), ("x\\9", "x\\9"), ("plain", "plain")] {
            assert_eq!(unescape_octal(input), want, "{input}");
        }
    }

    #[test]
    fn statvfs_of_root() {
        let st = statvfs(Path::new("/")).expect("statvfs /");
        assert!(st.total_bytes > 0 && st.available_bytes <= st.total_bytes, "{st:?}");
    }

    #[test]
    fn missing_path_is_not_a_mount_point() {
        assert!(!is_mount_point(Path::new("/nonexistent/kubelab-csi")).expect("mountinfo"));
    }
}
