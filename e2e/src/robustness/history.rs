//! What the clients did: every operation with the time it was invoked, the time it returned
//! (if it did) and what came back. Mirrors etcd's `tests/robustness/model/history.go` (the
//! operation history porcupine checks) and `tests/robustness/client/client.go` (the recording
//! client).
//!
//! Times are nanoseconds since the run began, taken on one monotonic clock for every client, so
//! "A returned before B was invoked" is a fact about the run, not a guess.

use std::collections::BTreeMap;
use std::time::Instant;

/// Nanoseconds since [`Clock::start`].
pub type Time = u64;

/// The run's one clock.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    start: Instant,
}

impl Clock {
    pub fn start() -> Self {
        Self { start: Instant::now() }
    }
    pub fn now(&self) -> Time {
        self.start.elapsed().as_nanos() as Time
    }
}

/// A comparison a transaction makes before choosing its branch.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Compare {
    /// `value(key) == value` (false for a missing key, as in etcd).
    ValueEquals { key: String, value: String },
    /// `version(key) == 0`: the key does not exist.
    Absent { key: String },
}

/// One operation of a transaction's branch.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum TxnOp {
    Put { key: String, value: String },
    Range { key: String },
}

/// What a client asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    /// A Range of one key; linearizable unless `serializable`.
    Range { key: String, serializable: bool },
    /// A Put, attached to `lease` when it is not 0. Every value is unique in a run.
    Put { key: String, value: String, lease: i64 },
    Delete { key: String },
    Txn { compare: Compare, then: Vec<TxnOp>, otherwise: Vec<TxnOp> },
    LeaseGrant { ttl: i64 },
    /// Revoking a lease the client attached to keys of `group` only (the model needs to know
    /// which partition the revoke belongs to).
    LeaseRevoke { id: i64, group: String },
}

impl Request {
    /// Whether the request can change the store.
    pub fn is_write(&self) -> bool {
        match self {
            Request::Range { .. } => false,
            Request::Txn { then, otherwise, .. } => then.iter().chain(otherwise).any(|o| matches!(o, TxnOp::Put { .. })),
            _ => true,
        }
    }

    /// The keys the request reads or writes.
    pub fn keys(&self) -> Vec<&str> {
        match self {
            Request::Range { key, .. } | Request::Put { key, .. } | Request::Delete { key } => vec![key],
            Request::Txn { compare, then, otherwise } => {
                let mut keys = vec![match compare {
                    Compare::ValueEquals { key, .. } | Compare::Absent { key } => key.as_str(),
                }];
                for op in then.iter().chain(otherwise) {
                    let (TxnOp::Put { key, .. } | TxnOp::Range { key }) = op;
                    if !keys.contains(&key.as_str()) {
                        keys.push(key);
                    }
                }
                keys
            }
            Request::LeaseGrant { .. } | Request::LeaseRevoke { .. } => Vec::new(),
        }
    }
}

/// A key's value as a Range returned it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct KeyValue {
    pub value: String,
    pub mod_revision: i64,
    pub lease: i64,
}

/// What came back, when something did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Response {
    Range { kv: Option<KeyValue> },
    Put,
    Delete { deleted: i64 },
    /// `ranges`: one entry per Range of the branch taken, in order.
    Txn { succeeded: bool, ranges: Vec<Option<KeyValue>> },
    LeaseGrant { id: i64 },
    LeaseRevoke,
}

/// How an operation ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The store answered: its response and the revision in the response header.
    Ok { response: Response, revision: i64, returned: Time },
    /// An error or no answer in time. For a write, it may or may not have taken effect: to the
    /// checker it returns "never" (porcupine's convention for a failed write).
    Failed { error: String, at: Time },
}

/// One operation of the history.
#[derive(Clone, Debug)]
pub struct Operation {
    pub id: usize,
    pub client: usize,
    /// The member the client was talking to.
    pub member: usize,
    pub request: Request,
    pub invoke: Time,
    pub outcome: Outcome,
}

impl Operation {
    /// When it returned, if it did.
    pub fn returned(&self) -> Option<Time> {
        match &self.outcome {
            Outcome::Ok { returned, .. } => Some(*returned),
            Outcome::Failed { .. } => None,
        }
    }

    /// The response and header revision, if it succeeded.
    pub fn ok(&self) -> Option<(&Response, i64)> {
        match &self.outcome {
            Outcome::Ok { response, revision, .. } => Some((response, *revision)),
            Outcome::Failed { .. } => None,
        }
    }

    /// Whether this operation made a new revision when it succeeded: a put, a delete that
    /// deleted, a transaction whose branch wrote.
    pub fn made_revision(&self) -> bool {
        match (&self.request, self.ok()) {
            (Request::Put { .. }, Some(_)) => true,
            (Request::Delete { .. }, Some((Response::Delete { deleted }, _))) => *deleted > 0,
            (Request::Txn { then, otherwise, .. }, Some((Response::Txn { succeeded, .. }, _))) => {
                let branch = if *succeeded { then } else { otherwise };
                branch.iter().any(|o| matches!(o, TxnOp::Put { .. }))
            }
            _ => false,
        }
    }
}

/// The values each put or transaction wrote, for finding the operation behind a value read or
/// watched: value → operation id.
pub fn writers_of_values(ops: &[Operation]) -> BTreeMap<&str, usize> {
    let mut m = BTreeMap::new();
    for op in ops {
        match &op.request {
            Request::Put { value, .. } => {
                m.insert(value.as_str(), op.id);
            }
            Request::Txn { then, otherwise, .. } => {
                for o in then.iter().chain(otherwise) {
                    if let TxnOp::Put { value, .. } = o {
                        m.insert(value.as_str(), op.id);
                    }
                }
            }
            _ => {}
        }
    }
    m
}
