//! Mirrors kube-scheduler's framework/interface.go: the extension points of a scheduling cycle and
//! the `Status` every plugin answers with.
//!
//! A pod's scheduling cycle calls, in order: PreFilter (once), Filter (per node, in parallel),
//! PostFilter (only when no node fits — kube-scheduler's preemption lives there; kubelab has no
//! PostFilter plugin, see the crate docs), PreScore (once), Score (per feasible node) and
//! NormalizeScore, Reserve (the chosen node), then — in the binding cycle, off the scheduling path —
//! PreBind and Bind. A failure after Reserve calls Unreserve on every Reserve plugin in reverse
//! order.

use std::sync::Arc;

use futures::future::BoxFuture;

use super::{CycleState, NodeInfo, PodInfo};

/// Scores are normalized into this range before weights apply.
pub const MAX_NODE_SCORE: i64 = 100;
pub const MIN_NODE_SCORE: i64 = 0;

/// What a plugin's answer means for the pod.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Code {
    Success,
    /// An internal error: the pod is retried with backoff.
    Error,
    /// Does not fit now; could after preemption or a cluster change.
    Unschedulable,
    /// Does not fit, and preempting pods on this node would not help.
    UnschedulableAndUnresolvable,
    /// From PreFilter/PreScore: this plugin has nothing to say about this pod; skip its
    /// Filter/Score.
    Skip,
}

/// A plugin's answer: a code, the reasons shown to users (they end up in the FailedScheduling
/// event, so they use Kubernetes' wording), and which plugin gave it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Status {
    pub code: Code,
    pub reasons: Vec<String>,
    pub plugin: &'static str,
}

impl Status {
    pub fn success() -> Status {
        Status { code: Code::Success, reasons: Vec::new(), plugin: "" }
    }
    pub fn skip() -> Status {
        Status { code: Code::Skip, reasons: Vec::new(), plugin: "" }
    }
    pub fn new(code: Code, reason: impl Into<String>) -> Status {
        Status { code, reasons: vec![reason.into()], plugin: "" }
    }
    pub fn unschedulable(reason: impl Into<String>) -> Status {
        Status::new(Code::Unschedulable, reason)
    }
    pub fn unresolvable(reason: impl Into<String>) -> Status {
        Status::new(Code::UnschedulableAndUnresolvable, reason)
    }
    pub fn error(reason: impl Into<String>) -> Status {
        Status::new(Code::Error, reason)
    }
    pub fn with_plugin(mut self, plugin: &'static str) -> Status {
        self.plugin = plugin;
        self
    }
    pub fn is_success(&self) -> bool {
        self.code == Code::Success
    }
    pub fn is_skip(&self) -> bool {
        self.code == Code::Skip
    }
    pub fn is_rejected(&self) -> bool {
        matches!(self.code, Code::Unschedulable | Code::UnschedulableAndUnresolvable)
    }
    /// The reasons joined, for logs and errors.
    pub fn message(&self) -> String {
        self.reasons.join(", ")
    }
}

/// A change in the cluster that may make an unschedulable pod schedulable. Plugins register the
/// events that can undo their rejections; the queue moves a pod back only on those
/// (kube-scheduler's EventsToRegister / queueing hints).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ClusterEvent {
    NodeAdd,
    NodeLabelChange,
    NodeTaintChange,
    NodeAllocatableChange,
    NodeSpecUnschedulableChange,
    NodeConditionChange,
    AssignedPodAdd,
    AssignedPodUpdate,
    AssignedPodDelete,
    /// The storage objects the volume plugins read (kube-scheduler's PersistentVolume,
    /// PersistentVolumeClaim, StorageClass and CSINode resources with Add or Update).
    PersistentVolumeAdd,
    PersistentVolumeUpdate,
    PersistentVolumeClaimAdd,
    PersistentVolumeClaimUpdate,
    StorageClassAdd,
    StorageClassUpdate,
    CSINodeAdd,
    CSINodeUpdate,
}

pub trait Plugin: Send + Sync {
    fn name(&self) -> &'static str;
    /// The events after which a pod this plugin rejected is worth retrying.
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        Vec::new()
    }
}

/// PreEnqueue: whether a pod may enter activeQ at all. A pod a plugin rejects here never starts a
/// scheduling cycle: it waits in the queue's gated pods until an update of its own lets it pass.
pub trait PreEnqueuePlugin: Plugin {
    fn pre_enqueue(&self, pod: &PodInfo) -> Status;
}

pub trait PreFilterPlugin: Plugin {
    /// Runs once per cycle before any Filter. Unschedulable here rejects the pod on every node;
    /// Skip turns this plugin's Filter off for the cycle.
    fn pre_filter(&self, state: &mut CycleState, pod: &PodInfo, nodes: &[Arc<NodeInfo>]) -> Status;
}

pub trait FilterPlugin: Plugin {
    /// Whether `pod` can run on `node`. Called concurrently for many nodes.
    fn filter(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status;
}

/// Runs only when no node fits the pod; may make one fit, as kube-scheduler's DefaultPreemption
/// does by choosing lower-priority victims to evict. kubelab registers no PostFilter plugin
/// (no preemption), so the runtime calls none; the point exists to show where it would go.
pub trait PostFilterPlugin: Plugin {
    /// `rejected` maps each node to the status that rejected the pod there. Success with a
    /// nominated node name means the pod may fit there once victims are gone.
    fn post_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        rejected: &std::collections::BTreeMap<String, Status>,
    ) -> (Option<String>, Status);
}

pub trait PreScorePlugin: Plugin {
    /// Runs once per cycle over the feasible nodes before any Score.
    fn pre_score(&self, state: &mut CycleState, pod: &PodInfo, nodes: &[Arc<NodeInfo>]) -> Status;
}

/// A node's score from one plugin (after normalization: 0–100).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeScore {
    pub name: Arc<str>,
    pub score: i64,
}

pub trait ScorePlugin: Plugin {
    /// A raw score for `node`; any scale, as long as `normalize_score` maps it into 0–100.
    fn score(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Result<i64, Status>;
    /// Maps the raw scores of every feasible node into 0–100. The default leaves them as they are
    /// (for plugins whose scores are already in range).
    fn normalize_score(&self, _state: &CycleState, _pod: &PodInfo, _scores: &mut [NodeScore]) -> Status {
        Status::success()
    }
}

pub trait ReservePlugin: Plugin {
    fn reserve(&self, state: &mut CycleState, pod: &PodInfo, node: &str) -> Status;
    fn unreserve(&self, state: &mut CycleState, pod: &PodInfo, node: &str);
}

/// PreBind: what must be written before the pod is bound, in the binding cycle (a task of its
/// own, so it may wait). VolumeBinding writes the chosen PV/PVC bindings here and waits until the
/// claims are bound. A failure sends the pod back to the queue (after Unreserve).
pub trait PreBindPlugin: Plugin {
    fn pre_bind<'a>(&'a self, state: &'a CycleState, pod: &'a PodInfo, node: &'a str) -> BoxFuture<'a, Status>;
}

pub trait BindPlugin: Plugin {
    /// Binds the pod to the node; Skip passes to the next Bind plugin.
    fn bind<'a>(&'a self, pod: &'a PodInfo, node: &'a str) -> BoxFuture<'a, Status>;
}

/// Normalizes `scores` in place to 0..=MAX_NODE_SCORE relative to the highest one, optionally
/// reversed (lower raw is better) — kube-scheduler's helper.DefaultNormalizeScore.
pub fn default_normalize_score(max_priority: i64, reverse: bool, scores: &mut [NodeScore]) {
    let max = scores.iter().map(|s| s.score).max().unwrap_or(0);
    if max == 0 {
        if reverse {
            for s in scores.iter_mut() {
                s.score = max_priority;
            }
        }
        return;
    }
    for s in scores.iter_mut() {
        let mut v = max_priority * s.score / max;
        if reverse {
            v = max_priority - v;
        }
        s.score = v;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scores(v: &[i64]) -> Vec<NodeScore> {
        v.iter().enumerate().map(|(i, s)| NodeScore { name: format!("n{i}").into(), score: *s }).collect()
    }

    #[test]
    fn normalize_table() {
        let cases: &[(&[i64], bool, &[i64])] = &[
            (&[10, 5, 0], false, &[100, 50, 0]),
            (&[10, 5, 0], true, &[0, 50, 100]),
            (&[0, 0], false, &[0, 0]),
            (&[0, 0], true, &[100, 100]),
            (&[3], false, &[100]),
        ];
        for (raw, reverse, want) in cases {
            let mut s = scores(raw);
            default_normalize_score(MAX_NODE_SCORE, *reverse, &mut s);
            assert_eq!(s.iter().map(|s| s.score).collect::<Vec<_>>(), *want, "{raw:?} reverse={reverse}");
        }
    }
}
