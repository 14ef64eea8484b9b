//! Mirrors pkg/apis/rbac: the four kinds of `rbac.authorization.k8s.io/v1` — Role and ClusterRole
//! (lists of rules: verbs on resources, or on non-resource URLs), RoleBinding and
//! ClusterRoleBinding (a role granted to users, groups and service accounts): their defaulting
//! ([`v1::defaults`]), validation ([`validation`]) and `SubjectsStrings` ([`helpers`]).

pub mod helpers;
pub mod v1;
pub mod validation;

/// `rbac.GroupName`: the API group of the four kinds, and the `apiGroup` a binding's `roleRef`
/// and its User and Group subjects must name.
pub const GROUP_NAME: &str = "rbac.authorization.k8s.io";

/// The kinds of subject a binding may name (`rbac.UserKind`, `GroupKind`, `ServiceAccountKind`).
pub const USER_KIND: &str = "User";
pub const GROUP_KIND: &str = "Group";
pub const SERVICE_ACCOUNT_KIND: &str = "ServiceAccount";
