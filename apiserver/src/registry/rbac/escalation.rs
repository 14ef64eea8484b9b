//! Mirrors the policy-based storages of pkg/registry/rbac (`role/policybased`,
//! `clusterrole/policybased`, `rolebinding/policybased`, `clusterrolebinding/policybased`), with
//! pkg/registry/rbac/escalation_check.go and `ConfirmNoEscalation` of
//! pkg/registry/rbac/validation/rule.go: RBAC's escalation checks. Being allowed to write roles
//! and bindings must not be a way to gain permissions:
//!
//! - a Role or ClusterRole may hold only rules its writer holds (in the role's namespace, or
//!   cluster-wide), unless the writer may `escalate` roles; only a writer who holds everything
//!   may give a ClusterRole an `aggregationRule`;
//! - a RoleBinding or ClusterRoleBinding may grant only a role whose rules its writer holds,
//!   unless the writer may `bind` that role;
//! - members of `system:masters` may do either.
//!
//! A refusal is Kubernetes' 403, naming the rules the writer lacks.

use apimachinery::error::aggregate;
use serde_json::Value;

use crate::authorization::authorizer::{Attributes, Decision, Rules};
use crate::authorization::rbac::policy_comparator::{Atom, covers};
use crate::authentication::user::SYSTEM_PRIVILEGED_GROUP;
use crate::error::{Error, Result};
use crate::registry::generic::strategy::{ResourceInfo, Writer};

const GROUP: &str = "rbac.authorization.k8s.io";

/// A role's check (`RoleEscalationAuthorized`, then `ConfirmNoEscalation` of its rules).
pub fn check_role(writer: &Writer<'_>, info: &ResourceInfo, role: &Value) -> Result<()> {
    let (namespace, name) = (str_at(role, "/metadata/namespace"), str_at(role, "/metadata/name"));
    if escalation_allowed(writer) || allowed(writer, "escalate", info.plural, namespace, name) {
        return Ok(());
    }
    if role.get("aggregationRule").is_some_and(|r| !r.is_null()) {
        let everything = Rules::everything();
        let all: Vec<Value> = everything.resource_rules.into_iter().chain(everything.non_resource_rules).collect();
        if confirm_no_escalation(writer, "", &all).is_err() {
            return Err(forbidden(info, name, "must have cluster-admin privileges to use the aggregationRule"));
        }
    }
    let rules = role.get("rules").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    confirm_no_escalation(writer, namespace, rules).map_err(|why| forbidden(info, name, &why))
}

/// A binding's check (`BindingAuthorized`, then `ConfirmNoEscalation` of its role's rules).
pub fn check_binding(writer: &Writer<'_>, info: &ResourceInfo, binding: &Value) -> Result<()> {
    if escalation_allowed(writer) {
        return Ok(());
    }
    let (namespace, name) = (str_at(binding, "/metadata/namespace"), str_at(binding, "/metadata/name"));
    let (kind, role) = (str_at(binding, "/roleRef/kind"), str_at(binding, "/roleRef/name"));
    let resource = match kind {
        "ClusterRole" => "clusterroles",
        "Role" => "roles",
        _ => return Err(forbidden(info, name, &format!("unsupported role reference kind: {kind:?}"))),
    };
    if allowed(writer, "bind", resource, namespace, role) {
        return Ok(());
    }
    let rules = role_rules(writer, kind, namespace, role)?;
    confirm_no_escalation(writer, namespace, &rules).map_err(|why| forbidden(info, name, &why))
}

/// `EscalationAllowed`: a member of `system:masters` may grant anything.
fn escalation_allowed(writer: &Writer<'_>) -> bool {
    writer.user.groups.iter().any(|g| g == SYSTEM_PRIVILEGED_GROUP)
}

/// Whether the writer may `verb` the role `resource`/`name` of this group.
fn allowed(writer: &Writer<'_>, verb: &str, resource: &str, namespace: &str, name: &str) -> bool {
    let a = Attributes { user: writer.user, verb, resource_request: true, namespace, api_group: GROUP, api_version: "*", resource, name, ..Default::default() };
    writer.authorizer.authorize(&a).0 == Decision::Allow
}

/// The rules of the role a binding names (`GetRoleReferenceRules`): 404 when it does not exist.
fn role_rules(writer: &Writer<'_>, kind: &str, namespace: &str, name: &str) -> Result<Vec<Value>> {
    writer.rules.role_reference_rules(kind, namespace, name).map_err(|_| Error::not_found(&format!("{}.{GROUP}", kind.to_ascii_lowercase()), name))
}

/// `ConfirmNoEscalation`: the writer's rules in `namespace` cover `rules`, or what they lack.
fn confirm_no_escalation(writer: &Writer<'_>, namespace: &str, rules: &[Value]) -> std::result::Result<(), String> {
    let owner = writer.rules.rules_for(writer.user, namespace);
    let held: Vec<Value> = owner.resource_rules.into_iter().chain(owner.non_resource_rules).collect();
    let (covered, missing) = covers(&held, rules);
    if covered {
        return Ok(());
    }
    let mut lines: Vec<String> = compact(&missing).iter().map(compact_string).collect();
    lines.sort();
    lines.dedup();
    let groups: Vec<String> = writer.user.groups.iter().map(|g| format!("{g:?}")).collect();
    let mut msg = format!("user {:?} (groups=[{}]) is attempting to grant RBAC permissions not currently held:\n{}", writer.user.name, groups.join(" "), lines.join("\n"));
    if !owner.evaluation_errors.is_empty() {
        msg.push_str(&format!("; resolution errors: [{}]", aggregate(&owner.evaluation_errors)));
    }
    Err(msg)
}

/// A missing permission as a rule: the atoms of one group, resource (or URL) and name merged
/// into one rule with all their verbs (`CompactRules`).
struct Missing {
    group: Option<String>,
    resource: Option<String>,
    name: Option<String>,
    url: Option<String>,
    verbs: Vec<String>,
}

fn compact(atoms: &[Atom]) -> Vec<Missing> {
    let mut out: Vec<Missing> = Vec::new();
    for a in atoms {
        match out.iter_mut().find(|m| m.group == a.group && m.resource == a.resource && m.name == a.name && m.url == a.url) {
            Some(m) if !m.verbs.contains(&a.verb) => m.verbs.push(a.verb.clone()),
            Some(_) => {}
            None => out.push(Missing { group: a.group.clone(), resource: a.resource.clone(), name: a.name.clone(), url: a.url.clone(), verbs: vec![a.verb.clone()] }),
        }
    }
    out
}

/// A rule as Go's `CompactString` prints it: `{APIGroups:[""], Resources:["pods"], Verbs:["delete"]}`.
fn compact_string(m: &Missing) -> String {
    let quoted = |items: &[&str]| format!("[{}]", items.iter().map(|i| format!("{i:?}")).collect::<Vec<_>>().join(" "));
    let mut parts = Vec::new();
    if let Some(g) = &m.group {
        parts.push(format!("APIGroups:{}", quoted(&[g])));
    }
    if let Some(r) = &m.resource {
        parts.push(format!("Resources:{}", quoted(&[r])));
    }
    if let Some(u) = &m.url {
        parts.push(format!("NonResourceURLs:{}", quoted(&[u])));
    }
    if let Some(n) = &m.name {
        parts.push(format!("ResourceNames:{}", quoted(&[n])));
    }
    let verbs: Vec<&str> = m.verbs.iter().map(String::as_str).collect();
    parts.push(format!("Verbs:{}", quoted(&verbs)));
    format!("{{{}}}", parts.join(", "))
}

fn str_at<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

/// The 403 of a write refused by a check (`errors.NewForbidden(groupResource, name, err)`).
fn forbidden(info: &ResourceInfo, name: &str, why: &str) -> Error {
    let qualified = format!("{}.{}", info.plural, info.group);
    Error::ForbiddenRequest { group: info.group.into(), resource: info.plural.into(), name: name.into(), message: format!("{qualified} {name:?} is forbidden: {why}") }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::authentication::user::UserInfo;
    use crate::authorization::rbac::rbac::RbacAuthorizer;
    use crate::authorization::rbac::rule::DefaultRuleResolver;
    use crate::authorization::rbac::rule::testing::StaticPolicy;
    use crate::registry::rbac::clusterrole::strategy::CLUSTERROLES;
    use crate::registry::rbac::role::strategy::ROLES;
    use crate::registry::rbac::rolebinding::strategy::ROLEBINDINGS;

    /// jane reads pods in team, and may bind the ClusterRole "binder-ok" there.
    fn policy() -> StaticPolicy {
        StaticPolicy {
            cluster_roles: vec![
                json!({"metadata": {"name": "pod-reader"}, "rules": [{"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods"]}]}),
                json!({"metadata": {"name": "pod-admin"}, "rules": [{"verbs": ["*"], "apiGroups": [""], "resources": ["pods"]}]}),
                json!({"metadata": {"name": "binder"}, "rules": [{"verbs": ["bind"], "apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles"], "resourceNames": ["pod-admin"]}]}),
            ],
            role_bindings: vec![
                json!({"metadata": {"name": "read", "namespace": "team"}, "roleRef": {"kind": "ClusterRole", "name": "pod-reader"}, "subjects": [{"kind": "User", "name": "jane"}]}),
                json!({"metadata": {"name": "bind", "namespace": "prod"}, "roleRef": {"kind": "ClusterRole", "name": "binder"}, "subjects": [{"kind": "User", "name": "jane"}]}),
            ],
            ..Default::default()
        }
    }

    fn check(user: &UserInfo, f: impl Fn(&Writer<'_>) -> Result<()>) -> Result<()> {
        let authorizer = RbacAuthorizer::new(Box::new(policy()));
        let rules = DefaultRuleResolver { source: Box::new(policy()) };
        f(&Writer { user, authorizer: &authorizer, rules: &rules })
    }

    fn jane() -> UserInfo {
        UserInfo { name: "jane".into(), groups: vec!["devs".into(), "system:authenticated".into()], ..Default::default() }
    }

    #[test]
    fn a_role_holds_only_what_its_writer_holds() {
        let role = |verbs: Value| json!({"metadata": {"name": "r", "namespace": "team"}, "rules": [{"verbs": verbs, "apiGroups": [""], "resources": ["pods"]}]});
        assert!(check(&jane(), |w| check_role(w, &ROLES, &role(json!(["get"])))).is_ok());
        let e = check(&jane(), |w| check_role(w, &ROLES, &role(json!(["get", "delete", "patch"])))).expect_err("escalation");
        assert_eq!(e.code(), 403);
        assert_eq!(
            e.to_string(),
            "roles.rbac.authorization.k8s.io \"r\" is forbidden: user \"jane\" (groups=[\"devs\" \"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n{APIGroups:[\"\"], Resources:[\"pods\"], Verbs:[\"delete\" \"patch\"]}"
        );
        let elsewhere = json!({"metadata": {"name": "r", "namespace": "other"}, "rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}]});
        assert!(check(&jane(), |w| check_role(w, &ROLES, &elsewhere)).is_err(), "jane holds nothing in other");
        let admin = UserInfo { name: "root".into(), groups: vec!["system:masters".into()], ..Default::default() };
        assert!(check(&admin, |w| check_role(w, &ROLES, &role(json!(["*"])))).is_ok());
        let aggregated = json!({"metadata": {"name": "agg"}, "aggregationRule": {"clusterRoleSelectors": []}, "rules": []});
        let e = check(&jane(), |w| check_role(w, &CLUSTERROLES, &aggregated)).expect_err("aggregation");
        assert!(e.to_string().ends_with("must have cluster-admin privileges to use the aggregationRule"), "{e}");
    }

    #[test]
    fn a_binding_grants_only_what_its_writer_holds_or_may_bind() {
        let binding = |ns: &str, role: &str| json!({"metadata": {"name": "b", "namespace": ns}, "roleRef": {"kind": "ClusterRole", "name": role}, "subjects": [{"kind": "User", "name": "bob"}]});
        assert!(check(&jane(), |w| check_binding(w, &ROLEBINDINGS, &binding("team", "pod-reader"))).is_ok(), "jane holds pod-reader's rules in team");
        let e = check(&jane(), |w| check_binding(w, &ROLEBINDINGS, &binding("team", "pod-admin"))).expect_err("escalation");
        assert!(e.to_string().starts_with(r#"rolebindings.rbac.authorization.k8s.io "b" is forbidden: user "jane""#), "{e}");
        assert!(check(&jane(), |w| check_binding(w, &ROLEBINDINGS, &binding("prod", "pod-admin"))).is_ok(), "jane may bind pod-admin in prod");
        let e = check(&jane(), |w| check_binding(w, &ROLEBINDINGS, &binding("team", "gone"))).expect_err("missing role");
        assert_eq!((e.code(), e.to_string()), (404, r#"clusterrole.rbac.authorization.k8s.io "gone" not found"#.to_string()));
    }
}
