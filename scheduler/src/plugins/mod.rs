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
//! | [`volume_restrictions`] | PreFilter, Filter |
//! | [`node_volume_limits`] | PreFilter, Filter |
//! | [`volume_binding`] | PreFilter, Filter, Reserve, PreBind |
//! | [`pod_topology_spread`] | PreFilter, Filter, PreScore, Score |
//! | [`inter_pod_affinity`] | PreFilter, Filter, PreScore, Score |
//! | [`default_binder`] | Bind |
//!
//! The volume plugins read PersistentVolumes, claims, StorageClasses and CSINodes from the
//! scheduler's [`Informers`]; [`pv_helpers`] holds the storage decisions they share.

pub mod default_binder;
pub mod helper;
pub mod inter_pod_affinity;
pub mod node_affinity;
pub mod node_name;
pub mod node_ports;
pub mod node_resources_balanced_allocation;
pub mod node_resources_fit;
pub mod node_unschedulable;
pub mod node_volume_limits;
pub mod pod_topology_spread;
pub mod pv_helpers;
pub mod scheduling_gates;
pub mod taint_toleration;
pub mod volume_binding;
pub mod volume_restrictions;

use std::sync::Arc;

use crate::framework::{BindPlugin, FilterPlugin, Plugin, PreBindPlugin, PreEnqueuePlugin, PreFilterPlugin, PreScorePlugin, ReservePlugin, ScorePlugin};
use crate::informers::Informers;
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
    pub pre_bind: Option<Arc<dyn PreBindPlugin>>,
    pub bind: Option<Arc<dyn BindPlugin>>,
}

/// Every plugin name the registry knows, in the default profile's order (kube-scheduler's
/// getDefaultPlugins, less the plugins kubelab lacks).
pub const ALL: &[&str] = &[
    scheduling_gates::NAME,
    node_unschedulable::NAME,
    node_name::NAME,
    taint_toleration::NAME,
    node_affinity::NAME,
    node_ports::NAME,
    node_resources_fit::NAME,
    volume_restrictions::NAME,
    node_volume_limits::NAME,
    volume_binding::NAME,
    pod_topology_spread::NAME,
    inter_pod_affinity::NAME,
    node_resources_balanced_allocation::NAME,
    default_binder::NAME,
];

/// Arguments of the plugins that take any (a profile's `pluginConfig`).
#[derive(Clone, Debug)]
pub struct PluginArgs {
    pub scoring_strategy: ScoringStrategy,
    /// VolumeBindingArgs.bindTimeoutSeconds: how long VolumeBinding's PreBind waits for the
    /// pod's claims to be bound.
    pub bind_timeout_seconds: u64,
}

impl Default for PluginArgs {
    fn default() -> Self {
        PluginArgs { scoring_strategy: ScoringStrategy::default(), bind_timeout_seconds: volume_binding::DEFAULT_BIND_TIMEOUT_SECONDS }
    }
}

/// Builds the plugin called `name` (kube-scheduler's in-tree registry). `client` is used by the
/// binder and VolumeBinding's PreBind; tests pass `None` and get no Bind point. The volume
/// plugins read `informers`.
pub fn build(name: &str, args: &PluginArgs, client: Option<kube::Client>, informers: &Informers) -> Option<PluginSet> {
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
        volume_restrictions::NAME => set!(volume_restrictions::VolumeRestrictions::new(informers); pre_filter, filter),
        node_volume_limits::NAME => set!(node_volume_limits::CSILimits::new(informers); pre_filter, filter),
        volume_binding::NAME => set!(
            volume_binding::VolumeBinding::new(informers, client, std::time::Duration::from_secs(args.bind_timeout_seconds));
            pre_filter, filter, reserve, pre_bind
        ),
        default_binder::NAME => match client {
            Some(c) => set!(default_binder::DefaultBinder::new(c); bind),
            None => PluginSet::default(),
        },
        _ => return None,
    })
}
