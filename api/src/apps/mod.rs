//! Mirrors pkg/apis/apps: the apps/v1 workload kinds' defaulting ([`v1::defaults`]) and
//! validation ([`validation`]) — Deployments, ReplicaSets, DaemonSets, StatefulSets and the
//! ControllerRevisions the last two record their history in.

pub mod v1;
pub mod validation;
