//! Mirrors pkg/apis/rbac/validation/validation.go: what makes a Role, ClusterRole, RoleBinding or
//! ClusterRoleBinding valid, as a list of field errors.
//!
//! RBAC checks shape, not meaning. A name need only fit in a URL path segment
//! ([`validate_rbac_name`]), so `system:controller:job` is a valid role name. A rule needs verbs,
//! and either non-resource URLs (in a ClusterRole only) or API groups and resources
//! ([`validate_policy_rule`]). A binding's `roleRef` names a Role or ClusterRole of this group
//! (a ClusterRoleBinding only a ClusterRole: a Role lives in one namespace and cannot be granted
//! cluster-wide), and never changes once written: a binding grants what its role grants, so
//! pointing it elsewhere would silently change who may do what; delete and re-create it instead.
//! Each subject is a User or Group of this group, or a ServiceAccount of the core group with a
//! namespace (a RoleBinding may leave the namespace out: it means the binding's own).
//!
//! Whether the roles a binding names exist, and whether the writer may grant them (RBAC's
//! escalation checks), is not validation's business: a binding to a missing role grants nothing.
//!
//! Messages are worded as Kubernetes' are, including how Go prints a value it was given as a
//! struct or a list (`rbac.RoleRef{APIGroup:"…", Kind:"…", Name:"…"}`, `[]string{"/healthz"}`):
//! kubectl shows them verbatim.
//!
//! Implementation caveats:
//! - An aggregation rule's selector is checked by converting it (one error naming the selector,
//!   [`validate_label_selector`]); Kubernetes' `ValidateLabelSelector` also names the field inside
//!   it (`…matchExpressions[0].operator`), then adds "invalid label selector." for the selector.
//! - An update is checked as a create is, once, as Kubernetes does since 1.34 (its strategies
//!   ran each check twice before, listing each error twice).

use apimachinery::validation::{FieldError, is_dns1123_subdomain, is_valid_path_segment_name};
use serde_json::{Value, json};

use super::{GROUP_KIND, GROUP_NAME, SERVICE_ACCOUNT_KIND, USER_KIND};
use crate::core::validation::{validate_label_selector, validate_object_meta};

/// ValidateRBACName: the name rule of the four kinds (and of a `roleRef.name`), the path-segment
/// rule alone. Kubernetes ignores the `prefix` argument a name rule takes: a generateName is
/// checked as a name.
pub fn validate_rbac_name(name: &str) -> Vec<String> {
    is_valid_path_segment_name(name)
}

/// ValidateRole: metadata, and each rule as a namespaced rule.
pub fn validate_role(obj: &Value) -> Vec<FieldError> {
    let mut errs = validate_object_meta(obj, true, validate_rbac_name);
    errs.extend(validate_rules(obj, true));
    errs
}

/// ValidateRoleUpdate: the new Role is valid (the metadata rules of an update are the API
/// server's).
pub fn validate_role_update(new: &Value, _old: &Value) -> Vec<FieldError> {
    validate_role(new)
}

/// ValidateClusterRole: metadata, each rule (non-resource URLs allowed), and an aggregation rule,
/// if there is one, with at least one selector, each a valid label selector.
pub fn validate_cluster_role(obj: &Value) -> Vec<FieldError> {
    let mut errs = validate_object_meta(obj, false, validate_rbac_name);
    errs.extend(validate_rules(obj, false));
    if let Some(rule) = obj.get("aggregationRule").filter(|v| !v.is_null()) {
        let selectors = list(rule, "clusterRoleSelectors");
        if selectors.is_empty() {
            errs.push(FieldError::required(
                "aggregationRule.clusterRoleSelectors",
                "at least one clusterRoleSelector required if aggregationRule is non-nil",
            ));
        }
        for (i, selector) in selectors.iter().enumerate() {
            if let Err(e) = validate_label_selector(Some(selector), &format!("aggregationRule.clusterRoleSelectors[{i}]")) {
                errs.push(e);
            }
        }
    }
    errs
}

/// ValidateClusterRoleUpdate: the new ClusterRole is valid.
pub fn validate_cluster_role_update(new: &Value, _old: &Value) -> Vec<FieldError> {
    validate_cluster_role(new)
}

fn validate_rules(obj: &Value, namespaced: bool) -> Vec<FieldError> {
    list(obj, "rules").iter().enumerate().flat_map(|(i, rule)| validate_policy_rule(rule, namespaced, &format!("rules[{i}]"))).collect()
}

/// ValidatePolicyRule: a rule has verbs, and is either a non-resource rule (URLs only, and only
/// in a ClusterRole: a URL belongs to no namespace) or a resource rule (API groups and
/// resources). Names `resourceNames` may narrow it to.
pub fn validate_policy_rule(rule: &Value, namespaced: bool, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if list(rule, "verbs").is_empty() {
        errs.push(FieldError::required(&format!("{path}.verbs"), "verbs must contain at least one value"));
    }
    let urls = list(rule, "nonResourceURLs");
    if !urls.is_empty() {
        let field = format!("{path}.nonResourceURLs");
        if namespaced {
            errs.push(FieldError::invalid_shown(&field, &go_string_slice(urls), "namespaced rules cannot apply to non-resource URLs"));
        }
        if ["apiGroups", "resources", "resourceNames"].iter().any(|k| !list(rule, k).is_empty()) {
            errs.push(FieldError::invalid_shown(&field, &go_string_slice(urls), "rules cannot apply to both regular resources and non-resource URLs"));
        }
        return errs;
    }
    if list(rule, "apiGroups").is_empty() {
        errs.push(FieldError::required(&format!("{path}.apiGroups"), "resource rules must supply at least one api group"));
    }
    if list(rule, "resources").is_empty() {
        errs.push(FieldError::required(&format!("{path}.resources"), "resource rules must supply at least one resource"));
    }
    errs
}

/// ValidateRoleBinding: metadata, a `roleRef` to a Role or ClusterRole of this group, and each
/// subject (a ServiceAccount may leave its namespace to the binding's).
pub fn validate_role_binding(obj: &Value) -> Vec<FieldError> {
    validate_binding(obj, true)
}

/// ValidateRoleBindingUpdate: the new binding is valid and its `roleRef` is the old one.
pub fn validate_role_binding_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let mut errs = validate_role_binding(new);
    errs.extend(validate_role_ref_unchanged(new, old));
    errs
}

/// ValidateClusterRoleBinding: as [`validate_role_binding`], but the role must be a ClusterRole
/// and a ServiceAccount subject must say its namespace.
pub fn validate_cluster_role_binding(obj: &Value) -> Vec<FieldError> {
    validate_binding(obj, false)
}

/// ValidateClusterRoleBindingUpdate: the new binding is valid and its `roleRef` is the old one.
pub fn validate_cluster_role_binding_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let mut errs = validate_cluster_role_binding(new);
    errs.extend(validate_role_ref_unchanged(new, old));
    errs
}

/// Both bindings' checks (Kubernetes writes them out twice), in Kubernetes' order: metadata,
/// `roleRef.apiGroup`, `roleRef.kind`, `roleRef.name`, then the subjects.
fn validate_binding(obj: &Value, namespaced: bool) -> Vec<FieldError> {
    let mut errs = validate_object_meta(obj, namespaced, validate_rbac_name);
    let role_ref = obj.get("roleRef").unwrap_or(&Value::Null);
    let api_group = str_of(role_ref, "apiGroup");
    if api_group != GROUP_NAME {
        errs.push(FieldError::not_supported("roleRef.apiGroup", &json!(api_group), &[GROUP_NAME]));
    }
    let kinds: &[&str] = if namespaced { &["Role", "ClusterRole"] } else { &["ClusterRole"] };
    let kind = str_of(role_ref, "kind");
    if !kinds.contains(&kind) {
        errs.push(FieldError::not_supported("roleRef.kind", &json!(kind), kinds));
    }
    let name = str_of(role_ref, "name");
    if name.is_empty() {
        errs.push(FieldError::required("roleRef.name", ""));
    } else {
        for msg in validate_rbac_name(name) {
            errs.push(FieldError::invalid("roleRef.name", &json!(name), &msg));
        }
    }
    for (i, subject) in list(obj, "subjects").iter().enumerate() {
        errs.extend(validate_role_binding_subject(subject, namespaced, &format!("subjects[{i}]")));
    }
    errs
}

/// ValidateRoleBindingSubject: a subject has a name and is one of the three kinds — a
/// ServiceAccount (a valid service account name, the core group, a namespace unless the binding
/// is namespaced), a User or a Group (this group; any name: the authenticator decides them).
pub fn validate_role_binding_subject(subject: &Value, namespaced: bool, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let name = str_of(subject, "name");
    if name.is_empty() {
        errs.push(FieldError::required(&format!("{path}.name"), ""));
    }
    let api_group = str_of(subject, "apiGroup");
    match str_of(subject, "kind") {
        SERVICE_ACCOUNT_KIND => {
            if !name.is_empty() {
                for msg in is_dns1123_subdomain(name) {
                    errs.push(FieldError::invalid(&format!("{path}.name"), &json!(name), &msg));
                }
            }
            if !api_group.is_empty() {
                errs.push(FieldError::not_supported(&format!("{path}.apiGroup"), &json!(api_group), &[""]));
            }
            if !namespaced && str_of(subject, "namespace").is_empty() {
                errs.push(FieldError::required(&format!("{path}.namespace"), ""));
            }
        }
        USER_KIND | GROUP_KIND => {
            if api_group != GROUP_NAME {
                errs.push(FieldError::not_supported(&format!("{path}.apiGroup"), &json!(api_group), &[GROUP_NAME]));
            }
        }
        other => {
            errs.push(FieldError::not_supported(&format!("{path}.kind"), &json!(other), &[SERVICE_ACCOUNT_KIND, USER_KIND, GROUP_KIND]));
        }
    }
    errs
}

/// The `roleRef` of an update must be the old one; the error shows the new one as Go prints the
/// internal `rbac.RoleRef` struct.
fn validate_role_ref_unchanged(new: &Value, old: &Value) -> Vec<FieldError> {
    let fields = |obj: &Value| {
        let r = obj.get("roleRef").unwrap_or(&Value::Null);
        [str_of(r, "apiGroup").to_string(), str_of(r, "kind").to_string(), str_of(r, "name").to_string()]
    };
    let role_ref = fields(new);
    if role_ref == fields(old) {
        return Vec::new();
    }
    let [api_group, kind, name] = role_ref;
    let shown = format!("rbac.RoleRef{{APIGroup:{}, Kind:{}, Name:{}}}", json!(api_group), json!(kind), json!(name));
    vec![FieldError::invalid_shown("roleRef", &shown, "cannot change roleRef")]
}

/// Go's `%#v` of a `[]string`: `[]string{"/healthz", "/metrics"}`.
fn go_string_slice(items: &[Value]) -> String {
    let quoted: Vec<String> = items.iter().map(|v| json!(v.as_str().unwrap_or_default()).to_string()).collect();
    format!("[]string{{{}}}", quoted.join(", "))
}

/// A list field, absent or `null` read as empty (Go's nil slice).
fn list<'a>(obj: &'a Value, key: &str) -> &'a [Value] {
    obj.get(key).and_then(Value::as_array).map_or(&[], Vec::as_slice)
}

/// A string field, absent read as "" (Go's zero value).
fn str_of<'a>(obj: &'a Value, key: &str) -> &'a str {
    obj.get(key).and_then(Value::as_str).unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apps::validation::tests::found;
    use apimachinery::validation::FieldErrorReason::{Invalid, NotSupported, Required};

    fn role(rules: Value) -> Value {
        json!({"metadata": {"name": "pod-reader", "namespace": "default"}, "rules": rules})
    }

    fn cluster_role(fields: Value) -> Value {
        let mut obj = json!({"metadata": {"name": "system:aggregate-to-view"}});
        obj.as_object_mut().expect("object").extend(fields.as_object().expect("fields").clone());
        obj
    }

    fn binding(namespace: Option<&str>, role_ref: Value, subjects: Value) -> Value {
        let mut meta = json!({"name": "read-pods"});
        if let Some(ns) = namespace {
            meta["namespace"] = json!(ns);
        }
        json!({"metadata": meta, "roleRef": role_ref, "subjects": subjects})
    }

    fn role_ref(kind: &str, name: &str) -> Value {
        json!({"apiGroup": GROUP_NAME, "kind": kind, "name": name})
    }

    fn user(name: &str) -> Value {
        json!({"kind": "User", "apiGroup": GROUP_NAME, "name": name})
    }

    #[test]
    fn valid_roles_pass() {
        for rules in [
            json!([]),
            json!(null),
            json!([{"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods"]}]),
            json!([{"verbs": ["get"], "apiGroups": ["apps"], "resources": ["deployments"], "resourceNames": ["web"]}]),
            json!([{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}]),
        ] {
            assert_eq!(validate_role(&role(rules.clone())), vec![], "{rules}");
        }
        let named = json!({"metadata": {"name": "system:controller:job", "namespace": "kube-system"}});
        assert_eq!(validate_role(&named), vec![]);
        let non_resource = cluster_role(json!({"rules": [{"verbs": ["get"], "nonResourceURLs": ["/healthz", "/version/*"]}]}));
        assert_eq!(validate_cluster_role(&non_resource), vec![]);
        let aggregated = cluster_role(json!({"aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"rbac.example.com/aggregate-to-monitoring": "true"}}]}}));
        assert_eq!(validate_cluster_role(&aggregated), vec![]);
    }

    #[test]
    fn invalid_rules() {
        // (rule, in a Role?, the errors, the first message)
        let cases = [
            (json!({"apiGroups": [""], "resources": ["pods"]}), true, vec![("rules[0].verbs", Required)], "Required value: verbs must contain at least one value"),
            (json!({"verbs": ["get"], "resources": ["pods"]}), true, vec![("rules[0].apiGroups", Required)], "Required value: resource rules must supply at least one api group"),
            (json!({"verbs": ["get"], "apiGroups": [""], "resources": []}), false, vec![("rules[0].resources", Required)], "Required value: resource rules must supply at least one resource"),
            (json!({"verbs": [], "apiGroups": null}), false, vec![("rules[0].verbs", Required), ("rules[0].apiGroups", Required), ("rules[0].resources", Required)], "Required value: verbs must contain at least one value"),
            (json!({"verbs": ["get"], "nonResourceURLs": ["/healthz"]}), true, vec![("rules[0].nonResourceURLs", Invalid)], "Invalid value: []string{\"/healthz\"}: namespaced rules cannot apply to non-resource URLs"),
            (
                json!({"verbs": ["get"], "nonResourceURLs": ["/healthz", "/metrics"], "resources": ["pods"]}),
                false,
                vec![("rules[0].nonResourceURLs", Invalid)],
                "Invalid value: []string{\"/healthz\", \"/metrics\"}: rules cannot apply to both regular resources and non-resource URLs",
            ),
            (json!({"verbs": ["get"], "nonResourceURLs": ["/x"], "resourceNames": ["a"]}), true, vec![("rules[0].nonResourceURLs", Invalid), ("rules[0].nonResourceURLs", Invalid)], "Invalid value: []string{\"/x\"}: namespaced rules cannot apply to non-resource URLs"),
        ];
        for (rule, namespaced, want, message) in cases {
            let errs = if namespaced { validate_role(&role(json!([rule]))) } else { validate_cluster_role(&cluster_role(json!({"rules": [rule]}))) };
            assert_eq!(found(&errs), want, "{rule}");
            assert_eq!(errs[0].message, message, "{rule}");
        }
    }

    #[test]
    fn names_need_only_be_path_segments() {
        for (name, message) in [("a%b", "Invalid value: \"a%b\": may not contain '%'"), ("..", "Invalid value: \"..\": may not be '..'")] {
            let errs = validate_role(&json!({"metadata": {"name": name, "namespace": "default"}}));
            assert_eq!(found(&errs), vec![("metadata.name", Invalid)]);
            assert_eq!(errs[0].message, message);
        }
        let errs = validate_cluster_role(&json!({"metadata": {"name": "view", "namespace": "default"}}));
        assert_eq!(found(&errs), vec![("metadata.namespace", apimachinery::validation::FieldErrorReason::Forbidden)]);
        let errs = validate_role_binding(&binding(Some("default"), role_ref("Role", "a/b"), json!([])));
        assert_eq!(found(&errs), vec![("roleRef.name", Invalid)]);
        assert_eq!(errs[0].message, "Invalid value: \"a/b\": may not contain '/'");
    }

    #[test]
    fn aggregation_rules_need_valid_selectors() {
        for rule in [json!({}), json!({"clusterRoleSelectors": []})] {
            let errs = validate_cluster_role(&cluster_role(json!({"aggregationRule": rule})));
            assert_eq!(found(&errs), vec![("aggregationRule.clusterRoleSelectors", Required)]);
            assert_eq!(errs[0].message, "Required value: at least one clusterRoleSelector required if aggregationRule is non-nil");
        }
        let bad = json!({"clusterRoleSelectors": [{"matchLabels": {"a": "b"}}, {"matchExpressions": [{"key": "a", "operator": "Around"}]}]});
        let errs = validate_cluster_role(&cluster_role(json!({"aggregationRule": bad})));
        assert_eq!(found(&errs), vec![("aggregationRule.clusterRoleSelectors[1]", Invalid)]);
        assert_eq!(validate_cluster_role(&cluster_role(json!({"aggregationRule": null}))), vec![]);
    }

    #[test]
    fn valid_bindings_pass() {
        let sa_here = json!({"kind": "ServiceAccount", "name": "default"});
        let sa_there = json!({"kind": "ServiceAccount", "name": "builder", "namespace": "ci", "apiGroup": ""});
        let group = json!({"kind": "Group", "apiGroup": GROUP_NAME, "name": "system:authenticated"});
        let subjects = json!([user("jane"), group, sa_here, sa_there]);
        for kind in ["Role", "ClusterRole"] {
            assert_eq!(validate_role_binding(&binding(Some("default"), role_ref(kind, "pod-reader"), subjects.clone())), vec![], "{kind}");
        }
        let cluster_subjects = json!([user("jane"), {"kind": "ServiceAccount", "name": "builder", "namespace": "ci"}]);
        assert_eq!(validate_cluster_role_binding(&binding(None, role_ref("ClusterRole", "view"), cluster_subjects)), vec![]);
        assert_eq!(validate_cluster_role_binding(&binding(None, role_ref("ClusterRole", "view"), json!(null))), vec![]);
    }

    #[test]
    fn invalid_role_refs() {
        // (roleRef, for a ClusterRoleBinding?, the errors, the first message)
        let cases = [
            (role_ref("Role", "x"), true, vec![("roleRef.kind", NotSupported)], "Unsupported value: \"Role\": supported values: \"ClusterRole\""),
            (role_ref("Group", "x"), false, vec![("roleRef.kind", NotSupported)], "Unsupported value: \"Group\": supported values: \"Role\", \"ClusterRole\""),
            (json!({"apiGroup": "", "kind": "ClusterRole", "name": "view"}), false, vec![("roleRef.apiGroup", NotSupported)], "Unsupported value: \"\": supported values: \"rbac.authorization.k8s.io\""),
            (role_ref("ClusterRole", ""), true, vec![("roleRef.name", Required)], "Required value"),
            (json!(null), false, vec![("roleRef.apiGroup", NotSupported), ("roleRef.kind", NotSupported), ("roleRef.name", Required)], "Unsupported value: \"\": supported values: \"rbac.authorization.k8s.io\""),
        ];
        for (role_ref, cluster, want, message) in cases {
            let errs = if cluster {
                validate_cluster_role_binding(&binding(None, role_ref.clone(), json!([])))
            } else {
                validate_role_binding(&binding(Some("default"), role_ref.clone(), json!([])))
            };
            assert_eq!(found(&errs), want, "{role_ref}");
            assert_eq!(errs[0].message, message, "{role_ref}");
        }
    }

    #[test]
    fn invalid_subjects() {
        // (subject, in a ClusterRoleBinding?, the errors, the first message)
        let cases = [
            (json!({"kind": "User", "name": "jane"}), false, vec![("subjects[0].apiGroup", NotSupported)], "Unsupported value: \"\": supported values: \"rbac.authorization.k8s.io\""),
            (json!({"kind": "Group", "apiGroup": "", "name": "devs"}), true, vec![("subjects[0].apiGroup", NotSupported)], "Unsupported value: \"\": supported values: \"rbac.authorization.k8s.io\""),
            (json!({"kind": "User", "apiGroup": GROUP_NAME}), false, vec![("subjects[0].name", Required)], "Required value"),
            (json!({"kind": "ServiceAccount", "name": "builder"}), true, vec![("subjects[0].namespace", Required)], "Required value"),
            (json!({"kind": "ServiceAccount", "name": "builder", "namespace": "ci", "apiGroup": GROUP_NAME}), false, vec![("subjects[0].apiGroup", NotSupported)], "Unsupported value: \"rbac.authorization.k8s.io\": supported values: \"\""),
            (
                json!({"kind": "ServiceAccount", "name": "Builder", "namespace": "ci"}),
                false,
                vec![("subjects[0].name", Invalid)],
                "Invalid value: \"Builder\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
            ),
            (json!({"kind": "ServiceAccount", "namespace": "ci"}), false, vec![("subjects[0].name", Required)], "Required value"),
            (json!({"kind": "Robot", "name": "r2"}), false, vec![("subjects[0].kind", NotSupported)], "Unsupported value: \"Robot\": supported values: \"ServiceAccount\", \"User\", \"Group\""),
        ];
        for (subject, cluster, want, message) in cases {
            let errs = if cluster {
                validate_cluster_role_binding(&binding(None, role_ref("ClusterRole", "view"), json!([subject])))
            } else {
                validate_role_binding(&binding(Some("default"), role_ref("ClusterRole", "view"), json!([subject])))
            };
            assert_eq!(found(&errs), want, "{subject}");
            assert_eq!(errs[0].message, message, "{subject}");
        }
    }

    #[test]
    fn role_ref_cannot_change() {
        let old = binding(Some("default"), role_ref("ClusterRole", "view"), json!([user("jane")]));
        let more_subjects = binding(Some("default"), role_ref("ClusterRole", "view"), json!([user("jane"), user("joe")]));
        assert_eq!(validate_role_binding_update(&more_subjects, &old), vec![]);

        let edit = binding(Some("default"), role_ref("ClusterRole", "edit"), json!([user("jane")]));
        let errs = validate_role_binding_update(&edit, &old);
        assert_eq!(found(&errs), vec![("roleRef", Invalid)]);
        assert_eq!(errs[0].message, "Invalid value: rbac.RoleRef{APIGroup:\"rbac.authorization.k8s.io\", Kind:\"ClusterRole\", Name:\"edit\"}: cannot change roleRef");

        let to_role = binding(Some("default"), role_ref("Role", "view"), json!([user("jane")]));
        assert_eq!(found(&validate_role_binding_update(&to_role, &old)), vec![("roleRef", Invalid)]);

        let old = binding(None, role_ref("ClusterRole", "view"), json!([]));
        let new = binding(None, role_ref("ClusterRole", "admin"), json!([]));
        let errs = validate_cluster_role_binding_update(&new, &old);
        assert_eq!(found(&errs), vec![("roleRef", Invalid)]);
        assert_eq!(errs[0].message, "Invalid value: rbac.RoleRef{APIGroup:\"rbac.authorization.k8s.io\", Kind:\"ClusterRole\", Name:\"admin\"}: cannot change roleRef");
        assert_eq!(validate_cluster_role_binding_update(&old, &old), vec![]);
    }

    #[test]
    fn role_updates_are_validated_as_creates() {
        let old = role(json!([{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}]));
        let new = role(json!([{"verbs": ["get", "watch"], "apiGroups": [""], "resources": ["pods", "pods/log"]}]));
        assert_eq!(validate_role_update(&new, &old), vec![]);
        let bad = role(json!([{"apiGroups": [""], "resources": ["pods"]}]));
        assert_eq!(found(&validate_role_update(&bad, &old)), vec![("rules[0].verbs", Required)]);
        let old = cluster_role(json!({}));
        let bad = cluster_role(json!({"aggregationRule": {}}));
        assert_eq!(found(&validate_cluster_role_update(&bad, &old)), vec![("aggregationRule.clusterRoleSelectors", Required)]);
    }
}
