//! Mirrors kube-scheduler's pkg/scheduler/framework/plugins: the in-tree plugins, one a file, and
//! the registry that builds a profile's plugin set by name.
//!
//! | plugin | extension points |
//! | --- | --- |
//! | [`scheduling_gates`] | PreEnqueue |
//! | [`node_unschedulable`] | Filter |
//! | [`node_name`] | Filter |
//! | [`node_resources_fit`] | Filter, Score |
//! | [`node_resources_balanced_allocation`] | Score |
//! | [`node_affinity`] | PreFilter, Filter, PreScore, Score |
//! | [`taint_toleration`] | Filter, PreScore, Score |
//! | [`node_ports`] | PreFilter, Filter |
//! | [`pod_topology_spread`] | PreFilter, Filter, PreScore, Score |
//! | [`inter_pod_affinity`] | PreFilter, Filter, PreScore, Score |
//! | [`default_binder`] | Bind |

pub mod default_binder;
pub mod helper;
pub mod inter_pod_affinity;
pub mod node_affinity;
pub mod node_name;
pub mod node_ports;
pub mod node_resources_balanced_allocation;
pub mod node_resources_fit;
pub mod node_unschedulable;
pub mod pod_topology_spread;
pub mod scheduling_gates;
pub mod taint_toleration;

use std::sync::Arc;

use crate::framework::{BindPlugin, FilterPlugin, Plugin, PreEnqueuePlugin, PreFilterPlugin, PreScorePlugin, ReservePlugin, ScorePlugin};
use node_resources_fit::ScoringStrategy;

/// One plugin, seen through each extension point it implements.
#[derive(Clone, Default)]
pub struct PluginSet {
    pub plugin: Option<Arc<dyn Plugin>>,
    pub pre_enqueue: Option<Arc<dyn PreEnqueuePlugin>>,
    pub pre_filter: Option<Arc<dyn PreFilterPlugin>>,
    pub filter: Option<Arc<dyn FilterPlugin>>,
    pub pre_score: Option<Arc<dyn PreScorePlugin>>,
    pub score: Option<Arc<dyn ScorePlugin>>,
    pub reserve: Option<Arc<dyn ReservePlugin>>,
    pub bind: Option<Arc<dyn BindPlugin>>,
}

/// Every plugin name the registry knows, in the default profile's order.
pub const ALL: &[&str] = &[
    scheduling_gates::NAME,
    node_unschedulable::NAME,
    node_name::NAME,
    taint_toleration::NAME,
    node_affinity::NAME,
    node_ports::NAME,
    node_resources_fit::NAME,
    pod_topology_spread::NAME,
    inter_pod_affinity::NAME,
    node_resources_balanced_allocation::NAME,
    default_binder::NAME,
];

/// Arguments of the plugins that take any (a profile's `pluginConfig`).
#[derive(Clone, Debug, Default)]
pub struct PluginArgs {
    pub scoring_strategy: ScoringStrategy,
}

/// Builds the plugin called `name` (kube-scheduler's in-tree registry). `client` is only used by
/// the binder; tests pass `None` and get no Bind point.
pub fn build(name: &str, args: &PluginArgs, client: Option<kube::Client>) -> Option<PluginSet> {
    macro_rules! set {
        ($p:expr; $($point:ident),*) => {{
            let p = Arc::new($p);
            PluginSet { plugin: Some(p.clone()), $($point: Some(p.clone()),)* ..Default::default() }
        }};
    }
    Some(match name {
        scheduling_gates::NAME => set!(scheduling_gates::SchedulingGates; pre_enqueue),
        node_unschedulable::NAME => set!(node_unschedulable::NodeUnschedulable; filter),
        node_name::NAME => set!(node_name::NodeName; filter),
        node_resources_fit::NAME => set!(node_resources_fit::Fit::new(args.scoring_strategy); filter, score),
        node_resources_balanced_allocation::NAME => set!(node_resources_balanced_allocation::BalancedAllocation; score),
        node_affinity::NAME => set!(node_affinity::NodeAffinity; pre_filter, filter, pre_score, score),
        taint_toleration::NAME => set!(taint_toleration::TaintToleration; filter, pre_score, score),
        node_ports::NAME => set!(node_ports::NodePorts; pre_filter, filter),
        pod_topology_spread::NAME => set!(pod_topology_spread::PodTopologySpread; pre_filter, filter, pre_score, score),
        inter_pod_affinity::NAME => set!(inter_pod_affinity::InterPodAffinity; pre_filter, filter, pre_score, score),
        default_binder::NAME => match client {
            Some(c) => set!(default_binder::DefaultBinder::new(c); bind),
            None => PluginSet::default(),
        },
        _ => return None,
    })
}
