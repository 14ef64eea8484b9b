//! The csi crate's errors. The driver's errors carry the CSI spec's gRPC code in their variant
//! (the spec names one code per failure of each RPC); they become a tonic `Status` only at the
//! gRPC edge ([`Error::into_status`]).

use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A required field is missing or a value is not supported (`INVALID_ARGUMENT`).
    #[error("{0}")]
    InvalidArgument(String),
    /// The volume (or node) the request names does not exist (`NOT_FOUND`).
    #[error("{0}")]
    NotFound(String),
    /// A volume of that name exists but does not match the request (`ALREADY_EXISTS`).
    #[error("{0}")]
    AlreadyExists(String),
    /// The request comes in the wrong order (staging before attaching, deleting while in use):
    /// `FAILED_PRECONDITION`.
    #[error("{0}")]
    FailedPrecondition(String),
    /// The capacity asked for cannot be given (`OUT_OF_RANGE`).
    #[error("{0}")]
    OutOfRange(String),
    /// The volume cannot be made where the topology asks for it (`RESOURCE_EXHAUSTED`).
    #[error("{0}")]
    ResourceExhausted(String),
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The state file could not be read or written.
    #[error("state file {}: {source}", path.display())]
    State {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error("{0}")]
    Config(String),
    /// A gRPC server stopped with an error.
    #[error("serving {what}: {source}")]
    Serve {
        what: String,
        #[source]
        source: tonic::transport::Error,
    },
    /// A call to the driver (by a sidecar) failed.
    #[error("{rpc}: {status}")]
    Csi { rpc: &'static str, status: tonic::Status },
    #[error(transparent)]
    Client(#[from] client::Error),
    #[error("API server: {0}")]
    Kube(#[from] kube::Error),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub(crate) fn io(path: impl AsRef<Path>, source: std::io::Error) -> Error {
        Error::Io { path: path.as_ref().to_path_buf(), source }
    }

    /// Whether retrying later may succeed.
    pub fn is_retryable(&self) -> bool {
        match self {
            Error::Io { .. } | Error::Kube(_) | Error::Csi { .. } => true,
            Error::Client(e) => e.is_retryable(),
            _ => false,
        }
    }

    /// The gRPC status the driver answers with: the spec's code for each failure, `INTERNAL` for
    /// everything the caller cannot fix.
    pub fn into_status(self) -> tonic::Status {
        use tonic::Status;
        match self {
            Error::InvalidArgument(m) => Status::invalid_argument(m),
            Error::NotFound(m) => Status::not_found(m),
            Error::AlreadyExists(m) => Status::already_exists(m),
            Error::FailedPrecondition(m) => Status::failed_precondition(m),
            Error::OutOfRange(m) => Status::out_of_range(m),
            Error::ResourceExhausted(m) => Status::resource_exhausted(m),
            Error::Csi { status, .. } => status,
            e => Status::internal(e.to_string()),
        }
    }
}

impl From<Error> for tonic::Status {
    fn from(e: Error) -> tonic::Status {
        e.into_status()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tonic::Code;

    #[test]
    fn the_specs_codes() {
        let cases = [
            (Error::InvalidArgument("x".into()), Code::InvalidArgument),
            (Error::NotFound("x".into()), Code::NotFound),
            (Error::AlreadyExists("x".into()), Code::AlreadyExists),
            (Error::FailedPrecondition("x".into()), Code::FailedPrecondition),
            (Error::OutOfRange("x".into()), Code::OutOfRange),
            (Error::ResourceExhausted("x".into()), Code::ResourceExhausted),
            (Error::io("/p", std::io::Error::other("disk")), Code::Internal),
            (Error::Csi { rpc: "CreateVolume", status: tonic::Status::unavailable("gone") }, Code::Unavailable),
        ];
        for (e, code) in cases {
            let text = e.to_string();
            let status = e.into_status();
            assert_eq!(status.code(), code, "{text}");
        }
    }
}
