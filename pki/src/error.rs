//! Mirrors the errors of kubeadm's `pkiutil` (each wraps its cause and names the file it was about).

use std::path::{Path, PathBuf};

/// What can go wrong making, reading or checking certificates and keys.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading, writing or renaming a file, or making its directory.
    #[error("{op} {}: {source}", path.display())]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Text that should hold PEM blocks does not (a file, or a kubeconfig's embedded data).
    #[error("{what}: {source}")]
    Pem {
        what: String,
        #[source]
        source: rustls_pki_types::pem::Error,
    },
    /// PEM without the block it should hold: no CERTIFICATE, or no PUBLIC KEY.
    #[error("{what}: no {block} in it")]
    NoPemBlock { what: String, block: &'static str },
    /// A certificate that x509-parser cannot read.
    #[error("{what}: {source}")]
    Certificate {
        what: String,
        #[source]
        source: x509_parser::error::X509Error,
    },
    /// A private key that cannot be read (rcgen reads PKCS#8, SEC1 and PKCS#1 PEM).
    #[error("{what}: {source}")]
    Key {
        what: String,
        #[source]
        source: rcgen::Error,
    },
    /// Making a key or signing a certificate.
    #[error("{what}: {source}")]
    Sign {
        what: String,
        #[source]
        source: rcgen::Error,
    },
    /// A CA's certificate without its key, or the other way round: kubelab does not make a new
    /// CA over half of one (every certificate it signed would stop verifying).
    #[error("{} exists but {} does not; remove both to make a new pair, or restore the missing one", present.display(), missing.display())]
    Incomplete { present: PathBuf, missing: PathBuf },
    /// A certificate and a key file that do not belong together.
    #[error("{} does not hold the key of {}", key.display(), cert.display())]
    KeyMismatch { cert: PathBuf, key: PathBuf },
    /// A certificate loaded as a CA that is not one (no basicConstraints CA:TRUE).
    #[error("{}: not a certificate authority", path.display())]
    NotCa { path: PathBuf },
    /// A certificate signing request that cannot be read, whose signature is not its key's, or
    /// that asks for usages Kubernetes does not know (the words are Kubernetes').
    #[error("{reason}")]
    CertificateRequest { reason: String },
    /// A certificate configuration that cannot be issued.
    #[error("certificate {common_name:?}: {reason}")]
    Config { common_name: String, reason: String },
    /// A certificate whose issuer name is not, byte for byte, its CA's subject. Go's TLS client
    /// only offers a client certificate whose issuer is among the CA names the server sends, so
    /// this is refused rather than written.
    #[error("certificate {common_name:?}: its issuer name does not match the CA's subject byte for byte")]
    IssuerMismatch { common_name: String },
}

/// The crate's result, with [`Error`] unless said otherwise.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// A file that does not exist (`kubelab certs check-expiration` shows it as missing).
    pub fn is_not_found(&self) -> bool {
        matches!(self, Error::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound)
    }

    pub(crate) fn io(op: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> Error {
        let path = path.to_path_buf();
        move |source| Error::Io { op, path, source }
    }

    pub(crate) fn config(common_name: &str, reason: impl Into<String>) -> Error {
        Error::Config { common_name: common_name.to_string(), reason: reason.into() }
    }
}

/// x509-parser's parsers answer with nom's error wrapper; the cause is inside it.
pub(crate) fn x509_error(e: x509_parser::nom::Err<x509_parser::error::X509Error>) -> x509_parser::error::X509Error {
    match e {
        x509_parser::nom::Err::Error(e) | x509_parser::nom::Err::Failure(e) => e,
        x509_parser::nom::Err::Incomplete(_) => x509_parser::error::X509Error::InvalidCertificate,
    }
}
