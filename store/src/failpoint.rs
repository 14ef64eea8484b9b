//! Mirrors etcd's use of `go.etcd.io/gofail` (its `runtime` package: `terms.go`, `http.go`,
//! `runtime.go`): failpoints, named points in the store's code where a test makes a member crash,
//! stall or fail, for the robustness tests, which run a cluster under faults and check what its
//! clients saw.
//!
//! They exist only with the `store` crate's `failpoints` feature, which nothing enables by
//! default: the root crate's `failpoints` feature builds the `kubelab-failpoints` binary with
//! it, and `kubelab` itself never has it. Without the feature, `failpoint!` expands to `()`
//! and `injected_bug!` to `false`: a site compiles to nothing, the rest of this module is not
//! compiled at all, and the `failpoint` crate is not linked. etcd gets the same by rewriting `// gofail: var name struct{}`
//! comments into code only for its failpoint builds.
//!
//! # Setting failpoints
//! At start from `KUBELAB_FAILPOINTS` (`name=term;…`), or at run time over HTTP when
//! `KUBELAB_FAILPOINTS_HTTP=127.0.0.1:PORT` is set: gofail's terms and endpoint, which the
//! `failpoint` crate (their engine, shared with the node agent's failpoints) describes. A
//! malformed term or an unknown name stops the member before it opens its data directory.
//!
//! # The failpoints
//! [`FAILPOINTS`] lists every name with its site; the store's tour (`lib.rs`) repeats them.
//! Three of them, `bug…`, are not faults but deliberately injected bugs, for checking that the
//! robustness tests' checkers catch what they must: see their entries.

/// Every failpoint compiled in, with where it sits. A test checks that the sites and this list
/// agree.
#[cfg(feature = "failpoints")]
pub const FAILPOINTS: &[(&str, &str)] = &[
    ("raftBeforeLeaderSend", "raft_node.rs, Ready step 1: a leader's messages, before they go to the transport"),
    ("raftBeforeFollowerSend", "server.rs, the WAL writer's report: a follower's messages that waited for its write (append responses, votes), before they are sent"),
    ("raftBeforeApplySnap", "raft_node.rs, Ready step 2: a leader's snapshot, before the state machine is restored from it"),
    ("raftAfterApplySnap", "raft_node.rs, Ready step 2: the state machine restored in memory, nothing of it durable"),
    ("raftBeforeSaveSnap", "raft_node.rs, Ready step 2: before the restored state and the snapshot marker are made durable in sled"),
    ("raftAfterSaveSnap", "raft_node.rs, Ready step 2: the snapshot durable in sled, the WAL's rewrite to it not yet written"),
    ("raftBeforeSave", "wal.rs, Wal::run: before a Ready's HardState and entries are written and fsynced"),
    ("raftAfterSave", "wal.rs, Wal::run: written and fsynced; raft not told, the messages that waited not sent"),
    ("walBeforeSync", "wal.rs, Wal::sync: before the tail segment's fdatasync; `return` fails it unsynced"),
    ("walAfterSync", "wal.rs, Wal::sync: after the fdatasync; `return` reports it failed"),
    ("beforeCommit", "raft_node.rs, commit_backend: before the pending state machine batch goes to the engine"),
    ("afterCommit", "raft_node.rs, commit_backend: the batch handed to the engine's writer thread"),
    ("compactBeforeCommitScheduledCompact", "apply.rs, a Compaction entry: before the key space is compacted"),
    ("compactAfterCommitScheduledCompact", "apply.rs, a Compaction entry: compacted in memory, its deletions in the pending batch"),
    ("bugStaleRead", "v3rpc/kv.rs: INJECTED BUG, linearizable Range and read-only Txn served without ReadIndex"),
    ("bugEarlyAck", "raft_node.rs, on_persisted: INJECTED BUG, a leader commits what its own WAL holds, without a quorum"),
    ("bugWatchSkip", "v3rpc/watch.rs: INJECTED BUG, a watch catching up from history starts one revision late"),
    ("bugSkipFsync", "wal.rs: INJECTED BUG, the WAL's fdatasync is skipped: records are acknowledged before they are durable"),
];

/// A failpoint site: `failpoint!("name")` does what the failpoint's term says (sleep, crash).
/// `failpoint!("name", |msg| failure)` also evaluates `failure` when the term is `return`, with
/// `msg: String` its value: the site's failure path (`return Err(…)`).
#[cfg(feature = "failpoints")]
macro_rules! failpoint {
    ($name:literal) => {{
        let _ = $crate::failpoint::eval($name);
    }};
    ($name:literal, |$msg:ident| $failure:expr) => {{
        if let Some($msg) = $crate::failpoint::eval($name) {
            $failure;
        }
    }};
}

/// Without the `failpoints` feature a site is nothing.
#[cfg(not(feature = "failpoints"))]
macro_rules! failpoint {
    ($name:literal) => {
        ()
    };
    ($name:literal, |$msg:ident| $failure:expr) => {
        ()
    };
}

/// The switch of an injected bug: true when its failpoint's term is `return` (and its `N*`/`P%`
/// allow it). Without the `failpoints` feature it is `false`, so the bug's branch is dead code
/// the compiler removes.
#[cfg(feature = "failpoints")]
macro_rules! injected_bug {
    ($name:literal) => {
        $crate::failpoint::eval($name).is_some()
    };
}

#[cfg(not(feature = "failpoints"))]
macro_rules! injected_bug {
    ($name:literal) => {
        false
    };
}

#[cfg(feature = "failpoints")]
pub(crate) use ::failpoint::eval;

/// Names the store's failpoints and sets what the environment asks for (the `failpoint`
/// crate's `init`); once per process, so members started in one process share them.
#[cfg(feature = "failpoints")]
pub(crate) fn init() -> crate::error::Result<()> {
    ::failpoint::init(FAILPOINTS).map_err(crate::error::Error::Config)
}

#[cfg(all(test, feature = "failpoints"))]
mod tests {
    use super::FAILPOINTS;

    #[test]
    fn failpoint_list_matches_the_sites_in_the_code() {
        let sources = [
            include_str!("apply.rs"),
            include_str!("raft_node.rs"),
            include_str!("server.rs"),
            include_str!("transport.rs"),
            include_str!("wal.rs"),
            include_str!("v3rpc/kv.rs"),
            include_str!("v3rpc/watch.rs"),
        ];
        let mut sites = Vec::new();
        for src in sources {
            for macro_name in ["failpoint!(\"", "injected_bug!(\""] {
                for (at, _) in src.match_indices(macro_name) {
                    let rest = &src[at + macro_name.len()..];
                    sites.push(rest[..rest.find('"').unwrap()].to_string());
                }
            }
        }
        let mut listed: Vec<String> = FAILPOINTS.iter().map(|(n, _)| n.to_string()).collect();
        listed.sort();
        sites.sort();
        let mut unique = sites.clone();
        unique.dedup();
        assert_eq!(unique, listed, "FAILPOINTS and the failpoint!/injected_bug! sites differ");
        // A name at two sites would make `N*` counts and crash points ambiguous, except for
        // a bug whose check is needed on more than one path.
        for name in &unique {
            let n = sites.iter().filter(|s| *s == name).count();
            assert!(n == 1 || name.starts_with("bug"), "{name} has {n} sites");
        }
    }
}
