//! Mirrors pkg/volume/util/atomic_writer.go: publishes a set of files (a configMap's, a secret's,
//! the downward API's) into a volume so that a container reading it never sees half an update.
//!
//! The layout, for a payload `{"config.yaml", "certs/ca.crt"}` written into `<target>`:
//!
//! ```text
//! <target>/..2024_05_01_10_00_00.123456789/config.yaml     the real files, one directory per version
//! <target>/..2024_05_01_10_00_00.123456789/certs/ca.crt
//! <target>/..data -> ..2024_05_01_10_00_00.123456789         the current version
//! <target>/config.yaml -> ..data/config.yaml                what the container opens
//! <target>/certs -> ..data/certs
//! ```
//!
//! An update writes a whole new timestamped directory, then swaps `..data` with one rename(2) of a
//! fresh symlink over it: rename is atomic, so every reader resolves either the old version or the
//! new one, never a mix. Only then are the old directory and user-visible links that left the
//! payload removed. Paths beginning with `..` are reserved for this machinery, which is why
//! [`validate_path`] rejects them in a payload.
//!
//! Everything here is blocking file I/O: async callers use `tokio::task::spawn_blocking`.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use tracing::debug;

use crate::error::{Error, Result};

/// The symlink naming the current version.
pub(crate) const DATA_DIR_NAME: &str = "..data";
/// The new `..data` link is built under this name, then renamed over the old one.
const NEW_DATA_DIR_NAME: &str = "..data_tmp";
/// Kubernetes' limits on a payload path and on each of its components.
const MAX_PATH_LENGTH: usize = 4096;
const MAX_FILE_NAME_LENGTH: usize = 255;
/// Directories inside a version directory are world-readable like the files' default mode.
const DIR_MODE: u32 = 0o755;

/// One file of a payload: its bytes and its permission bits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct FileProjection {
    pub(crate) data: Vec<u8>,
    pub(crate) mode: u32,
}

/// Relative path (as the user wrote it, validated by [`AtomicWriter::write`]) → file.
pub(crate) type Payload = BTreeMap<String, FileProjection>;

/// The mode of projected files when the volume gives no `defaultMode` (the API's default, 0644).
pub(crate) const DEFAULT_MODE: u32 = 0o644;

/// A `defaultMode`/`mode` field as permission bits, checked as the API does (0 to 0777).
pub(crate) fn file_mode(mode: Option<i32>, default: u32) -> Result<u32> {
    match mode {
        None => Ok(default),
        Some(m) => match u32::try_from(m) {
            Ok(m) if m <= 0o777 => Ok(m),
            _ => Err(Error::VolumeSpec(format!("mode {m}: must be a number between 0 and 0777 (octal), both inclusive"))),
        },
    }
}

/// Checks one payload path as Kubernetes does: non-empty, relative, no `..` component, not
/// starting with `..` (reserved for the writer's own entries), within the length limits.
pub(crate) fn validate_path(path: &str) -> Result<()> {
    if path.is_empty() {
        return Err(Error::VolumeSpec(format!("invalid path: must not be empty: {path:?}")));
    }
    if path.starts_with('/') {
        return Err(Error::VolumeSpec(format!("invalid path: must be relative path: {path}")));
    }
    if path.len() > MAX_PATH_LENGTH {
        return Err(Error::VolumeSpec(format!(
            "invalid path: must be less than or equal to {MAX_PATH_LENGTH} characters"
        )));
    }
    if path.contains('\0') {
        return Err(Error::VolumeSpec(format!("invalid path: must not contain a NUL byte: {path:?}")));
    }
    let items: Vec<&str> = path.split('/').collect();
    for item in &items {
        if *item == ".." {
            return Err(Error::VolumeSpec(format!("invalid path: must not contain '..': {path}")));
        }
        if item.len() > MAX_FILE_NAME_LENGTH {
            return Err(Error::VolumeSpec(format!(
                "invalid path: filenames must be less than or equal to {MAX_FILE_NAME_LENGTH} characters"
            )));
        }
    }
    if items[0].starts_with("..") && items[0].len() > 2 {
        return Err(Error::VolumeSpec(format!("invalid path: must not start with '..': {path}")));
    }
    Ok(())
}

/// `path.Clean` for a validated relative path: `./a//b/` → `a/b`.
fn clean_path(path: &str) -> String {
    path.split('/').filter(|c| !c.is_empty() && *c != ".").collect::<Vec<_>>().join("/")
}

/// Writes payloads into one target directory (a volume's directory on the host).
#[derive(Clone, Debug)]
pub(crate) struct AtomicWriter {
    target_dir: PathBuf,
}

impl AtomicWriter {
    pub(crate) fn new(target_dir: impl Into<PathBuf>) -> Self {
        AtomicWriter { target_dir: target_dir.into() }
    }

    /// Makes the target directory hold exactly `payload`. Returns whether a new version was
    /// written: when the payload equals what `..data` already points at (same paths, bytes and
    /// modes) nothing is rewritten, so mtimes stay and inotify watchers in containers stay quiet.
    pub(crate) fn write(&self, payload: &Payload) -> Result<bool> {
        // Step 1: validate and clean the payload's paths.
        let mut clean = BTreeMap::new();
        for (path, file) in payload {
            validate_path(path)?;
            let cleaned = clean_path(path);
            if cleaned.is_empty() {
                return Err(Error::VolumeSpec(format!("invalid path: must not be empty: {path:?}")));
            }
            clean.insert(cleaned, file);
        }
        let target = &self.target_dir;
        std::fs::create_dir_all(target).map_err(|e| Error::io(target, e))?;

        // Step 2: the version `..data` points at now, if any.
        let data_link = target.join(DATA_DIR_NAME);
        let old_version = match std::fs::read_link(&data_link) {
            Ok(v) => Some(v),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => return Err(Error::io(&data_link, e)),
        };

        // Step 3: is there anything to do?
        if let Some(old) = &old_version
            && version_matches(&target.join(old), &clean)?
        {
            debug!(target: "kubelet::volumes", dir = %target.display(), "no update required for target directory");
            // A crash between the swap and the links leaves links missing: repair them.
            self.link_user_visible(&clean)?;
            self.remove_stale(old)?;
            return Ok(false);
        }

        // Step 4: a new version directory with the whole payload.
        let (version_name, version_dir) = self.new_version_dir()?;
        for (path, file) in &clean {
            let file_path = version_dir.join(path);
            if let Some(parent) = file_path.parent() {
                create_dirs(&version_dir, parent)?;
            }
            std::fs::write(&file_path, &file.data).map_err(|e| Error::io(&file_path, e))?;
            // Set the mode explicitly: the process umask applied at creation.
            std::fs::set_permissions(&file_path, std::fs::Permissions::from_mode(file.mode))
                .map_err(|e| Error::io(&file_path, e))?;
        }

        // Step 5: swap `..data` atomically (symlink under a temporary name, rename over).
        let tmp_link = target.join(NEW_DATA_DIR_NAME);
        remove_if_exists(&tmp_link)?;
        symlink(&version_name, &tmp_link).map_err(|e| Error::io(&tmp_link, e))?;
        std::fs::rename(&tmp_link, &data_link).map_err(|e| Error::io(&data_link, e))?;

        // Step 6: user-visible links for new top-level names, then drop the ones that left.
        self.link_user_visible(&clean)?;
        // Step 7: remove the old version directory (and any left by an interrupted write).
        self.remove_stale(Path::new(&version_name))?;
        debug!(target: "kubelet::volumes", dir = %target.display(), version = %version_name, files = clean.len(), "wrote new payload version");
        Ok(true)
    }

    /// Creates `..<UTC timestamp>.<unique>` with mode 0755.
    fn new_version_dir(&self) -> Result<(String, PathBuf)> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let stamp = chrono::Utc::now().format("%Y_%m_%d_%H_%M_%S");
        loop {
            let unique = u64::from(chrono::Utc::now().timestamp_subsec_nanos())
                .wrapping_mul(1000)
                .wrapping_add(COUNTER.fetch_add(1, Ordering::Relaxed) % 1000);
            let name = format!("..{stamp}.{unique}");
            let dir = self.target_dir.join(&name);
            match std::fs::create_dir(&dir) {
                Ok(()) => {
                    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(DIR_MODE))
                        .map_err(|e| Error::io(&dir, e))?;
                    return Ok((name, dir));
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(Error::io(&dir, e)),
            }
        }
    }

    /// Makes `<target>/<top>` a symlink to `..data/<top>` for every top-level name in the payload,
    /// and removes every other such link (names that left the payload).
    fn link_user_visible(&self, payload: &BTreeMap<String, &FileProjection>) -> Result<()> {
        let tops: BTreeSet<&str> = payload.keys().filter_map(|p| p.split('/').next()).collect();
        for top in &tops {
            let link = self.target_dir.join(top);
            let want = Path::new(DATA_DIR_NAME).join(top);
            match std::fs::read_link(&link) {
                Ok(existing) if existing == want => continue,
                Ok(_) => remove_if_exists(&link)?,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                // Exists but is not a symlink: something else put it there; replace it.
                Err(e) if e.kind() == io::ErrorKind::InvalidInput => remove_any(&link)?,
                Err(e) => return Err(Error::io(&link, e)),
            }
            symlink(&want, &link).map_err(|e| Error::io(&link, e))?;
        }
        for entry in read_dir(&self.target_dir)? {
            let name = entry.to_string_lossy();
            if name.starts_with("..") || tops.contains(name.as_ref()) {
                continue;
            }
            let link = self.target_dir.join(&entry);
            if let Ok(dest) = std::fs::read_link(&link)
                && dest.starts_with(DATA_DIR_NAME)
            {
                remove_if_exists(&link)?;
            }
        }
        Ok(())
    }

    /// Removes every `..`-prefixed entry except `..data` and the version it points at.
    fn remove_stale(&self, current: &Path) -> Result<()> {
        for entry in read_dir(&self.target_dir)? {
            let name = entry.to_string_lossy();
            if !name.starts_with("..") || name == DATA_DIR_NAME || Path::new(&entry) == current {
                continue;
            }
            remove_any(&self.target_dir.join(&entry))?;
        }
        Ok(())
    }
}

/// Whether `version_dir` holds exactly the payload: the same set of files with the same bytes and
/// permission bits. (Kubernetes compares bytes only; comparing modes too means a changed
/// `defaultMode` reaches the files.)
fn version_matches(version_dir: &Path, payload: &BTreeMap<String, &FileProjection>) -> Result<bool> {
    let mut on_disk = Vec::new();
    match collect_files(version_dir, version_dir, &mut on_disk) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(Error::io(version_dir, e)),
    }
    if on_disk.len() != payload.len() || on_disk.iter().any(|p| !payload.contains_key(p)) {
        return Ok(false);
    }
    for (path, file) in payload {
        let on_disk_path = version_dir.join(path);
        let meta = std::fs::symlink_metadata(&on_disk_path).map_err(|e| Error::io(&on_disk_path, e))?;
        if meta.permissions().mode() & 0o7777 != file.mode {
            return Ok(false);
        }
        let data = std::fs::read(&on_disk_path).map_err(|e| Error::io(&on_disk_path, e))?;
        if data != file.data {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Relative paths of every non-directory below `dir`.
fn collect_files(root: &Path, dir: &Path, out: &mut Vec<String>) -> io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        if entry.file_type()?.is_dir() {
            collect_files(root, &path, out)?;
        } else if let Ok(rel) = path.strip_prefix(root) {
            out.push(rel.to_string_lossy().into_owned());
        }
    }
    Ok(())
}

/// Creates `dir` and any missing parents below `root`, each with [`DIR_MODE`].
fn create_dirs(root: &Path, dir: &Path) -> Result<()> {
    if dir == root || dir.is_dir() {
        return Ok(());
    }
    if let Some(parent) = dir.parent() {
        create_dirs(root, parent)?;
    }
    std::fs::create_dir(dir).map_err(|e| Error::io(dir, e))?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(DIR_MODE)).map_err(|e| Error::io(dir, e))
}

fn read_dir(dir: &Path) -> Result<Vec<std::ffi::OsString>> {
    let mut names = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
        names.push(entry.map_err(|e| Error::io(dir, e))?.file_name());
    }
    Ok(names)
}

fn remove_if_exists(path: &Path) -> Result<()> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::io(path, e)),
    }
}

/// Removes a file, a symlink (never its target) or a whole directory tree.
fn remove_any(path: &Path) -> Result<()> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(Error::io(path, e)),
    };
    let result = if meta.is_dir() { std::fs::remove_dir_all(path) } else { std::fs::remove_file(path) };
    result.map_err(|e| Error::io(path, e))
}

#[cfg(test)]
mod tests {
    use std::time::SystemTime;

    use super::*;

    fn file(data: &str, mode: u32) -> FileProjection {
        FileProjection { data: data.as_bytes().to_vec(), mode }
    }

    fn payload(files: &[(&str, &str)]) -> Payload {
        files.iter().map(|(p, d)| (p.to_string(), file(d, 0o644))).collect()
    }

    fn versions(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = read_dir(dir)
            .expect("read dir")
            .into_iter()
            .map(|n| n.to_string_lossy().into_owned())
            .filter(|n| n.starts_with("..") && n != DATA_DIR_NAME)
            .collect();
        v.sort();
        v
    }

    fn mtime(path: &Path) -> SystemTime {
        std::fs::metadata(path).and_then(|m| m.modified()).expect("mtime")
    }

    #[test]
    fn file_mode_table() {
        assert_eq!(file_mode(None, DEFAULT_MODE).ok(), Some(0o644));
        assert_eq!(file_mode(Some(0o400), DEFAULT_MODE).ok(), Some(0o400));
        assert_eq!(file_mode(Some(0o777), DEFAULT_MODE).ok(), Some(0o777));
        assert!(file_mode(Some(0o1000), DEFAULT_MODE).is_err());
        assert!(file_mode(Some(-1), DEFAULT_MODE).is_err());
    }

    #[test]
    fn validate_path_table() {
        let cases: &[(&str, bool)] = &[
            ("config.yaml", true),
            ("a/b/c", true),
            ("..", false),
            ("..data", false),
            ("..2024", false),
            ("a/../b", false),
            ("../a", false),
            ("/etc/passwd", false),
            ("", false),
            ("a/..b", true),
            ("...", false),
        ];
        for (path, ok) in cases {
            assert_eq!(validate_path(path).is_ok(), *ok, "{path:?}");
        }
        assert!(validate_path(&"a".repeat(256)).is_err());
        assert!(validate_path(&format!("{}/b", "a".repeat(255))).is_ok());
        assert!(validate_path(&"a/".repeat(2100)).is_err());
    }

    #[test]
    fn create_layout() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        let w = AtomicWriter::new(dir.path());
        let mut p = payload(&[("config.yaml", "a: 1"), ("certs/ca.crt", "CERT")]);
        p.insert("secret".into(), file("s", 0o400));
        assert!(w.write(&p)?);

        let data = std::fs::read_link(dir.path().join(DATA_DIR_NAME)).map_err(|e| Error::io("..data", e))?;
        assert!(data.to_string_lossy().starts_with(".."));
        assert_eq!(versions(dir.path()), vec![data.to_string_lossy().into_owned()]);
        for top in ["config.yaml", "certs", "secret"] {
            let link = std::fs::read_link(dir.path().join(top)).map_err(|e| Error::io(top, e))?;
            assert_eq!(link, Path::new(DATA_DIR_NAME).join(top));
        }
        let read = |p: &str| std::fs::read_to_string(dir.path().join(p)).map_err(|e| Error::io(p, e));
        assert_eq!(read("config.yaml")?, "a: 1");
        assert_eq!(read("certs/ca.crt")?, "CERT");
        let mode =
            std::fs::metadata(dir.path().join("secret")).map_err(|e| Error::io("secret", e))?.permissions().mode();
        assert_eq!(mode & 0o777, 0o400);
        Ok(())
    }

    #[test]
    fn unchanged_payload_is_not_rewritten() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        let w = AtomicWriter::new(dir.path());
        let p = payload(&[("a", "1"), ("d/b", "2")]);
        assert!(w.write(&p)?);
        let before_versions = versions(dir.path());
        // An mtime far in the past: a rewrite, which would set it to now, cannot go unseen
        // however coarse the filesystem's clock is.
        let before = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000);
        let a = dir.path().join("a");
        std::fs::File::open(&a).and_then(|f| f.set_modified(before)).map_err(|e| Error::io(&a, e))?;
        assert!(!w.write(&p)?, "same payload: nothing written");
        assert_eq!(versions(dir.path()), before_versions);
        assert_eq!(mtime(&a), before);

        // A mode change alone is a change.
        let mut p2 = p.clone();
        p2.insert("a".into(), file("1", 0o600));
        assert!(w.write(&p2)?);
        assert_ne!(versions(dir.path()), before_versions);
        Ok(())
    }

    #[test]
    fn update_swaps_version_and_removes_old() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        let w = AtomicWriter::new(dir.path());
        assert!(w.write(&payload(&[("a", "1")]))?);
        let first = versions(dir.path());
        assert!(w.write(&payload(&[("a", "2")]))?);
        let second = versions(dir.path());
        assert_eq!(second.len(), 1, "old version removed: {second:?}");
        assert_ne!(first, second);
        let a = std::fs::read_to_string(dir.path().join("a")).map_err(|e| Error::io("a", e))?;
        assert_eq!(a, "2");
        Ok(())
    }

    #[test]
    fn removed_keys_disappear() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        let w = AtomicWriter::new(dir.path());
        assert!(w.write(&payload(&[("a", "1"), ("b", "2"), ("d/c", "3")]))?);
        assert!(w.write(&payload(&[("a", "1")]))?);
        assert!(dir.path().join("a").exists());
        for gone in ["b", "d"] {
            assert!(std::fs::symlink_metadata(dir.path().join(gone)).is_err(), "{gone} still there");
        }
        // And an empty payload (an optional configMap that is missing) empties the volume.
        assert!(w.write(&Payload::new())?);
        assert!(std::fs::symlink_metadata(dir.path().join("a")).is_err());
        assert!(dir.path().join(DATA_DIR_NAME).exists());
        Ok(())
    }

    #[test]
    fn stale_versions_and_missing_links_are_repaired() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        let w = AtomicWriter::new(dir.path());
        let p = payload(&[("a", "1")]);
        assert!(w.write(&p)?);
        // What an interrupted write leaves behind: an orphan version, a temp link, a lost link.
        let orphan = dir.path().join("..2001_01_01_00_00_00.1");
        std::fs::create_dir(&orphan).map_err(|e| Error::io(&orphan, e))?;
        symlink("..2001_01_01_00_00_00.1", dir.path().join(NEW_DATA_DIR_NAME)).map_err(|e| Error::io("tmp", e))?;
        std::fs::remove_file(dir.path().join("a")).map_err(|e| Error::io("a", e))?;
        assert!(!w.write(&p)?);
        assert_eq!(versions(dir.path()).len(), 1);
        assert!(dir.path().join("a").exists());
        Ok(())
    }

    #[test]
    fn invalid_path_rejected_before_writing() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        let w = AtomicWriter::new(dir.path());
        let err = w.write(&payload(&[("ok", "1"), ("../escape", "x")])).expect_err("must fail");
        assert!(err.to_string().contains("must not contain '..'"), "{err}");
        assert!(read_dir(dir.path())?.is_empty());
        Ok(())
    }
}
