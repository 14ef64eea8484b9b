//! Errors of the controllers: client-go's (a configuration problem, or the API server's answer),
//! and the loss of leadership, after which the process must exit rather than risk two leaders.

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Client(#[from] client::Error),
    #[error("API server: {0}")]
    Kube(#[source] kube::Error),
    #[error(transparent)]
    LeadershipLost(#[from] client::leaderelection::LeadershipLost),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// Whether retrying later may succeed (the API server was away, busy, or a write raced
    /// another one). Losing leadership is final.
    pub fn is_retryable(&self) -> bool {
        match self {
            Error::Client(e) => e.is_retryable(),
            Error::Kube(_) => true,
            Error::LeadershipLost(_) => false,
        }
    }

    /// Whether a write lost a race (409): the object changed since it was read; the next pass
    /// reads it again.
    pub fn is_conflict(&self) -> bool {
        matches!(self, Error::Kube(kube::Error::Api(s)) if s.code == 409)
    }
}
