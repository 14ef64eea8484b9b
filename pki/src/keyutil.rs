//! Mirrors client-go's util/keyutil/key.go (and `cert.WriteCert` of util/cert/io.go): keys and
//! certificates in PEM files, written so that no reader ever sees half of one.

use std::fs;
use std::io::Write as _;
use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
use std::path::Path;

use rcgen::{KeyPair, PublicKeyData as _};

use crate::error::{Error, Result};

/// A key's file mode: its owner alone reads it (client-go writes keys 0600, and so does
/// kubeadm's sa.pub and every kubeconfig).
pub const KEY_MODE: u32 = 0o600;
/// A certificate's file mode: anyone may read it.
pub const CERT_MODE: u32 = 0o644;

/// Writes a private key — or anything as secret: kubeadm writes kubeconfigs, which embed one,
/// the same way — with mode 0600, atomically.
pub fn write_key(path: &Path, data: &[u8]) -> Result<()> {
    write_atomic(path, data, KEY_MODE)
}

/// Writes a certificate with mode 0644, atomically.
pub(crate) fn write_cert(path: &Path, data: &[u8]) -> Result<()> {
    write_atomic(path, data, CERT_MODE)
}

/// A temporary file beside `path`, made with `mode` from the start (never readable by others
/// for a moment), written, synced, then renamed over `path`: a reader sees the old file or the
/// new one, and a crash leaves at worst a stray temporary file.
fn write_atomic(path: &Path, data: &[u8], mode: u32) -> Result<()> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    fs::DirBuilder::new().recursive(true).mode(0o755).create(dir).map_err(Error::io("creating directory", dir))?;
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = dir.join(format!(".{name}.tmp{}", std::process::id()));
    match fs::remove_file(&tmp) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(Error::io("removing", &tmp)(e)),
    }
    let written = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(&tmp)
        .and_then(|mut f| {
            f.write_all(data)?;
            f.sync_all()
        })
        .map_err(Error::io("writing", &tmp))
        .and_then(|()| fs::rename(&tmp, path).map_err(Error::io("renaming into place", path)));
    if written.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    written?;
    // The rename is durable once the directory is.
    fs::File::open(dir).and_then(|d| d.sync_all()).map_err(Error::io("syncing", dir))
}

/// A private key from a PEM file: PKCS#8, SEC1 (`EC PRIVATE KEY`) or PKCS#1 (`RSA PRIVATE KEY`,
/// what kubeadm's RSA keys are).
pub(crate) fn private_key_from_file(path: &Path) -> Result<KeyPair> {
    let pem = fs::read_to_string(path).map_err(Error::io("reading", path))?;
    private_key_from_pem(&pem, &path.display().to_string())
}

pub(crate) fn private_key_from_pem(pem: &str, what: &str) -> Result<KeyPair> {
    KeyPair::from_pem(pem).map_err(|source| Error::Key { what: what.to_string(), source })
}

/// The public key of a PKIX (`PUBLIC KEY`) PEM block, as the bits a certificate's
/// subjectPublicKeyInfo carries.
pub(crate) fn public_key_bits_from_pem(pem: &[u8], what: &str) -> Result<Vec<u8>> {
    use rustls_pki_types::SubjectPublicKeyInfoDer;
    use rustls_pki_types::pem::PemObject as _;
    let spki = SubjectPublicKeyInfoDer::from_pem_slice(pem).map_err(|source| match source {
        rustls_pki_types::pem::Error::NoItemsFound => Error::NoPemBlock { what: what.to_string(), block: "PUBLIC KEY" },
        source => Error::Pem { what: what.to_string(), source },
    })?;
    use x509_parser::prelude::FromDer as _;
    let (_, parsed) = x509_parser::x509::SubjectPublicKeyInfo::from_der(&spki)
        .map_err(|e| Error::Certificate { what: what.to_string(), source: crate::error::x509_error(e) })?;
    Ok(parsed.subject_public_key.data.to_vec())
}

/// The bits of `key`'s public key, to compare with a certificate's or a `PUBLIC KEY` block's.
pub(crate) fn public_key_bits(key: &KeyPair) -> &[u8] {
    key.der_bytes()
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;

    /// A key is written 0600 and a certificate 0644 whatever mode an older file had, the
    /// directory is made, and no temporary file is left beside them.
    #[test]
    fn writes_are_atomic_with_their_modes() {
        let dir = tempfile::tempdir().unwrap();
        let key = dir.path().join("etcd/server.key");
        let cert = dir.path().join("etcd/server.crt");
        write_key(&key, b"one").unwrap();
        fs::set_permissions(&key, fs::Permissions::from_mode(0o644)).unwrap();
        write_key(&key, b"two").unwrap();
        write_cert(&cert, b"cert").unwrap();
        assert_eq!(fs::read(&key).unwrap(), b"two");
        let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&key), 0o600);
        assert_eq!(mode(&cert), 0o644);
        let names: Vec<_> = fs::read_dir(dir.path().join("etcd")).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names.len(), 2, "{names:?}");
    }
}
