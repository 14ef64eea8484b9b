//! Mirrors k8s.io/apiserver/pkg/authorization/authorizer/interfaces.go and rule.go: what a request
//! asks to do (its [`Attributes`]), what an authorizer answers ([`Decision`] and a reason), and
//! the rules it can list for a user ([`Rules`], for SelfSubjectRulesReview).

use crate::authentication::user::UserInfo;

/// What the request asks to do, as the authorizers see it (Kubernetes' `AttributesRecord`).
#[derive(Clone, Debug)]
pub struct Attributes<'a> {
    pub user: &'a UserInfo,
    /// A resource request's verb (`get`, `list`, `watch`, `create`, `update`, `patch`, `delete`,
    /// `deletecollection`), or a non-resource request's lowercased HTTP method.
    pub verb: &'a str,
    /// Whether the path names a resource (`/api/v1/namespaces/x/pods`) or not (`/healthz`).
    pub resource_request: bool,
    /// The request's path; what a non-resource rule matches.
    pub path: &'a str,
    pub namespace: &'a str,
    pub api_group: &'a str,
    pub api_version: &'a str,
    pub resource: &'a str,
    pub subresource: &'a str,
    /// The object's name; for a list or watch, the name its `metadata.name` field selector gives.
    pub name: &'a str,
}

/// Nobody asking nothing: a base for `..Default::default()`.
impl Default for Attributes<'_> {
    fn default() -> Self {
        static NOBODY: UserInfo = UserInfo { name: String::new(), uid: String::new(), groups: Vec::new(), extra: std::collections::BTreeMap::new() };
        Attributes { user: &NOBODY, verb: "", resource_request: false, path: "", namespace: "", api_group: "", api_version: "", resource: "", subresource: "", name: "" }
    }
}

/// An authorizer's answer. `NoOpinion` passes the question to the next authorizer of the union;
/// when none allows, the request is forbidden.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    Allow,
    Deny,
    NoOpinion,
}

/// One authorization mode (`--authorization-mode`): privileged groups, RBAC, Node, AlwaysAllow.
pub trait Authorizer: Send + Sync {
    /// The decision, and why (shown in the 403's message and in `kubelab trace`).
    fn authorize(&self, a: &Attributes<'_>) -> (Decision, String);

    /// The rules `user` holds in `namespace` (Kubernetes' `RuleResolver.RulesFor`). An authorizer
    /// that cannot list what it allows (the privileged groups) lists nothing.
    fn rules_for(&self, _user: &UserInfo, _namespace: &str) -> Rules {
        Rules::default()
    }
}

/// What an authorizer can say a user may do (`ResourceRuleInfo` and `NonResourceRuleInfo`), as
/// the `authorization.k8s.io/v1` ResourceRule and NonResourceRule objects.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Rules {
    /// `{verbs, apiGroups, resources, resourceNames}`.
    pub resource_rules: Vec<serde_json::Value>,
    /// `{verbs, nonResourceURLs}`.
    pub non_resource_rules: Vec<serde_json::Value>,
    /// Whether the authorizer may allow more than it listed.
    pub incomplete: bool,
    /// What could not be read (a binding to a role that does not exist).
    pub evaluation_errors: Vec<String>,
}

impl Rules {
    /// Everything: `*` on every resource and every path (AlwaysAllow's rules).
    pub fn everything() -> Self {
        Rules {
            resource_rules: vec![serde_json::json!({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]})],
            non_resource_rules: vec![serde_json::json!({"verbs": ["*"], "nonResourceURLs": ["*"]})],
            ..Default::default()
        }
    }
}
