//! Mirrors plugin/pkg/auth/authorizer/node/node_authorizer.go: what a node's agent may do. A
//! request from a node (`system:node:<nodeName>` in `system:nodes`) is allowed:
//!
//! 1. for secrets and configmaps (get, list, watch), claims, volumes and VolumeAttachments (get):
//!    when the object has a name and leads to the node ([`super::graph`]: a pod bound to the node
//!    uses the secret, configmap or claim; the volume is bound to such a claim; the attachment is
//!    for the node); otherwise no opinion, with `no relationship found between node 'n1' and this
//!    object`;
//!    A claim's status (update, patch) likewise, for a claim of the node's pods;
//! 2. for serviceaccounts/token (create): when a pod bound to the node runs as the account;
//! 3. for leases: in `kube-node-lease` only, and only the node's own when the request names one;
//! 4. for CSINodes (get, create, update, patch, delete): only the node's own (a create names no
//!    object, and is allowed);
//! 5. for everything else: when the rules every node holds allow it (bootstrappolicy's
//!    `NodeRules`, the `system:node` ClusterRole's, with kubelab's additions:
//!    [`NodeAuthorizer::new`]) — its pods and their status and evictions, nodes, events,
//!    services and endpoints, the token and access reviews.
//!
//! Anyone else, and anything a node is not allowed, gets no opinion: the next mode (RBAC) decides.
//! What a node may write of pods, nodes and leases is narrowed by the NodeRestriction admission
//! plugin ([`crate::admission::node_restriction`]) to its own.

use serde_json::Value;

use super::graph::{PodSource, VertexType, has_path_from};
use crate::authentication::user::{UserInfo, node_identity};
use crate::authorization::authorizer::{Attributes, Authorizer, Decision, Rules};
use crate::authorization::rbac::bootstrappolicy::helpers::new_rule;
use crate::authorization::rbac::bootstrappolicy::policy::node_rules;
use crate::authorization::rbac::rbac::rule_allows;
use crate::registry::coordination::lease::strategy::NAMESPACE_NODE_LEASE;

pub struct NodeAuthorizer {
    source: Box<dyn PodSource>,
    /// What every node may do beyond what the graph decides, as PolicyRules.
    node_rules: Vec<Value>,
}

impl NodeAuthorizer {
    /// The authorizer over `source`'s pods, with `NodeRules` and what kubelab's node agent also
    /// reads or writes: events.k8s.io events, endpoints (listed and watched, not only read),
    /// endpointslices, and a delete of nodes (NodeRestriction keeps it to the node's own).
    pub fn new(source: Box<dyn PodSource>) -> Self {
        let mut rules = node_rules();
        rules.push(new_rule(&["create", "update", "patch"]).groups(&["events.k8s.io"]).resources(&["events"]).rule());
        rules.push(new_rule(&["get", "list", "watch"]).groups(&[""]).resources(&["endpoints"]).rule());
        rules.push(new_rule(&["get", "list", "watch"]).groups(&["discovery.k8s.io"]).resources(&["endpointslices"]).rule());
        rules.push(new_rule(&["delete"]).groups(&[""]).resources(&["nodes"]).rule());
        let node_rules = rules.iter().filter_map(|r| serde_json::to_value(r).ok()).collect();
        NodeAuthorizer { source, node_rules }
    }

    /// Step 1, secrets and configmaps (`authorizeReadNamespacedObject`): read, one named object,
    /// in a namespace.
    fn authorize_read_namespaced_object(&self, node: &str, kind: Option<VertexType>, a: &Attributes<'_>) -> (Decision, String) {
        if !matches!(a.verb, "get" | "list" | "watch") {
            return no_opinion("can only read resources of this type");
        }
        if !a.subresource.is_empty() {
            return no_opinion("cannot read subresource");
        }
        if a.namespace.is_empty() {
            return no_opinion("can only read namespaced object of this type");
        }
        self.authorize_related(node, kind, a)
    }

    /// Step 1, claims, volumes and VolumeAttachments (`authorizeGet`): a get of one object.
    fn authorize_get(&self, node: &str, kind: Option<VertexType>, a: &Attributes<'_>) -> (Decision, String) {
        if a.verb != "get" {
            return no_opinion("can only get individual resources of this type");
        }
        if !a.subresource.is_empty() {
            return no_opinion("cannot get subresource");
        }
        self.authorize_related(node, kind, a)
    }

    /// Step 1, a claim's status (`authorizeStatusUpdate`): an update or patch of the status of a
    /// claim one of the node's pods uses (the kubelet reports a resized filesystem there).
    fn authorize_status_update(&self, node: &str, kind: VertexType, a: &Attributes<'_>) -> (Decision, String) {
        if !matches!(a.verb, "update" | "patch") {
            return no_opinion("can only get/update/patch this type");
        }
        self.authorize_related(node, Some(kind), a)
    }

    /// Step 2 (`authorizeCreateToken`): a token for an account one of the node's pods runs as.
    fn authorize_create_token(&self, node: &str, a: &Attributes<'_>) -> (Decision, String) {
        if a.verb != "create" || a.name.is_empty() {
            return no_opinion("can only create tokens for individual service accounts");
        }
        if a.subresource != "token" {
            return no_opinion("can only create token subresource of serviceaccount");
        }
        self.authorize_related(node, Some(VertexType::ServiceAccount), a)
    }

    /// Step 3: the node's own heartbeat Lease.
    fn authorize_lease(&self, node: &str, a: &Attributes<'_>) -> (Decision, String) {
        if a.namespace != NAMESPACE_NODE_LEASE {
            return no_opinion(&format!("can only access leases in the {NAMESPACE_NODE_LEASE} namespace"));
        }
        if !a.name.is_empty() && a.name != node {
            return no_opinion("can only access node lease with the same name as the requesting node");
        }
        self.authorize_by_rules(a)
    }

    /// Whether a path leads from the named object to the node (`authorize`); none from an object
    /// of a kind (`None`) kubelab's graph does not have. (Kubernetes' `authorize`.)
    fn authorize_related(&self, node: &str, kind: Option<VertexType>, a: &Attributes<'_>) -> (Decision, String) {
        if a.name.is_empty() {
            return no_opinion("No Object name found");
        }
        if kind.is_some_and(|kind| has_path_from(self.source.as_ref(), node, kind, a.namespace, a.name)) {
            return (Decision::Allow, String::new());
        }
        no_opinion(&format!("no relationship found between node '{node}' and this object"))
    }

    /// Step 4 (`authorizeCSINode`): the node's own CSINode, no subresource.
    fn authorize_csi_node(&self, node: &str, a: &Attributes<'_>) -> (Decision, String) {
        if !matches!(a.verb, "get" | "create" | "update" | "patch" | "delete") {
            return no_opinion("can only get, create, update, patch, or delete a CSINode");
        }
        if !a.subresource.is_empty() {
            return no_opinion("cannot authorize CSINode subresources");
        }
        // A create names no object: NodeRestriction would check the name (see the caveats).
        if a.verb != "create" && a.name != node {
            return no_opinion("can only access CSINode with the same name as the requesting node");
        }
        (Decision::Allow, String::new())
    }

    /// Step 5 (`rbac.RulesAllow(attrs, r.nodeRules...)`).
    fn authorize_by_rules(&self, a: &Attributes<'_>) -> (Decision, String) {
        if self.node_rules.iter().any(|rule| rule_allows(a, rule)) {
            return (Decision::Allow, String::new());
        }
        (Decision::NoOpinion, String::new())
    }
}

fn no_opinion(reason: &str) -> (Decision, String) {
    (Decision::NoOpinion, reason.to_string())
}

impl Authorizer for NodeAuthorizer {
    fn authorize(&self, a: &Attributes<'_>) -> (Decision, String) {
        let Some(node) = node_identity(a.user) else { return (Decision::NoOpinion, String::new()) };
        if node.is_empty() {
            return no_opinion(&format!("unknown node for user {:?}", a.user.name));
        }
        if a.resource_request && a.api_group.is_empty() {
            match a.resource {
                "secrets" => return self.authorize_read_namespaced_object(node, Some(VertexType::Secret), a),
                "configmaps" => return self.authorize_read_namespaced_object(node, Some(VertexType::ConfigMap), a),
                "persistentvolumeclaims" if a.subresource == "status" => return self.authorize_status_update(node, VertexType::PersistentVolumeClaim, a),
                "persistentvolumeclaims" => return self.authorize_get(node, Some(VertexType::PersistentVolumeClaim), a),
                "persistentvolumes" => return self.authorize_get(node, Some(VertexType::PersistentVolume), a),
                "serviceaccounts" => return self.authorize_create_token(node, a),
                _ => {}
            }
        }
        if a.resource_request && a.api_group == "coordination.k8s.io" && a.resource == "leases" {
            return self.authorize_lease(node, a);
        }
        if a.resource_request && a.api_group == "storage.k8s.io" {
            match a.resource {
                "volumeattachments" => return self.authorize_get(node, Some(VertexType::VolumeAttachment), a),
                "csinodes" => return self.authorize_csi_node(node, a),
                _ => {}
            }
        }
        self.authorize_by_rules(a)
    }

    /// A node's rights depend on its pods, so they cannot be listed (Kubernetes' `RulesFor`).
    fn rules_for(&self, user: &UserInfo, _namespace: &str) -> Rules {
        match node_identity(user) {
            Some(_) => Rules { incomplete: true, evaluation_errors: vec!["node authorizer does not support user rule resolution".into()], ..Default::default() },
            None => Rules::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::authorization::node::graph::testing::{FakeGraph, FakePods};

    fn node(name: &str) -> UserInfo {
        UserInfo { name: format!("system:node:{name}"), groups: vec!["system:nodes".into(), "system:authenticated".into()], ..Default::default() }
    }

    fn authorizer() -> NodeAuthorizer {
        let pods = FakePods(vec![json!({"metadata": {"name": "web", "namespace": "ns"}, "spec": {
            "nodeName": "n1",
            "serviceAccountName": "robot",
            "containers": [{"name": "app", "envFrom": [{"configMapRef": {"name": "settings"}}]}],
            "volumes": [{"name": "tls", "secret": {"secretName": "tls"}}, {"name": "data", "persistentVolumeClaim": {"claimName": "data"}}],
        }})]);
        let volumes = vec![
            json!({"metadata": {"name": "pv-data"}, "spec": {"claimRef": {"namespace": "ns", "name": "data"}}}),
            json!({"metadata": {"name": "pv1"}, "spec": {"claimRef": {"namespace": "ns", "name": "unused"}}}),
        ];
        let attachments = vec![json!({"metadata": {"name": "csi-n1"}, "spec": {"nodeName": "n1"}}), json!({"metadata": {"name": "csi-n2"}, "spec": {"nodeName": "n2"}})];
        NodeAuthorizer::new(Box::new(FakeGraph { pods, volumes, attachments }))
    }

    /// A resource request of `user`: `verb` on `group`'s `resource[/subresource]` named `name`
    /// in `ns`; the decision and reason.
    fn ask(user: &UserInfo, verb: &str, group: &str, resource: &str, ns: &str, name: &str) -> (Decision, String) {
        let (resource, subresource) = resource.split_once('/').unwrap_or((resource, ""));
        authorizer().authorize(&Attributes { user, verb, resource_request: true, namespace: ns, api_group: group, api_version: "v1", resource, subresource, name, ..Default::default() })
    }

    #[test]
    fn node_may_read_the_secrets_and_configmaps_of_its_pods_and_no_others() {
        let n1 = node("n1");
        assert_eq!(ask(&n1, "get", "", "secrets", "ns", "tls"), (Decision::Allow, String::new()));
        assert_eq!(ask(&n1, "watch", "", "secrets", "ns", "tls").0, Decision::Allow, "a watch of one named object (field selector)");
        assert_eq!(ask(&n1, "list", "", "configmaps", "ns", "settings").0, Decision::Allow);
        assert_eq!(ask(&n1, "get", "", "persistentvolumeclaims", "ns", "data").0, Decision::Allow);
        assert_eq!(ask(&n1, "get", "", "secrets", "ns", "other"), (Decision::NoOpinion, "no relationship found between node 'n1' and this object".into()));
        assert_eq!(ask(&node("n2"), "get", "", "secrets", "ns", "tls"), (Decision::NoOpinion, "no relationship found between node 'n2' and this object".into()));
        assert_eq!(ask(&n1, "get", "", "secrets", "other", "tls").0, Decision::NoOpinion, "the same name in another namespace");
    }

    #[test]
    fn node_is_refused_lists_writes_and_subresources_of_secrets() {
        let n1 = node("n1");
        assert_eq!(ask(&n1, "list", "", "secrets", "ns", ""), (Decision::NoOpinion, "No Object name found".into()));
        assert_eq!(ask(&n1, "update", "", "secrets", "ns", "tls"), (Decision::NoOpinion, "can only read resources of this type".into()));
        assert_eq!(ask(&n1, "get", "", "secrets/status", "ns", "tls"), (Decision::NoOpinion, "cannot read subresource".into()));
        assert_eq!(ask(&n1, "list", "", "persistentvolumeclaims", "ns", "data"), (Decision::NoOpinion, "can only get individual resources of this type".into()));
        assert_eq!(ask(&n1, "get", "", "persistentvolumes", "", "pv1"), (Decision::NoOpinion, "no relationship found between node 'n1' and this object".into()));
    }

    #[test]
    fn node_may_get_the_volumes_of_its_pods_claims_and_its_own_attachments() {
        let (n1, n2) = (node("n1"), node("n2"));
        let related = (Decision::Allow, String::new());
        let unrelated = |n: &str| (Decision::NoOpinion, format!("no relationship found between node '{n}' and this object"));
        assert_eq!(ask(&n1, "get", "", "persistentvolumes", "", "pv-data"), related, "pod -> pvc -> pv");
        assert_eq!(ask(&n2, "get", "", "persistentvolumes", "", "pv-data"), unrelated("n2"));
        assert_eq!(ask(&n1, "get", "", "persistentvolumes", "", "pv1"), unrelated("n1"), "bound to a claim no pod of n1 uses");
        assert_eq!(ask(&n1, "list", "", "persistentvolumes", "", ""), (Decision::NoOpinion, "can only get individual resources of this type".into()));
        assert_eq!(ask(&n1, "get", "storage.k8s.io", "volumeattachments", "", "csi-n1"), related);
        assert_eq!(ask(&n1, "get", "storage.k8s.io", "volumeattachments", "", "csi-n2"), unrelated("n1"));
        assert_eq!(ask(&n1, "watch", "storage.k8s.io", "volumeattachments", "", "csi-n1"), (Decision::NoOpinion, "can only get individual resources of this type".into()));
        assert_eq!(ask(&n1, "patch", "", "persistentvolumeclaims/status", "ns", "data"), related, "a resized claim's status");
        assert_eq!(ask(&n2, "patch", "", "persistentvolumeclaims/status", "ns", "data"), unrelated("n2"));
        assert_eq!(ask(&n1, "delete", "", "persistentvolumeclaims/status", "ns", "data"), (Decision::NoOpinion, "can only get/update/patch this type".into()));
    }

    #[test]
    fn node_may_write_only_its_own_csinode_and_read_csidrivers() {
        let n1 = node("n1");
        for verb in ["get", "update", "patch", "delete"] {
            assert_eq!(ask(&n1, verb, "storage.k8s.io", "csinodes", "", "n1").0, Decision::Allow, "{verb}");
        }
        assert_eq!(ask(&n1, "create", "storage.k8s.io", "csinodes", "", "").0, Decision::Allow, "a create names no object");
        assert_eq!(
            ask(&n1, "update", "storage.k8s.io", "csinodes", "", "n2"),
            (Decision::NoOpinion, "can only access CSINode with the same name as the requesting node".into())
        );
        assert_eq!(ask(&n1, "list", "storage.k8s.io", "csinodes", "", ""), (Decision::NoOpinion, "can only get, create, update, patch, or delete a CSINode".into()));
        assert_eq!(ask(&n1, "get", "storage.k8s.io", "csinodes/status", "", "n1"), (Decision::NoOpinion, "cannot authorize CSINode subresources".into()));
        for verb in ["get", "list", "watch"] {
            assert_eq!(ask(&n1, verb, "storage.k8s.io", "csidrivers", "", "").0, Decision::Allow, "{verb} csidrivers");
        }
        assert_eq!(ask(&n1, "create", "storage.k8s.io", "csidrivers", "", "").0, Decision::NoOpinion);
        assert_eq!(ask(&n1, "list", "storage.k8s.io", "storageclasses", "", "").0, Decision::NoOpinion);
    }

    #[test]
    fn node_may_create_tokens_only_for_its_pods_service_accounts() {
        let n1 = node("n1");
        assert_eq!(ask(&n1, "create", "", "serviceaccounts/token", "ns", "robot").0, Decision::Allow);
        assert_eq!(ask(&n1, "create", "", "serviceaccounts/token", "ns", "default"), (Decision::NoOpinion, "no relationship found between node 'n1' and this object".into()));
        assert_eq!(ask(&node("n2"), "create", "", "serviceaccounts/token", "ns", "robot").0, Decision::NoOpinion);
        assert_eq!(ask(&n1, "get", "", "serviceaccounts", "ns", "robot"), (Decision::NoOpinion, "can only create tokens for individual service accounts".into()));
    }

    #[test]
    fn node_may_use_its_own_lease_in_kube_node_lease_only() {
        let n1 = node("n1");
        assert_eq!(ask(&n1, "update", "coordination.k8s.io", "leases", "kube-node-lease", "n1").0, Decision::Allow);
        assert_eq!(ask(&n1, "create", "coordination.k8s.io", "leases", "kube-node-lease", "").0, Decision::Allow, "a create names no object: NodeRestriction checks its name");
        assert_eq!(
            ask(&n1, "update", "coordination.k8s.io", "leases", "kube-node-lease", "n2"),
            (Decision::NoOpinion, "can only access node lease with the same name as the requesting node".into())
        );
        assert_eq!(ask(&n1, "get", "coordination.k8s.io", "leases", "kube-system", "n1"), (Decision::NoOpinion, "can only access leases in the kube-node-lease namespace".into()));
        assert_eq!(ask(&n1, "list", "coordination.k8s.io", "leases", "kube-node-lease", "").0, Decision::NoOpinion, "no list of leases");
    }

    #[test]
    fn node_rules_allow_pods_nodes_events_services_and_reviews() {
        let n1 = node("n1");
        let allowed = [
            ("watch", "", "pods", "ns"),
            ("create", "", "pods", "ns"),
            ("delete", "", "pods", "ns"),
            ("patch", "", "pods/status", "ns"),
            ("create", "", "pods/eviction", "ns"),
            ("get", "", "nodes", ""),
            ("create", "", "nodes", ""),
            ("delete", "", "nodes", ""),
            ("patch", "", "nodes/status", ""),
            ("create", "", "events", "ns"),
            ("patch", "events.k8s.io", "events", "ns"),
            ("list", "", "services", ""),
            ("watch", "", "endpoints", "ns"),
            ("list", "discovery.k8s.io", "endpointslices", "ns"),
            ("create", "authentication.k8s.io", "tokenreviews", ""),
            ("create", "authorization.k8s.io", "subjectaccessreviews", ""),
        ];
        for (verb, group, resource, ns) in allowed {
            assert_eq!(ask(&n1, verb, group, resource, ns, "").0, Decision::Allow, "{verb} {group} {resource}");
        }
        let refused = [("update", "", "pods", "ns"), ("delete", "", "namespaces", ""), ("get", "apps", "deployments", "ns"), ("create", "", "secrets", "ns")];
        for (verb, group, resource, ns) in refused {
            assert_eq!(ask(&n1, verb, group, resource, ns, "").0, Decision::NoOpinion, "{verb} {group} {resource}");
        }
    }

    #[test]
    fn users_that_are_not_nodes_get_no_opinion() {
        let jane = UserInfo { name: "jane".into(), groups: vec!["system:nodes".into()], ..Default::default() };
        assert_eq!(ask(&jane, "get", "", "pods", "ns", ""), (Decision::NoOpinion, String::new()));
        let nameless = UserInfo { name: "system:node:".into(), groups: vec!["system:nodes".into()], ..Default::default() };
        assert_eq!(ask(&nameless, "get", "", "pods", "ns", ""), (Decision::NoOpinion, "unknown node for user \"system:node:\"".into()));
        assert_eq!(authorizer().rules_for(&jane, "ns"), Rules::default());
        assert!(authorizer().rules_for(&node("n1"), "ns").incomplete);
    }
}
