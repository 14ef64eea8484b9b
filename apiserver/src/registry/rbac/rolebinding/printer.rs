//! Mirrors printRoleBinding in pkg/printers/internalversion/printers.go: NAME, ROLE (the
//! `roleRef` as `Kind/name`: `ClusterRole/view`, `Role/pod-reader`), AGE, and with `-o wide`
//! USERS, GROUPS and SERVICEACCOUNTS (`namespace/name`), each comma-separated.

use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::printers::fields::{age, arr_at, name, str_at};
use crate::printers::tablegenerator::{Column, Printer, age_col, col, name_col};

pub struct RoleBindingPrinter;

impl Printer for RoleBindingPrinter {
    fn columns(&self) -> Vec<Column> {
        binding_columns(
            "RoleRef can reference a Role in the current namespace or a ClusterRole in the global namespace. If the RoleRef cannot be resolved, the Authorizer must return an error.",
            ["Users in the roleBinding", "Groups in the roleBinding", "ServiceAccounts in the roleBinding"],
        )
    }

    fn row(&self, obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
        binding_row(obj, now)
    }
}

/// The columns both bindings print, with their own descriptions of the role and subject columns.
pub fn binding_columns(role_ref: &'static str, subjects: [&'static str; 3]) -> Vec<Column> {
    let [users, groups, service_accounts] = subjects;
    vec![
        name_col(),
        col("Role", "string", role_ref, 0),
        age_col(),
        col("Users", "string", users, 1),
        col("Groups", "string", groups, 1),
        col("ServiceAccounts", "string", service_accounts, 1),
    ]
}

/// One binding's cells (printRoleBinding and printClusterRoleBinding print alike).
pub fn binding_row(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let role_ref = format!("{}/{}", str_at(obj, &["roleRef", "kind"]), str_at(obj, &["roleRef", "name"]));
    let subjects = api::rbac::helpers::subjects_strings(arr_at(obj, &["subjects"]));
    vec![
        name(obj).into(),
        role_ref.into(),
        age(obj, now).into(),
        subjects.users.join(", ").into(),
        subjects.groups.join(", ").into(),
        subjects.service_accounts.join(", ").into(),
    ]
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::RoleBindingPrinter;
    use crate::printers::tablegenerator::testing::{assert_printer, object};

    #[test]
    fn role_binding_cells() {
        let to_view = object(json!({
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
            "subjects": [
                {"kind": "ServiceAccount", "name": "sa", "namespace": "ns"},
                {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "u"},
                {"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "g"},
                {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "v"},
            ],
        }));
        let to_role = object(json!({"roleRef": {"kind": "Role", "name": "pod-reader"}}));
        assert_printer(
            &RoleBindingPrinter,
            &[
                (to_view, vec![json!("x"), json!("ClusterRole/view"), json!("10s"), json!("u, v"), json!("g"), json!("ns/sa")]),
                (to_role, vec![json!("x"), json!("Role/pod-reader"), json!("10s"), json!(""), json!(""), json!("")]),
            ],
            &[("Name", 0), ("Role", 0), ("Age", 0), ("Users", 1), ("Groups", 1), ("ServiceAccounts", 1)],
        );
    }
}
