//! Mirrors pkg/registry/apps: the resources of `apps/v1` — the workloads whose controllers make
//! pods (Deployment, ReplicaSet, DaemonSet, StatefulSet) and the ControllerRevisions that record
//! a DaemonSet's or StatefulSet's past templates — and the scale subresource three of them share.

pub mod controllerrevision;
pub mod daemonset;
pub mod deployment;
pub mod replicaset;
pub mod scale;
pub mod statefulset;

use crate::printers::tablegenerator::{Column, col};
use crate::registry::generic::strategy::Subresource;

/// `-o wide`'s columns for a workload's template (Kubernetes' `layoutContainerCells`).
pub const WIDE_TEMPLATE_COLUMNS: [Column; 2] = [
    col("Containers", "string", "Names of each container in the template.", 1),
    col("Images", "string", "Images referenced by each container in the template.", 1),
];

/// `<workload>/status`.
pub const fn status_subresource(kind: &'static str) -> Subresource {
    Subresource { name: "status", group: "apps", version: "v1", kind, verbs: &["get", "patch", "update"] }
}

/// `<workload>/scale`: an autoscaling/v1 Scale ([`scale`]).
pub const SCALE_SUBRESOURCE: Subresource =
    Subresource { name: "scale", group: "autoscaling", version: "v1", kind: "Scale", verbs: &["get", "patch", "update"] };
