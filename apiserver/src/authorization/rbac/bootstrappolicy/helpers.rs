//! Mirrors pkg/apis/rbac/v1/helpers.go: builders that let the default policy read as a table.
//!
//! `new_rule(&["get", "list"]).groups(&[""]).resources(&["pods"]).rule()` builds one
//! `PolicyRule`; `ClusterRoleBindingBuilder` and `RoleBindingBuilder` build bindings subject by
//! subject. Like Kubernetes' builders they keep every list sorted and free of duplicates, which
//! is why the golden files show `verbs: [create, get, list, watch]` for a rule written as
//! `create, get, list, watch` or as `watch, list, get, create`.
//!
//! The policy is static data compiled into the server, so a malformed rule is a bug in this
//! crate, not bad input: [`PolicyRuleBuilder::rule`] panics on one (Kubernetes' `RuleOrDie`), and
//! the tests build every default role, so such a bug fails them.

use std::collections::BTreeSet;

use k8s_openapi::api::rbac::v1::{
    ClusterRoleBinding, PolicyRule, RoleBinding, RoleRef, Subject,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// The API group of RBAC's own kinds, which `roleRef.apiGroup` and the User and Group subjects
/// name (ServiceAccount subjects belong to the core group and carry no apiGroup).
pub const GROUP_NAME: &str = "rbac.authorization.k8s.io";

/// Starts a rule granting `verbs`.
pub fn new_rule(verbs: &[&str]) -> PolicyRuleBuilder {
    PolicyRuleBuilder {
        rule: PolicyRule { verbs: sorted(None, verbs).unwrap_or_default(), ..PolicyRule::default() },
    }
}

/// A `PolicyRule` under construction; see [`new_rule`].
#[derive(Clone, Debug)]
pub struct PolicyRuleBuilder {
    rule: PolicyRule,
}

impl PolicyRuleBuilder {
    /// API groups the rule covers; `""` is the core group, `"*"` all of them.
    pub fn groups(mut self, groups: &[&str]) -> Self {
        self.rule.api_groups = sorted(self.rule.api_groups.take(), groups);
        self
    }

    /// Resources (`pods`), subresources (`pods/status`) or `"*"`.
    pub fn resources(mut self, resources: &[&str]) -> Self {
        self.rule.resources = sorted(self.rule.resources.take(), resources);
        self
    }

    /// Restricts the rule to objects of these names.
    pub fn names(mut self, names: &[&str]) -> Self {
        self.rule.resource_names = sorted(self.rule.resource_names.take(), names);
        self
    }

    /// Non-resource paths (`/healthz`, `/apis/*`); such a rule names no group or resource.
    pub fn urls(mut self, urls: &[&str]) -> Self {
        self.rule.non_resource_urls = sorted(self.rule.non_resource_urls.take(), urls);
        self
    }

    /// The rule, checked as Kubernetes checks it.
    ///
    /// # Panics
    /// When the rule is malformed: no verbs; paths mixed with groups, resources or names; a
    /// resource rule without groups (the classic slip: it would match nothing); or a named rule
    /// with a verb that acts on no single object (`create`, `deletecollection`). Only the static
    /// default policy calls this.
    pub fn rule(self) -> PolicyRule {
        if let Err(why) = validate(&self.rule) {
            panic!("bootstrap policy rule {:?}: {why}", self.rule);
        }
        self.rule
    }
}

fn validate(rule: &PolicyRule) -> Result<(), &'static str> {
    let is_set = |v: &Option<Vec<String>>| v.as_ref().is_some_and(|v| !v.is_empty());
    if rule.verbs.is_empty() {
        return Err("verbs are required");
    }
    if is_set(&rule.non_resource_urls) {
        if is_set(&rule.api_groups) || is_set(&rule.resources) || is_set(&rule.resource_names) {
            return Err("a non-resource rule may not have apiGroups, resources or resourceNames");
        }
        return Ok(());
    }
    if !is_set(&rule.resources) {
        return Err("a rule must have either nonResourceURLs or resources");
    }
    if !is_set(&rule.api_groups) {
        return Err("a resource rule must have apiGroups");
    }
    // A name restricts a request to one object. Creating names no existing object and
    // deletecollection acts on many, so neither can be granted by name; list and watch can, as
    // a request narrowed to one name by a metadata.name field selector.
    if is_set(&rule.resource_names)
        && rule.verbs.iter().any(|v| v == "create" || v == "deletecollection")
    {
        return Err("create and deletecollection cannot be restricted to resourceNames");
    }
    Ok(())
}

/// `existing ∪ add`, sorted and without duplicates (Go's `sets.NewString(...).List()`).
fn sorted(existing: Option<Vec<String>>, add: &[&str]) -> Option<Vec<String>> {
    let mut set: BTreeSet<String> = existing.unwrap_or_default().into_iter().collect();
    set.extend(add.iter().map(|s| s.to_string()));
    Some(set.into_iter().collect())
}

fn user_or_group(kind: &str, name: &str) -> Subject {
    Subject {
        api_group: Some(GROUP_NAME.to_string()),
        kind: kind.to_string(),
        name: name.to_string(),
        namespace: None,
    }
}

fn service_account(namespace: &str, name: &str) -> Subject {
    Subject {
        api_group: None,
        kind: "ServiceAccount".to_string(),
        name: name.to_string(),
        namespace: Some(namespace.to_string()),
    }
}

/// Builds a ClusterRoleBinding named after the ClusterRole it grants.
#[derive(Clone, Debug)]
pub struct ClusterRoleBindingBuilder {
    binding: ClusterRoleBinding,
}

impl ClusterRoleBindingBuilder {
    pub fn new(cluster_role: &str) -> Self {
        Self {
            binding: ClusterRoleBinding {
                metadata: ObjectMeta { name: Some(cluster_role.to_string()), ..ObjectMeta::default() },
                role_ref: RoleRef {
                    api_group: Some(GROUP_NAME.to_string()),
                    kind: "ClusterRole".to_string(),
                    name: cluster_role.to_string(),
                },
                subjects: None,
            },
        }
    }

    pub fn groups(mut self, groups: &[&str]) -> Self {
        let subjects = self.binding.subjects.get_or_insert_with(Vec::new);
        subjects.extend(groups.iter().map(|g| user_or_group("Group", g)));
        self
    }

    pub fn users(mut self, users: &[&str]) -> Self {
        let subjects = self.binding.subjects.get_or_insert_with(Vec::new);
        subjects.extend(users.iter().map(|u| user_or_group("User", u)));
        self
    }

    /// Service accounts of one namespace.
    pub fn service_accounts(mut self, namespace: &str, names: &[&str]) -> Self {
        let subjects = self.binding.subjects.get_or_insert_with(Vec::new);
        subjects.extend(names.iter().map(|n| service_account(namespace, n)));
        self
    }

    /// # Panics
    /// When no subject was added: a binding to nobody is a slip in the static policy (the one
    /// binding meant to have no subject, `system:node`'s, is written out in full instead).
    pub fn binding(self) -> ClusterRoleBinding {
        assert!(
            self.binding.subjects.as_ref().is_some_and(|s| !s.is_empty()),
            "bootstrap ClusterRoleBinding {:?} has no subjects",
            self.binding.metadata.name
        );
        self.binding
    }
}

/// Builds a RoleBinding of a namespace to a Role of the same namespace.
#[derive(Clone, Debug)]
pub struct RoleBindingBuilder {
    binding: RoleBinding,
}

impl RoleBindingBuilder {
    /// A binding named after `role`, in `namespace`.
    pub fn new(role: &str, namespace: &str) -> Self {
        Self {
            binding: RoleBinding {
                metadata: ObjectMeta {
                    name: Some(role.to_string()),
                    namespace: Some(namespace.to_string()),
                    ..ObjectMeta::default()
                },
                role_ref: RoleRef {
                    api_group: Some(GROUP_NAME.to_string()),
                    kind: "Role".to_string(),
                    name: role.to_string(),
                },
                subjects: None,
            },
        }
    }

    /// Names the binding differently from its role.
    pub fn named(mut self, name: &str) -> Self {
        self.binding.metadata.name = Some(name.to_string());
        self
    }

    pub fn users(mut self, users: &[&str]) -> Self {
        let subjects = self.binding.subjects.get_or_insert_with(Vec::new);
        subjects.extend(users.iter().map(|u| user_or_group("User", u)));
        self
    }

    pub fn service_accounts(mut self, namespace: &str, names: &[&str]) -> Self {
        let subjects = self.binding.subjects.get_or_insert_with(Vec::new);
        subjects.extend(names.iter().map(|n| service_account(namespace, n)));
        self
    }

    /// # Panics
    /// When no subject was added (see [`ClusterRoleBindingBuilder::binding`]).
    pub fn binding(self) -> RoleBinding {
        assert!(
            self.binding.subjects.as_ref().is_some_and(|s| !s.is_empty()),
            "bootstrap RoleBinding {:?} has no subjects",
            self.binding.metadata.name
        );
        self.binding
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(v: &[&str]) -> Option<Vec<String>> {
        Some(v.iter().map(|s| s.to_string()).collect())
    }

    #[test]
    fn lists_come_out_sorted_and_deduplicated() {
        let rule = new_rule(&["watch", "list", "get", "list"])
            .groups(&["apps", ""])
            .resources(&["pods", "deployments"])
            .resources(&["configmaps", "pods"])
            .rule();
        assert_eq!(rule.verbs, vec!["get", "list", "watch"]);
        assert_eq!(rule.api_groups, strings(&["", "apps"]));
        assert_eq!(rule.resources, strings(&["configmaps", "deployments", "pods"]));
        assert_eq!(rule.resource_names, None);
        assert_eq!(rule.non_resource_urls, None);
    }

    #[test]
    fn a_path_rule_names_no_group() {
        let rule = new_rule(&["get"]).urls(&["/version", "/healthz"]).rule();
        assert_eq!(rule.non_resource_urls, strings(&["/healthz", "/version"]));
        assert_eq!(rule.api_groups, None);
    }

    #[test]
    fn malformed_rules_are_refused() {
        let cases = [
            ("no verbs", new_rule(&[]).groups(&[""]).resources(&["pods"])),
            ("no groups", new_rule(&["get"]).resources(&["pods"])),
            ("nothing to act on", new_rule(&["get"]).groups(&[""])),
            ("path with a group", new_rule(&["get"]).groups(&[""]).urls(&["/healthz"])),
            ("create by name", new_rule(&["create"]).groups(&[""]).resources(&["pods"]).names(&["a"])),
            ("deletecollection by name", new_rule(&["deletecollection"]).groups(&[""]).resources(&["pods"]).names(&["a"])),
        ];
        for (case, builder) in cases {
            assert!(validate(&builder.rule).is_err(), "{case} was accepted");
        }
        // Watching one named object is how a component follows its own lease.
        let named_watch = new_rule(&["get", "list", "watch"]).groups(&[""]).resources(&["configmaps"]).names(&["a"]);
        assert_eq!(validate(&named_watch.rule), Ok(()));
    }

    #[test]
    #[should_panic(expected = "must have apiGroups")]
    fn rule_panics_on_a_malformed_rule() {
        new_rule(&["get"]).resources(&["pods"]).rule();
    }

    #[test]
    fn bindings_keep_subjects_in_the_order_given() {
        let binding = ClusterRoleBindingBuilder::new("view")
            .users(&["alice"])
            .groups(&["devs"])
            .service_accounts("kube-system", &["robot"])
            .binding();
        let subjects = binding.subjects.unwrap_or_default();
        let kinds: Vec<_> = subjects.iter().map(|s| (s.kind.as_str(), s.name.as_str())).collect();
        assert_eq!(kinds, [("User", "alice"), ("Group", "devs"), ("ServiceAccount", "robot")]);
        assert_eq!(subjects[2].api_group, None);
        assert_eq!(subjects[2].namespace.as_deref(), Some("kube-system"));
        assert_eq!(binding.role_ref.kind, "ClusterRole");
    }

    #[test]
    #[should_panic(expected = "has no subjects")]
    fn a_binding_to_nobody_panics() {
        RoleBindingBuilder::new("reader", "kube-system").binding();
    }
}
