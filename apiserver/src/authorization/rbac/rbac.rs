//! Mirrors plugin/pkg/auth/authorizer/rbac/rbac.go: the RBAC authorizer. A request is allowed when
//! one rule the user holds in the request's namespace (or cluster-wide) covers it: its verb, API
//! group, resource (or `resource/subresource`) and name, or for a path that names no resource,
//! its verb and path. RBAC never denies: without a rule its answer is no opinion (naming any
//! binding whose role is missing), and the union of authorizers ends in a 403. The rules a user
//! holds are listed for SelfSubjectRulesReview as they are written in the roles.

use apimachinery::error::aggregate;
use serde_json::Value;

use super::rule::{DefaultRuleResolver, PolicySource};
use crate::authentication::user::UserInfo;
use crate::authorization::authorizer::{Attributes, Authorizer, Decision, Rules};

pub struct RbacAuthorizer {
    pub resolver: DefaultRuleResolver,
}

impl RbacAuthorizer {
    pub fn new(source: Box<dyn PolicySource>) -> Self {
        RbacAuthorizer { resolver: DefaultRuleResolver { source } }
    }
}

impl Authorizer for RbacAuthorizer {
    fn authorize(&self, a: &Attributes<'_>) -> (Decision, String) {
        let mut allowed_by = None;
        let mut errors = Vec::new();
        self.resolver.visit_rules_for(a.user, a.namespace, &mut errors, &mut |source, rule| {
            if rule_allows(a, rule) {
                allowed_by = Some(format!("RBAC: allowed by {source}"));
                return false;
            }
            true
        });
        match allowed_by {
            Some(reason) => (Decision::Allow, reason),
            None if errors.is_empty() => (Decision::NoOpinion, String::new()),
            None => (Decision::NoOpinion, format!("RBAC: {}", aggregate(&errors))),
        }
    }

    fn rules_for(&self, user: &UserInfo, namespace: &str) -> Rules {
        self.resolver.rules_for(user, namespace)
    }
}


/// Whether one PolicyRule covers the request (`RuleAllows`).
pub fn rule_allows(a: &Attributes<'_>, rule: &Value) -> bool {
    if !has(rule, "verbs", |v| v == "*" || v == a.verb) {
        return false;
    }
    if !a.resource_request {
        return has(rule, "nonResourceURLs", |u| non_resource_url_matches(u, a.path));
    }
    has(rule, "apiGroups", |g| g == "*" || g == a.api_group)
        && has(rule, "resources", |r| resource_matches(r, a.resource, a.subresource))
        && resource_name_matches(rule, a.name)
}

/// Whether the rule's list `field` has an entry for which `matches` holds.
fn has(rule: &Value, field: &str, matches: impl Fn(&str) -> bool) -> bool {
    rule.get(field).and_then(Value::as_array).is_some_and(|list| list.iter().filter_map(Value::as_str).any(matches))
}

/// `*` matches every resource and subresource; `pods` only the resource itself; `pods/log` that
/// subresource; `*/scale` the subresource of every resource.
fn resource_matches(rule: &str, resource: &str, subresource: &str) -> bool {
    if rule == "*" {
        return true;
    }
    if subresource.is_empty() {
        return rule == resource;
    }
    match rule.split_once('/') {
        Some((r, s)) => (r == resource || r == "*") && s == subresource,
        None => false,
    }
}

/// No `resourceNames`: every object; otherwise only those named (so never a list of a whole
/// collection or a create, which have no name).
fn resource_name_matches(rule: &Value, name: &str) -> bool {
    match rule.get("resourceNames").and_then(Value::as_array) {
        None => true,
        Some(names) if names.is_empty() => true,
        Some(names) => !name.is_empty() && names.iter().any(|n| n.as_str() == Some(name)),
    }
}

/// A non-resource URL rule: `*`, the exact path, or a prefix ending in `*` (`/healthz/*`).
fn non_resource_url_matches(rule: &str, path: &str) -> bool {
    rule == "*" || rule == path || rule.strip_suffix('*').is_some_and(|prefix| path.starts_with(prefix))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::authentication::user::UserInfo;
    use crate::authorization::rbac::rule::testing::StaticPolicy;

    fn attrs<'a>(user: &'a UserInfo, verb: &'a str, ns: &'a str, group: &'a str, resource: &'a str, sub: &'a str, name: &'a str) -> Attributes<'a> {
        Attributes { user, verb, resource_request: true, namespace: ns, api_group: group, resource, subresource: sub, name, ..Default::default() }
    }

    #[test]
    fn rules_match_verbs_groups_resources_subresources_and_names() {
        let user = UserInfo::default();
        let rule = json!({"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods", "pods/log"]});
        let cases = [
            (attrs(&user, "get", "x", "", "pods", "", "a"), true),
            (attrs(&user, "list", "x", "", "pods", "", ""), true),
            (attrs(&user, "get", "x", "", "pods", "log", "a"), true),
            (attrs(&user, "create", "x", "", "pods", "", ""), false),
            (attrs(&user, "get", "x", "apps", "pods", "", "a"), false),
            (attrs(&user, "get", "x", "", "pods", "exec", "a"), false),
            (attrs(&user, "get", "x", "", "services", "", "a"), false),
        ];
        for (a, want) in cases {
            assert_eq!(rule_allows(&a, &rule), want, "{} {}/{}", a.verb, a.resource, a.subresource);
        }
        let star = json!({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]});
        assert!(rule_allows(&attrs(&user, "delete", "", "apps", "deployments", "scale", "d"), &star));
        let scale = json!({"verbs": ["update"], "apiGroups": ["apps"], "resources": ["*/scale"]});
        assert!(rule_allows(&attrs(&user, "update", "x", "apps", "deployments", "scale", "d"), &scale));
        assert!(!rule_allows(&attrs(&user, "update", "x", "apps", "deployments", "", "d"), &scale));
        let named = json!({"verbs": ["get", "list"], "apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["settings"]});
        assert!(rule_allows(&attrs(&user, "get", "x", "", "configmaps", "", "settings"), &named));
        assert!(!rule_allows(&attrs(&user, "get", "x", "", "configmaps", "", "other"), &named));
        assert!(!rule_allows(&attrs(&user, "list", "x", "", "configmaps", "", ""), &named), "a named rule never covers a whole list");
    }

    #[test]
    fn non_resource_urls() {
        let user = UserInfo::default();
        let rule = json!({"verbs": ["get"], "nonResourceURLs": ["/healthz", "/version", "/apis/*"]});
        let path = |verb, path| Attributes { user: &user, verb, path, resource_request: false, ..Default::default() };
        assert!(rule_allows(&path("get", "/healthz"), &rule));
        assert!(rule_allows(&path("get", "/apis/apps/v1"), &rule));
        assert!(!rule_allows(&path("get", "/healthz/etcd"), &rule));
        assert!(!rule_allows(&path("post", "/version"), &rule));
        assert!(!rule_allows(&path("get", "/metrics"), &rule));
        assert!(!rule_allows(&attrs(&user, "get", "", "", "healthz", "", ""), &rule), "a resource request needs a resource rule");
    }

    #[test]
    fn bindings_grant_their_roles_rules_in_their_namespace() {
        let policy = StaticPolicy {
            cluster_roles: vec![json!({"metadata": {"name": "view"}, "rules": [{"verbs": ["get", "list", "watch"], "apiGroups": [""], "resources": ["pods"]}]})],
            cluster_role_bindings: vec![],
            roles: vec![json!({"metadata": {"name": "writer", "namespace": "team"}, "rules": [{"verbs": ["create"], "apiGroups": [""], "resources": ["configmaps"]}]})],
            role_bindings: vec![
                json!({"metadata": {"name": "viewers", "namespace": "team"}, "roleRef": {"kind": "ClusterRole", "name": "view"}, "subjects": [{"kind": "ServiceAccount", "name": "reader"}]}),
                json!({"metadata": {"name": "writers", "namespace": "team"}, "roleRef": {"kind": "Role", "name": "writer"}, "subjects": [{"kind": "User", "name": "jane"}]}),
                json!({"metadata": {"name": "dangling", "namespace": "team"}, "roleRef": {"kind": "Role", "name": "gone"}, "subjects": [{"kind": "User", "name": "jane"}]}),
            ],
        };
        let rbac = RbacAuthorizer::new(Box::new(policy));
        let sa = UserInfo { name: "system:serviceaccount:team:reader".into(), ..Default::default() };
        let jane = UserInfo { name: "jane".into(), ..Default::default() };
        let (d, reason) = rbac.authorize(&attrs(&sa, "list", "team", "", "pods", "", ""));
        assert_eq!((d, reason.as_str()), (Decision::Allow, r#"RBAC: allowed by RoleBinding "viewers/team" of ClusterRole "view" to ServiceAccount "reader/team""#));
        assert_eq!(rbac.authorize(&attrs(&sa, "create", "team", "", "pods", "", "")).0, Decision::NoOpinion);
        assert_eq!(rbac.authorize(&attrs(&sa, "list", "other", "", "pods", "", "")).0, Decision::NoOpinion, "a RoleBinding grants in its namespace only");
        assert_eq!(rbac.authorize(&attrs(&sa, "list", "", "", "pods", "", "")).0, Decision::NoOpinion, "nor across all namespaces");
        assert_eq!(rbac.authorize(&attrs(&jane, "create", "team", "", "configmaps", "", "")).0, Decision::Allow);
        assert_eq!(
            rbac.authorize(&attrs(&jane, "list", "team", "", "pods", "", "")),
            (Decision::NoOpinion, r#"RBAC: role.rbac.authorization.k8s.io "gone" not found"#.into()),
            "a binding to a missing role is named in the refusal"
        );
        let rules = rbac.rules_for(&jane, "team");
        assert_eq!(rules.resource_rules, vec![json!({"verbs": ["create"], "apiGroups": [""], "resources": ["configmaps"]})]);
        assert!(rules.non_resource_rules.is_empty() && !rules.incomplete);
        assert_eq!(rules.evaluation_errors, vec![r#"role.rbac.authorization.k8s.io "gone" not found"#.to_string()]);
        assert!(rbac.rules_for(&jane, "other").resource_rules.is_empty(), "a Role's rules hold in its namespace only");
    }
}
