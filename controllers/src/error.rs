//! Errors of the controllers.

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    Config(String),
    #[error("API server: {0}")]
    Kube(#[source] kube::Error),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// Whether retrying later may succeed (the API server was away or busy).
    pub fn is_retryable(&self) -> bool {
        matches!(self, Error::Kube(_))
    }
}
