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
    /// A certificate or a certificate signing request that cannot be read or signed.
    #[error("{what}: {source}")]
    Pki {
        what: String,
        #[source]
        source: pki::Error,
    },
    /// A failed step, in Kubernetes' words (the API server's answer inside them).
    #[error("{0}")]
    Message(String),
    /// What the certificate controllers retry quietly (Kubernetes' `IgnorableError`): the
    /// approver recognized a request its requester may not make, which a new role binding may
    /// change.
    #[error("{0}")]
    Ignorable(String),
    /// A flag that cannot be honoured (`--controllers` naming an unknown controller).
    #[error("{0}")]
    Flag(String),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// Whether retrying later may succeed (the API server was away, busy, or a write raced
    /// another one). Losing leadership is final.
    pub fn is_retryable(&self) -> bool {
        match self {
            Error::Client(e) => e.is_retryable(),
            Error::Kube(_) => true,
            Error::LeadershipLost(_) | Error::Pki { .. } | Error::Flag(_) => false,
            Error::Message(_) | Error::Ignorable(_) => true,
        }
    }

    /// Whether a write lost a race (409): the object changed since it was read; the next pass
    /// reads it again.
    pub fn is_conflict(&self) -> bool {
        matches!(self, Error::Kube(kube::Error::Api(s)) if s.code == 409)
    }
}
