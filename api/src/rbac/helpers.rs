//! Mirrors pkg/apis/rbac/helpers.go: `SubjectsStrings`, a binding's subjects sorted by kind, as
//! `kubectl get rolebindings -o wide` and `kubectl describe` show them.

use serde_json::Value;

use super::{GROUP_KIND, SERVICE_ACCOUNT_KIND, USER_KIND};

/// A binding's subjects by kind, each in the order the binding lists them.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Subjects {
    pub users: Vec<String>,
    pub groups: Vec<String>,
    /// `<namespace>/<name>` (the namespace as written: a RoleBinding may leave it out).
    pub service_accounts: Vec<String>,
    /// Any other kind, as `<kind>/<namespace>/<name>` (validation refuses them; an object stored
    /// before it did could still hold one).
    pub others: Vec<String>,
}

/// SubjectsStrings: the `subjects` list of a binding, split by kind.
pub fn subjects_strings(subjects: &[Value]) -> Subjects {
    let mut out = Subjects::default();
    for subject in subjects {
        let field = |k: &str| subject.get(k).and_then(Value::as_str).unwrap_or("");
        let (kind, namespace, name) = (field("kind"), field("namespace"), field("name"));
        match kind {
            SERVICE_ACCOUNT_KIND => out.service_accounts.push(format!("{namespace}/{name}")),
            USER_KIND => out.users.push(name.to_string()),
            GROUP_KIND => out.groups.push(name.to_string()),
            _ => out.others.push(format!("{kind}/{namespace}/{name}")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn subjects_by_kind() {
        let subjects = json!([
            {"kind": "User", "name": "jane"},
            {"kind": "ServiceAccount", "name": "builder", "namespace": "ci"},
            {"kind": "Group", "name": "system:authenticated"},
            {"kind": "User", "name": "joe"},
            {"kind": "ServiceAccount", "name": "default"},
            {"kind": "Robot", "name": "r2", "namespace": "ns"},
        ]);
        let got = subjects_strings(subjects.as_array().expect("list"));
        assert_eq!(
            got,
            Subjects {
                users: vec!["jane".into(), "joe".into()],
                groups: vec!["system:authenticated".into()],
                service_accounts: vec!["ci/builder".into(), "/default".into()],
                others: vec!["Robot/ns/r2".into()],
            }
        );
        assert_eq!(subjects_strings(&[]), Subjects::default());
    }
}
