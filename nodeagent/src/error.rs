//! The node agent's errors. Converted to an HTTP status or an Event reason only at the edges.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A CRI call failed (containerd answered with an error, or could not be reached).
    #[error("CRI {op}: {source}")]
    Cri {
        op: &'static str,
        #[source]
        source: tonic::Status,
    },
    /// The container runtime endpoint could not be dialled.
    #[error("connecting to the container runtime at {endpoint}: {source}")]
    Connect {
        endpoint: String,
        #[source]
        source: tonic::transport::Error,
    },
    #[error("API server: {0}")]
    Kube(#[from] kube::Error),
    #[error(transparent)]
    Client(#[from] client::Error),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A pod or manifest that cannot be run as written (bad YAML, a missing field, …).
    #[error("{0}")]
    Invalid(String),
    /// Something the pod needs is not there yet (a configMap, a secret, an image): retried.
    #[error("{0}")]
    NotReady(String),
    /// A volume of a pod could not be set up. The message is the one kubelet's FailedMount event
    /// carries, so the caller can use it as is; `source` keeps the class (NotReady, Invalid, Io).
    #[error("MountVolume.SetUp failed for volume \"{volume}\" : {source}")]
    Volume {
        volume: String,
        #[source]
        source: Box<Error>,
    },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Error {
        Error::Io { path: path.into(), source }
    }

    pub(crate) fn cri(op: &'static str, source: tonic::Status) -> Error {
        Error::Cri { op, source }
    }

    /// Whether the CRI answered NOT_FOUND (a container or sandbox already gone).
    pub fn is_not_found(&self) -> bool {
        match self {
            Error::Cri { source, .. } => source.code() == tonic::Code::NotFound,
            Error::Kube(kube::Error::Api(s)) => s.code == 404,
            _ => false,
        }
    }
}
