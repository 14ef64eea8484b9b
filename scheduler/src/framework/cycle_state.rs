//! Mirrors kube-scheduler's framework/cycle_state.go: data one plugin computes in PreFilter or
//! PreScore and reads back in Filter or Score for every node, for one pod's scheduling cycle.
//!
//! Filter and Score run over nodes in parallel and only read the state; the Pre* points, which run
//! once per cycle, write it.

use std::any::Any;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::NodeInfo;

#[derive(Default)]
pub struct CycleState {
    data: HashMap<&'static str, Box<dyn Any + Send + Sync>>,
    /// Plugins whose PreFilter answered Skip: their Filter is not called this cycle.
    pub skip_filter_plugins: HashSet<&'static str>,
    /// Plugins whose PreScore answered Skip: their Score is not called this cycle.
    pub skip_score_plugins: HashSet<&'static str>,
    /// From the snapshot, when the cycle has one: the nodes holding pods with any pod
    /// (anti-)affinity, and those holding pods with required anti-affinity (kube-scheduler's
    /// havePodsWithAffinityNodeInfoList / havePodsWithRequiredAntiAffinityNodeInfoList), so that
    /// InterPodAffinity need not visit every node to find the few that matter.
    pub nodes_with_affinity: Option<Vec<Arc<NodeInfo>>>,
    pub nodes_with_required_anti_affinity: Option<Vec<Arc<NodeInfo>>>,
}

impl CycleState {
    pub fn new() -> CycleState {
        CycleState::default()
    }

    /// Stores `value` under `key` (by convention the plugin's name plus the point: "NodePorts/PreFilter").
    pub fn write<T: Any + Send + Sync>(&mut self, key: &'static str, value: T) {
        self.data.insert(key, Box::new(value));
    }

    /// What was written under `key`, if it has type `T`.
    pub fn read<T: Any + Send + Sync>(&self, key: &'static str) -> Option<&T> {
        self.data.get(key).and_then(|v| v.downcast_ref())
    }

    pub fn read_mut<T: Any + Send + Sync>(&mut self, key: &'static str) -> Option<&mut T> {
        self.data.get_mut(key).and_then(|v| v.downcast_mut())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typed_reads() {
        let mut s = CycleState::new();
        s.write("a", 3usize);
        assert_eq!(s.read::<usize>("a"), Some(&3));
        assert_eq!(s.read::<String>("a"), None);
        assert_eq!(s.read::<usize>("b"), None);
        *s.read_mut::<usize>("a").unwrap() += 1;
        assert_eq!(s.read::<usize>("a"), Some(&4));
    }
}
