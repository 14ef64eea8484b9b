//! Mirrors pkg/registry/rbac: the resources of `rbac.authorization.k8s.io/v1` — Roles and
//! ClusterRoles (what may be done), RoleBindings and ClusterRoleBindings (who may do it), which
//! the RBAC authorizer reads from these resources' watch caches.
//!
//! Each is a plain object without a status, validated by the `api` crate
//! ([`api::rbac::validation`]); the bindings get the API groups their writer left out
//! ([`api::rbac::v1::defaults`]). A ClusterRole with an
//! `aggregationRule` has its `rules` written by the controller manager's ClusterRole aggregation
//! controller, not by its author.
//!
//! Implementation caveats:
//! - Writes are not checked for escalation (Kubernetes' `policybased` storage refuses a role
//!   holding a rule its writer does not hold, and a binding to a role its writer may not
//!   `bind`); that needs the authorizer.
//! - An update of a ClusterRole whose stored selectors hold a label value validation now
//!   refuses is refused too (Kubernetes lets such an old object be updated:
//!   `AllowInvalidLabelValueInSelector`).

pub mod clusterrole;
pub mod clusterrolebinding;
pub mod role;
pub mod rolebinding;
pub mod reconciliation;
