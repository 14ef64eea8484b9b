//! Mirrors pkg/registry/rbac/validation/rule.go (`DefaultRuleResolver`: `VisitRulesFor`,
//! `RulesFor`, `GetRoleReferenceRules`, and `appliesTo`): the rules a user holds in a namespace —
//! those of every ClusterRoleBinding and every RoleBinding of the namespace whose subjects name
//! the user, one of its groups, or its service account — visited one by one, so that the
//! authorizer can stop at the first that allows; all of them, for SelfSubjectRulesReview and the
//! escalation checks; and the rules of the role a binding names.
//!
//! The objects are the API's JSON as the watch caches hold it; walking it for the few fields that
//! matter costs far less per request than decoding every binding into its type.

use std::fmt;
use std::sync::Arc;

use serde_json::Value;

use crate::authentication::user::UserInfo;
use crate::authorization::authorizer::Rules;

/// Where the bindings and roles come from (Kubernetes' four listers): the watch caches in the
/// server, a fixed list in tests. A visit returns false to stop.
pub trait PolicySource: Send + Sync {
    fn cluster_role_bindings(&self, visit: &mut dyn FnMut(&Value) -> bool);
    fn role_bindings(&self, namespace: &str, visit: &mut dyn FnMut(&Value) -> bool);
    fn cluster_role(&self, name: &str) -> Option<Arc<Value>>;
    fn role(&self, namespace: &str, name: &str) -> Option<Arc<Value>>;
}

/// What RBAC knows of a user's rules, over a [`PolicySource`] (`DefaultRuleResolver`): the RBAC
/// authorizer asks it, and so do the escalation checks of writes of roles and bindings.
pub struct DefaultRuleResolver {
    pub source: Box<dyn PolicySource>,
}

impl DefaultRuleResolver {
    /// [`visit_rules_for`] over this resolver's source.
    pub fn visit_rules_for(&self, user: &UserInfo, namespace: &str, errors: &mut Vec<String>, visit: &mut dyn FnMut(&RuleSource<'_>, &Value) -> bool) {
        visit_rules_for(self.source.as_ref(), user, namespace, errors, visit);
    }

    /// Every rule `user` holds in `namespace` (cluster-wide ones included), split as
    /// SelfSubjectRulesReview lists them: a rule with resources is a resource rule, one with
    /// non-resource URLs a non-resource rule; with what could not be read.
    pub fn rules_for(&self, user: &UserInfo, namespace: &str) -> Rules {
        let mut rules = Rules::default();
        visit_rules_for(self.source.as_ref(), user, namespace, &mut rules.evaluation_errors, &mut |_, rule| {
            let list = |field: &str| rule.get(field).filter(|v| v.as_array().is_some_and(|a| !a.is_empty())).cloned();
            let empty = || Value::Array(Vec::new());
            if let Some(resources) = list("resources") {
                let mut r = serde_json::json!({"verbs": list("verbs").unwrap_or_else(empty), "apiGroups": list("apiGroups").unwrap_or_else(empty), "resources": resources});
                if let Some(names) = list("resourceNames") {
                    r["resourceNames"] = names;
                }
                rules.resource_rules.push(r);
            }
            if let Some(urls) = list("nonResourceURLs") {
                rules.non_resource_rules.push(serde_json::json!({"verbs": list("verbs").unwrap_or_else(empty), "nonResourceURLs": urls}));
            }
            true
        });
        rules
    }

    /// The rules of the role `kind`/`name` a binding in `namespace` names
    /// (`GetRoleReferenceRules`), or why there are none (`role.rbac.authorization.k8s.io "x" not found`).
    pub fn role_reference_rules(&self, kind: &str, namespace: &str, name: &str) -> Result<Vec<Value>, String> {
        let binding = serde_json::json!({"roleRef": {"kind": kind, "name": name}});
        let role = role_of(self.source.as_ref(), &binding, namespace)?;
        Ok(role.get("rules").and_then(Value::as_array).cloned().unwrap_or_default())
    }
}

/// The binding a rule comes from, as the authorizer's reason names it:
/// `ClusterRoleBinding "cluster-admin" of ClusterRole "cluster-admin" to Group "system:masters"`.
pub struct RuleSource<'a> {
    pub binding: &'a Value,
    /// The binding's namespace; empty for a ClusterRoleBinding.
    pub namespace: &'a str,
    pub subject: &'a Value,
}

impl fmt::Display for RuleSource<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = |v: &Value, p: &str| v.pointer(p).and_then(Value::as_str).unwrap_or("").to_string();
        let name = s(self.binding, "/metadata/name");
        let (role_kind, role_name) = (s(self.binding, "/roleRef/kind"), s(self.binding, "/roleRef/name"));
        let (kind, subject) = (s(self.subject, "/kind"), s(self.subject, "/name"));
        let subject = match kind.as_str() {
            "ServiceAccount" => format!("{subject}/{}", subject_namespace(self.subject, self.namespace)),
            _ => subject,
        };
        if self.namespace.is_empty() {
            write!(f, "ClusterRoleBinding {name:?} of {role_kind} {role_name:?} to {kind} {subject:?}")
        } else {
            write!(f, "RoleBinding \"{name}/{}\" of {role_kind} {role_name:?} to {kind} {subject:?}", self.namespace)
        }
    }
}

/// A ServiceAccount subject's namespace: its own, or the binding's when it names none.
fn subject_namespace<'a>(subject: &'a Value, binding_namespace: &'a str) -> &'a str {
    subject.get("namespace").and_then(Value::as_str).filter(|n| !n.is_empty()).unwrap_or(binding_namespace)
}

/// The subject of `binding` that names `user`, if any (`appliesTo`).
pub fn applies_to<'b>(user: &UserInfo, binding: &'b Value, namespace: &str) -> Option<&'b Value> {
    binding.get("subjects")?.as_array()?.iter().find(|subject| {
        let name = subject.get("name").and_then(Value::as_str).unwrap_or("");
        match subject.get("kind").and_then(Value::as_str) {
            Some("User") => user.name == name,
            Some("Group") => user.groups.iter().any(|g| g == name),
            Some("ServiceAccount") => is_service_account(&user.name, subject_namespace(subject, namespace), name),
            _ => false,
        }
    })
}

/// Whether `username` is `system:serviceaccount:<namespace>:<name>`
/// (pkg/serviceaccount's `MakeUsername`), without building the string.
fn is_service_account(username: &str, namespace: &str, name: &str) -> bool {
    username
        .strip_prefix("system:serviceaccount:")
        .and_then(|rest| rest.strip_prefix(namespace))
        .and_then(|rest| rest.strip_prefix(':'))
        .is_some_and(|rest| rest == name)
}

/// Visits each rule `user` holds in `namespace` (empty: cluster-wide rules only) with the binding
/// it comes from, until `visit` returns false. ClusterRoleBindings first, as Kubernetes does. A
/// binding whose role does not exist grants nothing and adds to `errors`
/// (`clusterrole.rbac.authorization.k8s.io "x" not found`).
pub fn visit_rules_for(source: &dyn PolicySource, user: &UserInfo, namespace: &str, errors: &mut Vec<String>, visit: &mut dyn FnMut(&RuleSource<'_>, &Value) -> bool) {
    let mut go_on = true;
    source.cluster_role_bindings(&mut |binding| {
        if let Some(subject) = applies_to(user, binding, "") {
            match role_of(source, binding, "") {
                Ok(role) => go_on = visit_rules(&role, &RuleSource { binding, namespace: "", subject }, visit),
                Err(e) => errors.push(e),
            }
        }
        go_on
    });
    if !go_on || namespace.is_empty() {
        return;
    }
    source.role_bindings(namespace, &mut |binding| {
        if let Some(subject) = applies_to(user, binding, namespace) {
            match role_of(source, binding, namespace) {
                Ok(role) => go_on = visit_rules(&role, &RuleSource { binding, namespace, subject }, visit),
                Err(e) => errors.push(e),
            }
        }
        go_on
    });
}

/// The role a binding refers to (`GetRoleReferenceRules`): a ClusterRole, or a Role of the
/// binding's namespace; or what is wrong with the reference.
fn role_of(source: &dyn PolicySource, binding: &Value, namespace: &str) -> Result<Arc<Value>, String> {
    let name = binding.pointer("/roleRef/name").and_then(Value::as_str).unwrap_or("");
    let kind = binding.pointer("/roleRef/kind").and_then(Value::as_str).unwrap_or("");
    let found = match kind {
        "ClusterRole" => source.cluster_role(name),
        "Role" if !namespace.is_empty() => source.role(namespace, name),
        _ => return Err(format!("unsupported role reference kind: {kind:?}")),
    };
    found.ok_or_else(|| format!("{}.rbac.authorization.k8s.io {name:?} not found", kind.to_ascii_lowercase()))
}

fn visit_rules(role: &Value, from: &RuleSource<'_>, visit: &mut dyn FnMut(&RuleSource<'_>, &Value) -> bool) -> bool {
    let Some(rules) = role.get("rules").and_then(Value::as_array) else { return true };
    rules.iter().all(|rule| visit(from, rule))
}

/// A fixed policy, for tests of what reads one.
#[cfg(test)]
pub mod testing {
    use super::*;

    #[derive(Default)]
    pub struct StaticPolicy {
        pub cluster_roles: Vec<Value>,
        pub cluster_role_bindings: Vec<Value>,
        pub roles: Vec<Value>,
        pub role_bindings: Vec<Value>,
    }

    fn named<'a>(objs: &'a [Value], namespace: Option<&str>, name: &str) -> Option<Arc<Value>> {
        objs.iter()
            .find(|o| o.pointer("/metadata/name").and_then(Value::as_str) == Some(name) && namespace.is_none_or(|ns| o.pointer("/metadata/namespace").and_then(Value::as_str) == Some(ns)))
            .map(|o| Arc::new(o.clone()))
    }

    impl PolicySource for StaticPolicy {
        fn cluster_role_bindings(&self, visit: &mut dyn FnMut(&Value) -> bool) {
            let _ = self.cluster_role_bindings.iter().all(|b| visit(b));
        }
        fn role_bindings(&self, namespace: &str, visit: &mut dyn FnMut(&Value) -> bool) {
            let _ = self.role_bindings.iter().filter(|b| b.pointer("/metadata/namespace").and_then(Value::as_str) == Some(namespace)).all(|b| visit(b));
        }
        fn cluster_role(&self, name: &str) -> Option<Arc<Value>> {
            named(&self.cluster_roles, None, name)
        }
        fn role(&self, namespace: &str, name: &str) -> Option<Arc<Value>> {
            named(&self.roles, Some(namespace), name)
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn subjects_apply_by_user_group_and_service_account() {
        let binding = json!({"subjects": [
            {"kind": "User", "name": "jane"},
            {"kind": "Group", "name": "devs"},
            {"kind": "ServiceAccount", "name": "builder"},
            {"kind": "ServiceAccount", "name": "robot", "namespace": "ci"},
        ]});
        let user = |name: &str, groups: &[&str]| UserInfo { name: name.into(), groups: groups.iter().map(|g| g.to_string()).collect(), ..Default::default() };
        let applies = |u: &UserInfo| applies_to(u, &binding, "team").map(|s| s["name"].as_str().unwrap_or("").to_string());
        assert_eq!(applies(&user("jane", &[])).as_deref(), Some("jane"));
        assert_eq!(applies(&user("bob", &["devs"])).as_deref(), Some("devs"));
        assert_eq!(applies(&user("system:serviceaccount:team:builder", &[])).as_deref(), Some("builder"), "a subject without a namespace is the binding's");
        assert_eq!(applies(&user("system:serviceaccount:ci:robot", &[])).as_deref(), Some("robot"));
        for nobody in ["bob", "system:serviceaccount:ci:builder", "system:serviceaccount:team:builderx", "system:serviceaccount:team", "Jane"] {
            assert_eq!(applies(&user(nobody, &["Devs"])), None, "{nobody}");
        }
    }

    #[test]
    fn sources_are_named_as_kubernetes_names_them() {
        let crb = json!({"metadata": {"name": "cluster-admin"}, "roleRef": {"kind": "ClusterRole", "name": "cluster-admin"}});
        let subject = json!({"kind": "Group", "name": "system:masters"});
        assert_eq!(
            RuleSource { binding: &crb, namespace: "", subject: &subject }.to_string(),
            r#"ClusterRoleBinding "cluster-admin" of ClusterRole "cluster-admin" to Group "system:masters""#
        );
        let rb = json!({"metadata": {"name": "read", "namespace": "team"}, "roleRef": {"kind": "Role", "name": "reader"}});
        let sa = json!({"kind": "ServiceAccount", "name": "builder"});
        assert_eq!(RuleSource { binding: &rb, namespace: "team", subject: &sa }.to_string(), r#"RoleBinding "read/team" of Role "reader" to ServiceAccount "builder/team""#);
    }
}
