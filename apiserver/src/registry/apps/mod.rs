//! Mirrors pkg/registry/apps: the resources of `apps/v1` — the workloads whose controllers make
//! pods (Deployment, ReplicaSet, DaemonSet, StatefulSet) and the ControllerRevisions that record
//! a DaemonSet's or StatefulSet's past templates — and the scale subresource three of them share.

pub mod controllerrevision;
pub mod daemonset;
pub mod deployment;
pub mod replicaset;
pub mod scale;
pub mod statefulset;

use serde_json::Value;

use crate::printers::fields::{format_label_selector, get, template_containers};
use crate::printers::tablegenerator::{Column, col};
use crate::registry::generic::strategy::Subresource;

/// A workload's columns: its own, then `-o wide`'s — its template's containers and images
/// (Kubernetes' `layoutContainerCells`) and, described by `selector`, its selector.
pub fn workload_columns(mut own: Vec<Column>, selector: Option<&'static str>) -> Vec<Column> {
    own.push(col("Containers", "string", "Names of each container in the template.", 1));
    own.push(col("Images", "string", "Images referenced by each container in the template.", 1));
    if let Some(description) = selector {
        own.push(col("Selector", "string", description, 1));
    }
    own
}

/// The cells of [`workload_columns`]' wide part, read from the spec that holds `template` and
/// `selector` (a Deployment's `spec`, a CronJob's `spec.jobTemplate.spec`).
pub fn wide_cells(mut own: Vec<Value>, spec: Option<&Value>, with_selector: bool) -> Vec<Value> {
    let spec = spec.unwrap_or(&Value::Null);
    let (containers, images) = template_containers(get(spec, &["template"]).unwrap_or(&Value::Null));
    own.push(containers.into());
    own.push(images.into());
    if with_selector {
        own.push(format_label_selector(get(spec, &["selector"])).into());
    }
    own
}

/// `<workload>/status`.
pub const fn status_subresource(kind: &'static str) -> Subresource {
    Subresource { name: "status", group: "apps", version: "v1", kind, verbs: &["get", "patch", "update"] }
}

/// `<workload>/scale`: an autoscaling/v1 Scale ([`scale`]).
pub const SCALE_SUBRESOURCE: Subresource =
    Subresource { name: "scale", group: "autoscaling", version: "v1", kind: "Scale", verbs: &["get", "patch", "update"] };
