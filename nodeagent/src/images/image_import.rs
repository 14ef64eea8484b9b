//! Mirrors nothing in kubelet exactly: it stands in for a container registry, which kubelab's
//! machines cannot reach. Kubelet pulls through CRI's `PullImage`; here images are OCI
//! image-layout tarballs in a directory (`--image-dir`), and this importer loads each one into
//! containerd's `k8s.io` namespace with `ctr images import`, the way an operator would
//! side-load images onto an air-gapped node.
//!
//! One pass ([`ImageImporter::import_new`]):
//! 1. List `*.tar` in the directory with each file's [`FileStamp`] (size, mtime).
//! 2. Decide ([`to_import`], a pure function): a tarball is imported when its stamp is new or
//!    differs from the one remembered; a file that disappeared is forgotten, so it is imported
//!    again if it comes back.
//! 3. Check containerd answers on its socket; if not, stop here and remember nothing, so every
//!    tarball is tried again on the next pass.
//! 4. Run `ctr -a <socket> -n k8s.io images import <tar>` for each, one at a time, and read the
//!    image names from its output ([`parse_imported`]).
//! 5. Remember the stamp whether the import worked or not: a broken tarball is reported once
//!    (with ctr's stderr) and tried again only when the file changes, not every pass.
//!
//! Why shell out to `ctr` rather than speak containerd's content and images API: that API is not
//! part of CRI (kubelab's proto crate does not carry it), and `ctr` is what the containerd package
//! ships for exactly this job.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, SystemTime};

use tokio::sync::watch;

use super::{CRI_NAMESPACE, DEFAULT_CTR, IMPORT_TIMEOUT};
use crate::error::{Error, Result};

/// What tells one version of a tarball from the next: when either changes, the file is imported
/// again. (Writers should build the file elsewhere and rename it into place, as
/// `deploy/images/build.sh` does; a half-written file fails to import and is retried once it
/// stops changing.)
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FileStamp {
    pub(crate) size: u64,
    pub(crate) mtime: SystemTime,
}

/// Loads the image tarballs of one directory into containerd's CRI namespace, each once per
/// version of the file. Owned by one task ([`ImageImporter::run`]); holds no locks.
#[derive(Debug)]
pub struct ImageImporter {
    image_dir: PathBuf,
    /// containerd's gRPC socket (the `unix://` prefix stripped).
    socket: PathBuf,
    ctr: PathBuf,
    /// Every tarball tried so far (imported or failed), with the stamp it had then.
    seen: BTreeMap<PathBuf, FileStamp>,
}

impl ImageImporter {
    /// An importer for the `*.tar` files in `image_dir`, talking to the containerd at
    /// `runtime_endpoint` (`unix:///run/containerd/containerd.sock` or a bare socket path).
    pub fn new(image_dir: impl Into<PathBuf>, runtime_endpoint: &str) -> ImageImporter {
        ImageImporter {
            image_dir: image_dir.into(),
            socket: socket_path(runtime_endpoint),
            ctr: PathBuf::from(DEFAULT_CTR),
            seen: BTreeMap::new(),
        }
    }

    /// Use another `ctr` binary (tests; a containerd installed elsewhere).
    pub fn with_ctr(mut self, ctr: impl Into<PathBuf>) -> ImageImporter {
        self.ctr = ctr.into();
        self
    }

    pub fn image_dir(&self) -> &Path {
        &self.image_dir
    }

    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// One pass over the directory (steps 1–5 of the module docs). Returns the names of the
    /// images imported by this pass, in file-name order. Errors only when the pass could not run
    /// at all — the directory is unreadable, `ctr` cannot be started, containerd does not
    /// answer — and then nothing is remembered, so the next pass tries again; a tarball that
    /// `ctr` rejects is logged, not returned.
    pub async fn import_new(&mut self) -> Result<Vec<String>> {
        // Step 1: list the directory (blocking file-system calls, off the executor).
        let dir = self.image_dir.clone();
        let listing = tokio::task::spawn_blocking(move || scan(&dir))
            .await?
            .map_err(|e| Error::io(&self.image_dir, e))?;

        // Step 2: decide.
        forget_removed(&mut self.seen, &listing);
        let todo = to_import(&self.seen, &listing);
        if todo.is_empty() {
            return Ok(Vec::new());
        }

        // Step 3: is containerd there? Otherwise every tarball would be marked failed while the
        // runtime is merely starting.
        if let Err(e) = tokio::net::UnixStream::connect(&self.socket).await {
            return Err(Error::NotReady(format!(
                "containerd at {} does not answer ({e}); {} image tarball(s) wait",
                self.socket.display(),
                todo.len()
            )));
        }

        // Steps 4 and 5.
        let mut names = Vec::new();
        for (path, stamp) in todo {
            match self.import_one(&path).await? {
                Imported::Names(mut n) => names.append(&mut n),
                Imported::Failed => {}
                // Not remembered: containerd stalled, which says nothing about the file.
                Imported::TimedOut => continue,
            }
            self.seen.insert(path, stamp);
        }
        Ok(names)
    }

    /// `ctr images import` of one tarball. `Err` only when ctr could not be started.
    async fn import_one(&self, tar: &Path) -> Result<Imported> {
        let started = std::time::Instant::now();
        let mut cmd = tokio::process::Command::new(&self.ctr);
        cmd.arg("-a")
            .arg(&self.socket)
            .args(["-n", CRI_NAMESPACE, "images", "import"])
            .arg(tar)
            .stdin(Stdio::null())
            .kill_on_drop(true);
        // If the agent itself dies (kill -9, or `kubelab up` aborting), ctr must not linger,
        // blocked on a containerd that went away with it.
        // SAFETY: prctl in the child between fork and exec; async-signal-safe, no allocation.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let output = match tokio::time::timeout(IMPORT_TIMEOUT, cmd.output()).await {
            Ok(out) => out.map_err(|e| Error::io(&self.ctr, e))?,
            Err(_) => {
                tracing::warn!(target: "kubelet::images", tar = %tar.display(), timeout = ?IMPORT_TIMEOUT,
                    "ctr images import timed out; will retry");
                return Ok(Imported::TimedOut);
            }
        };
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        let ms = started.elapsed().as_secs_f64() * 1e3;
        if !output.status.success() {
            tracing::warn!(target: "kubelet::images", tar = %tar.display(), status = %output.status,
                stderr = %stderr.trim(), "image import failed; retried when the file changes");
            return Ok(Imported::Failed);
        }
        let names = parse_imported(&stdout);
        if names.is_empty() {
            // ctr exits 0 without importing anything when index.json has no
            // io.containerd.image.name annotation: loud, or pods wait for an image that never comes.
            tracing::warn!(target: "kubelet::images", tar = %tar.display(), stdout = %stdout.trim(),
                stderr = %stderr.trim(),
                "ctr images import succeeded but imported NO image: does index.json annotate its manifest \
                 with io.containerd.image.name = <fully qualified name>?");
            return Ok(Imported::Failed);
        }
        for name in &names {
            tracing::info!(target: "kubelet::images", image = %name, tar = %tar.display(), ms, "image imported");
        }
        Ok(Imported::Names(names))
    }

    /// Imports whatever is new every `period` until `shutdown` turns true (or its sender is
    /// dropped). The first pass runs at once.
    pub async fn run(mut self, period: Duration, mut shutdown: watch::Receiver<bool>) {
        let mut tick = tokio::time::interval(period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // The same failure every pass (containerd down for a while) is logged once, not every 2 s.
        let mut last_error: Option<String> = None;
        loop {
            tokio::select! {
                biased;
                changed = shutdown.changed() => {
                    if changed.is_err() || *shutdown.borrow() {
                        break;
                    }
                    continue;
                }
                _ = tick.tick() => {}
            }
            if *shutdown.borrow() {
                break;
            }
            match self.import_new().await {
                Ok(_) => last_error = None,
                Err(e) => {
                    let msg = e.to_string();
                    if last_error.as_deref() != Some(msg.as_str()) {
                        tracing::warn!(target: "kubelet::images", dir = %self.image_dir.display(), error = %msg,
                            "image import pass failed; retrying every period");
                        last_error = Some(msg);
                    }
                }
            }
        }
        tracing::debug!(target: "kubelet::images", dir = %self.image_dir.display(), "image importer stopped");
    }
}

/// How one `ctr images import` ended.
#[derive(Debug)]
enum Imported {
    Names(Vec<String>),
    /// ctr rejected the file, or imported nothing: remembered, retried when the file changes.
    Failed,
    /// containerd did not answer in time: not remembered, retried next pass.
    TimedOut,
}

/// `unix:///run/x.sock` or `/run/x.sock` → `/run/x.sock`.
fn socket_path(endpoint: &str) -> PathBuf {
    PathBuf::from(endpoint.strip_prefix("unix://").unwrap_or(endpoint))
}

/// The `*.tar` regular files (symlinks followed) directly in `dir`, sorted by path. Blocking.
pub(crate) fn scan(dir: &Path) -> std::io::Result<Vec<(PathBuf, FileStamp)>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.extension().is_none_or(|e| e != "tar") {
            continue;
        }
        // A file removed between read_dir and stat is simply not there this pass.
        let Ok(meta) = std::fs::metadata(&path) else { continue };
        if !meta.is_file() {
            continue;
        }
        out.push((path, FileStamp { size: meta.len(), mtime: meta.modified()? }));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// The tarballs of `listing` to import: those never seen, or seen with another stamp.
pub(crate) fn to_import(seen: &BTreeMap<PathBuf, FileStamp>, listing: &[(PathBuf, FileStamp)]) -> Vec<(PathBuf, FileStamp)> {
    listing.iter().filter(|(path, stamp)| seen.get(path) != Some(stamp)).cloned().collect()
}

/// Forget tarballs no longer in the directory, so one that comes back is imported again.
fn forget_removed(seen: &mut BTreeMap<PathBuf, FileStamp>, listing: &[(PathBuf, FileStamp)]) {
    seen.retain(|path, _| listing.iter().any(|(p, _)| p == path));
}

/// The image names in the output of `ctr images import`, which prints one line per image it
/// unpacks: `unpacking docker.io/library/busybox:1.36 (sha256:…)...done`.
pub fn parse_imported(stdout: &str) -> Vec<String> {
    stdout
        .lines()
        .filter_map(|line| line.trim().strip_prefix("unpacking "))
        .filter_map(|rest| rest.split_whitespace().next())
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn stamp(size: u64, secs: u64) -> FileStamp {
        FileStamp { size, mtime: SystemTime::UNIX_EPOCH + Duration::from_secs(secs) }
    }

    #[test]
    fn parse_imported_reads_unpacking_lines() {
        let cases: &[(&str, &[&str])] = &[
            (
                "unpacking docker.io/library/busybox:1.36 (sha256:d0e9dcd86bf9f06bff3741460cc8e25c23d2b50b5d7603ba27d4eea9f8f03615)...done\n",
                &["docker.io/library/busybox:1.36"],
            ),
            (
                "unpacking registry.k8s.io/pause:3.9 (sha256:8c82)...done\nunpacking localhost/kubelab:dev (sha256:01)...done\n",
                &["registry.k8s.io/pause:3.9", "localhost/kubelab:dev"],
            ),
            // CRLF and indentation do not matter.
            ("  unpacking localhost:5000/a/b:1 (sha256:ab)...done\r\n", &["localhost:5000/a/b:1"]),
            // The missing-annotation case: ctr prints nothing at all.
            ("", &[]),
            ("ctr: some warning\nunpacking\n", &[]),
        ];
        for (out, want) in cases {
            assert_eq!(parse_imported(out), *want, "output {out:?}");
        }
    }

    #[test]
    fn to_import_picks_new_and_changed_files() {
        let a = PathBuf::from("/img/a.tar");
        let b = PathBuf::from("/img/b.tar");
        let c = PathBuf::from("/img/c.tar");
        let mut seen = BTreeMap::new();
        seen.insert(a.clone(), stamp(10, 100));
        seen.insert(b.clone(), stamp(20, 100));
        type Listing = Vec<(PathBuf, FileStamp)>;
        let cases: &[(&str, Listing, Vec<&PathBuf>)] = &[
            ("nothing changed", vec![(a.clone(), stamp(10, 100)), (b.clone(), stamp(20, 100))], vec![]),
            ("new file", vec![(a.clone(), stamp(10, 100)), (c.clone(), stamp(1, 1))], vec![&c]),
            ("size changed", vec![(a.clone(), stamp(11, 100))], vec![&a]),
            ("mtime changed", vec![(b.clone(), stamp(20, 101))], vec![&b]),
            ("empty directory", vec![], vec![]),
        ];
        for (name, listing, want) in cases {
            let got: Vec<PathBuf> = to_import(&seen, listing).into_iter().map(|(p, _)| p).collect();
            let want: Vec<PathBuf> = want.iter().map(|p| (*p).clone()).collect();
            assert_eq!(got, want, "{name}");
        }
    }

    #[test]
    fn removed_files_are_forgotten() {
        let mut seen = BTreeMap::new();
        seen.insert(PathBuf::from("/img/a.tar"), stamp(1, 1));
        seen.insert(PathBuf::from("/img/b.tar"), stamp(1, 1));
        forget_removed(&mut seen, &[(PathBuf::from("/img/b.tar"), stamp(1, 1))]);
        assert_eq!(seen.keys().collect::<Vec<_>>(), vec![Path::new("/img/b.tar")]);
    }

    #[test]
    fn socket_accepts_unix_url_or_path() {
        assert_eq!(socket_path("unix:///run/c/containerd.sock"), Path::new("/run/c/containerd.sock"));
        assert_eq!(socket_path("/run/c/containerd.sock"), Path::new("/run/c/containerd.sock"));
    }

    #[test]
    fn scan_lists_tar_files_only_sorted() -> std::io::Result<()> {
        let dir = tempfile::tempdir()?;
        std::fs::write(dir.path().join("b.tar"), b"bb")?;
        std::fs::write(dir.path().join("a.tar"), b"a")?;
        std::fs::write(dir.path().join("notes.txt"), b"x")?;
        std::fs::write(dir.path().join("a.tar.tmp"), b"x")?;
        std::fs::create_dir(dir.path().join("dir.tar"))?;
        let got: Vec<(String, u64)> = scan(dir.path())?
            .into_iter()
            .map(|(p, s)| (p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(), s.size))
            .collect();
        assert_eq!(got, vec![("a.tar".to_string(), 1), ("b.tar".to_string(), 2)]);
        Ok(())
    }

    /// A fake `ctr` (a shell script, not containerd): it logs each call and answers by the
    /// tarball's content — `ok <name>` imports `<name>`, `empty` exits 0 importing nothing, anything
    /// else fails with a message on stderr.
    fn fake_ctr(dir: &Path) -> std::io::Result<PathBuf> {
        let path = dir.join("fake-ctr");
        let log = dir.join("calls.log");
        let script = format!(
            "#!/bin/sh\n\
             for last; do :; done\n\
             echo \"$last\" >> '{log}'\n\
             set -- $(cat \"$last\")\n\
             case \"$1\" in\n\
             ok) echo \"unpacking $2 (sha256:0123)...done\";;\n\
             empty) ;;\n\
             *) echo 'ctr: unrecognized image format' >&2; exit 1;;\n\
             esac\n",
            log = log.display()
        );
        std::fs::write(&path, script)?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
        Ok(path)
    }

    fn calls(dir: &Path) -> Vec<String> {
        let text = std::fs::read_to_string(dir.join("calls.log")).unwrap_or_default();
        text.lines().filter_map(|l| Path::new(l).file_name().map(|n| n.to_string_lossy().into_owned())).collect()
    }

    #[tokio::test]
    async fn imports_each_version_once_and_retries_failures_only_when_changed() -> Result<(), Box<dyn std::error::Error>> {
        let tmp = tempfile::tempdir()?;
        let images = tmp.path().join("images");
        std::fs::create_dir(&images)?;
        let sock = tmp.path().join("containerd.sock");
        let ctr = fake_ctr(tmp.path())?;
        let mut importer = ImageImporter::new(&images, &format!("unix://{}", sock.display())).with_ctr(&ctr);

        std::fs::write(images.join("a.tar"), "ok docker.io/library/a:1")?;
        std::fs::write(images.join("bad.tar"), "garbage")?;
        std::fs::write(images.join("noname.tar"), "empty")?;

        // containerd not listening: an error, and nothing is remembered.
        let err = importer.import_new().await.err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err.contains("does not answer"), "{err}");
        assert!(calls(tmp.path()).is_empty());

        let _listener = tokio::net::UnixListener::bind(&sock)?;
        assert_eq!(importer.import_new().await?, vec!["docker.io/library/a:1".to_string()]);
        assert_eq!(calls(tmp.path()), vec!["a.tar", "bad.tar", "noname.tar"]);

        // Nothing changed: no ctr runs at all, the failed ones included.
        assert!(importer.import_new().await?.is_empty());
        assert_eq!(calls(tmp.path()).len(), 3);

        // The broken tarball is fixed (new size): imported; a.tar rewritten: imported again.
        std::fs::write(images.join("bad.tar"), "ok docker.io/library/fixed:2")?;
        std::fs::write(images.join("a.tar"), "ok docker.io/library/a:1.1")?;
        assert_eq!(
            importer.import_new().await?,
            vec!["docker.io/library/a:1.1".to_string(), "docker.io/library/fixed:2".to_string()]
        );
        assert_eq!(calls(tmp.path())[3..], ["a.tar", "bad.tar"]);

        // Removed and put back: imported again.
        let content = std::fs::read(images.join("a.tar"))?;
        std::fs::remove_file(images.join("a.tar"))?;
        assert!(importer.import_new().await?.is_empty());
        std::fs::write(images.join("a.tar"), content)?;
        assert_eq!(importer.import_new().await?, vec!["docker.io/library/a:1.1".to_string()]);
        assert_eq!(calls(tmp.path()).len(), 6);
        Ok(())
    }

    #[tokio::test]
    async fn run_stops_on_shutdown() -> Result<(), Box<dyn std::error::Error>> {
        let tmp = tempfile::tempdir()?;
        let importer = ImageImporter::new(tmp.path(), "/nonexistent.sock");
        let (tx, rx) = watch::channel(false);
        let task = tokio::spawn(importer.run(Duration::from_millis(10), rx));
        tokio::time::sleep(Duration::from_millis(30)).await;
        tx.send(true)?;
        tokio::time::timeout(Duration::from_secs(5), task).await??;
        Ok(())
    }
}
