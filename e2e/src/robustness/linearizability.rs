//! Is there an order of the operations, each taking effect at one instant between its
//! invocation and its return, that the model accepts? Mirrors porcupine's `checker.go` (the
//! Wing–Gong algorithm with Lowe's memoization, as porcupine implements it), which etcd's
//! robustness suite uses through `tests/robustness/validate/operations.go`.
//!
//! 1. The history is split into partitions (key groups, [`super::model::partition_of`]):
//!    linearizability is compositional, so each group is checked alone.
//! 2. Each partition's operations become a list of call and return events in time order (calls
//!    first at equal times: touching operations are concurrent). A failed write has no return:
//!    its return event goes last.
//! 3. Depth-first search: take the first call in the list whose operation the model accepts now,
//!    "lift" it (remove its call and return), and go on from the head; reaching a return event
//!    means an operation that had to have happened by then could not be placed, so undo the last
//!    choice. A (set of operations placed, state) pair seen before is not explored again.
//! 4. An empty list is a linearization. If the search runs out of choices, the history is not
//!    linearizable; the longest prefix placed tells a person where it went wrong.

use std::collections::{BTreeMap, HashSet};
use std::time::{Duration, Instant};

use super::history::{Operation, Time};
use super::model::{State, partition_of, step};

/// The verdict for one partition.
#[derive(Debug)]
pub enum Verdict {
    Linearizable,
    /// No order exists. `longest`: the longest sequence of operation ids the search placed;
    /// `unplaced`: the operations whose return came before any of them could be placed next.
    Illegal { longest: Vec<usize>, unplaced: Vec<usize> },
    /// The search took longer than it was given: neither proven nor refuted.
    TimedOut,
}

/// A partition's result.
#[derive(Debug)]
pub struct PartitionResult {
    pub partition: String,
    pub operations: usize,
    pub verdict: Verdict,
    pub took: Duration,
}

/// Checks every partition of `ops`, giving each at most `timeout`.
pub fn check(prefix: &str, ops: &[Operation], timeout: Duration) -> Vec<PartitionResult> {
    let mut parts: BTreeMap<String, Vec<&Operation>> = BTreeMap::new();
    for op in ops {
        if let Some(p) = partition_of(prefix, op) {
            parts.entry(p).or_default().push(op);
        }
    }
    parts
        .into_iter()
        .map(|(partition, ops)| {
            let started = Instant::now();
            let verdict = check_partition(&ops, timeout);
            PartitionResult { partition, operations: ops.len(), verdict, took: started.elapsed() }
        })
        .collect()
}

#[derive(Clone, Copy)]
struct Node {
    prev: usize,
    next: usize,
    /// Index into the partition's operations.
    op: usize,
    /// For a call: the index of its return node.
    ret: Option<usize>,
}

const NIL: usize = usize::MAX;

/// A set of operation indexes as bits.
#[derive(Clone, PartialEq, Eq, Hash)]
struct Bits(Vec<u64>);

impl Bits {
    fn new(n: usize) -> Self {
        Self(vec![0; n.div_ceil(64)])
    }
    fn set(&mut self, i: usize) {
        self.0[i / 64] |= 1 << (i % 64);
    }
    fn clear(&mut self, i: usize) {
        self.0[i / 64] &= !(1 << (i % 64));
    }
}

fn check_partition(ops: &[&Operation], timeout: Duration) -> Verdict {
    // Step 2: the event list. Node 0 is the head sentinel.
    let mut events: Vec<(Time, u8, usize)> = Vec::with_capacity(ops.len() * 2);
    for (i, op) in ops.iter().enumerate() {
        events.push((op.invoke, 0, i));
        events.push((op.returned().unwrap_or(Time::MAX), 1, i));
    }
    events.sort();
    let mut nodes = vec![Node { prev: NIL, next: NIL, op: NIL, ret: None }];
    let mut call_node = vec![NIL; ops.len()];
    for (_, kind, i) in &events {
        let idx = nodes.len();
        let prev = idx - 1;
        nodes[prev].next = idx;
        nodes.push(Node { prev, next: NIL, op: *i, ret: None });
        if *kind == 0 {
            call_node[*i] = idx;
        } else {
            nodes[call_node[*i]].ret = Some(idx);
        }
    }

    let lift = |nodes: &mut Vec<Node>, call: usize| {
        let ret = nodes[call].ret.expect("a call has a return");
        let (p, n) = (nodes[call].prev, nodes[call].next);
        nodes[p].next = n;
        if n != NIL {
            nodes[n].prev = p;
        }
        let (p, n) = (nodes[ret].prev, nodes[ret].next);
        nodes[p].next = n;
        if n != NIL {
            nodes[n].prev = p;
        }
    };
    let unlift = |nodes: &mut Vec<Node>, call: usize| {
        let ret = nodes[call].ret.expect("a call has a return");
        let (p, n) = (nodes[ret].prev, nodes[ret].next);
        nodes[p].next = ret;
        if n != NIL {
            nodes[n].prev = ret;
        }
        let (p, n) = (nodes[call].prev, nodes[call].next);
        nodes[p].next = call;
        if n != NIL {
            nodes[n].prev = call;
        }
    };

    // Step 3: the search.
    let started = Instant::now();
    let mut state = State::default();
    let mut placed = Bits::new(ops.len());
    let mut seen: HashSet<(Bits, State)> = HashSet::new();
    let mut stack: Vec<(usize, State)> = Vec::new();
    let mut longest: Vec<usize> = Vec::new();
    let mut stuck_at: Vec<usize> = Vec::new();
    let mut entry = nodes[0].next;
    let mut steps = 0u64;
    while nodes[0].next != NIL {
        steps += 1;
        if steps % 4096 == 0 && started.elapsed() > timeout {
            return Verdict::TimedOut;
        }
        if let Some(_ret) = nodes[entry].ret {
            let i = nodes[entry].op;
            if let Some(next) = step(&state, ops[i]) {
                let mut with = placed.clone();
                with.set(i);
                if seen.insert((with.clone(), next.clone())) {
                    stack.push((entry, std::mem::replace(&mut state, next)));
                    placed = with;
                    lift(&mut nodes, entry);
                    entry = nodes[0].next;
                    continue;
                }
            }
            entry = nodes[entry].next;
        } else {
            // A return event: its operation should have been placed by now.
            if stack.len() >= longest.len() {
                longest = stack.iter().map(|(n, _)| ops[nodes[*n].op].id).collect();
                stuck_at = unplaced_before(&nodes, entry).into_iter().map(|i| ops[i].id).collect();
            }
            let Some((call, prev)) = stack.pop() else {
                return Verdict::Illegal { longest, unplaced: stuck_at };
            };
            state = prev;
            placed.clear(nodes[call].op);
            unlift(&mut nodes, call);
            entry = nodes[call].next;
        }
    }
    Verdict::Linearizable
}

/// The operations whose calls are still in the list up to `ret` (inclusive of the one that
/// returns there): the candidates the search could not place.
fn unplaced_before(nodes: &[Node], ret: usize) -> Vec<usize> {
    let mut out = Vec::new();
    let mut n = nodes[0].next;
    while n != NIL {
        if nodes[n].ret.is_some() {
            out.push(nodes[n].op);
        }
        if n == ret {
            break;
        }
        n = nodes[n].next;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::robustness::history::{KeyValue, Outcome, Request, Response};

    fn put(id: usize, value: &str, invoke: Time, ret: Option<Time>) -> Operation {
        Operation {
            id,
            client: id,
            member: 0,
            request: Request::Put { key: "/p/g0/a".into(), value: value.into(), lease: 0 },
            invoke,
            outcome: match ret {
                Some(returned) => Outcome::Ok { response: Response::Put, revision: id as i64 + 1, returned },
                None => Outcome::Failed { error: "deadline exceeded".into(), at: invoke + 1 },
            },
        }
    }

    fn get(id: usize, value: Option<&str>, invoke: Time, ret: Time) -> Operation {
        Operation {
            id,
            client: id,
            member: 0,
            request: Request::Range { key: "/p/g0/a".into(), serializable: false },
            invoke,
            outcome: Outcome::Ok {
                response: Response::Range { kv: value.map(|v| KeyValue { value: v.into(), mod_revision: 1, lease: 0 }) },
                revision: 1,
                returned: ret,
            },
        }
    }

    fn verdict(ops: &[Operation]) -> Verdict {
        let mut r = check("/p/", ops, Duration::from_secs(10));
        assert_eq!(r.len(), 1);
        r.remove(0).verdict
    }

    #[test]
    fn concurrent_read_may_see_either() {
        let ops = [put(0, "x", 0, Some(10)), get(1, None, 1, 5), get(2, Some("x"), 2, 6)];
        assert!(matches!(verdict(&ops), Verdict::Linearizable));
    }

    #[test]
    fn stale_read_after_a_write_returned_is_caught() {
        let ops = [put(0, "x", 0, Some(10)), put(1, "y", 11, Some(20)), get(2, Some("x"), 21, 30)];
        match verdict(&ops) {
            Verdict::Illegal { longest, unplaced } => {
                assert_eq!(longest, vec![0, 1]);
                assert!(unplaced.contains(&2), "{unplaced:?}");
            }
            v => panic!("expected illegal, got {v:?}"),
        }
    }

    #[test]
    fn read_going_back_in_time_is_caught() {
        // Two sequential reads see y then x, though x was written before y.
        let ops = [put(0, "x", 0, Some(10)), put(1, "y", 5, Some(40)), get(2, Some("y"), 12, 15), get(3, Some("x"), 16, 20)];
        assert!(matches!(verdict(&ops), Verdict::Illegal { .. }));
    }

    #[test]
    fn failed_write_may_or_may_not_have_happened() {
        let seen = [put(0, "x", 0, None), get(1, Some("x"), 5, 6)];
        assert!(matches!(verdict(&seen), Verdict::Linearizable));
        let unseen = [put(0, "x", 0, None), get(1, None, 5, 6)];
        assert!(matches!(verdict(&unseen), Verdict::Linearizable));
        // But once seen it cannot be unseen.
        let flicker = [put(0, "x", 0, None), get(1, Some("x"), 5, 6), get(2, None, 7, 8)];
        assert!(matches!(verdict(&flicker), Verdict::Illegal { .. }));
    }

    #[test]
    fn a_lost_acknowledged_write_is_caught() {
        let ops = [put(0, "x", 0, Some(5)), get(1, None, 6, 7)];
        assert!(matches!(verdict(&ops), Verdict::Illegal { .. }));
    }

    #[test]
    fn many_concurrent_operations_are_decided() {
        // 6 clients × 200 overlapping puts and reads: memoization keeps the search small enough
        // to end within the check's time limit (a timed-out check is not Linearizable).
        let mut ops = Vec::new();
        let mut last = None;
        for round in 0..200u64 {
            let t = round * 10;
            let v = format!("v{round}");
            ops.push(put(ops.len(), &v, t, Some(t + 8)));
            for c in 0..5 {
                ops.push(get(ops.len(), if c % 2 == 0 { last.as_deref() } else { Some(v.as_str()) }, t + 1, t + 7));
            }
            last = Some(v);
        }
        assert!(matches!(verdict(&ops), Verdict::Linearizable));
    }
}
