//! Mirrors printClusterRoleBinding in pkg/printers/internalversion/printers.go: the columns and
//! cells of a RoleBinding ([`super::super::rolebinding::printer`]), described as a
//! ClusterRoleBinding's.

use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::printers::tablegenerator::{Column, Printer};
use crate::registry::rbac::rolebinding::printer::{binding_columns, binding_row};

pub struct ClusterRoleBindingPrinter;

impl Printer for ClusterRoleBindingPrinter {
    fn columns(&self) -> Vec<Column> {
        binding_columns(
            "RoleRef can only reference a ClusterRole in the global namespace. If the RoleRef cannot be resolved, the Authorizer must return an error.",
            ["Users in the clusterRoleBinding", "Groups in the clusterRoleBinding", "ServiceAccounts in the clusterRoleBinding"],
        )
    }

    fn row(&self, obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
        binding_row(obj, now)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::ClusterRoleBindingPrinter;
    use crate::printers::tablegenerator::Printer;
    use crate::printers::tablegenerator::testing::{assert_printer, object};

    #[test]
    fn cluster_role_binding_cells() {
        let admins = object(json!({
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
            "subjects": [{"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "system:masters"}],
        }));
        assert_printer(
            &ClusterRoleBindingPrinter,
            &[(admins, vec![json!("x"), json!("ClusterRole/cluster-admin"), json!("10s"), json!(""), json!("system:masters"), json!("")])],
            &[("Name", 0), ("Role", 0), ("Age", 0), ("Users", 1), ("Groups", 1), ("ServiceAccounts", 1)],
        );
        assert_eq!(ClusterRoleBindingPrinter.columns()[3].description, "Users in the clusterRoleBinding");
    }
}
