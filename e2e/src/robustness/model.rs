//! The key-value model an etcd history must be explainable by. Mirrors etcd's
//! `tests/robustness/model/deterministic.go` (and porcupine's `Model`): a state, and a step
//! that says whether an operation with the output observed could have happened in that state,
//! and what the state is after it.
//!
//! The state holds values and lease attachments, not revisions: revisions are checked apart
//! ([`super::validate`]) so that the history can be split by key group (porcupine's
//! partitioning) while every group keeps its own small state. A failed write (no output) is
//! stepped as if it took effect; placed last by the checker, it stands for "did not".

use std::collections::BTreeMap;

use super::history::{Compare, Operation, Outcome, Request, Response, TxnOp};

/// A group of keys' values: key → (value, lease).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct State {
    pub kvs: BTreeMap<String, (String, i64)>,
}

impl State {
    fn value(&self, key: &str) -> Option<&str> {
        self.kvs.get(key).map(|(v, _)| v.as_str())
    }

    fn compare(&self, c: &Compare) -> bool {
        match c {
            Compare::ValueEquals { key, value } => self.value(key) == Some(value.as_str()),
            Compare::Absent { key } => !self.kvs.contains_key(key),
        }
    }
}

/// The key group a key belongs to: its first path element after the run's prefix
/// (`<prefix>g3/a` → `g3`). Transactions stay within one group; so does each lease.
pub fn group_of(prefix: &str, key: &str) -> String {
    let rest = key.strip_prefix(prefix).unwrap_or(key);
    rest.split('/').next().unwrap_or(rest).to_string()
}

/// The partition an operation is checked in, or None when it is not checked for
/// linearizability: a lease grant touches no key, and a serializable read promises only a
/// state the store had (checked against the history, [`super::validate`]), not the latest.
pub fn partition_of(prefix: &str, op: &Operation) -> Option<String> {
    match &op.request {
        Request::LeaseGrant { .. } | Request::Range { serializable: true, .. } => None,
        Request::LeaseRevoke { group, .. } => Some(group.clone()),
        r => r.keys().first().map(|k| group_of(prefix, k)),
    }
}

/// Whether `op`, with its outcome, can happen in `state`; the state after it if so.
pub fn step(state: &State, op: &Operation) -> Option<State> {
    let response = match &op.outcome {
        Outcome::Ok { response, .. } => Some(response),
        Outcome::Failed { .. } => None,
    };
    match (&op.request, response) {
        (Request::Range { key, .. }, Some(Response::Range { kv })) => {
            (state.value(key) == kv.as_ref().map(|kv| kv.value.as_str())).then(|| state.clone())
        }
        // A failed read changed nothing and showed nothing.
        (Request::Range { .. }, None) => Some(state.clone()),
        (Request::Put { key, value, lease }, None | Some(Response::Put)) => {
            let mut s = state.clone();
            s.kvs.insert(key.clone(), (value.clone(), *lease));
            Some(s)
        }
        (Request::Delete { key }, r) => {
            let existed = state.kvs.contains_key(key);
            if let Some(Response::Delete { deleted }) = r {
                if *deleted != i64::from(existed) {
                    return None;
                }
            } else if r.is_some() {
                return None;
            }
            let mut s = state.clone();
            s.kvs.remove(key);
            Some(s)
        }
        (Request::Txn { compare, then, otherwise }, r) => {
            let succeeded = state.compare(compare);
            let branch = if succeeded { then } else { otherwise };
            let mut s = state.clone();
            let mut ranges = Vec::new();
            for o in branch {
                match o {
                    TxnOp::Put { key, value } => {
                        s.kvs.insert(key.clone(), (value.clone(), 0));
                    }
                    TxnOp::Range { key } => ranges.push(s.value(key).map(str::to_string)),
                }
            }
            match r {
                None => Some(s),
                Some(Response::Txn { succeeded: got, ranges: got_ranges }) => {
                    let seen: Vec<Option<String>> = got_ranges.iter().map(|kv| kv.as_ref().map(|kv| kv.value.clone())).collect();
                    (*got == succeeded && seen == ranges).then_some(s)
                }
                Some(_) => None,
            }
        }
        (Request::LeaseRevoke { id, .. }, None | Some(Response::LeaseRevoke)) => {
            let mut s = state.clone();
            s.kvs.retain(|_, (_, lease)| lease != id);
            Some(s)
        }
        // Grants touch no key and are not partitioned ([`partition_of`]).
        (Request::LeaseGrant { .. }, _) => Some(state.clone()),
        _ => None,
    }
}

/// What an operation did, in a line of a report.
pub fn describe(op: &Operation) -> String {
    let req = match &op.request {
        Request::Range { key, serializable } => format!("get{} {key}", if *serializable { " --consistency=s" } else { "" }),
        Request::Put { key, value, lease } if *lease != 0 => format!("put {key}={value} --lease={lease:x}"),
        Request::Put { key, value, .. } => format!("put {key}={value}"),
        Request::Delete { key } => format!("del {key}"),
        Request::Txn { compare, then, otherwise } => {
            let c = match compare {
                Compare::ValueEquals { key, value } => format!("value({key})=={value}"),
                Compare::Absent { key } => format!("version({key})==0"),
            };
            let ops = |b: &[TxnOp]| {
                b.iter()
                    .map(|o| match o {
                        TxnOp::Put { key, value } => format!("put {key}={value}"),
                        TxnOp::Range { key } => format!("get {key}"),
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            format!("txn if {c} then [{}] else [{}]", ops(then), ops(otherwise))
        }
        Request::LeaseGrant { ttl } => format!("lease grant {ttl}"),
        Request::LeaseRevoke { id, .. } => format!("lease revoke {id:x}"),
    };
    let resp = match &op.outcome {
        Outcome::Failed { error, .. } => format!("failed: {error}"),
        Outcome::Ok { response, revision, .. } => {
            let kv = |kv: &Option<super::history::KeyValue>| match kv {
                Some(kv) => format!("{}@{}", kv.value, kv.mod_revision),
                None => "<none>".to_string(),
            };
            let r = match response {
                Response::Range { kv: v } => kv(v),
                Response::Put => "ok".into(),
                Response::Delete { deleted } => format!("deleted {deleted}"),
                Response::Txn { succeeded, ranges } => {
                    format!("{} [{}]", if *succeeded { "then" } else { "else" }, ranges.iter().map(kv).collect::<Vec<_>>().join(", "))
                }
                Response::LeaseGrant { id } => format!("id {id:x}"),
                Response::LeaseRevoke => "ok".into(),
            };
            format!("{r} (rev {revision})")
        }
    };
    format!("{req} → {resp}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::robustness::history::KeyValue;

    fn op(request: Request, response: Option<Response>) -> Operation {
        Operation {
            id: 0,
            client: 0,
            member: 0,
            request,
            invoke: 0,
            outcome: match response {
                Some(response) => Outcome::Ok { response, revision: 1, returned: 1 },
                None => Outcome::Failed { error: "timeout".into(), at: 1 },
            },
        }
    }

    fn get(key: &str, v: Option<&str>) -> Operation {
        op(
            Request::Range { key: key.into(), serializable: false },
            Some(Response::Range { kv: v.map(|v| KeyValue { value: v.into(), mod_revision: 1, lease: 0 }) }),
        )
    }

    #[test]
    fn reads_must_see_the_state() {
        let s = step(&State::default(), &op(Request::Put { key: "k".into(), value: "v1".into(), lease: 0 }, Some(Response::Put))).unwrap();
        assert!(step(&s, &get("k", Some("v1"))).is_some());
        assert!(step(&s, &get("k", Some("v0"))).is_none());
        assert!(step(&s, &get("k", None)).is_none());
        assert!(step(&State::default(), &get("k", None)).is_some());
    }

    #[test]
    fn deletes_report_what_existed() {
        let s = step(&State::default(), &op(Request::Put { key: "k".into(), value: "v".into(), lease: 0 }, Some(Response::Put))).unwrap();
        assert!(step(&s, &op(Request::Delete { key: "k".into() }, Some(Response::Delete { deleted: 0 }))).is_none());
        let after = step(&s, &op(Request::Delete { key: "k".into() }, Some(Response::Delete { deleted: 1 }))).unwrap();
        assert!(after.kvs.is_empty());
    }

    #[test]
    fn transactions_take_the_branch_the_state_decides() {
        let txn = |succeeded: bool, ranges: Vec<Option<KeyValue>>| {
            op(
                Request::Txn {
                    compare: Compare::Absent { key: "a".into() },
                    then: vec![TxnOp::Put { key: "a".into(), value: "x".into() }, TxnOp::Put { key: "b".into(), value: "y".into() }],
                    otherwise: vec![TxnOp::Range { key: "a".into() }],
                },
                Some(Response::Txn { succeeded, ranges }),
            )
        };
        let s = step(&State::default(), &txn(true, vec![])).expect("absent: then");
        assert_eq!(s.kvs.len(), 2);
        assert!(step(&State::default(), &txn(false, vec![None])).is_none(), "absent key cannot take else");
        let kv = KeyValue { value: "x".into(), mod_revision: 2, lease: 0 };
        assert!(step(&s, &txn(false, vec![Some(kv)])).is_some());
        assert!(step(&s, &txn(true, vec![])).is_none());
    }

    #[test]
    fn revoke_deletes_the_keys_of_its_lease() {
        let s = step(&State::default(), &op(Request::Put { key: "l".into(), value: "v".into(), lease: 7 }, Some(Response::Put))).unwrap();
        let s = step(&s, &op(Request::Put { key: "m".into(), value: "w".into(), lease: 8 }, None)).unwrap();
        let s = step(&s, &op(Request::LeaseRevoke { id: 7, group: "l".into() }, Some(Response::LeaseRevoke))).unwrap();
        assert_eq!(s.kvs.keys().collect::<Vec<_>>(), vec!["m"]);
    }
}
