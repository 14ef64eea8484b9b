//! Mirrors pkg/apis/scheduling/types.go and scheduling/v1's SystemPriorityClasses: the two
//! built-in PriorityClasses and the priority from which a pod counts as system-critical.

/// `scheduling.SystemCriticalPriority`: twice the highest priority a user-defined class may have.
/// Pods at or above it are critical: kubelet admits them under pressure and never evicts them.
pub const SYSTEM_CRITICAL_PRIORITY: i32 = 2_000_000_000;

/// `system-cluster-critical` and its priority value.
pub const SYSTEM_CLUSTER_CRITICAL: (&str, i32) = ("system-cluster-critical", SYSTEM_CRITICAL_PRIORITY);
/// `system-node-critical` and its priority value: above the cluster-critical class, so that
/// what a node needs to run is preempted last.
pub const SYSTEM_NODE_CRITICAL: (&str, i32) = ("system-node-critical", SYSTEM_CRITICAL_PRIORITY + 1000);
