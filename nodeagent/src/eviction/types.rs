//! Mirrors kubelet's eviction/api/types.go and eviction/types.go: the signals the eviction
//! manager watches, the thresholds set on them (`--eviction-hard`), what one observation of the
//! node found, and the functions the manager is handed to act on the pods ([`ActivePodsFunc`],
//! [`KillPodFunc`]).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::{Pod, PodStatus};

/// The pods the eviction manager may act on (kubelet's ActivePodsFunc): admitted, not finished,
/// not being deleted.
pub(crate) type ActivePodsFunc = Arc<dyn Fn() -> Vec<Arc<Pod>> + Send + Sync>;

/// What an eviction does to the pod's status before the pod is stopped (the status function
/// kubelet's KillPodFunc is handed).
pub(crate) type PodStatusFunc = Box<dyn FnOnce(&mut PodStatus) + Send>;

/// How the eviction manager stops a pod (kubelet's KillPodFunc): apply the status function to the
/// pod's status, then have its worker kill it with this grace period — the path a deletion takes.
/// Resolves to false when the kill could not be handed over (the sync loop is gone).
pub(crate) type KillPodFunc = Arc<dyn Fn(Arc<Pod>, i64, PodStatusFunc) -> BoxFuture<'static, bool> + Send + Sync>;

/// A resource the node can run short of (evictionapi.Signal). Each maps to a node condition
/// and to the resource the eviction message names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Signal {
    /// Memory capacity minus the working set of the root cgroup.
    MemoryAvailable,
    /// Free bytes on the filesystem of `--root-dir` (pod volumes, logs in kubelab's layout).
    NodeFsAvailable,
    /// Free inodes on that filesystem.
    NodeFsInodesFree,
    /// Free bytes on the runtime's image filesystem.
    ImageFsAvailable,
    /// Free inodes on the image filesystem.
    ImageFsInodesFree,
    /// `pid_max` minus the processes running.
    PidAvailable,
}

impl Signal {
    pub const ALL: [Signal; 6] = [
        Signal::MemoryAvailable,
        Signal::NodeFsAvailable,
        Signal::NodeFsInodesFree,
        Signal::ImageFsAvailable,
        Signal::ImageFsInodesFree,
        Signal::PidAvailable,
    ];

    /// The name `--eviction-hard` uses.
    pub fn as_str(self) -> &'static str {
        match self {
            Signal::MemoryAvailable => "memory.available",
            Signal::NodeFsAvailable => "nodefs.available",
            Signal::NodeFsInodesFree => "nodefs.inodesFree",
            Signal::ImageFsAvailable => "imagefs.available",
            Signal::ImageFsInodesFree => "imagefs.inodesFree",
            Signal::PidAvailable => "pid.available",
        }
    }

    pub fn parse(s: &str) -> Option<Signal> {
        Signal::ALL.into_iter().find(|sig| sig.as_str() == s)
    }

    /// The node condition a met threshold on this signal sets (signalToNodeCondition).
    pub(crate) fn node_condition(self) -> NodeConditionType {
        match self {
            Signal::MemoryAvailable => NodeConditionType::MemoryPressure,
            Signal::PidAvailable => NodeConditionType::PidPressure,
            _ => NodeConditionType::DiskPressure,
        }
    }

    /// The resource the eviction message says the node was low on (signalToResource).
    pub(crate) fn resource(self) -> &'static str {
        match self {
            Signal::MemoryAvailable => "memory",
            Signal::NodeFsAvailable | Signal::ImageFsAvailable => "ephemeral-storage",
            Signal::NodeFsInodesFree | Signal::ImageFsInodesFree => "inodes",
            Signal::PidAvailable => "pids",
        }
    }

    /// Whether node-level reclaim (container and image GC) can relieve this signal.
    pub(crate) fn is_disk(self) -> bool {
        self.node_condition() == NodeConditionType::DiskPressure
    }
}

impl std::fmt::Display for Signal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The pressure conditions the kubelet sets on its Node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
// The names are Kubernetes' condition types.
#[allow(clippy::enum_variant_names)]
pub(crate) enum NodeConditionType {
    MemoryPressure,
    DiskPressure,
    PidPressure,
}

impl NodeConditionType {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            NodeConditionType::MemoryPressure => "MemoryPressure",
            NodeConditionType::DiskPressure => "DiskPressure",
            NodeConditionType::PidPressure => "PIDPressure",
        }
    }
}

/// A threshold's value: an absolute amount (bytes, inodes, pids) or a share of capacity.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ThresholdValue {
    Quantity(i64),
    /// A fraction in (0, 1]: `10%` is 0.1.
    Percentage(f64),
}

/// One hard threshold: evict when `signal`'s available amount drops below `value`
/// (the only operator Kubernetes has is LessThan).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Threshold {
    pub signal: Signal,
    pub value: ThresholdValue,
}

/// What one observation found for a signal: the amount available and the capacity it is out of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SignalObservation {
    pub(crate) available: i64,
    pub(crate) capacity: i64,
}

/// Every signal that could be observed this round (a signal that could not be read is absent,
/// and thresholds on it are never met).
pub(crate) type SignalObservations = BTreeMap<Signal, SignalObservation>;

/// The node pressure the eviction manager reports: read by the node status (conditions) and by
/// admission. The node lifecycle controller turns the conditions into NoSchedule taints.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct NodePressure {
    pub(crate) memory: bool,
    pub(crate) disk: bool,
    pub(crate) pid: bool,
}

impl NodePressure {
    pub(crate) fn from_conditions(conds: &[NodeConditionType]) -> NodePressure {
        NodePressure {
            memory: conds.contains(&NodeConditionType::MemoryPressure),
            disk: conds.contains(&NodeConditionType::DiskPressure),
            pid: conds.contains(&NodeConditionType::PidPressure),
        }
    }

    /// The conditions in kubelet's order.
    pub(crate) fn conditions(&self) -> Vec<NodeConditionType> {
        let mut v = vec![];
        if self.memory {
            v.push(NodeConditionType::MemoryPressure);
        }
        if self.disk {
            v.push(NodeConditionType::DiskPressure);
        }
        if self.pid {
            v.push(NodeConditionType::PidPressure);
        }
        v
    }
}

/// The eviction manager's configuration (eviction.Config). Its default is Kubernetes' (see
/// [`super::DEFAULT_EVICTION_HARD`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// `--eviction-hard`.
    pub thresholds: Vec<Threshold>,
    /// `--eviction-pressure-transition-period`: how long a condition stays True after the
    /// threshold was last met, so it does not flap.
    pub pressure_transition_period: Duration,
    /// How often the manager observes and acts (kubelet: 10 s).
    pub monitoring_interval: Duration,
}
