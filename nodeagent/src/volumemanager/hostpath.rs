//! Mirrors pkg/volume/hostpath/host_path.go: a path of the node itself, checked against the
//! volume's `type` before the container starts.
//!
//! | type | check |
//! | --- | --- |
//! | `""` | none (backwards compatible: anything, even nothing) |
//! | `DirectoryOrCreate` | created (0755, with parents) if missing, then must be a directory |
//! | `Directory` | must be a directory |
//! | `FileOrCreate` | created empty (0644) if missing — its parent must exist — then must be a regular file |
//! | `File` | must be a regular file |
//! | `Socket`, `CharDevice`, `BlockDevice` | must be one |
//!
//! Symlinks are followed, as Kubernetes' `os.Stat` does. A failed check is [`Error::NotReady`]: the
//! path may appear later (a daemon creating its socket), and kubelet keeps retrying too.
//! Blocking: async callers use `spawn_blocking`.

use std::io;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, OpenOptionsExt};
use std::path::Path;

use crate::error::{Error, Result};

/// Runs the `type` check on `path`, creating it for the `…OrCreate` types.
pub(crate) fn check_type(path: &Path, path_type: &str) -> Result<()> {
    let failed = |what: &str| Error::NotReady(format!("hostPath type check failed: {} is not {what}", path.display()));
    let stat = || std::fs::metadata(path).ok();
    match path_type {
        "" => Ok(()),
        "DirectoryOrCreate" | "Directory" => {
            if path_type == "DirectoryOrCreate" && !exists(path)? {
                return std::fs::DirBuilder::new()
                    .recursive(true)
                    .mode(0o755)
                    .create(path)
                    .map_err(|e| Error::io(path, e));
            }
            match stat() {
                Some(m) if m.is_dir() => Ok(()),
                _ => Err(failed("a directory")),
            }
        }
        "FileOrCreate" | "File" => {
            if path_type == "FileOrCreate" && !exists(path)? {
                return std::fs::OpenOptions::new()
                    .write(true)
                    .create(true)
                    .truncate(false)
                    .mode(0o644)
                    .open(path)
                    .map(drop)
                    .map_err(|e| Error::io(path, e));
            }
            match stat() {
                Some(m) if m.is_file() => Ok(()),
                _ => Err(failed("a file")),
            }
        }
        "Socket" => match stat() {
            Some(m) if m.file_type().is_socket() => Ok(()),
            _ => Err(failed("a socket file")),
        },
        "CharDevice" => match stat() {
            Some(m) if m.file_type().is_char_device() => Ok(()),
            _ => Err(failed("a character device")),
        },
        "BlockDevice" => match stat() {
            Some(m) if m.file_type().is_block_device() => Ok(()),
            _ => Err(failed("a block device")),
        },
        other => Err(Error::VolumeSpec(format!("{other} is an invalid volume type"))),
    }
}

/// Whether `path` exists (following symlinks); an error other than "not there" is reported.
fn exists(path: &Path) -> Result<bool> {
    match std::fs::metadata(path) {
        Ok(_) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(Error::io(path, e)),
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::net::UnixListener;

    use super::*;

    #[test]
    fn type_checks_table() -> Result<()> {
        let root = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        let dir = root.path().join("dir");
        let file = root.path().join("file");
        let sock = root.path().join("sock");
        let missing = root.path().join("missing");
        std::fs::create_dir(&dir).map_err(|e| Error::io(&dir, e))?;
        std::fs::write(&file, "x").map_err(|e| Error::io(&file, e))?;
        let _listener = UnixListener::bind(&sock).map_err(|e| Error::io(&sock, e))?;
        let null = Path::new("/dev/null");

        let cases: &[(&Path, &str, Option<&str>)] = &[
            (&missing, "", None),
            (&dir, "Directory", None),
            (&file, "Directory", Some("is not a directory")),
            (&missing, "Directory", Some("is not a directory")),
            (&file, "File", None),
            (&dir, "File", Some("is not a file")),
            (&missing, "File", Some("is not a file")),
            (&sock, "Socket", None),
            (&file, "Socket", Some("is not a socket file")),
            (null, "CharDevice", None),
            (&file, "CharDevice", Some("is not a character device")),
            (null, "BlockDevice", Some("is not a block device")),
            (&dir, "FileOrCreate", Some("is not a file")),
            (&file, "DirectoryOrCreate", Some("is not a directory")),
            (&dir, "Bogus", Some("Bogus is an invalid volume type")),
        ];
        for (path, ty, want_err) in cases {
            let got = check_type(path, ty);
            match (want_err, got) {
                (None, Ok(())) => {}
                (Some(want), Err(e)) => assert!(e.to_string().contains(want), "{ty} {}: {e}", path.display()),
                (want, got) => panic!("{ty} {}: want {want:?}, got {got:?}", path.display()),
            }
        }
        let err = check_type(&file, "Directory").expect_err("file is not a dir");
        assert_eq!(err.to_string(), format!("hostPath type check failed: {} is not a directory", file.display()));
        Ok(())
    }

    #[test]
    fn or_create_types_create() -> Result<()> {
        let root = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        let dir = root.path().join("a/b/c");
        check_type(&dir, "DirectoryOrCreate")?;
        let meta = std::fs::metadata(&dir).map_err(|e| Error::io(&dir, e))?;
        assert!(meta.is_dir());
        // 0755 less the umask: never more than 0755.
        assert_eq!(meta.permissions().mode() & 0o7777 & !0o755, 0);

        let file = root.path().join("f.lock");
        check_type(&file, "FileOrCreate")?;
        assert!(std::fs::metadata(&file).map_err(|e| Error::io(&file, e))?.is_file());
        check_type(&file, "FileOrCreate")?; // exists now: only checked

        let orphan = root.path().join("no/parent/f");
        assert!(check_type(&orphan, "FileOrCreate").is_err(), "parent must exist");
        Ok(())
    }
}
