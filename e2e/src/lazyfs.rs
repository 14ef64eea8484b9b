//! lazyfs, from the harness's side: mounts a member's data directory through the `lazyfs`
//! binary ([`src/bin/lazyfs/`](bin/lazyfs/main.rs)), whose cache holds every byte written and
//! not yet fsynced, and drops that cache on command — a power cut, where kill -9 alone is only a
//! crash. etcd's robustness suite runs its members on lazyfs the same way
//! (`tests/robustness/failpoint` with `e2e.LazyFS`).
//!
//! The binary's control socket takes one line and answers one: `clear-cache` (`ok <bytes
//! dropped>`), `status` (`ok <unsynced bytes> <files>`), `unmount` (`ok`, then it unmounts and
//! exits); SIGTERM unmounts too. A lazyfs that was killed leaves a stale mount, which
//! [`Lazyfs`]'s drop detaches (`umount -l`).

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context;

use crate::process::Process;

/// The `lazyfs` binary: `$LAZYFS_BIN`, or the one cargo built beside the running test.
pub fn lazyfs_bin() -> anyhow::Result<PathBuf> {
    if let Some(p) = std::env::var_os("LAZYFS_BIN") {
        return Ok(PathBuf::from(p));
    }
    let exe = std::env::current_exe()?;
    let mut dir = exe.parent().context("the running executable has no directory")?.to_path_buf();
    if dir.file_name().is_some_and(|n| n == "deps") {
        dir.pop();
    }
    let bin = dir.join("lazyfs");
    anyhow::ensure!(bin.exists(), "lazyfs not found at {} (build it with `cargo build -p e2e --bin lazyfs`, or set LAZYFS_BIN)", bin.display());
    Ok(bin)
}

/// A running lazyfs. Dropping it stops it (SIGTERM: it unmounts) and detaches the mount if it
/// is still there, so a failed test leaves no mount behind.
pub struct Lazyfs {
    process: Option<Process>,
    mount: PathBuf,
    control: PathBuf,
}

impl Lazyfs {
    /// Mounts `backing` on `mount`, its log in `log_dir`, and waits until the mount is up.
    pub fn start(backing: &Path, mount: &Path, control: &Path, log_dir: &Path) -> anyhow::Result<Self> {
        let args = [
            "--backing".to_string(),
            backing.display().to_string(),
            "--mount".to_string(),
            mount.display().to_string(),
            "--control".to_string(),
            control.display().to_string(),
        ];
        let process = Process::spawn("lazyfs", &lazyfs_bin()?, &args, log_dir, &[])?;
        eprintln!("[e2e] lazyfs pid {} serves {} on {}", process.pid(), backing.display(), mount.display());
        let mut fs = Self { process: Some(process), mount: mount.to_path_buf(), control: control.to_path_buf() };
        let deadline = Instant::now() + crate::scaled(Duration::from_secs(10));
        while !(is_mounted(mount)? && control.exists()) {
            if let Some(st) = fs.process.as_mut().and_then(|p| p.exited()) {
                anyhow::bail!("lazyfs exited ({st}) before mounting:\n{}", fs.log_tail());
            }
            anyhow::ensure!(Instant::now() < deadline, "lazyfs did not mount {} in time:\n{}", mount.display(), fs.log_tail());
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(fs)
    }

    pub fn log_tail(&self) -> String {
        self.process.as_ref().map(|p| p.log_tail(20)).unwrap_or_default()
    }

    /// Sends one command; returns the answer after its `ok`.
    pub fn command(&self, cmd: &str) -> anyhow::Result<String> {
        let mut conn = UnixStream::connect(&self.control).with_context(|| format!("connecting to {}", self.control.display()))?;
        conn.set_read_timeout(Some(crate::scaled(Duration::from_secs(10))))?;
        conn.write_all(format!("{cmd}\n").as_bytes())?;
        let mut line = String::new();
        BufReader::new(conn).read_line(&mut line)?;
        let line = line.trim();
        match line.strip_prefix("ok") {
            Some(rest) => Ok(rest.trim().to_string()),
            None => anyhow::bail!("lazyfs answered {cmd:?} with {line:?}"),
        }
    }

    /// Drops every unsynced byte; returns how many.
    pub fn clear_cache(&self) -> anyhow::Result<u64> {
        Ok(self.command("clear-cache")?.parse()?)
    }

    /// (unsynced bytes, files holding some).
    pub fn status(&self) -> anyhow::Result<(u64, u64)> {
        let answer = self.command("status")?;
        let mut it = answer.split(' ').map(str::parse::<u64>);
        match (it.next(), it.next()) {
            (Some(Ok(bytes)), Some(Ok(files))) => Ok((bytes, files)),
            _ => anyhow::bail!("status answered {answer:?}"),
        }
    }

    /// `unmount`, and waits for lazyfs to exit and the mount to be gone.
    pub fn unmount(mut self) -> anyhow::Result<()> {
        self.command("unmount")?;
        let mut p = self.process.take().context("lazyfs is not running")?;
        let deadline = Instant::now() + crate::scaled(Duration::from_secs(10));
        let status = loop {
            if let Some(st) = p.exited() {
                break st;
            }
            anyhow::ensure!(Instant::now() < deadline, "lazyfs did not exit after unmount:\n{}", p.log_tail(20));
            std::thread::sleep(Duration::from_millis(20));
        };
        anyhow::ensure!(status.success(), "lazyfs exited with {status}:\n{}", p.log_tail(20));
        anyhow::ensure!(!is_mounted(&self.mount)?, "{} is still mounted after lazyfs exited", self.mount.display());
        Ok(())
    }
}

impl Drop for Lazyfs {
    fn drop(&mut self) {
        if let Some(mut p) = self.process.take() {
            if std::thread::panicking() {
                eprintln!("{}", p.log_tail(40));
            }
            p.terminate();
        }
        if is_mounted(&self.mount).unwrap_or(false) {
            eprintln!("[e2e] umount -l {}", self.mount.display());
            if let Ok(p) = std::ffi::CString::new(self.mount.as_os_str().as_encoded_bytes()) {
                // SAFETY: a NUL-terminated path.
                unsafe { libc::umount2(p.as_ptr(), libc::MNT_DETACH) };
            }
        }
    }
}

/// Whether something is mounted at `path` (from /proc/self/mountinfo).
pub fn is_mounted(path: &Path) -> anyhow::Result<bool> {
    let info = std::fs::read_to_string("/proc/self/mountinfo")?;
    Ok(crate::containerd::mount_points_under(&info, path).iter().any(|p| p == path))
}

