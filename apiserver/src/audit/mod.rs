//! Mirrors k8s.io/apiserver/pkg/audit and plugin/pkg/audit/log: the audit log — who did what,
//! when, and what came of it — as `audit.k8s.io/v1` Events, one JSON line each, in the file of
//! `--audit-log-path` (`-`: standard output), for the requests `--audit-policy-file` asks about.
//!
//! 1. [`policy`]: the Policy's rules, in order; the first that matches a request (its user and
//!    groups, verb, resource or path, namespace) gives its level — `None`, `Metadata` (who,
//!    what, when, the answer's code), `Request` (and the request's body), `RequestResponse`
//!    (and the answer's body) — and the stages left out. No rule matching: not audited.
//! 2. [`event`]: a request's Event, begun once the request's user is known
//!    (`RequestReceived`), with the authorizer's decision and reason as annotations, and written
//!    again when the answer is (`ResponseComplete`, with the code; `ResponseStarted` for a
//!    long-running request such as a watch). `crate::filters::audit` drives it.
//! 3. [`log`]: the backend, writing each Event as a line.
//!
//! Implementation caveats:
//! - JSON lines only (`--audit-log-format=json`); no rotation (`--audit-log-maxage`,
//!   `-maxbackup`, `-maxsize`), no webhook backend, no batching: an Event is written as it
//!   happens.
//! - A streamed answer (a watch, a log, an exec) is not kept as `responseObject`, and a
//!   long-running request's Event is written at `ResponseStarted` only (kube-apiserver writes
//!   `ResponseComplete` too when it ends).
//! - A request refused by authentication (401) is audited with an empty user, as kube-apiserver's
//!   failed-authentication audit does, but only at the level a rule without users or groups gives.

pub mod event;
pub mod log;
pub mod policy;

/// What audits: the policy and where its Events go.
pub struct Auditor {
    pub policy: policy::Policy,
    pub backend: log::Backend,
}
