//! Mirrors plugin/pkg/auth/authorizer/node/graph.go and graph_populator.go: which objects a node
//! may read because a pod bound to it uses them.
//!
//! Kubernetes keeps a graph, fed by informers, with an edge from every object a pod uses (its
//! secrets, configmaps, service account, claims; a claim's volume) to the pod and from the pod to
//! its node, and asks whether a path leads from the object to the node. kubelab asks the same
//! question of the pods themselves: the pods of the object's namespace bound to the node
//! (`spec.nodeName`), and what each one references ([`visit_pod_references`]). Two kinds lead to
//! the node through another object, read from its own watch cache: a PersistentVolume through
//! the claim its `spec.claimRef` names (pv → pvc → pod → node, as graph.go's AddPV draws it), and
//! a VolumeAttachment straight to the node its `spec.nodeName` names (AddVolumeAttachment).

use std::sync::Arc;

use serde_json::Value;

/// The kinds of object the graph relates to nodes (graph.go's vertex types, those kubelab has).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VertexType {
    ConfigMap,
    PersistentVolume,
    PersistentVolumeClaim,
    Secret,
    ServiceAccount,
    VolumeAttachment,
}

/// Where the graph reads pods, and the volumes and attachments that lead to them: the watch
/// caches ([`super::listers::WatchCacheListers`]), or a test's lists.
pub trait PodSource: Send + Sync {
    /// Visits the pods of `namespace` (never empty) until `visit` returns false.
    fn pods(&self, namespace: &str, visit: &mut dyn FnMut(&Value) -> bool);

    /// The PersistentVolume `name`, if known (none by default).
    fn persistent_volume(&self, _name: &str) -> Option<Arc<Value>> {
        None
    }

    /// The VolumeAttachment `name`, if known (none by default).
    fn volume_attachment(&self, _name: &str) -> Option<Arc<Value>> {
        None
    }
}

/// Whether a pod bound to `node` in `namespace` references the object `kind` `name`
/// (`hasPathFrom`).
pub fn has_path_from(source: &dyn PodSource, node: &str, kind: VertexType, namespace: &str, name: &str) -> bool {
    if name.is_empty() {
        return false;
    }
    match kind {
        // pv -> pvc: the claim the volume is bound to, then on as for the claim.
        VertexType::PersistentVolume => {
            let Some(pv) = source.persistent_volume(name) else { return false };
            let claim = |f: &str| pv.pointer(&format!("/spec/claimRef/{f}")).and_then(Value::as_str).unwrap_or("").to_string();
            let (claim_namespace, claim_name) = (claim("namespace"), claim("name"));
            return has_path_from(source, node, VertexType::PersistentVolumeClaim, &claim_namespace, &claim_name);
        }
        // volumeattachment -> node.
        VertexType::VolumeAttachment => {
            return source.volume_attachment(name).is_some_and(|va| va.pointer("/spec/nodeName").and_then(Value::as_str) == Some(node));
        }
        _ => {}
    }
    if namespace.is_empty() {
        return false;
    }
    let mut found = false;
    source.pods(namespace, &mut |pod| {
        found = pod_node_name(pod) == Some(node) && references(pod, kind, name);
        !found
    });
    found
}

/// The node a pod is bound to, if it is bound.
pub fn pod_node_name(pod: &Value) -> Option<&str> {
    pod.pointer("/spec/nodeName").and_then(Value::as_str).filter(|n| !n.is_empty())
}

/// Whether the pod references the object `kind` `name`.
pub fn references(pod: &Value, kind: VertexType, name: &str) -> bool {
    let mut found = false;
    visit_pod_references(pod, &mut |k, n| {
        found = k == kind && n == name;
        !found
    });
    found
}

/// The secret references a volume source may carry besides `secret` and `projected`
/// (podutil.VisitPodSecretNames): `(volume type, pointer to the name)`.
const VOLUME_SECRET_REFS: &[(&str, &str)] = &[
    ("azureFile", "/secretName"),
    ("cephfs", "/secretRef/name"),
    ("cinder", "/secretRef/name"),
    ("flexVolume", "/secretRef/name"),
    ("iscsi", "/secretRef/name"),
    ("rbd", "/secretRef/name"),
    ("scaleIO", "/secretRef/name"),
    ("storageos", "/secretRef/name"),
    ("csi", "/nodePublishSecretRef/name"),
];

/// Visits every object the pod uses, as graph_populator's AddPod draws its edges: the service
/// account, image pull secrets, what every container's (init, app and ephemeral) `env` and
/// `envFrom` read, and the volumes' secrets, configmaps (projected ones included) and claims
/// (an ephemeral volume's claim is `<pod>-<volume>`). Stops when `visit` returns false.
pub fn visit_pod_references<'p>(pod: &'p Value, visit: &mut dyn FnMut(VertexType, &str) -> bool) {
    let spec = &pod["spec"];
    let mut refs: Vec<(VertexType, &'p str)> = Vec::new();
    let mut add = |kind, name: Option<&'p Value>| {
        if let Some(name) = name.and_then(Value::as_str).filter(|n| !n.is_empty()) {
            refs.push((kind, name));
        }
    };
    add(VertexType::ServiceAccount, spec.get("serviceAccountName"));
    for secret in items(spec, "imagePullSecrets") {
        add(VertexType::Secret, secret.get("name"));
    }
    for field in ["initContainers", "containers", "ephemeralContainers"] {
        for container in items(spec, field) {
            for env in items(container, "env") {
                add(VertexType::Secret, env.pointer("/valueFrom/secretKeyRef/name"));
                add(VertexType::ConfigMap, env.pointer("/valueFrom/configMapKeyRef/name"));
            }
            for from in items(container, "envFrom") {
                add(VertexType::Secret, from.pointer("/secretRef/name"));
                add(VertexType::ConfigMap, from.pointer("/configMapRef/name"));
            }
        }
    }
    for volume in items(spec, "volumes") {
        add(VertexType::Secret, volume.pointer("/secret/secretName"));
        add(VertexType::ConfigMap, volume.pointer("/configMap/name"));
        for source in volume.pointer("/projected/sources").and_then(Value::as_array).into_iter().flatten() {
            add(VertexType::Secret, source.pointer("/secret/name"));
            add(VertexType::ConfigMap, source.pointer("/configMap/name"));
        }
        for (kind, pointer) in VOLUME_SECRET_REFS {
            add(VertexType::Secret, volume.get(*kind).and_then(|v| v.pointer(pointer)));
        }
        add(VertexType::PersistentVolumeClaim, volume.pointer("/persistentVolumeClaim/claimName"));
    }
    for (kind, name) in refs {
        if !visit(kind, name) {
            return;
        }
    }
    // The claim an ephemeral volume makes is named after the pod and the volume.
    let pod_name = pod.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("");
    for volume in items(spec, "volumes").filter(|v| v.get("ephemeral").is_some()) {
        let claim = format!("{pod_name}-{}", volume.get("name").and_then(Value::as_str).unwrap_or(""));
        if !visit(VertexType::PersistentVolumeClaim, &claim) {
            return;
        }
    }
}

/// The entries of the list `field` of `v` (none when absent).
fn items<'a>(v: &'a Value, field: &str) -> impl Iterator<Item = &'a Value> {
    v.get(field).and_then(Value::as_array).into_iter().flatten()
}

/// An in-memory [`PodSource`] for tests: the pods, each in its `metadata.namespace`.
#[cfg(test)]
pub mod testing {
    use std::sync::Arc;

    use serde_json::Value;

    use super::PodSource;

    pub struct FakePods(pub Vec<Value>);

    impl PodSource for FakePods {
        fn pods(&self, namespace: &str, visit: &mut dyn FnMut(&Value) -> bool) {
            for pod in self.0.iter().filter(|p| p.pointer("/metadata/namespace").and_then(Value::as_str) == Some(namespace)) {
                if !visit(pod) {
                    return;
                }
            }
        }
    }

    /// Pods, volumes and attachments: the volumes and attachments are found by name.
    pub struct FakeGraph {
        pub pods: FakePods,
        pub volumes: Vec<Value>,
        pub attachments: Vec<Value>,
    }

    fn named(list: &[Value], name: &str) -> Option<Arc<Value>> {
        list.iter().find(|o| o.pointer("/metadata/name").and_then(Value::as_str) == Some(name)).cloned().map(Arc::new)
    }

    impl PodSource for FakeGraph {
        fn pods(&self, namespace: &str, visit: &mut dyn FnMut(&Value) -> bool) {
            self.pods.pods(namespace, visit);
        }
        fn persistent_volume(&self, name: &str) -> Option<Arc<Value>> {
            named(&self.volumes, name)
        }
        fn volume_attachment(&self, name: &str) -> Option<Arc<Value>> {
            named(&self.attachments, name)
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::testing::FakePods;
    use super::*;

    fn all_references(pod: &Value) -> Vec<(VertexType, String)> {
        let mut seen = Vec::new();
        visit_pod_references(pod, &mut |k, n| {
            seen.push((k, n.to_string()));
            true
        });
        seen
    }

    #[test]
    fn every_place_a_pod_names_an_object_is_a_reference() {
        let pod = json!({"metadata": {"name": "web", "namespace": "ns"}, "spec": {
            "serviceAccountName": "robot",
            "imagePullSecrets": [{"name": "pull"}],
            "initContainers": [{"name": "init", "envFrom": [{"configMapRef": {"name": "init-env"}}]}],
            "containers": [{"name": "app",
                "env": [{"name": "A", "valueFrom": {"secretKeyRef": {"name": "env-secret", "key": "k"}}},
                        {"name": "B", "valueFrom": {"configMapKeyRef": {"name": "env-cm", "key": "k"}}}],
                "envFrom": [{"secretRef": {"name": "from-secret"}}]}],
            "ephemeralContainers": [{"name": "debug", "env": [{"name": "C", "valueFrom": {"secretKeyRef": {"name": "debug-secret", "key": "k"}}}]}],
            "volumes": [
                {"name": "s", "secret": {"secretName": "vol-secret"}},
                {"name": "c", "configMap": {"name": "vol-cm"}},
                {"name": "p", "projected": {"sources": [{"secret": {"name": "proj-secret"}}, {"configMap": {"name": "proj-cm"}}, {"serviceAccountToken": {"path": "token"}}]}},
                {"name": "csi", "csi": {"driver": "d", "nodePublishSecretRef": {"name": "csi-secret"}}},
                {"name": "claim", "persistentVolumeClaim": {"claimName": "data"}},
                {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}},
            ]}});
        let refs = all_references(&pod);
        let named = |kind: VertexType| refs.iter().filter(|(k, _)| *k == kind).map(|(_, n)| n.as_str()).collect::<Vec<_>>();
        assert_eq!(named(VertexType::ServiceAccount), ["robot"]);
        assert_eq!(named(VertexType::Secret), ["pull", "env-secret", "from-secret", "debug-secret", "vol-secret", "proj-secret", "csi-secret"]);
        assert_eq!(named(VertexType::ConfigMap), ["init-env", "env-cm", "vol-cm", "proj-cm"]);
        assert_eq!(named(VertexType::PersistentVolumeClaim), ["data", "web-scratch"]);
    }

    #[test]
    fn only_pods_bound_to_the_node_in_the_objects_namespace_count() {
        let pod = |ns: &str, node: &str, secret: &str| json!({"metadata": {"name": "p", "namespace": ns}, "spec": {"nodeName": node, "volumes": [{"name": "v", "secret": {"secretName": secret}}]}});
        let pods = FakePods(vec![pod("ns", "n1", "mine"), pod("ns", "n2", "theirs"), pod("other", "n1", "elsewhere"), json!({"metadata": {"name": "pending", "namespace": "ns"}, "spec": {"volumes": [{"name": "v", "secret": {"secretName": "unbound"}}]}})]);
        assert!(has_path_from(&pods, "n1", VertexType::Secret, "ns", "mine"));
        assert!(!has_path_from(&pods, "n1", VertexType::Secret, "ns", "theirs"), "another node's pod");
        assert!(!has_path_from(&pods, "n1", VertexType::Secret, "ns", "elsewhere"), "a pod of another namespace");
        assert!(!has_path_from(&pods, "n1", VertexType::Secret, "other", "mine"), "the same name in another namespace");
        assert!(!has_path_from(&pods, "n1", VertexType::Secret, "ns", "unbound"), "a pod bound to no node");
        assert!(!has_path_from(&pods, "n1", VertexType::ConfigMap, "ns", "mine"), "another kind");
    }

    #[test]
    fn volumes_lead_through_their_claim_and_attachments_to_their_node() {
        use super::testing::FakeGraph;
        let pod = json!({"metadata": {"name": "p", "namespace": "ns"}, "spec": {"nodeName": "n1", "volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": "data"}}]}});
        let graph = FakeGraph {
            pods: FakePods(vec![pod]),
            volumes: vec![
                json!({"metadata": {"name": "pv-data"}, "spec": {"claimRef": {"namespace": "ns", "name": "data"}}}),
                json!({"metadata": {"name": "pv-other"}, "spec": {"claimRef": {"namespace": "ns", "name": "other"}}}),
                json!({"metadata": {"name": "pv-free"}, "spec": {}}),
            ],
            attachments: vec![json!({"metadata": {"name": "csi-1"}, "spec": {"nodeName": "n1"}}), json!({"metadata": {"name": "csi-2"}, "spec": {"nodeName": "n2"}})],
        };
        assert!(has_path_from(&graph, "n1", VertexType::PersistentVolume, "", "pv-data"));
        assert!(!has_path_from(&graph, "n2", VertexType::PersistentVolume, "", "pv-data"), "another node");
        assert!(!has_path_from(&graph, "n1", VertexType::PersistentVolume, "", "pv-other"), "a claim no pod of the node uses");
        assert!(!has_path_from(&graph, "n1", VertexType::PersistentVolume, "", "pv-free"), "an unbound volume");
        assert!(!has_path_from(&graph, "n1", VertexType::PersistentVolume, "", "pv-missing"));
        assert!(has_path_from(&graph, "n1", VertexType::VolumeAttachment, "", "csi-1"));
        assert!(!has_path_from(&graph, "n1", VertexType::VolumeAttachment, "", "csi-2"));
        assert!(!has_path_from(&graph, "n1", VertexType::VolumeAttachment, "", "csi-3"));
    }
}
