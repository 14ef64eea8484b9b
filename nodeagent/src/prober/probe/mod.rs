//! Mirrors Kubernetes' pkg/probe: the three handlers a probe can use, each answering with an
//! [`Outcome`] and an output (the text events show).
//!
//! - [`exec`]: run a command in the container through CRI ExecSync; exit 0 is success.
//! - [`http`]: GET a URL on the pod; 200 ≤ status < 400 is success.
//! - [`tcp`]: open a TCP connection; connecting is success.

pub(crate) mod exec;
pub(crate) mod http;
pub(crate) mod tcp;

/// A handler's verdict (pkg/probe's Result).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    Success,
    /// Success, with something worth an event (an HTTP redirect to another host not followed).
    Warning,
    Failure,
}

/// Keep at most [`super::MAX_PROBE_OUTPUT`] bytes of `bytes`, as text.
pub(crate) fn truncate_output(bytes: &[u8]) -> String {
    let cut = &bytes[..bytes.len().min(super::MAX_PROBE_OUTPUT)];
    String::from_utf8_lossy(cut).into_owned()
}
