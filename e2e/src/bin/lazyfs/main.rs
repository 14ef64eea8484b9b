//! lazyfs: mirrors lazyfs (github.com/dsrhaslab/lazyfs), the FUSE filesystem etcd's robustness
//! suite runs its members on, written anew for kubelab's end-to-end tests.
//!
//! `kill -9` of a process loses nothing it wrote: the kernel's page cache still holds the data
//! and writes it back later. A power cut loses that page cache, and with it every byte that was
//! not made durable with `fsync`/`fdatasync`. lazyfs makes the second fault possible in a test:
//! it serves a backing directory at a mount point, keeps written-but-unsynced bytes in its own
//! memory instead of the backing files, and throws them all away on command.
//!
//! ```text
//! lazyfs --backing <dir> --mount <dir> --control <unix socket>
//! ```
//!
//! # Semantics
//! 1. `write` puts the bytes in a per-file cache ([`extents::Extents`]); `read` sees them merged
//!    over the backing file, and a file's size is the larger of the backing size and the end of
//!    its cached bytes.
//! 2. `fsync`/`fdatasync` of a file writes that file's cached bytes to the backing file and
//!    `fdatasync`s (or `fsync`s) it; `fsync` of a directory `fsync`s the backing directory. A
//!    file opened `O_SYNC`/`O_DSYNC` is synced after every write.
//! 3. Metadata operations go straight to the backing directory: create, mkdir, mknod, symlink,
//!    link, unlink, rmdir, rename, chmod, chown, utimens, truncate, fallocate. Cached bytes are
//!    kept consistent: a truncation drops those past the new size, a hole punched or a range
//!    zeroed drops those inside it, a rename carries a file's cache along (it belongs to the
//!    inode, not the name), and the last unlink of a file drops it once no one has it open.
//! 4. The control socket takes one command per line and answers each with one line:
//!    `clear-cache` → `ok <bytes dropped>` (a power cut), `status` → `ok <unsynced bytes> <files>`,
//!    `unmount` → `ok`, then lazyfs unmounts and exits. SIGTERM and SIGINT unmount too.
//! 5. The kernel must not serve dropped bytes from its own page cache: entries and attributes
//!    have a TTL of 0, files are opened without `FOPEN_KEEP_CACHE` (an open drops the kernel's
//!    pages), `FUSE_AUTO_INVAL_DATA` makes a read check the size first, and `clear-cache`
//!    invalidates every inode's pages, so that even a file held open across it reads what is on
//!    the backing file.
//! 6. A clean unmount writes every cached byte back first, as the kernel writes its dirty pages
//!    back before an unmount completes: to lose them, `clear-cache` before `unmount`.
//!
//! # Stopping, and a stale mount
//! If the mount is busy at exit (a process still has a file open), it is detached lazily
//! (`umount -l`): it goes away when the last file closes, and those files fail with ENOTCONN
//! once lazyfs has exited. A lazyfs that is killed (SIGKILL) cannot unmount: the mount point is
//! left *stale* (every access fails with ENOTCONN, "Transport endpoint is not connected").
//! Whoever killed it unmounts it lazily with `umount -l <mount>`; a new lazyfs on the same mount
//! point does it itself, saying so, and refuses a mount point that something live is mounted on.
//!
//! # Implementation caveats
//! - One request at a time: every operation holds one lock, backing I/O included. Correct, and
//!   fast enough for a store's test; not for benchmarks.
//! - Inodes are never forgotten (the kernel's FORGET is ignored): lazyfs is for test-sized trees.
//! - A hard-linked file is known by the last of its names that was looked up.
//! - Nothing may change the backing directory behind lazyfs's back while it is mounted: a file
//!   it did not see go could lend its cache to a new file that reuses the inode number.
//! - Only data is lazy: metadata operations reach the backing directory at once and stay (lazyfs
//!   proper cannot lose them either). Extended attributes, `SEEK_DATA`/`SEEK_HOLE`, POSIX and
//!   flock locks are left to the kernel (locks are then local to this machine, which is all a
//!   single-machine test needs).
//! - Files are created by lazyfs's user (root in the tests), whoever asked.

use std::collections::HashMap;
use std::ffi::{CString, OsStr, OsString};
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, FileExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail};
use clap::Parser;
use fuser::{
    AccessFlags, Config, Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo,
    InitFlags, KernelConfig, LockOwner, MountOption, Notifier, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate,
    ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, Request, Session,
    TimeOrNow, WriteFlags,
};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::mpsc;

#[derive(Parser, Debug)]
#[command(about = "A passthrough FUSE filesystem that holds unsynced writes in memory and drops them on command")]
struct Args {
    /// The directory whose files are served (and where synced data lands).
    #[arg(long)]
    backing: PathBuf,
    /// Where to mount it (an existing, empty directory).
    #[arg(long)]
    mount: PathBuf,
    /// The control socket: `clear-cache`, `status`, `unmount`, one a line.
    #[arg(long)]
    control: PathBuf,
}

/// Entries and attributes are never cached by the kernel: a size or a name must always come
/// from lazyfs, which may just have dropped bytes.
const TTL: Duration = Duration::ZERO;

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    anyhow::ensure!(args.backing.is_dir(), "--backing {} is not a directory", args.backing.display());
    let backing = args.backing.canonicalize()?;
    mountpoint::prepare(&args.mount)?;
    let listener_path = args.control.clone();
    control::remove_stale_socket(&listener_path)?;

    let state = Arc::new(Mutex::new(passthrough::State::new(backing.clone())));
    let mut config = Config::default();
    config.mount_options = vec![MountOption::FSName("lazyfs".into()), MountOption::Subtype("lazyfs".into())];
    let session = Session::new(passthrough::LazyFs { state: state.clone() }, &args.mount, &config)
        .with_context(|| format!("mounting {} on {}", backing.display(), args.mount.display()))?;
    let session = session.spawn()?;
    let notifier = session.notifier();
    eprintln!("lazyfs: {} mounted on {} (control {})", backing.display(), args.mount.display(), args.control.display());

    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let reason = runtime.block_on(async {
        let listener = UnixListener::bind(&listener_path)
            .with_context(|| format!("binding the control socket {}", listener_path.display()))?;
        let (unmount_tx, mut unmount_rx) = mpsc::channel::<()>(1);
        tokio::spawn(control::serve(listener, state.clone(), notifier, unmount_tx));
        let mut term = signal(SignalKind::terminate())?;
        let mut int = signal(SignalKind::interrupt())?;
        anyhow::Ok(tokio::select! {
            _ = term.recv() => "SIGTERM",
            _ = int.recv() => "SIGINT",
            _ = unmount_rx.recv() => "the unmount command",
        })
    });
    let _ = fs::remove_file(&listener_path);
    let reason = reason?;

    // A clean unmount writes back what is cached, as the kernel's does with dirty pages.
    let written = state.lock().map_err(|_| anyhow::anyhow!("state lock poisoned"))?.write_back_all();
    eprintln!("lazyfs: unmounting {} ({reason}); wrote back {written} unsynced bytes", args.mount.display());
    if let Err(e) = session.umount_and_join() {
        eprintln!("lazyfs: unmount failed ({e}); detaching the mount lazily (umount -l)");
        mountpoint::detach(&args.mount)?;
    }
    Ok(())
}

mod extents;

mod passthrough;

mod control;

mod mountpoint;
