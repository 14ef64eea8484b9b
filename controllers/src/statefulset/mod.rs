//! Mirrors pkg/controller/statefulset: the StatefulSet controller — its watches, queue and
//! claims ([`stateful_set`]), the update algorithm ([`stateful_set_control`]), its pod writes
//! and their events ([`stateful_pod_control`]), its status writes
//! ([`stateful_set_status_updater`]) and the identity, revision and state helpers they share
//! ([`stateful_set_utils`]).

pub mod stateful_pod_control;
pub mod stateful_set;
pub mod stateful_set_control;
pub mod stateful_set_status_updater;
pub mod stateful_set_utils;

pub use stateful_set::StatefulSetController;
