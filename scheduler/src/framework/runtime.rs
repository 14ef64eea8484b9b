//! Mirrors kube-scheduler's framework/runtime/framework.go: builds a profile's plugins and runs
//! each extension point over them in order.
//!
//! Filters run per node and stop at the first rejection (that plugin's reasons are what the user
//! sees for that node). Scores are normalized per plugin to 0–100, multiplied by the plugin's
//! weight and summed.

use std::sync::Arc;

use crate::config::Profile;
use crate::framework::{
    BindPlugin, ClusterEvent, Code, CycleState, FilterPlugin, NodeInfo, NodeScore, Plugin, PodInfo, PostFilterPlugin, PreBindPlugin, PreEnqueuePlugin,
    PreFilterPlugin, PreScorePlugin, ReservePlugin, ScorePlugin, Status,
};
use crate::informers::Informers;
use crate::plugins;

pub struct Framework {
    pub scheduler_name: String,
    pub percentage_of_nodes_to_score: u32,
    plugins: Vec<Arc<dyn Plugin>>,
    pre_enqueue: Vec<Arc<dyn PreEnqueuePlugin>>,
    pre_filter: Vec<Arc<dyn PreFilterPlugin>>,
    filter: Vec<Arc<dyn FilterPlugin>>,
    /// Always empty in kubelab (no preemption); see `PostFilterPlugin`.
    post_filter: Vec<Arc<dyn PostFilterPlugin>>,
    pre_score: Vec<Arc<dyn PreScorePlugin>>,
    score: Vec<(Arc<dyn ScorePlugin>, i64)>,
    reserve: Vec<Arc<dyn ReservePlugin>>,
    pre_bind: Vec<Arc<dyn PreBindPlugin>>,
    bind: Vec<Arc<dyn BindPlugin>>,
}

impl Framework {
    /// Builds the plugins the profile enables, reading the cluster's storage objects from
    /// `informers`. Without a client there is no Bind point and no PreBind (tests).
    pub fn new(profile: &Profile, client: Option<kube::Client>, informers: &Informers) -> Result<Framework, String> {
        let mut f = Framework {
            scheduler_name: profile.scheduler_name.clone(),
            percentage_of_nodes_to_score: profile.percentage_of_nodes_to_score,
            plugins: Vec::new(),
            pre_enqueue: Vec::new(),
            pre_filter: Vec::new(),
            filter: Vec::new(),
            post_filter: Vec::new(),
            pre_score: Vec::new(),
            score: Vec::new(),
            reserve: Vec::new(),
            pre_bind: Vec::new(),
            bind: Vec::new(),
        };
        for name in &profile.plugins {
            let set = plugins::build(name, &profile.args, client.clone(), informers).ok_or_else(|| format!("unknown plugin {name:?}"))?;
            f.plugins.extend(set.plugin);
            f.pre_enqueue.extend(set.pre_enqueue);
            f.pre_filter.extend(set.pre_filter);
            f.filter.extend(set.filter);
            f.reserve.extend(set.reserve);
            f.pre_bind.extend(set.pre_bind);
            f.bind.extend(set.bind);
            if !profile.score_disabled.contains(name) {
                f.pre_score.extend(set.pre_score);
                if let Some(s) = set.score {
                    f.score.push((s, profile.weights.get(name).copied().unwrap_or(1)));
                }
            }
        }
        if client.is_some() && f.bind.is_empty() {
            return Err("no Bind plugin is enabled (enable DefaultBinder)".into());
        }
        Ok(f)
    }

    /// The names of the plugins that registered `event` (see `Plugin::events_to_register`).
    pub fn plugins_interested_in(&self, event: ClusterEvent) -> Vec<&'static str> {
        self.plugins.iter().filter(|p| p.events_to_register().contains(&event)).map(|p| p.name()).collect()
    }

    /// The PreEnqueue plugins, for the scheduling queue (they run before a pod enters activeQ,
    /// outside any cycle).
    pub fn pre_enqueue_plugins(&self) -> Vec<Arc<dyn PreEnqueuePlugin>> {
        self.pre_enqueue.clone()
    }

    pub fn has_score_plugins(&self) -> bool {
        !self.score.is_empty()
    }

    /// PreFilter: every plugin once. Skip answers are remembered in `state`; the first rejection
    /// or error ends the cycle for the pod.
    pub fn run_pre_filter(&self, state: &mut CycleState, pod: &PodInfo, nodes: &[Arc<NodeInfo>]) -> Status {
        for p in &self.pre_filter {
            let s = p.pre_filter(state, pod, nodes);
            match s.code {
                Code::Success => {}
                Code::Skip => {
                    state.skip_filter_plugins.insert(p.name());
                }
                _ => return s.with_plugin(p.name()),
            }
        }
        Status::success()
    }

    /// The Filter plugins this cycle runs (those whose PreFilter did not answer Skip).
    pub fn active_filters(&self, state: &CycleState) -> Vec<&dyn FilterPlugin> {
        self.filter.iter().filter(|p| !state.skip_filter_plugins.contains(p.name())).map(|p| p.as_ref()).collect()
    }

    /// Filter: the plugins in order on one node; the first that does not answer Success decides.
    pub fn run_filter(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        Self::run_filters(&self.active_filters(state), state, pod, node)
    }

    /// Filter with the active plugins computed once per cycle (`active_filters`).
    pub fn run_filters(filters: &[&dyn FilterPlugin], state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        for p in filters {
            let s = p.filter(state, pod, node);
            if !s.is_success() {
                return s.with_plugin(p.name());
            }
        }
        Status::success()
    }

    /// PostFilter, after every node rejected the pod: the first plugin that nominates a node wins.
    /// With no PostFilter plugin (kubelab's case) the pod simply stays unschedulable.
    pub fn run_post_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        rejected: &std::collections::BTreeMap<String, Status>,
    ) -> Option<String> {
        for p in &self.post_filter {
            let (nominated, s) = p.post_filter(state, pod, rejected);
            if s.is_success() {
                return nominated;
            }
        }
        None
    }

    pub fn run_pre_score(&self, state: &mut CycleState, pod: &PodInfo, nodes: &[Arc<NodeInfo>]) -> Status {
        for p in &self.pre_score {
            let s = p.pre_score(state, pod, nodes);
            match s.code {
                Code::Success => {}
                Code::Skip => {
                    state.skip_score_plugins.insert(p.name());
                }
                _ => return s.with_plugin(p.name()),
            }
        }
        Status::success()
    }

    /// Score: each plugin over every node, normalized, weighted; the totals per node, in the
    /// order of `nodes`. Scores are cheap next to filters (they run on feasible nodes only, after
    /// the adaptive cut), so they run on the calling thread; kube-scheduler parallelizes them too.
    pub fn run_score(&self, state: &CycleState, pod: &PodInfo, nodes: &[Arc<NodeInfo>]) -> Result<Vec<NodeScore>, Status> {
        let mut totals: Vec<NodeScore> = nodes.iter().map(|n| NodeScore { name: n.node_name.clone(), score: 0 }).collect();
        for (p, weight) in &self.score {
            if state.skip_score_plugins.contains(p.name()) {
                continue;
            }
            let _step = tracing::debug_span!(target: "scheduler::framework", "score", pod_uid = tracing::field::Empty, step = format!("score {}", p.name()), nodes = nodes.len()).entered();
            let mut scores = Vec::with_capacity(nodes.len());
            for n in nodes {
                let score = p.score(state, pod, n).map_err(|s| s.with_plugin(p.name()))?;
                scores.push(NodeScore { name: n.node_name.clone(), score });
            }
            let s = p.normalize_score(state, pod, &mut scores);
            if !s.is_success() {
                return Err(s.with_plugin(p.name()));
            }
            for (t, s) in totals.iter_mut().zip(&scores) {
                if !(crate::framework::MIN_NODE_SCORE..=crate::framework::MAX_NODE_SCORE).contains(&s.score) {
                    return Err(Status::error(format!("plugin {} returned score {} for node {}, outside 0–100", p.name(), s.score, s.name)));
                }
                t.score += s.score * weight;
            }
        }
        Ok(totals)
    }

    /// Reserve on every plugin; on a failure, Unreserve what was reserved (in reverse order).
    pub fn run_reserve(&self, state: &mut CycleState, pod: &PodInfo, node: &str) -> Status {
        for (i, p) in self.reserve.iter().enumerate() {
            let s = p.reserve(state, pod, node);
            if !s.is_success() {
                for q in self.reserve[..i].iter().rev() {
                    q.unreserve(state, pod, node);
                }
                return s.with_plugin(p.name());
            }
        }
        Status::success()
    }

    pub fn run_unreserve(&self, state: &mut CycleState, pod: &PodInfo, node: &str) {
        for p in self.reserve.iter().rev() {
            p.unreserve(state, pod, node);
        }
    }

    /// PreBind: every plugin in order, in the binding cycle; the first failure ends it (the
    /// binding cycle then unreserves and requeues the pod). Skip counts as success.
    pub async fn run_pre_bind(&self, state: &CycleState, pod: &PodInfo, node: &str) -> Status {
        for p in &self.pre_bind {
            let s = p.pre_bind(state, pod, node).await;
            if !s.is_success() && !s.is_skip() {
                return s.with_plugin(p.name());
            }
        }
        Status::success()
    }

    /// Bind: the first Bind plugin that does not Skip decides.
    pub async fn run_bind(&self, pod: &PodInfo, node: &str) -> Status {
        for p in &self.bind {
            let s = p.bind(pod, node).await;
            if !s.is_skip() {
                return s.with_plugin(p.name());
            }
        }
        Status::error("no bind plugin bound the pod")
    }
}
