//! The proxy's errors.

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    Config(String),
    #[error(transparent)]
    Client(#[from] client::Error),
    /// An iptables command could not be run, or failed (its stderr kept).
    #[error("{command}: {message}")]
    Iptables { command: String, message: String },
    /// The kernel refused an nf_tables operation, or its netlink socket failed: `op` is the
    /// operation as its `nft` line, `message` the kernel's error (and a hint where one is known).
    #[error("{op}: {message}")]
    Nftables { op: String, message: String },
    #[error("serving /healthz on {0}: {1}")]
    Listen(std::net::SocketAddr, #[source] std::io::Error),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// Whether a later attempt may succeed (the next sync retries an iptables or nftables
    /// failure).
    pub fn is_retryable(&self) -> bool {
        matches!(self, Error::Iptables { .. } | Error::Nftables { .. }) || matches!(self, Error::Client(e) if e.is_retryable())
    }
}
