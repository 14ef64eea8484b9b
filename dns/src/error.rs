//! The dns crate's errors.

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    Config(String),
    #[error(transparent)]
    Client(#[from] client::Error),
    /// The DNS server stopped with an error.
    #[error("dns server: {0}")]
    Serve(String),
    /// No upstream resolver answered (or none is configured): the client gets SERVFAIL.
    #[error("upstream: {0}")]
    Upstream(String),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Error {
        Error::Io { context: context.into(), source }
    }

    /// Whether retrying later may succeed.
    pub fn is_retryable(&self) -> bool {
        match self {
            Error::Io { .. } | Error::Upstream(_) => true,
            Error::Client(e) => e.is_retryable(),
            Error::Config(_) | Error::Serve(_) => false,
        }
    }
}
