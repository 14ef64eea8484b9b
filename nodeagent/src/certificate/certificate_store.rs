//! Mirrors client-go's util/certificate/certificate_store.go (`fileStore`): a certificate and
//! its key kept together in one PEM file, `<cert-dir>/<pair>-<timestamp>.pem`, and the symlink
//! `<pair>-current.pem` naming the one in use — so a new certificate is put in place by one
//! rename, and the kubeconfig that names the symlink never changes.

use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};

/// The pair name of the kubelet's client certificate (`kubelet-client`).
pub(crate) const KUBELET_CLIENT_PAIR: &str = "kubelet-client";
/// `currentPair`: the symlink's suffix.
const CURRENT: &str = "current";
/// `updatedPair`: the symlink made beside it, then renamed over it.
const UPDATED: &str = "updated";
/// Go's `2006-01-02-15-04-05`: the timestamp in a pair's file name.
const TIMESTAMP_FORMAT: &str = "%Y-%m-%d-%H-%M-%S";

/// A certificate and key as the store holds them: PEM, the certificate chain first.
#[derive(Clone)]
pub(crate) struct Pair {
    pub(crate) cert_pem: String,
    pub(crate) key_pem: String,
}

/// `fileStore` for one pair name in one directory.
pub(crate) struct FileStore {
    pub(crate) pair_name: String,
    pub(crate) dir: PathBuf,
}

impl FileStore {
    pub(crate) fn new(pair_name: &str, dir: &Path) -> FileStore {
        FileStore { pair_name: pair_name.to_string(), dir: dir.to_path_buf() }
    }

    /// `CurrentPath`: `<dir>/<pair>-current.pem`.
    pub(crate) fn current_path(&self) -> PathBuf {
        self.dir.join(format!("{}-{CURRENT}.pem", self.pair_name))
    }

    /// `Current`: the pair the symlink names, if it is there and holds a certificate and a key.
    pub(crate) fn current(&self) -> Result<Pair, String> {
        let path = self.current_path();
        let text = std::fs::read_to_string(&path).map_err(|e| format!("could not read {}: {e}", path.display()))?;
        split_pem(&text).ok_or_else(|| format!("{} does not hold a certificate and a private key", path.display()))
    }

    /// `Update`: writes the pair to a new `<pair>-<timestamp>.pem` (mode 0600: it holds the key)
    /// and points the `current` symlink at it. Returns the new file.
    pub(crate) fn update(&self, pair: &Pair, now: DateTime<Utc>) -> Result<PathBuf, String> {
        std::fs::create_dir_all(&self.dir).map_err(|e| format!("could not create directory {}: {e}", self.dir.display()))?;
        let pem_path = self.dir.join(format!("{}-{}.pem", self.pair_name, now.format(TIMESTAMP_FORMAT)));
        let mut data = pair.cert_pem.trim_end().to_string();
        data.push('\n');
        data.push_str(pair.key_pem.trim_end());
        data.push('\n');
        write_private(&pem_path, data.as_bytes()).map_err(|e| format!("could not write {}: {e}", pem_path.display()))?;
        self.update_symlink(&pem_path)?;
        Ok(pem_path)
    }

    /// `updateSymlink`: `current` must be a symlink or missing (a regular file there is someone
    /// else's and is not replaced); a fresh `updated` symlink is renamed over it.
    fn update_symlink(&self, target: &Path) -> Result<(), String> {
        let current = self.current_path();
        match std::fs::symlink_metadata(&current) {
            Ok(m) if !m.file_type().is_symlink() => return Err(format!("expected {:?} to be a symlink but it is a file", current.display().to_string())),
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(format!("{}: {e}", current.display())),
        }
        let updated = self.dir.join(format!("{}-{UPDATED}.pem", self.pair_name));
        match std::fs::remove_file(&updated) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(format!("unable to remove {}: {e}", updated.display())),
        }
        std::os::unix::fs::symlink(target, &updated).map_err(|e| format!("unable to create a symlink from {} to {}: {e}", updated.display(), target.display()))?;
        std::fs::rename(&updated, &current).map_err(|e| format!("unable to rename {} to {}: {e}", updated.display(), current.display()))
    }
}

/// Writes a file only its owner can read.
pub(crate) fn write_private(path: &Path, data: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut f = std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(path)?;
    f.write_all(data)
}

/// The certificate blocks and the private key block of a PEM file holding both (the key's
/// block, PKCS#8, SEC1 or PKCS#1, by its `BEGIN` line).
fn split_pem(text: &str) -> Option<Pair> {
    let (mut certs, mut key, mut block) = (String::new(), String::new(), None::<bool>);
    for line in text.lines() {
        let line = line.trim_end();
        if let Some(label) = line.strip_prefix("-----BEGIN ") {
            block = Some(label.ends_with("PRIVATE KEY-----"));
        }
        match block {
            Some(true) => {
                key.push_str(line);
                key.push('\n');
            }
            Some(false) => {
                certs.push_str(line);
                certs.push('\n');
            }
            None => {}
        }
        if line.starts_with("-----END ") {
            block = None;
        }
    }
    (certs.contains("-----BEGIN CERTIFICATE-----") && !key.is_empty()).then_some(Pair { cert_pem: certs, key_pem: key })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair() -> Pair {
        let ca = pki::CertificateAuthority::new("kubernetes").expect("a CA");
        let config = pki::Config {
            common_name: "system:node:n1".into(),
            organizations: vec!["system:nodes".into()],
            usages: vec![pki::Usage::ClientAuth],
            ..Default::default()
        };
        let signed = ca.sign(&config).expect("signed");
        Pair { cert_pem: signed.cert_pem, key_pem: signed.key_pem }
    }

    #[test]
    fn updates_write_a_timestamped_file_and_move_the_symlink() {
        let dir = tempfile::tempdir().expect("a directory");
        let store = FileStore::new(KUBELET_CLIENT_PAIR, &dir.path().join("pki"));
        assert!(store.current().is_err(), "nothing yet");
        let (first, second) = (pair(), pair());
        let t1 = DateTime::parse_from_rfc3339("2026-03-04T05:06:07Z").expect("a time").with_timezone(&Utc);
        let p1 = store.update(&first, t1).expect("stored");
        assert_eq!(p1, dir.path().join("pki/kubelet-client-2026-03-04-05-06-07.pem"));
        use std::os::unix::fs::PermissionsExt as _;
        assert_eq!(std::fs::metadata(&p1).expect("written").permissions().mode() & 0o777, 0o600);
        assert_eq!(std::fs::read_link(store.current_path()).expect("a symlink"), p1);
        let current = store.current().expect("current");
        assert_eq!((current.cert_pem.trim(), current.key_pem.trim()), (first.cert_pem.trim(), first.key_pem.trim()));

        let p2 = store.update(&second, t1 + chrono::Duration::seconds(1)).expect("stored again");
        assert_eq!(std::fs::read_link(store.current_path()).expect("a symlink"), p2);
        assert_eq!(store.current().expect("current").cert_pem.trim(), second.cert_pem.trim());
        assert!(p1.exists(), "the old pair is kept, as the kubelet keeps it");
        assert!(!dir.path().join("pki/kubelet-client-updated.pem").exists());

        // A regular file where the symlink goes is not replaced.
        std::fs::remove_file(store.current_path()).expect("removed");
        std::fs::write(store.current_path(), "mine").expect("written");
        let err = store.update(&first, t1).expect_err("refused");
        assert!(err.ends_with("to be a symlink but it is a file"), "{err}");
    }
}
