//! Mirrors pkg/registry/rbac/validation/rule.go (`DefaultRuleResolver.VisitRulesFor` and
//! `appliesTo`): the rules a user holds in a namespace — those of every ClusterRoleBinding and
//! every RoleBinding of the namespace whose subjects name the user, one of its groups, or its
//! service account — visited one by one, so that the authorizer can stop at the first that allows.
//!
//! The objects are the API's JSON as the watch caches hold it; walking it for the few fields that
//! matter costs far less per request than decoding every binding into its type.

use std::fmt;
use std::sync::Arc;

use serde_json::Value;

use crate::authentication::user::UserInfo;

/// Where the bindings and roles come from (Kubernetes' four listers): the watch caches in the
/// server, a fixed list in tests. A visit returns false to stop.
pub trait PolicySource: Send + Sync {
    fn cluster_role_bindings(&self, visit: &mut dyn FnMut(&Value) -> bool);
    fn role_bindings(&self, namespace: &str, visit: &mut dyn FnMut(&Value) -> bool);
    fn cluster_role(&self, name: &str) -> Option<Arc<Value>>;
    fn role(&self, namespace: &str, name: &str) -> Option<Arc<Value>>;
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
/// it comes from, until `visit` returns false. ClusterRoleBindings first, as Kubernetes does.
pub fn visit_rules_for(source: &dyn PolicySource, user: &UserInfo, namespace: &str, visit: &mut dyn FnMut(&RuleSource<'_>, &Value) -> bool) {
    let mut go_on = true;
    source.cluster_role_bindings(&mut |binding| {
        if let Some(subject) = applies_to(user, binding, "")
            && let Some(role) = role_of(source, binding, "")
        {
            go_on = visit_rules(&role, &RuleSource { binding, namespace: "", subject }, visit);
        }
        go_on
    });
    if !go_on || namespace.is_empty() {
        return;
    }
    source.role_bindings(namespace, &mut |binding| {
        if let Some(subject) = applies_to(user, binding, namespace)
            && let Some(role) = role_of(source, binding, namespace)
        {
            go_on = visit_rules(&role, &RuleSource { binding, namespace, subject }, visit);
        }
        go_on
    });
}

/// The role a binding refers to (`GetRoleReferenceRules`): a ClusterRole, or a Role of the
/// binding's namespace. A missing role grants nothing.
fn role_of(source: &dyn PolicySource, binding: &Value, namespace: &str) -> Option<Arc<Value>> {
    let name = binding.pointer("/roleRef/name")?.as_str()?;
    match binding.pointer("/roleRef/kind")?.as_str()? {
        "ClusterRole" => source.cluster_role(name),
        "Role" if !namespace.is_empty() => source.role(namespace, name),
        _ => None,
    }
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
