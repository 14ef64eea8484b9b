//! Mirrors k8s.io/api/rbac/v1/generated.proto: the Role, ClusterRole, RoleBinding and
//! ClusterRoleBinding that `kubectl create role`, `create clusterrole`, `create rolebinding` and
//! `create clusterrolebinding` send, field numbers as in that file (kubectl 1.32 and later;
//! 1.27 to 1.31 send the same objects as JSON).
//!
//! The four kinds are small and modelled whole, so they are decoded as the core kinds are: what
//! the wire holds beyond them is only server-owned metadata (`managedFields`).

use serde_json::{Map, Value};

use super::json::Fields;
use super::meta_v1::{LabelSelector, ObjectMeta};

/// `rbac/v1.Role`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct Role {
    #[prost(message, optional, tag = "1")]
    pub(super) metadata: Option<ObjectMeta>,
    #[prost(message, repeated, tag = "2")]
    pub(super) rules: Vec<PolicyRule>,
}

impl Role {
    pub(super) fn to_json(&self) -> Map<String, Value> {
        let mut f = Fields::with_metadata(&self.metadata);
        f.nullable_list("rules", &self.rules, PolicyRule::to_json);
        f.0
    }
}

/// `rbac/v1.ClusterRole`: a Role without a namespace, and perhaps an aggregation rule.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct ClusterRole {
    #[prost(message, optional, tag = "1")]
    pub(super) metadata: Option<ObjectMeta>,
    #[prost(message, repeated, tag = "2")]
    pub(super) rules: Vec<PolicyRule>,
    #[prost(message, optional, tag = "3")]
    pub(super) aggregation_rule: Option<AggregationRule>,
}

impl ClusterRole {
    pub(super) fn to_json(&self) -> Map<String, Value> {
        let mut f = Fields::with_metadata(&self.metadata);
        f.nullable_list("rules", &self.rules, PolicyRule::to_json);
        f.message("aggregationRule", &self.aggregation_rule, AggregationRule::to_json);
        f.0
    }
}

/// `rbac/v1.PolicyRule`: `verbs` has no `omitempty` in Go, the four other lists do.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct PolicyRule {
    #[prost(string, repeated, tag = "1")]
    pub(super) verbs: Vec<String>,
    #[prost(string, repeated, tag = "2")]
    pub(super) api_groups: Vec<String>,
    #[prost(string, repeated, tag = "3")]
    pub(super) resources: Vec<String>,
    #[prost(string, repeated, tag = "4")]
    pub(super) resource_names: Vec<String>,
    #[prost(string, repeated, tag = "5")]
    pub(super) non_resource_urls: Vec<String>,
}

impl PolicyRule {
    pub(super) fn to_json(&self) -> Value {
        let mut f = Fields::default();
        f.nullable_strings("verbs", &self.verbs);
        f.strings("apiGroups", &self.api_groups);
        f.strings("resources", &self.resources);
        f.strings("resourceNames", &self.resource_names);
        f.strings("nonResourceURLs", &self.non_resource_urls);
        f.into_json()
    }
}

/// `rbac/v1.AggregationRule`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct AggregationRule {
    #[prost(message, repeated, tag = "1")]
    pub(super) cluster_role_selectors: Vec<LabelSelector>,
}

impl AggregationRule {
    pub(super) fn to_json(&self) -> Value {
        let mut f = Fields::default();
        f.list("clusterRoleSelectors", &self.cluster_role_selectors, LabelSelector::to_json);
        f.into_json()
    }
}

/// `rbac/v1.RoleBinding`; a ClusterRoleBinding has the same fields (see [`ClusterRoleBinding`]).
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct RoleBinding {
    #[prost(message, optional, tag = "1")]
    pub(super) metadata: Option<ObjectMeta>,
    #[prost(message, repeated, tag = "2")]
    pub(super) subjects: Vec<Subject>,
    #[prost(message, optional, tag = "3")]
    pub(super) role_ref: Option<RoleRef>,
}

impl RoleBinding {
    pub(super) fn to_json(&self) -> Map<String, Value> {
        let mut f = Fields::with_metadata(&self.metadata);
        f.list("subjects", &self.subjects, Subject::to_json);
        f.message("roleRef", &self.role_ref, RoleRef::to_json);
        f.0
    }
}

/// `rbac/v1.ClusterRoleBinding`: the same message as a RoleBinding's, field for field.
pub(super) type ClusterRoleBinding = RoleBinding;

/// `rbac/v1.Subject`: `kind` and `name` are always written, `apiGroup` and `namespace` only when
/// set.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct Subject {
    #[prost(string, optional, tag = "1")]
    pub(super) kind: Option<String>,
    #[prost(string, optional, tag = "2")]
    pub(super) api_group: Option<String>,
    #[prost(string, optional, tag = "3")]
    pub(super) name: Option<String>,
    #[prost(string, optional, tag = "4")]
    pub(super) namespace: Option<String>,
}

impl Subject {
    pub(super) fn to_json(&self) -> Value {
        let mut f = Fields::default();
        f.required_string("kind", &self.kind);
        f.string("apiGroup", &self.api_group);
        f.required_string("name", &self.name);
        f.string("namespace", &self.namespace);
        f.into_json()
    }
}

/// `rbac/v1.RoleRef`: all three fields always written.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct RoleRef {
    #[prost(string, optional, tag = "1")]
    pub(super) api_group: Option<String>,
    #[prost(string, optional, tag = "2")]
    pub(super) kind: Option<String>,
    #[prost(string, optional, tag = "3")]
    pub(super) name: Option<String>,
}

impl RoleRef {
    pub(super) fn to_json(&self) -> Value {
        let mut f = Fields::default();
        f.required_string("apiGroup", &self.api_group);
        f.required_string("kind", &self.kind);
        f.required_string("name", &self.name);
        f.into_json()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde_json::json;

    use super::super::meta_v1::tests::go_meta;
    use super::super::tests::{body, decode_ok};
    use super::*;

    // Bodies captured from kubectl 1.32 (`kubectl -s http://127.0.0.1:PORT create …`) by a proxy
    // that recorded each POST on its way to the API server.

    /// `kubectl create role pod-reader --verb=get,list --resource=pods`
    const KUBECTL_CREATE_ROLE: &[u8] = b"k8s\x00\x0a$\x0a\x1crbac.authorization.k8s.io/v1\x12\x04Role\x121\x0a\x1a\x0a\x0apod-reader\x12\x00\x1a\x00\x22\x00*\x002\x008\x00B\x00\x12\x13\x0a\x03get\x0a\x04list\x12\x00\x1a\x04pods\x1a\x00\x22\x00";
    /// `kubectl create clusterrole agg --aggregation-rule=rbac.example.com/agg=true`
    const KUBECTL_CREATE_CLUSTERROLE_AGGREGATED: &[u8] = b"k8s\x00\x0a+\x0a\x1crbac.authorization.k8s.io/v1\x12\x0bClusterRole\x127\x0a\x13\x0a\x03agg\x12\x00\x1a\x00\x22\x00*\x002\x008\x00B\x00\x1a \x0a\x1e\x0a\x1c\x0a\x14rbac.example.com/agg\x12\x04true\x1a\x00\x22\x00";
    /// `kubectl create clusterrole cr --verb=get --non-resource-url=/healthz`
    const KUBECTL_CREATE_CLUSTERROLE_URL: &[u8] = b"k8s\x00\x0a+\x0a\x1crbac.authorization.k8s.io/v1\x12\x0bClusterRole\x12%\x0a\x12\x0a\x02cr\x12\x00\x1a\x00\x22\x00*\x002\x008\x00B\x00\x12\x0f\x0a\x03get*\x08/healthz\x1a\x00\x22\x00";
    /// `kubectl create rolebinding rb --clusterrole=view --serviceaccount=default:sa --user=u --group=g`
    const KUBECTL_CREATE_ROLEBINDING: &[u8] = b"k8s\x00\x0a+\x0a\x1crbac.authorization.k8s.io/v1\x12\x0bRoleBinding\x12\xb6\x01\x0a\x12\x0a\x02rb\x12\x00\x1a\x00\x22\x00*\x002\x008\x00B\x00\x12&\x0a\x04User\x12\x19rbac.authorization.k8s.io\x1a\x01u\x22\x00\x12'\x0a\x05Group\x12\x19rbac.authorization.k8s.io\x1a\x01g\x22\x00\x12\x1f\x0a\x0eServiceAccount\x12\x00\x1a\x02sa\x22\x07default\x1a.\x0a\x19rbac.authorization.k8s.io\x12\x0bClusterRole\x1a\x04view\x1a\x00\x22\x00";
    /// `kubectl create clusterrolebinding crb --clusterrole=view --user=u`
    const KUBECTL_CREATE_CLUSTERROLEBINDING: &[u8] = b"k8s\x00\x0a2\x0a\x1crbac.authorization.k8s.io/v1\x12\x12ClusterRoleBinding\x12m\x0a\x13\x0a\x03crb\x12\x00\x1a\x00\x22\x00*\x002\x008\x00B\x00\x12&\x0a\x04User\x12\x19rbac.authorization.k8s.io\x1a\x01u\x22\x00\x1a.\x0a\x19rbac.authorization.k8s.io\x12\x0bClusterRole\x1a\x04view\x1a\x00\x22\x00";

    const API_VERSION: &str = "rbac.authorization.k8s.io/v1";

    #[test]
    fn kubectl_bodies() {
        let view = json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"});
        let user = json!({"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "u"});
        let cases: &[(&str, &[u8], Value)] = &[
            (
                "create role",
                KUBECTL_CREATE_ROLE,
                json!({"apiVersion": API_VERSION, "kind": "Role", "metadata": {"name": "pod-reader"},
                       "rules": [{"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods"]}]}),
            ),
            (
                "create clusterrole --aggregation-rule",
                KUBECTL_CREATE_CLUSTERROLE_AGGREGATED,
                json!({"apiVersion": API_VERSION, "kind": "ClusterRole", "metadata": {"name": "agg"}, "rules": null,
                       "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"rbac.example.com/agg": "true"}}]}}),
            ),
            (
                "create clusterrole --non-resource-url",
                KUBECTL_CREATE_CLUSTERROLE_URL,
                json!({"apiVersion": API_VERSION, "kind": "ClusterRole", "metadata": {"name": "cr"},
                       "rules": [{"verbs": ["get"], "nonResourceURLs": ["/healthz"]}]}),
            ),
            (
                "create rolebinding",
                KUBECTL_CREATE_ROLEBINDING,
                json!({"apiVersion": API_VERSION, "kind": "RoleBinding", "metadata": {"name": "rb"},
                       "subjects": [user.clone(),
                                    {"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "g"},
                                    {"kind": "ServiceAccount", "name": "sa", "namespace": "default"}],
                       "roleRef": view.clone()}),
            ),
            (
                "create clusterrolebinding",
                KUBECTL_CREATE_CLUSTERROLEBINDING,
                json!({"apiVersion": API_VERSION, "kind": "ClusterRoleBinding", "metadata": {"name": "crb"},
                       "subjects": [user], "roleRef": view}),
            ),
        ];
        for (name, body, want) in cases {
            assert_eq!(&decode_ok(body), want, "{name}");
        }
    }

    #[test]
    fn every_field_of_a_rule_and_an_empty_verbs_list() {
        let role = ClusterRole {
            metadata: Some(go_meta("everything")),
            rules: vec![
                PolicyRule {
                    verbs: vec!["get".into()],
                    api_groups: vec!["".into(), "apps".into()],
                    resources: vec!["deployments/scale".into()],
                    resource_names: vec!["web".into()],
                    non_resource_urls: vec![],
                },
                // A rule without verbs reaches validation as Go would send it: `verbs: null`.
                PolicyRule { non_resource_urls: vec!["/metrics".into()], ..Default::default() },
            ],
            aggregation_rule: Some(AggregationRule { cluster_role_selectors: vec![LabelSelector { match_labels: BTreeMap::new(), match_expressions: vec![] }] }),
        };
        assert_eq!(
            decode_ok(&body(API_VERSION, "ClusterRole", &role)),
            json!({
                "apiVersion": API_VERSION, "kind": "ClusterRole", "metadata": {"name": "everything"},
                "rules": [
                    {"verbs": ["get"], "apiGroups": ["", "apps"], "resources": ["deployments/scale"], "resourceNames": ["web"]},
                    {"verbs": null, "nonResourceURLs": ["/metrics"]},
                ],
                "aggregationRule": {"clusterRoleSelectors": [{}]},
            })
        );
    }

    #[test]
    fn a_binding_without_a_role_ref_or_subjects() {
        // Go always writes roleRef (a struct, not a pointer); a body without it is not Go's, and
        // reaches validation without a roleRef, which it refuses.
        let rb = RoleBinding { metadata: Some(go_meta("empty")), subjects: vec![], role_ref: None };
        assert_eq!(
            decode_ok(&body(API_VERSION, "RoleBinding", &rb)),
            json!({"apiVersion": API_VERSION, "kind": "RoleBinding", "metadata": {"name": "empty"}})
        );
        let rb = RoleBinding { metadata: Some(go_meta("blank")), subjects: vec![], role_ref: Some(RoleRef::default()) };
        assert_eq!(
            decode_ok(&body(API_VERSION, "ClusterRoleBinding", &rb)),
            json!({"apiVersion": API_VERSION, "kind": "ClusterRoleBinding", "metadata": {"name": "blank"},
                   "roleRef": {"apiGroup": "", "kind": "", "name": ""}})
        );
    }
}
