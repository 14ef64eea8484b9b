//! Mirrors kube-scheduler's pkg/scheduler/framework: the extension points plugins implement
//! ([`interface`]), the per-cycle scratch space they share ([`cycle_state`]), the per-node view
//! they decide on ([`types`]), and the runtime that calls them in order ([`runtime`]).

pub mod cycle_state;
pub mod interface;
pub mod parallelize;
pub mod runtime;
pub mod types;

pub use cycle_state::CycleState;
pub use interface::{
    BindPlugin, ClusterEvent, Code, FilterPlugin, NodeScore, Plugin, PostFilterPlugin, PreBindPlugin, PreEnqueuePlugin, PreFilterPlugin, PreScorePlugin, ReservePlugin,
    ScorePlugin, Status, MAX_NODE_SCORE, MIN_NODE_SCORE,
};
pub use types::{NodeInfo, PodInfo, Resource};
