//! The clients: concurrent workers issuing a mix of requests and recording each one. Mirrors
//! etcd's `tests/robustness/traffic/etcd.go` (the request mix, unique values, transactions
//! conditioned on what the client last read, leases) and `tests/robustness/client/client.go`.
//!
//! Each worker is pinned to one member, so a member that is cut off or paused is asked too: a
//! store that answers from a stale state there is caught. Keys are grouped (`g<N>/a`, `g<N>/b`
//! for puts, deletes and transactions; `l<N>/k` for keys on leases): a transaction or a lease
//! never spans two groups, which lets the checker split the history by group.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use etcd_client::{Compare as EtcdCompare, CompareOp, GetOptions, PutOptions, Txn, TxnOp as EtcdTxnOp, TxnOpResponse};

use super::history::{Clock, Compare, KeyValue, Operation, Outcome, Request, Response, Time, TxnOp};

/// How many key groups of each kind.
pub const KV_GROUPS: usize = 8;
pub const LEASE_GROUPS: usize = 3;

/// A reproducible stream of random numbers (SplitMix64): a run is replayed from its seed.
#[derive(Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E3779B97F4A7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58476D1CE4E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D049BB133111EB);
        z ^ (z >> 31)
    }
    /// A number in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// One worker's settings.
pub struct Worker {
    pub client: usize,
    pub member: usize,
    pub endpoint: String,
    pub prefix: String,
    pub seed: u64,
    /// How long one request may take before it counts as failed.
    pub request_timeout: Duration,
}

/// Runs a worker until `stop`; returns its operations (ids are assigned later).
pub async fn run_worker(w: Worker, clock: Clock, stop: Arc<AtomicBool>) -> Vec<Operation> {
    let mut rng = Rng::new(w.seed);
    let mut ops = Vec::new();
    let mut seq = 0u64;
    // What this client last read of each key: what its transactions compare against.
    let mut last_read: BTreeMap<String, Option<String>> = BTreeMap::new();
    // A lease this client holds, and the group of the key it put on it.
    let mut lease: Option<(i64, String)> = None;
    let mut client: Option<etcd_client::Client> = None;
    while !stop.load(Ordering::SeqCst) {
        let c = match client.as_mut() {
            Some(c) => c,
            None => match tokio::time::timeout(Duration::from_secs(1), etcd_client::Client::connect([w.endpoint.as_str()], None)).await {
                Ok(Ok(c)) => client.insert(c),
                _ => {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let g = rng.below(KV_GROUPS as u64);
        let key = |k: &str| format!("{}g{g}/{k}", w.prefix);
        let mut value = || {
            seq += 1;
            format!("c{}-{seq}", w.client)
        };
        let roll = rng.below(100);
        let request = match roll {
            0..30 => Request::Put { key: key(if rng.below(2) == 0 { "a" } else { "b" }), value: value(), lease: 0 },
            30..50 => Request::Range { key: key(if rng.below(2) == 0 { "a" } else { "b" }), serializable: false },
            50..58 => Request::Range { key: key(if rng.below(2) == 0 { "a" } else { "b" }), serializable: true },
            58..66 => Request::Delete { key: key(if rng.below(2) == 0 { "a" } else { "b" }) },
            66..88 => {
                let a = key("a");
                let compare = match last_read.get(&a) {
                    Some(Some(v)) => Compare::ValueEquals { key: a.clone(), value: v.clone() },
                    _ => Compare::Absent { key: a.clone() },
                };
                Request::Txn {
                    compare,
                    then: vec![TxnOp::Put { key: a.clone(), value: value() }, TxnOp::Put { key: key("b"), value: value() }],
                    otherwise: vec![TxnOp::Range { key: a }, TxnOp::Range { key: key("b") }],
                }
            }
            88..92 => Request::Range { key: format!("{}l{}/k", w.prefix, rng.below(LEASE_GROUPS as u64)), serializable: false },
            _ => match lease.take() {
                Some((id, group)) => Request::LeaseRevoke { id, group },
                None => Request::LeaseGrant { ttl: 600 },
            },
        };
        let (invoke, outcome) = send(c, &request, &clock, w.request_timeout).await;
        let failed = matches!(outcome, Outcome::Failed { .. });
        if failed {
            // A fresh connection next time: the old one may be stuck on a dead member.
            client = None;
        }
        // Remember what was read; follow a grant with a put on the new lease.
        let mut follow = None;
        if let Outcome::Ok { response, .. } = &outcome {
            match (&request, response) {
                (Request::Range { key, .. }, Response::Range { kv }) => {
                    last_read.insert(key.clone(), kv.as_ref().map(|kv| kv.value.clone()));
                }
                (Request::Txn { otherwise, .. }, Response::Txn { succeeded: false, ranges }) => {
                    for (o, kv) in otherwise.iter().zip(ranges) {
                        if let TxnOp::Range { key } = o {
                            last_read.insert(key.clone(), kv.as_ref().map(|kv| kv.value.clone()));
                        }
                    }
                }
                (Request::LeaseGrant { .. }, Response::LeaseGrant { id }) => {
                    let lg = rng.below(LEASE_GROUPS as u64);
                    let group = format!("l{lg}");
                    follow = Some(Request::Put { key: format!("{}{group}/k", w.prefix), value: value(), lease: *id });
                    lease = Some((*id, group));
                }
                _ => {}
            }
        }
        ops.push(Operation { id: 0, client: w.client, member: w.member, request, invoke, outcome });
        if let (Some(request), Some(c)) = (follow, client.as_mut()) {
            let (invoke, outcome) = send(c, &request, &clock, w.request_timeout).await;
            ops.push(Operation { id: 0, client: w.client, member: w.member, request, invoke, outcome });
        }
        if failed {
            // Back off, as a client does, rather than fill the history with refused connections.
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    ops
}

/// Sends `request` and records when it was invoked and how it ended: a response, an error, or
/// no answer within `timeout`.
async fn send(c: &mut etcd_client::Client, request: &Request, clock: &Clock, timeout: Duration) -> (Time, Outcome) {
    let invoked = clock.now();
    let outcome = match tokio::time::timeout(timeout, execute(c, request)).await {
        Ok(Ok((response, revision))) => Outcome::Ok { response, revision, returned: clock.now() },
        Ok(Err(e)) => Outcome::Failed { error: e.to_string(), at: clock.now() },
        Err(_) => Outcome::Failed { error: format!("no answer in {timeout:?}"), at: clock.now() },
    };
    (invoked, outcome)
}

fn kv_of(kv: &etcd_client::KeyValue) -> KeyValue {
    KeyValue { value: String::from_utf8_lossy(kv.value()).into_owned(), mod_revision: kv.mod_revision(), lease: kv.lease() }
}

async fn execute(c: &mut etcd_client::Client, request: &Request) -> Result<(Response, i64), etcd_client::Error> {
    let rev = |h: Option<&etcd_client::ResponseHeader>| h.map(|h| h.revision()).unwrap_or(0);
    match request {
        Request::Range { key, serializable } => {
            let opts = if *serializable { Some(GetOptions::new().with_serializable()) } else { None };
            let r = c.get(key.as_str(), opts).await?;
            Ok((Response::Range { kv: r.kvs().first().map(kv_of) }, rev(r.header())))
        }
        Request::Put { key, value, lease } => {
            let opts = (*lease != 0).then(|| PutOptions::new().with_lease(*lease));
            let r = c.put(key.as_str(), value.as_str(), opts).await?;
            Ok((Response::Put, rev(r.header())))
        }
        Request::Delete { key } => {
            let r = c.delete(key.as_str(), None).await?;
            Ok((Response::Delete { deleted: r.deleted() }, rev(r.header())))
        }
        Request::Txn { compare, then, otherwise } => {
            let cmp = match compare {
                Compare::ValueEquals { key, value } => EtcdCompare::value(key.as_str(), CompareOp::Equal, value.as_str()),
                Compare::Absent { key } => EtcdCompare::version(key.as_str(), CompareOp::Equal, 0),
            };
            let ops = |b: &[TxnOp]| -> Vec<EtcdTxnOp> {
                b.iter()
                    .map(|o| match o {
                        TxnOp::Put { key, value } => EtcdTxnOp::put(key.as_str(), value.as_str(), None),
                        TxnOp::Range { key } => EtcdTxnOp::get(key.as_str(), None),
                    })
                    .collect()
            };
            let txn = Txn::new().when([cmp]).and_then(ops(then)).or_else(ops(otherwise));
            let r = c.txn(txn).await?;
            let ranges = r
                .op_responses()
                .into_iter()
                .filter_map(|o| match o {
                    TxnOpResponse::Get(g) => Some(g.kvs().first().map(kv_of)),
                    _ => None,
                })
                .collect();
            Ok((Response::Txn { succeeded: r.succeeded(), ranges }, rev(r.header())))
        }
        Request::LeaseGrant { ttl } => {
            let r = c.lease_grant(*ttl, None).await?;
            Ok((Response::LeaseGrant { id: r.id() }, rev(r.header())))
        }
        Request::LeaseRevoke { id, .. } => {
            let r = c.lease_revoke(*id).await?;
            Ok((Response::LeaseRevoke, rev(r.header())))
        }
    }
}
