//! Mirrors plugin/pkg/auth/authorizer/rbac: role-based access control. Roles and ClusterRoles hold
//! rules (verbs on resources, or on non-resource paths); RoleBindings and ClusterRoleBindings give
//! a role's rules to subjects (users, groups, service accounts).
//!
//! - [`rule`]: the rules a user holds in a namespace, from the bindings that name it, and the
//!   rules of the role a binding names (`DefaultRuleResolver`, which the escalation checks of
//!   `registry::rbac::escalation` ask too).
//! - [`rbac`]: the authorizer: a request is allowed when one of those rules covers it.
//! - [`policy_comparator`]: whether one set of rules grants everything another does.
//! - [`listers`]: where the rules come from: the watch caches of the four resources.
//! - [`bootstrappolicy`]: the default roles and bindings every cluster starts with.

pub mod bootstrappolicy;
pub mod listers;
pub mod policy_comparator;
pub mod rbac;
pub mod rule;
