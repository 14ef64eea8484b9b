//! Mirrors strategicpatch's meta.go (`PatchMetaFromStruct`) together with the
//! `patchStrategy`/`patchMergeKey` struct tags of k8s.io/api/core/v1/types.go and
//! apimachinery's ObjectMeta, written down as a table instead of read by reflection.

use std::collections::BTreeMap;

/// How a list merges under a strategic merge patch (and server-side apply).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListStrategy {
    /// `patchStrategy:"merge" patchMergeKey:"<key>"`: a list of objects identified by one field.
    MergeByKey(String),
    /// `patchStrategy:"merge"` on a list of strings: a set (e.g. `metadata.finalizers`).
    Set,
    /// No patch strategy: the patch's list replaces the object's list whole ("atomic").
    Replace,
}

/// The list strategies of one kind, by JSON path. A path names map fields with dots and steps into
/// list items with `[]`: `spec.containers[].env` is the `env` list of each container.
/// Lists not in the table are replaced whole, as Kubernetes does for fields without tags.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PatchMeta {
    lists: BTreeMap<String, ListStrategy>,
}

/// ObjectMeta's lists, present in every kind.
const OBJECT_META: &[(&str, Option<&str>)] = &[
    ("metadata.finalizers", None),
    ("metadata.ownerReferences", Some("uid")),
];

/// PodSpec's lists relative to the pod spec; `None` as key means a set of strings.
const POD_SPEC: &[(&str, Option<&str>)] = &[
    ("containers", Some("name")),
    ("initContainers", Some("name")),
    ("ephemeralContainers", Some("name")),
    ("imagePullSecrets", Some("name")),
    ("volumes", Some("name")),
    ("hostAliases", Some("ip")),
    ("topologySpreadConstraints", Some("topologyKey")),
    ("resourceClaims", Some("name")),
    ("schedulingGates", Some("name")),
];

/// Container's lists, for each of `containers`, `initContainers`, `ephemeralContainers`.
const CONTAINER: &[(&str, Option<&str>)] = &[
    ("env", Some("name")),
    ("ports", Some("containerPort")),
    ("volumeMounts", Some("mountPath")),
    ("volumeDevices", Some("devicePath")),
];

const POD_STATUS: &[(&str, Option<&str>)] = &[
    ("conditions", Some("type")),
    ("podIPs", Some("ip")),
    ("hostIPs", Some("ip")),
];

const NODE: &[(&str, Option<&str>)] = &[
    ("spec.podCIDRs", None),
    ("status.conditions", Some("type")),
    ("status.addresses", Some("type")),
];

/// Kinds that embed a pod template, with the path of the template's pod spec.
const POD_TEMPLATE_SPECS: &[(&str, &str)] = &[
    ("Pod", "spec"),
    ("PodTemplate", "template.spec"),
    ("ReplicationController", "spec.template.spec"),
    ("ReplicaSet", "spec.template.spec"),
    ("Deployment", "spec.template.spec"),
    ("StatefulSet", "spec.template.spec"),
    ("DaemonSet", "spec.template.spec"),
    ("Job", "spec.template.spec"),
    ("CronJob", "spec.jobTemplate.spec.template.spec"),
];

impl PatchMeta {
    /// No list strategies at all: every list is replaced whole.
    pub fn new() -> PatchMeta {
        PatchMeta::default()
    }

    /// Adds (or overrides) the strategy of the list at `path`.
    pub fn with_list(mut self, path: &str, strategy: ListStrategy) -> PatchMeta {
        self.lists.insert(path.to_string(), strategy);
        self
    }

    /// The strategy of the list at `path`; `Replace` when the table does not know it.
    pub fn list_strategy(&self, path: &str) -> ListStrategy {
        self.lists
            .get(path)
            .cloned()
            .unwrap_or(ListStrategy::Replace)
    }

    /// The patch metadata of a kind: ObjectMeta's lists for every kind, plus the pod spec (for
    /// Pods and the kinds with a pod template), pod status, and node lists.
    /// Lists such as `tolerations`, `readinessGates`, `containerStatuses` and node `taints` have
    /// no strategy in Kubernetes either, so they are replaced whole.
    pub fn for_kind(kind: &str) -> PatchMeta {
        let mut meta = PatchMeta::new();
        meta.add_all("", OBJECT_META);
        if let Some((_, spec)) = POD_TEMPLATE_SPECS.iter().find(|(k, _)| *k == kind) {
            meta.add_all(spec, POD_SPEC);
            for containers in ["containers", "initContainers", "ephemeralContainers"] {
                meta.add_all(&format!("{spec}.{containers}[]"), CONTAINER);
            }
            if kind != "Pod" {
                let template_meta = spec.strip_suffix(".spec").unwrap_or(spec);
                meta.add_all(template_meta, OBJECT_META);
            }
        }
        if kind == "Pod" {
            meta.add_all("status", POD_STATUS);
        }
        if kind == "Node" {
            meta.add_all("", NODE);
        }
        meta
    }

    fn add_all(&mut self, prefix: &str, lists: &[(&str, Option<&str>)]) {
        for (path, key) in lists {
            let full = if prefix.is_empty() {
                path.to_string()
            } else {
                format!("{prefix}.{path}")
            };
            let strategy = match key {
                Some(k) => ListStrategy::MergeByKey(k.to_string()),
                None => ListStrategy::Set,
            };
            self.lists.insert(full, strategy);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strategies_by_kind() {
        let by_key = |k: &str| ListStrategy::MergeByKey(k.to_string());
        let cases = [
            ("Pod", "spec.containers", by_key("name")),
            ("Pod", "spec.initContainers", by_key("name")),
            ("Pod", "spec.ephemeralContainers", by_key("name")),
            ("Pod", "spec.imagePullSecrets", by_key("name")),
            ("Pod", "spec.volumes", by_key("name")),
            ("Pod", "spec.hostAliases", by_key("ip")),
            ("Pod", "spec.containers[].env", by_key("name")),
            (
                "Pod",
                "spec.initContainers[].ports",
                by_key("containerPort"),
            ),
            ("Pod", "spec.containers[].volumeMounts", by_key("mountPath")),
            ("Pod", "status.conditions", by_key("type")),
            ("Pod", "status.podIPs", by_key("ip")),
            ("Pod", "metadata.finalizers", ListStrategy::Set),
            ("Pod", "metadata.ownerReferences", by_key("uid")),
            ("Pod", "spec.tolerations", ListStrategy::Replace),
            ("Pod", "spec.readinessGates", ListStrategy::Replace),
            ("Pod", "status.containerStatuses", ListStrategy::Replace),
            ("Pod", "spec.containers[].args", ListStrategy::Replace),
            ("Node", "status.conditions", by_key("type")),
            ("Node", "status.addresses", by_key("type")),
            ("Node", "spec.taints", ListStrategy::Replace),
            ("Node", "spec.podCIDRs", ListStrategy::Set),
            ("Node", "spec.containers", ListStrategy::Replace),
            ("ConfigMap", "metadata.finalizers", ListStrategy::Set),
            ("ConfigMap", "status.conditions", ListStrategy::Replace),
            (
                "Deployment",
                "spec.template.spec.containers[].env",
                by_key("name"),
            ),
            (
                "Deployment",
                "spec.template.metadata.finalizers",
                ListStrategy::Set,
            ),
            (
                "CronJob",
                "spec.jobTemplate.spec.template.spec.containers",
                by_key("name"),
            ),
        ];
        for (kind, path, want) in cases {
            assert_eq!(
                PatchMeta::for_kind(kind).list_strategy(path),
                want,
                "{kind} {path}"
            );
        }
    }
}
