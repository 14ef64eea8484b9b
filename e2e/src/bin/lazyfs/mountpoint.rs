//! The mount point: refusing a live mount, cleaning a stale one.
//! Part of lazyfs (main.rs).

use super::*;

/// Checks `mount` before mounting on it. A stale lazyfs mount (its process was killed) is
/// detached; a live mount of anything is refused.
pub fn prepare(mount: &Path) -> anyhow::Result<()> {
    match fs::metadata(mount) {
        Err(e) if e.raw_os_error() == Some(libc::ENOTCONN) => {
            let fstype = mounted(mount)?.unwrap_or_default();
            anyhow::ensure!(fstype.starts_with("fuse"), "{} answers ENOTCONN but is not a FUSE mount ({fstype:?})", mount.display());
            eprintln!(
                "lazyfs: {} is a stale mount (the FUSE server behind it was killed without unmounting); detaching it (umount -l)",
                mount.display()
            );
            detach(mount)?;
        }
        Err(e) => return Err(e).with_context(|| format!("--mount {}", mount.display())),
        Ok(md) => anyhow::ensure!(md.is_dir(), "--mount {} is not a directory", mount.display()),
    }
    if let Some(fstype) = mounted(mount)? {
        bail!(
            "{} is already a mount point ({fstype}): unmount it first (umount -l {})",
            mount.display(),
            mount.display()
        );
    }
    Ok(())
}

/// `umount -l`: detach now, finish when the last file closes.
pub fn detach(mount: &Path) -> anyhow::Result<()> {
    let p = CString::new(absolute(mount)?.as_os_str().as_bytes())?;
    // SAFETY: a NUL-terminated path.
    if unsafe { libc::umount2(p.as_ptr(), libc::MNT_DETACH) } != 0 {
        return Err(io::Error::last_os_error()).with_context(|| format!("umount -l {}", mount.display()));
    }
    Ok(())
}

/// The absolute path of `mount` without touching it (a stale mount cannot be canonicalized):
/// its parent canonicalized, and its own name.
fn absolute(mount: &Path) -> anyhow::Result<PathBuf> {
    let abs = std::path::absolute(mount)?;
    match (abs.parent(), abs.file_name()) {
        (Some(parent), Some(name)) => Ok(parent.canonicalize()?.join(name)),
        _ => Ok(abs),
    }
}

/// The filesystem type mounted at `mount`, from /proc/self/mountinfo (the last mount there wins).
fn mounted(mount: &Path) -> anyhow::Result<Option<String>> {
    let target = absolute(mount)?;
    let info = fs::read_to_string("/proc/self/mountinfo")?;
    let mut found = None;
    for line in info.lines() {
        // id parent major:minor root mount-point options [optional...] - fstype source super
        let fields: Vec<&str> = line.split(' ').collect();
        let Some(sep) = fields.iter().position(|f| *f == "-") else { continue };
        if fields.len() > 4 && e2e::containerd::unescape_mountinfo(fields[4]) == target {
            found = fields.get(sep + 1).map(|s| s.to_string());
        }
    }
    Ok(found)
}

