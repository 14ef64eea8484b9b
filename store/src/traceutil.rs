//! What this member did for each recent revision, for `kubelab trace`: the store's hops of a
//! pod's journey (proposal, replication and commit, apply), per revision.
//!
//! etcd keeps the same kind of record (server/etcdserver's use of pkg/traceutil: "trace[…] put …
//! step: 'process raft request'") but only logs it for requests slower than 100 ms. kubelab keeps
//! the recent revisions in a bounded ring instead and serves them through a small debug service
//! on the client port (`kubelab.debugpb.Trace`, [`crate::v3rpc::trace`]): the API server knows the
//! revision each of its writes got and asks for those. A real etcd answers UNIMPLEMENTED, and the
//! trace then goes without the store's steps.
//!
//! Each member records what it saw: the member a client wrote through records when the request
//! reached its raft thread, when it was proposed (a follower forwards the proposal to the leader)
//! and when it came back committed; every member records when it applied the entry.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use proto::debugpb::RevisionStep;

/// Revisions remembered per member; the oldest is forgotten first. A pod's journey to Running
/// takes a handful of revisions, but a busy cluster writes leases and events in between: a few
/// thousand revisions reach back a minute or more at the lab's rate of writes.
pub const MAX_REVISIONS: usize = 2048;

/// Most revisions one request may ask for.
pub const MAX_ASKED: usize = 256;

/// Nanoseconds since the Unix epoch, now (wall-clock: the steps of every component are merged on
/// one time axis).
pub fn now_nanos() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as i64).unwrap_or_default()
}

/// When a proposal of this member's own passed the raft thread, by sequence number.
#[derive(Clone, Copy, Debug)]
pub struct Proposal {
    /// The raft thread took the request off its input channel.
    pub received: i64,
    /// It was handed to raft (after a leader became known).
    pub proposed: Option<i64>,
}

/// One entry applied, as the Ready loop saw it.
#[derive(Clone, Debug)]
pub struct Applied {
    pub index: u64,
    pub revision: i64,
    /// The member that proposed it (its id), and its sequence number there.
    pub origin: u64,
    pub seq: u64,
    /// The first key the entry wrote.
    pub key: String,
    /// The Ready that carried it as committed was taken.
    pub committed: i64,
    pub apply_start: i64,
    pub apply_end: i64,
}

/// The ring of recent revisions' steps.
pub struct RevisionTrace {
    member: String,
    member_id: u64,
    inner: Mutex<Ring>,
}

/// What is kept per revision: the times only, turned into steps when asked. The raft thread
/// records every revision, and it is the store's one thread for writes: a record costs it one
/// allocation (the key), not a map per step.
struct Record {
    applied: Applied,
    proposal: Option<Proposal>,
}

#[derive(Default)]
struct Ring {
    order: VecDeque<i64>,
    records: HashMap<i64, Record>,
}

impl RevisionTrace {
    pub fn new(member: &str, member_id: u64) -> RevisionTrace {
        RevisionTrace { member: member.to_string(), member_id, inner: Mutex::new(Ring::default()) }
    }

    /// The name of the member that keeps this record.
    pub fn member(&self) -> &str {
        &self.member
    }

    /// Records an applied entry; `proposal` is set when this member proposed it.
    pub fn record(&self, applied: Applied, proposal: Option<Proposal>) {
        if !podtrace::enabled() {
            return;
        }
        let proposal = proposal.filter(|_| applied.origin == self.member_id);
        let revision = applied.revision;
        let mut ring = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if ring.records.insert(revision, Record { applied, proposal }).is_none() {
            if ring.order.len() >= MAX_REVISIONS
                && let Some(oldest) = ring.order.pop_front()
            {
                ring.records.remove(&oldest);
            }
            ring.order.push_back(revision);
        }
    }

    /// The steps recorded for `revisions`, in the order asked: `propose` and `replicate and
    /// commit` where this member proposed the entry, `apply` everywhere.
    pub fn steps(&self, revisions: &[i64]) -> Vec<RevisionStep> {
        let ring = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let mut out = Vec::new();
        for r in revisions.iter().filter_map(|r| ring.records.get(r)) {
            let a = &r.applied;
            let step = |name: &str, start: i64, end: i64| {
                let mut fields = HashMap::from([("index".to_string(), a.index.to_string()), ("member".to_string(), self.member.clone())]);
                if !a.key.is_empty() {
                    fields.insert("key".into(), a.key.clone());
                }
                RevisionStep { name: name.into(), revision: a.revision, start_unix_nanos: start, end_unix_nanos: end.max(start), fields }
            };
            if let Some(p) = r.proposal {
                let proposed = p.proposed.unwrap_or(p.received);
                out.push(step("propose", p.received, proposed));
                out.push(step("replicate and commit", proposed, a.committed));
            }
            out.push(step("apply", a.apply_start, a.apply_end));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn applied(revision: i64, origin: u64) -> Applied {
        Applied { index: revision as u64 + 10, revision, origin, seq: 7, key: "/registry/pods/default/web".into(), committed: 300, apply_start: 310, apply_end: 320 }
    }

    #[test]
    fn the_proposer_records_three_steps_and_the_others_one() {
        let t = RevisionTrace::new("s1", 1);
        t.record(applied(5, 1), Some(Proposal { received: 100, proposed: Some(200) }));
        let s = t.steps(&[5]);
        let names: Vec<_> = s.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["propose", "replicate and commit", "apply"]);
        assert_eq!((s[0].start_unix_nanos, s[0].end_unix_nanos), (100, 200));
        assert_eq!((s[1].start_unix_nanos, s[1].end_unix_nanos), (200, 300));
        assert_eq!((s[2].start_unix_nanos, s[2].end_unix_nanos), (310, 320));
        assert_eq!(s[2].fields["key"], "/registry/pods/default/web");
        assert_eq!(s[2].fields["member"], "s1");

        // Another member's entry: only the apply is ours, even with a proposal of the same seq.
        t.record(applied(6, 2), Some(Proposal { received: 100, proposed: None }));
        assert_eq!(t.steps(&[6]).iter().map(|s| s.name.as_str()).collect::<Vec<_>>(), ["apply"]);
        assert!(t.steps(&[99]).is_empty());
    }

    #[test]
    fn the_oldest_revisions_are_forgotten_first() {
        let t = RevisionTrace::new("s1", 1);
        for r in 1..=(MAX_REVISIONS as i64 + 5) {
            t.record(applied(r, 2), None);
        }
        assert!(t.steps(&[1, 5]).is_empty());
        assert_eq!(t.steps(&[6, MAX_REVISIONS as i64 + 5]).len(), 2);
    }
}
