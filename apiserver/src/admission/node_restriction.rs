//! Mirrors the NodeRestriction admission plugin (plugin/pkg/admission/noderestriction/admission.go):
//! a node (`system:node:<nodeName>` in `system:nodes`, [`node_identity`]) writes only what is its
//! own. The Node authorizer lets every node write pods, nodes and leases; this plugin narrows
//! that, from what the request asks for and the object it changes:
//!
//! 1. pods: a create only of a mirror pod (`kubernetes.io/config.mirror`) bound to the node that
//!    uses no service account, secret, configmap or claim; a delete, a status update and an
//!    eviction only of a pod bound to the node;
//! 2. nodes: only its own Node, and neither its `node-restriction.kubernetes.io/` labels (which
//!    an administrator sets to steer workloads to trusted nodes) nor its taints;
//! 3. leases in `kube-node-lease`: only the one named after the node;
//! 4. serviceaccounts/token: only a token bound to a pod bound to the node;
//! 5. CSINodes: only the one named after the node (the Node authorizer cannot check a create's
//!    name).
//!
//! Every refusal is a 403 as `admission.NewForbidden` words it: `pods "web" is forbidden: node
//! "n1" can only delete pods with spec.nodeName set to itself`. Other users pass untouched.
//!
//! Implementation caveats:
//! - Kubernetes runs it in the validating phase, on the object about to be written; kubelab runs
//!   it on the request (`admit`), the one step that sees deletes, updates and subresource creates,
//!   so it sees an update's object as the client sent it (or as the patch makes it of the object
//!   read), before the store's update strategy.
//! - The pods a delete, an eviction or a token names are read from the watch cache, then the store.
//! - Labels: only the `node-restriction.kubernetes.io/` ones are guarded; Kubernetes also refuses a
//!   node's own `kubernetes.io`/`k8s.io` labels outside the kubelet's set. The labels and taints
//!   are checked on updates of the Node itself, not of its status (whose strategy keeps them).
//! - Not done: a mirror pod's owner reference to its Node, the pod's uid in a token's bound object
//!   reference, a lease's owner reference, ResourceSlices, claims' status.

use std::sync::Arc;

use futures::future::LocalBoxFuture;
use serde_json::Value;

use super::interfaces::{Attributes, MutationInterface, Operation};
use crate::authentication::user::node_identity;
use crate::authorization::node::graph::{VertexType, pod_node_name, visit_pod_references};
use crate::error::{Error, Result};
use crate::registry::coordination::lease::strategy::NAMESPACE_NODE_LEASE;
use crate::registry::generic::store::Registry;

pub const NAME: &str = "NodeRestriction";
/// The annotation that marks a mirror pod (`api.MirrorPodAnnotationKey`).
const MIRROR_POD_ANNOTATION_KEY: &str = api::pod::kubelet_types::CONFIG_MIRROR_ANNOTATION_KEY;
/// Labels under this prefix (or a subdomain of it) are the administrator's to set on nodes.
pub const NODE_RESTRICTION_LABEL_PREFIX: &str = "node-restriction.kubernetes.io/";

/// Where the plugin reads the pods a request names (Kubernetes' pod lister).
pub trait PodGetter: Send + Sync {
    fn pod<'a>(&'a self, namespace: &'a str, name: &'a str) -> LocalBoxFuture<'a, Result<Option<Arc<Value>>>>;
}

/// The pods' generic store: its watch cache, then the store (a pod just created may not have
/// reached the cache).
impl PodGetter for Arc<Registry> {
    fn pod<'a>(&'a self, namespace: &'a str, name: &'a str) -> LocalBoxFuture<'a, Result<Option<Arc<Value>>>> {
        Box::pin(async move {
            if let Some(pod) = self.cache.get(&self.key(Some(namespace), name)) {
                return Ok(Some(pod));
            }
            match self.get(Some(namespace), name).await {
                Ok(pod) => Ok(Some(Arc::new(pod))),
                Err(Error::NotFound { .. }) => Ok(None),
                Err(e) => Err(e),
            }
        })
    }
}

pub struct NodeRestriction {
    pods: Box<dyn PodGetter>,
}

impl NodeRestriction {
    pub fn new(pods: Box<dyn PodGetter>) -> Self {
        Self { pods }
    }

    /// Step 1 (`admitPod`, `admitPodStatus`, `admitPodEviction`).
    async fn admit_pod(&self, node: &str, a: &Attributes<'_>) -> Result<()> {
        match (a.subresource, a.operation) {
            ("", Operation::Create) => admit_pod_create(node, a),
            ("", Operation::Delete) => {
                let existing = match a.old_object {
                    Some(pod) => Some(Arc::new(pod.clone())),
                    None => self.pods.pod(a.namespace.unwrap_or("default"), a.name).await?,
                };
                // A pod that is gone is the store's to answer for (404).
                match existing {
                    Some(pod) if pod_node_name(&pod) != Some(node) => Err(a.forbidden(&format!("node {node:?} can only delete pods with spec.nodeName set to itself"))),
                    _ => Ok(()),
                }
            }
            ("", op) => Err(a.forbidden(&format!("unexpected operation {:?}, node {node:?} can only create and delete mirror pods", op.as_str()))),
            ("status", Operation::Update) => match a.old_object {
                Some(pod) if pod_node_name(pod) == Some(node) => Ok(()),
                _ => Err(a.forbidden(&format!("node {node:?} can only update pod status for pods with spec.nodeName set to itself"))),
            },
            ("status", op) => Err(a.forbidden(&format!("unexpected operation {:?}", op.as_str()))),
            ("eviction", Operation::Create) => {
                let name = Some(a.name).filter(|n| !n.is_empty()).or_else(|| a.object.and_then(|e| e.pointer("/metadata/name")).and_then(Value::as_str));
                let Some(name) = name.filter(|n| !n.is_empty()) else { return Err(a.forbidden("could not determine pod from request data")) };
                match self.pods.pod(a.namespace.unwrap_or("default"), name).await? {
                    Some(pod) if pod_node_name(&pod) != Some(node) => Err(a.forbidden(&format!("node {node:?} can only evict pods with spec.nodeName set to itself"))),
                    // A pod that is gone is the eviction's to answer for (404).
                    _ => Ok(()),
                }
            }
            ("eviction", op) => Err(a.forbidden(&format!("unexpected operation {:?}", op.as_str()))),
            (other, _) => Err(a.forbidden(&format!("unexpected pod subresource {other:?}, only 'status' and 'eviction' are allowed"))),
        }
    }

    /// Step 4 (`admitServiceAccount`): a token bound to one of the node's pods.
    async fn admit_service_account(&self, node: &str, a: &Attributes<'_>) -> Result<()> {
        if a.subresource != "token" || a.operation != Operation::Create {
            return Ok(());
        }
        let reference = a.object.and_then(|tr| tr.pointer("/spec/boundObjectRef"));
        let field = |f: &str| reference.and_then(|r| r.get(f)).and_then(Value::as_str).unwrap_or("");
        if reference.is_none() || field("apiVersion") != "v1" || field("kind") != "Pod" || field("name").is_empty() {
            return Err(a.forbidden("node requested token not bound to a pod"));
        }
        let namespace = a.namespace.unwrap_or("default");
        let Some(pod) = self.pods.pod(namespace, field("name")).await? else {
            return Err(Error::not_found("pods", field("name")));
        };
        let uid = field("uid");
        if !uid.is_empty() && pod.pointer("/metadata/uid").and_then(Value::as_str) != Some(uid) {
            return Err(a.forbidden(&format!("the UID in the bound object reference ({uid}) does not match the UID in record. The object might have been deleted and then recreated"),
            ));
        }
        if pod_node_name(&pod) != Some(node) {
            return Err(a.forbidden("node requested token bound to a pod scheduled on a different node"));
        }
        Ok(())
    }
}

/// Step 1, a create (`admitPodCreate`): a mirror pod of this node's that uses nothing the node
/// could not read anyway.
fn admit_pod_create(node: &str, a: &Attributes<'_>) -> Result<()> {
    let Some(pod) = a.object else { return Ok(()) };
    if pod.pointer("/metadata/annotations").and_then(Value::as_object).is_none_or(|annotations| !annotations.contains_key(MIRROR_POD_ANNOTATION_KEY)) {
        return Err(a.forbidden(&format!("pod does not have {MIRROR_POD_ANNOTATION_KEY:?} annotation, node {node:?} can only create mirror pods")));
    }
    if pod_node_name(pod) != Some(node) {
        return Err(a.forbidden(&format!("node {node:?} can only create pods with spec.nodeName set to itself")));
    }
    if pod.pointer("/spec/serviceAccountName").and_then(Value::as_str).is_some_and(|sa| !sa.is_empty()) {
        return Err(a.forbidden(&format!("node {node:?} can not create pods that reference a service account")));
    }
    let mut uses = Vec::new();
    visit_pod_references(pod, &mut |kind, _| {
        uses.push(kind);
        true
    });
    for (kind, what) in [(VertexType::Secret, "secrets"), (VertexType::ConfigMap, "configmaps"), (VertexType::PersistentVolumeClaim, "persistentvolumeclaims")] {
        if uses.contains(&kind) {
            return Err(a.forbidden(&format!("node {node:?} can not create pods that reference {what}")));
        }
    }
    Ok(())
}

/// Step 2 (`admitNode`): its own Node, without touching what the administrator controls.
fn admit_node(node: &str, a: &Attributes<'_>) -> Result<()> {
    let requested = if a.name.is_empty() { a.object.and_then(|n| n.pointer("/metadata/name")).and_then(Value::as_str).unwrap_or("") } else { a.name };
    if requested != node {
        return Err(a.forbidden(&format!("node {node:?} is not allowed to modify node {requested:?}")));
    }
    let labels = |obj: Option<&Value>| obj.and_then(|o| o.pointer("/metadata/labels")).and_then(Value::as_object).cloned().unwrap_or_default();
    match a.operation {
        Operation::Create => {
            let labels = labels(a.object);
            let forbidden_labels: Vec<&String> = labels.keys().filter(|k| is_node_restriction_label(k)).collect();
            if !forbidden_labels.is_empty() {
                return Err(a.forbidden(&format!("node {node:?} is not allowed to set the following labels: {}", join(&forbidden_labels))));
            }
        }
        Operation::Update if a.subresource.is_empty() => {
            let (new, old) = (labels(a.object), labels(a.old_object));
            let keys: std::collections::BTreeSet<&String> = new.keys().chain(old.keys()).collect();
            let modified: Vec<&String> = keys.into_iter().filter(|k| new.get(*k) != old.get(*k) && is_node_restriction_label(k)).collect();
            if !modified.is_empty() {
                return Err(a.forbidden(&format!("node {node:?} is not allowed to modify labels: {}", join(&modified))));
            }
            let taints = |obj: Option<&Value>| obj.and_then(|o| o.pointer("/spec/taints")).filter(|t| !t.is_null() && t.as_array().is_none_or(|t| !t.is_empty())).cloned();
            if taints(a.object) != taints(a.old_object) {
                return Err(a.forbidden(&format!("node {node:?} is not allowed to modify taints")));
            }
        }
        _ => {}
    }
    Ok(())
}

/// Step 3 (`admitLease`): in `kube-node-lease`, only the lease named after the node.
fn admit_lease(node: &str, a: &Attributes<'_>) -> Result<()> {
    if a.namespace != Some(NAMESPACE_NODE_LEASE) {
        return Ok(());
    }
    let name = match a.operation {
        Operation::Create => a.object.and_then(|l| l.pointer("/metadata/name")).and_then(Value::as_str).unwrap_or(a.name),
        _ => a.name,
    };
    if name != node {
        return Err(a.forbidden("can only access node lease with the same name as the requesting node"));
    }
    Ok(())
}

/// Step 5 (`admitCSINode`): only the CSINode named after the node.
fn admit_csi_node(node: &str, a: &Attributes<'_>) -> Result<()> {
    let name = match a.operation {
        Operation::Create => a.object.and_then(|c| c.pointer("/metadata/name")).and_then(Value::as_str).unwrap_or(a.name),
        _ => a.name,
    };
    if name != node {
        return Err(a.forbidden("can only access CSINode with the same name as the requesting node"));
    }
    Ok(())
}

/// A label in `node-restriction.kubernetes.io/` or a subdomain's (`isNodeRestrictionLabel`).
fn is_node_restriction_label(key: &str) -> bool {
    let Some((prefix, _)) = key.split_once('/') else { return false };
    let domain = NODE_RESTRICTION_LABEL_PREFIX.trim_end_matches('/');
    prefix == domain || prefix.ends_with(&format!(".{domain}"))
}

/// Label keys as Kubernetes lists them: sorted, comma-separated.
fn join(keys: &[&String]) -> String {
    let mut keys: Vec<&str> = keys.iter().map(|k| k.as_str()).collect();
    keys.sort_unstable();
    keys.join(", ")
}

impl MutationInterface for NodeRestriction {
    fn name(&self) -> &'static str {
        NAME
    }

    fn handles(&self, a: &Attributes<'_>) -> bool {
        node_identity(a.user).is_some()
            && (a.is_for("", "pods")
                || a.is_for("", "nodes")
                || a.is_for("coordination.k8s.io", "leases")
                || a.is_for("", "serviceaccounts")
                || a.is_for("storage.k8s.io", "csinodes"))
    }

    fn admit<'a>(&'a self, a: &'a Attributes<'a>) -> LocalBoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let Some(node) = node_identity(a.user) else { return Ok(()) };
            if node.is_empty() {
                return Err(a.forbidden(&format!("could not determine node from user {:?}", a.user.name)));
            }
            match (a.resource.group, a.resource.plural) {
                ("", "pods") => self.admit_pod(node, a).await,
                ("", "nodes") => admit_node(node, a),
                ("coordination.k8s.io", "leases") => admit_lease(node, a),
                ("", "serviceaccounts") => self.admit_service_account(node, a).await,
                ("storage.k8s.io", "csinodes") => admit_csi_node(node, a),
                _ => Ok(()),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use serde_json::json;

    use super::*;
    use crate::authentication::user::UserInfo;
    use crate::registry::coordination::lease::strategy::LEASES;
    use crate::registry::core::node::strategy::NODES;
    use crate::registry::core::pod::strategy::PODS;
    use crate::registry::core::serviceaccount::strategy::SERVICEACCOUNTS;
    use crate::registry::generic::strategy::ResourceInfo;

    /// A fake pod lister: pods by `(namespace, name)`.
    struct FakePods(HashMap<(String, String), Arc<Value>>);

    impl PodGetter for FakePods {
        fn pod<'a>(&'a self, namespace: &'a str, name: &'a str) -> LocalBoxFuture<'a, Result<Option<Arc<Value>>>> {
            Box::pin(std::future::ready(Ok(self.0.get(&(namespace.to_string(), name.to_string())).cloned())))
        }
    }

    fn plugin() -> NodeRestriction {
        let pod = |name: &str, node: &str| (("ns".to_string(), name.to_string()), Arc::new(json!({"metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}")}, "spec": {"nodeName": node}})));
        NodeRestriction::new(Box::new(FakePods([pod("mine", "n1"), pod("theirs", "n2")].into_iter().collect())))
    }

    fn node(name: &str) -> UserInfo {
        UserInfo { name: format!("system:node:{name}"), groups: vec!["system:nodes".into()], ..Default::default() }
    }

    /// The request `op` of `user` on `resource[/subresource]` `ns`/`name` with its new and old
    /// objects, admitted by the plugin (when it handles it).
    #[allow(clippy::too_many_arguments)]
    fn admit(user: &UserInfo, op: Operation, resource: &'static ResourceInfo, subresource: &str, ns: Option<&str>, name: &str, object: Option<Value>, old: Option<Value>) -> Result<()> {
        let a = Attributes { operation: op, user, resource, subresource, namespace: ns, name, dry_run: false, object: object.as_ref(), old_object: old.as_ref() };
        let p = plugin();
        if !p.handles(&a) {
            return Ok(());
        }
        futures::executor::block_on(p.admit(&a))
    }

    fn message(r: Result<()>) -> String {
        r.expect_err("refused").to_string()
    }

    fn mirror(node: &str) -> Value {
        json!({"metadata": {"name": "static-web", "annotations": {"kubernetes.io/config.mirror": "hash"}}, "spec": {"nodeName": node, "containers": [{"name": "app", "image": "nginx"}]}})
    }

    fn create_pod(pod: Value) -> Result<()> {
        admit(&node("n1"), Operation::Create, &PODS, "", Some("ns"), "static-web", Some(pod), None)
    }

    #[test]
    fn node_may_create_a_mirror_pod_bound_to_itself() {
        create_pod(mirror("n1")).expect("admitted");
    }

    #[test]
    fn node_is_refused_pods_that_are_not_its_plain_mirror_pods() {
        let mut not_mirror = mirror("n1");
        not_mirror["metadata"]["annotations"] = json!({});
        assert_eq!(message(create_pod(not_mirror)), r#"pods "static-web" is forbidden: pod does not have "kubernetes.io/config.mirror" annotation, node "n1" can only create mirror pods"#);
        assert_eq!(message(create_pod(mirror("n2"))), r#"pods "static-web" is forbidden: node "n1" can only create pods with spec.nodeName set to itself"#);
        let mut with_account = mirror("n1");
        with_account["spec"]["serviceAccountName"] = json!("robot");
        assert_eq!(message(create_pod(with_account)), r#"pods "static-web" is forbidden: node "n1" can not create pods that reference a service account"#);
        let mut with_secret = mirror("n1");
        with_secret["spec"]["volumes"] = json!([{"name": "p", "projected": {"sources": [{"secret": {"name": "s"}}]}}]);
        assert_eq!(message(create_pod(with_secret)), r#"pods "static-web" is forbidden: node "n1" can not create pods that reference secrets"#);
        let mut with_configmap = mirror("n1");
        with_configmap["spec"]["containers"][0]["env"] = json!([{"name": "A", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "k"}}}]);
        assert_eq!(message(create_pod(with_configmap)), r#"pods "static-web" is forbidden: node "n1" can not create pods that reference configmaps"#);
        let mut with_claim = mirror("n1");
        with_claim["spec"]["volumes"] = json!([{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}]);
        assert_eq!(message(create_pod(with_claim)), r#"pods "static-web" is forbidden: node "n1" can not create pods that reference persistentvolumeclaims"#);
    }

    #[test]
    fn node_may_delete_evict_and_update_the_status_of_its_own_pods_only() {
        let n1 = node("n1");
        let delete = |name| admit(&n1, Operation::Delete, &PODS, "", Some("ns"), name, None, None);
        delete("mine").expect("admitted");
        delete("gone").expect("a missing pod is the store's 404");
        assert_eq!(message(delete("theirs")), r#"pods "theirs" is forbidden: node "n1" can only delete pods with spec.nodeName set to itself"#);

        let evict = |name| admit(&n1, Operation::Create, &PODS, "eviction", Some("ns"), name, Some(json!({"metadata": {"name": name}})), None);
        evict("mine").expect("admitted");
        assert_eq!(message(evict("theirs")), r#"pods "theirs" is forbidden: node "n1" can only evict pods with spec.nodeName set to itself"#);

        let status = |node_name: &str| admit(&n1, Operation::Update, &PODS, "status", Some("ns"), "web", Some(json!({})), Some(json!({"spec": {"nodeName": node_name}})));
        status("n1").expect("admitted");
        assert_eq!(message(status("n2")), r#"pods "web" is forbidden: node "n1" can only update pod status for pods with spec.nodeName set to itself"#);

        let update = admit(&n1, Operation::Update, &PODS, "", Some("ns"), "mine", Some(json!({})), Some(json!({})));
        assert_eq!(message(update), r#"pods "mine" is forbidden: unexpected operation "UPDATE", node "n1" can only create and delete mirror pods"#);
        let binding = admit(&n1, Operation::Create, &PODS, "binding", Some("ns"), "mine", Some(json!({})), None);
        assert_eq!(message(binding), r#"pods "mine" is forbidden: unexpected pod subresource "binding", only 'status' and 'eviction' are allowed"#);
    }

    #[test]
    fn node_may_modify_its_own_node_only_and_not_its_restricted_labels_or_taints() {
        let n1 = node("n1");
        let node_obj = |name: &str, labels: Value, taints: Value| json!({"metadata": {"name": name, "labels": labels}, "spec": {"taints": taints}});
        admit(&n1, Operation::Create, &NODES, "", None, "n1", Some(node_obj("n1", json!({"kubernetes.io/hostname": "n1"}), json!([]))), None).expect("admitted");
        assert_eq!(
            message(admit(&n1, Operation::Update, &NODES, "status", None, "n2", Some(json!({})), Some(json!({})))),
            r#"nodes "n2" is forbidden: node "n1" is not allowed to modify node "n2""#
        );
        assert_eq!(message(admit(&n1, Operation::Delete, &NODES, "", None, "n2", None, None)), r#"nodes "n2" is forbidden: node "n1" is not allowed to modify node "n2""#);
        let restricted = json!({"node-restriction.kubernetes.io/trusted": "yes", "zone.node-restriction.kubernetes.io/a": "b"});
        assert_eq!(
            message(admit(&n1, Operation::Create, &NODES, "", None, "n1", Some(node_obj("n1", restricted.clone(), json!([]))), None)),
            r#"nodes "n1" is forbidden: node "n1" is not allowed to set the following labels: node-restriction.kubernetes.io/trusted, zone.node-restriction.kubernetes.io/a"#
        );
        let old = node_obj("n1", restricted.clone(), json!([{"key": "dedicated", "effect": "NoSchedule"}]));
        let relabelled = node_obj("n1", json!({"zone.node-restriction.kubernetes.io/a": "b", "other": "x"}), json!([{"key": "dedicated", "effect": "NoSchedule"}]));
        assert_eq!(
            message(admit(&n1, Operation::Update, &NODES, "", None, "n1", Some(relabelled), Some(old.clone()))),
            r#"nodes "n1" is forbidden: node "n1" is not allowed to modify labels: node-restriction.kubernetes.io/trusted"#
        );
        let untainted = node_obj("n1", restricted.clone(), json!([]));
        assert_eq!(message(admit(&n1, Operation::Update, &NODES, "", None, "n1", Some(untainted), Some(old.clone()))), r#"nodes "n1" is forbidden: node "n1" is not allowed to modify taints"#);
        let other_labels = node_obj("n1", json!({"node-restriction.kubernetes.io/trusted": "yes", "zone.node-restriction.kubernetes.io/a": "b", "mine": "y"}), json!([{"key": "dedicated", "effect": "NoSchedule"}]));
        admit(&n1, Operation::Update, &NODES, "", None, "n1", Some(other_labels), Some(old)).expect("other labels are the node's own");
    }

    #[test]
    fn node_may_access_only_its_own_lease_in_kube_node_lease() {
        let n1 = node("n1");
        let lease = |name: &str| json!({"metadata": {"name": name, "namespace": "kube-node-lease"}});
        admit(&n1, Operation::Create, &LEASES, "", Some("kube-node-lease"), "n1", Some(lease("n1")), None).expect("admitted");
        admit(&n1, Operation::Update, &LEASES, "", Some("kube-node-lease"), "n1", Some(lease("n1")), Some(lease("n1"))).expect("admitted");
        assert_eq!(
            message(admit(&n1, Operation::Create, &LEASES, "", Some("kube-node-lease"), "n2", Some(lease("n2")), None)),
            r#"leases.coordination.k8s.io "n2" is forbidden: can only access node lease with the same name as the requesting node"#
        );
        assert_eq!(
            message(admit(&n1, Operation::Delete, &LEASES, "", Some("kube-node-lease"), "n2", None, None)),
            r#"leases.coordination.k8s.io "n2" is forbidden: can only access node lease with the same name as the requesting node"#
        );
        admit(&n1, Operation::Create, &LEASES, "", Some("ns"), "anything", Some(lease("anything")), None).expect("other namespaces are not the plugin's");
    }

    #[test]
    fn node_may_write_only_its_own_csinode() {
        use crate::registry::storage::csinode::strategy::CSINODES;
        let n1 = node("n1");
        let csinode = |name: &str| json!({"metadata": {"name": name}, "spec": {"drivers": []}});
        admit(&n1, Operation::Create, &CSINODES, "", None, "", Some(csinode("n1")), None).expect("its own, on create");
        admit(&n1, Operation::Update, &CSINODES, "", None, "n1", Some(csinode("n1")), Some(csinode("n1"))).expect("its own, on update");
        assert_eq!(
            message(admit(&n1, Operation::Create, &CSINODES, "", None, "", Some(csinode("n2")), None)),
            r#"csinodes.storage.k8s.io "n2" is forbidden: can only access CSINode with the same name as the requesting node"#
        );
        assert_eq!(
            message(admit(&n1, Operation::Delete, &CSINODES, "", None, "n2", None, None)),
            r#"csinodes.storage.k8s.io "n2" is forbidden: can only access CSINode with the same name as the requesting node"#
        );
    }

    #[test]
    fn node_may_request_tokens_only_bound_to_its_own_pods() {
        let n1 = node("n1");
        let token = |bound: Value| admit(&n1, Operation::Create, &SERVICEACCOUNTS, "token", Some("ns"), "robot", Some(json!({"spec": {"boundObjectRef": bound}})), None);
        token(json!({"apiVersion": "v1", "kind": "Pod", "name": "mine", "uid": "uid-mine"})).expect("admitted");
        assert_eq!(
            message(token(json!({"apiVersion": "v1", "kind": "Pod", "name": "theirs"}))),
            r#"serviceaccounts "robot" is forbidden: node requested token bound to a pod scheduled on a different node"#
        );
        assert_eq!(message(token(json!(null))), r#"serviceaccounts "robot" is forbidden: node requested token not bound to a pod"#);
        assert_eq!(message(token(json!({"apiVersion": "v1", "kind": "Secret", "name": "s"}))), r#"serviceaccounts "robot" is forbidden: node requested token not bound to a pod"#);
        assert!(message(token(json!({"apiVersion": "v1", "kind": "Pod", "name": "mine", "uid": "old"}))).contains("the UID in the bound object reference (old) does not match"));
    }

    #[test]
    fn users_that_are_not_nodes_pass_untouched() {
        let jane = UserInfo { name: "jane".into(), ..Default::default() };
        let pod = json!({"metadata": {"name": "web"}, "spec": {"nodeName": "n2"}});
        admit(&jane, Operation::Create, &PODS, "", Some("ns"), "web", Some(pod), None).expect("not a node");
        admit(&jane, Operation::Delete, &NODES, "", None, "n2", None, None).expect("not a node");
        let nameless = UserInfo { name: "system:node:".into(), groups: vec!["system:nodes".into()], ..Default::default() };
        assert_eq!(message(admit(&nameless, Operation::Delete, &NODES, "", None, "n2", None, None)), r#"nodes "n2" is forbidden: could not determine node from user "system:node:""#);
    }
}
