//! A finding of the checker: what the store did that it promised not to, the keys and
//! operations a person should look at, and when in the run it showed. (etcd's robustness suite
//! reports the same as porcupine's failing partition and `validate` errors.)

use super::history::{Operation, Time};

/// Something the store did that it promised not to.
#[derive(Clone, Debug)]
pub struct Violation {
    pub kind: &'static str,
    pub message: String,
    /// The keys involved: the report shows their timelines.
    pub keys: Vec<String>,
    /// The operations involved (ids): marked in the timelines.
    pub ops: Vec<usize>,
    /// When in the run the store first showed it (an operation's invocation, a watch
    /// response's arrival), if known.
    pub at: Option<Time>,
}

impl Violation {
    pub fn watch(kind: &'static str, message: String, keys: Vec<String>) -> Self {
        Self { kind, message, keys, ops: Vec::new(), at: None }
    }
    /// The same, shown at `at`.
    pub fn at(mut self, at: Time) -> Self {
        self.at = Some(at);
        self
    }
    pub(crate) fn op(kind: &'static str, message: String, op: &Operation) -> Self {
        Self { kind, message, keys: op.request.keys().iter().map(|k| k.to_string()).collect(), ops: vec![op.id], at: Some(op.invoke) }
    }
}
