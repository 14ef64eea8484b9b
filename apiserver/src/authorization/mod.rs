//! Mirrors k8s.io/apiserver/pkg/authorization and pkg/kubeapiserver/authorizer: who may do what.
//!
//! Once a request's user is known ([`crate::authentication`]), the authorizers of
//! `--authorization-mode` are asked in order whether it may do what the request asks
//! ([`authorizer::Attributes`]: verb, API group, resource, subresource, namespace, name; or verb
//! and path): the first that allows or denies decides ([`union`]); if none does, the request is
//! forbidden (403, [`crate::filters::authorization`]). Before them all, members of
//! `system:masters` are allowed everything ([`authorizerfactory::PrivilegedGroups`]). An
//! authorizer can also list the rules a user holds ([`authorizer::Authorizer::rules_for`]), which
//! SelfSubjectRulesReview answers with (`kubectl auth can-i --list`).
//!
//! Modes: `AlwaysAllow` (kube-apiserver's default), `AlwaysDeny`, `RBAC` ([`rbac`]: roles and
//! bindings, with the default policy reconciled at start), `Node` ([`node`]: a node's agent may
//! read the secrets, configmaps and service account tokens of the pods bound to it, and do what
//! every node does; usually first: `--authorization-mode=Node,RBAC`, with the NodeRestriction
//! admission plugin narrowing its writes to its own node and pods). `kubelab up` and the lab run
//! with `RBAC`.

pub mod authorizer;
pub mod authorizerfactory;
pub mod config;
pub mod node;
pub mod rbac;
pub mod union;
