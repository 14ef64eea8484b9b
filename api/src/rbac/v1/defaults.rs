//! Mirrors pkg/apis/rbac/v1/defaults.go: the `SetDefaults_*` functions of the rbac/v1 kinds.
//!
//! Only the API groups a binding's writer may leave out are filled in: a `roleRef` can name no
//! other group than RBAC's own, a User or Group subject is RBAC's, a ServiceAccount the core
//! group's. A group that is set, even a wrong one, is left for validation to refuse.

use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, RoleBinding, RoleRef, Subject};

use crate::rbac::{GROUP_KIND, GROUP_NAME, SERVICE_ACCOUNT_KIND, USER_KIND};

/// SetDefaults_RoleBinding, with SetDefaults_Subject on each subject (what the generated
/// SetObjectDefaults_RoleBinding runs): the `roleRef` in the RBAC group.
pub fn set_defaults_role_binding(rb: &mut RoleBinding) {
    default_role_ref_group(&mut rb.role_ref);
    rb.subjects.iter_mut().flatten().for_each(set_defaults_subject);
}

/// SetDefaults_ClusterRoleBinding, with SetDefaults_Subject on each subject.
pub fn set_defaults_cluster_role_binding(crb: &mut ClusterRoleBinding) {
    default_role_ref_group(&mut crb.role_ref);
    crb.subjects.iter_mut().flatten().for_each(set_defaults_subject);
}

/// The `roleRef`'s group, when left out or empty: RBAC's own.
fn default_role_ref_group(role_ref: &mut RoleRef) {
    if role_ref.api_group.as_deref().unwrap_or_default().is_empty() {
        role_ref.api_group = Some(GROUP_NAME.to_string());
    }
}

/// SetDefaults_Subject: a subject without an `apiGroup` gets its kind's — RBAC's for a User or a
/// Group, the core group ("") for a ServiceAccount. Another kind is left alone.
pub fn set_defaults_subject(s: &mut Subject) {
    if s.api_group.as_deref().unwrap_or_default().is_empty() {
        match s.kind.as_str() {
            // The core group is Go's empty string, which its JSON (`omitempty`) leaves out.
            SERVICE_ACCOUNT_KIND => s.api_group = None,
            USER_KIND | GROUP_KIND => s.api_group = Some(GROUP_NAME.to_string()),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn binding(v: Value) -> RoleBinding {
        serde_json::from_value(v).expect("a RoleBinding")
    }

    #[test]
    fn groups_left_out_are_filled_in() {
        let mut rb = binding(json!({
            "metadata": {"name": "b"},
            "roleRef": {"kind": "ClusterRole", "name": "view"},
            "subjects": [
                {"kind": "User", "name": "jane"},
                {"kind": "Group", "name": "devs", "apiGroup": ""},
                {"kind": "ServiceAccount", "name": "default", "namespace": "ci"},
                {"kind": "ServiceAccount", "name": "builder", "namespace": "ci", "apiGroup": ""},
                {"kind": "Robot", "name": "r2"},
                {"kind": "User", "name": "joe", "apiGroup": "example.com"},
            ],
        }));
        set_defaults_role_binding(&mut rb);
        let got = serde_json::to_value(&rb).expect("json");
        assert_eq!(got["roleRef"]["apiGroup"], json!(GROUP_NAME));
        let groups: Vec<Value> = got["subjects"].as_array().expect("subjects").iter().map(|s| s.get("apiGroup").cloned().unwrap_or(Value::Null)).collect();
        assert_eq!(groups, vec![json!(GROUP_NAME), json!(GROUP_NAME), Value::Null, Value::Null, Value::Null, json!("example.com")]);

        let mut crb: ClusterRoleBinding = serde_json::from_value(json!({
            "metadata": {"name": "b"},
            "roleRef": {"apiGroup": "example.com", "kind": "ClusterRole", "name": "view"},
        }))
        .expect("a ClusterRoleBinding");
        set_defaults_cluster_role_binding(&mut crb);
        assert_eq!(crb.role_ref.api_group.as_deref(), Some("example.com"));
        assert_eq!(crb.subjects, None);
    }
}
