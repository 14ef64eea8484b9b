//! The store's errors. Everything a client can cause maps to one of etcd's own errors (same gRPC
//! code, same message) at the edge, in `v3rpc`; nothing here knows about gRPC but `to_status`.

use std::io;

/// Errors of the store. The `Display` text of the client-visible ones is etcd's, word for word,
/// because clients (etcdctl, the Kubernetes API server) match on it.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("etcdserver: key is not provided")]
    EmptyKey,
    #[error("etcdserver: key not found")]
    KeyNotFound,
    #[error("etcdserver: request is too large")]
    RequestTooLarge,
    #[error("etcdserver: too many operations in txn request")]
    TooManyOps,
    #[error("etcdserver: duplicate key given in txn request")]
    DuplicateKey,
    #[error("etcdserver: mvcc: required revision has been compacted")]
    Compacted { compact_revision: i64 },
    #[error("etcdserver: mvcc: required revision is a future revision")]
    FutureRevision,
    #[error("etcdserver: requested lease not found")]
    LeaseNotFound,
    #[error("etcdserver: lease already exists")]
    LeaseExists,
    #[error("etcdserver: too large lease TTL")]
    LeaseTtlTooLarge,
    /// The NOSPACE alarm is raised, or this write would pass `--quota-backend-bytes`.
    #[error("etcdserver: mvcc: database space exceeded")]
    NoSpace,
    #[error("etcdserver: no leader")]
    NoLeader,
    #[error("etcdserver: request timed out")]
    Timeout,
    #[error("etcdserver: server stopped")]
    Stopped,
    // Membership (etcd's `membership` errors as `v3rpc` reports them).
    #[error("etcdserver: given member URLs are invalid")]
    MemberBadUrls,
    /// A removed ID never comes back; etcd reports it as not found.
    #[error("etcdserver: member not found")]
    IdRemoved,
    #[error("etcdserver: member ID already exist")]
    IdExists,
    #[error("etcdserver: member not found")]
    MemberNotFound,
    #[error("etcdserver: Peer URLs already exists")]
    PeerUrlExists,
    #[error("etcdserver: too many learner members in cluster")]
    TooManyLearners,
    #[error("etcdserver: can only promote a learner member")]
    MemberNotLearner,
    #[error("etcdserver: can only promote a learner member which is in sync with leader")]
    LearnerNotReady,
    #[error("etcdserver: re-configuration failed due to not enough started members")]
    NotEnoughStartedMembers,
    #[error("etcdserver: unhealthy cluster")]
    Unhealthy,
    #[error("etcdserver: rpc not supported for learner")]
    NotSupportedForLearner,
    /// This member was removed from the cluster: it stops.
    #[error("the member has been permanently removed from the cluster")]
    MemberRemoved,
    /// The data directory was written by another member or another cluster.
    #[error("data dir {dir} belongs to {found}, but the flags describe {wanted}")]
    ForeignDataDir { dir: String, found: String, wanted: String },
    #[error("invalid configuration: {0}")]
    Config(String),
    /// A certificate, key or CA file a TLS flag names cannot be used (`tlsinfo`).
    #[error("{flag} {path}: {reason}")]
    Tls { flag: String, path: String, reason: String },
    /// The write-ahead log could not be read or written (a full disk, an I/O error).
    #[error("WAL {path}: {source}")]
    Wal {
        path: String,
        #[source]
        source: io::Error,
    },
    #[error("storage engine: {0}")]
    Engine(#[from] sled::Error),
    /// A write the engine's writer thread applied failed (see `engine::BackgroundWrites`).
    #[error("storage engine: an earlier write failed: {0}")]
    EngineFailed(String),
    /// A snapshot file cannot be restored (etcd's messages: a missing or wrong hash).
    #[error("{0}")]
    Snapshot(String),
    #[error("corrupt record {what}: {detail}")]
    Corrupt { what: &'static str, detail: String },
    #[error("raft: {0}")]
    Raft(#[from] raft::Error),
    #[error("I/O: {0}")]
    Io(#[from] io::Error),
    #[error("transport: {0}")]
    Transport(#[from] tonic::transport::Error),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// Whether a client may simply retry the same request (against this or another member).
    pub fn is_retryable(&self) -> bool {
        matches!(self, Error::NoLeader | Error::Timeout)
    }

    /// The gRPC status etcd answers with for this error.
    pub fn to_status(&self) -> tonic::Status {
        use tonic::Code;
        let code = match self {
            Error::EmptyKey
            | Error::RequestTooLarge
            | Error::TooManyOps
            | Error::DuplicateKey => Code::InvalidArgument,
            Error::KeyNotFound => Code::InvalidArgument,
            Error::Compacted { .. } | Error::FutureRevision | Error::LeaseTtlTooLarge => {
                Code::OutOfRange
            }
            Error::LeaseNotFound => Code::NotFound,
            Error::LeaseExists => Code::FailedPrecondition,
            Error::NoSpace => Code::ResourceExhausted,
            Error::NoLeader | Error::Timeout | Error::Stopped => Code::Unavailable,
            Error::MemberBadUrls => Code::InvalidArgument,
            Error::IdRemoved | Error::MemberNotFound => Code::NotFound,
            Error::IdExists
            | Error::PeerUrlExists
            | Error::TooManyLearners
            | Error::MemberNotLearner
            | Error::LearnerNotReady
            | Error::NotEnoughStartedMembers => Code::FailedPrecondition,
            Error::Unhealthy | Error::NotSupportedForLearner | Error::MemberRemoved => Code::Unavailable,
            _ => Code::Internal,
        };
        tonic::Status::new(code, self.to_string())
    }
}

impl From<Error> for tonic::Status {
    fn from(e: Error) -> Self {
        e.to_status()
    }
}
