//! Mirrors the Priority admission plugin (plugin/pkg/admission/priority/admission.go): a pod's
//! `priority` (and its preemption policy) from its PriorityClass, for a cluster with only the
//! built-in classes and no global default.

use api::scheduling::{SYSTEM_CLUSTER_CRITICAL, SYSTEM_NODE_CRITICAL};
use k8s_openapi::api::core::v1::{Pod, PodSpec};

use super::interfaces::PodCreate;

pub const NAME: &str = "Priority";

/// The plugin, for the chain.
pub const PLUGIN: PodCreate = PodCreate { name: NAME, admit: admit_pod };

pub fn admit_pod(pod: &mut Pod) {
    admit_priority(pod.spec.get_or_insert_with(PodSpec::default));
}

/// No class means priority 0. A class we do not know is left for the caller to resolve (the real
/// plugin looks it up and rejects the pod if it does not exist).
fn admit_priority(spec: &mut PodSpec) {
    let class = spec.priority_class_name.as_deref().unwrap_or("");
    let priority = match class {
        "" => 0,
        c if c == SYSTEM_CLUSTER_CRITICAL.0 => SYSTEM_CLUSTER_CRITICAL.1,
        c if c == SYSTEM_NODE_CRITICAL.0 => SYSTEM_NODE_CRITICAL.1,
        _ => return,
    };
    spec.priority = Some(priority);
    if spec.preemption_policy.as_deref().is_none_or(str::is_empty) {
        spec.preemption_policy = Some("PreemptLowerPriority".to_string());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::interfaces::testing::{admitted, minimal};

    #[test]
    fn priority_table() {
        // (priorityClassName, priority, preemptionPolicy)
        let cases = [
            (None, Some(0), Some("PreemptLowerPriority")),
            (Some(""), Some(0), Some("PreemptLowerPriority")),
            (Some("system-node-critical"), Some(2_000_001_000), Some("PreemptLowerPriority")),
            (Some("system-cluster-critical"), Some(2_000_000_000), Some("PreemptLowerPriority")),
            (Some("batch-low"), None, None),
        ];
        for (class, priority, policy) in cases {
            let mut j = minimal();
            if let Some(c) = class {
                j["spec"]["priorityClassName"] = c.into();
            }
            let s = admitted(&PLUGIN, j);
            assert_eq!(s.priority, priority, "{class:?}");
            assert_eq!(s.preemption_policy.as_deref(), policy, "{class:?}");
        }
    }
}
