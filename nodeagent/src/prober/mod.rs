//! Mirrors kubelet's pkg/kubelet/prober (and pkg/probe for the handlers): container probes.
//!
//! A probe asks a running container whether it is healthy. Three kinds, one question each:
//! - **startup**: has the application started? Until it has, the other two do not run.
//! - **liveness**: is it still alive? A failure kills the container, which restarts per the
//!   pod's restartPolicy.
//! - **readiness**: may it receive traffic? It drives the container's `ready` and the pod's
//!   Ready and ContainersReady conditions.
//!
//! The flow, in Kubernetes' shape:
//! 1. SyncPod calls [`ProberManager::add_pod`]: one [`worker`] (a tokio task) per container and
//!    probe type, each ticking every `periodSeconds`.
//! 2. Each tick the worker reads the pod's status from the status manager, follows the
//!    container's current ID, and — once `initialDelaySeconds` have passed since the container
//!    started, and (for liveness and readiness) once it has started — runs the probe
//!    ([`prober::Prober`], with the handlers in [`probe`]: exec through CRI ExecSync, httpGet,
//!    tcpSocket).
//! 3. `successThreshold` successes or `failureThreshold` failures in a row change the cached
//!    result for that container ID ([`results`]); a change is sent to the sync loop, which
//!    resyncs the pod at once.
//! 4. The resync reads the results: `compute_pod_actions` kills a container whose liveness or
//!    startup result is Failure, and the status generator takes `started` and `ready` from
//!    [`ProberManager::readiness_and_startup`].
//! 5. SyncTerminatingPod stops the liveness and startup workers; SyncTerminatedPod removes the
//!    pod's workers ([`ProberManager::remove_pod`]).
//!
//! ## Implementation caveats
//! - gRPC probes are not implemented: such a probe errors, and its result is never changed.
//! - A probe's own `terminationGracePeriodSeconds` is ignored: a liveness kill uses the pod's.
//! - An exec probe's command is run as written: `$(VAR)` references are not expanded.
//! - After an agent restart every readiness result starts again from "not ready" until the
//!   first probe (as in the kubelet), so adopted pods briefly report Ready=False.
//! - No `prober_probe_total` metric yet.

pub(crate) mod probe;
#[allow(clippy::module_inception)]
pub(crate) mod prober;
pub(crate) mod prober_manager;
pub(crate) mod results;
pub(crate) mod worker;

use std::fmt;

pub(crate) use prober::{ProbeRunner, Prober};
pub(crate) use prober_manager::ProberManager;
pub(crate) use results::{PodProbeResults, ProbeResult};

/// The three kinds of probe (kubelet's probeType).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum ProbeType {
    Liveness,
    Readiness,
    Startup,
}

impl fmt::Display for ProbeType {
    /// As Kubernetes writes it in events: "Liveness probe failed: …".
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ProbeType::Liveness => "Liveness",
            ProbeType::Readiness => "Readiness",
            ProbeType::Startup => "Startup",
        })
    }
}

/// How many times a probe that errors (rather than fails) is tried within one tick
/// (kubelet's maxProbeRetries).
pub(crate) const MAX_PROBE_RETRIES: usize = 3;

/// Output kept from a probe (exec output, HTTP body) for events and logs (kubelet's
/// maxProbeOutputLength / maxRespBodyLength: 10 KiB).
pub(crate) const MAX_PROBE_OUTPUT: usize = 10 * 1024;

/// Kubernetes' defaults for a probe's timing fields.
pub(crate) const DEFAULT_PERIOD_SECONDS: i32 = 10;
pub(crate) const DEFAULT_TIMEOUT_SECONDS: i32 = 1;
pub(crate) const DEFAULT_SUCCESS_THRESHOLD: i32 = 1;
pub(crate) const DEFAULT_FAILURE_THRESHOLD: i32 = 3;
