//! The filesystem: a passthrough of the backing directory with a cache of unsynced bytes.
//! Part of lazyfs (main.rs).

use super::*;
use crate::extents::Extents;

/// One file or directory the kernel knows, by its FUSE inode number.
struct Node {
    /// Its backing path (absolute). Two names of one backing inode are one node
    /// ([`State::by_key`]).
    path: PathBuf,
    cache: Extents,
    /// Open file handles.
    open: u32,
    /// False once its last name is gone: it lives on while open, then is dropped.
    linked: bool,
}

struct Handle {
    ino: u64,
    file: File,
    /// Opened O_SYNC or O_DSYNC: every write is synced.
    sync: bool,
}

struct DirEntry {
    ino: u64,
    kind: FileType,
    name: OsString,
}

/// Everything behind the one lock (see the implementation caveats).
pub struct State {
    nodes: HashMap<u64, Node>,
    /// Backing (device, inode number) → node, for the files that still have a name.
    by_key: HashMap<(u64, u64), u64>,
    next_ino: u64,
    files: HashMap<u64, Handle>,
    dirs: HashMap<u64, Vec<DirEntry>>,
    next_fh: u64,
}

impl State {
    pub fn new(backing: PathBuf) -> Self {
        let mut nodes = HashMap::new();
        let mut by_key = HashMap::new();
        if let Ok(md) = fs::metadata(&backing) {
            by_key.insert((md.dev(), md.ino()), INodeNo::ROOT.0);
        }
        nodes.insert(INodeNo::ROOT.0, Node { path: backing, cache: Extents::default(), open: 0, linked: true });
        Self { nodes, by_key, next_ino: 2, files: HashMap::new(), dirs: HashMap::new(), next_fh: 1 }
    }

    fn node(&self, ino: INodeNo) -> Result<&Node, Errno> {
        self.nodes.get(&ino.0).ok_or(Errno::ENOENT)
    }

    fn path(&self, ino: INodeNo) -> Result<PathBuf, Errno> {
        Ok(self.node(ino)?.path.clone())
    }

    fn child(&self, parent: INodeNo, name: &OsStr) -> Result<PathBuf, Errno> {
        Ok(self.node(parent)?.path.join(name))
    }

    /// The node of the backing file `path` whose metadata is `md`, made on first sight.
    fn node_for(&mut self, path: PathBuf, md: &fs::Metadata) -> u64 {
        let key = (md.dev(), md.ino());
        if let Some(&ino) = self.by_key.get(&key)
            && let Some(n) = self.nodes.get_mut(&ino)
        {
            n.path = path;
            return ino;
        }
        let ino = self.next_ino;
        self.next_ino += 1;
        self.by_key.insert(key, ino);
        self.nodes.insert(ino, Node { path, cache: Extents::default(), open: 0, linked: true });
        ino
    }

    /// The attributes the kernel sees: the backing file's, with the cached size.
    fn attr(&self, ino: u64, md: &fs::Metadata) -> FileAttr {
        let cached_end = self.nodes.get(&ino).map_or(0, |n| n.cache.end());
        let time = |s: i64, ns: i64| {
            if s >= 0 { UNIX_EPOCH + Duration::new(s as u64, ns as u32) } else { UNIX_EPOCH - Duration::from_secs(s.unsigned_abs()) }
        };
        FileAttr {
            ino: INodeNo(ino),
            size: if md.is_file() { md.size().max(cached_end) } else { md.size() },
            blocks: md.blocks(),
            atime: time(md.atime(), md.atime_nsec()),
            mtime: time(md.mtime(), md.mtime_nsec()),
            ctime: time(md.ctime(), md.ctime_nsec()),
            crtime: SystemTime::UNIX_EPOCH,
            kind: kind(md.file_type()),
            perm: (md.mode() & 0o7777) as u16,
            nlink: md.nlink() as u32,
            uid: md.uid(),
            gid: md.gid(),
            rdev: md.rdev() as u32,
            blksize: md.blksize() as u32,
            flags: 0,
        }
    }

    /// Looks `path` up on the backing directory: its node and attributes.
    fn entry(&mut self, path: PathBuf) -> Result<FileAttr, Errno> {
        let md = fs::symlink_metadata(&path)?;
        let ino = self.node_for(path, &md);
        Ok(self.attr(ino, &md))
    }

    /// The backing metadata of `ino`: through an open handle if there is one (the file may
    /// have no name left), else by its path.
    fn metadata(&self, ino: INodeNo, fh: Option<FileHandle>) -> Result<fs::Metadata, Errno> {
        if let Some(h) = fh.and_then(|fh| self.files.get(&fh.0)) {
            return Ok(h.file.metadata()?);
        }
        match fs::symlink_metadata(&self.node(ino)?.path) {
            Ok(md) => Ok(md),
            Err(e) => match self.files.values().find(|h| h.ino == ino.0) {
                Some(h) => Ok(h.file.metadata()?),
                None => Err(e.into()),
            },
        }
    }

    /// A name of the backing file `key` is gone (unlink, rename over it); `last` says it was
    /// the last one. Its node, and its cache, go once no one has it open.
    fn unlinked(&mut self, key: (u64, u64), last: bool) {
        if !last {
            return;
        }
        if let Some(ino) = self.by_key.remove(&key) {
            let drop_now = self.nodes.get_mut(&ino).is_some_and(|n| {
                n.linked = false;
                n.open == 0
            });
            if drop_now {
                self.nodes.remove(&ino);
            }
        }
    }

    fn open_handle(&mut self, ino: u64, file: File, sync: bool) -> u64 {
        let fh = self.next_fh;
        self.next_fh += 1;
        self.files.insert(fh, Handle { ino, file, sync });
        if let Some(n) = self.nodes.get_mut(&ino) {
            n.open += 1;
        }
        fh
    }

    /// Writes node `ino`'s cached bytes to `file` and syncs it (fdatasync if `datasync`).
    fn write_back(node: &mut Node, file: &File, datasync: bool) -> io::Result<u64> {
        let mut n = 0;
        for (off, run) in node.cache.runs() {
            file.write_all_at(run, off)?;
            n += run.len() as u64;
        }
        if datasync { file.sync_data()? } else { file.sync_all()? }
        node.cache.clear();
        Ok(n)
    }

    fn sync_file(&mut self, fh: FileHandle, datasync: bool) -> Result<(), Errno> {
        let h = self.files.get(&fh.0).ok_or(Errno::EBADF)?;
        let node = self.nodes.get_mut(&h.ino).ok_or(Errno::ENOENT)?;
        Self::write_back(node, &h.file, datasync)?;
        Ok(())
    }

    /// Writes back every cached byte (a clean unmount); returns how many.
    pub fn write_back_all(&mut self) -> u64 {
        let mut total = 0;
        for (ino, node) in self.nodes.iter_mut().filter(|(_, n)| n.cache.bytes() > 0) {
            let file = match self.files.values().find(|h| h.ino == *ino) {
                Some(h) => h.file.try_clone(),
                None => OpenOptions::new().write(true).open(&node.path),
            };
            match file.and_then(|f| Self::write_back(node, &f, true)) {
                Ok(n) => total += n,
                Err(e) => eprintln!("lazyfs: writing back {} failed: {e}", node.path.display()),
            }
        }
        total
    }

    /// Drops every unsynced byte: (bytes dropped, the inodes whose kernel pages must go).
    pub fn clear_cache(&mut self) -> (u64, Vec<u64>) {
        let dropped = self.nodes.values_mut().map(|n| n.cache.clear()).sum();
        (dropped, self.nodes.keys().copied().filter(|&i| i != INodeNo::ROOT.0).collect())
    }

    /// (unsynced bytes, files holding some).
    pub fn status(&self) -> (u64, usize) {
        let holding = self.nodes.values().filter(|n| n.cache.bytes() > 0);
        holding.fold((0, 0), |(b, f), n| (b + n.cache.bytes(), f + 1))
    }

    /// A rename from `from` to `to` happened: every node at or under `from` moves (and, for
    /// an exchange, every node at or under `to` moves to `from`).
    fn renamed(&mut self, from: &Path, to: &Path, exchange: bool) {
        for n in self.nodes.values_mut() {
            if let Ok(rest) = n.path.strip_prefix(from) {
                n.path = if rest.as_os_str().is_empty() { to.to_path_buf() } else { to.join(rest) };
            } else if exchange && let Ok(rest) = n.path.strip_prefix(to) {
                n.path = if rest.as_os_str().is_empty() { from.to_path_buf() } else { from.join(rest) };
            }
        }
    }
}

fn kind(t: fs::FileType) -> FileType {
    FileType::from_std(t).unwrap_or(FileType::RegularFile)
}

fn cstr(p: &Path) -> Result<CString, Errno> {
    CString::new(p.as_os_str().as_bytes()).map_err(|_| Errno::EINVAL)
}

/// The result of a libc call that returns -1 and sets errno.
fn check(r: libc::c_int) -> Result<(), Errno> {
    if r == 0 { Ok(()) } else { Err(io::Error::last_os_error().into()) }
}

fn timespec(t: Option<TimeOrNow>) -> libc::timespec {
    match t {
        None => libc::timespec { tv_sec: 0, tv_nsec: libc::UTIME_OMIT },
        Some(TimeOrNow::Now) => libc::timespec { tv_sec: 0, tv_nsec: libc::UTIME_NOW },
        Some(TimeOrNow::SpecificTime(t)) => {
            let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
            libc::timespec { tv_sec: d.as_secs() as libc::time_t, tv_nsec: d.subsec_nanos() as libc::c_long }
        }
    }
}

/// Opens a backing file for lazyfs's own use: read-write whatever the caller asked (a
/// sync through a read-only descriptor must still write the cache back), read-only if that
/// fails; without O_APPEND (lazyfs writes at the offsets the kernel gives), O_TRUNC (done as
/// a truncation, which drops cached bytes) or O_DIRECT (its buffers are not aligned).
fn open_backing(path: &Path, flags: i32, create: Option<u32>) -> io::Result<File> {
    let keep = flags & !(libc::O_ACCMODE | libc::O_APPEND | libc::O_TRUNC | libc::O_DIRECT | libc::O_CREAT | libc::O_EXCL);
    let mut o = OpenOptions::new();
    o.read(true).write(true).custom_flags(keep & !(libc::O_SYNC | libc::O_DSYNC));
    if let Some(mode) = create {
        o.mode(mode);
        if flags & libc::O_EXCL != 0 { o.create_new(true) } else { o.create(true) };
    }
    match o.open(path) {
        Err(e) if create.is_none() && matches!(e.raw_os_error(), Some(libc::EACCES | libc::EROFS | libc::EISDIR | libc::ETXTBSY)) => {
            OpenOptions::new().read(true).custom_flags(keep).open(path)
        }
        r => r,
    }
}

fn is_sync(flags: i32) -> bool {
    flags & (libc::O_SYNC | libc::O_DSYNC) != 0
}

pub struct LazyFs {
    pub state: Arc<Mutex<State>>,
}

impl LazyFs {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic inside an operation leaves the maps as they were between two statements:
        // serving on is better than failing every later request.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// `reply.$ok(value)` or `reply.error(errno)`.
macro_rules! answer {
    ($reply:expr, $r:expr, |$v:ident| $ok:expr) => {
        match $r {
            Ok($v) => $ok,
            Err(e) => $reply.error(e),
        }
    };
}

impl Filesystem for LazyFs {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> io::Result<()> {
        // A read checks the size with lazyfs first: a file held open across clear-cache does
        // not read zeros up to the size it had.
        if let Err(missing) = config.add_capabilities(InitFlags::FUSE_AUTO_INVAL_DATA) {
            eprintln!("lazyfs: the kernel lacks {missing:?}");
        }
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let mut s = self.lock();
        let r = s.child(parent, name).and_then(|p| s.entry(p));
        answer!(reply, r, |a| reply.entry(&TTL, &a, Generation(0)));
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, fh: Option<FileHandle>, reply: ReplyAttr) {
        let s = self.lock();
        let r = s.metadata(ino, fh).map(|md| s.attr(ino.0, &md));
        answer!(reply, r, |a| reply.attr(&TTL, &a));
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let mut s = self.lock();
        let r = (|| {
            let path = s.path(ino)?;
            if let Some(mode) = mode {
                fs::set_permissions(&path, fs::Permissions::from_mode(mode))?;
            }
            if uid.is_some() || gid.is_some() {
                std::os::unix::fs::lchown(&path, uid, gid)?;
            }
            if let Some(size) = size {
                match fh.and_then(|fh| s.files.get(&fh.0)) {
                    Some(h) => h.file.set_len(size)?,
                    None => OpenOptions::new().write(true).open(&path)?.set_len(size)?,
                }
                if let Some(n) = s.nodes.get_mut(&ino.0) {
                    n.cache.truncate(size);
                }
            }
            if atime.is_some() || mtime.is_some() {
                let times = [timespec(atime), timespec(mtime)];
                let p = cstr(&path)?;
                // SAFETY: a NUL-terminated path and two timespecs that outlive the call.
                check(unsafe { libc::utimensat(libc::AT_FDCWD, p.as_ptr(), times.as_ptr(), libc::AT_SYMLINK_NOFOLLOW) })?;
            }
            let md = s.metadata(ino, fh)?;
            Ok::<_, Errno>(s.attr(ino.0, &md))
        })();
        answer!(reply, r, |a| reply.attr(&TTL, &a));
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        let r = self.lock().path(ino).and_then(|p| Ok(fs::read_link(p)?));
        answer!(reply, r, |t| reply.data(t.as_os_str().as_bytes()));
    }

    fn mknod(&self, _req: &Request, parent: INodeNo, name: &OsStr, mode: u32, umask: u32, rdev: u32, reply: ReplyEntry) {
        let mut s = self.lock();
        let r = s.child(parent, name).and_then(|path| {
            let p = cstr(&path)?;
            // SAFETY: a NUL-terminated path.
            check(unsafe { libc::mknod(p.as_ptr(), mode & !umask, rdev as libc::dev_t) })?;
            s.entry(path)
        });
        answer!(reply, r, |a| reply.entry(&TTL, &a, Generation(0)));
    }

    fn mkdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, mode: u32, umask: u32, reply: ReplyEntry) {
        let mut s = self.lock();
        let r = s.child(parent, name).and_then(|path| {
            fs::DirBuilder::new().mode(mode & !umask).create(&path)?;
            s.entry(path)
        });
        answer!(reply, r, |a| reply.entry(&TTL, &a, Generation(0)));
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let mut s = self.lock();
        let r = s.child(parent, name).and_then(|path| {
            let md = fs::symlink_metadata(&path)?;
            fs::remove_file(&path)?;
            s.unlinked((md.dev(), md.ino()), md.nlink() <= 1);
            Ok(())
        });
        answer!(reply, r, |_v| reply.ok());
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let mut s = self.lock();
        let r = s.child(parent, name).and_then(|path| {
            let md = fs::symlink_metadata(&path)?;
            fs::remove_dir(&path)?;
            s.unlinked((md.dev(), md.ino()), true);
            Ok(())
        });
        answer!(reply, r, |_v| reply.ok());
    }

    fn symlink(&self, _req: &Request, parent: INodeNo, link_name: &OsStr, target: &Path, reply: ReplyEntry) {
        let mut s = self.lock();
        let r = s.child(parent, link_name).and_then(|path| {
            std::os::unix::fs::symlink(target, &path)?;
            s.entry(path)
        });
        answer!(reply, r, |a| reply.entry(&TTL, &a, Generation(0)));
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        let mut s = self.lock();
        let r = (|| {
            let (from, to) = (s.child(parent, name)?, s.child(newparent, newname)?);
            let source = fs::symlink_metadata(&from)?;
            let replaced = fs::symlink_metadata(&to).ok();
            if flags.is_empty() {
                fs::rename(&from, &to)?;
            } else {
                let (f, t) = (cstr(&from)?, cstr(&to)?);
                // SAFETY: two NUL-terminated paths.
                check(unsafe { libc::renameat2(libc::AT_FDCWD, f.as_ptr(), libc::AT_FDCWD, t.as_ptr(), flags.bits()) })?;
            }
            let exchange = flags.contains(RenameFlags::RENAME_EXCHANGE);
            if let Some(md) = replaced.filter(|md| !exchange && (md.dev(), md.ino()) != (source.dev(), source.ino())) {
                s.unlinked((md.dev(), md.ino()), md.is_dir() || md.nlink() <= 1);
            }
            s.renamed(&from, &to, exchange);
            Ok::<_, Errno>(())
        })();
        answer!(reply, r, |_v| reply.ok());
    }

    fn link(&self, _req: &Request, ino: INodeNo, newparent: INodeNo, newname: &OsStr, reply: ReplyEntry) {
        let mut s = self.lock();
        let r = (|| {
            let (from, to) = (s.path(ino)?, s.child(newparent, newname)?);
            fs::hard_link(&from, &to)?;
            s.entry(to)
        })();
        answer!(reply, r, |a| reply.entry(&TTL, &a, Generation(0)));
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let mut s = self.lock();
        let r = (|| {
            let file = open_backing(&s.path(ino)?, flags.0, None)?;
            if flags.0 & libc::O_TRUNC != 0 {
                file.set_len(0)?;
                if let Some(n) = s.nodes.get_mut(&ino.0) {
                    n.cache.truncate(0);
                }
            }
            Ok::<_, Errno>(s.open_handle(ino.0, file, is_sync(flags.0)))
        })();
        // No FOPEN_KEEP_CACHE: every open drops the kernel's pages of the file.
        answer!(reply, r, |fh| reply.opened(FileHandle(fh), FopenFlags::empty()));
    }

    fn create(&self, _req: &Request, parent: INodeNo, name: &OsStr, mode: u32, umask: u32, flags: i32, reply: ReplyCreate) {
        let mut s = self.lock();
        let r = (|| {
            let path = s.child(parent, name)?;
            let file = open_backing(&path, flags, Some(mode & !umask))?;
            let md = file.metadata()?;
            let ino = s.node_for(path, &md);
            if flags & libc::O_TRUNC != 0 {
                file.set_len(0)?;
                if let Some(n) = s.nodes.get_mut(&ino) {
                    n.cache.truncate(0);
                }
            }
            let attr = s.attr(ino, &file.metadata()?);
            Ok::<_, Errno>((attr, s.open_handle(ino, file, is_sync(flags))))
        })();
        answer!(reply, r, |v| reply.created(&TTL, &v.0, Generation(0), FileHandle(v.1), FopenFlags::empty()));
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let s = self.lock();
        let r = (|| {
            let h = s.files.get(&fh.0).ok_or(Errno::EBADF)?;
            let node = s.node(ino)?;
            let backing_size = h.file.metadata()?.len();
            let end = backing_size.max(node.cache.end()).min(offset.saturating_add(size as u64));
            let mut buf = vec![0u8; end.saturating_sub(offset) as usize];
            // Past the backing file's end (bytes only the cache has, or a hole before them)
            // the buffer keeps its zeros.
            let mut done = 0;
            while done < buf.len() && offset + (done as u64) < backing_size {
                match h.file.read_at(&mut buf[done..], offset + done as u64) {
                    Ok(0) => break,
                    Ok(n) => done += n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e.into()),
                }
            }
            node.cache.overlay(offset, &mut buf);
            Ok::<_, Errno>(buf)
        })();
        answer!(reply, r, |b| reply.data(&b));
    }

    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let mut s = self.lock();
        let r = (|| {
            let sync = s.files.get(&fh.0).ok_or(Errno::EBADF)?.sync;
            s.nodes.get_mut(&ino.0).ok_or(Errno::ENOENT)?.cache.write(offset, data);
            if sync {
                s.sync_file(fh, true)?;
            }
            Ok::<_, Errno>(())
        })();
        answer!(reply, r, |_v| reply.written(data.len() as u32));
    }

    fn flush(&self, _req: &Request, _ino: INodeNo, _fh: FileHandle, _lock_owner: LockOwner, reply: ReplyEmpty) {
        // close(2) makes nothing durable.
        reply.ok();
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        let mut s = self.lock();
        if let Some(h) = s.files.remove(&fh.0) {
            let gone = s.nodes.get_mut(&h.ino).is_some_and(|n| {
                n.open = n.open.saturating_sub(1);
                n.open == 0 && !n.linked
            });
            if gone {
                s.nodes.remove(&h.ino);
            }
        }
        reply.ok();
    }

    fn fsync(&self, _req: &Request, _ino: INodeNo, fh: FileHandle, datasync: bool, reply: ReplyEmpty) {
        let r = self.lock().sync_file(fh, datasync);
        answer!(reply, r, |_v| reply.ok());
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        let mut s = self.lock();
        let r = (|| {
            let path = s.path(ino)?;
            let up = if ino == INodeNo::ROOT { ino.0 } else {
                let parent = path.parent().map(Path::to_path_buf).unwrap_or_else(|| path.clone());
                let md = fs::symlink_metadata(&parent)?;
                s.node_for(parent, &md)
            };
            let mut entries = vec![
                DirEntry { ino: ino.0, kind: FileType::Directory, name: ".".into() },
                DirEntry { ino: up, kind: FileType::Directory, name: "..".into() },
            ];
            for e in fs::read_dir(&path)? {
                let e = e?;
                // A name that went away meanwhile is left out.
                let Ok(md) = e.metadata() else { continue };
                let ino = s.node_for(e.path(), &md);
                entries.push(DirEntry { ino, kind: kind(md.file_type()), name: e.file_name() });
            }
            let fh = s.next_fh;
            s.next_fh += 1;
            s.dirs.insert(fh, entries);
            Ok::<_, Errno>(fh)
        })();
        answer!(reply, r, |fh| reply.opened(FileHandle(fh), FopenFlags::empty()));
    }

    fn readdir(&self, _req: &Request, _ino: INodeNo, fh: FileHandle, offset: u64, mut reply: ReplyDirectory) {
        let s = self.lock();
        let Some(entries) = s.dirs.get(&fh.0) else { return reply.error(Errno::EBADF) };
        for (i, e) in entries.iter().enumerate().skip(offset as usize) {
            if reply.add(INodeNo(e.ino), (i + 1) as u64, e.kind, &e.name) {
                break;
            }
        }
        reply.ok();
    }

    fn releasedir(&self, _req: &Request, _ino: INodeNo, fh: FileHandle, _flags: OpenFlags, reply: ReplyEmpty) {
        self.lock().dirs.remove(&fh.0);
        reply.ok();
    }

    fn fsyncdir(&self, _req: &Request, ino: INodeNo, _fh: FileHandle, _datasync: bool, reply: ReplyEmpty) {
        let r = self.lock().path(ino).and_then(|p| Ok(File::open(p)?.sync_all()?));
        answer!(reply, r, |_v| reply.ok());
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        let r = (|| {
            let p = cstr(&self.lock().path(INodeNo::ROOT)?)?;
            // SAFETY: statvfs fills the zeroed struct it is given.
            let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
            check(unsafe { libc::statvfs(p.as_ptr(), &mut st) })?;
            Ok::<_, Errno>(st)
        })();
        answer!(reply, r, |st| reply.statfs(
            st.f_blocks, st.f_bfree, st.f_bavail, st.f_files, st.f_ffree, st.f_bsize as u32, st.f_namemax as u32, st.f_frsize as u32
        ));
    }

    fn access(&self, _req: &Request, ino: INodeNo, mask: AccessFlags, reply: ReplyEmpty) {
        let r = self.lock().path(ino).and_then(|path| {
            let p = cstr(&path)?;
            // SAFETY: a NUL-terminated path.
            check(unsafe { libc::access(p.as_ptr(), mask.bits()) })
        });
        answer!(reply, r, |_v| reply.ok());
    }

    fn fallocate(&self, _req: &Request, ino: INodeNo, fh: FileHandle, offset: u64, length: u64, mode: i32, reply: ReplyEmpty) {
        let mut s = self.lock();
        let r = (|| {
            // Shifting ranges would move cached bytes too: nothing here needs it.
            if mode & (libc::FALLOC_FL_COLLAPSE_RANGE | libc::FALLOC_FL_INSERT_RANGE) != 0 {
                return Err(Errno::EOPNOTSUPP);
            }
            let h = s.files.get(&fh.0).ok_or(Errno::EBADF)?;
            use std::os::fd::AsRawFd;
            // SAFETY: the descriptor is open for as long as the handle is.
            check(unsafe { libc::fallocate(h.file.as_raw_fd(), mode, offset as libc::off_t, length as libc::off_t) })?;
            if mode & (libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_ZERO_RANGE) != 0
                && let Some(n) = s.nodes.get_mut(&ino.0)
            {
                n.cache.discard(offset, offset.saturating_add(length));
            }
            Ok(())
        })();
        answer!(reply, r, |_v| reply.ok());
    }
}

/// Drops the kernel's pages and attributes of `inos` (after a clear-cache). An inode the
/// kernel does not hold answers ENOENT, which is fine.
pub fn invalidate(notifier: &Notifier, inos: &[u64]) {
    for &ino in inos {
        if let Err(e) = notifier.inval_inode(INodeNo(ino), 0, 0)
            && e.raw_os_error() != Some(libc::ENOENT)
        {
            eprintln!("lazyfs: invalidating inode {ino}: {e}");
        }
    }
}
