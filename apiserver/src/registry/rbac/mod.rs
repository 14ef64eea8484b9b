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
//! A write of any of them is checked for escalation first ([`escalation`], Kubernetes'
//! `policybased` storages): a role may hold only rules its writer holds, a binding may grant only
//! what its writer holds, unless the writer may `escalate` or `bind`.
//!
//! Implementation caveats:
//! - The escalation checks run on every update, even one that changes only what the garbage
//!   collector writes (Kubernetes lets those through: `IsOnlyMutatingGCFields`).
//! - An update of a ClusterRole whose stored selectors hold a label value validation now
//!   refuses is refused too (Kubernetes lets such an old object be updated:
//!   `AllowInvalidLabelValueInSelector`).

pub mod clusterrole;
pub mod clusterrolebinding;
pub mod escalation;
pub mod role;
pub mod rolebinding;
pub mod reconciliation;
